#!/usr/bin/env bash
# scripts/unpack_cli.sh — makes a packed kascade CLI runnable on the GPU machine:
#   scripts/unpack_cli.sh CLI_TARBALL DIR
# CLI_TARBALL: the CLI packed with its shared libraries (`CLI_ONLY=1 scripts/pack_gpu_bins.sh BUILD_DIR
# cli.tar.xz` on the CPU machine; the GPU machine lacks OpenBLAS / PCRE2). Unpacks it into DIR, renames the
# binary DIR/kascade.bin and writes DIR/kascade, a wrapper that sets LD_LIBRARY_PATH for the CLI alone (PyTorch
# keeps the machine's own libraries); every library ldd cannot find in DIR/lib (cuBLAS for a CUDA build: the
# pack does not carry hundreds of MB the machine has) is looked up in CLI_LIB_DIRS (default the CUDA toolkit's
# and the PyTorch wheels' library folders) and linked into DIR/lib, one "linked ..." line each on stdout.
# Exits 2 with a message when the tarball is missing or holds no kascade binary, or the CLI does not start.
# Used by scripts/train_chunk_gpu.sh and scripts/train_ship_call.sh; tested through
# tests/scripts/test_train_chunk_gpu.sh.
set -uo pipefail
tarball=${1:?CLI_TARBALL}
cli=${2:?DIR}
[[ -f "$tarball" ]] || { echo "unpack_cli.sh: no CLI tarball at $tarball" >&2; exit 2; }
mkdir -p "$cli"
tar xJf "$tarball" -C "$cli" || { echo "unpack_cli.sh: cannot unpack $tarball" >&2; exit 2; }
[[ -x "$cli/kascade" ]] || { echo "unpack_cli.sh: $tarball holds no kascade binary" >&2; exit 2; }
mv "$cli/kascade" "$cli/kascade.bin"
cat >"$cli/kascade" <<WRAP
#!/usr/bin/env bash
LD_LIBRARY_PATH="$cli/lib:\${LD_LIBRARY_PATH:-}" exec "$cli/kascade.bin" "\$@"
WRAP
chmod +x "$cli/kascade"
mkdir -p "$cli/lib"
# The CLI's libraries, and those of the CUDA tests when the tarball holds them (scripts/ship_checks.sh).
executables=("$cli/kascade.bin")
[[ -x "$cli/kascade_cuda_tests" ]] && executables+=("$cli/kascade_cuda_tests")
if ldd_out=$(LD_LIBRARY_PATH="$cli/lib" ldd "${executables[@]}" 2>/dev/null); then
  for lib in $(awk '/=> not found/ {print $1}' <<<"$ldd_out" | sort -u); do
    for dir in ${CLI_LIB_DIRS:-/usr/local/cuda*/lib* /usr/local/cuda*/targets/*/lib /usr/local/lib/python3*/dist-packages/nvidia/*/lib /usr/lib/python3*/dist-packages/nvidia/*/lib}; do
      if [[ -e "$dir/$lib" ]]; then
        ln -s "$dir/$lib" "$cli/lib/$lib"
        echo "unpack_cli.sh: linked $dir/$lib into the CLI's lib/"
        break
      fi
    done
  done
fi
if ! "$cli/kascade" --help >/dev/null 2>"$cli/help.err"; then
  echo "unpack_cli.sh: the packed kascade CLI does not start:" >&2
  cat "$cli/help.err" >&2
  exit 2
fi
