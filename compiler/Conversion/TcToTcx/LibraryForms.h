//===- LibraryForms.h - what the runtime's library calls accept -*- C++ -*-===//
//
// The forms of tc ops that the runtime's hand-written kernels (cuBLASLt
// GEMMs, norms, the fused classifier) take, and the attributes by which the
// tc-fuse-* passes tell tc-lower-to-tcx which neighbouring ops one library
// call computes. The passes decide (tc -> tc); the conversion only follows
// the attributes. Both ask these predicates, so a pass never marks an op the
// conversion would lower some other way.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_CONVERSION_TCTOTCX_LIBRARYFORMS_H
#define TC_COMPILER_CONVERSION_TCTOTCX_LIBRARYFORMS_H

#include "dialects/tc/IR/TcOps.h"

#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace tc {

/// On a tc.matmul (tc-fuse-matmul-epilogue): the GEMM also computes the
/// single-use chain after it, "bias" (an add of a [N] vector), "gelu"
/// (tanh-approximate gelu) or "bias_gelu".
constexpr llvm::StringLiteral kEpilogueAttr = "tc.epilogue";
/// On a tc.matmul: its GEMM also adds the residual of residualAdd (cuBLASLt's
/// C input, beta 1), after the bias epilogue's add (set by
/// tc-fuse-matmul-epilogue; no gelu epilogue with it).
constexpr llvm::StringLiteral kEpilogueAddendAttr = "tc.epilogue_addend";
/// On a tc.matmul (tc-fuse-matmul-epilogue): its only user, a reduce_sum
/// over the batch axes, is computed by the GEMM (K = batch * rows).
constexpr llvm::StringLiteral kFoldBatchSumAttr = "tc.fold_batch_sum";
/// On a tc.cross_entropy and the tc.cross_entropy_grad of the same logits
/// (tc-fuse-cross-entropy): one fused forward+backward library call.
constexpr llvm::StringLiteral kFusedGradAttr = "tc.fused_grad";
/// On a fused tc.cross_entropy (tc-fuse-cross-entropy): the logits are a
/// lone bf16 -> f32 cast and the gradient's only reader a lone f32 -> bf16
/// cast; the call reads and writes bf16 and both casts go.
constexpr llvm::StringLiteral kBf16LogitsAttr = "tc.bf16_logits";
/// On a layer_norm / rms_norm and the gradient that shares its row
/// statistics (tc-share-norm-stats): the same integer on both.
constexpr llvm::StringLiteral kNormStatsAttr = "tc.norm_stats";

/// On a per-tensor FP8 tc.quantize, or a tc.layer_norm_grad /
/// tc.rms_norm_grad, and a tc.reduce_sum of the same bytes (the quantize's
/// input, the gradient's dx as written) over every axis but the last
/// (tc-fuse-bias-grad): the same integer on both; the quantize_fp8 call or
/// the norm backward call writes the column sums too.
constexpr llvm::StringLiteral kColSumAttr = "tc.col_sum";
/// On a tc.matmul (a weight-gradient GEMM) and a tc.reduce_sum of the
/// columns of one of its operands over all of K (tc-fuse-bias-grad with
/// gemm-epilogue): the same integer on both; the tcx.matmul writes the sums
/// as its bias_grad_out (cuBLASLt's BGRAD epilogue).
constexpr llvm::StringLiteral kBiasGradAttr = "tc.bias_grad";
/// On a tanh tc.gelu (tc-fuse with gelu-aux): it reads, maybe through one
/// reshape, the product of a cuBLASLt GEMM or its bias add, which other ops
/// read too (a training step's backward); the GEMM's GELU_AUX(_BIAS)
/// epilogue computes it and writes the pre-activation as its aux output
/// (tc-fuse-matmul-epilogue: "gelu_aux" / "bias_gelu_aux").
constexpr llvm::StringLiteral kGeluAuxAttr = "tc.gelu_aux";
/// On a tc.slice of a fused [B, T, N] projection (tc-fuse-attention-views):
/// copied into a buffer of its own rather than read in place, so that the
/// attention backward that keeps it does not keep the whole projection
/// (headSplitSource does not look through it).
constexpr llvm::StringLiteral kCopySliceAttr = "tc.copy_slice";
/// The tc.gelu marked kGeluAuxAttr that reads `v` directly or through one
/// tc.reshape of it, or null.
GeluOp geluAuxUser(mlir::Value v);
/// On the tc.mul g * gelu'(x) that tc-autodiff makes for a tanh tc.gelu
/// ("tanh"): the GPU pipeline may compute it, and the expression of x that
/// is its other operand, in the epilogue of the GEMM that produces g
/// (cuBLASLt's DGELU).
constexpr llvm::StringLiteral kGeluGradAttr = "tc.gelu_grad";
/// On that tc.mul and the ops of gelu'(x) (tc-fuse with gelu-aux, when g is
/// a cuBLASLt GEMM's product read by the mul alone): left out of fusions;
/// tc-fuse-matmul-epilogue gives the GEMM the "dgelu" epilogue.
constexpr llvm::StringLiteral kDGeluAttr = "tc.dgelu";
/// The ops of the gelu'(x) operand of a tc.mul marked kGeluGradAttr, each read
/// only within it, and x, its one non-constant leaf; false when it is not
/// such an expression of one value.
bool geluGradOperand(MulOp mul, mlir::Value g, llvm::SmallVectorImpl<mlir::Operation *> *ops,
                     mlir::Value *x);
