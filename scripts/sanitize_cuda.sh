#!/usr/bin/env bash
# scripts/sanitize_cuda.sh — runs the CUDA tests under compute-sanitizer (DESIGN.md §4: every kernel
# runs once clean under memcheck and racecheck on the GPU machine) and prints a summary table.
#
#   scripts/sanitize_cuda.sh [BUILD_DIR]        (default: build; a CUDA build with its tests built)
#
# What it runs: every CUDA test binary of BUILD_DIR (BUILD_DIR/tests/kascade_cuda*_tests, the
# binaries tests/CMakeLists.txt makes from tests/cuda/), each once per group of small cases below
# (a gtest filter per group, chosen so that each group exercises its kernels on small shapes) and
# once per tool (memcheck, racecheck). A binary without groups here is an error, so a new CUDA test
# binary cannot be skipped silently. The whole run takes a few minutes on an H200 (budget: < 4).
#
# Output: one log per (tool, group) in LOG_DIR, then a table tool × group → clean (sanitizer
# silent, tests passed) / errors (N sanitizer errors or racecheck hazards) / tests failed (rc) /
# no test passed (the filter matched nothing, or everything skipped) / timeout / no summary (the
# sanitizer did not finish). Exit status 0 only when every cell is clean.
#
# Environment:
#   COMPUTE_SANITIZER  the tool (default /usr/local/cuda/bin/compute-sanitizer, else from PATH)
#   SANITIZE_TOOLS     tools to run (default "memcheck racecheck")
#   SANITIZE_TIMEOUT   seconds per (tool, group) run (default 150)
#   LOG_DIR            where the logs go (default BUILD_DIR/sanitize-logs)
set -uo pipefail
cd "$(dirname "$0")/.."

build_dir=${1:-build}
sanitizer=${COMPUTE_SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}
if [[ ! -x "$sanitizer" ]]; then
  sanitizer=$(command -v compute-sanitizer || true)
fi
if [[ -z "$sanitizer" || ! -x "$sanitizer" ]]; then
  echo "sanitize_cuda.sh: compute-sanitizer not found (set COMPUTE_SANITIZER)" >&2
  exit 2
fi
tools=${SANITIZE_TOOLS:-memcheck racecheck}
run_timeout=${SANITIZE_TIMEOUT:-150}
log_dir=${LOG_DIR:-$build_dir/sanitize-logs}
mkdir -p "$log_dir"

# Groups of small cases: "binary|group|gtest filter". Each group keeps to the small shapes of its
# suites (lengths up to ~1000, a few sequences); the large-shape tests (LongSequenceManySplits,
# 20000-key Top-k, LongPrompt4097, ...) stay out.
groups=(
  "kascade_cuda_tests|decode|DenseDecode.FlagsLengthsAbovePlannedMaximum:DenseDecode.RefusesViewsThatDoNotMatchThePlan:SparseDecode.IdentityMapAscendingRowsBf16HeadDim64:SparseDecode.PerQueryHeadRows:SparseDecode.FlagsIndicesOutsideTheSequence:AnchorDecode.LayerZeroDenseOutputBf16HeadDim64:AnchorDecode.KascadePerKvGroupSparseOutput:AnchorDecode.OraclePerQueryHeadSparseOutput:MergeStates.*:RadixTopk.BudgetKOfEachLength"
  "kascade_cuda_tests|prefill|AnchorPrefill.LayerZeroDenseOutput:AnchorPrefill.SparseOutputOverFreshRows:AnchorPrefill.WgmmaSparseOutputOverFreshRows:AnchorPrefill.WarpSpecializedLayerZeroDenseOutput:SelectPrefill.OneRowPooledOverAllGroups:SelectPrefill.RowsOfTwoGroupsGroupOfThree:SelectPrefill.TopkStageIsExactOnTies:SparsePrefill.OracleLayoutWithEmptyRows:SparsePrefill.SaturatedRowsEqualDense:SparsePrefill.BadRowsSetTheErrorWord"
  "kascade_cuda_tests|backend|CudaBackendOps.RefusesBadViewsNamingTheProblem:CudaBackendOps.DeviceErrorsSurfaceAtTheNextHostReadOrAfterEveryOp:CudaBackendOps.MemoryRoundTripsFromPageableAndPinnedHostMemory:CudaBackendPoliciesBare.*:CudaBackendPrefillOps.*:CudaBackendPrefillOracle.*:EveryPolicy/CudaBackendPrefillSchedules.*/f16_d64_g4_page32__kascade:EveryPolicy/CudaBackendPrefillSchedules.*/f16_d64_g4_page32__kascade_pooled:EveryPolicy/CudaBackendPrefillSchedules.*/f16_d64_g4_page32__streaming:EveryPolicy/CudaBackendPrefillSchedules.*/f16_d64_g4_page32__quest:EveryPolicy/CudaBackendPrefillSchedules.*/f16_d64_g4_page32__lessismore"
  "kascade_cuda_tests|ops|OpsNorm.*:OpsElementwise.*:OpsAttentionInputs.*:OpsSampling.GreedyEqualsArgmax:OpsSampling.NanRowGivesMinusOne"
)

