// RUN: tc-opt %s --split-input-file --tc-fuse-matmul-epilogue | FileCheck %s

// Tests that a bias add of a [N] vector and a tanh gelu after a matmul (each
// the only reader of the value before it) are marked as its epilogue, and
// that an erf gelu is not.
// CHECK-LABEL: func.func @bias_gelu
// CHECK: tc.matmul %{{.+}}, %{{.+}} {tc.epilogue = "bias_gelu"}
// CHECK-LABEL: func.func @bias_only
// CHECK: tc.matmul %{{.+}}, %{{.+}} {tc.epilogue = "bias"}
func.func @bias_gelu(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>, %b: tensor<4xf32>) -> tensor<8x4xf32> {
  %0 = tc.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32> -> tensor<8x4xf32>
  %1 = tc.add %0, %b : tensor<8x4xf32>, tensor<4xf32> -> tensor<8x4xf32>
  %2 = tc.gelu %1 {approximate = "tanh"} : tensor<8x4xf32>
  return %2 : tensor<8x4xf32>
}
func.func @bias_only(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>, %b: tensor<4xf32>) -> tensor<8x4xf32> {
  %0 = tc.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32> -> tensor<8x4xf32>
  %1 = tc.add %0, %b : tensor<8x4xf32>, tensor<4xf32> -> tensor<8x4xf32>
  %2 = tc.gelu %1 : tensor<8x4xf32>
  return %2 : tensor<8x4xf32>
}

// -----

// Tests that nothing is marked when the product has a second reader, when
// the add is not of a [N] vector nor of a residual computed before the
// matmul, or for an integer matmul (no cuBLASLt kernel).
// CHECK-LABEL: func.func @unfused
// CHECK-NOT: tc.epilogue
// CHECK: return
func.func @unfused(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>, %b: tensor<4xf32>, %m: tensor<8x4xf32>,
                   %i: tensor<8x16xi32>, %j: tensor<16x4xi32>, %bi: tensor<4xi32>)
    -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xi32>) {
  %0 = tc.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32> -> tensor<8x4xf32>
  %1 = tc.add %0, %b : tensor<8x4xf32>, tensor<4xf32> -> tensor<8x4xf32>
  %2 = tc.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32> -> tensor<8x4xf32>
  %e = tc.exp %m : tensor<8x4xf32>
  %3 = tc.add %2, %e : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
  %4 = tc.matmul %i, %j : tensor<8x16xi32>, tensor<16x4xi32> -> tensor<8x4xi32>
  %5 = tc.add %4, %bi : tensor<8x4xi32>, tensor<4xi32> -> tensor<8x4xi32>
  return %0, %1, %3, %5 : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xi32>
}

// -----

// Tests that a weight gradient (lhs^T @ rhs per batch element, summed over
// the batch axes) is marked tc.fold_batch_sum, and a sum over another axis
// is not.
// CHECK-LABEL: func.func @weight_grad
// CHECK: tc.matmul %{{.+}}, %{{.+}} {tc.fold_batch_sum, transpose_lhs = true}
// CHECK-LABEL: func.func @not_batch_sum
// CHECK-NOT: tc.fold_batch_sum
// CHECK: return
func.func @weight_grad(%x: tensor<2x8x16xf32>, %dy: tensor<2x8x32xf32>) -> tensor<1x16x32xf32> {
  %p = tc.matmul %x, %dy {transpose_lhs = true} : tensor<2x8x16xf32>, tensor<2x8x32xf32> -> tensor<2x16x32xf32>
  %s = tc.reduce_sum %p {axes = array<i64: 0>, keepdims = true} : tensor<2x16x32xf32> -> tensor<1x16x32xf32>
  return %s : tensor<1x16x32xf32>
}
func.func @not_batch_sum(%x: tensor<2x8x16xf32>, %dy: tensor<2x8x32xf32>) -> tensor<2x32xf32> {
  %p = tc.matmul %x, %dy {transpose_lhs = true} : tensor<2x8x16xf32>, tensor<2x8x32xf32> -> tensor<2x16x32xf32>
  %s = tc.reduce_sum %p {axes = array<i64: 1>} : tensor<2x16x32xf32> -> tensor<2x32xf32>
  return %s : tensor<2x32xf32>
}

// -----

