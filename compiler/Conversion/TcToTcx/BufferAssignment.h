//===- BufferAssignment.h - buffers of one function's tensors ---*- C++ -*-===//
//
// The state the tc -> tcx conversion patterns share: which buffer holds
// each tensor of one func.func. It is planned once before the conversion
// (persistent destinations of "update:" / "grad:" results, which values are
// returned, which belong to the backward pass) and filled in as patterns
// convert ops, in program order.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_CONVERSION_TCTOTCX_BUFFERASSIGNMENT_H
#define TC_COMPILER_CONVERSION_TCTOTCX_BUFFERASSIGNMENT_H

#include "dialects/tc/IR/TcOps.h"
#include "dialects/tcx/IR/TcxOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <tuple>

namespace tc {

/// The buffer of every tensor of one function being converted to tcx, and
/// the persistent buffers its named results are written into.
///
/// A tensor's buffer is one of: a function argument (itself; it is retyped
/// after the conversion), a `tcx.param` (parameters, optimizer state,
/// persistent gradients), a `tcx.const` made on first use, a `tcx.view` of
/// another buffer, or a `tcx.alloc` of kind "activation", "backward" or
/// "output". Ops that hold no data (params, consts, the views planned for
/// destinations) are hoisted to the top of the function, above
/// `entryPoint`, in the order they are first needed.
class BufferAssignment {
public:
  BufferAssignment(mlir::func::FuncOp fn, mlir::SymbolTable &symbols)
      : fn(fn), symbols(symbols) {}

  /// Plans the destinations of "update:<p>" results (written in place into
  /// parameter/state <p> when no later op reads the old value) and of
  /// "grad:<p>" results (a persistent gradient), the backward values and
  /// the returned ones. `entryPoint` is an op at the top of the function
  /// that stays until the conversion is done.
  void plan(mlir::OpBuilder &b, mlir::Operation *entryPoint);

  /// The buffer of `v`: `v` itself when it is a buffer or an argument, the
  /// buffer recorded for a converted tensor, a `tcx.const` for a constant
  /// (made here on first use); null when none exists yet.
  mlir::Value bufferOf(mlir::OpBuilder &b, mlir::Value v);
  /// A new buffer for op result `result` at the builder's insertion point:
  /// its planned persistent destination, else an alloc of the kind its use
  /// implies.
  mlir::Value outBuffer(mlir::OpBuilder &b, mlir::Value result);
  /// The persistent `tcx.param` named `name`, made (hoisted) on first use.
  mlir::Value paramBuffer(mlir::OpBuilder &b, llvm::StringRef name,
                          mlir::RankedTensorType type, llvm::StringRef kind, bool trainable);
  /// `result` is `source`'s buffer seen at `byteOffset`: a tcx.view, copied
  /// into `result`'s destination when it has one (a persistent buffer cannot
  /// alias another).
  mlir::Value view(mlir::OpBuilder &b, mlir::Value result, mlir::Value source,
                   int64_t byteOffset);
  /// Records that `tensor` lives in `buffer`.
  void map(mlir::Value tensor, mlir::Value buffer) { buffers[tensor] = buffer; }
  /// A new buffer of `type` holding another layout of `tensor` (the
  /// transposed FP8 copy a tc.quantize writes beside its result): an alloc
  /// of the kind `tensor`'s own would have, never a persistent destination.
  mlir::Value companionBuffer(mlir::OpBuilder &b, mlir::Value tensor, tcx::BufferType type);
  /// Records the reference value ids of fn's tensors (tc.ref, see
  /// tagReferenceValues; a tc.fusion result takes its yielded value's) and
  /// drops the tags, so that no lowering copies them into a tcx op. An alloc
  /// outBuffer makes for a tensor with an id carries it as `ref`.
  void takeReferenceValues();

  /// Whether `v` depends on a loss gradient (it is computed in the backward).
  bool inBackward(mlir::Value v) const { return backward.contains(v); }

