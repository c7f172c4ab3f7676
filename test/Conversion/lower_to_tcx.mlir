// RUN: tc-opt %s --split-input-file --tc-lower-to-tcx --verify-diagnostics | FileCheck %s
// RUN: tc-opt %s --split-input-file --tc-lower-to-tcx="wgmma-attention=true" --verify-diagnostics | FileCheck %s --check-prefix=WGMMA

// Tests that an elementwise op becomes a kernel and a launch with one input
// per operand (the kernel ABI): the splat constant is a tcx.const buffer and
// a block argument, and the returned buffer is of kind "output".
// CHECK-LABEL: tcx.kernel @ew_mul_0 kind("elementwise")
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<4x8xf32>, %[[B:.+]]: tensor<f32>):
// CHECK-NEXT: %[[M:.+]] = tc.mul %[[A]], %[[B]]
// CHECK-NEXT: tcx.yield %[[M]] : tensor<4x8xf32>
// CHECK-LABEL: func.func @ew
// CHECK-SAME: (%[[X:.+]]: !tcx.buffer<4x8xf32> {tc.name = "x"}) -> (!tcx.buffer<4x8xf32> {tc.name = "y"})
// CHECK-NEXT: %[[C:.+]] = tcx.const dense<2.000000e+00> : tensor<f32> -> <f32>
// CHECK-NEXT: %[[O:.+]] = tcx.alloc {kind = "output"} : <4x8xf32>
// CHECK-NEXT: tcx.launch @ew_mul_0 ins(%[[X]], %[[C]] : !tcx.buffer<4x8xf32>, !tcx.buffer<f32>) outs(%[[O]] : !tcx.buffer<4x8xf32>) {elements = 32 : i64}
// CHECK-NEXT: return %[[O]]
func.func @ew(%x: tensor<4x8xf32> {tc.name = "x"}) -> (tensor<4x8xf32> {tc.name = "y"}) {
  %c = tc.constant dense<2.0> : tensor<f32>
  %0 = tc.mul %x, %c : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that a repeated operand is passed once per operand (x * x takes two
// pointers, both the same buffer), and the body one block argument each.
// CHECK-LABEL: tcx.kernel @square_mul_0 kind("elementwise")
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<8xf32>, %[[B:.+]]: tensor<8xf32>):
// CHECK-NEXT: tc.mul %[[A]], %[[B]]
// CHECK-LABEL: func.func @square
// CHECK-SAME: (%[[X:.+]]: !tcx.buffer<8xf32>)
// CHECK: tcx.launch @square_mul_0 ins(%[[X]], %[[X]] : !tcx.buffer<8xf32>, !tcx.buffer<8xf32>)
func.func @square(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = tc.mul %x, %x : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that the lowering leaves how a kernel is launched to codegen
// (tcx-generate-cuda runs after it): no grid, block, n or meta on the launch,
// no cuda_kernel on the kernel, and the body holds the op as it was.
// CHECK-LABEL: tcx.kernel @codegen_transpose_0 kind("transpose") {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tc.transpose %{{.+}} {permutation = array<i64: 1, 0>} :
// CHECK-NEXT: tcx.yield
// CHECK-LABEL: tcx.kernel @codegen_fusion_1 kind("fusion") {
// CHECK-LABEL: func.func @codegen
// CHECK: tcx.launch @codegen_transpose_0 ins({{.+}}) outs({{.+}}) {elements = 32 : i64}
// CHECK: tcx.launch @codegen_fusion_1 ins({{.+}}) outs({{.+}}) {elements = 32 : i64}
func.func @codegen(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %t = tc.transpose %x {permutation = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  %y = tc.fusion (%t) : (tensor<8x4xf32>) -> tensor<8x4xf32> {
  ^bb0(%a: tensor<8x4xf32>):
    %0 = tc.tanh %a : tensor<8x4xf32>
    tc.yield %0 : tensor<8x4xf32>
  }
  return %y : tensor<8x4xf32>
}

// -----

// Tests that a split along a non-leading axis is one kernel launch writing
// every piece (outs in result order); along the leading axis it is views.
// CHECK-LABEL: tcx.kernel @qkv_split_0 kind("split")
// CHECK-NEXT: ^bb0(%{{.+}}: tensor<2x12xf32>):
// CHECK-NEXT: %[[S:.+]]:3 = tc.split
// CHECK-NEXT: tcx.yield %[[S]]#0, %[[S]]#1, %[[S]]#2
// CHECK-LABEL: func.func @qkv
// CHECK: tcx.launch @qkv_split_0 ins(%{{.+}} : !tcx.buffer<2x12xf32>) outs(%{{.+}}, %{{.+}}, %{{.+}} : !tcx.buffer<2x4xf32>, !tcx.buffer<2x6xf32>, !tcx.buffer<2x2xf32>) {elements = 8 : i64}
// CHECK: tcx.view %{{.+}}[0]
// CHECK: tcx.view %{{.+}}[16]
func.func @qkv(%x: tensor<2x12xf32>) -> (tensor<2x4xf32>, tensor<2x6xf32>, tensor<2x2xf32>, tensor<1x4xf32>, tensor<1x4xf32>) {
  %q, %k, %v = tc.split %x {axis = 1 : i64} : tensor<2x12xf32> -> tensor<2x4xf32>, tensor<2x6xf32>, tensor<2x2xf32>
  %a, %b = tc.split %q {axis = 0 : i64} : tensor<2x4xf32> -> tensor<1x4xf32>, tensor<1x4xf32>
  return %q, %k, %v, %a, %b : tensor<2x4xf32>, tensor<2x6xf32>, tensor<2x2xf32>, tensor<1x4xf32>, tensor<1x4xf32>
}

// -----

// Tests that a matmul folds the weight transpose into transpose_rhs, the
// batch of a 3-D lhs against a 2-D rhs into M, and the bias add that
// tc-fuse-matmul-epilogue marked into the epilogue. The transpose is still
// lowered (tcx-eliminate-dead-work removes it: nothing reads it).
// CHECK-LABEL: tcx.kernel @linear_transpose_0 kind("transpose")
// CHECK-LABEL: func.func @linear
// CHECK-DAG: %[[W:.+]] = tcx.param "w" {trainable} : <32x16xf32>
// CHECK-DAG: %[[B:.+]] = tcx.param "b" {trainable} : <32xf32>
// CHECK: %[[O:.+]] = tcx.alloc {kind = "output"} : <2x8x32xf32>
// CHECK-NEXT: tcx.matmul ins(%{{.+}}, %[[W]], %[[B]] : {{.+}}) outs(%[[O]] : <2x8x32xf32>) {epilogue = "bias", k = 16 : i64, m = 16 : i64, n = 32 : i64, transpose_rhs = true}
// CHECK-NEXT: return %[[O]]
func.func @linear(%x: tensor<2x8x16xf32>) -> tensor<2x8x32xf32> {
  %w = tc.parameter "w" {trainable} : tensor<32x16xf32>
  %b = tc.parameter "b" {trainable} : tensor<32xf32>
  %wt = tc.transpose %w {permutation = array<i64: 1, 0>} : tensor<32x16xf32> -> tensor<16x32xf32>
  %0 = tc.matmul %x, %wt {tc.epilogue = "bias"} : tensor<2x8x16xf32>, tensor<16x32xf32> -> tensor<2x8x32xf32>
  %1 = tc.add %0, %b : tensor<2x8x32xf32>, tensor<32xf32> -> tensor<2x8x32xf32>
  return %1 : tensor<2x8x32xf32>
}

// -----

// Tests that batched attention-style matmuls keep their batch (strided) and
// that a partially broadcast batch uses lhs_batch/rhs_batch.
// CHECK-LABEL: func.func @batched
// CHECK: tcx.matmul {{.+}} {batch = 8 : i64, k = 16 : i64, m = 4 : i64, n = 4 : i64, transpose_rhs = true}
// CHECK: tcx.matmul {{.+}} {k = 4 : i64, lhs_batch = array<i64: 2, 1>, m = 4 : i64, n = 4 : i64, rhs_batch = array<i64: 1, 4>}
func.func @batched(%q: tensor<2x4x4x16xf32>, %k: tensor<2x4x4x16xf32>, %a: tensor<2x1x4x4xf32>, %b: tensor<1x4x4x4xf32>)
    -> (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) {
  %s = tc.matmul %q, %k {transpose_rhs = true} : tensor<2x4x4x16xf32>, tensor<2x4x4x16xf32> -> tensor<2x4x4x4xf32>
  %p = tc.matmul %a, %b : tensor<2x1x4x4xf32>, tensor<1x4x4x4xf32> -> tensor<2x4x4x4xf32>
  return %s, %p : tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>
}

// -----

// Tests that a weight gradient summed over the batch (lhs^T @ rhs per batch
// element, then reduce_sum over the batch axes) that tc-fuse-matmul-epilogue
// marked is one GEMM over all rows: K = 2 x 8, no batch, no reduction
// kernel. Unmarked, the sum is a kernel of its own.
// CHECK-LABEL: func.func @weight_grad
// CHECK: tcx.matmul ins({{.+}} : !tcx.buffer<2x8x16xf32>, !tcx.buffer<2x8x32xf32>) outs({{.+}} : <1x16x32xf32>) {k = 16 : i64, m = 16 : i64, n = 32 : i64, transpose_lhs = true}
// CHECK-NOT: tcx.launch
// CHECK: return
// CHECK-LABEL: func.func @not_batch_sum
// CHECK: tcx.matmul {{.+}} {batch = 2 : i64, k = 8 : i64, m = 16 : i64, n = 32 : i64, transpose_lhs = true}
// CHECK: tcx.launch
func.func @weight_grad(%x: tensor<2x8x16xf32>, %dy: tensor<2x8x32xf32>) -> tensor<1x16x32xf32> {
  %p = tc.matmul %x, %dy {transpose_lhs = true, tc.fold_batch_sum} : tensor<2x8x16xf32>, tensor<2x8x32xf32> -> tensor<2x16x32xf32>
  %s = tc.reduce_sum %p {axes = array<i64: 0>, keepdims = true} : tensor<2x16x32xf32> -> tensor<1x16x32xf32>
  return %s : tensor<1x16x32xf32>
}
func.func @not_batch_sum(%x: tensor<2x8x16xf32>, %dy: tensor<2x8x32xf32>) -> tensor<2x32xf32> {
  %p = tc.matmul %x, %dy {transpose_lhs = true} : tensor<2x8x16xf32>, tensor<2x8x32xf32> -> tensor<2x16x32xf32>
  %s = tc.reduce_sum %p {axes = array<i64: 1>} : tensor<2x16x32xf32> -> tensor<2x32xf32>
  return %s : tensor<2x32xf32>
}

// -----

// Tests that reshape and a contiguous slice are views of the same buffer
// (byte offset 2 rows x 8 x 4 bytes), and a strided slice is a kernel.
// CHECK-LABEL: tcx.kernel @views_slice_0 kind("slice")
// CHECK-LABEL: func.func @views
// CHECK-SAME: (%[[X:.+]]: !tcx.buffer<4x8xf32>)
// CHECK-NEXT: %[[R:.+]] = tcx.view %[[X]][0] : <4x8xf32> -> <32xf32>
// CHECK-NEXT: %[[S:.+]] = tcx.view %[[X]][64] : <4x8xf32> -> <2x8xf32>
// CHECK-NEXT: %[[T:.+]] = tcx.alloc {kind = "output"} : <4x4xf32>
// CHECK-NEXT: tcx.launch @views_slice_0 ins(%[[X]] : !tcx.buffer<4x8xf32>) outs(%[[T]] : !tcx.buffer<4x4xf32>)
// CHECK-NEXT: return %[[R]], %[[S]], %[[T]]
func.func @views(%x: tensor<4x8xf32>) -> (tensor<32xf32>, tensor<2x8xf32>, tensor<4x4xf32>) {
  %r = tc.reshape %x : tensor<4x8xf32> to tensor<32xf32>
  %s = tc.slice %x {starts = array<i64: 2, 0>, strides = array<i64: 1, 1>} : tensor<4x8xf32> to tensor<2x8xf32>
  %t = tc.slice %x {starts = array<i64: 0, 0>, strides = array<i64: 1, 2>} : tensor<4x8xf32> to tensor<4x4xf32>
  return %r, %s, %t : tensor<32xf32>, tensor<2x8xf32>, tensor<4x4xf32>
}

// -----

// Tests that a norm's gradient reads the row statistics its forward kernel
// writes ([rows] f32 mean and rstd, live from the forward to the backward)
// when tc-share-norm-stats paired them (the same tc.norm_stats), and that an
// unpaired gradient runs the forward kernel first for them (rms_norm here:
// rstd only, no bias gradient).
// CHECK-LABEL: func.func @norm_grads
// CHECK: %[[MEAN:.+]] = tcx.alloc : <16xf32>
// CHECK: %[[RSTD:.+]] = tcx.alloc : <16xf32>
// CHECK: tcx.library "layer_norm_fwd" ins({{.+}}) outs(%{{.+}}, %[[MEAN]], %[[RSTD]] : !tcx.buffer<16x8xf32>, !tcx.buffer<16xf32>, !tcx.buffer<16xf32>)
// CHECK: tcx.library "layer_norm_bwd" ins(%{{.+}}, %{{.+}}, %{{.+}}, %[[MEAN]], %[[RSTD]] : {{.+}}) outs({{.+}} : !tcx.buffer<16x8xf32>, !tcx.buffer<8xf32>, !tcx.buffer<8xf32>, !tcx.buffer<{{[0-9]+}}xi8>) {cols = 8 : i64, has_bias = true, has_weight = true, rows = 16 : i64}
// CHECK: %[[R2:.+]] = tcx.alloc {kind = "scratch"} : <16xf32>
// CHECK: tcx.library "rms_norm_fwd" ins({{.+}}) outs(%{{.+}}, %[[R2]] : !tcx.buffer<16x8xf32>, !tcx.buffer<16xf32>)
// CHECK: tcx.library "rms_norm_bwd" ins(%{{.+}}, %{{.+}}, %{{.+}}, %[[R2]] : {{.+}}) {cols = 8 : i64, has_bias = false, has_weight = true, rows = 16 : i64}
func.func @norm_grads(%x: tensor<16x8xf32>, %dy: tensor<16x8xf32>)
    -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<16x8xf32>, tensor<8xf32>) {
  %g = tc.parameter "g" : tensor<8xf32>
  %b = tc.parameter "b" : tensor<8xf32>
  %y = tc.layer_norm %x, scale %g, bias %b {axis = 1 : i64, epsilon = 1.0e-05 : f64, tc.norm_stats = 0 : i64}
      : (tensor<16x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<16x8xf32>
  %dx, %dg, %db = tc.layer_norm_grad %x, %dy, scale %g {axis = 1 : i64, epsilon = 1.0e-05 : f64, tc.norm_stats = 0 : i64}
      : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<8xf32>) -> (tensor<16x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %rx, %rg = tc.rms_norm_grad %x, %dy, scale %g {axis = 1 : i64, epsilon = 1.0e-06 : f64}
      : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<8xf32>) -> (tensor<16x8xf32>, tensor<8xf32>)
  return %y, %dx, %dg, %db, %rx, %rg : tensor<16x8xf32>, tensor<16x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<16x8xf32>, tensor<8xf32>
}

// -----

// Tests fused attention and its gradient as library calls: the sizes
// (grouped-query: 4 query heads, 2 key/value heads), scale and causal flag
// as attributes, lse in f32, and the backward's scratch (D = rowsum(dout *
// out): 2 x 4 x 16 floats in 256-byte granules). With wgmma-attention both
// calls ask for the sm_90a kernels.
// CHECK-LABEL: func.func @attention
// CHECK: tcx.library "attention_fwd" ins(%{{.+}}, %{{.+}}, %{{.+}} : !tcx.buffer<2x4x16x8xbf16>, !tcx.buffer<2x2x16x8xbf16>, !tcx.buffer<2x2x16x8xbf16>) outs(%{{.+}}, %{{.+}} : !tcx.buffer<2x4x16x8xbf16>, !tcx.buffer<2x4x16xf32>) {batch = 2 : i64, causal = true, d = 8 : i64, dv = 8 : i64, heads = 4 : i64,
// CHECK-SAME: k_strides = array<i64: 256, 128, 8>, kv_heads = 2 : i64, o_strides = array<i64: 512, 128, 8>, q_strides = array<i64: 512, 128, 8>, scale = 3.500000e-01 : f64, tk = 16 : i64, tq = 16 : i64, v_strides = array<i64: 256, 128, 8>}
// CHECK: %[[SCR:.+]] = tcx.alloc {kind = "scratch"} : <512xi8>
// CHECK: tcx.library "attention_bwd" ins({{.+}}) outs(%{{.+}}, %{{.+}}, %{{.+}}, %[[SCR]] : !tcx.buffer<2x4x16x8xbf16>, !tcx.buffer<2x2x16x8xbf16>, !tcx.buffer<2x2x16x8xbf16>, !tcx.buffer<512xi8>) {batch = 2 : i64, causal = true
// CHECK-NOT: wgmma
// WGMMA-LABEL: func.func @attention
// WGMMA: tcx.library "attention_fwd" {{.+}} v_strides = array<i64: 256, 128, 8>, wgmma = true}
// WGMMA: tcx.library "attention_bwd" {{.+}} wgmma = true}
func.func @attention(%q: tensor<2x4x16x8xbf16>, %k: tensor<2x2x16x8xbf16>, %v: tensor<2x2x16x8xbf16>,
                     %g: tensor<2x4x16x8xbf16>)
    -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x2x16x8xbf16>, tensor<2x2x16x8xbf16>) {
  %o, %lse = tc.attention %q, %k, %v {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x2x16x8xbf16>, tensor<2x2x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
  %dq, %dk, %dv = tc.attention_grad %q, %k, %v, %o, %lse, %g {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x2x16x8xbf16>, tensor<2x2x16x8xbf16>,
         tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x2x16x8xbf16>, tensor<2x2x16x8xbf16>)
  return %o, %dq, %dk, %dv : tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x2x16x8xbf16>, tensor<2x2x16x8xbf16>
}

// -----

// Tests that f16 attention (the fp16 plan's) is the same library calls on
// f16 buffers, lse still f32.
// CHECK-LABEL: func.func @attention_f16
// CHECK: tcx.library "attention_fwd" ins(%{{.+}}, %{{.+}}, %{{.+}} : !tcx.buffer<1x2x16x8xf16>, !tcx.buffer<1x2x16x8xf16>, !tcx.buffer<1x2x16x8xf16>) outs(%{{.+}}, %{{.+}} : !tcx.buffer<1x2x16x8xf16>, !tcx.buffer<1x2x16xf32>)
// CHECK: tcx.library "attention_bwd" ins({{.+}}) outs(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : !tcx.buffer<1x2x16x8xf16>, !tcx.buffer<1x2x16x8xf16>, !tcx.buffer<1x2x16x8xf16>, !tcx.buffer<256xi8>)
func.func @attention_f16(%q: tensor<1x2x16x8xf16>, %g: tensor<1x2x16x8xf16>)
    -> (tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>) {
  %o, %lse = tc.attention %q, %q, %q {scale = 0.35 : f64}
      : (tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>)
        -> (tensor<1x2x16x8xf16>, tensor<1x2x16xf32>)
  %dq, %dk, %dv = tc.attention_grad %q, %q, %q, %o, %lse, %g {scale = 0.35 : f64}
      : (tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>,
         tensor<1x2x16x8xf16>, tensor<1x2x16xf32>, tensor<1x2x16x8xf16>)
        -> (tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>)
  return %o, %dq : tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>
}

// -----

// Tests that attention reads q, k, v straight out of [B, T, H, D] head
// splits (strides [T*H*D, D, H*D] instead of a transpose each) and, as
// tc-fuse-attention-views marked, writes its output into the transpose back
// to [B, T, H, D] that reads it, the backward reading that output and its
// incoming gradient the same way and writing dq and dv into their
// transposes; dk (returned as is) stays contiguous. (The head
// transposes of q, k, v and the gradient are still lowered: nothing reads
// them, tcx-eliminate-dead-work removes them.)
// CHECK-LABEL: func.func @attention_strided
// CHECK: tcx.library "attention_fwd" ins(%arg0, %arg1, %arg2 : !tcx.buffer<2x16x4x8xbf16>, !tcx.buffer<2x16x4x8xbf16>, !tcx.buffer<2x16x4x8xbf16>) outs(%[[O:.+]], %{{.+}} : !tcx.buffer<2x16x4x8xbf16>, !tcx.buffer<2x4x16xf32>)
// CHECK-SAME: k_strides = array<i64: 512, 8, 32>
// CHECK-SAME: o_strides = array<i64: 512, 8, 32>
// CHECK-SAME: q_strides = array<i64: 512, 8, 32>
// CHECK-NOT: tcx.launch
// CHECK: tcx.library "attention_bwd" ins(%arg0, %arg1, %arg2, %[[O]], %{{.+}}, %arg3 : {{.+}}) outs(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : !tcx.buffer<2x16x4x8xbf16>, !tcx.buffer<2x4x16x8xbf16>, !tcx.buffer<2x16x4x8xbf16>, !tcx.buffer<512xi8>)
// CHECK-SAME: dk_strides = array<i64: 512, 128, 8>
// CHECK-SAME: do_strides = array<i64: 512, 8, 32>
// CHECK-SAME: dq_strides = array<i64: 512, 8, 32>
// CHECK-NOT: tcx.launch
// CHECK: return
func.func @attention_strided(%q: tensor<2x16x4x8xbf16>, %k: tensor<2x16x4x8xbf16>, %v: tensor<2x16x4x8xbf16>,
                             %g: tensor<2x16x4x8xbf16>)
    -> (tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x16x4x8xbf16>) {
  %qt = tc.transpose %q {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
  %kt = tc.transpose %k {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
  %vt = tc.transpose %v {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
  %gt = tc.transpose %g {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
  %o, %lse = tc.attention %qt, %kt, %vt {scale = 0.35 : f64, causal = true, tc.out_transposed}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
  %ot = tc.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %dq, %dk, %dv = tc.attention_grad %qt, %kt, %vt, %o, %lse, %gt {scale = 0.35 : f64, causal = true, tc.grads_transposed = array<i1: true, false, true>}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>,
         tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
  %dqt = tc.transpose %dq {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %dvt = tc.transpose %dv {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  return %ot, %dqt, %dk, %dvt : tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x16x4x8xbf16>
}

// -----

// Tests the dynamo exporter's form of the fused qkv split, three unit-stride
// slices of the last axis: q, k, v are read in place as for tc.split (views
// at byte offsets 0, 64 and 128, rows of 96 elements), no gather kernel.
// CHECK-LABEL: func.func @attention_qkv_slices
// CHECK-DAG: %[[Q:.+]] = tcx.view %arg0[0] : <2x16x96xbf16> -> <2x16x4x8xbf16>
// CHECK-DAG: %[[K:.+]] = tcx.view %arg0[64] : <2x16x96xbf16> -> <2x16x4x8xbf16>
// CHECK-DAG: %[[V:.+]] = tcx.view %arg0[128] : <2x16x96xbf16> -> <2x16x4x8xbf16>
// CHECK: tcx.library "attention_fwd" ins(%[[Q]], %[[K]], %[[V]] :
// CHECK-SAME: q_strides = array<i64: 1536, 8, 96>
// CHECK-SAME: v_strides = array<i64: 1536, 8, 96>
func.func @attention_qkv_slices(%qkv: tensor<2x16x96xbf16>) -> tensor<2x4x16x8xbf16> {
  %q = tc.slice %qkv {starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : tensor<2x16x96xbf16> to tensor<2x16x32xbf16>
  %k = tc.slice %qkv {starts = array<i64: 0, 0, 32>, strides = array<i64: 1, 1, 1>} : tensor<2x16x96xbf16> to tensor<2x16x32xbf16>
  %v = tc.slice %qkv {starts = array<i64: 0, 0, 64>, strides = array<i64: 1, 1, 1>} : tensor<2x16x96xbf16> to tensor<2x16x32xbf16>
  %q4 = tc.reshape %q : tensor<2x16x32xbf16> to tensor<2x16x4x8xbf16>
  %k4 = tc.reshape %k : tensor<2x16x32xbf16> to tensor<2x16x4x8xbf16>
  %v4 = tc.reshape %v : tensor<2x16x32xbf16> to tensor<2x16x4x8xbf16>
  %qt = tc.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
  %kt = tc.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
  %vt = tc.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
  %o, %lse = tc.attention %qt, %kt, %vt {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
  return %o : tensor<2x4x16x8xbf16>
}

// -----

// Tests a fused qkv projection [B, T, 3C] around attention: q, k, v are read
// in place out of its split (views at byte offsets 0, 64 and 128 of the
// [2, 16, 96] bf16 buffer, rows of 96 elements) and dq, dk, dv are written in
// place into the concat of their transposes (tc.grads_into_concat): no
// transpose-back or concat
// kernel. (The split and the transposes of its pieces are still lowered:
// nothing reads them, tcx-eliminate-dead-work removes them.)
// CHECK-LABEL: func.func @attention_qkv
// CHECK-DAG: %[[Q:.+]] = tcx.view %arg0[0] : <2x16x96xbf16> -> <2x16x4x8xbf16>
// CHECK-DAG: %[[K:.+]] = tcx.view %arg0[64] : <2x16x96xbf16> -> <2x16x4x8xbf16>
// CHECK-DAG: %[[V:.+]] = tcx.view %arg0[128] : <2x16x96xbf16> -> <2x16x4x8xbf16>
// CHECK: tcx.library "attention_fwd" ins(%[[Q]], %[[K]], %[[V]] :
// CHECK-SAME: q_strides = array<i64: 1536, 8, 96>
// CHECK: %[[CAT:.+]] = tcx.alloc {kind = "output"} : <2x16x96xbf16>
// CHECK-DAG: %[[DQ:.+]] = tcx.view %[[CAT]][0] : <2x16x96xbf16> -> <2x16x4x8xbf16>
// CHECK-DAG: %[[DK:.+]] = tcx.view %[[CAT]][64] : <2x16x96xbf16> -> <2x16x4x8xbf16>
// CHECK-DAG: %[[DV:.+]] = tcx.view %[[CAT]][128] : <2x16x96xbf16> -> <2x16x4x8xbf16>
// CHECK: tcx.library "attention_bwd" ins({{.+}}) outs(%[[DQ]], %[[DK]], %[[DV]], %{{[0-9]+}} :
// CHECK-SAME: dq_strides = array<i64: 1536, 8, 96>
// CHECK-NOT: tcx.launch
// CHECK: return %{{.+}}, %[[CAT]]
func.func @attention_qkv(%qkv: tensor<2x16x96xbf16>, %g: tensor<2x16x4x8xbf16>)
    -> (tensor<2x16x4x8xbf16>, tensor<2x16x96xbf16>) {
  %q, %k, %v = tc.split %qkv {axis = 2 : i64} : tensor<2x16x96xbf16> -> tensor<2x16x32xbf16>, tensor<2x16x32xbf16>, tensor<2x16x32xbf16>
  %q4 = tc.reshape %q : tensor<2x16x32xbf16> to tensor<2x16x4x8xbf16>
  %k4 = tc.reshape %k : tensor<2x16x32xbf16> to tensor<2x16x4x8xbf16>
  %v4 = tc.reshape %v : tensor<2x16x32xbf16> to tensor<2x16x4x8xbf16>
  %qt = tc.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
  %kt = tc.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
  %vt = tc.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
  %gt = tc.transpose %g {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
  %o, %lse = tc.attention %qt, %kt, %vt {scale = 0.35 : f64, causal = true, tc.out_transposed}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
  %ot = tc.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %dq, %dk, %dv = tc.attention_grad %qt, %kt, %vt, %o, %lse, %gt {scale = 0.35 : f64, causal = true, tc.grads_into_concat}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>,
         tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
  %dqt = tc.transpose %dq {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %dkt = tc.transpose %dk {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %dvt = tc.transpose %dv {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %dq3 = tc.reshape %dqt : tensor<2x16x4x8xbf16> to tensor<2x16x32xbf16>
  %dk3 = tc.reshape %dkt : tensor<2x16x4x8xbf16> to tensor<2x16x32xbf16>
  %dv3 = tc.reshape %dvt : tensor<2x16x4x8xbf16> to tensor<2x16x32xbf16>
  %dqkv = tc.concat %dq3, %dk3, %dv3 {axis = 2 : i64} : tensor<2x16x32xbf16>, tensor<2x16x32xbf16>, tensor<2x16x32xbf16> -> tensor<2x16x96xbf16>
  return %ot, %dqkv : tensor<2x16x4x8xbf16>, tensor<2x16x96xbf16>
}

// -----

// Tests the bias gradient of the fused qkv projection summed by the
// attention backward (tc-fuse-bias-grad's tc.col_sum on the attention
// gradient and on the reduce_sum of its concat, here dk, dq, dv in that
// order): the call's col_sum output with each gradient's offset in the
// concat, which the reduce_sum becomes; no kernel sums the concat.
// CHECK-LABEL: func.func @attention_qkv_bias_grad
// CHECK: %[[CAT:.+]] = tcx.alloc {kind = "output"} : <2x16x96xbf16>
// CHECK: %[[CS:.+]] = tcx.alloc {kind = "output"} : <96xbf16>
// CHECK: tcx.library "attention_bwd" ins({{.+}}) outs(%{{.+}}, %{{.+}}, %{{.+}}, %[[CS]], %{{[0-9]+}} :
// CHECK-SAME: col_sum_offsets = array<i64: 32, 0, 64>
// CHECK-SAME: has_col_sum = true
// CHECK-NOT: tcx.launch
// CHECK: return %[[CAT]], %[[CS]]
func.func @attention_qkv_bias_grad(%qt: tensor<2x4x16x8xbf16>, %kt: tensor<2x4x16x8xbf16>,
                                   %vt: tensor<2x4x16x8xbf16>, %gt: tensor<2x4x16x8xbf16>)
    -> (tensor<2x16x96xbf16>, tensor<96xbf16>) {
  %o, %lse = tc.attention %qt, %kt, %vt {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
  %dq, %dk, %dv = tc.attention_grad %qt, %kt, %vt, %o, %lse, %gt {scale = 0.35 : f64, causal = true, tc.grads_into_concat, tc.col_sum = 0 : i64}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>,
         tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
  %dqt = tc.transpose %dq {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %dkt = tc.transpose %dk {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %dvt = tc.transpose %dv {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %dq3 = tc.reshape %dqt : tensor<2x16x4x8xbf16> to tensor<2x16x32xbf16>
  %dk3 = tc.reshape %dkt : tensor<2x16x4x8xbf16> to tensor<2x16x32xbf16>
  %dv3 = tc.reshape %dvt : tensor<2x16x4x8xbf16> to tensor<2x16x32xbf16>
  %dqkv = tc.concat %dk3, %dq3, %dv3 {axis = 2 : i64} : tensor<2x16x32xbf16>, tensor<2x16x32xbf16>, tensor<2x16x32xbf16> -> tensor<2x16x96xbf16>
  %m = tc.reshape %dqkv : tensor<2x16x96xbf16> to tensor<32x96xbf16>
  %bias = tc.reduce_sum %m {axes = array<i64: 0>, tc.col_sum = 0 : i64} : tensor<32x96xbf16> -> tensor<96xbf16>
  return %dqkv, %bias : tensor<2x16x96xbf16>, tensor<96xbf16>
}

// -----

// Tests the library forms: layer_norm, softmax over the last axis, the
// embedding gather and its scatter-add (with its scratch buffer).
// CHECK-LABEL: func.func @library
// CHECK: tcx.library "embedding_fwd" ins({{.+}}) outs({{.+}}) {count = 16 : i64, dim = 8 : i64, vocab = 64 : i64}
// CHECK: tcx.library "layer_norm_fwd" ins({{.+}}) outs({{.+}}) {cols = 8 : i64, eps = 1.000000e-05 : f64, has_bias = true, has_weight = true, rows = 16 : i64}
// CHECK: tcx.library "softmax_fwd" ins({{.+}}) outs({{.+}}) {cols = 8 : i64, log = true, rows = 16 : i64}
// CHECK: %[[SCR:.+]] = tcx.alloc {kind = "scratch"} : <1024xi8>
// CHECK: tcx.library "embedding_bwd" ins({{.+}}) outs(%{{.+}}, %[[SCR]] : !tcx.buffer<64x8xf32>, !tcx.buffer<1024xi8>) {accumulate = false, count = 16 : i64, dim = 8 : i64, vocab = 64 : i64}
func.func @library(%ids: tensor<2x8xi64>) -> (tensor<2x8x8xf32>, tensor<64x8xf32>) {
  %wte = tc.parameter "wte" : tensor<64x8xf32>
  %g = tc.parameter "g" : tensor<8xf32>
  %b = tc.parameter "b" : tensor<8xf32>
  %e = tc.gather %wte, %ids {axis = 0 : i64} : tensor<64x8xf32>, tensor<2x8xi64> -> tensor<2x8x8xf32>
  %n = tc.layer_norm %e, scale %g, bias %b {axis = 2 : i64, epsilon = 1.0e-05 : f64}
      : (tensor<2x8x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x8xf32>
  %s = tc.log_softmax %n {axis = 2 : i64} : tensor<2x8x8xf32>
  %d = tc.scatter_add %s, %ids {axis = 0 : i64} : tensor<2x8x8xf32>, tensor<2x8xi64> -> tensor<64x8xf32>
  return %s, %d : tensor<2x8x8xf32>, tensor<64x8xf32>
}

// -----

// Tests that cross_entropy and its gradient that tc-fuse-cross-entropy
// paired (tc.fused_grad on both) are one library call, the constant scale an
// attribute.
// CHECK-LABEL: func.func @loss
// CHECK: %[[L:.+]] = tcx.alloc {kind = "output"} : <f32>
// CHECK: %[[D:.+]] = tcx.alloc {kind = "output"} : <16x32xf32>
// CHECK: %[[S:.+]] = tcx.alloc {kind = "scratch"} : <320xi8>
// CHECK: tcx.library "cross_entropy_fwd_bwd" ins(%{{.+}}, %{{.+}} : !tcx.buffer<16x32xf32>, !tcx.buffer<16xi64>) outs(%[[L]], %[[D]], %[[S]] : {{.+}}) {cols = 32 : i64, grad_scale = 1.000000e+00 : f32, ignore_index = -100 : i64, rows = 16 : i64}
// CHECK-NOT: tcx.library
func.func @loss(%x: tensor<16x32xf32>, %y: tensor<16xi64>) -> (tensor<f32>, tensor<16x32xf32>) {
  %l = tc.cross_entropy %x, %y {tc.fused_grad} : (tensor<16x32xf32>, tensor<16xi64>) -> tensor<f32>
  %one = tc.constant dense<1.0> : tensor<f32>
  %d = tc.cross_entropy_grad %x, %y, grad %one {tc.fused_grad} : (tensor<16x32xf32>, tensor<16xi64>, tensor<f32>) -> tensor<16x32xf32>
  return %l, %d : tensor<f32>, tensor<16x32xf32>
}

// -----

// Tests that the fused call writes the gradient over the logits when only
// the loss reads them (bf16 logits widened for the loss, the gradient
// narrowed back: tc.bf16_logits): dlogits is a view of the product's buffer,
// which the dgrad product then reads; not over logits another op reads.
// CHECK-LABEL: func.func @loss_in_place
// CHECK: %[[P:.+]] = tcx.alloc : <16x32xbf16>
// CHECK: tcx.matmul ins({{.+}}) outs(%[[P]] : <16x32xbf16>)
// CHECK: %[[D:.+]] = tcx.view %[[P]][0] : <16x32xbf16> -> <16x32xbf16>
// CHECK: tcx.library "cross_entropy_fwd_bwd" ins(%[[P]], %{{.+}} : !tcx.buffer<16x32xbf16>, !tcx.buffer<16xi64>) outs(%{{.+}}, %[[D]], %{{.+}} :
// CHECK: tcx.matmul ins(%[[D]], %{{.+}} : !tcx.buffer<16x32xbf16>, !tcx.buffer<32x8xbf16>)
func.func @loss_in_place(%h: tensor<16x8xbf16>, %w: tensor<32x8xbf16>, %y: tensor<16xi64>)
    -> (tensor<f32>, tensor<16x8xbf16>) {
  %p = tc.matmul %h, %w {transpose_rhs = true} : tensor<16x8xbf16>, tensor<32x8xbf16> -> tensor<16x32xbf16>
  %c = tc.cast %p : tensor<16x32xbf16> to tensor<16x32xf32>
  %l = tc.cross_entropy %c, %y {tc.fused_grad, tc.bf16_logits} : (tensor<16x32xf32>, tensor<16xi64>) -> tensor<f32>
  %one = tc.constant dense<1.0> : tensor<f32>
  %d = tc.cross_entropy_grad %c, %y, grad %one {tc.fused_grad} : (tensor<16x32xf32>, tensor<16xi64>, tensor<f32>) -> tensor<16x32xf32>
  %n = tc.cast %d : tensor<16x32xf32> to tensor<16x32xbf16>
  %dh = tc.matmul %n, %w : tensor<16x32xbf16>, tensor<32x8xbf16> -> tensor<16x8xbf16>
  return %l, %dh : tensor<f32>, tensor<16x8xbf16>
}

// -----

// Tests that the logits keep their buffer when another op reads them too
// (here the returned product): the gradient gets its own.
// CHECK-LABEL: func.func @loss_logits_kept
// CHECK: tcx.library "cross_entropy_fwd_bwd" ins(%[[P:.+]], %{{.+}} : {{.+}}) outs(%{{.+}}, %[[D:.+]], %{{.+}} :
// CHECK-NOT: tcx.view %[[P]]
// CHECK: return
func.func @loss_logits_kept(%h: tensor<16x8xbf16>, %w: tensor<32x8xbf16>, %y: tensor<16xi64>)
    -> (tensor<f32>, tensor<16x8xbf16>, tensor<16x32xbf16>) {
  %p = tc.matmul %h, %w {transpose_rhs = true} : tensor<16x8xbf16>, tensor<32x8xbf16> -> tensor<16x32xbf16>
  %c = tc.cast %p : tensor<16x32xbf16> to tensor<16x32xf32>
  %l = tc.cross_entropy %c, %y {tc.fused_grad} : (tensor<16x32xf32>, tensor<16xi64>) -> tensor<f32>
  %one = tc.constant dense<1.0> : tensor<f32>
  %d = tc.cross_entropy_grad %c, %y, grad %one {tc.fused_grad} : (tensor<16x32xf32>, tensor<16xi64>, tensor<f32>) -> tensor<16x32xf32>
  %n = tc.cast %d : tensor<16x32xf32> to tensor<16x32xbf16>
  %dh = tc.matmul %n, %w : tensor<16x32xbf16>, tensor<32x8xbf16> -> tensor<16x8xbf16>
  return %l, %dh, %p : tensor<f32>, tensor<16x8xbf16>, tensor<16x32xbf16>
}

// -----

// Tests that "update:" results are written in place: "w" by the op that
// reads it elementwise; "m" is read after its update, so it gets a copy at
// the end; "grad:" results go to persistent gradient buffers.
// CHECK-LABEL: func.func @update
// CHECK-DAG: %[[W:.+]] = tcx.param "w" {trainable} : <4xf32>
// CHECK-DAG: %[[M:.+]] = tcx.param "m" {kind = "optimizer_state"} : <4xf32>
// CHECK-DAG: %[[G:.+]] = tcx.param "grad:w" {kind = "gradient"} : <4xf32>
// CHECK: tcx.launch @update_mul_{{[0-9]+}} ins(%[[M]], %{{.+}} : !tcx.buffer<4xf32>, !tcx.buffer<f32>) outs(%[[M2:.+]] : !tcx.buffer<4xf32>)
// CHECK: tcx.launch @update_sub_{{[0-9]+}} ins(%[[W]], %[[M2]] : {{.+}}) outs(%[[W]] : !tcx.buffer<4xf32>)
// CHECK: tcx.launch @update_add_{{[0-9]+}} ins(%[[M]], %[[M2]] : {{.+}}) outs(%[[G]] : !tcx.buffer<4xf32>)
// CHECK-NEXT: tcx.copy %[[M2]], %[[M]]
// CHECK-NEXT: return %[[W]], %[[M]], %[[G]]
func.func @update() -> (tensor<4xf32> {tc.name = "update:w"}, tensor<4xf32> {tc.name = "update:m"},
                        tensor<4xf32> {tc.name = "grad:w"}) {
  %w = tc.parameter "w" {trainable} : tensor<4xf32>
  %m = tc.parameter "m" {tc.optimizer_state} : tensor<4xf32>
  %c = tc.constant dense<0.9> : tensor<f32>
  %m2 = tc.mul %m, %c : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %w2 = tc.sub %w, %m2 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %g = tc.add %m, %m2 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %w2, %m2, %g : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that a weight's 16-bit copy (tc-shadow-parameter-casts) is a
// persistent "shadow" buffer the matmul reads and "update:shadow:" writes in
// place, after the read.
// CHECK-LABEL: func.func @shadow
// CHECK-DAG: %[[W:.+]] = tcx.param "w" {trainable} : <8x8xf32>
// CHECK-DAG: %[[S:.+]] = tcx.param "shadow:w" {kind = "shadow"} : <8x8xbf16>
// CHECK: tcx.matmul ins(%arg0, %[[S]] :
// CHECK: tcx.launch @shadow_sub_{{[0-9]+}} ins(%[[W]], %arg1 : {{.+}}) outs(%[[W]] : !tcx.buffer<8x8xf32>)
// CHECK: tcx.launch @shadow_cast_{{[0-9]+}} ins(%[[W]] : !tcx.buffer<8x8xf32>) outs(%[[S]] : !tcx.buffer<8x8xbf16>)
// CHECK-NOT: tcx.copy
// CHECK: return %{{.+}}, %[[W]], %[[S]]
func.func @shadow(%x: tensor<4x8xbf16>, %g: tensor<8x8xf32>)
    -> (tensor<4x8xbf16> {tc.name = "y"}, tensor<8x8xf32> {tc.name = "update:w"},
        tensor<8x8xbf16> {tc.name = "update:shadow:w"}) {
  %w = tc.parameter "w" {trainable} : tensor<8x8xf32>
  %s = tc.parameter "shadow:w" : tensor<8x8xbf16>
  %y = tc.matmul %x, %s : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
  %w2 = tc.sub %w, %g : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %c = tc.cast %w2 : tensor<8x8xf32> to tensor<8x8xbf16>
  return %y, %w2, %c : tensor<4x8xbf16>, tensor<8x8xf32>, tensor<8x8xbf16>
}

// -----

// Tests that tc.fp8_scale_update (tc-fuse-fp8-delayed) becomes one
// "fp8_scale_update" call that writes the next scale and history over the
// training state it reads (in place: no copy at the end), with scale_inv
// in an alloc of its own and each result's reference value.
// CHECK-LABEL: func.func @scale_update
// CHECK-DAG: %[[S:.+]] = tcx.param "fp8_scale:x" {kind = "optimizer_state"} : <f32>
// CHECK-DAG: %[[H:.+]] = tcx.param "fp8_amax_history:x" {kind = "optimizer_state"} : <1023xf32>
// CHECK-DAG: %[[INV:.+]] = tcx.alloc {{{.*}}ref = 30 : i64} : <f32>
// CHECK: tcx.library "fp8_scale_update" ins(%arg0, %[[S]], %[[H]] : !tcx.buffer<f32>, !tcx.buffer<f32>, !tcx.buffer<1023xf32>) outs(%[[S]], %[[INV]], %[[H]] : !tcx.buffer<f32>, !tcx.buffer<f32>, !tcx.buffer<1023xf32>) {fmax = 4.480000e+02 : f64, has_history = true, most_recent = false}
// CHECK-NOT: tcx.copy
// CHECK: return %[[INV]], %[[S]], %[[H]]
func.func @scale_update(%amax: tensor<f32>)
    -> (tensor<f32> {tc.name = "inv"}, tensor<f32> {tc.name = "update:fp8_scale:x"},
        tensor<1023xf32> {tc.name = "update:fp8_amax_history:x"}) {
  %s = tc.parameter "fp8_scale:x" {tc.optimizer_state} : tensor<f32>
  %h = tc.parameter "fp8_amax_history:x" {tc.optimizer_state} : tensor<1023xf32>
  %ns, %inv, %nh = tc.fp8_scale_update %amax, %s, %h {fmax = 448.0 : f64, tc.ref = array<i64: -1, 40, 30, 33>} : tensor<f32>, tensor<f32>, tensor<1023xf32> -> (tensor<f32>, tensor<f32>, tensor<1023xf32>)
  return %inv, %ns, %nh : tensor<f32>, tensor<f32>, tensor<1023xf32>
}

// -----

// Tests that a tc.fusion becomes one kernel with the fusion's body.
// CHECK-LABEL: tcx.kernel @fused_fusion_0 kind("fusion")
// CHECK: tc.tanh
// CHECK: tcx.yield
// CHECK-LABEL: func.func @fused
// CHECK: tcx.launch @fused_fusion_0 ins(%{{.+}}, %{{.+}} : !tcx.buffer<4x8xf32>, !tcx.buffer<8xf32>) outs(%{{.+}} : !tcx.buffer<4x8xf32>) {elements = 32 : i64}
func.func @fused(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %y = tc.fusion (%x, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %c: tensor<8xf32>):
    %0 = tc.add %a, %c : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    %1 = tc.tanh %0 : tensor<4x8xf32>
    tc.yield %1 : tensor<4x8xf32>
  }
  return %y : tensor<4x8xf32>
}

// -----

// Tests the reference value ids (tc.ref, tc-tag-reference-values): the alloc
// of a tensor gets its id as `ref` (a fusion result that of the value its
// body yields: the tanh, id 7), and no tag is left on any op, in the function
// or in an outlined kernel body.
// CHECK-LABEL: tcx.kernel @tagged_fusion_0 kind("fusion")
// CHECK-NOT: tc.ref
// CHECK: tcx.yield
// CHECK-LABEL: func.func @tagged
// CHECK: tcx.alloc {ref = 7 : i64} : <4x8xf32>
// CHECK: tcx.alloc {kind = "output", ref = 3 : i64} : <4x8xf32>
// CHECK-NOT: tc.ref
// CHECK: return
func.func @tagged(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %y = tc.fusion (%x, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %c: tensor<8xf32>):
    %0 = tc.add %a, %c {tc.ref = array<i64: 6, 1>} : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    %1 = tc.tanh %0 {tc.ref = array<i64: 7, 1>} : tensor<4x8xf32>
    tc.yield %1 : tensor<4x8xf32>
  }
  %z = tc.mul %y, %y {tc.ref = array<i64: 3, 1>} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}

// -----

// Tests that an amax result tc-fuse-fp8-amax added (not a value of the
// reference program) gets no reference id: the tag [4, 1] says the layer
// norm had one result when tagged (id + 1 would be the next op's, the
// reshape's 5); the layer norm's call writes it as its has_amax output.
// CHECK-LABEL: func.func @amax_has_no_ref
// CHECK: %[[Y:.+]] = tcx.alloc {ref = 4 : i64} : <4x8xbf16>
// CHECK: %[[A:.+]] = tcx.alloc : <f32>
// CHECK: tcx.library "layer_norm_fwd" ins(%{{.+}} : !tcx.buffer<4x8xbf16>) outs(%[[Y]], %[[A]] : !tcx.buffer<4x8xbf16>, !tcx.buffer<f32>) {{{.*}}has_amax = true
// CHECK: tcx.library "quantize_fp8" ins(%{{.+}}, %[[A]] :
func.func @amax_has_no_ref(%x: tensor<4x8xbf16>) -> (tensor<32xf8E4M3FN>, tensor<1xf32>) {
  %y, %m = tc.layer_norm %x {axis = 1 : i64, epsilon = 1.0e-05 : f64, tc.ref = array<i64: 4, 1>}
      : (tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<f32>)
  %r = tc.reshape %y {tc.ref = array<i64: 5, 1>} : tensor<4x8xbf16> to tensor<32xbf16>
  %q, %s = tc.quantize %r amax %m : tensor<f32> {block = array<i64: 32>, tc.ref = array<i64: 6, 2>}
      : tensor<32xbf16> -> (tensor<32xf8E4M3FN>, tensor<1xf32>)
  return %q, %s : tensor<32xf8E4M3FN>, tensor<1xf32>
}

// -----

// Tests that an op outside the tc dialect is an error naming it.
func.func private @helper(tensor<4xf32>) -> tensor<4xf32>
func.func @foreign(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'func.call' op is not a tc op; tc-lower-to-tcx lowers tc ops only}}
  %0 = func.call @helper(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that cross_entropy and its gradient that no pass paired are two
// library calls.
// CHECK-LABEL: func.func @loss_unpaired
// CHECK: tcx.library "cross_entropy_fwd"
// CHECK: tcx.library "cross_entropy_bwd"
func.func @loss_unpaired(%x: tensor<16x32xf32>, %y: tensor<16xi64>) -> (tensor<f32>, tensor<16x32xf32>) {
  %l = tc.cross_entropy %x, %y : (tensor<16x32xf32>, tensor<16xi64>) -> tensor<f32>
  %one = tc.constant dense<1.0> : tensor<f32>
  %d = tc.cross_entropy_grad %x, %y, grad %one : (tensor<16x32xf32>, tensor<16xi64>, tensor<f32>) -> tensor<16x32xf32>
  return %l, %d : tensor<f32>, tensor<16x32xf32>
}

// -----

// Tests attention with a key (padding) mask: the mask [batch, keys] is both
// calls' last input (has_key_mask), HF's finfo.min fill their mask_fill.
// CHECK-LABEL: func.func @key_mask
// CHECK: tcx.library "attention_fwd" ins(%arg0, %arg0, %arg0, %arg1 : !tcx.buffer<2x4x16x8xbf16>, !tcx.buffer<2x4x16x8xbf16>, !tcx.buffer<2x4x16x8xbf16>, !tcx.buffer<2x16xi1>) {{.+}} {batch = 2 : i64, causal = true, d = 8 : i64, dv = 8 : i64, has_key_mask = true, heads = 4 : i64, {{.+}}, kv_heads = 4 : i64, mask_fill = -3.4028234663852886E+38 : f64,
// CHECK: tcx.library "attention_bwd" ins(%arg0, %arg0, %arg0, %{{.+}}, %{{.+}}, %arg2, %arg1 : {{.+}}, !tcx.buffer<2x16xi1>) {{.+}} has_key_mask = true, {{.+}} mask_fill = -3.4028234663852886E+38 : f64
func.func @key_mask(%q: tensor<2x4x16x8xbf16>, %m: tensor<2x16xi1>, %g: tensor<2x4x16x8xbf16>)
    -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>) {
  %o, %lse = tc.attention %q, %q, %q key_mask %m {scale = 0.35 : f64, causal = true, mask_fill = -3.4028234663852886E+38 : f64}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x16xi1>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
  %dq, %dk, %dv = tc.attention_grad %q, %q, %q, %o, %lse, %g key_mask %m {scale = 0.35 : f64, causal = true, mask_fill = -3.4028234663852886E+38 : f64}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x8xbf16>, tensor<2x16xi1>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
  return %o, %dq : tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>
}

// -----

// Tests that a finite mask fill above -1e4 is an error naming the op: beside
// a visible key the GPU kernels weigh a hidden one exactly 0.
func.func @key_mask_fill(%q: tensor<2x4x16x8xf32>, %m: tensor<2x16xi1>) -> tensor<2x4x16x8xf32> {
  // expected-error @+1 {{'tc.attention' op mask_fill -1.000000e+02: the GPU kernels take -inf or a fill at most -1.000000e+04}}
  %o, %lse = tc.attention %q, %q, %q key_mask %m {scale = 0.35 : f64, mask_fill = -100.0 : f64}
      : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x16xi1>)
        -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
  return %o : tensor<2x4x16x8xf32>
}

// -----

// Tests a projection's residual add as the GEMM's C input: the bias, the
// reshape and the add go with the matmul, whose last input is the residual
// (addend = true); no kernel.
// CHECK-LABEL: func.func @residual_addend
// CHECK-NOT: tcx.launch
// CHECK: tcx.matmul ins(%arg0, %arg1, %arg2, %arg3 : !tcx.buffer<8x16xbf16>, !tcx.buffer<16x4xbf16>, !tcx.buffer<4xbf16>, !tcx.buffer<2x4x4xbf16>)
// CHECK-SAME: addend = true
// CHECK-SAME: epilogue = "bias"
// CHECK-NOT: tcx.launch
// CHECK: return
func.func @residual_addend(%x: tensor<8x16xbf16>, %w: tensor<16x4xbf16>, %b: tensor<4xbf16>,
                           %r: tensor<2x4x4xbf16>) -> tensor<2x4x4xbf16> {
  %0 = tc.matmul %x, %w {tc.epilogue = "bias", tc.epilogue_addend} : tensor<8x16xbf16>, tensor<16x4xbf16> -> tensor<8x4xbf16>
  %1 = tc.add %0, %b : tensor<8x4xbf16>, tensor<4xbf16> -> tensor<8x4xbf16>
  %2 = tc.reshape %1 : tensor<8x4xbf16> to tensor<2x4x4xbf16>
  %3 = tc.add %r, %2 : tensor<2x4x4xbf16>, tensor<2x4x4xbf16> -> tensor<2x4x4xbf16>
  return %3 : tensor<2x4x4xbf16>
}

// -----

// Tests the residual stream's gradient added to a norm's dx by its call
// (dresidual, the last input): the add goes with it, its result is dx's
// buffer; no kernel.
// CHECK-LABEL: func.func @norm_grad_residual
// CHECK: tcx.library "rms_norm_bwd" ins(%arg1, %arg0, %{{.+}}, %{{.+}}, %arg2 : {{.+}}) outs(%[[DX:.+]], %{{.+}}, %{{.+}} : {{.+}}) {cols = 8 : i64, has_bias = false, has_dresidual = true, has_weight = true, rows = 16 : i64}
// CHECK-NOT: tcx.launch
// CHECK: return %[[DX]]
func.func @norm_grad_residual(%x: tensor<16x8xbf16>, %dy: tensor<16x8xbf16>, %r: tensor<16x8xbf16>)
    -> (tensor<16x8xbf16>, tensor<8xbf16>) {
  %g = tc.parameter "g" : tensor<8xbf16>
  %dx, %dg = tc.rms_norm_grad %x, %dy, scale %g {axis = 1 : i64, epsilon = 1.0e-06 : f64}
      : (tensor<16x8xbf16>, tensor<16x8xbf16>, tensor<8xbf16>) -> (tensor<16x8xbf16>, tensor<8xbf16>)
  %s = tc.add %dx, %r : tensor<16x8xbf16>, tensor<16x8xbf16> -> tensor<16x8xbf16>
  return %s, %dg : tensor<16x8xbf16>, tensor<8xbf16>
}

// -----

// Tests the column sums of a norm's dx as written (tc-fuse-bias-grad's
// tc.col_sum on the gradient and the sum): the call's col_sum output after
// dbias (has_col_sum; its scratch grows to three blocks of ceil(16 / 64) x 8
// floats, 96 bytes), which the reduce_sum of the reshaped dx becomes; no
// kernel.
// CHECK-LABEL: func.func @norm_grad_col_sum
// CHECK: tcx.library "layer_norm_bwd" ins(%arg1, %arg0, %{{.+}}, %{{.+}}, %{{.+}}, %arg2 : {{.+}}) outs(%[[DX:.+]], %{{.+}}, %{{.+}}, %[[CS:.+]], %{{.+}} : !tcx.buffer<2x8x8xbf16>, !tcx.buffer<8xbf16>, !tcx.buffer<8xbf16>, !tcx.buffer<8xbf16>, !tcx.buffer<96xi8>) {cols = 8 : i64, has_bias = true, has_col_sum = true, has_dresidual = true, has_weight = true, rows = 16 : i64}
// CHECK-NOT: tcx.launch
// CHECK: return %[[DX]], %[[CS]]
func.func @norm_grad_col_sum(%x: tensor<2x8x8xbf16>, %dy: tensor<2x8x8xbf16>, %r: tensor<2x8x8xbf16>)
    -> (tensor<2x8x8xbf16>, tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>) {
  %g = tc.parameter "g" : tensor<8xbf16>
  %dx, %dg, %db = tc.layer_norm_grad %x, %dy, scale %g {axis = 2 : i64, epsilon = 1.0e-05 : f64, tc.col_sum = 0 : i64}
      : (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>, tensor<8xbf16>) -> (tensor<2x8x8xbf16>, tensor<8xbf16>, tensor<8xbf16>)
  %s = tc.add %dx, %r : tensor<2x8x8xbf16>, tensor<2x8x8xbf16> -> tensor<2x8x8xbf16>
  %m = tc.reshape %s : tensor<2x8x8xbf16> to tensor<16x8xbf16>
  %cs = tc.reduce_sum %m {axes = array<i64: 0>, tc.col_sum = 0 : i64} : tensor<16x8xbf16> -> tensor<8xbf16>
  return %s, %cs, %dg, %db : tensor<2x8x8xbf16>, tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>
}

// -----

// Tests GPT-NeoX's attention block as tc-fuse-attention-views leaves it
// (q, k sliced out of the head transpose of the per-head qkv, v the head
// transpose of its slice, the rotated gradients and dv marked): each rotary
// kernel reads its piece of the qkv in place (a view at its offset,
// tc.in_strides [T*H*3D, 3D, H*3D]), attention reads v out of the slice's
// [B, T, H, D] buffer, and the backward's dv and both rotated gradients go
// into their pieces of the transposed concat's one buffer (tc.out_strides,
// dv_strides), which the function returns.
// CHECK: tc.rotary %arg0, %arg1, %arg2 {tc.in_strides = array<i64: 1536, 24, 96>}
// CHECK: tc.rotary %arg0, %arg1, %arg2 {tc.out_strides = array<i64: 1536, 24, 96>}
// CHECK-LABEL: func.func @rotary_in_place
// CHECK: %[[VS:.+]] = tcx.alloc : <2x16x4x8xbf16>
// CHECK: %[[Q:.+]] = tcx.view %arg0[0] : <2x16x4x24xbf16> -> <2x4x16x8xbf16>
// CHECK: tcx.launch @rotary_in_place_rotary_{{[0-9]+}} ins(%[[Q]], %arg1, %arg2
// CHECK: %[[K:.+]] = tcx.view %arg0[16] : <2x16x4x24xbf16> -> <2x4x16x8xbf16>
// CHECK: tcx.launch @rotary_in_place_rotary_{{[0-9]+}} ins(%[[K]], %arg1, %arg2
// CHECK: tcx.library "attention_fwd" ins(%{{.+}}, %{{.+}}, %[[VS]] :
// CHECK-SAME: v_strides = array<i64: 512, 8, 32>
// CHECK: %[[G:.+]] = tcx.alloc {kind = "output"} : <2x16x4x24xbf16>
// CHECK: %[[DV:.+]] = tcx.view %[[G]][32] : <2x16x4x24xbf16> -> <2x4x16x8xbf16>
// CHECK: tcx.library "attention_bwd" {{.+}} outs(%{{[0-9]+}}, %{{[0-9]+}}, %[[DV]], %{{[0-9]+}} :
// CHECK-SAME: dv_strides = array<i64: 1536, 24, 96>
// CHECK: %[[DQ:.+]] = tcx.view %[[G]][0] : <2x16x4x24xbf16> -> <2x4x16x8xbf16>
// CHECK: tcx.launch @rotary_in_place_rotary_{{[0-9]+}} ins({{.+}}) outs(%[[DQ]] :
// CHECK: %[[DK:.+]] = tcx.view %[[G]][16] : <2x16x4x24xbf16> -> <2x4x16x8xbf16>
// CHECK: tcx.launch @rotary_in_place_rotary_{{[0-9]+}} ins({{.+}}) outs(%[[DK]] :
// CHECK-NOT: tc.concat
// CHECK: return %{{.+}}, %[[G]] :
func.func @rotary_in_place(%qkv: tensor<2x16x4x24xbf16>, %c: tensor<2x16x2xbf16>, %s: tensor<2x16x2xbf16>,
                %ns: tensor<2x16x2xbf16>, %gt: tensor<2x4x16x8xbf16>)
    -> (tensor<2x4x16x8xbf16>, tensor<2x16x4x24xbf16>) {
  %t = tc.transpose %qkv {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x24xbf16> -> tensor<2x4x16x24xbf16>
  %q = tc.slice %t {starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x8xbf16>
  %k = tc.slice %t {starts = array<i64: 0, 0, 0, 8>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x8xbf16>
  %vs = tc.slice %qkv {starts = array<i64: 0, 0, 0, 16>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x16x4x24xbf16> to tensor<2x16x4x8xbf16>
  %v = tc.transpose %vs {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
  %qr = tc.rotary %q, %c, %s : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %kr = tc.rotary %k, %c, %s : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %o, %lse = tc.attention %qr, %kr, %v {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
  %dq, %dk, %dv = tc.attention_grad %qr, %kr, %v, %o, %lse, %gt {scale = 0.35 : f64, causal = true, tc.grads_transposed = array<i1: false, false, true>}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>,
         tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
  %dqr = tc.rotary %dq, %c, %ns {tc.out_transposed} : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %dkr = tc.rotary %dk, %c, %ns {tc.out_transposed} : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %cat = tc.concat %dqr, %dkr, %dv {axis = 3 : i64} : tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16> -> tensor<2x4x16x24xbf16>
  %ct = tc.transpose %cat {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x24xbf16> -> tensor<2x16x4x24xbf16>
  return %o, %ct : tensor<2x4x16x8xbf16>, tensor<2x16x4x24xbf16>
}

// -----

// Tests that a column sum tc-fuse-bias-grad paired with a weight-gradient
// GEMM (the same tc.bias_grad) is the tcx.matmul's second output
// (bias_grad "rhs": the sum over k of dY [K, N]) and no kernel computes it;
// the keepdims result is that buffer.
// CHECK-LABEL: func.func @bias_grad_gemm
// CHECK: %[[W:.+]] = tcx.alloc {kind = "output"} : <16x32xbf16>
// CHECK: %[[C:.+]] = tcx.alloc {kind = "output"} : <1x32xbf16>
// CHECK: tcx.matmul ins(%{{.+}}, %{{.+}} : !tcx.buffer<64x16xbf16>, !tcx.buffer<64x32xbf16>) outs(%[[W]] : <16x32xbf16> bias_grad %[[C]] : !tcx.buffer<1x32xbf16>) {bias_grad = "rhs", k = 64 : i64, m = 16 : i64, n = 32 : i64, transpose_lhs = true}
// CHECK-NOT: tcx.launch
// CHECK: return %[[W]], %[[C]]
func.func @bias_grad_gemm(%x: tensor<64x16xbf16>, %dy: tensor<64x32xbf16>) -> (tensor<16x32xbf16>, tensor<1x32xbf16>) {
  %dw = tc.matmul %x, %dy {tc.bias_grad = 0 : i64, transpose_lhs = true} : tensor<64x16xbf16>, tensor<64x32xbf16> -> tensor<16x32xbf16>
  %db = tc.reduce_sum %dy {axes = array<i64: 0>, keepdims = true, tc.bias_grad = 0 : i64} : tensor<64x32xbf16> -> tensor<1x32xbf16>
  return %dw, %db : tensor<16x32xbf16>, tensor<1x32xbf16>
}

// -----

// Tests GELU_AUX_BIAS: the GELU is the tcx.matmul's output, the bias add
// (the pre-activation the backward reads through its reshape) its aux
// output, no kernel for either.
// CHECK-LABEL: func.func @gelu_aux
// CHECK: %[[A:.+]] = tcx.alloc {kind = "output"} : <8x32xf32>
// CHECK: %[[G:.+]] = tcx.alloc {kind = "output"} : <2x4x32xf32>
// CHECK: tcx.matmul ins(%{{.+}}, %{{.+}}, %{{.+}} : {{.+}}) outs(%[[G]] : <2x4x32xf32> aux %[[A]] : !tcx.buffer<8x32xf32>) {epilogue = "bias_gelu_aux", k = 16 : i64, m = 8 : i64, n = 32 : i64}
// CHECK-NOT: tcx.launch
// CHECK: %[[R:.+]] = tcx.view %[[A]]
// CHECK: return %[[G]], %[[R]]
func.func @gelu_aux(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> (tensor<2x4x32xf32>, tensor<2x4x32xf32>) {
  %p = tc.matmul %x, %w {tc.epilogue = "bias_gelu_aux"} : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  %h = tc.add %p, %b : tensor<8x32xf32>, tensor<32xf32> -> tensor<8x32xf32>
  %r = tc.reshape %h : tensor<8x32xf32> to tensor<2x4x32xf32>
  %g = tc.gelu %r {approximate = "tanh", tc.gelu_aux} : tensor<2x4x32xf32>
  return %g, %r : tensor<2x4x32xf32>, tensor<2x4x32xf32>
}

// -----

// Tests DGELU: the marked g * gelu'(x) is the tcx.matmul's output, x (the
// GELU's input) its third input; neither the mul nor gelu'(x) makes a kernel.
// CHECK-LABEL: func.func @dgelu
// CHECK: tcx.matmul ins(%{{.+}}, %{{.+}}, %arg2 : !tcx.buffer<8x16xf32>, !tcx.buffer<32x16xf32>, !tcx.buffer<2x4x32xf32>) outs(%{{.+}} : <2x4x32xf32>) {epilogue = "dgelu", k = 16 : i64, m = 8 : i64, n = 32 : i64, transpose_rhs = true}
// CHECK-NOT: tcx.launch
// CHECK: return
func.func @dgelu(%dy: tensor<8x16xf32>, %w: tensor<32x16xf32>, %x: tensor<2x4x32xf32>) -> tensor<2x4x32xf32> {
  %c1 = tc.constant dense<1.0> : tensor<f32>
  %p = tc.matmul %dy, %w {tc.epilogue = "dgelu", transpose_rhs = true} : tensor<8x16xf32>, tensor<32x16xf32> -> tensor<8x32xf32>
  %g = tc.reshape %p : tensor<8x32xf32> to tensor<2x4x32xf32>
  %x2 = tc.mul %x, %x {tc.dgelu} : tensor<2x4x32xf32>, tensor<2x4x32xf32> -> tensor<2x4x32xf32>
  %t = tc.tanh %x2 {tc.dgelu} : tensor<2x4x32xf32>
  %d = tc.add %t, %c1 {tc.dgelu} : tensor<2x4x32xf32>, tensor<f32> -> tensor<2x4x32xf32>
  %r = tc.mul %g, %d {tc.dgelu, tc.gelu_grad = "tanh"} : tensor<2x4x32xf32>, tensor<2x4x32xf32> -> tensor<2x4x32xf32>
  return %r : tensor<2x4x32xf32>
}

// -----

// Tests the exact GELU's epilogues (tc-fuse gelu-erf): lowered as the tanh
// form's, named bias_gelu_erf_aux and dgelu_erf.
// CHECK-LABEL: func.func @gelu_erf
// CHECK: tcx.matmul {{.+}} aux %{{.+}} : !tcx.buffer<8x32xf32>) {epilogue = "bias_gelu_erf_aux"
// CHECK: tcx.matmul ins(%{{.+}}, %{{.+}}, %{{.+}} : {{.+}}) outs(%{{.+}} : <8x32xf32>) {epilogue = "dgelu_erf"
// CHECK-NOT: tcx.launch
// CHECK: return
func.func @gelu_erf(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>, %dy: tensor<8x16xf32>, %w2: tensor<32x16xf32>)
    -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  %p = tc.matmul %x, %w {tc.epilogue = "bias_gelu_erf_aux"} : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  %h = tc.add %p, %b : tensor<8x32xf32>, tensor<32xf32> -> tensor<8x32xf32>
  %g = tc.gelu %h {tc.gelu_aux} : tensor<8x32xf32>
  %q = tc.matmul %dy, %w2 {tc.epilogue = "dgelu_erf", transpose_rhs = true} : tensor<8x16xf32>, tensor<32x16xf32> -> tensor<8x32xf32>
  %x2 = tc.mul %h, %h {tc.dgelu} : tensor<8x32xf32>, tensor<8x32xf32> -> tensor<8x32xf32>
  %e = tc.erf %x2 {tc.dgelu} : tensor<8x32xf32>
  %r = tc.mul %q, %e {tc.dgelu, tc.gelu_grad = "none"} : tensor<8x32xf32>, tensor<8x32xf32> -> tensor<8x32xf32>
  return %g, %r : tensor<8x32xf32>, tensor<8x32xf32>
}


// -----

// Tests a rotary marked tc.rotary_in_place (tc-fuse-attention-views with
// rotary-in-place): the kernel's output is its input, q's view of the
// projection (no buffer of its own), its tc.rotary marked tc.in_place with
// the view's strides both ways, and attention reads q there with those
// strides.
// CHECK: tcx.kernel @rotary_rotated_in_place_rotary_{{[0-9]+}} kind("rotary")
// CHECK: tc.rotary %{{.+}} {tc.in_place, tc.in_strides = array<i64: 1536, 24, 96>, tc.out_strides = array<i64: 1536, 24, 96>}
// CHECK-LABEL: func.func @rotary_rotated_in_place
// (The copies of the head transpose and the slices, which nothing reads
// now, are left to tcx-eliminate-dead-work.)
// CHECK: %[[P:.+]] = tcx.view %{{.+}}[0] : <2x16x96xbf16> -> <2x16x4x24xbf16>
// CHECK: %[[Q:.+]] = tcx.view %[[P]][0] : <2x16x4x24xbf16> -> <2x4x16x8xbf16>
// CHECK: tcx.launch @rotary_rotated_in_place_rotary_{{[0-9]+}} ins(%[[Q]], %arg2, %arg3 : {{.+}}) outs(%[[Q]] : !tcx.buffer<2x4x16x8xbf16>)
// CHECK: tcx.library "attention_fwd" ins(%[[Q]], {{.+}} q_strides = array<i64: 1536, 24, 96>
func.func @rotary_rotated_in_place(%x: tensor<2x16x8xbf16>, %w: tensor<8x96xbf16>,
                                   %c: tensor<2x16x2xbf16>, %s: tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16> {
  %p = tc.matmul %x, %w : tensor<2x16x8xbf16>, tensor<8x96xbf16> -> tensor<2x16x96xbf16>
  %qkv = tc.reshape %p : tensor<2x16x96xbf16> to tensor<2x16x4x24xbf16>
  %t = tc.transpose %qkv {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x24xbf16> -> tensor<2x4x16x24xbf16>
  %q = tc.slice %t {starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x8xbf16>
  %k = tc.slice %t {starts = array<i64: 0, 0, 0, 8>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x8xbf16>
  %v = tc.slice %t {starts = array<i64: 0, 0, 0, 16>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x8xbf16>
  %qr = tc.rotary %q, %c, %s {tc.rotary_in_place} : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %o, %lse = tc.attention %qr, %k, %v {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
  return %o : tensor<2x4x16x8xbf16>
}

// -----

// Tests attention reading q, k, v as split pieces of the head transpose of
// a per-head qkv [B, T, H, 3D] (GPT-NeoX as some exports write it): each a
// view at its byte offset with the per-head strides, the transpose and the split
// left unread (tcx-eliminate-dead-work drops them).
// CHECK-LABEL: func.func @split_heads
// CHECK-DAG: %[[Q:.+]] = tcx.view %arg0[0] : <2x16x4x24xbf16> -> <2x16x4x8xbf16>
// CHECK-DAG: %[[K:.+]] = tcx.view %arg0[16] : <2x16x4x24xbf16> -> <2x16x4x8xbf16>
// CHECK-DAG: %[[V:.+]] = tcx.view %arg0[32] : <2x16x4x24xbf16> -> <2x16x4x8xbf16>
// CHECK: tcx.library "attention_fwd" ins(%[[Q]], %[[K]], %[[V]] : {{.+}} k_strides = array<i64: 1536, 24, 96>, {{.+}} q_strides = array<i64: 1536, 24, 96>, {{.+}} v_strides = array<i64: 1536, 24, 96>}
func.func @split_heads(%qkv: tensor<2x16x4x24xbf16>) -> tensor<2x4x16x8xbf16> {
  %t = tc.transpose %qkv {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x24xbf16> -> tensor<2x4x16x24xbf16>
  %q, %k, %v = tc.split %t {axis = 3 : i64} : tensor<2x4x16x24xbf16> -> tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>
  %o, %lse = tc.attention %q, %k, %v {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
  return %o : tensor<2x4x16x8xbf16>
}

// -----

// Tests the backward's rotaries rotating in place (tc.grads_through_rotary on
// the attention backward, tc.rotary_in_place with tc.out_transposed on the
// rotaries): the call writes dq and dk straight into their pieces of the
// transposed qkv gradient, as it writes dv, and each rotary's kernel reads
// and writes its piece there (no dq / dk buffers of their own).
// CHECK-LABEL: func.func @grads_through_rotary
// CHECK: %[[G:.+]] = tcx.alloc {kind = "output"} : <2x16x4x24xbf16>
// CHECK: %[[DQ:.+]] = tcx.view %[[G]][0] : <2x16x4x24xbf16> -> <2x4x16x8xbf16>
// CHECK: %[[DK:.+]] = tcx.view %[[G]][16] : <2x16x4x24xbf16> -> <2x4x16x8xbf16>
// CHECK: %[[DV:.+]] = tcx.view %[[G]][32] : <2x16x4x24xbf16> -> <2x4x16x8xbf16>
// CHECK: tcx.library "attention_bwd" {{.+}} outs(%[[DQ]], %[[DK]], %[[DV]], %{{.+}} : {{.+}} dk_strides = array<i64: 1536, 24, 96>, do_strides = {{.+}}, dq_strides = array<i64: 1536, 24, 96>, dv = 8 : i64, dv_strides = array<i64: 1536, 24, 96>
// CHECK: tcx.launch @grads_through_rotary_rotary_{{[0-9]+}} ins(%[[DQ]], %arg1, %arg2 : {{.+}}) outs(%[[DQ]] :
// CHECK: tcx.launch @grads_through_rotary_rotary_{{[0-9]+}} ins(%[[DK]], %arg1, %arg2 : {{.+}}) outs(%[[DK]] :
// CHECK: return %{{.+}}, %[[G]]
func.func @grads_through_rotary(%qkv: tensor<2x16x4x24xbf16>, %c: tensor<2x16x2xbf16>,
                                %ns: tensor<2x16x2xbf16>, %gt: tensor<2x4x16x8xbf16>)
    -> (tensor<2x4x16x8xbf16>, tensor<2x16x4x24xbf16>) {
  %t = tc.transpose %qkv {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x24xbf16> -> tensor<2x4x16x24xbf16>
  %q = tc.slice %t {starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x8xbf16>
  %k = tc.slice %t {starts = array<i64: 0, 0, 0, 8>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x8xbf16>
  %v = tc.slice %t {starts = array<i64: 0, 0, 0, 16>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x8xbf16>
  %o, %lse = tc.attention %q, %k, %v {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
  %dq, %dk, %dv = tc.attention_grad %q, %k, %v, %o, %lse, %gt {scale = 0.35 : f64, causal = true, tc.grads_through_rotary = array<i1: true, true, false>, tc.grads_transposed = array<i1: false, false, true>}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>,
         tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
  %dqr = tc.rotary %dq, %c, %ns {tc.out_transposed, tc.rotary_in_place} : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %dkr = tc.rotary %dk, %c, %ns {tc.out_transposed, tc.rotary_in_place} : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %cat = tc.concat %dqr, %dkr, %dv {axis = 3 : i64} : tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16> -> tensor<2x4x16x24xbf16>
  %ct = tc.transpose %cat {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x24xbf16> -> tensor<2x16x4x24xbf16>
  return %o, %ct : tensor<2x4x16x8xbf16>, tensor<2x16x4x24xbf16>
}

// -----

// Tests the backward's rotaries taken by the call (tc.attention_rotary,
// tc-fuse-attention-rotary): "attention_bwd" reads the tables (rot_cos,
// rot_sin after its other inputs) and stores dq and dk rotated where the
// rotaries would have rotated them; the rotaries make no kernel.
// CHECK-LABEL: func.func @attention_rotary
// CHECK: %[[G:.+]] = tcx.alloc {kind = "output"} : <2x16x4x24xbf16>
// CHECK: %[[DQ:.+]] = tcx.view %[[G]][0] : <2x16x4x24xbf16> -> <2x4x16x8xbf16>
// CHECK: %[[DK:.+]] = tcx.view %[[G]][16] : <2x16x4x24xbf16> -> <2x4x16x8xbf16>
// CHECK: tcx.library "attention_bwd" ins(%{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}, %arg1, %arg2 : {{.+}}) outs(%[[DQ]], %[[DK]], {{.+}} has_rotary = true, {{.+}} rotary_of = 3 : i64
// CHECK-NOT: tcx.launch
// CHECK: return %{{.+}}, %[[G]]
func.func @attention_rotary(%qkv: tensor<2x16x4x24xbf16>, %c: tensor<2x16x2xbf16>,
                                %ns: tensor<2x16x2xbf16>, %gt: tensor<2x4x16x8xbf16>)
    -> (tensor<2x4x16x8xbf16>, tensor<2x16x4x24xbf16>) {
  %t = tc.transpose %qkv {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x24xbf16> -> tensor<2x4x16x24xbf16>
  %q = tc.slice %t {starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x8xbf16>
  %k = tc.slice %t {starts = array<i64: 0, 0, 0, 8>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x8xbf16>
  %v = tc.slice %t {starts = array<i64: 0, 0, 0, 16>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x8xbf16>
  %o, %lse = tc.attention %q, %k, %v {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
  %dq, %dk, %dv = tc.attention_grad %q, %k, %v, %o, %lse, %gt {scale = 0.35 : f64, causal = true, tc.attention_rotary = array<i1: true, true>, tc.grads_through_rotary = array<i1: true, true, false>, tc.grads_transposed = array<i1: false, false, true>}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>,
         tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
  %dqr = tc.rotary %dq, %c, %ns {tc.out_transposed, tc.rotary_in_place} : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %dkr = tc.rotary %dk, %c, %ns {tc.out_transposed, tc.rotary_in_place} : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %cat = tc.concat %dqr, %dkr, %dv {axis = 3 : i64} : tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16> -> tensor<2x4x16x24xbf16>
  %ct = tc.transpose %cat {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x24xbf16> -> tensor<2x16x4x24xbf16>
  return %o, %ct : tensor<2x4x16x8xbf16>, tensor<2x16x4x24xbf16>
}

// -----

// Tests GPT-NeoX's qkv bias gradient summed by the call (tc-fuse-bias-grad
// attention-head-col-sums), heads interleaved: col_sum with each
// gradient's offset in a head's 24 columns and col_sum_head_stride 24,
// beside the rotaries the call takes; the reduce_sum becomes the call's
// output and no kernel sums the gradient.
// CHECK-LABEL: func.func @attention_head_col_sums
// CHECK: %[[CS:.+]] = tcx.alloc {kind = "output"} : <1x1x96xbf16>
// CHECK: tcx.library "attention_bwd" ins({{.+}}) outs(%{{.+}}, %{{.+}}, %{{.+}}, %[[CS]], %{{[0-9]+}} :
// CHECK-SAME: col_sum_head_stride = 24 : i64, col_sum_offsets = array<i64: 0, 8, 16>
// CHECK-SAME: has_col_sum = true
// CHECK-SAME: has_rotary = true
// CHECK-SAME: rotary_of = 3 : i64
// CHECK-NOT: tcx.launch
// CHECK: return %{{.+}}, %{{.+}}, %[[CS]]
func.func @attention_head_col_sums(%qkv: tensor<2x16x4x24xbf16>, %c: tensor<2x16x2xbf16>,
                                   %ns: tensor<2x16x2xbf16>, %gt: tensor<2x4x16x8xbf16>)
    -> (tensor<2x4x16x8xbf16>, tensor<2x16x96xbf16>, tensor<1x1x96xbf16>) {
  %t = tc.transpose %qkv {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x24xbf16> -> tensor<2x4x16x24xbf16>
  %q = tc.slice %t {starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x8xbf16>
  %k = tc.slice %t {starts = array<i64: 0, 0, 0, 8>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x8xbf16>
  %v = tc.slice %t {starts = array<i64: 0, 0, 0, 16>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x8xbf16>
  %o, %lse = tc.attention %q, %k, %v {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
  %dq, %dk, %dv = tc.attention_grad %q, %k, %v, %o, %lse, %gt {scale = 0.35 : f64, causal = true, tc.attention_rotary = array<i1: true, true>, tc.col_sum = 0 : i64, tc.grads_through_rotary = array<i1: true, true, false>, tc.grads_transposed = array<i1: false, false, true>}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>,
         tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
  %dqr = tc.rotary %dq, %c, %ns {tc.out_transposed, tc.rotary_in_place} : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %dkr = tc.rotary %dk, %c, %ns {tc.out_transposed, tc.rotary_in_place} : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %cat = tc.concat %dqr, %dkr, %dv {axis = 3 : i64} : tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16> -> tensor<2x4x16x24xbf16>
  %ct = tc.transpose %cat {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x24xbf16> -> tensor<2x16x4x24xbf16>
  %g = tc.reshape %ct : tensor<2x16x4x24xbf16> to tensor<2x16x96xbf16>
  %bias = tc.reduce_sum %g {axes = array<i64: 0, 1>, keepdims = true, tc.col_sum = 0 : i64} : tensor<2x16x96xbf16> -> tensor<1x1x96xbf16>
  return %o, %g, %bias : tensor<2x4x16x8xbf16>, tensor<2x16x96xbf16>, tensor<1x1x96xbf16>
}

// -----

// Tests that tc.quantize_delayed (tc-fuse-fp8-delayed) becomes one
// "quantize_fp8_delayed" call reading x and the scale and writing q, the
// amax, the saturation count and the transposed copy, each carrying the
// reference value of the op it replaced (the list form of the tag: -1
// first, then one id per result).
// CHECK-LABEL: func.func @quantize_delayed
// CHECK-DAG: %[[Q:.+]] = tcx.alloc {{{.*}}ref = 13 : i64} : <64x32xf8E4M3FN>
// CHECK-DAG: %[[M:.+]] = tcx.alloc {{{.*}}ref = 5 : i64} : <f32>
// CHECK-DAG: %[[N:.+]] = tcx.alloc {{{.*}}ref = 19 : i64} : <f32>
// CHECK-DAG: %[[T:.+]] = tcx.alloc {{{.*}}ref = 14 : i64} : <32x64xf8E4M3FN>
// CHECK: tcx.library "quantize_fp8_delayed" ins(%{{.+}}, %{{.+}} : !tcx.buffer<64x32xbf16>, !tcx.buffer<f32>) outs(%[[Q]], %[[M]], %[[N]], %[[T]] : {{.+}}) {cols = 32 : i64, has_transpose = true, rows = 64 : i64}
func.func @quantize_delayed(%x: tensor<64x32xbf16>, %s: tensor<f32>)
    -> (tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<32x64xf8E4M3FN>) {
  %q, %m, %n, %t = tc.quantize_delayed %x, %s {tc.ref = array<i64: -1, 13, 5, 19, 14>} : tensor<64x32xbf16>, tensor<f32> -> (tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<32x64xf8E4M3FN>)
  return %q, %m, %n, %t : tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<32x64xf8E4M3FN>
}
