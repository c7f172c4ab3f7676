//===- PrecisionReport.h - `tc-compile --report precision` -----*- C++ -*-===//
//
// Prints the precision plan tc-precision left on a function: each op with its
// result type, precision and reason, then the counts per precision and the
// share of matmul FLOPs computed in bf16.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_PRECISIONREPORT_H
#define TC_COMPILER_PRECISIONREPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace tc {

/// The precision report of `func.func @<function>` in `module` (one line per
/// op: name, result type, `tc.precision`, `tc.precision_reason`; ops the pass
/// did not annotate, like the backward tc-autodiff adds, show the element
/// type they compute in and "(derived from types)"). Then "counts:" per
/// precision and "matmul FLOPs in bf16: <bf16> of <total> (<pct>%)", FLOPs
/// being 2*M*N*K per batch element. An unknown function gives one line
/// saying so.
std::string precisionReport(mlir::ModuleOp module, llvm::StringRef function);

} // namespace tc

#endif // TC_COMPILER_PRECISIONREPORT_H