/// The tc.mul marked kDGeluAttr that is the only reader of `product`,
/// directly or through one tc.reshape read by it alone (set in *reshape), or
/// null.
MulOp dgeluUser(mlir::Value product, ReshapeOp *reshape);
/// The tc.reduce_sum paired with `mm` by kBiasGradAttr, and which operand it
/// sums ("lhs" or "rhs"); null when there is none.
struct BiasGradSum {
  ReduceSumOp sum;
  llvm::StringRef side;
  explicit operator bool() const { return static_cast<bool>(sum); }
};
BiasGradSum pairedBiasGradSum(MatmulOp mm);
/// The values holding the same bytes as `v` a column sum may read: v and,
/// when v is a tc.reshape, its input.
llvm::SmallVector<mlir::Value, 2> sameBytes(mlir::Value v);
/// The values a column sum of `v` may read: v and the results of the
/// tc.reshapes of v that keep its last axis.
llvm::SmallVector<mlir::Value, 2> lastAxisViews(mlir::Value v);
/// The tc.reduce_sum reading one of `views` that tc-fuse-bias-grad paired
/// with `op` (the same tc.col_sum), or null (op unpaired).
ReduceSumOp pairedColumnSum(mlir::Operation *op, llvm::ArrayRef<mlir::Value> views);

/// On a tc.attention (tc-fuse-attention-views): the output is written
/// straight into the [B, T, H, D] head transpose that reads it, which goes
/// with the call. On a tc.rotary: its result is written into its
/// transposedDestination (Rotary.cpp).
constexpr llvm::StringLiteral kOutTransposedAttr = "tc.out_transposed";
/// On a tc.rotary (tc-fuse-attention-views with rotary-in-place): its input
/// is a head-split view (headSplitSource) of a tensor whose elements in that
/// view it alone reads, and attention ops alone read its result: the kernel
/// rotates the elements where they are (features past the rotary are left
/// as they are, not copied) and attention reads the result from there
/// (Rotary.cpp).
constexpr llvm::StringLiteral kRotaryInPlaceAttr = "tc.rotary_in_place";
/// On a tc.attention_grad (tc-fuse-attention-views with rotary-in-place):
/// which of dq, dk (array<i1: dq, dk, dv>) go to a rotary (the backward's,
/// their only reader, marked kOutTransposedAttr and kRotaryInPlaceAttr)
/// that writes into its transposedDestination: the call writes the gradient
/// there and the rotary rotates it in place (BufferAssignment::stridedAttention
/// holds the view).
constexpr llvm::StringLiteral kGradsThroughRotaryAttr = "tc.grads_through_rotary";
/// On a tc.attention_grad (tc-fuse-attention-rotary): which of dq, dk
/// (array<i1: dq, dk>, a subset of kGradsThroughRotaryAttr's) the call
/// rotates before it stores them, with the tables of their rotaries (one
/// pair for both): "attention_bwd" gets rot_cos / rot_sin and rotary_of, and
/// those rotaries make no kernel (BufferAssignment::rotatedByAttention).
constexpr llvm::StringLiteral kAttentionRotaryAttr = "tc.attention_rotary";
/// On a tc.attention_grad (tc-fuse-attention-views): which of dq, dk, dv are
/// written straight into their transposedDestination (the head transpose
/// that is their only reader, or their piece of a concat that one reads).
constexpr llvm::StringLiteral kGradsTransposedAttr = "tc.grads_transposed";
/// On a tc.attention_grad (tc-fuse-attention-views): dq, dk, dv are written
/// into their pieces of the concat that forms the gradient of a fused
/// [B, T, N] qkv projection (through their transposes and reshapes, which
/// go with the call, as does the concat).
constexpr llvm::StringLiteral kGradsIntoConcatAttr = "tc.grads_into_concat";

