#!/usr/bin/env bash
# scripts/setup.sh — installs everything kascade needs to build and test on a fresh Debian machine
# (run as root, or with sudo available). Idempotent: installs only what is missing.
# Build dependencies (Debian packages): a C++20 compiler, CMake >= 3.25, Ninja, GoogleTest,
# nlohmann-json, CLI11, PCRE2, OpenBLAS, pkg-config. CUDA (nvcc) is optional and never installed here.
# Python packages of the training-data scripts (scripts/make_train_data.py, stream_train_data.py,
# tested by tests/scripts/test_stream_train_data.sh) and of the plots (scripts/plot_*.py, tested by
# the accuracy-study and calibration tests): numpy, tokenizers, jinja2, matplotlib (pip, when missing).
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
if ! python3 -c "import numpy, tokenizers, jinja2, matplotlib" 2>/dev/null; then
  echo "setup: installing numpy tokenizers jinja2 matplotlib (pip)"
  if ! python3 -m pip --version >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
  fi
  python3 -m pip install --quiet numpy tokenizers jinja2 matplotlib 2>/dev/null ||
    python3 -m pip install --quiet --break-system-packages numpy tokenizers jinja2 matplotlib
fi
echo "setup: python packages present"
