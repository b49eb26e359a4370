#!/usr/bin/env bash
# scripts/setup.sh — installs everything kascade needs to build and test on a fresh Debian machine
# (run as root, or with sudo available). Idempotent: installs only what is missing.
# Build dependencies (Debian packages): a C++20 compiler, CMake >= 3.25, Ninja, GoogleTest,
# nlohmann-json, CLI11, PCRE2, OpenBLAS, pkg-config. CUDA (nvcc) is optional and never installed here.
set -euo pipefail

packages=(build-essential cmake ninja-build pkg-config libgtest-dev libgmock-dev nlohmann-json3-dev
          libcli11-dev libpcre2-dev libopenblas-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: build dependencies present"
