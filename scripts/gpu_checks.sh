#!/usr/bin/env bash
# scripts/gpu_checks.sh — one device call that checks a CUDA build on the GPU machine: the CUDA
# tests in groups (each under its own time limit, so one slow group cannot starve the others), the
# prefill benchmark beside cuDNN SDPA in the same run, and the GPU runtime end to end on
# kascade-tiny (`kascade generate --device cuda`, a small `kascade eval --device cuda`).
#   scripts/gpu_checks.sh BIN_DIR OUT_DIR
# BIN_DIR holds kascade_cuda_tests, kascade_bench_prefill and kascade (the CLI), built on the CPU
# machine with -DKASCADE_CUDA=ON -DKASCADE_CUDA_ARCHS=90a-real, plus lib/ with any shared library the
# GPU machine lacks (OpenBLAS, PCRE2: `ldd` shows which). STEPS picks steps (default: all, in order
# "tests bench cudnn runtime eval"); TEST_GROUPS the test groups (default: runtime backend prefill decode);
# *_SECONDS override the limits; BENCH_KERNELS, LENS and EVAL_{TASKS,LENGTHS,POLICIES,SAMPLES} the
# work. Every step writes OUT_DIR/<step>.log; the script prints a summary and exits non-zero when a
# test failed. TEST_GROUPS: runtime, backend, prefill, ws (the warp-specialised kernels), decode.
set -u
bin=${1:?BIN_DIR}
out=${2:?OUT_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
cublas_dir=$(dirname "$(ls /usr/local/cuda*/lib*/libcublas.so.13 /usr/local/cuda*/targets/*/lib/libcublas.so.13 \
  /usr/local/lib/python3*/dist-packages/nvidia/cu*/lib/libcublas.so.13 2>/dev/null | head -n 1)" 2>/dev/null)
export LD_LIBRARY_PATH="$bin/lib:${cublas_dir:-/usr/local/cuda/lib64}:${LD_LIBRARY_PATH:-}"
status=0
source "$here/scripts/step_runner.sh"  # run_step NAME SECONDS CMD...: the output in $out/NAME.log
step_log_dir=$out
declare -A filters=(
  [runtime]='Ops*:*GpuRuntime*'
  [backend]='*CudaBackend*'
  [prefill]='*DensePrefill*:*SparsePrefill*:SelectPrefill*:AnchorPrefill*:PrefillPlan*:*WarpSpecialized*'
  [ws]='*_ws*:*/ws*:*WarpSpecialized*:PrefillPlan.*'
  [decode]='*DenseDecode*:*SparseDecode*:*AnchorDecode*:*RadixTopk*:*MergeStates*:*DecodePlan*:*DecodeGraph*'
)
ldd "$bin/kascade_cuda_tests" "$bin/kascade" | grep "not found" >"$out/missing-libs.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader >"$out/device.txt" 2>&1
for s in ${STEPS:-tests bench cudnn runtime eval}; do
  case $s in
    tests)
      for g in ${TEST_GROUPS:-runtime backend prefill decode}; do
        run_step "tests-$g" "${TESTS_SECONDS:-120}" "$bin/kascade_cuda_tests" --gtest_brief=1 \
          --gtest_filter="${filters[$g]}" --gtest_output="xml:$out/tests-$g.xml" || status=1
        grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests? ran" "$out/tests-$g.log" | tail -n 4
      done ;;
    bench)
      run_step bench "${BENCH_SECONDS:-120}" "$bin/kascade_bench_prefill" --lens "${LENS:-16384,131072}" --dtypes bf16 \
        --layouts contiguous,paged --variants mma,ws,ws_tma --kernels "${BENCH_KERNELS:-dense,lse}" --reps 3 \
        --json "$out/ours.json"
      run_step bench-page128 "${BENCH_SECONDS:-120}" "$bin/kascade_bench_prefill" --lens "${LENS:-16384,131072}" \
        --dtypes bf16 --layouts paged --page 128 --variants ws,ws_tma --kernels dense,lse --reps 3
      grep -E "^(dense|lse) " "$out/bench-page128.log" | cut -c1-110
      grep -E "^(dense|lse|reuse|anchor|anchor0|select) " "$out/bench.log" | cut -c1-110 ;;
    cudnn)
      run_step cudnn "${CUDNN_SECONDS:-90}" env PYTHONUNBUFFERED=1 python3 "$here/bench/prefill/cudnn_prefill.py" \
        --lens "${LENS:-16384,131072}" --dtypes bf16 --reps 5 --json "$out/cudnn.json"
      python3 "$here/bench/prefill/prefill_report.py" "$out/ours.json" "$out/cudnn.json" >"$out/table.md" 2>&1
      cat "$out/table.md" ;;
    runtime)
      model="$here/models/kascade-tiny"
      run_step generate "${GENERATE_SECONDS:-60}" "$bin/kascade" tasks --split eval --tasks niah_multikey_1 \
        --lengths 8k --samples 1 --seed 1 --tokenizer "$model" --out "$out/sample.jsonl"
      python3 -c "import json,sys; d=json.loads(open(sys.argv[1]).readline()); open(sys.argv[2],'w').write(d['prompt']); print('expected', d['answers'])" \
        "$out/sample.jsonl" "$out/prompt.txt" >>"$out/generate.log"
      for attention in dense kascade; do
        run_step "generate-$attention" "${GENERATE_SECONDS:-60}" "$bin/kascade" generate --model "$model" --device cuda \
          --attention "$attention" --prompt-file "$out/prompt.txt" -n 24 || status=1
        tail -n 8 "$out/generate-$attention.log"
      done ;;
    eval)
      model="$here/models/kascade-tiny"
      run_step eval "${EVAL_SECONDS:-150}" "$bin/kascade" eval -m "$model" --device cuda --tasks "${EVAL_TASKS:-all}" \
        --lengths "${EVAL_LENGTHS:-4k,8k}" --policies "${EVAL_POLICIES:-dense,kascade,kascade-decode,streaming,quest,omnikv,lessismore}" \
        --samples "${EVAL_SAMPLES:-2}" \
        -o "$out/eval" --no-plot --no-progress || status=1
      tail -n 40 "$out/eval.log" ;;
    *) echo "unknown step $s"; status=1 ;;
  esac
done
printf '%s\n' "${step_summary[@]}" | tee "$out/summary.txt"
exit $status
