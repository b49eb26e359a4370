#!/usr/bin/env bash
# scripts/sass.sh — the SASS of compiled CUDA code on a machine without a GPU or a CUDA toolkit's
# disassembler: uses cuobjdump (and the nvdisasm it calls) from PATH or /usr/local/cuda/bin, else
# fetches NVIDIA's nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels from PyPI once (pip
# download, into ~/.cache/kascade/cuobjdump).
#   scripts/sass.sh FILE [FUNCTION_REGEX]            the SASS of FILE's functions matching the regex
#   scripts/sass.sh --summary FILE [FUNCTION_REGEX]  per function: instructions and the opcodes that
#                                                    matter for our kernels (wgmma, MUFU, loads, spills)
# FILE: an object (.o), a cubin, a static library or an executable with device code.
# Tested by tests/scripts/test_sass.sh.
set -euo pipefail

summary=0
if [ "${1:-}" = "--summary" ]; then
  summary=1
  shift
fi
[ $# -ge 1 ] || { sed -n '2,8p' "$0"; exit 2; }
file=$1
pattern=${2:-.}
[ -f "$file" ] || { echo "sass.sh: no file $file" >&2; exit 2; }

# The cuobjdump to run, with the nvdisasm it calls beside it or on PATH.
find_cuobjdump() {
  local c
  for c in "$(command -v cuobjdump || true)" /usr/local/cuda/bin/cuobjdump; do
    if [ -n "$c" ] && [ -x "$c" ] && { [ -x "$(dirname "$c")/nvdisasm" ] || command -v nvdisasm >/dev/null; }; then
      echo "$c"
      return
    fi
  done
  local cache=${KASCADE_CACHE:-$HOME/.cache/kascade}/cuobjdump
  if [ ! -x "$cache/bin/cuobjdump" ] || [ ! -x "$cache/bin/nvdisasm" ]; then
    echo "sass.sh: fetching cuobjdump and nvdisasm (pip download nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)" \
         "into $cache" >&2
    rm -rf "$cache"
    mkdir -p "$cache/bin"
    python3 -m pip download --quiet --no-deps nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm -d "$cache/wheels" >&2
    # Each wheel holds its tool under nvidia/cu*/bin/.
    python3 -c 'import glob, os, sys, zipfile
for wheel in glob.glob(sys.argv[1] + "/wheels/*.whl"):
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            tool = os.path.basename(name)
            if tool in ("cuobjdump", "nvdisasm") and "/bin/" in name:
                with open(sys.argv[1] + "/bin/" + tool, "wb") as out:
                    out.write(z.read(name))' "$cache"
    chmod +x "$cache/bin/cuobjdump" "$cache/bin/nvdisasm" 2>/dev/null ||
      { echo "sass.sh: the wheels hold no cuobjdump / nvdisasm" >&2; exit 1; }
  fi
  echo "$cache/bin/cuobjdump"
}

cuobjdump=$(find_cuobjdump)
tools=$(dirname "$cuobjdump")
dump=$(PATH="$tools:$PATH" NVDISASM_PATH="$tools" "$cuobjdump" -sass "$file")
# Keep the functions whose name matches the pattern (a function runs from its "Function :" line to the next).
selected=$(awk -v pat="$pattern" '/Function :/ { keep = ($3 ~ pat) } keep' <<<"$dump")
[ -n "$selected" ] || { echo "sass.sh: no function of $file matches '$pattern'" >&2; exit 1; }
if [ $summary -eq 0 ]; then
  echo "$selected"
  exit 0
fi
awk '
  function report() {
    if (name == "") return
    printf "| %s | %d | %d | %d | %d | %d | %d | %d |\n", name, total, n["HGMMA"], n["MUFU"], n["LDG"], n["LDGSTS"], n["UTMALDG"], n["LDL"] + n["STL"]
  }
  BEGIN { print "| function | instructions | HGMMA | MUFU | LDG | LDGSTS | UTMALDG | LDL+STL (spills) |"; print "|---|---|---|---|---|---|---|---|" }
  /Function :/ { report(); name = $3; total = 0; delete n; next }
  /^[[:space:]]+\/\*[0-9a-f]+\*\/[[:space:]]/ {
    op = $2
    if (op ~ /^@/) op = $3       # predicated: the opcode follows the guard
    sub(/;$/, "", op)
    split(op, parts, ".")
    ++n[parts[1]]
    ++total
  }
  END { report() }
' <<<"$selected"
