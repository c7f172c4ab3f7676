//===- PrecisionPlan.h - `tc-compile --report precision` --------*- C++ -*-===//
//
// Prints the precision plan tc-precision left on a function: its summary
// (the share of matmul FLOPs in bf16, the counts per precision), the ops by
// kind, then each op with its result type, precision, reason and ONNX node;
// or all of it as JSON.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_PRECISIONPLAN_H
#define TC_COMPILER_PRECISIONPLAN_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace tc {

/// The precision report of `func.func @<function>` in `module`. It starts
/// with its summary: the op count, the share of matmul FLOPs computed in bf16
/// ("matmul FLOPs in bf16: <bf16> of <total> (<pct>%)", 2*M*N*K per batch
/// element, attention's two products counted as the matmuls they replace)
/// and the counts per precision. Then the ops grouped by kind (count, their
/// precisions, their reasons), then one line per op: name, result type,
/// `tc.precision`, `tc.precision_reason` and the ONNX node it comes from (its
/// location; ops tc-autodiff adds carry their forward node's). Ops the pass
/// did not annotate show the element type they compute in and "(derived
/// from types)". An unknown function gives one line saying so. With `gpu`
/// (tc-gpu's lowered module for `target`) it ends with the GPU products of
/// the function and their run-time paths (GemmPaths.h).
std::string precisionReport(mlir::ModuleOp module, llvm::StringRef function,
                            mlir::ModuleOp gpu = nullptr, llvm::StringRef target = "");

/// The same as one JSON object: {"function", "ops", "matmul_flops",
/// "bf16_matmul_flops", "counts": {precision: n}, "by_kind": [{"op", "count",
/// "precisions": {...}, "reasons": {...}}], "op_list": [{"op", "type",
/// "precision", "reason", "node"}]} listing every op, with `gpu` also
/// "target" and "gpu_products" (GemmPaths.h: one object per product);
/// {"error": ...} for an unknown function.
std::string precisionReportJson(mlir::ModuleOp module, llvm::StringRef function,
                                mlir::ModuleOp gpu = nullptr, llvm::StringRef target = "");

/// The ONNX node an op comes from: the first name in its location ("" when
/// it has none).
std::string onnxNodeOf(mlir::Location loc);

} // namespace tc

#endif // TC_COMPILER_PRECISIONPLAN_H
