#!/usr/bin/env bash
# tests/scripts/test_install.sh — kascade as an installed CMake package, used the way another project
# would: `cmake --install` into a temporary prefix; the package holds the public headers, the static
# libraries, the C library libkascade_c and its Python binding, the CLI and kascadeConfig.cmake, and no
# internal header; examples/ (a separate CMake project)
# configures against that prefix alone with find_package(kascade) — its include path must not reach into
# the source tree's src/ — builds, and runs:
#   engine_decode cpu   a policy over the CPU backend on an engine's own paged cache (checks itself:
#                       Kascade's Top-k finds every planted needle, outputs within 2 % of dense);
#   engine_decode cuda  the same on the GPU, or (CPU-only build or machine) a clean refusal naming why;
#   c_decode            the C interface from C (libkascade_c): a refusal with its message, a decode step;
#   generate            the bundled model through the runtime API: the same text as `kascade generate`;
#   python3             the installed Python binding (share/kascade/python) loads the installed libkascade_c.
#   tests/scripts/test_install.sh BUILD_DIR KASCADE_BINARY
set -euo pipefail
build=${1:?BUILD_DIR}
bin=${2:?KASCADE_BINARY}
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }
for f in include/kascade/backends.h include/kascade/c_api.h include/kascade/runtime.h include/kascade/policy.h \
         lib/libkascade_runtime.a lib/libkascade_c.so share/kascade/python/kascade/__init__.py \
         lib/cmake/kascade/kascadeConfig.cmake lib/cmake/kascade/kascadeConfigVersion.cmake \
         lib/cmake/kascade/kascadeTargets.cmake bin/kascade; do
  [[ -e $prefix/$f ]] || fail "the installed package lacks $f"
done
internal=$(find "$prefix/include" -type f ! -path "$prefix/include/kascade/*" | head -3)
[[ -z $internal ]] || fail "internal headers installed: $internal"

cmake -S "$src/examples" -B "$tmp/examples" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log"; fail "configuring examples/ against the installed package"; }
if grep -q -- "-I$src/src" "$tmp/examples/build.ninja"; then fail "the installed package puts the source tree's src/ on the include path"; fi
cmake --build "$tmp/examples" >"$tmp/build.log" 2>&1 || { tail -40 "$tmp/build.log"; fail "building examples/"; }

OMP_WAIT_POLICY=PASSIVE "$tmp/examples/engine_decode" cpu >"$tmp/cpu.txt" 2>&1 || { cat "$tmp/cpu.txt"; fail "engine_decode cpu"; }
grep -q "^backend cpu" "$tmp/cpu.txt" || { cat "$tmp/cpu.txt"; fail "engine_decode cpu: no backend line"; }
grep -q "needles in the Top-k rows of layer 2: 32 of 32" "$tmp/cpu.txt" || { cat "$tmp/cpu.txt"; fail "engine_decode cpu: needles"; }
grep -q "^| 3 | reuse | " "$tmp/cpu.txt" || { cat "$tmp/cpu.txt"; fail "engine_decode cpu: layer 3 is not a reuse layer"; }

if "$tmp/examples/engine_decode" cuda >"$tmp/cuda.txt" 2>&1; then
  grep -q "needles in the Top-k rows of layer 2: 32 of 32" "$tmp/cuda.txt" || { cat "$tmp/cuda.txt"; fail "engine_decode cuda: needles"; }
  echo "engine_decode ran on the GPU"
else
  grep -q -E "no CUDA device|no CUDA backend" "$tmp/cuda.txt" || { cat "$tmp/cuda.txt"; fail "engine_decode cuda failed without saying why"; }
  echo "engine_decode cuda refused cleanly: $(grep -o -E 'no CUDA (device|backend)[^(]*' "$tmp/cuda.txt" | head -1)"
fi

"$tmp/examples/c_decode" >"$tmp/c.txt" 2>&1 || { cat "$tmp/c.txt"; fail "c_decode"; }
grep -q "refused as expected: .*no-such-policy" "$tmp/c.txt" || { cat "$tmp/c.txt"; fail "c_decode: the refusal"; }
grep -q "layer 3: reuse, keys read 0.100" "$tmp/c.txt" || { cat "$tmp/c.txt"; fail "c_decode: layer 3"; }

# The Python binding from the installed tree finds the installed C library by itself.
env -u KASCADE_LIBRARY PYTHONPATH="$prefix/share/kascade/python" python3 - "$prefix" <<'PY' || fail "the installed Python binding"
import sys
import kascade
name = kascade.library()._name
assert name.startswith(sys.argv[1]), f"loaded {name}, not the installed library"
policy = kascade.Policy(kascade.Backend.cpu(), "kascade", num_layers=4, num_heads=8, num_kv_heads=2, head_dim=64,
                        anchors=[0, 2])
assert [policy.role(layer) for layer in range(4)] == ["dense-anchor", "reuse", "anchor", "reuse"]
PY

prompt="The key for blue-door is 4471902. What is the key for blue-door?"
OMP_WAIT_POLICY=PASSIVE "$tmp/examples/generate" "$src/models/kascade-tiny" "$prompt" cpu kascade 8 \
  >"$tmp/example.txt" 2>"$tmp/example.log" || { cat "$tmp/example.log"; fail "generate example"; }
grep -q "keys attended: prefill" "$tmp/example.log" || { cat "$tmp/example.log"; fail "generate example: no closing report"; }
OMP_WAIT_POLICY=PASSIVE "$bin" generate -m "$src/models/kascade-tiny" --attention kascade --max-new-tokens 8 -p "$prompt" \
  >"$tmp/cli.txt" 2>"$tmp/cli.log" || { cat "$tmp/cli.log"; fail "kascade generate"; }
cmp -s "$tmp/example.txt" "$tmp/cli.txt" || { diff "$tmp/example.txt" "$tmp/cli.txt"; fail "the example and the CLI generated different text"; }
echo "PASS: installed package (headers, libraries, CLI, CMake config); examples built against it alone and ran"
