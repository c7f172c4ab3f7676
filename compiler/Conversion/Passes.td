//===- Passes.td - conversions between the dialects -------*- tablegen -*-===//
//
// tc -> tcx (compiler/Conversion/TcToTcx/).
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_CONVERSION_PASSES_TD
#define TC_COMPILER_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def TcLowerToTcx : Pass<"tc-lower-to-tcx", "mlir::ModuleOp"> {
  let summary = "Lower every func.func of tc ops to tcx ops on buffers";
  let description = [{
    A dialect conversion (`applyPartialConversion`) with one
    `OpConversionPattern` family per file of compiler/Conversion/TcToTcx/.
    Each function keeps its name and its argument/result attributes (tc.name);
    tensors become `!tcx.buffer`s. Every value gets a buffer (the patterns
    share one `BufferAssignment`): `tcx.alloc` (kind "activation", or
    "backward" when it depends on a loss gradient, "output" when returned),
    `tcx.param` for `tc.parameter` (kind "parameter", "buffer" or
    "optimizer_state"), `tcx.const` for constants that are not inlined into
    kernels. Ops map to:

    - tc.matmul -> tcx.matmul (Matmul.cpp): an operand produced by a
      tc.transpose that swaps the last two dims is read untransposed with the
      transpose flag flipped; a 2-D rhs with a batched lhs folds the batch
      into M; other batch broadcasts use lhs_batch/rhs_batch. What
      tc-fuse-matmul-epilogue marked (`tc.epilogue`, `tc.fold_batch_sum`)
      becomes the GEMM's epilogue / K.
    - softmax/log_softmax (last axis), layer_norm, rms_norm (trailing axes)
      and their gradients (Norm.cpp; a pair marked by tc-share-norm-stats
      shares the row statistics), cross_entropy / cross_entropy_grad (mean,
      no class weight; Loss.cpp: the pair marked by tc-fuse-cross-entropy is
      one "cross_entropy_fwd_bwd"), attention / attention_grad
      (Attention.cpp), gather (axis 0 of a 2-D table) and scatter_add
      (Embedding.cpp) -> tcx.library with the launcher's sizes as attributes
      and a scratch buffer where the launcher needs one.
    - tc.fusion and every elementwise op -> a tcx.kernel (kind "fusion" or
      "elementwise") and a tcx.launch whose `ins` are one buffer per operand
      in operand order (the generated kernel's ABI; a splat constant operand
      becomes a tcx.const, constants inside a fusion stay in its body)
      (Kernels.cpp).
    - tc.reshape and contiguous tc.slice / tc.split -> tcx.view (no copy)
      (Buffers.cpp).
    - everything else (transpose, slice, concat, split, pad, broadcast,
      insert_slice, reductions, arg reductions, cumsum, nll_loss, ops the
      library forms do not cover) -> a tcx.kernel of kind "<op name>" holding
      the op, and its launch.

    A result named "update:<p>" is written in place into the buffer of
    parameter `<p>` (the op producing it gets that buffer as its output when
    no later op reads the old value and the op reads it elementwise;
    otherwise a `tcx.copy` at the end). A result named "grad:<p>" is written
    into a persistent `tcx.param "grad:<p>" {kind = "gradient"}` the same
    way. Returned values keep their order and tc.name.

    The conversion is 1:1 where no tc-fuse-* attribute says otherwise, and
    removes nothing: work whose result nobody reads (a transpose folded into
    every matmul that reads it) is left for tcx-eliminate-dead-work.

    Before:
    ```mlir
    func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
      %0 = tc.exp %x : tensor<4xf32>
      return %0 : tensor<4xf32>
    }
    ```
    After:
    ```mlir
    tcx.kernel @f_exp_0 kind("elementwise") {
    ^bb0(%a: tensor<4xf32>):
      %0 = tc.exp %a : tensor<4xf32>
      tcx.yield %0 : tensor<4xf32>
    }
    func.func @f(%x: !tcx.buffer<4xf32>) -> !tcx.buffer<4xf32> {
      %0 = tcx.alloc {kind = "output"} : !tcx.buffer<4xf32>
      tcx.launch @f_exp_0 ins(%x : !tcx.buffer<4xf32>) outs(%0 : !tcx.buffer<4xf32>) {elements = 4 : i64}
      return %0 : !tcx.buffer<4xf32>
    }
    ```
    Fails, naming the op, on an op it cannot lower (non-tc ops other than
    func.return, dynamic shapes, attention with a key mask) or a function
    with more than one block.
  }];
  let options = [
    Option<"tf32", "tf32", "bool", /*default=*/"false",
           "Let f32 matmuls use TF32 tensor cores">,
    Option<"fuseEpilogues", "fuse-epilogues", "bool", /*default=*/"true",
           "Honour tc.epilogue (bias / gelu) marks of tc-fuse-matmul-epilogue">,
    Option<"wgmmaAttention", "wgmma-attention", "bool", /*default=*/"false",
           "Attention calls take the sm_90a (wgmma) kernels where the GPU has them "
           "(tc-compile --experimental=wgmma-attention)">
  ];
  let dependentDialects = ["::tc::TCDialect", "::tcx::TcxDialect",
                           "::mlir::func::FuncDialect"];
}

#endif // TC_COMPILER_CONVERSION_PASSES_TD
