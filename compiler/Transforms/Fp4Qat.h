//===- Fp4Qat.h - FP4 quantisation-aware training in tc-precision -*- C++ -*-===//
//
// tc-precision's mode=fp4 (--fp4-qat): the linear layers the FP8 plan picks
// (Fp8Plan.h) read their weights, and with fp4-acts their activations,
// through tc.fake_quantize; everything else is the bf16 plan.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_TRANSFORMS_FP4QAT_H
#define TC_COMPILER_TRANSFORMS_FP4QAT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace tc {

/// The FP4 formats --fp4-qat takes, for error messages.
constexpr llvm::StringLiteral kFp4Formats = "nvfp4 or mxfp4";

/// Checks a --fp4-qat format: empty when valid, else the error listing the
/// valid ones.
std::string checkFp4Format(llvm::StringRef format);

/// On a forward matmul of --fp4-qat-grads (its format): tc-autodiff
/// fake-quantises the inputs of its dgrad and wgrad products too
/// (quantizeFp4Backward).
constexpr llvm::StringLiteral kFp4GradsAttr = "tc.fp4_grads";
/// With --fp4-rht as well: the wgrad inputs go through a 16-point random
/// Hadamard transform along the tokens first.
constexpr llvm::StringLiteral kFp4RhtAttr = "tc.fp4_rht";

/// The training-state entry of --fp4-qat-grads: the step of stochastic
/// rounding (f32, 0 at the start), which @grad_step reads and returns + 1.
constexpr llvm::StringLiteral kFp4StepEntry = "fp4_sr_step";

/// The seed of --fp4-qat-grads' draws (a constant of the compiled step; the
/// site's stream and the step vary them).
constexpr int64_t kFp4Seed = 0x7463667034;

/// Replaces the FP8 marks markFp8Matmuls put on `fn`'s matmuls by
/// tc.fake_quantize of their weight (16x16 blocks for nvfp4, 1x32 along K
/// for mxfp4) and, with `acts`, of their activation (1x16 / 1x32 along K),
/// and says so in the precision plan; the kept matmuls' reasons name the
/// fp4-qat plan. With `grads` the matmuls get kFp4GradsAttr, with `rht`
/// kFp4RhtAttr.
void applyFp4Qat(mlir::func::FuncOp fn, llvm::StringRef format, bool acts, bool grads,
                 bool rht);

/// --fp4-qat-grads on the backward product `bwd` (role "dgrad" or "wgrad")
/// of forward matmul `fwd`: its operand `gradOperand` (the incoming
/// gradient) read through a stochastically rounded tc.fake_quantize keyed
/// by (kFp4Seed, the site, the step entry), the other operand (W for dgrad,
/// X for wgrad) re-quantised from the forward's unquantised value with
/// nearest even, both in blocks along bwd's contraction axis (1x16 / 1x32:
/// Transformer Engine's NVFP4 recipe rounds gradients stochastically; a
/// 16x16-blocked weight is kept, its blocks serve both directions). With
/// kFp4RhtAttr both wgrad operands are first multiplied, in groups of 16
/// along the contraction (token) axis, by Transformer Engine's wgrad RHT
/// matrix diag(signs) H16 / 4 (orthogonal: the product is unchanged before
/// quantisation). Fails, naming the layer, when the tokens are not a
/// multiple of 16.
mlir::LogicalResult quantizeFp4Backward(mlir::OpBuilder &b, mlir::Operation *fwd,
                                        mlir::Operation *bwd, llvm::StringRef role,
                                        int64_t gradOperand);

/// Appends "update:fp4_sr_step" (the step + 1) to `results` / `names` when
/// `fn` reads the step entry (quantizeFp4Backward made it).
void appendFp4StepUpdate(mlir::OpBuilder &b, mlir::func::FuncOp fn,
                         llvm::SmallVectorImpl<mlir::Value> &results,
                         llvm::SmallVectorImpl<mlir::Attribute> &names);

/// On a tc.matmul of two fake-quantised FP4 operands that runs on sm_120a's
/// block-scaled path: "nvfp4" (cuBLASLt's VEC16_UE4M3 GEMM) or "mxfp4"
/// (tc's mma.sync kind::mxf4 kernel). tc-lower-to-tcx lowers such a product
/// to quantize_fp4 calls of its operands' inputs and that GEMM.
constexpr llvm::StringLiteral kFp4GemmAttr = "tc.fp4_gemm";

/// A product both of whose operands tc.fake_quantize writes in one format
/// with blocks along the product's K: out [M, N] = lhs [M, K] rhs [K, N]
/// with lhs's leading dims folded into M (not transposed when batched) and
/// a 2-D rhs. A 16x16-blocked operand's blocks lie along both of its axes
/// (the same values whichever axis the tc.fake_quantize names).
struct Fp4GemmForm {
  mlir::Operation *lhs = nullptr, *rhs = nullptr; // the tc.fake_quantize ops
  int64_t lhsAxis = 0, rhsAxis = 0;               // their contraction axes (the blocks')
  std::string format;
  int64_t m = 0, n = 0, k = 0;
};

/// "" when `mm` (a tc.matmul) has that form (filled into *out), else why it
/// has not ("its lhs is not fake-quantised", "K 48 is not a multiple of
/// 32", ...).
std::string fp4GemmForm(mlir::Operation *mm, Fp4GemmForm *out);

/// After the training pipeline, for `target`: each product of fake-quantised
/// FP4 operands says in its precision reason which path it takes there. On
/// sm_120 (sm_120a) a product of fp4GemmForm is marked kFp4GemmAttr (the
/// block-scaled GEMM, the sums in the tensor cores' order); the others,
/// and every one on sm_90 and the CPU, are emulated through bf16 GEMMs on
/// the fake-quantised operands (exact products, fp32 sums in another order
/// than sm_120a's hardware). Returns how many were marked.
int64_t planFp4Gemms(mlir::ModuleOp module, llvm::StringRef target);

} // namespace tc

#endif // TC_COMPILER_TRANSFORMS_FP4QAT_H
