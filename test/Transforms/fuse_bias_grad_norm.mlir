// RUN: tc-opt %s --split-input-file --tc-fuse-bias-grad="gemm-epilogue=true norm-col-sums=true" | FileCheck %s
// RUN: tc-opt %s --split-input-file --tc-fuse-bias-grad=gemm-epilogue=true | FileCheck %s --check-prefix=GEMM
// RUN: tc-opt %s --split-input-file --tc-fuse-bias-grad | FileCheck %s --check-prefix=OFF

// Tests that with norm-col-sums the column sum of the dx a norm gradient
// writes -- here with the residual stream's gradient added by the call, and
// read through a reshape to [tokens, cols] -- pairs with the norm gradient
// (tc.col_sum), not with the weight-gradient GEMM that reads the same bytes,
// which stays a plain product (no tc.bias_grad); without it the GEMM takes
// the sum (BGRAD), and without gemm-epilogue nothing pairs.
// CHECK-LABEL: func.func @residual_grad
// CHECK: tc.layer_norm_grad {{.+}} {axis = 2 : i64, epsilon = 1.000000e-05 : f64, tc.col_sum = 0 : i64}
// CHECK: tc.reduce_sum %{{.+}} {axes = array<i64: 0>, tc.col_sum = 0 : i64}
// CHECK-NOT: tc.bias_grad
// CHECK: return
// GEMM-LABEL: func.func @residual_grad
// GEMM-NOT: tc.col_sum
// GEMM: tc.matmul {{.+}}{tc.bias_grad = 0 : i64
// OFF-LABEL: func.func @residual_grad
// OFF-NOT: tc.col_sum
// OFF-NOT: tc.bias_grad
func.func @residual_grad(%x: tensor<2x8x16xbf16>, %dy: tensor<2x8x16xbf16>, %r: tensor<2x8x16xbf16>,
                         %h: tensor<16x32xbf16>) -> (tensor<16xbf16>, tensor<16x32xbf16>, tensor<16xbf16>, tensor<16xbf16>) {
  %g = tc.parameter "g" : tensor<16xbf16>
  %dx, %dg, %db = tc.layer_norm_grad %x, %dy, scale %g {axis = 2 : i64, epsilon = 1.0e-05 : f64}
      : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<16xbf16>) -> (tensor<2x8x16xbf16>, tensor<16xbf16>, tensor<16xbf16>)
  %s = tc.add %dx, %r : tensor<2x8x16xbf16>, tensor<2x8x16xbf16> -> tensor<2x8x16xbf16>
  %m = tc.reshape %s : tensor<2x8x16xbf16> to tensor<16x16xbf16>
  %bias = tc.reduce_sum %m {axes = array<i64: 0>} : tensor<16x16xbf16> -> tensor<16xbf16>
  %dw = tc.matmul %m, %h {transpose_lhs = true} : tensor<16x16xbf16>, tensor<16x32xbf16> -> tensor<16x32xbf16>
  return %bias, %dw, %dg, %db : tensor<16xbf16>, tensor<16x32xbf16>, tensor<16xbf16>, tensor<16xbf16>
}

// -----

// Tests an rms_norm gradient without a residual add, its dx summed over
// both leading axes: they pair; a second column sum of the same dx is left
// to the GEMM (tc.bias_grad).
// CHECK-LABEL: func.func @rms
// CHECK: tc.rms_norm_grad {{.+}} tc.col_sum = 0 : i64
// CHECK: tc.reduce_sum %{{.+}} {axes = array<i64: 0, 1>, tc.col_sum = 0 : i64}
// CHECK: tc.matmul {{.+}}{tc.bias_grad = 1 : i64
// CHECK: tc.reduce_sum %{{.+}} {axes = array<i64: 0>, tc.bias_grad = 1 : i64}
func.func @rms(%x: tensor<2x8x16xf32>, %dy: tensor<2x8x16xf32>, %h: tensor<16x32xf32>)
    -> (tensor<16xf32>, tensor<16xf32>, tensor<16x32xf32>, tensor<16xf32>) {
  %g = tc.parameter "g" : tensor<16xf32>
  %dx, %dg = tc.rms_norm_grad %x, %dy, scale %g {axis = 2 : i64, epsilon = 1.0e-06 : f64}
      : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>)
  %b3 = tc.reduce_sum %dx {axes = array<i64: 0, 1>} : tensor<2x8x16xf32> -> tensor<16xf32>
  %m = tc.reshape %dx : tensor<2x8x16xf32> to tensor<16x16xf32>
  %b2 = tc.reduce_sum %m {axes = array<i64: 0>} : tensor<16x16xf32> -> tensor<16xf32>
  %dw = tc.matmul %m, %h {transpose_lhs = true} : tensor<16x16xf32>, tensor<16x32xf32> -> tensor<16x32xf32>
  return %b3, %b2, %dw, %dg : tensor<16xf32>, tensor<16xf32>, tensor<16x32xf32>, tensor<16xf32>
}

// -----

// Tests what does not pair with a norm gradient: a norm over two trailing
// axes (its rows are not the sum's), a sum into another type, a row sum.
// CHECK-LABEL: func.func @unpaired
// CHECK-NOT: tc.col_sum
// CHECK: return
func.func @unpaired(%x: tensor<4x8x16xf32>, %dy: tensor<4x8x16xf32>, %x2: tensor<8x16xbf16>, %dy2: tensor<8x16xbf16>)
    -> (tensor<16xf32>, tensor<16xf32>, tensor<8xbf16>) {
  %dx, %dg, %db = tc.layer_norm_grad %x, %dy {axis = 1 : i64, epsilon = 1.0e-05 : f64}
      : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> (tensor<4x8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>)
  %s = tc.reduce_sum %dx {axes = array<i64: 0, 1>} : tensor<4x8x16xf32> -> tensor<16xf32>
  %dx2, %dg2, %db2 = tc.layer_norm_grad %x2, %dy2 {axis = 1 : i64, epsilon = 1.0e-05 : f64}
      : (tensor<8x16xbf16>, tensor<8x16xbf16>) -> (tensor<8x16xbf16>, tensor<16xbf16>, tensor<16xbf16>)
  %c = tc.cast %dx2 : tensor<8x16xbf16> to tensor<8x16xf32>
  %wide = tc.reduce_sum %c {axes = array<i64: 0>} : tensor<8x16xf32> -> tensor<16xf32>
  %rows = tc.reduce_sum %dx2 {axes = array<i64: 1>} : tensor<8x16xbf16> -> tensor<8xbf16>
  return %s, %wide, %rows : tensor<16xf32>, tensor<16xf32>, tensor<8xbf16>
}
