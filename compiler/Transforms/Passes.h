//===- Passes.h - tc compiler passes ----------------------------*- C++ -*-===//
#ifndef TC_COMPILER_TRANSFORMS_PASSES_H
#define TC_COMPILER_TRANSFORMS_PASSES_H

#include "dialects/tc/IR/TcOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace tc {
#define GEN_PASS_DECL
#include "compiler/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

#endif // TC_COMPILER_TRANSFORMS_PASSES_H
