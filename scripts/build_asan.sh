#!/usr/bin/env bash
# Configures and builds the sanitizer build of tc into ${TC_ASAN_DIR:-build-asan}
# (scripts/build.sh with more options): clang-22, -DTC_SANITIZE=ON (ASan +
# UBSan, a UB report aborts, -O1, libFuzzer coverage), CPU only (no CUDA
# backend, no NVRTC: CMake's CUDA::nvrtc pulls in the driver stub
# libcuda.so.1, which clang's link keeps as a dependency and which does not
# exist without a GPU driver), no GoogleTest. Builds only what the fuzz step
# runs: tc-compile, tc-run and the ONNX fuzz target fuzz_onnx (a full build
# would add tc-opt, tc-conformance and tc-cuda-codegen for nothing). Safe to
# run twice (ninja rebuilds what changed).
#   bash scripts/build_asan.sh
#
# A clean build, measured with `time` on the 2-core development machine
# (2026-12-01, shared with other builds): 6 min 15 s wall, 8 min 7 s user
# CPU (configure included; 93 build steps). A second run is a no-op.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export TC_BUILD_DIR="${TC_ASAN_DIR:-$ROOT/build-asan}"
export TC_CMAKE_ARGS="-DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 -DTC_SANITIZE=ON
  -DTC_ENABLE_CUDA=OFF -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON -DTC_BUILD_TESTS=OFF"
exec bash "$ROOT/scripts/build.sh" tc-compile tc-run fuzz_onnx "$@"
