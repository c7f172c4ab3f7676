//===- Fp8Plan.h - the FP8 marks of tc-precision --------------*- C++ -*-===//
//
// The FP8 half of tc-precision's plan (mode=fp8): which linear-layer
// matmuls get the FP8 mark, and the mark itself, which tc-autodiff passes on
// to the backward products and tc-quantize-fp8 turns into tc.quantize +
// tc.scaled_matmul. The marks are plain string / integer attributes, so
// that they survive into the reference program like every other attribute.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_TRANSFORMS_FP8PLAN_H
#define TC_COMPILER_TRANSFORMS_FP8PLAN_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tc {

/// The scaling granularity (recipe) of an FP8 matmul: "tensor", "delayed",
/// "row", "mxfp8" or "block128".
constexpr llvm::StringLiteral kFp8Attr = "tc.fp8";
/// Which product of a linear layer: "fprop", "dgrad" or "wgrad".
constexpr llvm::StringLiteral kFp8RoleAttr = "tc.fp8_role";
/// dgrad / wgrad: the operand (0 or 1) that is the incoming gradient
/// (quantized to E5M2; every other operand is E4M3).
constexpr llvm::StringLiteral kFp8GradAttr = "tc.fp8_grad";

/// The result of @grad_step / @train_step with delayed scaling: how many
/// elements the step's FP8 quantizations saturated (f32 scalar).
constexpr llvm::StringLiteral kFp8SaturatedResult = "fp8_saturated";

/// tc-precision's per-op annotations, which PrecisionPlan.h reports.
constexpr llvm::StringLiteral kPrecisionAttr = "tc.precision";
constexpr llvm::StringLiteral kPrecisionReasonAttr = "tc.precision_reason";

/// Sets `op`'s precision and its reason.
void annotatePrecision(mlir::Operation *op, llvm::StringRef precision, llvm::StringRef reason);

/// `t` as MLIR prints it ("bf16", "f8E4M3FN").
std::string typeString(mlir::Type t);

/// The recipes tc-quantize-fp8 implements, for error messages.
constexpr llvm::StringLiteral kFp8Scalings = "tensor, delayed, row, mxfp8 or block128";

/// The largest block side of `--fp8-scaling block128` (1x128 activation and
/// gradient blocks, 128x128 weight blocks).
constexpr int64_t kFp8Block = 128;

/// "" when a product with contraction size `k` and output width `n` meets
/// what `scaling` needs, else the rule it breaks: cuBLASLt's FP8 GEMMs need
/// K and N multiples of 16 (32 with mxfp8's 1x32 blocks); block128 also
/// needs each of them at most 128 (one block, over the elements present) or
/// a multiple of 128, so that tc.scaled_matmul's blocks (an operand's shape
/// divided by its scale grid) are the quantization's.
std::string fp8SizeRule(llvm::StringRef scaling, int64_t k, int64_t n);

/// Checks an `--fp8-scaling` value: empty when it is implemented, else the
/// error (a planned recipe says "not implemented yet", an unknown one lists
/// the valid ones).
std::string checkFp8Scaling(llvm::StringRef scaling);

/// What tc-precision's fp8 options ask for (Passes.td has their meaning).
struct Fp8PlanOptions {
  std::string scaling = "tensor";
  std::vector<std::string> keepHighPrecision;
  int64_t highPrecisionFirst = 0, highPrecisionLast = 0;
  bool lmHead = false, allowFallback = false;
};

/// Puts the FP8 mark on the eligible matmuls of `fn` (already planned in
/// bf16) and rewrites the reason of every other linear-layer matmul to say
/// why it stays bf16. Errors (bad regex, no block index, a misaligned matmul
/// without allowFallback) are emitted on the op at fault; a remark says when
/// no matmul was marked.
mlir::LogicalResult markFp8Matmuls(mlir::func::FuncOp fn, const Fp8PlanOptions &options);

/// The weights of the linear layers the fp8 plan with `options` runs in FP8
/// (the layers --fp8 / --fp4-qat train quantised), for tc-run's
/// --export-onnx: parameter name -> the axis of the parameter that the
/// product contracts over (0 or 1). Alignment is not asked: the export's
/// blocks may end short. A bad option (regex, block index) sets `error`.
std::map<std::string, int64_t> fp8LinearWeights(mlir::func::FuncOp fn,
                                                const Fp8PlanOptions &options,
                                                std::string *error);

/// Copies the mark of forward matmul `fwd` onto backward product `bwd`, with
/// `role` ("dgrad" / "wgrad") and the operand index of the incoming gradient.
void markFp8Backward(mlir::Operation *fwd, mlir::Operation *bwd, llvm::StringRef role,
                     int64_t gradOperand);

/// The transformer block index in a parameter name (`(h|layers|blocks).<i>.`
/// after the start or a '.'), or -1.
int64_t blockIndexOf(llvm::StringRef name);

} // namespace tc

#endif // TC_COMPILER_TRANSFORMS_FP8PLAN_H
