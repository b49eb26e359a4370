#!/usr/bin/env bash
# bench/prefill/run_on_device.sh — the one command of the prefill work (issue 6) on the GPU machine:
# the prefill GPU tests, compute-sanitizer (memcheck, then racecheck) on small cases of every prefill
# kernel, the prefill benchmark, the cuDNN SDPA baseline and the joined report.
#   bench/prefill/run_on_device.sh [BIN_DIR] [OUT_DIR] [bench args...]
# BIN_DIR (default build-prefill) holds tests/kascade_cuda_tests and kascade_bench_prefill (anywhere
# below it), built on the CPU machine with -DKASCADE_CUDA=ON -DKASCADE_CUDA_ARCHS=90a-real and
# carried along; OUT_DIR defaults to $OUT. Each step runs under `timeout` and the script goes on
# after a failure. Files in OUT_DIR: tests.log, tests.xml, sanitizer.log, bench.log, ours.json,
# cudnn.json, table.md. STEPS (default "tests memcheck racecheck bench cudnn report") picks and
# orders the steps; *_SECONDS override the step limits. All steps together can outlast one 10-minute
# device call: run them as two calls,
#   STEPS="tests memcheck racecheck" bench/prefill/run_on_device.sh build-prefill $OUT     (<= 570 s)
#   STEPS="bench cudnn report" bench/prefill/run_on_device.sh build-prefill $OUT [args]    (<= 570 s)
# bench args (both benchmarks take them): --lens 8192,... --dtypes f16,bf16 --layouts contiguous,paged
# --variants mma,wgmma,ws --reps 10 (the defaults: all, i.e. 48 configurations, about 7 minutes; the
# one-call form for the mainloop comparison: --lens 16384,65536 --dtypes bf16 --variants mma,ws).
set -u
bin=${1:-build-prefill}
out=${2:-${OUT:?set OUT or pass OUT_DIR}}
shift $(($# < 2 ? $# : 2))
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
tests="$bin/tests/kascade_cuda_tests"
bench=$(find "$bin" -name kascade_bench_prefill -type f 2>/dev/null | head -n 1)
step() {  # step NAME LOG SECONDS CMD...
  local name=$1 log=$2 secs=$3
  shift 3
  local t0=$SECONDS
  echo "==== $name: $*" >>"$out/$log.log"
  timeout "$secs" "$@" >>"$out/$log.log" 2>&1
  local rc=$?
  echo "== $name: rc $rc, $((SECONDS - t0)) s" | tee -a "$out/$log.log"
  tail -n 3 "$out/$log.log"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv 2>&1 | tee "$out/bench.log"
# The prefill tests (tests/cuda/test_prefill_*.cpp).
all='DensePrefill.*:*/DensePrefillTest.*:*/DensePrefillVariantTest.*:SparsePrefill.*:*/SparsePrefillTest.*:SelectPrefill.*:AnchorPrefill.*:PrefillPlan.*'
# Small cases that run every prefill kernel: dense, LSE pass, sparse (per group, per head, oracle
# layout, bad rows), pooled scores, Top-k (both reductions, several waves and key splits), anchors.
small='Variants/DensePrefillVariantTest.LengthsPastThePlanSetTheErrorWord/mma'
small+=':Shapes/DensePrefillTest.LsePassMatchesReference/bf16_H8_G4_d64_page16_mma'
small+=':Shapes/DensePrefillTest.ChunksOfLongerSequences/f16_H16_G2_d128_page64_mma'
small+=':SparsePrefill.OracleLayoutWithEmptyRows:SparsePrefill.BadRowsSetTheErrorWord'
small+=':Shapes/SparsePrefillTest.PerQueryHeadRows/bf16_H8_G8_d64_page16'
small+=':SelectPrefill.TopkStageIsExactOnTies:SelectPrefill.MaxPoolingOneRowMha'
small+=':SelectPrefill.GroupOfEightChunksManyWavesAndSplits:AnchorPrefill.SparseOutputOverFreshRows'
small+=':AnchorPrefill.WgmmaSparseOutputOverFreshRows'  # the sm_90a variants (skipped elsewhere)
small+=':Variants/DensePrefillVariantTest.LengthsPastThePlanSetTheErrorWord/ws'
small+=':Shapes/DensePrefillTest.ChunksOfLongerSequences/bf16_H16_G2_d128_page128_ws'
small+=':Shapes/DensePrefillTest.LsePassMatchesReference/f16_H12_G4_d64_page0_ws'
small+=':AnchorPrefill.WarpSpecializedLayerZeroDenseOutput'
small+=':SparsePrefill.WarpSpecializedOracleLayoutWithEmptyRows:SparsePrefill.WarpSpecializedBadRowsSetTheErrorWord'
small+=':SelectPrefill.WarpSpecializedTmaPooledScoresStageMatchesReference'
for s in ${STEPS:-tests memcheck racecheck bench cudnn report}; do
  case $s in
    tests) step tests tests "${TESTS_SECONDS:-300}" "$tests" --gtest_filter="$all" --gtest_output="xml:$out/tests.xml" ;;
    memcheck) step memcheck sanitizer "${MEMCHECK_SECONDS:-120}" compute-sanitizer --tool memcheck --error-exitcode 3 \
                "$tests" --gtest_filter="$small" ;;
    racecheck) step racecheck sanitizer "${RACECHECK_SECONDS:-150}" compute-sanitizer --tool racecheck \
                 --racecheck-report all --error-exitcode 3 "$tests" --gtest_filter="$small" ;;
    bench) if [ -z "$bench" ]; then echo "no kascade_bench_prefill under $bin" | tee -a "$out/bench.log"; continue; fi
           step bench bench "${BENCH_SECONDS:-420}" "$bench" --json "$out/ours.json" "$@" ;;
    cudnn) step cudnn bench "${CUDNN_SECONDS:-150}" env PYTHONUNBUFFERED=1 python3 "$here/cudnn_prefill.py" \
             --json "$out/cudnn.json" "$@" ;;
    report) python3 "$here/prefill_report.py" "$out/ours.json" "$out/cudnn.json" >"$out/table.md" 2>&1
            cat "$out/table.md" ;;
    *) echo "unknown step $s" ;;
  esac
done