  /// A `tcx.library` call of `callee` with the launcher's sizes `attrs` and
  /// the scratch buffer it needs, if any.
  void library(mlir::OpBuilder &b, mlir::Location loc, llvm::StringRef callee,
               mlir::ValueRange ins, mlir::ValueRange outs,
               llvm::ArrayRef<mlir::NamedAttribute> attrs);
  /// An empty `tcx.kernel` of `kind` outlined just above the function, named
  /// `<fn>_<what>_<n>` (n counts the function's kernels).
  tcx::KernelOp newKernel(mlir::OpBuilder &b, mlir::Location loc, llvm::StringRef what,
                          llvm::StringRef kind);
  /// A `tcx.launch` of `kernel` over the elements of `op`'s first result.
  void launch(mlir::OpBuilder &b, mlir::Operation *op, tcx::KernelOp kernel,
              mlir::ValueRange ins, mlir::ValueRange outs);

  /// The buffers `ret` returns, in order, after the final copies of the
  /// named results that could not be written in place (made here).
  mlir::FailureOr<llvm::SmallVector<mlir::Value>> results(mlir::OpBuilder &b,
                                                          mlir::func::ReturnOp ret);

  /// An attention result the forward wrote straight into its [B, T, H, D]
  /// transpose, or a rotary's result rotated in place in its projection:
  /// that buffer and the [batch, head, row] strides attention reads it with.
  llvm::DenseMap<mlir::Value, std::pair<mlir::Value, llvm::SmallVector<int64_t>>>
      stridedAttention;
  /// A last-axis concat whose pieces are written in place into the head
  /// transpose that reads it -> that transpose's buffer (writeThrough).
  llvm::DenseMap<mlir::Operation *, mlir::Value> transposedConcats;
  /// Gradients an "attention_bwd" call stored rotated (kAttentionRotaryAttr):
  /// their rotary (in place, where the call wrote them) makes no kernel.
  llvm::DenseSet<mlir::Value> rotatedByAttention;
  /// A tc.quantize result -> the buffer of its transposed copy [cols, rows],
  /// which the tc.scaled_matmuls that read it transposed use.
  llvm::DenseMap<mlir::Value, mlir::Value> transposedFp8;
  /// A block128 tc.quantize result -> its scales in cuBLASLt's layouts: for
  /// the K-contiguous read of its blocks and (128x128 blocks) for its
  /// transposed copy.
  llvm::DenseMap<mlir::Value, std::pair<mlir::Value, mlir::Value>> gemmScalesFp8;
  /// (a tc.fake_quantize result, the axis its blocks are packed along) ->
  /// its quantize_fp4 copy for a block-scaled FP4 GEMM (packed codes, block
  /// scales, nvfp4's tensor scale or null).
  struct PackedFp4 {
    mlir::Value q, scales, tensorScale;
  };
  llvm::DenseMap<std::pair<mlir::Value, int64_t>, PackedFp4> packedFp4;
  /// A norm gradient op -> (mean or null, rstd) its forward's kernel writes.
  llvm::DenseMap<mlir::Operation *, std::pair<mlir::Value, mlir::Value>> normStats;
  /// A tc.reduce_sum tc-fuse-bias-grad paired with a tc.quantize -> the
  /// buffer that quantize's "quantize_fp8" call writes the column sums into.
  llvm::DenseMap<mlir::Operation *, mlir::Value> colSums;

private:
  mlir::func::FuncOp fn;
  llvm::DenseMap<mlir::Value, int64_t> referenceIds; // tensor -> reference value id
  mlir::SymbolTable &symbols;
  mlir::Operation *entryPoint = nullptr;
  unsigned kernelCount = 0;

  llvm::DenseMap<mlir::Value, mlir::Value> buffers;      // tensor -> buffer
  llvm::StringMap<mlir::Value> params;                   // name -> tcx.param
  llvm::DenseMap<mlir::Value, mlir::Value> destinations; // tensor -> persistent buffer
  // (result index, tensor, persistent buffer) copied at the end.
  llvm::SmallVector<std::tuple<unsigned, mlir::Value, mlir::Value>> finalCopies;
  // (result index, persistent buffer) written in place.
  llvm::SmallVector<std::pair<unsigned, mlir::Value>> inPlace;
  llvm::DenseSet<mlir::Value> backward; // values depending on a loss gradient
  llvm::DenseSet<mlir::Value> returned; // returned values and what they alias
};

} // namespace tc

#endif // TC_COMPILER_CONVERSION_TCTOTCX_BUFFERASSIGNMENT_H
