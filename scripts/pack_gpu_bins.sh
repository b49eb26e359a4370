#!/usr/bin/env bash
# scripts/pack_gpu_bins.sh — packs a CUDA build's binaries for the GPU machine (which lacks most
# Debian -dev libraries): kascade_cuda_tests and the kascade CLI, kascade_bench_prefill,
# kascade_bench_decode and kascade_bench_linear when built, stripped, with the shared libraries they
# need from this machine (OpenBLAS, PCRE2, libgomp, gfortran, quadmath) in lib/, into one xz tarball (~11 MB) that a
# device call carries and unpacks for scripts/gpu_checks.sh:
#   scripts/pack_gpu_bins.sh BUILD_DIR OUT.tar.xz
#   (on the GPU machine) mkdir -p /tmp/b && tar xJf OUT.tar.xz -C /tmp/b && scripts/gpu_checks.sh /tmp/b OUT_DIR
# CLI_ONLY=1 packs the kascade CLI alone (any build, CPU-only too): what a training chunk's sample
# producers run on the GPU machine (scripts/train_chunk_gpu.sh). BENCHES="decode linear" keeps only
# those benchmarks (all by default: prefill, decode, linear).
set -euo pipefail
build=${1:?BUILD_DIR}
tarball=${2:?OUT.tar.xz}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib"
binaries=(tests/kascade_cuda_tests tools/kascade bench/prefill/kascade_bench_prefill bench/kascade_bench_decode
          bench/kascade_bench_linear)
[[ "${CLI_ONLY:-0}" == 1 ]] && binaries=(tools/kascade)
# BENCHES="decode linear" packs only those benchmarks (a device call carries <= 64 MiB with the tree).
if [[ -n "${BENCHES+x}" ]]; then
  kept=()
  for b in "${binaries[@]}"; do
    name=$(basename "$b")
    if [[ "$b" != bench/* ]] || [[ " $BENCHES " == *" ${name#kascade_bench_} "* ]]; then kept+=("$b"); fi
  done
  binaries=("${kept[@]}")
fi
for b in "${binaries[@]}"; do
  if [[ -f "$build/$b" ]]; then
    cp "$build/$b" "$stage/"
  elif [[ "$b" != bench/* ]]; then  # the benchmarks are optional
    echo "pack_gpu_bins.sh: $build/$b is missing (build it first)" >&2
    exit 1
  fi
done
for l in libopenblas.so.0 libpcre2-8.so.0 libgomp.so.1 libgfortran.so.5 libquadmath.so.0; do
  cp -L "/lib/x86_64-linux-gnu/$l" "$stage/lib/"
done
strip "$stage"/kascade*
# The build's source folder: the CUDA tests read models/ and tests/data/ from it (scripts/ship_checks.sh links it).
sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" >"$stage/source_dir" 2>/dev/null || true
mkdir -p "$(dirname "$tarball")"
XZ_OPT=-9 tar cJf "$tarball" -C "$stage" .
echo "pack_gpu_bins.sh: wrote $tarball ($(du -h "$tarball" | cut -f1))"
