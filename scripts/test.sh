#!/usr/bin/env bash
# scripts/test.sh — sets everything up, builds kascade and runs every test (CPU tests; CUDA tests
# too when nvcc is present, which skip cleanly without a GPU).
#   KASCADE_CUDA=AUTO|ON|OFF (default AUTO)   BUILD_DIR (default build)   KASCADE_SANITIZE=ON|OFF
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build_dir=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} \
  -DKASCADE_CUDA="${KASCADE_CUDA:-AUTO}" -DKASCADE_SANITIZE="${KASCADE_SANITIZE:-OFF}"
cmake --build "$build_dir" -j"$jobs"
ctest --test-dir "$build_dir" --output-on-failure -j"$jobs" ${CTEST_ARGS:-}
