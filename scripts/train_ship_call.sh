#!/usr/bin/env bash
# scripts/train_ship_call.sh — one device call of kascade-tiny's training (docs/model.md "Exact commands",
# chunks c24 onwards): a training chunk warm-started from models/kascade-tiny with samples generated while it
# trains (scripts/train_chunk_gpu.sh), then its ship test on the GPU against the shipped checkpoint's saved dev
# results (scripts/ship_test.sh, on the saved results' own tasks, lengths and samples: 12 tasks × 4K / 8K / 16K,
# 32 a cell), packed for the run tool, which returns at most eight files: the candidate's shards and index in
# OUT_DIR, everything else in OUT_DIR/rest.tar.xz.
#   scripts/train_ship_call.sh CLI_TARBALL OUT_DIR CHUNK SEED [train_tiny.py options...]
# The chunk runs with c24's arguments (C24_ARGS below); the options given after SEED follow them, so an option
# given again replaces c24's value (argparse keeps the last), e.g. `--lr 1e-4` or c27's `--extra-tasks ...`.
# Environment: TOTAL (seconds of the whole call, default 585; it must not exceed the run's limit, which is less than
# timeout_s when the session has less device time left), SHIP_SECONDS (kept after training for the ship test and the
# packing, default 190: the ship test took 135 s (c29) and more than 150 s (c30, cut off) on an H100),
# SHIP_BASELINE (default docs/model/ship_baseline: the saved ship-test results of the shipped checkpoint).
# Needs TRAIN_DATA/natural and TRAIN_DATA/eval (default TRAIN_DATA=train/data: scripts/make_train_data.py --natural
# --eval) in the tree. TRAIN_TINY (passed on to train_chunk_gpu.sh) and SHIP_TEST replace the two scripts run (tests).
# Before the call, OUT_DIR/rest.tar.xz unpacks to: CHUNK.log (training console), training_log.csv and
# eval_log.csv (train_tiny.py's logs: docs/model's history + the chunk's rows), ship/ (ship_test.sh's output, compare.md in it).
# Tested by tests/scripts/test_train_ship_call.sh (stand-in trainer and CLI, no GPU).
set -uo pipefail
tarball=${1:?CLI_TARBALL}
out=${2:?OUT_DIR}
chunk=${3:?CHUNK}
seed=${4:?SEED}
shift 4
here=$(cd "$(dirname "$0")/.." && pwd)
start=$(date +%s)
total=${TOTAL:-585}
ship_seconds=${SHIP_SECONDS:-190}
baseline=${SHIP_BASELINE:-$here/docs/model/ship_baseline}
[[ "$seed" =~ ^[0-9]+$ ]] || { echo "train_ship_call.sh: SEED '$seed' is not a number" >&2; exit 2; }
[[ -f "$baseline/samples.jsonl" ]] || { echo "train_ship_call.sh: no saved ship-test results at $baseline" >&2; exit 2; }
data=${TRAIN_DATA:-$here/train/data}
for d in "$data/natural" "$data/eval"; do
  [[ -d "$d" ]] || { echo "train_ship_call.sh: $d is missing (scripts/make_train_data.py --natural --eval)" >&2; exit 2; }
done
(( total > ship_seconds + 60 )) || { echo "train_ship_call.sh: TOTAL=$total leaves no time to train after SHIP_SECONDS=$ship_seconds" >&2; exit 2; }
C24_ARGS=(--generate-seed "$seed" --generate-workers 8 --natural "$data/natural"
  --eval-data "$data/eval" --lr 3e-4 --natural-ctx 8192 --mix-natural 0.02
  --length-weights 4k=1,8k=1,16k=2 --task-weights vt=2,multihop_qa=2
  --extra-tasks copy_strings@512:1k:2k=0.12,hop_drill@512:1k:2k=0.10 --ppl-ctx 16384 --eval-lengths 4k,8k,16k
  --reserve 60)
work=$(mktemp -d /tmp/kascade-call.XXXXXX)
mkdir -p "$out" "$work/rest"
kascade_dir=$work/cli  # unpacked once: the chunk's sample producers and the ship test run it
"$here/scripts/unpack_cli.sh" "$tarball" "$kascade_dir" >"$work/rest/unpack.log" 2>&1 ||
  { cat "$work/rest/unpack.log" >&2; rm -rf "$work"; exit 2; }
elapsed=$(( $(date +%s) - start ))
CHUNK_SECONDS=$((total - elapsed - ship_seconds)) "$here/scripts/train_chunk_gpu.sh" "$kascade_dir" "$work/train" "$chunk" \
  "${C24_ARGS[@]}" --time-budget $((total - elapsed - ship_seconds - 10)) "$@"
train_status=$?
candidate=$work/train/$chunk
cp "$work/train/$chunk.log" "$work/rest/" 2>/dev/null
cp "$candidate/training_log.csv" "$candidate/eval_log.csv" "$work/rest/" 2>/dev/null  # history + the chunk's rows
ship_status=skipped
if [[ $train_status -eq 0 && -f "$candidate/model.safetensors.index.json" ]]; then
  for f in tokenizer.json tokenizer_config.json generation_config.json kascade_calibration.json; do
    cp "$here/models/kascade-tiny/$f" "$candidate/"
  done
  unset TASKS LENGTHS SAMPLES  # the saved baseline's own (ship_test.sh)
  timeout -k 5 $((total - ($(date +%s) - start) - 15)) \
    "${SHIP_TEST:-$here/scripts/ship_test.sh}" "$kascade_dir/kascade" "$baseline" "$candidate" "$work/rest/ship" --device cuda --no-progress \
    >>"$work/rest/ship.log" 2>&1
  ship_status=$?
  tail -n 40 "$work/rest/ship/compare.md" 2>/dev/null
  cp "$candidate"/model-0000?-of-0000?.safetensors "$candidate/model.safetensors.index.json" "$out/"
fi
echo "train_ship_call.sh: training exited with $train_status, ship test $ship_status, $(( $(date +%s) - start )) s in all" |
  tee -a "$work/rest/call.log"
tar cJf "$out/rest.tar.xz" -C "$work/rest" .
rm -rf "$work"
[[ $train_status -eq 0 ]]
