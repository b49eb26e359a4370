#!/usr/bin/env bash
# bench/run_decode_suite.sh — the one command of the decode work on the GPU machine: CUDA tests,
# compute-sanitizer (memcheck on the whole CUDA suite, racecheck on the kernels' representative
# tests), the kernel benchmark, the cuDNN baseline and the joined report (docs/perf.md).
#   bench/run_decode_suite.sh BIN_DIR OUT_DIR [bench args...]
# BIN_DIR holds kascade_cuda_tests and kascade_bench_decode (built with KASCADE_CUDA_ARCHS=90a-real).
# Steps run under `timeout` and go on after a failure; logs: OUT_DIR/{tests,sanitizer,bench,cudnn}.log,
# results: OUT_DIR/{ours,cudnn}.json and the joined OUT_DIR/table.md.
# STEPS (default "tests racecheck memcheck bench cudnn report") picks and orders them.
set -u
bin=${1:?BIN_DIR}
out=${2:?OUT_DIR}
shift 2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
step() {  # step NAME LOG SECONDS CMD...  (appends to OUT_DIR/LOG.log; at most 7 files come back)
  local name=$1 log=$2 secs=$3
  shift 3
  local t0=$SECONDS
  echo "==== $name: $*" >>"$out/$log.log"
  timeout "$secs" "$@" >>"$out/$log.log" 2>&1
  local rc=$?
  echo "== $name: rc $rc, $((SECONDS - t0)) s" | tee -a "$out/$log.log"
  tail -n 4 "$out/$log.log"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv 2>&1 | tee "$out/bench.log"
racecheck_filter='DenseDecode.LongSequenceManySplits:SparseDecode.LongRowSplitAcrossCtasForOneSequence:SparseDecode.PerQueryHeadRows:AnchorDecode.KascadePerKvGroupSparseOutput:AnchorDecode.LayerZeroDenseOutputBf16HeadDim64:RadixTopk.TiesGoToTheLowerIndexExactly:MergeStates.*:DecodeGraph.*'
for s in ${STEPS:-tests racecheck memcheck bench cudnn report}; do
  case $s in
    tests) step tests tests "${TESTS_SECONDS:-240}" "$bin/kascade_cuda_tests" ;;
    racecheck) step racecheck sanitizer "${RACECHECK_SECONDS:-200}" compute-sanitizer --tool racecheck --racecheck-report all \
                 --error-exitcode 3 "$bin/kascade_cuda_tests" --gtest_filter="$racecheck_filter" ;;
    memcheck) step memcheck sanitizer "${MEMCHECK_SECONDS:-300}" compute-sanitizer --tool memcheck --error-exitcode 3 \
                "$bin/kascade_cuda_tests" ;;
    bench) step bench bench "${BENCH_SECONDS:-300}" "$bin/kascade_bench_decode" --json "$out/ours.json" "$@" ;;
    cudnn) step cudnn cudnn "${CUDNN_SECONDS:-300}" env PYTHONUNBUFFERED=1 python3 "$here/cudnn_decode.py" \
             --json "$out/cudnn.json" "$@" ;;
    report) python3 "$here/decode_report.py" "$out/ours.json" "$out/cudnn.json" >"$out/table.md" 2>&1
            cat "$out/table.md" ;;
  esac
done
