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
#   decode_raw.csv         every metric of the first seven anchor-step kernels (--set full)
# Each step runs under `timeout`. The commands are the ones that produced docs/perf.md's figures
# (run one by one on 2026-12-03, about 2 minutes in all on an H200); this script gathering them has
# not yet run as a whole.
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
if [[ -n "$decode" ]]; then
  run decode 200 "$ncu" --clock-control none --set full -k regex:'decode_kernel|topk_' --launch-count 7 \
    -o "$work/decode" "$decode" --shapes llama --dtypes bf16 --batches 8 --lens 131072 --layouts contiguous --reps 1
  "$ncu" -i "$work/decode.ncu-rep" --page raw --csv >"$work/decode_raw.csv" 2>&1
fi
tar czf "$out/profiles.tgz" -C "$work" $(cd "$work" && ls *.csv *.log)
echo "wrote $out/profiles.tgz"
