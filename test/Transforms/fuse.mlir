// RUN: tc-opt %s --split-input-file --tc-fuse | FileCheck %s

// Tests that a bias add + tanh chain becomes one fusion, with the splat
// constant cloned into the body and the broadcast operand an input.
// CHECK-LABEL: func.func @chain
// CHECK: %[[F:.+]] = tc.fusion(%arg0, %arg1) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
// CHECK: ^bb0(%[[A:.+]]: tensor<4x8xf32>, %[[B:.+]]: tensor<8xf32>):
// CHECK: %[[C:.+]] = tc.constant dense<5.000000e-01>
// CHECK: %[[S:.+]] = tc.add %[[A]], %[[B]]
// CHECK: %[[T:.+]] = tc.tanh %[[S]]
// CHECK: %[[M:.+]] = tc.mul %[[T]], %[[C]]
// CHECK: tc.yield %[[M]] : tensor<4x8xf32>
// CHECK: return %[[F]]
func.func @chain(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %c = tc.constant dense<5.000000e-01> : tensor<f32>
  %0 = tc.add %x, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %1 = tc.tanh %0 : tensor<4x8xf32>
  %2 = tc.mul %1, %c : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// -----

// Tests that a value also used after the group becomes a second result
// instead of being computed twice.
// CHECK-LABEL: func.func @shared
// CHECK: %[[F:.+]]:2 = tc.fusion(%arg0) : (tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>)
// CHECK: tc.exp
// CHECK: tc.neg
// CHECK: tc.yield
// CHECK: tc.matmul
// CHECK: return %[[F]]#1, %{{.+}}
func.func @shared(%x: tensor<16xf32>, %w: tensor<16x16xf32>) -> (tensor<16xf32>, tensor<16x16xf32>) {
  %e = tc.exp %x : tensor<16xf32>
  %n = tc.neg %e : tensor<16xf32>
  %r = tc.reshape %e : tensor<16xf32> to tensor<1x16xf32>
  %m = tc.matmul %r, %w : tensor<1x16xf32>, tensor<16x16xf32> -> tensor<1x16xf32>
  %b = tc.broadcast %m : tensor<1x16xf32> to tensor<16x16xf32>
  return %n, %b : tensor<16xf32>, tensor<16x16xf32>
}

// -----

// Tests that a value needed before the group's root (by the reduction that
// feeds it) is not pulled in: two fusions, the reduction ends the first.
// The division recomputes exp(x) from x (no larger, and nothing after it
// reads exp(x)), so the first stores its sums alone.
// CHECK-LABEL: func.func @no_cycle
// CHECK: %[[R:.+]] = tc.fusion(%arg0) : (tensor<4x8xf32>) -> tensor<4x1xf32>
// CHECK: tc.exp
// CHECK: tc.reduce_sum
// CHECK: %[[D:.+]] = tc.fusion(%arg0, %[[R]])
// CHECK: tc.exp
// CHECK: tc.div
// CHECK: return %[[D]]
func.func @no_cycle(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = tc.exp %x : tensor<4x8xf32>
  %s = tc.reduce_sum %e {axes = array<i64: 1>, keepdims = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %d = tc.div %e, %s : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  return %d : tensor<4x8xf32>
}

// -----

// Tests that matmul, norms, gathers, losses and shape ops stay outside, and
// that a reduction over a leading axis is not a fusion root.
// CHECK-LABEL: func.func @never_fused
// CHECK-NOT: tc.fusion
// CHECK: tc.layer_norm
// CHECK: tc.transpose
// CHECK: tc.reduce_sum
// CHECK-NOT: tc.fusion
// CHECK: return
func.func @never_fused(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x4xf32>, tensor<8xf32>) {
  %n = tc.layer_norm %x {axis = 1 : i64, epsilon = 1.0e-05 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = tc.transpose %x {permutation = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  %s = tc.reduce_sum %x {axes = array<i64: 0>} : tensor<4x8xf32> -> tensor<8xf32>
  return %n, %t, %s : tensor<4x8xf32>, tensor<8x4xf32>, tensor<8xf32>
}

// -----

// Tests that a producer of a smaller shape (a broadcast operand) is not
// pulled into a larger iteration space, and that softmax ends a group that
// pulled its scale.
// CHECK-LABEL: func.func @softmax
// CHECK: %[[A:.+]] = tc.fusion(%arg1) : (tensor<8xf32>) -> tensor<8xf32>
// CHECK: tc.sigmoid
// CHECK: %[[P:.+]] = tc.fusion(%arg0, %[[A]]) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK: tc.mul
// CHECK: tc.softmax
// CHECK: return %[[P]]
func.func @softmax(%x: tensor<4x8xf32>, %g: tensor<8xf32>) -> tensor<4x8xf32> {
  %a = tc.sigmoid %g : tensor<8xf32>
  %s = tc.mul %x, %a : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %p = tc.softmax %s {axis = 1 : i64} : tensor<4x8xf32>
  return %p : tensor<4x8xf32>
}

// -----

// Tests that a matmul's bias add and the GELU-tanh after it stay out of
// fusions (tc-lower-to-tcx makes them cuBLASLt epilogues), while what follows
// fuses as usual.
// CHECK-LABEL: func.func @epilogue
// CHECK: %[[M:.+]] = tc.matmul
// CHECK-NEXT: %[[A:.+]] = tc.add %[[M]], %{{.+}}
// CHECK-NEXT: %[[G:.+]] = tc.gelu %[[A]] {approximate = "tanh"}
// CHECK-NEXT: tc.fusion
func.func @epilogue(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  %m = tc.matmul %x, %w : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  %a = tc.add %m, %b : tensor<8x32xf32>, tensor<32xf32> -> tensor<8x32xf32>
  %g = tc.gelu %a {approximate = "tanh"} : tensor<8x32xf32>
  %y = tc.mul %g, %g : tensor<8x32xf32>, tensor<8x32xf32> -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

// Tests that an FP8 GEMM's bias add stays out of fusions (its cuBLASLt
// epilogue) but the GELU-tanh after it fuses: FP8 GEMMs take a bias only.
// CHECK-LABEL: func.func @fp8_epilogue
// CHECK: %[[M:.+]] = tc.scaled_matmul
// CHECK-NEXT: %[[A:.+]] = tc.add %[[M]], %{{.+}}
// CHECK-NEXT: tc.fusion
// CHECK: tc.gelu
func.func @fp8_epilogue(%qx: tensor<32x64xf8E4M3FN>, %sx: tensor<1x1xf32>, %qw: tensor<128x64xf8E4M3FN>, %sw: tensor<1x1xf32>, %b: tensor<128xbf16>) -> tensor<32x128xbf16> {
  %m = tc.scaled_matmul %qx, %sx, %qw, %sw {transpose_rhs = true}
      : (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>, tensor<128x64xf8E4M3FN>, tensor<1x1xf32>) -> tensor<32x128xbf16>
  %a = tc.add %m, %b : tensor<32x128xbf16>, tensor<128xbf16> -> tensor<32x128xbf16>
  %g = tc.gelu %a {approximate = "tanh"} : tensor<32x128xbf16>
  %y = tc.mul %g, %g : tensor<32x128xbf16>, tensor<32x128xbf16> -> tensor<32x128xbf16>
  return %y : tensor<32x128xbf16>
}

// -----

// Tests that when the pre-activation is needed again (training keeps it for
// the GELU gradient) only the bias add stays out: the GELU fuses.
// CHECK-LABEL: func.func @epilogue_kept
// CHECK: %[[M:.+]] = tc.matmul
// CHECK-NEXT: %[[A:.+]] = tc.add %[[M]], %{{.+}}
// CHECK-NEXT: tc.fusion
// CHECK: tc.gelu
func.func @epilogue_kept(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  %m = tc.matmul %x, %w : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  %a = tc.add %m, %b : tensor<8x32xf32>, tensor<32xf32> -> tensor<8x32xf32>
  %g = tc.gelu %a {approximate = "tanh"} : tensor<8x32xf32>
  %y = tc.mul %g, %a : tensor<8x32xf32>, tensor<8x32xf32> -> tensor<8x32xf32>
  return %y, %a : tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// Tests rematerialization: the backward reads x^2 and tanh(x^2) of the
// forward, which it can recompute from x (read anyway), and z = exp(w),
// which a reduction reads before it: recomputed from w too (an argument no
// larger than z, and nothing after the backward reads z), so the
// reduction's fusion stores its sums alone and the forward's fusion stores
// y alone. The backward, reading x as the forward does and nothing made
// after it, then joins the forward's kernel (sibling fusion; x^2 and tanh
// computed once).
// CHECK-LABEL: func.func @rematerialize
// CHECK: tc.fusion(%arg0, %arg2, %arg3, %arg1) : (tensor<64x32xf32>, tensor<f32>, tensor<64x32xf32>, tensor<64x32xf32>) -> (tensor<64x32xf32>, tensor<64x32xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tc.mul %arg4, %arg4
// CHECK-NEXT: tc.tanh
// CHECK-NOT: tc.tanh
// CHECK: tc.exp %arg6
// CHECK: tc.fusion(%arg3) : (tensor<64x32xf32>) -> tensor<64xf32>
// CHECK: return
func.func @rematerialize(%x: tensor<64x32xf32>, %dy: tensor<64x32xf32>, %c: tensor<f32>, %w: tensor<64x32xf32>)
    -> (tensor<64x32xf32>, tensor<64x32xf32>, tensor<64xf32>) {
  %sq = tc.mul %x, %x : tensor<64x32xf32>, tensor<64x32xf32> -> tensor<64x32xf32>
  %t = tc.tanh %sq : tensor<64x32xf32>
  %y = tc.mul %t, %c : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf32>
  %z = tc.exp %w : tensor<64x32xf32>
  %r = tc.reduce_sum %z {axes = array<i64: 1>} : tensor<64x32xf32> -> tensor<64xf32>
  %a = tc.mul %dy, %t : tensor<64x32xf32>, tensor<64x32xf32> -> tensor<64x32xf32>
  %b = tc.mul %a, %sq : tensor<64x32xf32>, tensor<64x32xf32> -> tensor<64x32xf32>
  %d = tc.mul %b, %x : tensor<64x32xf32>, tensor<64x32xf32> -> tensor<64x32xf32>
  %e = tc.add %d, %z : tensor<64x32xf32>, tensor<64x32xf32> -> tensor<64x32xf32>
  return %y, %e, %r : tensor<64x32xf32>, tensor<64x32xf32>, tensor<64xf32>
}

// -----

// Tests the widening cast read narrow: the f32 copy of a bf16 gradient
// feeds the grad-norm clip's sum of squares and, after it, the update. The
// update's fusion reads the bf16 gradient and widens it itself, so the
// sum of squares stores nothing but its sum (the f32 copy is never stored).
// CHECK-LABEL: func.func @widening_cast_read_narrow
// CHECK: %[[N:.+]] = tc.fusion(%arg0) : (tensor<64x32xbf16>) -> tensor<f32>
// CHECK: tc.fusion(%arg0, %[[N]], %arg1) : (tensor<64x32xbf16>, tensor<f32>, tensor<64x32xf32>) -> tensor<64x32xf32>
// CHECK: tc.cast %{{.+}} : tensor<64x32xbf16> to tensor<64x32xf32>
// CHECK: return
func.func @widening_cast_read_narrow(%g: tensor<64x32xbf16>, %p: tensor<64x32xf32>)
    -> tensor<64x32xf32> {
  %gf = tc.cast %g : tensor<64x32xbf16> to tensor<64x32xf32>
  %sq = tc.mul %gf, %gf : tensor<64x32xf32>, tensor<64x32xf32> -> tensor<64x32xf32>
  %n = tc.reduce_sum %sq {axes = array<i64: 0, 1>} : tensor<64x32xf32> -> tensor<f32>
  %u = tc.mul %gf, %n : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf32>
  %q = tc.sub %p, %u : tensor<64x32xf32>, tensor<64x32xf32> -> tensor<64x32xf32>
  return %q : tensor<64x32xf32>
}

// -----

// Tests rematerialization from a value read after the root, and sibling
// fusion: SwiGLU's backward. The up-projection's gradient dp * silu(g)
// recomputes silu(g) from g (a matmul result the gate's gradient reads after
// it) instead of reading the stored silu(g), so the forward stores
// silu(g) * u alone; then the gate's gradient, whose inputs are all there
// before the up-gradient's fusion, joins that fusion across the matmul
// between them (g and dp read once, the sigmoid computed once). The forward
// fusion reads g too, but is too far before them to be merged.
// CHECK-LABEL: func.func @rematerialize_from_live_value
// CHECK: %[[G:.+]] = tc.matmul %arg0, %arg1
// CHECK: %[[U:.+]] = tc.matmul %arg0, %arg2
// CHECK: %[[P:.+]] = tc.fusion(%[[G]], %[[U]]) : (tensor<64x48xf32>, tensor<64x48xf32>) -> tensor<64x48xf32>
// CHECK: tc.matmul %[[P]], %arg3
// CHECK: %[[D:.+]]:2 = tc.fusion(%[[G]], %arg4, %[[U]]) : (tensor<64x48xf32>, tensor<64x48xf32>, tensor<64x48xf32>) -> (tensor<64x48xf32>, tensor<64x48xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tc.sigmoid
// CHECK-NOT: tc.sigmoid
// CHECK: tc.yield
// CHECK: tc.matmul %[[D]]#0, %arg3
// CHECK: return %{{.+}}, %{{.+}}, %[[D]]#1
func.func @rematerialize_from_live_value(%x: tensor<64x32xf32>, %wg: tensor<32x48xf32>,
    %wu: tensor<32x48xf32>, %wd: tensor<48x32xf32>, %dp: tensor<64x48xf32>)
    -> (tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x48xf32>) {
  %one = tc.constant dense<1.000000e+00> : tensor<f32>
  %g = tc.matmul %x, %wg : tensor<64x32xf32>, tensor<32x48xf32> -> tensor<64x48xf32>
  %u = tc.matmul %x, %wu : tensor<64x32xf32>, tensor<32x48xf32> -> tensor<64x48xf32>
  %s = tc.sigmoid %g : tensor<64x48xf32>
  %sg = tc.mul %g, %s : tensor<64x48xf32>, tensor<64x48xf32> -> tensor<64x48xf32>
  %p = tc.mul %sg, %u : tensor<64x48xf32>, tensor<64x48xf32> -> tensor<64x48xf32>
  %y0 = tc.matmul %p, %wd : tensor<64x48xf32>, tensor<48x32xf32> -> tensor<64x32xf32>
  %y1 = tc.matmul %y0, %wg : tensor<64x32xf32>, tensor<32x48xf32> -> tensor<64x48xf32>
  %y2 = tc.matmul %y1, %wd : tensor<64x48xf32>, tensor<48x32xf32> -> tensor<64x32xf32>
  %y3 = tc.matmul %y2, %wg : tensor<64x32xf32>, tensor<32x48xf32> -> tensor<64x48xf32>
  %y = tc.matmul %y3, %wd : tensor<64x48xf32>, tensor<48x32xf32> -> tensor<64x32xf32>
  %du = tc.mul %dp, %sg : tensor<64x48xf32>, tensor<64x48xf32> -> tensor<64x48xf32>
  %dxu = tc.matmul %du, %wd : tensor<64x48xf32>, tensor<48x32xf32> -> tensor<64x32xf32>
  %t = tc.mul %dp, %u : tensor<64x48xf32>, tensor<64x48xf32> -> tensor<64x48xf32>
  %oms = tc.sub %one, %s : tensor<f32>, tensor<64x48xf32> -> tensor<64x48xf32>
  %ds = tc.mul %s, %oms : tensor<64x48xf32>, tensor<64x48xf32> -> tensor<64x48xf32>
  %t2 = tc.mul %t, %g : tensor<64x48xf32>, tensor<64x48xf32> -> tensor<64x48xf32>
  %t3 = tc.mul %t2, %ds : tensor<64x48xf32>, tensor<64x48xf32> -> tensor<64x48xf32>
  %t4 = tc.mul %t, %s : tensor<64x48xf32>, tensor<64x48xf32> -> tensor<64x48xf32>
  %dg = tc.add %t4, %t3 : tensor<64x48xf32>, tensor<64x48xf32> -> tensor<64x48xf32>
  return %y, %dxu, %dg : tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x48xf32>
}
