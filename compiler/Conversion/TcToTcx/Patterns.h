//===- Patterns.h - tc -> tcx conversion patterns ---------------*- C++ -*-===//
//
// The conversion patterns of tc-lower-to-tcx, one populate function per op
// family (Buffers.cpp, Kernels.cpp, Matmul.cpp, Norm.cpp, Loss.cpp,
// Attention.cpp, Rotary.cpp, Embedding.cpp, Fp8.cpp, Fp4.cpp), and the small helpers they
// share.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_CONVERSION_TCTOTCX_PATTERNS_H
#define TC_COMPILER_CONVERSION_TCTOTCX_PATTERNS_H

#include "compiler/Conversion/TcToTcx/BufferAssignment.h"

#include "mlir/Transforms/DialectConversion.h"

namespace tc {

/// A conversion pattern for tc op `Op` that reads and extends the buffer
/// assignment of the function being converted. Its benefit beats the
/// generated kernel (Kernels.cpp) that every tc op falls back to when the
/// pattern's form (a library call, a view) does not fit.
///
/// Patterns ask `buffers.bufferOf(tensor)` rather than the adaptor: the
/// library forms look through the tc ops that define an operand (a folded
/// transpose, a qkv split, an attention output written transposed), which
/// only the original values have, and constants get their tcx.const on first
/// use. Every pattern still replaces its op by the buffers it recorded, so
/// the conversion's value mapping and the assignment agree.
template <typename Op>
struct TcxPattern : mlir::OpConversionPattern<Op> {
  TcxPattern(mlir::MLIRContext *ctx, BufferAssignment &buffers)
      : mlir::OpConversionPattern<Op>(ctx, /*benefit=*/2), buffers(buffers) {}
  BufferAssignment &buffers;
};

void populateTcToTcxBufferPatterns(mlir::RewritePatternSet &patterns, BufferAssignment &buffers);
void populateTcToTcxKernelPatterns(mlir::RewritePatternSet &patterns, BufferAssignment &buffers);
/// `tf32`: f32 GEMMs may use TF32 tensor cores; `fuseEpilogues`: honour
/// tc.epilogue (else the bias add and gelu stay ops of their own).
void populateTcToTcxMatmulPatterns(mlir::RewritePatternSet &patterns, BufferAssignment &buffers,
                                   bool tf32, bool fuseEpilogues);
void populateTcToTcxNormPatterns(mlir::RewritePatternSet &patterns, BufferAssignment &buffers);
void populateTcToTcxLossPatterns(mlir::RewritePatternSet &patterns, BufferAssignment &buffers);
void populateTcToTcxAttentionPatterns(mlir::RewritePatternSet &patterns,
                                      BufferAssignment &buffers);
void populateTcToTcxRotaryPatterns(mlir::RewritePatternSet &patterns,
                                   BufferAssignment &buffers);
void populateTcToTcxEmbeddingPatterns(mlir::RewritePatternSet &patterns,
                                      BufferAssignment &buffers);
/// tc.quantize and tc.scaled_matmul (FP8 on sm_90); `fuseEpilogues` as for
/// tc.matmul.
void populateTcToTcxFp8Patterns(mlir::RewritePatternSet &patterns, BufferAssignment &buffers,
                                bool fuseEpilogues);
/// The tc.matmuls planFp4Gemms marked (sm_120a's block-scaled FP4 GEMMs):
/// quantize_fp4 of both operands' inputs, then nvfp4_gemm / fp4_mma_gemm.
void populateTcToTcxFp4Patterns(mlir::RewritePatternSet &patterns, BufferAssignment &buffers);
/// An error naming a tc.quantize / tc.scaled_matmul that has no GPU form
/// (success for every other op): tc-lower-to-tcx's check before it converts.
mlir::LogicalResult checkFp8Op(mlir::Operation &op);
/// Every pattern of tc-lower-to-tcx.
void populateTcToTcxPatterns(mlir::RewritePatternSet &patterns, BufferAssignment &buffers,
                             bool tf32, bool fuseEpilogues);

/// A generated `tcx.kernel` of `kind` holding a clone of `op` on block
/// arguments (without the tc.* marks that only library calls honour; then
/// `edit` applies to the clone, e.g. the rotary's strides).
tcx::KernelOp kernelOf(mlir::Operation *op, llvm::StringRef kind, BufferAssignment &buffers,
                       mlir::ConversionPatternRewriter &rewriter,
                       llvm::function_ref<void(mlir::Operation *)> edit = nullptr);
/// Lowers `op` to a generated kernel holding a clone of it (kind `kind`)
/// and its launch: the fallback of every op family.
mlir::LogicalResult lowerToKernel(mlir::Operation *op, llvm::StringRef kind,
                                  BufferAssignment &buffers,
                                  mlir::ConversionPatternRewriter &rewriter);

/// A view typed `type` of buffer `whole` from its element `start` (of
/// `type`'s element type): a piece a kernel reads or writes with strides.
inline mlir::Value elementView(mlir::OpBuilder &b, mlir::Location loc, mlir::Value whole,
                               mlir::RankedTensorType type, int64_t start) {
  int64_t bytes = (type.getElementType().getIntOrFloatBitWidth() + 7) / 8;
  return tcx::ViewOp::create(b, loc, tcx::BufferType::fromTensorType(type), whole,
                             b.getI64IntegerAttr(start * bytes));
}

struct TransposedDestination;
/// The buffer a result whose transposed destination is `d`
/// (transposedDestination) is written to: a view typed `type` at `d.start`
/// of the head transpose's buffer. A lone transpose is replaced by its
/// buffer here; a concat's buffer is made by its first piece's writer and
/// kept in `buffers.transposedConcats` for the others and the concat's
/// lowering (Rotary.cpp).
mlir::Value writeThrough(BufferAssignment &buffers, mlir::ConversionPatternRewriter &rewriter,
                         mlir::Location loc, const TransposedDestination &d,
                         mlir::RankedTensorType type);

inline mlir::RankedTensorType tensorType(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType());
}
inline int64_t numElements(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}
/// Element types the runtime's library kernels take.
inline bool isLibraryFloat(mlir::Type t) { return t.isF32() || t.isBF16(); }
inline bool isLibraryIndex(mlir::Type t) { return t.isInteger(32) || t.isInteger(64); }

} // namespace tc

#endif // TC_COMPILER_CONVERSION_TCTOTCX_PATTERNS_H
