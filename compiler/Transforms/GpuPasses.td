//===- GpuPasses.td - passes of the CUDA path -------------*- tablegen -*-===//
//
// From the tc dialect to the tcx execution level, and the memory plan.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_TRANSFORMS_GPUPASSES_TD
#define TC_COMPILER_TRANSFORMS_GPUPASSES_TD

include "mlir/Pass/PassBase.td"

def TcLowerToTcx : Pass<"tc-lower-to-tcx", "mlir::ModuleOp"> {
  let summary = "Lower every func.func of tc ops to tcx ops on buffers";
  let description = [{
    Each function keeps its name and its argument/result attributes (tc.name);
    tensors become `!tcx.buffer`s. Every value gets a buffer: `tcx.alloc`
    (kind "activation", or "backward" when it depends on a loss gradient),
    `tcx.param` for `tc.parameter` (kind "parameter", "buffer" or
    "optimizer_state"), `tcx.const` for constants that are not inlined into
    kernels. Ops map to:

    - tc.matmul -> tcx.matmul: an operand produced by a tc.transpose that
      swaps the last two dims is read untransposed with the transpose flag
      flipped; a 2-D rhs with a batched lhs folds the batch into M; a
      following add of a [N] bias with the product as its only use becomes
      the "bias" epilogue; other batch broadcasts use lhs_batch/rhs_batch.
    - softmax/log_softmax (last axis), layer_norm, rms_norm (trailing axes),
      cross_entropy / cross_entropy_grad (mean, no class weight; the pair on
      the same logits fuses into one "cross_entropy_fwd_bwd"), gather
      (axis 0 of a 2-D table), scatter_add (axis 0, 2-D result) ->
      tcx.library with the launcher's sizes as attributes and a scratch
      buffer where the launcher needs one.
    - tc.fusion and every elementwise op -> a tcx.kernel (kind "fusion" or
      "elementwise") and a tcx.launch whose `ins` are one buffer per operand
      in operand order (the generated kernel's ABI; a splat constant operand
      becomes a tcx.const, constants inside a fusion stay in its body).
    - tc.reshape and contiguous tc.slice -> tcx.view (no copy).
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
    func.return, dynamic shapes) or a function with more than one block.
  }];
  let options = [
    Option<"tf32", "tf32", "bool", /*default=*/"false",
           "Let f32 matmuls use TF32 tensor cores">,
    Option<"fuseEpilogues", "fuse-epilogues", "bool", /*default=*/"true",
           "Fold bias adds into matmul epilogues">
  ];
  let dependentDialects = ["::tc::TCDialect", "::tcx::TcxDialect",
                           "::mlir::func::FuncDialect"];
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