// Tests that an FP8 GEMM (per-tensor scales, bf16 product) is marked with
// its bias add and never with a gelu (cuBLASLt's FP8 kernels take a bias
// only), and that an f32 product is not marked.
// CHECK-LABEL: func.func @fp8_bias
// CHECK: tc.scaled_matmul {{.+}} {tc.epilogue = "bias", transpose_rhs = true}
// CHECK-LABEL: func.func @fp8_f32
// CHECK-NOT: tc.epilogue
// CHECK: return
func.func @fp8_bias(%qx: tensor<32x64xf8E4M3FN>, %sx: tensor<1x1xf32>, %qw: tensor<128x64xf8E4M3FN>, %sw: tensor<1x1xf32>, %b: tensor<128xbf16>) -> tensor<32x128xbf16> {
  %y = tc.scaled_matmul %qx, %sx, %qw, %sw {transpose_rhs = true}
      : (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>, tensor<128x64xf8E4M3FN>, tensor<1x1xf32>) -> tensor<32x128xbf16>
  %1 = tc.add %b, %y : tensor<128xbf16>, tensor<32x128xbf16> -> tensor<32x128xbf16>
  %2 = tc.gelu %1 {approximate = "tanh"} : tensor<32x128xbf16>
  return %2 : tensor<32x128xbf16>
}
func.func @fp8_f32(%qx: tensor<32x64xf8E4M3FN>, %sx: tensor<1x1xf32>, %qw: tensor<128x64xf8E4M3FN>, %sw: tensor<1x1xf32>, %b: tensor<128xf32>) -> tensor<32x128xf32> {
  %y = tc.scaled_matmul %qx, %sx, %qw, %sw {transpose_rhs = true}
      : (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>, tensor<128x64xf8E4M3FN>, tensor<1x1xf32>) -> tensor<32x128xf32>
  %1 = tc.add %y, %b : tensor<32x128xf32>, tensor<128xf32> -> tensor<32x128xf32>
  return %1 : tensor<32x128xf32>
}

// -----

// Tests the residual add after a projection: through the bias epilogue and a
// reshape, the add of a value computed before the matmul is the GEMM's C
// input (tc.epilogue_addend); after a GELU epilogue it is not (cuBLASLt adds
// C before the GELU).
// CHECK-LABEL: func.func @residual
// CHECK: tc.matmul %arg0, %arg1 {tc.epilogue = "bias", tc.epilogue_addend}
// CHECK: tc.matmul %arg0, %arg1 {tc.epilogue = "bias_gelu"}
// CHECK-NOT: tc.epilogue_addend
// CHECK: return
func.func @residual(%x: tensor<8x16xbf16>, %w: tensor<16x4xbf16>, %b: tensor<4xbf16>,
                    %r: tensor<2x4x4xbf16>, %s: tensor<8x4xbf16>)
    -> (tensor<2x4x4xbf16>, tensor<8x4xbf16>) {
  %0 = tc.matmul %x, %w : tensor<8x16xbf16>, tensor<16x4xbf16> -> tensor<8x4xbf16>
  %1 = tc.add %0, %b : tensor<8x4xbf16>, tensor<4xbf16> -> tensor<8x4xbf16>
  %2 = tc.reshape %1 : tensor<8x4xbf16> to tensor<2x4x4xbf16>
  %3 = tc.add %r, %2 : tensor<2x4x4xbf16>, tensor<2x4x4xbf16> -> tensor<2x4x4xbf16>
  %4 = tc.matmul %x, %w : tensor<8x16xbf16>, tensor<16x4xbf16> -> tensor<8x4xbf16>
  %5 = tc.add %4, %b : tensor<8x4xbf16>, tensor<4xbf16> -> tensor<8x4xbf16>
  %6 = tc.gelu %5 {approximate = "tanh"} : tensor<8x4xbf16>
  %7 = tc.add %6, %s : tensor<8x4xbf16>, tensor<8x4xbf16> -> tensor<8x4xbf16>
  return %3, %7 : tensor<2x4x4xbf16>, tensor<8x4xbf16>
}

// -----

