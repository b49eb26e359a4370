#!/usr/bin/env bash
# scripts/ship_checks.sh — the shipping checks of kascade-tiny on the GPU machine, one device call (docs/model.md,
# "Shipping a checkpoint"): with the candidate's shards already in the tree's models/kascade-tiny,
#   1. calibrate it on the GPU (`kascade calibrate --device cuda`, the dev split's 13 tasks at 4K or CAL_LENGTHS,
#      anchors 2..8, the default set refined by agreement with dense) into models/kascade-tiny/kascade_calibration.json;
#   2. regenerate its Hugging Face reference logits (scripts/make_hf_fixtures.py --only kascade_tiny, PyTorch and
#      transformers on the GPU machine's CPU) into tests/data/hf;
#   3. run the GPU tests on the tiny model (kascade_cuda_tests, GPU_TEST_FILTER) with the new file and fixture;
#   4. a dev check: `kascade eval --device cuda --split dev`, dense and kascade, 13 tasks at 4K / 8K, 4 samples.
#   scripts/ship_checks.sh BIN_TARBALL OUT_DIR
# BIN_TARBALL: kascade_cuda_tests and the kascade CLI of a CUDA build (`BENCHES= scripts/pack_gpu_bins.sh BUILD
# bins.tar.xz`), which also records the build's source folder: the test binary reads models/ and tests/data/ from
# that compiled-in path, so when it is not this tree it is linked here (refused when it exists and is another tree).
# OUT_DIR receives what must come back (the run tool returns at most eight files): kascade_calibration.json,
# calibration-log.txt, kascade_tiny.fixture.json, kascade_tiny.logits.f32 and rest.tar.xz (every step's log, the dev
# check's results.json / results.md / samples.jsonl, summary.txt). Environment: STEPS (default "calibrate fixture
# tests dev"), CAL_SECONDS / FIXTURE_SECONDS / TESTS_SECONDS / DEV_SECONDS (each step's limit: 400 / 120 / 180 / 150),
# CAL_LENGTHS (4k; e.g. 4k,8k: the prompts go round-robin over task x length), CAL_PROMPTS (13), DEV_SAMPLES (4),
# GPU_TEST_FILTER. Exits non-zero when a step failed; the summary says which. Steps run through scripts/step_runner.sh.
# Tested by tests/scripts/test_ship_checks.sh (stand-in binaries and fixture script, no GPU).
set -uo pipefail
tarball=${1:?BIN_TARBALL}
out=${2:?OUT_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
model=$here/models/kascade-tiny
steps=" ${STEPS:-calibrate fixture tests dev} "
[[ -f "$tarball" ]] || { echo "ship_checks.sh: no binary tarball at $tarball" >&2; exit 2; }
[[ -f "$model/model.safetensors.index.json" ]] || { echo "ship_checks.sh: no checkpoint in $model" >&2; exit 2; }
for s in $steps; do
  [[ " calibrate fixture tests dev " == *" $s "* ]] || { echo "ship_checks.sh: unknown step '$s'" >&2; exit 2; }
done
work=$(mktemp -d /tmp/kascade-ship.XXXXXX)
mkdir -p "$out" "$work/rest"
bin=$work/bin
"$here/scripts/unpack_cli.sh" "$tarball" "$bin" >"$work/rest/unpack.log" 2>&1 ||
  { cat "$work/rest/unpack.log" >&2; rm -rf "$work"; exit 2; }
[[ -x "$bin/kascade_cuda_tests" ]] || [[ "$steps" != *" tests "* ]] ||
  { echo "ship_checks.sh: $tarball holds no kascade_cuda_tests" >&2; rm -rf "$work"; exit 2; }
if [[ -s "$bin/source_dir" ]]; then
  source_dir=$(<"$bin/source_dir")
  if [[ "$source_dir" != "$here" ]]; then
    if [[ ! -e "$source_dir" ]]; then
      mkdir -p "$(dirname "$source_dir")" && ln -s "$here" "$source_dir"
    elif [[ "$(cd "$source_dir" && pwd -P)" != "$(cd "$here" && pwd -P)" ]]; then
      echo "ship_checks.sh: the tests read $source_dir (their build's source folder), which exists and is not this tree" >&2
      rm -rf "$work"
      exit 2
    fi
  fi
fi
source "$here/scripts/step_runner.sh"  # run_step NAME SECONDS CMD...: the output in rest/NAME.log
step_log_dir=$work/rest
if [[ "$steps" == *" calibrate "* ]]; then
  run_step calibrate "${CAL_SECONDS:-400}" "$bin/kascade" calibrate -m "$model" --device cuda --dev-set tasks:all \
    --lengths "${CAL_LENGTHS:-4k}" --num-prompts "${CAL_PROMPTS:-13}" --anchors 2..8 --refine agreement \
    --refine-prompts "${CAL_PROMPTS:-13}" --refine-rounds 5 -o "$work/kascade_calibration.json" &&
    cp "$work/kascade_calibration.json" "$model/kascade_calibration.json" &&
    cp "$work/kascade_calibration.json" "$out/" &&
    grep -v "^==== calibrate: " "$work/rest/calibrate.log" >"$out/calibration-log.txt"
fi
if [[ "$steps" == *" fixture "* ]]; then
  run_step fixture "${FIXTURE_SECONDS:-120}" python3 "${HF_FIXTURES:-$here/scripts/make_hf_fixtures.py}" \
    --only kascade_tiny --out "$work/hf" &&
    mkdir -p "$here/tests/data/hf" && cp "$work/hf"/kascade_tiny.* "$here/tests/data/hf/" && cp "$work/hf"/kascade_tiny.* "$out/"
fi
if [[ "$steps" == *" tests "* ]]; then
  # The tests' shared libraries: the pack's lib/, where unpack_cli.sh also linked cuBLAS (PyTorch's steps keep theirs).
  run_step tests "${TESTS_SECONDS:-180}" env LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" "$bin/kascade_cuda_tests" \
    --gtest_filter="${GPU_TEST_FILTER:-*TinyModel*:*kascade_tiny*:*GpuRuntimeGraph*:GpuCalibration*}"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?[,.]" "$work/rest/tests.log"  # the counts
fi
if [[ "$steps" == *" dev "* ]]; then
  run_step dev "${DEV_SECONDS:-150}" "$bin/kascade" eval -m "$model" --device cuda --tasks all --split dev \
    --samples "${DEV_SAMPLES:-4}" --lengths 4k,8k --policies dense,kascade --no-plot --no-progress -o "$work/rest/dev"
  grep -i "average" "$work/rest/dev/results.md" 2>/dev/null | head -n 4
fi
printf '%s\n' "${step_summary[@]}" | tee "$work/rest/summary.txt"
tar cJf "$out/rest.tar.xz" -C "$work/rest" .
rm -rf "$work"
exit $step_failed
