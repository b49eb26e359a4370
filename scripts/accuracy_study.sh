#!/usr/bin/env bash
# scripts/accuracy_study.sh — the accuracy study of issue 7 in one command (run it on the GPU machine):
# every attention policy at several lengths, then kascade vs the number of anchors and vs the Top-k
# fraction, with tables and plots.
#
#   scripts/accuracy_study.sh KASCADE_BINARY OUT_DIR
#
# Steps (STEPS picks them; default "main anchors topk"):
#   main     kascade eval over POLICIES x LENGTHS        -> OUT/main/{results.md,results.json,accuracy.png}
#   anchors  kascade at 10 % with ANCHOR_COUNTS anchors  -> OUT/anchors.{md,png} (+ one eval folder each)
#   topk     kascade with each of FRACTIONS               -> OUT/topk.{md,png}
# Environment (defaults in brackets): MODEL [models/kascade-tiny], DEVICE [cuda], TASKS [all],
# LENGTHS [4k,8k,16k,32k], SAMPLES [4], POLICIES [all ten; the oracle's prefill is one selection per
# query, ~5 s per 32K sample on an H200], SWEEP_LENGTHS [LENGTHS], ANCHOR_COUNTS
# [2 3 4 5 6 7 8], FRACTIONS [0.025 0.05 0.1 0.2], EXTRA (more `kascade eval` flags), ARCHIVE (a path: the whole
# OUT_DIR packed there as one .tar.xz at the end — a device call returns at most 8 files, the study writes ~50). The sweeps draw
# dense from the main step as the reference line when the main step ran at those lengths. Each step
# writes OUT/<step>.log; a summary table at the end; exit status non-zero when a step failed.
# The commands run go to OUT/commands.txt (docs/accuracy.md quotes them). Tested on the CPU with
# short settings by tests/scripts/test_accuracy_study.sh (CTest accuracy_study_script).
set -u
bin=${1:?KASCADE_BINARY}
out=${2:?OUT_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
model=${MODEL:-$here/models/kascade-tiny}
device=${DEVICE:-cuda}
tasks=${TASKS:-all}
lengths=${LENGTHS:-4k,8k,16k,32k}
samples=${SAMPLES:-4}
all_policies=dense,oracle,kascade,kascade-pooled,kascade-noremap,kascade-decode,streaming,quest,omnikv,lessismore
policies=${POLICIES:-$all_policies}
sweep_lengths=${SWEEP_LENGTHS:-$lengths}
anchor_counts=${ANCHOR_COUNTS:-2 3 4 5 6 7 8}
fractions=${FRACTIONS:-0.025 0.05 0.1 0.2}
mkdir -p "$out"
status=0
summary=()
run_eval() {  # run_eval NAME eval-args...
  local name=$1 t0=$SECONDS
  shift
  local cmd=("$bin" eval -m "$model" --device "$device" --tasks "$tasks" --samples "$samples" --no-progress "$@" ${EXTRA:-})
  echo "${cmd[*]}" >>"$out/commands.txt"
  "${cmd[@]}" >"$out/$name.log" 2>&1
  local rc=$?
  summary+=("$(printf '%-16s rc %-3s %5ss' "$name" "$rc" "$((SECONDS - t0))")")
  [[ $rc -eq 0 ]] || status=1
  return $rc
}
sweep() {  # sweep NAME FLAG VALUES...: one kascade run per value of FLAG, then the table and plot
  local name=$1 flag=$2 v
  shift 2
  local points=() reference=()
  for v in "$@"; do
    run_eval "$name-$v" --lengths "$sweep_lengths" --policies kascade "$flag" "$v" -o "$out/$name-$v" --no-plot \
      && points+=("$v=$out/$name-$v/results.json")
  done
  [[ -f "$out/main/results.json" ]] && reference=(--reference "dense=$out/main/results.json")
  python3 "$here/scripts/plot_sweep.py" --name "$name" --out "$out/$name" "${reference[@]}" "${points[@]}" \
    && cat "$out/$name.md" || status=1
}
for step in ${STEPS:-main anchors topk}; do
  case $step in
    main)
      run_eval main --lengths "$lengths" --policies "$policies" -o "$out/main" && tail -n 60 "$out/main/results.md" ;;
    anchors) sweep anchors --num-anchors $anchor_counts ;;
    topk) sweep topk --topk-fraction $fractions ;;
    *) echo "accuracy_study.sh: unknown step $step"; status=1 ;;
  esac
done
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
if [[ -n "${ARCHIVE:-}" ]]; then
  XZ_OPT=-6 tar cJf "$ARCHIVE" -C "$out" . || { echo "accuracy_study.sh: cannot write $ARCHIVE"; status=1; }
fi
exit $status
