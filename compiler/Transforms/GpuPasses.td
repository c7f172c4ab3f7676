//===- GpuPasses.td - passes of the CUDA path -------------*- tablegen -*-===//
//
// The CUDA path around tc-lower-to-tcx (compiler/Conversion/Passes.td): the
// tc -> tc passes that choose what library calls compute, the tcx cleanup
// after the conversion, and the memory plan.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_TRANSFORMS_GPUPASSES_TD
#define TC_COMPILER_TRANSFORMS_GPUPASSES_TD

include "mlir/Pass/PassBase.td"

def TcFuseMatmulEpilogue : Pass<"tc-fuse-matmul-epilogue", "mlir::func::FuncOp"> {
  let summary = "Mark what a matmul's cuBLASLt GEMM computes besides the product";
  let description = [{
    For each top-level tc.matmul of f32/bf16/f16 (the ones tc-lower-to-tcx
    makes a `tcx.matmul`), after folding transposes of the last two dims
    into transpose flags:

    - `tc.fold_batch_sum`: the product is lhs[b]^T @ rhs[b] per batch and
      its only user a `tc.reduce_sum` over the batch axes of the same
      element type (a Linear layer's weight gradient). The GEMM runs over
      the b*T rows of both at once (K = b*T): no reduction pass and one fp32
      accumulation instead of b rounded partial products.
    - `tc.epilogue = "bias" | "gelu" | "bias_gelu"`: the product (or that
      sum) is only read by an add of a [N] vector of its element type, and /
      or then only by a tanh-approximate gelu (not with broadcast batches).
      The GEMM's epilogue computes them.

    tc-lower-to-tcx lowers the marked matmul and the ops the marks name to
    one `tcx.matmul` (K, `epilogue`, the bias as a third input). Nothing else
    changes; unmarked IR lowers op by op.

    Before:
    ```mlir
    %0 = tc.matmul %x, %w : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    %1 = tc.add %0, %b : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
    %2 = tc.gelu %1 {approximate = "tanh"} : tensor<8x4xf32>
    ```
    After:
    ```mlir
    %0 = tc.matmul %x, %w {tc.epilogue = "bias_gelu"} : ...
    ```
  }];
  let dependentDialects = ["::tc::TCDialect"];
}

def TcFuseCrossEntropy : Pass<"tc-fuse-cross-entropy", "mlir::func::FuncOp"> {
  let summary = "Pair cross_entropy with its gradient (the fused classifier)";
  let description = [{
    For each top-level tc.cross_entropy of the library's form ([N, C]
    f32/bf16 logits, integer labels, mean, no class weight, f32 loss), finds
    the tc.cross_entropy_grad of the same logits, labels, ignore_index and
    reduction whose scale is known at the forward (a splat constant, an
    argument, or computed before it) and puts `tc.fused_grad` on both:
    tc-lower-to-tcx makes them one "cross_entropy_fwd_bwd" library call
    (llm.c's fused classifier: loss and dlogits in one pass over the
    logits).

    `tc.bf16_logits` on the forward: its logits are a lone bf16 -> f32 cast
    (a tc.fusion of one tc.cast) read only by the pair, and the gradient's
    only reader is a lone f32 -> bf16 cast (or there is no gradient). The
    call reads the bf16 logits with fp32 math (the same numbers) and writes
    the bf16 gradient (the same rounding): neither f32 copy of [N, C]
    exists.

    Before:
    ```mlir
    %l = tc.cross_entropy %x, %y : ...
    %g = tc.cross_entropy_grad %x, %y, %one : ...
    ```
    After:
    ```mlir
    %l = tc.cross_entropy %x, %y {tc.fused_grad} : ...
    %g = tc.cross_entropy_grad %x, %y, %one {tc.fused_grad} : ...
    ```
  }];
  let dependentDialects = ["::tc::TCDialect"];
}

def TcShareNormStats : Pass<"tc-share-norm-stats", "mlir::func::FuncOp"> {
  let summary = "Let a norm's gradient read the row statistics of its forward";
  let description = [{
    For each top-level tc.layer_norm / tc.rms_norm of the library's form
    (f32/f32, bf16/bf16 or bf16 rows with f32 parameters), finds the first
    unpaired gradient (layer_norm_grad / rms_norm_grad) of the same input,
    scale, axis and epsilon and puts the same `tc.norm_stats` integer on
    both. tc-lower-to-tcx then gives the forward's library call the [rows]
    f32 mean (layer_norm only) and rstd as extra outputs, and the gradient
    reads them; an unpaired gradient recomputes them with a forward call of
    its own.

    Before:
    ```mlir
    %y = tc.layer_norm %x, %w, %b {axis = 1 : i64, epsilon = 1.0e-05 : f64} : ...
    %dx, %dw, %db = tc.layer_norm_grad %x, %dy, %w {axis = 1 : i64, epsilon = 1.0e-05 : f64} : ...
    ```
    After:
    ```mlir
    %y = tc.layer_norm %x, %w, %b {axis = 1 : i64, epsilon = 1.0e-05 : f64, tc.norm_stats = 0 : i64} : ...
    %dx, %dw, %db = tc.layer_norm_grad %x, %dy, %w {axis = 1 : i64, epsilon = 1.0e-05 : f64, tc.norm_stats = 0 : i64} : ...
    ```
  }];
  let dependentDialects = ["::tc::TCDialect"];
}