/// The only user of `v` if it is an `Op`, else null (a fused chain's next
/// link).
template <typename Op>
Op soleUser(mlir::Value v) {
  return v.hasOneUse() ? llvm::dyn_cast<Op>(*v.getUsers().begin()) : Op();
}

/// How one tc.matmul maps onto the cuBLASLt wrapper.
struct GemmForm {
  mlir::Value lhs, rhs; ///< after folding last-two-dims transposes
  bool lhsT = false, rhsT = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1, strideLhs = -1, strideRhs = -1;
  /// Batch dims broadcast other than wholly (lhs_batch / rhs_batch).
  bool broadcast = false;
  llvm::SmallVector<int64_t> lhsBatch, rhsBatch, outBatch;
};
/// The GEMM of `op`, or nullopt when its element type has no cuBLASLt
/// kernel (it becomes a generated kernel).
std::optional<GemmForm> gemmForm(MatmulOp op);

/// A residual add a library call computes as it writes its result: `add`
/// reads the call's value (through `reshape` when given) and `residual`, of
/// the add's type and available before the call (a block argument or
/// defined earlier), so the call can read it.
struct ResidualAdd {
  AddOp add;
  ReshapeOp reshape; ///< between the value and the add, or null
  mlir::Value residual;
  explicit operator bool() const { return static_cast<bool>(add); }
};
/// The residual add a cuBLASLt GEMM can compute as its C input (beta 1):
/// `v` is what the GEMM of `mm` gives (its product, or the product plus a
/// bias), read only by a tc.add, directly or through one tc.reshape read
/// only by it. None for `mm` with alpha, a batch-summed product
/// (tc.fold_batch_sum), a broadcast batch, an FP4 GEMM or a non-float
/// result.
ResidualAdd residualAdd(MatmulOp mm, mlir::Value v);
/// The add of the residual stream's gradient to a tc.layer_norm_grad's or
/// tc.rms_norm_grad's dx (`grad`) that the library call computes (its
/// "dresidual" input); none otherwise.
ResidualAdd normGradResidualAdd(mlir::Operation *grad);
/// The values holding the dx the library call of the norm gradient `grad`
/// writes: its residual add's result when the call computes that add (else
/// its dx), then the tc.reshapes of it. A column sum of one of them is what
/// tc-fuse-bias-grad's norm-col-sums gives the call.
llvm::SmallVector<mlir::Value, 2> normGradDxViews(mlir::Operation *grad);

/// How a tc.quantize maps onto the runtime's "quantize_fp8" call: the input
/// seen as [rows, cols] (cols its last dim), one f32 scale for the tensor
/// or one per row.
struct Fp8QuantizeForm {
  int64_t rows = 0, cols = 0;
  bool rowScaling = false, colScaling = false;
  /// --fp8-scaling block128 (tc.quantize with pow2_scale, the runtime's
  /// "quantize_fp8_block"): 0 = 1x128 blocks along cols, 1 = 128x1 along
  /// rows, 2 = 128x128 (a block side below 128 is the whole dim); -1: none.
  int64_t blocks = -1;
  /// --fp8-scaling mxfp8 (f8E8M0FNU scales, the runtime's "quantize_mx"):
  /// 0 = 1x32 blocks along cols, 1 = 32x1 along rows (a block side below 32
  /// is the whole dim); -1: none.
  int64_t mxBlocks = -1;
};
/// Fills `out` and returns "", or says why `op` has no GPU form: f32/bf16
/// input, f8E4M3FN/f8E5M2 result, f32 scale_inv, block = the shape (per
/// tensor), [1, ..., 1, cols] (per row) or [rows, 1] of a matrix (per
/// column), or with pow2_scale a rank-2 input in 1x128, 128x1 or 128x128
/// blocks, or with f8E8M0FNU scale_inv a rank-2 input in 1x32 or 32x1
/// blocks.
std::string fp8QuantizeForm(QuantizeOp op, Fp8QuantizeForm *out);

/// Whether `op` is a "quantize_fp8" call with one f32 scale for the tensor
/// (filled into *out).
bool fp8PerTensorForm(QuantizeOp op, Fp8QuantizeForm *out);

/// What `v` is through reshapes and transposes (which an amax does not see).
mlir::Value throughLayout(mlir::Value v);

