// RUN: tc-opt %s --split-input-file --tc-fold-transposes | FileCheck %s

// Tests the operand side: a weight's transpose read by the forward GEMM and
// the backward's dgrad GEMM goes; both read the weight with the transpose
// flag flipped.
// CHECK-LABEL: func.func @operand_side
// CHECK-NOT: tc.transpose
// CHECK: tc.matmul %arg0, %arg1 {transpose_rhs = true} : tensor<8x32xbf16>, tensor<64x32xbf16> -> tensor<8x64xbf16>
// CHECK: tc.matmul %arg2, %arg1 : tensor<8x64xbf16>, tensor<64x32xbf16> -> tensor<8x32xbf16>
func.func @operand_side(%x: tensor<8x32xbf16>, %w: tensor<64x32xbf16>, %dy: tensor<8x64xbf16>)
    -> (tensor<8x64xbf16>, tensor<8x32xbf16>) {
  %t = tc.transpose %w {permutation = array<i64: 1, 0>} : tensor<64x32xbf16> -> tensor<32x64xbf16>
  %y = tc.matmul %x, %t : tensor<8x32xbf16>, tensor<32x64xbf16> -> tensor<8x64xbf16>
  %dx = tc.matmul %dy, %t {transpose_rhs = true} : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
  return %y, %dx : tensor<8x64xbf16>, tensor<8x32xbf16>
}

// -----

// Tests a padded transpose (tc-pad-vocab's classifier): the pad of the
// columns of w^T becomes a pad of the rows of w.
// CHECK-LABEL: func.func @padded
// CHECK: %[[P:.+]] = tc.pad %arg1 {high = array<i64: 6, 0>, low = array<i64: 0, 0>} : tensor<58x32xbf16> -> tensor<64x32xbf16>
// CHECK: tc.matmul %arg0, %[[P]] {transpose_rhs = true} : tensor<8x32xbf16>, tensor<64x32xbf16> -> tensor<8x64xbf16>
func.func @padded(%x: tensor<8x32xbf16>, %w: tensor<58x32xbf16>) -> tensor<8x64xbf16> {
  %t = tc.transpose %w {permutation = array<i64: 1, 0>} : tensor<58x32xbf16> -> tensor<32x58xbf16>
  %p = tc.pad %t {high = array<i64: 0, 6>, low = array<i64: 0, 0>} : tensor<32x58xbf16> -> tensor<32x64xbf16>
  %y = tc.matmul %x, %p : tensor<8x32xbf16>, tensor<32x64xbf16> -> tensor<8x64xbf16>
  return %y : tensor<8x64xbf16>
}

// -----

// Tests the result side: the weight gradient dW^T = sum_b x[b]^T dy[b],
// reshaped, sliced to the unpadded rows and transposed, becomes the same
// chain over sum_b dy[b]^T x[b]; the transpose's reference tag moves to the
// chain's last op (the slice), the other new ops have none.
// CHECK-LABEL: func.func @result_side
// CHECK-NOT: tc.transpose
// CHECK: %[[M:.+]] = tc.matmul %arg1, %arg0 {transpose_lhs = true} : tensor<2x8x64xbf16>, tensor<2x8x32xbf16> -> tensor<2x64x32xbf16>
// CHECK: %[[S:.+]] = tc.reduce_sum %[[M]] {axes = array<i64: 0>, keepdims = true} : tensor<2x64x32xbf16> -> tensor<1x64x32xbf16>
// CHECK: %[[R:.+]] = tc.reshape %[[S]] : tensor<1x64x32xbf16> to tensor<64x32xbf16>
// CHECK: %[[L:.+]] = tc.slice %[[R]] {starts = array<i64: 0, 0>, strides = array<i64: 1, 1>, tc.ref = array<i64: 6, 1>} : tensor<64x32xbf16> to tensor<58x32xbf16>
// CHECK: tc.cast %[[L]] {tc.ref = array<i64: 7, 1>} : tensor<58x32xbf16> to tensor<58x32xf32>
func.func @result_side(%x: tensor<2x8x32xbf16>, %dy: tensor<2x8x64xbf16>) -> tensor<58x32xf32> {
  %m = tc.matmul %x, %dy {transpose_lhs = true, tc.ref = array<i64: 2, 1>} : tensor<2x8x32xbf16>, tensor<2x8x64xbf16> -> tensor<2x32x64xbf16>
  %s = tc.reduce_sum %m {axes = array<i64: 0>, keepdims = true, tc.ref = array<i64: 3, 1>} : tensor<2x32x64xbf16> -> tensor<1x32x64xbf16>
  %r = tc.reshape %s {tc.ref = array<i64: 4, 1>} : tensor<1x32x64xbf16> to tensor<32x64xbf16>
  %l = tc.slice %r {starts = array<i64: 0, 0>, strides = array<i64: 1, 1>, tc.ref = array<i64: 5, 1>} : tensor<32x64xbf16> to tensor<32x58xbf16>
  %t = tc.transpose %l {permutation = array<i64: 1, 0>, tc.ref = array<i64: 6, 1>} : tensor<32x58xbf16> -> tensor<58x32xbf16>
  %c = tc.cast %t {tc.ref = array<i64: 7, 1>} : tensor<58x32xbf16> to tensor<58x32xf32>
  return %c : tensor<58x32xf32>
}

// -----

// Tests what stays: a transpose another op reads (an elementwise add), and
// one whose producer chain has a second reader.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-2: tc.transpose
func.func @kept(%x: tensor<8x32xf32>, %w: tensor<64x32xf32>, %a: tensor<32x8xf32>, %b: tensor<32x64xf32>)
    -> (tensor<8x64xf32>, tensor<32x64xf32>, tensor<64x8xf32>, tensor<8x64xf32>) {
  %t = tc.transpose %w {permutation = array<i64: 1, 0>} : tensor<64x32xf32> -> tensor<32x64xf32>
  %y = tc.matmul %x, %t : tensor<8x32xf32>, tensor<32x64xf32> -> tensor<8x64xf32>
  %z = tc.add %t, %b : tensor<32x64xf32>, tensor<32x64xf32> -> tensor<32x64xf32>
  %m = tc.matmul %a, %y : tensor<32x8xf32>, tensor<8x64xf32> -> tensor<32x64xf32>
  %u = tc.transpose %y {permutation = array<i64: 1, 0>} : tensor<8x64xf32> -> tensor<64x8xf32>
  return %y, %z, %u, %y : tensor<8x64xf32>, tensor<32x64xf32>, tensor<64x8xf32>, tensor<8x64xf32>
}
