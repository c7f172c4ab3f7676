// RUN: tc-opt %s --split-input-file --tc-fuse-bias-grad="gemm-epilogue=true attention-col-sums=true" | FileCheck %s
// RUN: tc-opt %s --split-input-file --tc-fuse-bias-grad=gemm-epilogue=true | FileCheck %s --check-prefix=GEMM
// RUN: tc-opt %s --split-input-file --tc-fuse-bias-grad | FileCheck %s --check-prefix=OFF
// RUN: tc-opt %s --split-input-file --tc-fuse-bias-grad="gemm-epilogue=true attention-col-sums=true attention-head-col-sums=true" | FileCheck %s --check-prefix=NEOX

// Tests that the column sum of a fused qkv projection's gradient -- the
// concat of the attention gradient's dq, dk, dv through their head
// transposes and reshapes, read through a reshape to [tokens, 3C] -- pairs
// with the attention gradient (tc.col_sum), not with the weight-gradient
// GEMM reading the same bytes, which stays a plain product; without
// attention-col-sums the GEMM takes it (BGRAD), without gemm-epilogue
// nothing pairs.
// CHECK-LABEL: func.func @qkv
// CHECK: tc.attention_grad {{.+}} {causal = true, scale = 3.500000e-01 : f64, tc.col_sum = 0 : i64}
// CHECK: tc.reduce_sum %{{.+}} {axes = array<i64: 0>, tc.col_sum = 0 : i64}
// CHECK-NOT: tc.bias_grad
// CHECK: return
// GEMM-LABEL: func.func @qkv
// GEMM-NOT: tc.col_sum
// GEMM: tc.matmul {{.+}}{tc.bias_grad = 0 : i64
// OFF-LABEL: func.func @qkv
// OFF-NOT: tc.col_sum
// OFF-NOT: tc.bias_grad
func.func @qkv(%qt: tensor<2x4x16x8xbf16>, %kt: tensor<2x4x16x8xbf16>, %vt: tensor<2x4x16x8xbf16>,
               %gt: tensor<2x4x16x8xbf16>, %x: tensor<32x48xbf16>)
    -> (tensor<96xbf16>, tensor<96x48xbf16>) {
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
  %m = tc.reshape %dqkv : tensor<2x16x96xbf16> to tensor<32x96xbf16>
  %bias = tc.reduce_sum %m {axes = array<i64: 0>} : tensor<32x96xbf16> -> tensor<96xbf16>
  %dw = tc.matmul %m, %x {transpose_lhs = true} : tensor<32x96xbf16>, tensor<32x48xbf16> -> tensor<96x48xbf16>
  return %bias, %dw : tensor<96xbf16>, tensor<96x48xbf16>
}

// -----

// Tests that gradients that do not form the whole concat (a fourth piece
// beside them) do not pair: the GEMM takes the column sum (BGRAD).
// CHECK-LABEL: func.func @extra_piece
// CHECK-NOT: tc.col_sum
// CHECK: tc.matmul {{.+}}{tc.bias_grad = 0 : i64
func.func @extra_piece(%qt: tensor<2x4x16x8xbf16>, %kt: tensor<2x4x16x8xbf16>, %vt: tensor<2x4x16x8xbf16>,
                       %gt: tensor<2x4x16x8xbf16>, %e: tensor<2x16x8xbf16>, %x: tensor<32x48xbf16>)
    -> (tensor<104xbf16>, tensor<104x48xbf16>) {
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
  %dqkv = tc.concat %dq3, %dk3, %dv3, %e {axis = 2 : i64} : tensor<2x16x32xbf16>, tensor<2x16x32xbf16>, tensor<2x16x32xbf16>, tensor<2x16x8xbf16> -> tensor<2x16x104xbf16>
  %m = tc.reshape %dqkv : tensor<2x16x104xbf16> to tensor<32x104xbf16>
  %bias = tc.reduce_sum %m {axes = array<i64: 0>} : tensor<32x104xbf16> -> tensor<104xbf16>
  %dw = tc.matmul %m, %x {transpose_lhs = true} : tensor<32x104xbf16>, tensor<32x48xbf16> -> tensor<104x48xbf16>
  return %bias, %dw : tensor<104xbf16>, tensor<104x48xbf16>
}

// -----

// Tests GPT-NeoX's qkv gradient, heads interleaved: dq and dk through the
// backward's rotaries, and dv, concatenated per head [B, H, T, 3d], head-
// transposed and reshaped to [B, T, H 3d], whose column sum pairs with the
// attention gradient only with attention-head-col-sums (NEOX); by default
// the GEMM takes it (BGRAD).
// NEOX-LABEL: func.func @neox
// NEOX: tc.attention_grad {{.+}} tc.col_sum = 0 : i64}
// NEOX: tc.reduce_sum %{{.+}} {axes = array<i64: 0>, tc.col_sum = 0 : i64}
// NEOX-NOT: tc.bias_grad
// NEOX: return
// CHECK-LABEL: func.func @neox
// CHECK-NOT: tc.col_sum
// CHECK: tc.matmul {{.+}}{tc.bias_grad = 0 : i64
func.func @neox(%qt: tensor<2x4x16x8xbf16>, %gt: tensor<2x4x16x8xbf16>, %c: tensor<2x16x2xbf16>,
                %s: tensor<2x16x2xbf16>, %x: tensor<32x48xbf16>)
    -> (tensor<96xbf16>, tensor<96x48xbf16>) {
  %o, %lse = tc.attention %qt, %qt, %qt {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
  %dq, %dk, %dv = tc.attention_grad %qt, %qt, %qt, %o, %lse, %gt {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>,
         tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
  %dkr = tc.rotary %dk, %c, %s : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %dqr = tc.rotary %dq, %c, %s : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %cat = tc.concat %dqr, %dkr, %dv {axis = 3 : i64} : tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16> -> tensor<2x4x16x24xbf16>
  %tr = tc.transpose %cat {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x24xbf16> -> tensor<2x16x4x24xbf16>
  %g = tc.reshape %tr : tensor<2x16x4x24xbf16> to tensor<2x16x96xbf16>
  %m = tc.reshape %g : tensor<2x16x96xbf16> to tensor<32x96xbf16>
  %bias = tc.reduce_sum %m {axes = array<i64: 0>} : tensor<32x96xbf16> -> tensor<96xbf16>
  %dw = tc.matmul %m, %x {transpose_lhs = true} : tensor<32x96xbf16>, tensor<32x48xbf16> -> tensor<96x48xbf16>
  return %bias, %dw : tensor<96xbf16>, tensor<96x48xbf16>
}
