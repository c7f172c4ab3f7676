// RUN: tc-opt %s --split-input-file --tc-fuse-bias-grad | FileCheck %s

// Tests that the per-tensor E5M2 quantize of a gradient and the bias
// gradient (its [B, T, N] source summed over B and T, keepdims) get the same
// tc.col_sum, and that a second column sum of the same tensor is left alone.
// CHECK-LABEL: func.func @bias_grad
// CHECK: tc.quantize {{.+}} {block = array<i64: 32, 16>, tc.col_sum = 0 : i64}
// CHECK: tc.reduce_sum {{.+}} {axes = array<i64: 0, 1>, keepdims = true, tc.col_sum = 0 : i64}
// CHECK: tc.reduce_sum {{.+}} {axes = array<i64: 0, 1>} :
func.func @bias_grad(%dy: tensor<4x8x16xbf16>) -> (tensor<32x16xf8E5M2>, tensor<1x1xf32>, tensor<1x1x16xbf16>, tensor<16xbf16>) {
  %m = tc.reshape %dy : tensor<4x8x16xbf16> to tensor<32x16xbf16>
  %q, %s = tc.quantize %m {block = array<i64: 32, 16>} : tensor<32x16xbf16> -> (tensor<32x16xf8E5M2>, tensor<1x1xf32>)
  %db = tc.reduce_sum %dy {axes = array<i64: 0, 1>, keepdims = true} : tensor<4x8x16xbf16> -> tensor<1x1x16xbf16>
  %again = tc.reduce_sum %dy {axes = array<i64: 0, 1>} : tensor<4x8x16xbf16> -> tensor<16xbf16>
  return %q, %s, %db, %again : tensor<32x16xf8E5M2>, tensor<1x1xf32>, tensor<1x1x16xbf16>, tensor<16xbf16>
}

// -----

// Tests that a column sum of the quantized matrix itself (f32) pairs too.
// CHECK-LABEL: func.func @matrix
// CHECK: tc.quantize {{.+}} tc.col_sum = 0 : i64
// CHECK: tc.reduce_sum {{.+}} {axes = array<i64: 0>, tc.col_sum = 0 : i64}
func.func @matrix(%x: tensor<64x32xf32>) -> (tensor<64x32xf8E4M3FN>, tensor<1x1xf32>, tensor<32xf32>) {
  %q, %s = tc.quantize %x {block = array<i64: 64, 32>} : tensor<64x32xf32> -> (tensor<64x32xf8E4M3FN>, tensor<1x1xf32>)
  %c = tc.reduce_sum %x {axes = array<i64: 0>} : tensor<64x32xf32> -> tensor<32xf32>
  return %q, %s, %c : tensor<64x32xf8E4M3FN>, tensor<1x1xf32>, tensor<32xf32>
}

// -----

// Tests what does not pair: a sum before the quantize, per-row scaling, a
// sum over the last axis, a sum into another type.
// CHECK-LABEL: func.func @unpaired
// CHECK-NOT: tc.col_sum
// CHECK: return
func.func @unpaired(%x: tensor<64x32xbf16>)
    -> (tensor<32xbf16>, tensor<64x32xf8E5M2>, tensor<1x1xf32>, tensor<64x32xf8E5M2>, tensor<64x1xf32>,
        tensor<64xbf16>, tensor<32xf32>) {
  %before = tc.reduce_sum %x {axes = array<i64: 0>} : tensor<64x32xbf16> -> tensor<32xbf16>
  %q, %s = tc.quantize %x {block = array<i64: 64, 32>} : tensor<64x32xbf16> -> (tensor<64x32xf8E5M2>, tensor<1x1xf32>)
  %r, %rs = tc.quantize %x {block = array<i64: 1, 32>} : tensor<64x32xbf16> -> (tensor<64x32xf8E5M2>, tensor<64x1xf32>)
  %rows = tc.reduce_sum %x {axes = array<i64: 1>} : tensor<64x32xbf16> -> tensor<64xbf16>
  %xf = tc.cast %x : tensor<64x32xbf16> to tensor<64x32xf32>
  %wide = tc.reduce_sum %xf {axes = array<i64: 0>} : tensor<64x32xf32> -> tensor<32xf32>
  return %before, %q, %s, %r, %rs, %rows, %wide
      : tensor<32xbf16>, tensor<64x32xf8E5M2>, tensor<1x1xf32>, tensor<64x32xf8E5M2>, tensor<64x1xf32>,
        tensor<64xbf16>, tensor<32xf32>
}
