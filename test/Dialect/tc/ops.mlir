// RUN: tc-opt %s --split-input-file | tc-opt --split-input-file | FileCheck %s

// Tests that every tc op prints and parses back unchanged.

// CHECK-LABEL: func.func @unary
// CHECK: tc.exp %{{.*}} : tensor<2x3xf32>
// CHECK: tc.log %{{.*}} : tensor<2x3xf32>
// CHECK: tc.sqrt %{{.*}} : tensor<2x3xf32>
// CHECK: tc.rsqrt %{{.*}} : tensor<2x3xf32>
// CHECK: tc.reciprocal %{{.*}} : tensor<2x3xf32>
// CHECK: tc.tanh %{{.*}} : tensor<2x3xf32>
// CHECK: tc.sigmoid %{{.*}} : tensor<2x3xf32>
// CHECK: tc.erf %{{.*}} : tensor<2x3xf32>
// CHECK: tc.silu %{{.*}} : tensor<2x3xf32>
// CHECK: tc.sin %{{.*}} : tensor<2x3xf32>
// CHECK: tc.cos %{{.*}} : tensor<2x3xf32>
// CHECK: tc.tan %{{.*}} : tensor<2x3xf32>
// CHECK: tc.asin %{{.*}} : tensor<2x3xf32>
// CHECK: tc.acos %{{.*}} : tensor<2x3xf32>
// CHECK: tc.atan %{{.*}} : tensor<2x3xf32>
// CHECK: tc.sinh %{{.*}} : tensor<2x3xf32>
// CHECK: tc.cosh %{{.*}} : tensor<2x3xf32>
// CHECK: tc.asinh %{{.*}} : tensor<2x3xf32>
// CHECK: tc.acosh %{{.*}} : tensor<2x3xf32>
// CHECK: tc.atanh %{{.*}} : tensor<2x3xf32>
// CHECK: tc.floor %{{.*}} : tensor<2x3xf32>
// CHECK: tc.ceil %{{.*}} : tensor<2x3xf32>
// CHECK: tc.round %{{.*}} : tensor<2x3xf32>
// CHECK: tc.neg %{{.*}} : tensor<4xi32>
// CHECK: tc.abs %{{.*}} : tensor<4xi32>
// CHECK: tc.sign %{{.*}} : tensor<4xi32>
// CHECK: tc.relu %{{.*}} : tensor<4xi32>
// CHECK: tc.not %{{.*}} : tensor<4xi1>
// CHECK: tc.gelu %{{.*}} {approximate = "tanh"} : tensor<2x3xf32>
// CHECK: tc.isnan %{{.*}} : tensor<2x3xf32> -> tensor<2x3xi1>
// CHECK: tc.isinf
// CHECK: tc.cast %{{.*}} : tensor<2x3xf32> to tensor<2x3xbf16>
// CHECK: tc.cast %{{.*}} {saturate = false} : tensor<2x3xf32> to tensor<2x3xf8E4M3FN>
func.func @unary(%x: tensor<2x3xf32>, %i: tensor<4xi32>, %b: tensor<4xi1>) -> tensor<2x3xf32> {
  %exp = tc.exp %x : tensor<2x3xf32>
  %log = tc.log %x : tensor<2x3xf32>
  %sqrt = tc.sqrt %x : tensor<2x3xf32>
  %rsqrt = tc.rsqrt %x : tensor<2x3xf32>
  %reciprocal = tc.reciprocal %x : tensor<2x3xf32>
  %tanh = tc.tanh %x : tensor<2x3xf32>
  %sigmoid = tc.sigmoid %x : tensor<2x3xf32>
  %erf = tc.erf %x : tensor<2x3xf32>
  %silu = tc.silu %x : tensor<2x3xf32>
  %sin = tc.sin %x : tensor<2x3xf32>
  %cos = tc.cos %x : tensor<2x3xf32>
  %tan = tc.tan %x : tensor<2x3xf32>
  %asin = tc.asin %x : tensor<2x3xf32>
  %acos = tc.acos %x : tensor<2x3xf32>
  %atan = tc.atan %x : tensor<2x3xf32>
  %sinh = tc.sinh %x : tensor<2x3xf32>
  %cosh = tc.cosh %x : tensor<2x3xf32>
  %asinh = tc.asinh %x : tensor<2x3xf32>
  %acosh = tc.acosh %x : tensor<2x3xf32>
  %atanh = tc.atanh %x : tensor<2x3xf32>
  %floor = tc.floor %x : tensor<2x3xf32>
  %ceil = tc.ceil %x : tensor<2x3xf32>
  %round = tc.round %x : tensor<2x3xf32>
  %neg = tc.neg %i : tensor<4xi32>
  %abs = tc.abs %i : tensor<4xi32>
  %sign = tc.sign %i : tensor<4xi32>
  %relu = tc.relu %i : tensor<4xi32>
  %not = tc.not %b : tensor<4xi1>
  %gelu = tc.gelu %x {approximate = "tanh"} : tensor<2x3xf32>
  %isnan = tc.isnan %x : tensor<2x3xf32> -> tensor<2x3xi1>
  %isinf = tc.isinf %x : tensor<2x3xf32> -> tensor<2x3xi1>
  %cast = tc.cast %x : tensor<2x3xf32> to tensor<2x3xbf16>
  %f8 = tc.cast %x {saturate = false} : tensor<2x3xf32> to tensor<2x3xf8E4M3FN>
  return %exp : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @binary
// CHECK: tc.add %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
// CHECK: tc.sub %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
// CHECK: tc.mul %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
// CHECK: tc.div %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
// CHECK: tc.pow %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
// CHECK: tc.max %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
// CHECK: tc.min %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
// CHECK: tc.eq %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
// CHECK: tc.ne %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
// CHECK: tc.lt %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
// CHECK: tc.le %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
// CHECK: tc.gt %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
// CHECK: tc.ge %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
// CHECK: tc.and
// CHECK: tc.or
// CHECK: tc.xor
// CHECK: tc.rem %{{.*}}, %{{.*}} {fmod = true}
// CHECK: tc.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<1x3xi1>, tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
func.func @binary(%x: tensor<2x3xf32>, %y: tensor<3xf32>, %b: tensor<1x3xi1>, %s: tensor<f32>) -> tensor<2x3xf32> {
  %add = tc.add %x, %y : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %sub = tc.sub %x, %y : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %mul = tc.mul %x, %y : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %div = tc.div %x, %y : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %pow = tc.pow %x, %y : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %max = tc.max %x, %y : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %min = tc.min %x, %y : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %eq = tc.eq %x, %y : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
  %ne = tc.ne %x, %y : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
  %lt = tc.lt %x, %y : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
  %le = tc.le %x, %y : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
  %gt = tc.gt %x, %y : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
  %ge = tc.ge %x, %y : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
  %and = tc.and %eq, %b : tensor<2x3xi1>, tensor<1x3xi1> -> tensor<2x3xi1>
  %or = tc.or %eq, %b : tensor<2x3xi1>, tensor<1x3xi1> -> tensor<2x3xi1>
  %xor = tc.xor %eq, %b : tensor<2x3xi1>, tensor<1x3xi1> -> tensor<2x3xi1>
  %rem = tc.rem %x, %y {fmod = true} : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %sel = tc.select %b, %x, %s : tensor<1x3xi1>, tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  return %add : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @reductions
// CHECK: tc.reduce_sum %{{.*}} {axes = array<i64: 1>, keepdims = true} : tensor<2x3xf32> -> tensor<2x1xf32>
// CHECK: tc.reduce_mean %{{.*}} {axes = array<i64: 1>, keepdims = true} : tensor<2x3xf32> -> tensor<2x1xf32>
// CHECK: tc.reduce_max %{{.*}} {axes = array<i64: 1>, keepdims = true} : tensor<2x3xf32> -> tensor<2x1xf32>
// CHECK: tc.reduce_min %{{.*}} {axes = array<i64: 1>, keepdims = true} : tensor<2x3xf32> -> tensor<2x1xf32>
// CHECK: tc.reduce_prod %{{.*}} {axes = array<i64: 1>, keepdims = true} : tensor<2x3xf32> -> tensor<2x1xf32>
// CHECK: tc.reduce_sum %{{.*}} {axes = array<i64: 0, 1>} : tensor<2x3xf32> -> tensor<f32>
// CHECK: tc.argmax %{{.*}} {axis = 1 : i64, select_last_index = true} : tensor<2x3xf32> -> tensor<2xi64>
// CHECK: tc.argmin
// CHECK: tc.cumsum %{{.*}} {axis = 1 : i64, exclusive = true, reverse = true} : tensor<2x3xf32>
func.func @reductions(%x: tensor<2x3xf32>) -> tensor<f32> {
  %reduce_sum = tc.reduce_sum %x {axes = array<i64: 1>, keepdims = true} : tensor<2x3xf32> -> tensor<2x1xf32>
  %reduce_mean = tc.reduce_mean %x {axes = array<i64: 1>, keepdims = true} : tensor<2x3xf32> -> tensor<2x1xf32>
  %reduce_max = tc.reduce_max %x {axes = array<i64: 1>, keepdims = true} : tensor<2x3xf32> -> tensor<2x1xf32>
  %reduce_min = tc.reduce_min %x {axes = array<i64: 1>, keepdims = true} : tensor<2x3xf32> -> tensor<2x1xf32>
  %reduce_prod = tc.reduce_prod %x {axes = array<i64: 1>, keepdims = true} : tensor<2x3xf32> -> tensor<2x1xf32>
  %all = tc.reduce_sum %x {axes = array<i64: 0, 1>} : tensor<2x3xf32> -> tensor<f32>
  %am = tc.argmax %x {axis = 1 : i64, select_last_index = true} : tensor<2x3xf32> -> tensor<2xi64>
  %an = tc.argmin %x {axis = 0 : i64, keepdims = true} : tensor<2x3xf32> -> tensor<1x3xi64>
  %cs = tc.cumsum %x {axis = 1 : i64, exclusive = true, reverse = true} : tensor<2x3xf32>
  return %all : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @nn
// CHECK: tc.softmax %{{.*}} {axis = 2 : i64} : tensor<2x4x8xf32>
// CHECK: tc.log_softmax
// CHECK: tc.layer_norm %{{.*}}, scale %{{.*}}, bias %{{.*}} {axis = 2 : i64, epsilon = 1.000000e-05 : f64}
// CHECK: tc.layer_norm %{{.*}} {axis = 1 : i64
// CHECK: tc.rms_norm %{{.*}}, scale %{{.*}} {axis = 2 : i64
// CHECK: tc.cross_entropy %{{.*}}, %{{.*}} {ignore_index = -1 : i64} : (tensor<8x5xf32>, tensor<8xi64>) -> tensor<f32>
// CHECK: tc.nll_loss %{{.*}}, %{{.*}}, weight %{{.*}} {reduction = "none"} : (tensor<8x5xf32>, tensor<8xi64>, tensor<5xf32>) -> tensor<8xf32>
func.func @nn(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>, %l: tensor<8x5xf32>, %y: tensor<8xi64>, %w: tensor<5xf32>) -> tensor<f32> {
  %sm = tc.softmax %x {axis = 2 : i64} : tensor<2x4x8xf32>
  %lsm = tc.log_softmax %x {axis = 1 : i64} : tensor<2x4x8xf32>
  %ln = tc.layer_norm %x, scale %g, bias %b {axis = 2 : i64, epsilon = 1.000000e-05 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %ln0 = tc.layer_norm %x {axis = 1 : i64, epsilon = 1.000000e-05 : f64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %rms = tc.rms_norm %x, scale %g {axis = 2 : i64, epsilon = 9.9999999999999995E-7 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %ce = tc.cross_entropy %l, %y {ignore_index = -1 : i64} : (tensor<8x5xf32>, tensor<8xi64>) -> tensor<f32>
  %nll = tc.nll_loss %l, %y, weight %w {reduction = "none"} : (tensor<8x5xf32>, tensor<8xi64>, tensor<5xf32>) -> tensor<8xf32>
  return %ce : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @shape_and_data
// CHECK: tc.parameter "wte.weight" {trainable} : tensor<16x8xf32>
// CHECK: tc.constant dense<[1, -2]> : tensor<2xi64>
// CHECK: tc.gather
// CHECK: tc.matmul %{{.*}}, %{{.*}} {transpose_rhs = true}
// CHECK: tc.matmul %{{.*}}, %{{.*}} {transpose_lhs = true}
// CHECK: tc.reshape %{{.*}} : tensor<2x4x16xf32> to tensor<8x16xf32>
// CHECK: tc.transpose %{{.*}} {permutation = array<i64: 0, 2, 1>}
// CHECK: tc.broadcast %{{.*}} : tensor<2xi64> to tensor<3x2xi64>
// CHECK: tc.slice %{{.*}} {starts = array<i64: 7, 0>, strides = array<i64: -2, 3>} : tensor<8x16xf32> to tensor<4x6xf32>
// CHECK: tc.concat
// CHECK: tc.split %{{.*}} {axis = 1 : i64} : tensor<8x32xf32> -> tensor<8x8xf32>, tensor<8x24xf32>
// CHECK: tc.pad %{{.*}} {high = array<i64: 0, 2>, low = array<i64: 1, 1>, mode = "reflect"}
func.func @shape_and_data(%ids: tensor<2x4xi64>) -> tensor<9x19xf32> {
  %p = tc.parameter "wte.weight" {trainable} : tensor<16x8xf32>
  %c = tc.constant dense<[1, -2]> : tensor<2xi64>
  %e = tc.gather %p, %ids {axis = 0 : i64} : tensor<16x8xf32>, tensor<2x4xi64> -> tensor<2x4x8xf32>
  %m = tc.matmul %e, %p {transpose_rhs = true} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %m2 = tc.matmul %e, %e {transpose_lhs = true} : tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x8x8xf32>
  %r = tc.reshape %m : tensor<2x4x16xf32> to tensor<8x16xf32>
  %t = tc.transpose %m {permutation = array<i64: 0, 2, 1>} : tensor<2x4x16xf32> -> tensor<2x16x4xf32>
  %bc = tc.broadcast %c : tensor<2xi64> to tensor<3x2xi64>
  %sl = tc.slice %r {starts = array<i64: 7, 0>, strides = array<i64: -2, 3>} : tensor<8x16xf32> to tensor<4x6xf32>
  %cat = tc.concat %r, %r {axis = 1 : i64} : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x32xf32>
  %s:2 = tc.split %cat {axis = 1 : i64} : tensor<8x32xf32> -> tensor<8x8xf32>, tensor<8x24xf32>
  %pad = tc.pad %r {high = array<i64: 0, 2>, low = array<i64: 1, 1>, mode = "reflect"} : tensor<8x16xf32> -> tensor<9x19xf32>
  return %pad : tensor<9x19xf32>
}

// -----

// Tests that the gradient-support ops print and parse back unchanged.
// CHECK-LABEL: func.func @gradient_ops
// CHECK: tc.scatter_add %{{.*}}, %{{.*}} {axis = 0 : i64} : tensor<2x4x8xf32>, tensor<2x4xi64> -> tensor<16x8xf32>
// CHECK: tc.insert_slice %{{.*}} {starts = array<i64: 7, 0>, strides = array<i64: -2, 3>} : tensor<4x6xf32> to tensor<8x16xf32>
// CHECK: tc.cross_entropy_grad %{{.*}}, %{{.*}}, grad %{{.*}} {ignore_index = -1 : i64} : (tensor<8x5xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x5xf32>
// CHECK: tc.nll_loss_grad %{{.*}}, %{{.*}}, grad %{{.*}}, weight %{{.*}} {reduction = "none"} : (tensor<8x5xf32>, tensor<8xi64>, tensor<8xf32>, tensor<5xf32>) -> tensor<8x5xf32>
func.func @gradient_ops(%de: tensor<2x4x8xf32>, %ids: tensor<2x4xi64>, %ds: tensor<4x6xf32>,
                        %l: tensor<8x5xf32>, %y: tensor<8xi64>, %g: tensor<f32>,
                        %gr: tensor<8xf32>, %w: tensor<5xf32>) -> tensor<8x5xf32> {
  %dw = tc.scatter_add %de, %ids {axis = 0 : i64} : tensor<2x4x8xf32>, tensor<2x4xi64> -> tensor<16x8xf32>
  %dx = tc.insert_slice %ds {starts = array<i64: 7, 0>, strides = array<i64: -2, 3>} : tensor<4x6xf32> to tensor<8x16xf32>
  %dl = tc.cross_entropy_grad %l, %y, grad %g {ignore_index = -1 : i64} : (tensor<8x5xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x5xf32>
  %dn = tc.nll_loss_grad %l, %y, grad %gr, weight %w {reduction = "none"} : (tensor<8x5xf32>, tensor<8xi64>, tensor<8xf32>, tensor<5xf32>) -> tensor<8x5xf32>
  return %dn : tensor<8x5xf32>
}

// -----

// Tests that tc.fusion (elementwise chain, broadcast, splat constant, final
// trailing-axis reduction) prints and parses back unchanged.
// CHECK-LABEL: func.func @fusion
// CHECK: %[[R:.+]]:2 = tc.fusion(%{{.*}}, %{{.*}}) : (tensor<4x8xbf16>, tensor<8xbf16>) -> (tensor<4x8xbf16>, tensor<4xf32>) {
// CHECK: ^bb0(%[[A:.+]]: tensor<4x8xbf16>, %[[B:.+]]: tensor<8xbf16>):
// CHECK: tc.add %[[A]], %[[B]]
// CHECK: tc.reduce_sum
// CHECK: tc.yield %{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<4xf32>
func.func @fusion(%x: tensor<4x8xbf16>, %b: tensor<8xbf16>) -> (tensor<4x8xbf16>, tensor<4xf32>) {
  %r:2 = tc.fusion (%x, %b) : (tensor<4x8xbf16>, tensor<8xbf16>) -> (tensor<4x8xbf16>, tensor<4xf32>) {
  ^bb0(%a: tensor<4x8xbf16>, %c: tensor<8xbf16>):
    %half = tc.constant dense<5.000000e-01> : tensor<bf16>
    %0 = tc.add %a, %c : tensor<4x8xbf16>, tensor<8xbf16> -> tensor<4x8xbf16>
    %1 = tc.mul %0, %half : tensor<4x8xbf16>, tensor<bf16> -> tensor<4x8xbf16>
    %2 = tc.cast %1 : tensor<4x8xbf16> to tensor<4x8xf32>
    %3 = tc.reduce_sum %2 {axes = array<i64: 1>} : tensor<4x8xf32> -> tensor<4xf32>
    tc.yield %1, %3 : tensor<4x8xbf16>, tensor<4xf32>
  }
  return %r#0, %r#1 : tensor<4x8xbf16>, tensor<4xf32>
}

// -----

// Tests that a tc.fusion ending in column sums (a reduce_sum over every axis
// but the last, keepdims or not) of a value it also yields prints and parses
// back unchanged.
// CHECK-LABEL: func.func @fusion_column_sum
// CHECK: tc.fusion(%{{.*}}, %{{.*}}) : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) -> (tensor<2x4x8xbf16>, tensor<1x1x8xbf16>)
// CHECK: tc.reduce_sum %{{.*}} {axes = array<i64: 0, 1>, keepdims = true}
func.func @fusion_column_sum(%x: tensor<2x4x8xbf16>, %g: tensor<2x4x8xbf16>) -> (tensor<2x4x8xbf16>, tensor<1x1x8xbf16>) {
  %r:2 = tc.fusion (%x, %g) : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) -> (tensor<2x4x8xbf16>, tensor<1x1x8xbf16>) {
  ^bb0(%a: tensor<2x4x8xbf16>, %b: tensor<2x4x8xbf16>):
    %0 = tc.mul %a, %b : tensor<2x4x8xbf16>, tensor<2x4x8xbf16> -> tensor<2x4x8xbf16>
    %1 = tc.reduce_sum %0 {axes = array<i64: 0, 1>, keepdims = true} : tensor<2x4x8xbf16> -> tensor<1x1x8xbf16>
    tc.yield %0, %1 : tensor<2x4x8xbf16>, tensor<1x1x8xbf16>
  }
  return %r#0, %r#1 : tensor<2x4x8xbf16>, tensor<1x1x8xbf16>
}

// -----

// CHECK-LABEL: func.func @attention
// CHECK: %{{.+}}, %[[L:.+]] = tc.attention %arg0, %arg1, %arg1 {causal = true, scale = 1.250000e-01 : f64} : (tensor<1x4x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>) -> (tensor<1x4x4x8xbf16>, tensor<1x4x4xf32>)
// CHECK: tc.attention_grad %arg0, %arg1, %arg1, %{{.+}}, %[[L]], %arg0 {causal = true, scale = 1.250000e-01 : f64}
func.func @attention(%q: tensor<1x4x4x8xbf16>, %k: tensor<1x2x4x8xbf16>) -> tensor<1x2x4x8xbf16> {
  %o, %l = tc.attention %q, %k, %k {scale = 0.125 : f64, causal = true}
      : (tensor<1x4x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>) -> (tensor<1x4x4x8xbf16>, tensor<1x4x4xf32>)
  %dq, %dk, %dv = tc.attention_grad %q, %k, %k, %o, %l, %q {scale = 0.125 : f64, causal = true}
      : (tensor<1x4x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x4x4x8xbf16>, tensor<1x4x4xf32>, tensor<1x4x4x8xbf16>)
        -> (tensor<1x4x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>)
  return %dk : tensor<1x2x4x8xbf16>
}

// -----

// CHECK-LABEL: func.func @scaled_formats
// CHECK: tc.quantize %{{.*}} {block = array<i64: 32, 64>} : tensor<32x64xbf16> -> (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>)
// CHECK: tc.quantize %{{.*}} {block = array<i64: 1, 32>} : tensor<128x64xf32> -> (tensor<128x64xf4E2M1FN>, tensor<128x2xf8E8M0FNU>)
// CHECK: tc.scaled_matmul %{{.*}} {transpose_rhs = true} : (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>, tensor<128x64xf4E2M1FN>, tensor<128x2xf8E8M0FNU>) -> tensor<32x128xbf16>
// CHECK: tc.quantize %{{.*}} amax %{{.*}} : tensor<f32> {block = array<i64: 32, 64>} : tensor<32x64xbf16> -> (tensor<32x64xf8E5M2>, tensor<1x1xf32>)
func.func @scaled_formats(%x: tensor<32x64xbf16>, %w: tensor<128x64xf32>, %m: tensor<f32>) -> (tensor<32x128xbf16>, tensor<32x64xf8E5M2>) {
  %qx, %sx = tc.quantize %x {block = array<i64: 32, 64>} : tensor<32x64xbf16> -> (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>)
  %qw, %sw = tc.quantize %w {block = array<i64: 1, 32>} : tensor<128x64xf32> -> (tensor<128x64xf4E2M1FN>, tensor<128x2xf8E8M0FNU>)
  %y = tc.scaled_matmul %qx, %sx, %qw, %sw {transpose_rhs = true}
      : (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>, tensor<128x64xf4E2M1FN>, tensor<128x2xf8E8M0FNU>) -> tensor<32x128xbf16>
  %qa, %sa = tc.quantize %x amax %m : tensor<f32> {block = array<i64: 32, 64>} : tensor<32x64xbf16> -> (tensor<32x64xf8E5M2>, tensor<1x1xf32>)
  return %y, %qa : tensor<32x128xbf16>, tensor<32x64xf8E5M2>
}

// -----

// CHECK-LABEL: func.func @fake_quantize
// CHECK: tc.fake_quantize %{{.*}} {axis = 0 : i64, blocks2d = true, format = "nvfp4"} : tensor<64x32xf32>
// CHECK: tc.fake_quantize %{{.*}} {format = "mxfp4"} : tensor<2x8x64xbf16>
// CHECK: tc.fake_quantize %{{.*}} step %{{.*}} : tensor<f32> {format = "nvfp4", seed = 5 : i64, stochastic = true, stream = 7 : i64} : tensor<2x8x64xbf16>
func.func @fake_quantize(%w: tensor<64x32xf32>, %x: tensor<2x8x64xbf16>, %s: tensor<f32>) -> (tensor<64x32xf32>, tensor<2x8x64xbf16>, tensor<2x8x64xbf16>) {
  %w4 = tc.fake_quantize %w {format = "nvfp4", axis = 0 : i64, blocks2d = true} : tensor<64x32xf32>
  %x4 = tc.fake_quantize %x {format = "mxfp4"} : tensor<2x8x64xbf16>
  %g4 = tc.fake_quantize %x step %s : tensor<f32> {format = "nvfp4", stochastic = true, seed = 5 : i64, stream = 7 : i64} : tensor<2x8x64xbf16>
  return %w4, %x4, %g4 : tensor<64x32xf32>, tensor<2x8x64xbf16>, tensor<2x8x64xbf16>
}

// -----

// CHECK-LABEL: func.func @exact_nvfp4
// CHECK: %{{.*}}, %[[T:.*]] = tc.fake_quantize %{{.*}} {axis = 1 : i64, blocks2d = true, format = "nvfp4", unscaled = true} : tensor<64x32xbf16> -> tensor<f32>
// CHECK: tc.matmul %{{.*}}, %{{.*}} alpha %[[T]] : tensor<f32> {transpose_rhs = true} : tensor<8x32xbf16>, tensor<64x32xbf16> -> tensor<8x64xbf16>
func.func @exact_nvfp4(%x: tensor<8x32xbf16>, %w: tensor<64x32xbf16>) -> tensor<8x64xbf16> {
  %u, %t = tc.fake_quantize %w {format = "nvfp4", axis = 1 : i64, blocks2d = true, unscaled = true} : tensor<64x32xbf16> -> tensor<f32>
  %y = tc.matmul %x, %u alpha %t : tensor<f32> {transpose_rhs = true} : tensor<8x32xbf16>, tensor<64x32xbf16> -> tensor<8x64xbf16>
  return %y : tensor<8x64xbf16>
}
