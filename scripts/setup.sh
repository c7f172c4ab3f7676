#!/usr/bin/env bash
# Installs what tc needs on a fresh Debian 12 machine. Idempotent: installs
# only what is missing, so running it twice costs a second.
set -euo pipefail

PKGS=(cmake ninja-build libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
      libonnx-dev libonnx-testdata libprotobuf-dev protobuf-compiler
      googletest libgtest-dev python3)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -d /usr/local/cuda ]; then
  echo "setup: note: no CUDA toolkit in /usr/local/cuda; building the CPU reference only"
fi
