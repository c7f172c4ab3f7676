//===- Passes.h - conversions between the dialects --------------*- C++ -*-===//
#ifndef TC_COMPILER_CONVERSION_PASSES_H
#define TC_COMPILER_CONVERSION_PASSES_H

#include "dialects/tc/IR/TcOps.h"
#include "dialects/tcx/IR/TcxOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace tc {
#define GEN_PASS_DECL
#include "compiler/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/Conversion/Passes.h.inc"
} // namespace tc

#endif // TC_COMPILER_CONVERSION_PASSES_H