def TcFuseAttentionViews : Pass<"tc-fuse-attention-views", "mlir::func::FuncOp"> {
  let summary = "Mark where fused attention writes its results in place";
  let description = [{
    For each top-level tc.attention / tc.attention_grad of the library's
    form (f32/bf16 q, k, v; f32 lse):

    - `tc.out_transposed` on the forward: its output's readers are one
      [0, 2, 1, 3] head transpose (back to [B, T, H, D]) and backward ops
      reading it as their `result` only. The call writes the output through
      the transpose (strides [T*H*D, D, H*D]) and the transpose goes.
    - `tc.grads_into_concat` on the backward: dq, dk, dv each go through
      their only reader, a head transpose, then a reshape, into one concat
      along the last axis of a [B, T, N] tensor (the gradient of a fused qkv
      projection). The call writes each into its piece of the concat (a
      view at its offset, rows of N); the transposes, reshapes and the
      concat go.
    - `tc.grads_transposed = array<i1: dq, dk, dv>` on the backward
      otherwise: which gradients are written through the head transpose
      that is their only reader.

    Reading q, k, v (and the backward's output and incoming gradient) out of
    head transposes and qkv splits needs no mark: it consumes no op, and
    tc-lower-to-tcx derives the strides from the operands.

    Before:
    ```mlir
    %o, %lse = tc.attention %q, %k, %v {causal = true, scale = 0.35 : f64} : ...
    %ot = tc.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : ...
    ```
    After:
    ```mlir
    %o, %lse = tc.attention %q, %k, %v {causal = true, scale = 0.35 : f64, tc.out_transposed} : ...
    %ot = tc.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : ...
    ```
  }];
  let dependentDialects = ["::tc::TCDialect"];
}

def TcxEliminateDeadWork : Pass<"tcx-eliminate-dead-work", "mlir::ModuleOp"> {
  let summary = "Remove tcx work nobody reads, and the kernels no launch uses";
  let description = [{
    In each straight-line function of tcx ops: a `tcx.launch`,
    `tcx.library` or `tcx.matmul` all of whose outputs are allocs that are
    only ever written is erased with those allocs, repeatedly (views nobody
    reads are erased first, so they keep nothing alive); then views, consts
    and params nobody reads go. Last, `tcx.kernel`s that no launch in the
    module names are erased.

    tc-lower-to-tcx converts op by op, so this removes what the library
    forms made redundant: a transpose folded into every matmul that read
    it, the widening cast under a bf16 fused classifier, the split of a qkv
    projection whose pieces attention reads in place.

    Before:
    ```mlir
    %t = tcx.alloc {kind = "activation"} : !tcx.buffer<4x8xf32>
    tcx.launch @f_transpose_0 ins(%w : !tcx.buffer<8x4xf32>) outs(%t : !tcx.buffer<4x8xf32>) {elements = 32 : i64}
    tcx.matmul ins(%x, %w : ...) outs(%o : ...) {transpose_rhs = true, ...}
    ```
    After:
    ```mlir
    tcx.matmul ins(%x, %w : ...) outs(%o : ...) {transpose_rhs = true, ...}
    ```
    (and `tcx.kernel @f_transpose_0` is gone).
  }];
  let dependentDialects = ["::tcx::TcxDialect"];
}

def TcxPlanMemory : Pass<"tcx-plan-memory", "mlir::func::FuncOp"> {
  let summary = "Give every transient buffer an offset in one arena";
  let description = [{
    Liveness over the straight-line function: a `tcx.alloc` lives from its
    first use to its last (uses through `tcx.view`s count; a returned buffer
    lives to the end). Buffers are placed greedily, largest first (ties:
    earliest first), each at the lowest-waste gap (best fit) among the
    already-placed buffers whose lifetimes overlap its own; offsets and sizes
    are rounded up to `alignment`. Every alloc becomes
    `tcx.view %arena[offset]` of one `tcx.arena` at the top of the function.
    Persistent buffers (tcx.param, tcx.const) and arguments are not placed.

    The function gets integer attributes (bytes): `tcx.arena_size`,
    `tcx.peak_live_bytes` (the most bytes live at one op: a lower bound of
    the arena), `tcx.activation_bytes` and `tcx.backward_bytes` (the most
    bytes of that alloc kind live at one op), `tcx.param_bytes`,
    `tcx.buffer_bytes` (non-trainable model tensors), `tcx.state_bytes`
    (optimizer state), `tcx.grad_bytes` (persistent gradients),
    `tcx.const_bytes`, `tcx.input_bytes` (the arguments).

    Before:
    ```mlir
    %a = tcx.alloc : !tcx.buffer<64xf32>
    ```
    After:
    ```mlir
    %arena = tcx.arena : !tcx.buffer<512xi8>
    %a = tcx.view %arena[0] : !tcx.buffer<512xi8> -> !tcx.buffer<64xf32>
    ```
    Fails on a function with more than one block or an op with regions.
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"256",
           "Byte alignment of every offset (a power of two)">
  ];
  let dependentDialects = ["::tcx::TcxDialect"];
}

def TcxMemoryReport : Pass<"tcx-memory-report", "mlir::ModuleOp"> {
  let summary = "Print the memory report of planned tcx functions";
  let description = [{
    Prints `tc::memoryReport` (compiler/MemoryReport.h) of the module for
    `target` to stdout: what `tc-compile --report memory` prints. The module
    is left unchanged. Functions without a plan (no `tcx.arena_size`) are
    skipped.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"sm_90\"",
           "Target whose memory the fit verdict uses (sm_90, sm_120, ...)">,
    Option<"function", "function", "std::string", /*default=*/"\"\"",
           "Step function to report (default: train_step, else every planned one)">
  ];
}

#endif // TC_COMPILER_TRANSFORMS_GPUPASSES_TD
