#!/usr/bin/env bash
# bench/profile_on_device.sh — the Nsight Compute profiles behind docs/perf.md "Prefill round 4" (the
# prefill selection's per-kernel times at 128K, the pooled-score kernel's pipes and per-instruction
# stalls at 32K) and the decode anchor's per-kernel breakdown (llama bf16, B = 8, 128K), run on the GPU
# machine with binaries built on the CPU machine:
#   bench/profile_on_device.sh BIN_DIR OUT_DIR
# BIN_DIR holds kascade_bench_prefill and kascade_bench_decode (anywhere below it, with lib/ beside them
# when the GPU machine lacks their shared libraries); OUT_DIR gets ONE tarball, profiles.tgz (the device
# tool returns a limited number of files), with:
#   prefill_durations.csv  gpu__time_duration of every LSE / pooled / Top-k launch (128K, --kernels lse,select)
#   pooled_raw.csv         every metric of one late pooled wave at 32K (--set full), e.g. pipe utilisation
#   pooled_source.csv      its SASS with warp-stall samples per instruction
#   reuse_source.csv       the sparse (reuse) kernel's SASS with stall samples at 32K, and
#   reuse_stalls.md.log    its summary per warp role (bench/ncu_stalls.py)
#   decode_raw.csv         every metric of the first seven anchor-step kernels (--set full)
#   reuse_decode_raw.csv, reuse_decode_source.csv, reuse_decode_stalls.md.log
#                          the reuse decode kernel at B = 4, 128K: every metric, SASS stalls, their summary
# Each step runs under `timeout`. The commands are the ones that produced docs/perf.md's figures
# (run one by one on 2026-12-03, about 2 minutes in all on an H200; the reuse step in round 5); this
# script gathering them has not yet run as a whole.
set -u
bin=${1:?BIN_DIR}
out=${2:?OUT_DIR}
prefill=$(find "$bin" -name kascade_bench_prefill -type f | head -n 1)
decode=$(find "$bin" -name kascade_bench_decode -type f | head -n 1)
export LD_LIBRARY_PATH="$(dirname "$prefill")/lib:${LD_LIBRARY_PATH:-}"
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -n 1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
run() {  # run NAME SECONDS CMD...: logs into $work/NAME.log
  local name=$1 secs=$2
  shift 2
  timeout "$secs" "$@" >"$work/$name.log" 2>&1
  echo "== $name: rc $?"
}
run prefill_durations 200 "$ncu" --clock-control none --metrics gpu__time_duration.sum \
  -k regex:'ws_pooled|tile_topk|ws_attention' --csv \
  "$prefill" --lens 131072 --dtypes bf16 --layouts contiguous --variants ws_tma --kernels lse,select --reps 1
cp "$work/prefill_durations.log" "$work/prefill_durations.csv"
run pooled 200 "$ncu" --clock-control none --set full --import-source no -k regex:ws_pooled \
  --launch-skip 3 --launch-count 1 -o "$work/pooled" \
  "$prefill" --lens 32768 --dtypes bf16 --layouts contiguous --variants ws_tma --kernels select --reps 1
"$ncu" -i "$work/pooled.ncu-rep" --page raw --csv >"$work/pooled_raw.csv" 2>&1
"$ncu" -i "$work/pooled.ncu-rep" --page source --csv --print-source sass >"$work/pooled_source.csv" 2>&1
# The sparse (reuse) kernel at 32K: every metric and the per-instruction stalls, summarised per warp
# role by ncu_stalls.py (docs/perf.md "Prefill round 5": how the gather producer's cost was found).
run reuse 200 "$ncu" --clock-control none --set full --import-source no --kernel-name-base mangled \
  -k regex:'WsKeysE1E' --launch-count 1 -o "$work/reuse" \
  "$prefill" --lens 32768 --dtypes bf16 --layouts contiguous --variants ws_tma --kernels select,reuse --reps 1
"$ncu" -i "$work/reuse.ncu-rep" --page source --csv --print-source sass >"$work/reuse_source.csv" 2>&1
python3 "$(dirname "$0")/ncu_stalls.py" "$work/reuse_source.csv" >"$work/reuse_stalls.md.log" 2>&1
if [[ -n "$decode" ]]; then
  run decode 200 "$ncu" --clock-control none --set full -k regex:'decode_kernel|topk_' --launch-count 7 \
    -o "$work/decode" "$decode" --shapes llama --dtypes bf16 --batches 8 --lens 131072 --layouts contiguous --reps 1
  "$ncu" -i "$work/decode.ncu-rep" --page raw --csv >"$work/decode_raw.csv" 2>&1
  # The reuse (kSparse) decode kernel at B = 4, 128K, where it streams at 65 % of the read roof (B = 64: 95 %):
  # every metric and the per-instruction stalls (its mangled name ends in the mode flags PV, !logits, indexed,
  # !stored-logits).
  run reuse_decode 200 "$ncu" --clock-control none --set full --import-source no --kernel-name-base mangled \
    -k regex:'Lb1ELb0ELb1ELb0EE' --launch-count 1 -o "$work/reuse_decode" \
    "$decode" --shapes llama --dtypes bf16 --batches 4 --lens 131072 --layouts contiguous --reps 1
  "$ncu" -i "$work/reuse_decode.ncu-rep" --page raw --csv >"$work/reuse_decode_raw.csv" 2>&1
  "$ncu" -i "$work/reuse_decode.ncu-rep" --page source --csv --print-source sass >"$work/reuse_decode_source.csv" 2>&1
  python3 "$(dirname "$0")/ncu_stalls.py" "$work/reuse_decode_source.csv" --split '(?!)' >"$work/reuse_decode_stalls.md.log" 2>&1
fi
tar czf "$out/profiles.tgz" -C "$work" $(cd "$work" && ls *.csv *.log)
echo "wrote $out/profiles.tgz"
