//===- Passes.h - passes of the tcx dialect ---------------------*- C++ -*-===//
//
// tcx-eliminate-dead-work, tcx-plan-memory and tcx-schedule-streams (Passes.td).
//
//===----------------------------------------------------------------------===//
#ifndef TC_DIALECTS_TCX_TRANSFORMS_PASSES_H
#define TC_DIALECTS_TCX_TRANSFORMS_PASSES_H

#include "dialects/tcx/IR/TcxOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace tcx {
#define GEN_PASS_DECL
#include "dialects/tcx/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dialects/tcx/Transforms/Passes.h.inc"
} // namespace tcx

#endif // TC_DIALECTS_TCX_TRANSFORMS_PASSES_H