// Tests that a GEMM whose (reshaped) bias add is read by a GELU tc-fuse left
// to it (tc.gelu_aux) and by the backward gets the GELU_AUX_BIAS epilogue,
// and without a bias GELU_AUX.
// CHECK-LABEL: func.func @gelu_aux
// CHECK: tc.matmul %{{.+}}, %{{.+}} {tc.epilogue = "bias_gelu_aux"}
// CHECK: tc.matmul %{{.+}}, %{{.+}} {tc.epilogue = "gelu_aux"}
func.func @gelu_aux(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>)
    -> (tensor<2x4x32xf32>, tensor<2x4x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>) {
  %p = tc.matmul %x, %w : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  %h = tc.add %p, %b : tensor<8x32xf32>, tensor<32xf32> -> tensor<8x32xf32>
  %r = tc.reshape %h : tensor<8x32xf32> to tensor<2x4x32xf32>
  %g = tc.gelu %r {approximate = "tanh", tc.gelu_aux} : tensor<2x4x32xf32>
  %q = tc.matmul %x, %w : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  %g2 = tc.gelu %q {approximate = "tanh", tc.gelu_aux} : tensor<8x32xf32>
  return %g, %r, %g2, %q : tensor<2x4x32xf32>, tensor<2x4x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// Tests that a GEMM whose product (through its reshape) only the marked
// g * gelu'(x) reads gets the DGELU epilogue, and that gelu'(x)'s ops move
// down after the GEMM, before the mul.
// CHECK-LABEL: func.func @dgelu
// CHECK: tc.matmul %{{.+}}, %{{.+}} {tc.epilogue = "dgelu", transpose_rhs = true}
// CHECK-NEXT: tc.reshape
// CHECK-NEXT: tc.mul %arg2, %arg2 {tc.dgelu}
// CHECK: tc.mul %{{.+}}, %{{.+}} {tc.dgelu, tc.gelu_grad = "tanh"}
func.func @dgelu(%dy: tensor<8x16xf32>, %w: tensor<32x16xf32>, %x: tensor<2x4x32xf32>) -> tensor<2x4x32xf32> {
  %c1 = tc.constant dense<1.0> : tensor<f32>
  %x2 = tc.mul %x, %x {tc.dgelu} : tensor<2x4x32xf32>, tensor<2x4x32xf32> -> tensor<2x4x32xf32>
  %t = tc.tanh %x2 {tc.dgelu} : tensor<2x4x32xf32>
  %d = tc.add %t, %c1 {tc.dgelu} : tensor<2x4x32xf32>, tensor<f32> -> tensor<2x4x32xf32>
  %p = tc.matmul %dy, %w {transpose_rhs = true} : tensor<8x16xf32>, tensor<32x16xf32> -> tensor<8x32xf32>
  %g = tc.reshape %p : tensor<8x32xf32> to tensor<2x4x32xf32>
  %r = tc.mul %g, %d {tc.dgelu, tc.gelu_grad = "tanh"} : tensor<2x4x32xf32>, tensor<2x4x32xf32> -> tensor<2x4x32xf32>
  return %r : tensor<2x4x32xf32>
}


// -----

// Tests the exact GELU's forms (tc-fuse gelu-erf): the marked erf GELU of a
// GEMM's bias add gives "bias_gelu_erf_aux", the marked g * gelu'(x) named
// "none" on a product "dgelu_erf".
// CHECK-LABEL: func.func @erf
// CHECK: tc.matmul %{{.+}}, %{{.+}} {tc.epilogue = "bias_gelu_erf_aux"}
// CHECK: tc.matmul %{{.+}}, %{{.+}} {tc.epilogue = "dgelu_erf", transpose_rhs = true}
func.func @erf(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>, %dy: tensor<8x16xf32>, %w2: tensor<32x16xf32>, %a: tensor<8x32xf32>)
    -> (tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>) {
  %p = tc.matmul %x, %w : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  %h = tc.add %p, %b : tensor<8x32xf32>, tensor<32xf32> -> tensor<8x32xf32>
  %g = tc.gelu %h {tc.gelu_aux} : tensor<8x32xf32>
  %x2 = tc.mul %a, %a {tc.dgelu} : tensor<8x32xf32>, tensor<8x32xf32> -> tensor<8x32xf32>
  %e = tc.erf %x2 {tc.dgelu} : tensor<8x32xf32>
  %q = tc.matmul %dy, %w2 {transpose_rhs = true} : tensor<8x16xf32>, tensor<32x16xf32> -> tensor<8x32xf32>
  %r = tc.mul %q, %e {tc.dgelu, tc.gelu_grad = "none"} : tensor<8x32xf32>, tensor<8x32xf32> -> tensor<8x32xf32>
  return %g, %h, %r : tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>
}
