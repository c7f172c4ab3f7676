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
    lives to the end; a use by an op on another stream than 0 counts at
    stream 0's first `tcx.wait` for an event that stream recorded after the
    op: tcx-schedule-streams' joins). Buffers are placed greedily, largest first (ties:
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
    (optimizer state), `tcx.grad_bytes` (persistent gradients), `tcx.shadow_bytes`
    (the weights' persistent 16-bit copies),
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

def TcxScheduleStreams : Pass<"tcx-schedule-streams", "mlir::func::FuncOp"> {
  let summary = "Run weight-gradient matmuls on a second stream beside the backward";
  let description = [{
    Every `tcx.matmul` with `transpose_lhs` (a Linear layer's weight
    gradient dW = X^T dY, its K the tokens) gets `stream = 1`; the rest
    stays on stream 0, and so does one that would keep more than
    `max-held-bytes` of allocs it is the last reader of live until its join
    (before planning: the classifier's weight gradient, the last reader of
    the logits' gradient). Each starts after the work before it (`tcx.record` on
    stream 0, `tcx.wait` on stream 1) and records an event after it; stream
    0 waits for that event right before the first later stream-0 op that
    reads what the matmul writes or writes what it reads or writes, or
    after `window` stream-0 ops, or before the return. Before
    tcx-plan-memory (tc-gpu runs it there) the bytes are the allocs and
    their views, and the planner keeps a stream-1 op's buffers live until
    stream 0's wait for it; after planning they are the planned offsets
    (the plan stays as it is: where it reuses an input's bytes, the join
    comes first). A matmul the very next stream-0 op would have to wait for
    stays on stream 0. The function gets
    `tcx.side_stream_ops` (how many run on stream 1); a function that has
    records or waits already is left alone.

    Before:
    ```mlir
    tcx.matmul ins(%x, %dy : ...) outs(%dw : ...) {transpose_lhs = true, ...}
    tcx.matmul ins(%dy, %w : ...) outs(%dx : ...) {transpose_rhs = true, ...}
    tcx.launch @opt ins(%dw : ...) outs(...)
    ```
    After:
    ```mlir
    %e0 = tcx.record {stream = 0 : i64} : !tcx.event
    tcx.wait %e0 {stream = 1 : i64}
    tcx.matmul ins(%x, %dy : ...) outs(%dw : ...) {stream = 1 : i64, transpose_lhs = true, ...}
    %e1 = tcx.record {stream = 1 : i64} : !tcx.event
    tcx.matmul ins(%dy, %w : ...) outs(%dx : ...) {transpose_rhs = true, ...}
    tcx.wait %e1 {stream = 0 : i64}
    tcx.launch @opt ins(%dw : ...) outs(...)
    ```
  }];
  let options = [
    Option<"window", "window", "int64_t", /*default=*/"2",
           "The most stream-0 ops a side matmul runs beside before stream 0 waits "
           "for it (0: no limit but the bytes it touches; before planning each "
           "of those ops keeps the matmul's buffers live)">,
    Option<"maxHeldBytes", "max-held-bytes", "int64_t", /*default=*/"268435456",
           "Before planning: the most bytes of allocs a side matmul is the last reader "
           "of (kept live until its join)">
  ];
  let dependentDialects = ["::tcx::TcxDialect"];
}

#endif // TC_DIALECTS_TCX_TRANSFORMS_PASSES_TD
