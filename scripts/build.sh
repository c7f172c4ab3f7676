#!/usr/bin/env bash
# Configures and builds tc into ${TC_BUILD_DIR:-build}. Safe to run twice.
# TC_CMAKE_ARGS: more configure options (scripts/build_asan.sh); the
# arguments are ninja's (targets).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${TC_BUILD_DIR:-$ROOT/build}"
JOBS="${TC_JOBS:-$(nproc)}"
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -G Ninja -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DMLIR_LINK_MLIR_DYLIB=ON ${TC_CMAKE_ARGS:-} >/dev/null
fi
ninja -C "$BUILD" -j"$JOBS" "$@"
