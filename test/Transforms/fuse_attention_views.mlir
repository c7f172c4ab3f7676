// RUN: tc-opt %s --split-input-file --tc-fuse-attention-views | FileCheck %s

// Tests that the forward's output, read by its transpose back to
// [B, T, H, D] and by the backward as its result, is marked to be written
// through the transpose, and that the backward's dq and dv (each read only
// by a head transpose) are, dk (returned as is) not.
// CHECK-LABEL: func.func @strided
// CHECK: tc.attention {{.+}} {causal = true, scale = 3.500000e-01 : f64, tc.out_transposed}
// CHECK: tc.attention_grad {{.+}} {causal = true, scale = 3.500000e-01 : f64, tc.grads_transposed = array<i1: true, false, true>}
func.func @strided(%qt: tensor<2x4x16x8xbf16>, %kt: tensor<2x4x16x8xbf16>, %vt: tensor<2x4x16x8xbf16>,
                   %gt: tensor<2x4x16x8xbf16>)
    -> (tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x16x4x8xbf16>) {
  %o, %lse = tc.attention %qt, %kt, %vt {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
  %ot = tc.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %dq, %dk, %dv = tc.attention_grad %qt, %kt, %vt, %o, %lse, %gt {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>,
         tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
  %dqt = tc.transpose %dq {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %dvt = tc.transpose %dv {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  return %ot, %dqt, %dk, %dvt : tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x16x4x8xbf16>
}

// -----

// Tests that dq, dk, dv going through their transposes and reshapes into
// one concat along the last axis of [B, T, 3C] (a fused qkv projection's
// gradient) are marked to be written into it, and that an output returned
// as is is not written through anything.
// CHECK-LABEL: func.func @qkv
// CHECK: tc.attention {{.+}} {causal = true, scale = 3.500000e-01 : f64} :
// CHECK: tc.attention_grad {{.+}} {causal = true, scale = 3.500000e-01 : f64, tc.grads_into_concat}
func.func @qkv(%qt: tensor<2x4x16x8xbf16>, %kt: tensor<2x4x16x8xbf16>, %vt: tensor<2x4x16x8xbf16>,
               %gt: tensor<2x4x16x8xbf16>) -> (tensor<2x4x16x8xbf16>, tensor<2x16x96xbf16>) {
  %o, %lse = tc.attention %qt, %kt, %vt {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
  %dq, %dk, %dv = tc.attention_grad %qt, %kt, %vt, %o, %lse, %gt {scale = 0.35 : f64, causal = true}
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
  return %o, %dqkv : tensor<2x4x16x8xbf16>, tensor<2x16x96xbf16>
}
