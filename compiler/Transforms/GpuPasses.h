//===- GpuPasses.h - passes of the CUDA path --------------------*- C++ -*-===//
#ifndef TC_COMPILER_TRANSFORMS_GPUPASSES_H
#define TC_COMPILER_TRANSFORMS_GPUPASSES_H

#include "dialects/tc/IR/TcOps.h"
#include "dialects/tcx/IR/TcxOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace tc {
#define GEN_PASS_DECL
#include "compiler/Transforms/GpuPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/Transforms/GpuPasses.h.inc"
} // namespace tc

#endif // TC_COMPILER_TRANSFORMS_GPUPASSES_H
