// RUN: tc-opt %s --split-input-file --tc-merge-projections | FileCheck %s

// Tests the dynamo exporter's Llama projections (x @ transpose(W)), GQA:
// q [32] and k, v [16] of one input become one GEMM of the weights
// concatenated along N (transposed back), its column slices in place of
// each; the rotary and attention read them as before.
// CHECK-LABEL: func.func @llama
// CHECK: %[[W:.+]] = tc.concat %arg1, %arg2, %arg3 {axis = 0 : i64} : tensor<32x32xf32>, tensor<16x32xf32>, tensor<16x32xf32> -> tensor<64x32xf32>
// CHECK: %[[WT:.+]] = tc.transpose %[[W]] {permutation = array<i64: 1, 0>}
// CHECK: %[[Y:.+]] = tc.matmul %arg0, %[[WT]] : tensor<2x8x32xf32>, tensor<32x64xf32> -> tensor<2x8x64xf32>
// CHECK: tc.slice %[[Y]] {starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : tensor<2x8x64xf32> to tensor<2x8x32xf32>
// CHECK: tc.slice %[[Y]] {starts = array<i64: 0, 0, 32>, strides = array<i64: 1, 1, 1>} : tensor<2x8x64xf32> to tensor<2x8x16xf32>
// CHECK: tc.slice %[[Y]] {starts = array<i64: 0, 0, 48>, strides = array<i64: 1, 1, 1>} : tensor<2x8x64xf32> to tensor<2x8x16xf32>
// CHECK-NOT: tc.matmul
// CHECK: tc.attention
func.func @llama(%x: tensor<2x8x32xf32>, %wq: tensor<32x32xf32>, %wk: tensor<16x32xf32>, %wv: tensor<16x32xf32>,
                 %c: tensor<2x8x4xf32>, %s: tensor<2x8x4xf32>) -> tensor<2x4x8x8xf32> {
  %tq = tc.transpose %wq {permutation = array<i64: 1, 0>} : tensor<32x32xf32> -> tensor<32x32xf32>
  %q = tc.matmul %x, %tq : tensor<2x8x32xf32>, tensor<32x32xf32> -> tensor<2x8x32xf32>
  %q4 = tc.reshape %q : tensor<2x8x32xf32> to tensor<2x8x4x8xf32>
  %qt = tc.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x8xf32> -> tensor<2x4x8x8xf32>
  %tk = tc.transpose %wk {permutation = array<i64: 1, 0>} : tensor<16x32xf32> -> tensor<32x16xf32>
  %k = tc.matmul %x, %tk : tensor<2x8x32xf32>, tensor<32x16xf32> -> tensor<2x8x16xf32>
  %k4 = tc.reshape %k : tensor<2x8x16xf32> to tensor<2x8x2x8xf32>
  %kt = tc.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x8x2x8xf32> -> tensor<2x2x8x8xf32>
  %tv = tc.transpose %wv {permutation = array<i64: 1, 0>} : tensor<16x32xf32> -> tensor<32x16xf32>
  %v = tc.matmul %x, %tv : tensor<2x8x32xf32>, tensor<32x16xf32> -> tensor<2x8x16xf32>
  %v4 = tc.reshape %v : tensor<2x8x16xf32> to tensor<2x8x2x8xf32>
  %vt = tc.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x8x2x8xf32> -> tensor<2x2x8x8xf32>
  %qr = tc.rotary %qt, %c, %s : (tensor<2x4x8x8xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x4x8x8xf32>
  %kr = tc.rotary %kt, %c, %s : (tensor<2x2x8x8xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x2x8x8xf32>
  %o, %lse = tc.attention %qr, %kr, %vt {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8xf32>)
  return %o : tensor<2x4x8x8xf32>
}

// -----

// Tests the TorchScript exporter's form (pre-transposed [K, N] weights:
// concatenated along columns, no transpose) with a bias on every projection
// (Qwen2): the biases concatenated the same way, before the product.
// CHECK-LABEL: func.func @qwen2_ts
// CHECK: %[[W:.+]] = tc.concat %arg1, %arg2 {axis = 1 : i64} : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x48xf32>
// CHECK: %[[B:.+]] = tc.concat %arg3, %arg4 {axis = 0 : i64} : tensor<32xf32>, tensor<16xf32> -> tensor<48xf32>
// CHECK: %[[Y:.+]] = tc.matmul %arg0, %[[W]]
// CHECK: tc.add %[[Y]], %[[B]]
func.func @qwen2_ts(%x: tensor<2x8x32xf32>, %wq: tensor<32x32xf32>, %wk: tensor<32x16xf32>,
                    %bq: tensor<32xf32>, %bk: tensor<16xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x2x8x8xf32>) {
  %q = tc.matmul %x, %wq : tensor<2x8x32xf32>, tensor<32x32xf32> -> tensor<2x8x32xf32>
  %qb = tc.add %q, %bq : tensor<2x8x32xf32>, tensor<32xf32> -> tensor<2x8x32xf32>
  %q4 = tc.reshape %qb : tensor<2x8x32xf32> to tensor<2x8x4x8xf32>
  %qt = tc.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x8xf32> -> tensor<2x4x8x8xf32>
  %k = tc.matmul %x, %wk : tensor<2x8x32xf32>, tensor<32x16xf32> -> tensor<2x8x16xf32>
  %kb = tc.add %k, %bk : tensor<2x8x16xf32>, tensor<16xf32> -> tensor<2x8x16xf32>
  %k4 = tc.reshape %kb : tensor<2x8x16xf32> to tensor<2x8x2x8xf32>
  %kt = tc.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x8x2x8xf32> -> tensor<2x2x8x8xf32>
  %o, %lse = tc.attention %qt, %kt, %kt {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8xf32>)
  return %o, %kt : tensor<2x4x8x8xf32>, tensor<2x2x8x8xf32>
}

// -----

// Tests what stays: projections of one input that reach no attention (an
// MLP's gate and up), and projections of different inputs.
// CHECK-LABEL: func.func @unmerged
// CHECK-NOT: tc.concat
// CHECK: return
func.func @unmerged(%x: tensor<8x32xf32>, %y: tensor<8x32xf32>, %wg: tensor<32x64xf32>, %wu: tensor<32x64xf32>,
                    %c: tensor<1x8x4xf32>, %s: tensor<1x8x4xf32>) -> (tensor<8x64xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) {
  %g = tc.matmul %x, %wg : tensor<8x32xf32>, tensor<32x64xf32> -> tensor<8x64xf32>
  %u = tc.matmul %x, %wu : tensor<8x32xf32>, tensor<32x64xf32> -> tensor<8x64xf32>
  %m = tc.mul %g, %u : tensor<8x64xf32>, tensor<8x64xf32> -> tensor<8x64xf32>
  %a = tc.matmul %x, %wg : tensor<8x32xf32>, tensor<32x64xf32> -> tensor<8x64xf32>
  %b = tc.matmul %y, %wu : tensor<8x32xf32>, tensor<32x64xf32> -> tensor<8x64xf32>
  %a4 = tc.reshape %a : tensor<8x64xf32> to tensor<1x8x2x32xf32>
  %b4 = tc.reshape %b : tensor<8x64xf32> to tensor<1x8x2x32xf32>
  %at = tc.transpose %a4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x8x2x32xf32> -> tensor<1x2x8x32xf32>
  %bt = tc.transpose %b4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x8x2x32xf32> -> tensor<1x2x8x32xf32>
  %as = tc.slice %at {starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<1x2x8x32xf32> to tensor<1x2x8x16xf32>
  %bs = tc.slice %bt {starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<1x2x8x32xf32> to tensor<1x2x8x16xf32>
  %ar = tc.rotary %as, %c, %s : (tensor<1x2x8x16xf32>, tensor<1x8x4xf32>, tensor<1x8x4xf32>) -> tensor<1x2x8x16xf32>
  %br = tc.rotary %bs, %c, %s : (tensor<1x2x8x16xf32>, tensor<1x8x4xf32>, tensor<1x8x4xf32>) -> tensor<1x2x8x16xf32>
  return %m, %ar, %br : tensor<8x64xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>
}
