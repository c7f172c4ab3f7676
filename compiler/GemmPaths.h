//===- GemmPaths.h - which kernel runs each product on the GPU --*- C++ -*-===//
//
// The precision report's GPU half: every matrix product of a device
// function after tc-gpu (tcx.matmul: one cuBLASLt call) with the path it
// takes at run time: the operand and output types, the scale mode cuBLASLt
// is asked for (per tensor, outer-vector per row, 1x128 / 128x128 blocks),
// fast accumulation, the epilogue, whether its operands are FP4 fake
// quantisations (the sm_90 emulation) and what happens at run time when the
// card has no algorithm for it. Read from the lowered module itself, so the
// report says what the artifact does, not what the plan hoped for.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_GEMMPATHS_H
#define TC_COMPILER_GEMMPATHS_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/JSON.h"

#include <string>
#include <vector>

namespace tc {

/// One product of a device function.
struct GemmPath {
  std::string node;   // the ONNX node it computes ("" when none)
  std::string lhs, rhs, out; // element types ("f8E4M3FN", "bf16", ...)
  int64_t m = 0, n = 0, k = 0, batch = 1;
  /// The run-time path in words: library, types, scale mode, accumulation,
  /// epilogue ("cuBLASLt FP8 GEMM f8E4M3FN x f8E4M3FN -> bf16, per-tensor
  /// scales, fast accumulation, bias epilogue").
  std::string path;
  /// The scale mode alone: "-" (unscaled), "tensor", "row", "1x128 x
  /// 128x128", ... and the FP4 emulation ("nvfp4 emulated" / "mxfp4
  /// emulated") when a bf16 product reads fake-quantised operands.
  std::string scales;
  /// What happens when the card has no algorithm for it.
  std::string fallback;
};

/// The products of `function` in the lowered module `gpu` (tc-gpu's
/// result), in program order; empty when the function is not there.
std::vector<GemmPath> gemmPaths(mlir::ModuleOp gpu, llvm::StringRef function);

/// The text section `--report precision` appends for a GPU target: the
/// products grouped by path, with their count and ONNX nodes.
std::string gemmPathsReport(mlir::ModuleOp gpu, llvm::StringRef function,
                            llvm::StringRef target);

/// The same, one object per product (the precision report JSON's
/// "gpu_products").
llvm::json::Array gemmPathsJson(mlir::ModuleOp gpu, llvm::StringRef function);

} // namespace tc

#endif // TC_COMPILER_GEMMPATHS_H
