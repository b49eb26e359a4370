#!/usr/bin/env bash
# scripts/train_chunk_gpu.sh — one training chunk of kascade-tiny on the GPU machine, with samples
# generated while it trains (docs/model.md "Exact commands", chunks c13 onwards), as one command:
#   scripts/train_chunk_gpu.sh CLI_TARBALL OUT_DIR CHUNK [train_tiny.py options...]
# CLI_TARBALL: the kascade CLI packed with its shared libraries (`CLI_ONLY=1 scripts/pack_gpu_bins.sh
# BUILD_DIR cli.tar.xz` on the CPU machine; the GPU machine lacks OpenBLAS / PCRE2). The script unpacks
# it, makes a wrapper that sets LD_LIBRARY_PATH for the CLI alone (PyTorch keeps the machine's own
# libraries), links into its lib/ any library the CLI needs that the machine has elsewhere (cuBLAS for a
# CUDA build: CLI_LIB_DIRS, default the CUDA and PyTorch library folders), checks that the CLI starts, then runs
#   python3 scripts/train_tiny.py --generate WRAPPER --chunk CHUNK --out OUT_DIR/CHUNK [options...]
# under `timeout -k 10 ${CHUNK_SECONDS:-575}`, its console teed to OUT_DIR/CHUNK.log, and exits with
# train_tiny.py's status (124 when the timeout stopped it). The warm start is train_tiny.py's --init
# (default models/kascade-tiny). TRAIN_TINY overrides the script run (tests).
# Tested by tests/scripts/test_train_chunk_gpu.sh (a stand-in CLI and trainer, no GPU).
set -uo pipefail
tarball=${1:?CLI_TARBALL}
out=${2:?OUT_DIR}
chunk=${3:?CHUNK}
shift 3
here=$(cd "$(dirname "$0")/.." && pwd)
trainer=${TRAIN_TINY:-$here/scripts/train_tiny.py}
[[ -f "$tarball" ]] || { echo "train_chunk_gpu.sh: no CLI tarball at $tarball" >&2; exit 2; }
[[ "$chunk" =~ ^[A-Za-z0-9._-]+$ ]] || { echo "train_chunk_gpu.sh: chunk name '$chunk' (letters, digits, . _ - only)" >&2; exit 2; }
cli=$(mktemp -d /tmp/kascade-cli.XXXXXX)
trap 'rm -rf "$cli"' EXIT
tar xJf "$tarball" -C "$cli" || { echo "train_chunk_gpu.sh: cannot unpack $tarball" >&2; exit 2; }
[[ -x "$cli/kascade" ]] || { echo "train_chunk_gpu.sh: $tarball holds no kascade binary" >&2; exit 2; }
mv "$cli/kascade" "$cli/kascade.bin"
cat >"$cli/kascade" <<WRAP
#!/usr/bin/env bash
LD_LIBRARY_PATH="$cli/lib:\${LD_LIBRARY_PATH:-}" exec "$cli/kascade.bin" "\$@"
WRAP
chmod +x "$cli/kascade"
# A CUDA build's CLI also needs cuBLAS, which the pack does not carry (hundreds of MB) and the GPU
# machine has: every library ldd cannot find in lib/ is looked up in CLI_LIB_DIRS (default: the CUDA
# toolkit's and the PyTorch wheels' library folders) and linked into lib/.
linked=()
if ldd_out=$(LD_LIBRARY_PATH="$cli/lib" ldd "$cli/kascade.bin" 2>/dev/null); then
  for lib in $(awk '/=> not found/ {print $1}' <<<"$ldd_out"); do
    for dir in ${CLI_LIB_DIRS:-/usr/local/cuda*/lib* /usr/local/cuda*/targets/*/lib /usr/local/lib/python3*/dist-packages/nvidia/*/lib /usr/lib/python3*/dist-packages/nvidia/*/lib}; do
      if [[ -e "$dir/$lib" ]]; then
        ln -s "$dir/$lib" "$cli/lib/$lib"
        linked+=("train_chunk_gpu.sh: linked $dir/$lib into the CLI's lib/")
        break
      fi
    done
  done
fi
if ! "$cli/kascade" --help >/dev/null 2>"$cli/help.err"; then
  echo "train_chunk_gpu.sh: the packed kascade CLI does not start:" >&2
  cat "$cli/help.err" >&2
  exit 2
fi
mkdir -p "$out"
echo "train_chunk_gpu.sh: chunk $chunk, CLI $cli/kascade, $(nproc) CPU cores, limit ${CHUNK_SECONDS:-575} s" | tee "$out/$chunk.log"
for line in "${linked[@]}"; do echo "$line" | tee -a "$out/$chunk.log"; done
PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false timeout -k 10 "${CHUNK_SECONDS:-575}" \
  python3 "$trainer" --generate "$cli/kascade" --chunk "$chunk" --out "$out/$chunk" "$@" 2>&1 | tee -a "$out/$chunk.log"
status=${PIPESTATUS[0]}
echo "train_chunk_gpu.sh: train_tiny.py exited with $status" | tee -a "$out/$chunk.log"
exit "$status"