/// Whether `op` is a library op whose kernel can write the amax of its
/// result 0 as an `amax` result (tc-fuse-fp8-amax): a tc.layer_norm,
/// tc.rms_norm or tc.attention. (tc.attention_grad's covers the gradients
/// its amax_of names.)
bool takesAmaxOfResult0(mlir::Operation *op);
/// The `amax` result of a tc.layer_norm, tc.rms_norm, tc.attention or
/// tc.attention_grad; null when it has none or `op` is another op.
mlir::Value libraryAmaxResult(mlir::Operation *op);

/// Why the given `amax` of a per-tensor FP8 quantize (tc-fuse-fp8-amax's)
/// may not cover every element of its input, or "" when it does (or there
/// is none). The input, through reshapes and transposes, must be: result 0
/// of the norm or attention whose amax it is; the gradient, or a concat of
/// exactly the gradients, the attention_grad's amax_of names; or the
/// fusion result whose |x| the fusion's amax reduction reads.
std::string fp8AmaxCoverage(QuantizeOp op);

/// Whether `op` is a "quantize_fp8" call that can also write the column
/// sums of its input (filled into *out): per-tensor scaling of a rank-2
/// input.
bool fp8ColumnSumForm(QuantizeOp op, Fp8QuantizeForm *out);
/// The tensors whose column sums such a call writes: its input, and what
/// that reshapes (dY [B, T, N] summed over B and T).
llvm::SmallVector<mlir::Value, 2> fp8ColumnSumSources(QuantizeOp op);

/// How a tc.scaled_matmul maps onto a compute_type "fp8" tcx.matmul.
/// cuBLASLt's FP8 GEMMs are TN only: lhs [M, K] and rhs [N, K], both with K
/// contiguous; an operand stored the other way (transpose_lhs, or rhs
/// without transpose_rhs) is read from the transposed copy its tc.quantize
/// writes too. Scales: one per operand, or one per row of lhs [M, 1] and of
/// rhs [N, 1] (both stored K-contiguous: a per-row copy would need
/// per-column scales).
struct Fp8GemmForm {
  int64_t m = 0, n = 0, k = 0;
  bool lhsFromCopy = false, rhsFromCopy = false;
  bool rowScales = false; // outer-vector scales (no fast accumulation, no epilogue)
  /// block128: each operand's GEMM scales (1 = 1x128 along K, 2 =
  /// 128x128; 0 when the operands are tensor or row scaled); mxfp8: 3 for
  /// both (1x32 E8M0 blocks along K, cuBLASLt's VEC32_UE8M0).
  int64_t lhsBlocks = 0, rhsBlocks = 0;
};
/// Fills `out` and returns "", or says why `op` has no FP8 GEMM (operand
/// formats, the scale forms above, K and N multiples of 16, an operand that
/// needs a transposed copy but is not a per-tensor or per-column
/// tc.quantize).
std::string fp8GemmForm(ScaledMatmulOp op, Fp8GemmForm *out);
/// Whether the FP8 GEMM `op` can add a bias in cuBLASLt (its epilogue): a
/// per-tensor-scaled GEMM form with a bf16 result (what cuBLASLt 13.1 was
/// seen to run on the H200).
bool fp8BiasEpilogueForm(ScaledMatmulOp op);
/// Whether the tc.quantize result `q` is read through its transposed copy
/// by some tc.scaled_matmul.
bool readsTransposedCopy(mlir::Value q);

/// Row / parameter storage the norm kernels take: f32/f32, bf16/bf16 or bf16
/// rows with f32 parameters (`param`: the scale or bias, may be null).
bool normTypes(mlir::Type rows, mlir::Value param);

/// The cross-entropy launchers' form: [N, C] f32/bf16 logits, integer
/// labels, mean over the rows not ignored, no class weight.
bool crossEntropyForm(mlir::Value input, mlir::Value labels, mlir::Value weight,
                      llvm::StringRef reduction);

/// The attention launchers' form: f32/bf16/f16 q, k, v and an f32 lse.
bool attentionForm(mlir::Value query, mlir::Value lse);
/// A tc.transpose of permutation [0, 2, 1, 3] (heads <-> rows).
bool isHeadTranspose(mlir::Operation *op);
/// The head transpose an attention result `r` can be written through: its
/// first head-transpose reader, when every other reader is one `alsoReads`
/// accepts; null otherwise.
mlir::Operation *headTransposeReader(mlir::Value r,
                                     llvm::function_ref<bool(mlir::Operation *)> alsoReads);
