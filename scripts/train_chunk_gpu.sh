#!/usr/bin/env bash
# scripts/train_chunk_gpu.sh — one training chunk of kascade-tiny on the GPU machine, with samples
# generated while it trains (docs/model.md "Exact commands", chunks c13 onwards), as one command:
#   scripts/train_chunk_gpu.sh CLI_TARBALL OUT_DIR CHUNK [train_tiny.py options...]
# CLI_TARBALL: the kascade CLI packed with its shared libraries, made runnable here by scripts/unpack_cli.sh
# (a wrapper setting LD_LIBRARY_PATH for the CLI alone, missing libraries such as cuBLAS linked in), or a folder
# that unpack_cli.sh made already (it holds the wrapper DIR/kascade; scripts/train_ship_call.sh passes one, so the
# CLI is unpacked once per call). Then it runs
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
[[ "$chunk" =~ ^[A-Za-z0-9._-]+$ ]] || { echo "train_chunk_gpu.sh: chunk name '$chunk' (letters, digits, . _ - only)" >&2; exit 2; }
if [[ -d "$tarball" ]]; then
  cli=$(cd "$tarball" && pwd)
  [[ -x "$cli/kascade" && -x "$cli/kascade.bin" ]] ||
    { echo "train_chunk_gpu.sh: $tarball is a folder but not an unpacked CLI (scripts/unpack_cli.sh)" >&2; exit 2; }
  linked=""
else
  cli=$(mktemp -d /tmp/kascade-cli.XXXXXX)
  trap 'rm -rf "$cli"' EXIT
  linked=$("$here/scripts/unpack_cli.sh" "$tarball" "$cli") || exit 2
fi
mkdir -p "$out"
echo "train_chunk_gpu.sh: chunk $chunk, CLI $cli/kascade, $(nproc) CPU cores, limit ${CHUNK_SECONDS:-575} s" | tee "$out/$chunk.log"
[[ -z "$linked" ]] || echo "$linked" | tee -a "$out/$chunk.log"
PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false timeout -k 10 "${CHUNK_SECONDS:-575}" \
  python3 "$trainer" --generate "$cli/kascade" --chunk "$chunk" --out "$out/$chunk" "$@" 2>&1 | tee -a "$out/$chunk.log"
status=${PIPESTATUS[0]}
echo "train_chunk_gpu.sh: train_tiny.py exited with $status" | tee -a "$out/$chunk.log"
exit "$status"