shopt -s nullglob
binaries=("$build_dir"/tests/kascade_cuda*_tests)
shopt -u nullglob
if [[ ${#binaries[@]} -eq 0 ]]; then
  echo "sanitize_cuda.sh: no CUDA test binary in $build_dir/tests (configure with -DKASCADE_CUDA=ON and build)" >&2
  exit 2
fi

declare -a rows=()
failures=0
for binary in "${binaries[@]}"; do
  name=$(basename "$binary")
  found=0
  for entry in "${groups[@]}"; do
    IFS='|' read -r group_binary group filter <<<"$entry"
    [[ "$group_binary" == "$name" ]] || continue
    found=1
    for tool in $tools; do
      log="$log_dir/${tool}_${name}_${group}.log"
      start=$(date +%s)
      timeout "$run_timeout" "$sanitizer" --tool "$tool" --error-exitcode 99 --print-limit 50 \
        "$binary" --gtest_filter="$filter" >"$log" 2>&1
      rc=$?
      seconds=$(( $(date +%s) - start ))
      # memcheck: "ERROR SUMMARY: N errors"; racecheck also: "RACECHECK SUMMARY: H hazards displayed (E errors, W warnings)".
      errors=$(grep -Eo 'ERROR SUMMARY: [0-9]+' "$log" | tail -1 | grep -Eo '[0-9]+$' || true)
      hazards=$(grep -Eo 'RACECHECK SUMMARY: [0-9]+ hazards? displayed \([0-9]+ errors?' "$log" | tail -1 |
                grep -Eo '[0-9]+ errors?' | grep -Eo '^[0-9]+' || true)
      if [[ -n "$hazards" && ( -z "$errors" || "$hazards" -gt "$errors" ) ]]; then errors=$hazards; fi
      passed=$(grep -c '^\[       OK \]' "$log" || true)
      if [[ $rc -eq 124 || $rc -eq 137 ]]; then
        status="timeout (${run_timeout} s)"
      elif [[ -z "$errors" ]]; then
        status="no summary (rc $rc)"
      elif [[ "$errors" -gt 0 ]]; then
        status="errors ($errors)"
      elif [[ $rc -ne 0 ]]; then
        status="tests failed (rc $rc)"
      elif [[ "$passed" -eq 0 ]]; then
        status="no test passed"  # a filter that matches nothing, or every test skipped (no GPU)
      else
        status="clean"
      fi
      [[ "$status" == "clean" ]] || failures=$((failures + 1))
      rows+=("$(printf '%-10s %-22s %-9s %-24s %5s s  %s' "$tool" "$name" "$group" "$status" "$seconds" "$log")")
      echo "[$tool $name $group] $status (${seconds} s)"
    done
  done
  if [[ $found -eq 0 ]]; then
    rows+=("$(printf '%-10s %-22s %-9s %-24s' "-" "$name" "-" "no groups: add one here")")
    failures=$((failures + 1))
  fi
done

echo
printf '%-10s %-22s %-9s %-24s %7s  %s\n' "tool" "binary" "group" "result" "time" "log"
for row in "${rows[@]}"; do echo "$row"; done
echo
if [[ $failures -eq 0 ]]; then
  echo "sanitize_cuda.sh: every run clean"
  exit 0
fi
echo "sanitize_cuda.sh: $failures run(s) not clean (see the logs above)"
exit 1
