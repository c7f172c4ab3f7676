//===- Passes.td - passes of the tcx dialect -----------------*- tablegen -*-===//
//
// Passes over tcx alone (after tc-lower-to-tcx): the cleanup of work the
// conversion made redundant, and the memory plan. They need nothing but the
// dialect, so they live beside it, as the tc -> tc passes that need more
// (the reference executor, the library forms, the reports) live in
// compiler/Transforms.
//
//===----------------------------------------------------------------------===//
#ifndef TC_DIALECTS_TCX_TRANSFORMS_PASSES_TD
#define TC_DIALECTS_TCX_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

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

#endif // TC_DIALECTS_TCX_TRANSFORMS_PASSES_TD
