// RUN: tc-opt %s --split-input-file --tc-fuse-bias-grad=gemm-epilogue=true | FileCheck %s
// RUN: tc-opt %s --split-input-file --tc-fuse-bias-grad | FileCheck %s --check-prefix=OFF

// Tests that a weight-gradient GEMM (GPT-2's Conv1D form: dW = x^T dY, dY
// its rhs stored [K, N]) and the column sum of dY before it get the same
// tc.bias_grad, and that the matmul moves up before the sum (its operands
// are defined before it), so that its second output precedes the sum's
// readers; a second column sum of dY is left alone. Without gemm-epilogue
// nothing is paired.
// CHECK-LABEL: func.func @conv1d
// CHECK: tc.matmul %{{.+}}, %{{.+}} {tc.bias_grad = 0 : i64, transpose_lhs = true}
// CHECK-NEXT: tc.reduce_sum %{{.+}} {axes = array<i64: 0>, keepdims = true, tc.bias_grad = 0 : i64}
// CHECK-NEXT: tc.reshape
// CHECK-NEXT: tc.reduce_sum %{{.+}} {axes = array<i64: 0>} :
// OFF-LABEL: func.func @conv1d
// OFF-NOT: tc.bias_grad
func.func @conv1d(%x: tensor<64x16xbf16>, %dy: tensor<64x32xbf16>)
    -> (tensor<32xbf16>, tensor<32xbf16>, tensor<16x32xbf16>) {
  %s = tc.reduce_sum %dy {axes = array<i64: 0>, keepdims = true} : tensor<64x32xbf16> -> tensor<1x32xbf16>
  %db = tc.reshape %s : tensor<1x32xbf16> to tensor<32xbf16>
  %again = tc.reduce_sum %dy {axes = array<i64: 0>} : tensor<64x32xbf16> -> tensor<32xbf16>
  %dw = tc.matmul %x, %dy {transpose_lhs = true} : tensor<64x16xbf16>, tensor<64x32xbf16> -> tensor<16x32xbf16>
  return %db, %again, %dw : tensor<32xbf16>, tensor<32xbf16>, tensor<16x32xbf16>
}

// -----

// Tests the Linear form (dW = dY^T x: dY the lhs, stored [K, M]) folded over
// the batch (tc.fold_batch_sum): the sum over B and T of the [B, T, M]
// gradient pairs, and a sum after the GEMM leaves it in place.
// CHECK-LABEL: func.func @linear_batched
// CHECK: tc.matmul %{{.+}}, %{{.+}} {tc.bias_grad = 0 : i64, tc.fold_batch_sum, transpose_lhs = true}
// CHECK: tc.reduce_sum %{{.+}} {axes = array<i64: 0>}
// CHECK: tc.reduce_sum %{{.+}} {axes = array<i64: 0, 1>, tc.bias_grad = 0 : i64}
func.func @linear_batched(%dy: tensor<2x8x32xf32>, %x: tensor<2x8x16xf32>) -> (tensor<32x16xf32>, tensor<32xf32>) {
  %p = tc.matmul %dy, %x {transpose_lhs = true, tc.fold_batch_sum} : tensor<2x8x32xf32>, tensor<2x8x16xf32> -> tensor<2x32x16xf32>
  %dw = tc.reduce_sum %p {axes = array<i64: 0>} : tensor<2x32x16xf32> -> tensor<32x16xf32>
  %db = tc.reduce_sum %dy {axes = array<i64: 0, 1>} : tensor<2x8x32xf32> -> tensor<32xf32>
  return %dw, %db : tensor<32x16xf32>, tensor<32xf32>
}

// -----

// Tests what does not pair: a sum over K of an operand stored [M, K] (a row
// sum), a column sum into another type, a GEMM with another epilogue, a
// GEMM whose operand is defined after the sum (it cannot move up to it),
// and a batched GEMM not folded over its batch.
// CHECK-LABEL: func.func @unpaired
// CHECK-NOT: tc.bias_grad
// CHECK: return
func.func @unpaired(%a: tensor<16x64xbf16>, %dy: tensor<64x32xbf16>, %b: tensor<32xbf16>, %w: tensor<64x32xbf16>,
                    %x3: tensor<2x8x16xbf16>, %dy3: tensor<2x8x32xbf16>)
    -> (tensor<16xbf16>, tensor<16x32xbf16>, tensor<32xf32>, tensor<16x32xbf16>, tensor<32xbf16>,
        tensor<2x16x32xbf16>, tensor<32xbf16>, tensor<16x32xbf16>) {
  %rows = tc.reduce_sum %a {axes = array<i64: 1>} : tensor<16x64xbf16> -> tensor<16xbf16>
  %p = tc.matmul %a, %w : tensor<16x64xbf16>, tensor<64x32xbf16> -> tensor<16x32xbf16>
  %dyf = tc.cast %dy : tensor<64x32xbf16> to tensor<64x32xf32>
  %wide = tc.reduce_sum %dyf {axes = array<i64: 0>} : tensor<64x32xf32> -> tensor<32xf32>
  %e = tc.matmul %a, %dy {tc.epilogue = "bias"} : tensor<16x64xbf16>, tensor<64x32xbf16> -> tensor<16x32xbf16>
  %eb = tc.add %e, %b : tensor<16x32xbf16>, tensor<32xbf16> -> tensor<16x32xbf16>
  %s = tc.reduce_sum %dy {axes = array<i64: 0>} : tensor<64x32xbf16> -> tensor<32xbf16>
  %late = tc.neg %a : tensor<16x64xbf16>
  %lp = tc.matmul %late, %dy : tensor<16x64xbf16>, tensor<64x32xbf16> -> tensor<16x32xbf16>
  %bp = tc.matmul %x3, %dy3 {transpose_lhs = true} : tensor<2x8x16xbf16>, tensor<2x8x32xbf16> -> tensor<2x16x32xbf16>
  %s3 = tc.reduce_sum %dy3 {axes = array<i64: 0, 1>} : tensor<2x8x32xbf16> -> tensor<32xbf16>
  return %rows, %p, %wide, %eb, %s, %bp, %s3, %lp
      : tensor<16xbf16>, tensor<16x32xbf16>, tensor<32xf32>, tensor<16x32xbf16>, tensor<32xbf16>,
        tensor<2x16x32xbf16>, tensor<32xbf16>, tensor<16x32xbf16>
}
