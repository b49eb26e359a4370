#!/usr/bin/env bash
# tests/scripts/test_sass.sh — scripts/sass.sh on a kernel compiled here for sm_90a: the summary
# counts the one MUFU.EX2 of ex2.approx and no spills, the filter keeps only the functions asked
# for, and a missing file or a pattern that matches nothing is an error. Skips without nvcc.
#   tests/scripts/test_sass.sh
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$nvcc" ] || { echo "SKIP: no nvcc"; exit 0; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cat >"$out/k.cu" <<'EOF'
__global__ void one_exp2(float* x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x[threadIdx.x]));
  x[threadIdx.x] = y;
}
__global__ void copy_only(float* x, const float* y) { x[threadIdx.x] = y[threadIdx.x]; }
EOF
"$nvcc" -cubin -gencode=arch=compute_90a,code=sm_90a "$out/k.cu" -o "$out/k.cubin"
"$here/scripts/sass.sh" --summary "$out/k.cubin" >"$out/all.md" || fail "summary of every function"
grep -q "| _Z8one_exp2Pf | [0-9]* | 0 | 1 | 1 | 0 | 0 | 0 |" "$out/all.md" || { cat "$out/all.md"; fail "one_exp2: 1 MUFU, 1 LDG, no spill"; }
grep -q "| _Z9copy_onlyPfPKf | [0-9]* | 0 | 0 | 1 | 0 | 0 | 0 |" "$out/all.md" || { cat "$out/all.md"; fail "copy_only: no MUFU"; }
"$here/scripts/sass.sh" "$out/k.cubin" one_exp2 >"$out/one.sass" || fail "the filtered dump"
grep -q "MUFU.EX2" "$out/one.sass" || fail "the dump shows the MUFU"
! grep -q "copy_only" "$out/one.sass" || fail "the filter kept another function"
if "$here/scripts/sass.sh" "$out/k.cubin" no_such_kernel >/dev/null 2>"$out/err"; then fail "an unmatched pattern passed"; fi
grep -q "no function of" "$out/err" || fail "the unmatched pattern is named"
if "$here/scripts/sass.sh" "$out/missing.o" >/dev/null 2>"$out/err"; then fail "a missing file passed"; fi
grep -q "no file" "$out/err" || fail "the missing file is named"
echo "sass.sh: summary counts, filter and errors as expected"
