#!/usr/bin/env bash
# Installs what tc needs on a fresh Debian 12 machine. Idempotent: installs
# only what is missing, so running it twice costs a second.
set -euo pipefail

PKGS=(cmake ninja-build libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
      libonnx-dev libonnx-testdata libprotobuf-dev protobuf-compiler
      googletest libgtest-dev python3
      libcpp-httplib-dev nlohmann-json3-dev  # examples/service (HTTP, JSON)
      clang-22 libclang-rt-22-dev)  # the libFuzzer targets (scripts/fuzz.sh)

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

# Test-only Python packages, pinned: the onnx release whose node tests
# (opsets up to 28) the conformance suite runs (scripts/make_node_tests.py);
# tensorboard, whose own reader checks tc's event files
# (scripts/check_tensorboard.py; 2.21 takes protobuf < 8), and matplotlib for
# scripts/plot_metrics.py; NVIDIA's cuobjdump and nvdisasm, which this CUDA
# toolkit lacks, for the SASS tests of the sm_120a cubins (test/codegen:
# scripts/test.sh fails when they are skipped on a machine with CUDA).
# torch stays out: fixtures are made by committed scripts and committed.
PY_PKGS=(numpy==2.4.6 ml_dtypes==0.6.0 protobuf==7.36.2 onnx==1.23.2
         tensorboard==2.21.0 matplotlib==3.11.2
         nvidia-cuda-cuobjdump==13.2.51 nvidia-cuda-nvdisasm==13.2.51)
py_ok() {
  python3 - "$@" <<'PYEOF' 2>/dev/null
import importlib.metadata as md, sys
for spec in sys.argv[1:]:
    name, version = spec.split("==")
    if md.version(name) != version:
        sys.exit(1)
PYEOF
}
if ! py_ok "${PY_PKGS[@]}"; then
  echo "setup: installing ${PY_PKGS[*]} (pip)"
  python3 -m pip install --quiet --disable-pip-version-check "${PY_PKGS[@]}" >/dev/null ||
    echo "setup: note: pip could not install ${PY_PKGS[*]}; the ONNX 1.23 node tests and the script tests (test/scripts) cannot run"
fi

if [ ! -d /usr/local/cuda ]; then
  echo "setup: note: no CUDA toolkit in /usr/local/cuda; building the CPU reference only"
elif [ -f /usr/local/cuda/include/cudnn.h ]; then
  # cudnn_frontend's headers for the optional cuDNN plugin (libtc_cudnn.so).
  bash "$(dirname "$0")/fetch-cudnn-frontend.sh" >/dev/null ||
    echo "setup: note: could not fetch cudnn_frontend (PyPI); building without the cuDNN plugin"
fi