/// Whether `u` reads the attention output `o` only as the backward's
/// `result` operand (the forward may then still write `o` transposed).
bool readsOnlyAsResult(mlir::Operation *u, mlir::Value o);
/// [batch, head, row] element strides of a [B, H, T, D] tensor stored
/// densely, and of one stored as its [B, T, H, D] head transpose.
inline llvm::SmallVector<int64_t> denseHeadStrides(mlir::RankedTensorType t) {
  return {t.getDimSize(1) * t.getDimSize(2) * t.getDimSize(3), t.getDimSize(2) * t.getDimSize(3),
          t.getDimSize(3)};
}
inline llvm::SmallVector<int64_t> transposedHeadStrides(mlir::RankedTensorType t) {
  return {t.getDimSize(1) * t.getDimSize(2) * t.getDimSize(3), t.getDimSize(3),
          t.getDimSize(1) * t.getDimSize(3)};
}

/// Where the elements of a [B, H, T, D] value `v` already lie when it is a
/// head-split view of another tensor, so that a kernel reads them in place:
/// the head transpose of a [B, T, H, D] x (an attention projection's head
/// split; x a reshape of a piece of a fused [B, T, N] qkv projection, split
/// or unit-stride last-axis slice, is read out of the projection), or a
/// unit-stride last-axis slice or a last-axis split piece of the head
/// transpose of a [B, T, H, M] x (GPT-NeoX's per-head qkv). The elements start at element `start` of
/// `whole`'s buffer, [batch, head, row] element strides `strides`.
struct HeadSplitSource {
  mlir::Value whole;
  int64_t start = 0;
  llvm::SmallVector<int64_t, 3> strides;
};
std::optional<HeadSplitSource> headSplitSource(mlir::Value v);

/// Where a [B, H, T, Dp] result `r` can be written in place (its kernel
/// taking output strides): into the head transpose that is its only reader
/// (`transpose`, `concat` null); or into its piece of a last-axis concat of
/// [B, H, T, *] values that is `r`'s only reader and whose only reader is a
/// head transpose (`concat` set: GPT-NeoX's qkv gradient), the elements then
/// at element `start` of the transpose's [B, T, H, N] result; or through its
/// head transpose and the reshape of that to [B, T, H * Dp] into its piece
/// of a last-axis concat of [B, T, *] values (`concat` and `reshape` set: the
/// gradient of tc-merge-projections' q/k/v GEMM), when every piece of that
/// concat is such a chain from a rotary or an attention backward's result
/// read by it alone, the elements then at column `start` of the concat's
/// [B, T, N] result. [batch, head, row] strides `strides`.
/// Where `p` starts along the last axis of the concatenation of `pieces`.
int64_t offsetInLastAxis(mlir::ValueRange pieces, mlir::Value p);

struct TransposedDestination {
  mlir::Operation *transpose = nullptr;
  ConcatOp concat;
  int64_t start = 0;
  llvm::SmallVector<int64_t, 3> strides;
  mlir::Operation *reshape = nullptr;
};
std::optional<TransposedDestination> transposedDestination(mlir::Value r);
/// For `p`, a piece of a [B, T, N] last-axis concat: the [B, H, T, D] result
/// of a rotary or an attention backward whose only reader is a head
/// transpose whose only reader is `p`, its reshape to [B, T, H * D]; or null.
mlir::Value headPieceSource(mlir::Value p);

/// dq, dk, dv of `grad` each -> its only reader, a head transpose -> that
/// one's only reader, a reshape -> one concat of the three along the last
/// axis of a [B, T, N] tensor: the ops [tr, reshape] per gradient and the
/// concat, or nullopt.
struct GradConcat {
  llvm::SmallVector<mlir::Operation *> chain;
  ConcatOp concat;
};
std::optional<GradConcat> gradConcat(AttentionGradOp grad);

/// GPT-NeoX's fused qkv gradient, heads interleaved: dq and dk (each
/// itself or through the backward's rotary, its only reader, of it) and dv
/// are the three inputs of one concat along the last axis of [B, H, T, W],
/// whose only reader is a head transpose, whose only reader is a reshape to
/// [B, T, H W] (`whole`): gradient j's column (h, c) lies at column
/// offsets[j] + h W + c of `whole`. rotaries: dq's and dk's (null: none).
struct GradHeadConcat {
  ConcatOp concat;
  mlir::Value whole;
  RotaryOp rotaries[2];
  int64_t offsets[3] = {0, 0, 0};
  int64_t headStride = 0;
};
std::optional<GradHeadConcat> gradHeadConcat(AttentionGradOp grad);

/// A tc.fusion that is one cast of its only input from `from` to `to`
/// element type (what tc-fuse makes of a lone precision cast).
bool isLoneCast(mlir::Operation *op, mlir::Type from, mlir::Type to);

} // namespace tc

#endif // TC_COMPILER_CONVERSION_TCTOTCX_LIBRARYFORMS_H
