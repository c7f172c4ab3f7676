// RUN: tc-opt %s --split-input-file --tc-fuse-bias-grad="gemm-epilogue=true fusion-col-sums=true" | FileCheck %s
// RUN: tc-opt %s --split-input-file --tc-fuse-bias-grad=gemm-epilogue=true | FileCheck %s --check-prefix=GEMM

// Tests that with fusion-col-sums the column sum of an elementwise fusion's
// result (an erf-GELU backward's dY, read through a reshape to [tokens,
// cols]) moves into the fusion -- a reduce_sum over every axis but the last
// of the yielded value, one more result, reshaped back to the sum's type --
// and the weight-gradient GEMM reading the same bytes stays a plain product;
// without it the GEMM takes the sum (BGRAD).
// CHECK-LABEL: func.func @gelu_grad
// CHECK: %[[F:.+]]:2 = tc.fusion(%{{.+}}, %{{.+}}) : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> (tensor<2x8x16xbf16>, tensor<16xbf16>)
// CHECK: %[[D:.+]] = tc.mul
// CHECK: %[[S:.+]] = tc.reduce_sum %[[D]] {axes = array<i64: 0, 1>} : tensor<2x8x16xbf16> -> tensor<16xbf16>
// CHECK: tc.yield %[[D]], %[[S]] : tensor<2x8x16xbf16>, tensor<16xbf16>
// CHECK: %[[M:.+]] = tc.reshape %[[F]]#0
// CHECK-NOT: tc.reduce_sum
// CHECK-NOT: tc.bias_grad
// CHECK: return %[[F]]#1
// GEMM-LABEL: func.func @gelu_grad
// GEMM: tc.matmul {{.+}}{tc.bias_grad = 0 : i64
// GEMM: tc.reduce_sum %{{.+}} {axes = array<i64: 0>, tc.bias_grad = 0 : i64}
func.func @gelu_grad(%x: tensor<2x8x16xbf16>, %g: tensor<2x8x16xbf16>, %h: tensor<16x32xbf16>)
    -> (tensor<16xbf16>, tensor<16x32xbf16>) {
  %d = tc.fusion (%x, %g) : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16> {
  ^bb0(%a: tensor<2x8x16xbf16>, %b: tensor<2x8x16xbf16>):
    %e = tc.erf %a : tensor<2x8x16xbf16>
    %p = tc.mul %e, %b : tensor<2x8x16xbf16>, tensor<2x8x16xbf16> -> tensor<2x8x16xbf16>
    tc.yield %p : tensor<2x8x16xbf16>
  }
  %m = tc.reshape %d : tensor<2x8x16xbf16> to tensor<16x16xbf16>
  %bias = tc.reduce_sum %m {axes = array<i64: 0>} : tensor<16x16xbf16> -> tensor<16xbf16>
  %dw = tc.matmul %m, %h {transpose_lhs = true} : tensor<16x16xbf16>, tensor<16x32xbf16> -> tensor<16x32xbf16>
  return %bias, %dw : tensor<16xbf16>, tensor<16x32xbf16>
}

// -----

// Tests a sum over the fusion's own shape with keepdims (its type kept, no
// reshape), of the second of two results, whose reference tag (tc.ref) moves
// with it; a second column sum of the same value is left to the GEMM.
// CHECK-LABEL: func.func @keepdims
// CHECK: %[[F:.+]]:3 = tc.fusion({{.+}}) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<1x8xf32>)
// CHECK: tc.reduce_sum %{{.+}} {axes = array<i64: 0>, keepdims = true, tc.ref = array<i64: 7, 1>} : tensor<4x8xf32> -> tensor<1x8xf32>
// CHECK: tc.yield
// CHECK: tc.matmul {{.+}}{tc.bias_grad = 0 : i64
// CHECK: tc.reduce_sum %[[F]]#1 {axes = array<i64: 0>, tc.bias_grad = 0 : i64}
// CHECK: return %[[F]]#2
func.func @keepdims(%x: tensor<4x8xf32>, %h: tensor<4x3xf32>)
    -> (tensor<1x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8x3xf32>) {
  %r:2 = tc.fusion (%x) : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  ^bb0(%a: tensor<4x8xf32>):
    %e = tc.exp %a : tensor<4x8xf32>
    %n = tc.neg %e : tensor<4x8xf32>
    tc.yield %e, %n : tensor<4x8xf32>, tensor<4x8xf32>
  }
  %s = tc.reduce_sum %r#1 {axes = array<i64: 0>, keepdims = true, tc.ref = array<i64: 7, 1>} : tensor<4x8xf32> -> tensor<1x8xf32>
  %s2 = tc.reduce_sum %r#1 {axes = array<i64: 0>} : tensor<4x8xf32> -> tensor<8xf32>
  %dw = tc.matmul %r#1, %h {transpose_lhs = true} : tensor<4x8xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
  return %s, %r#0, %s2, %dw : tensor<1x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8x3xf32>
}

// -----

// Tests what stays out: a fusion that already ends in a reduction, a row
// sum, a sum of an integer result, a lone cast (the cross-entropy backward
// may write the bf16 gradient itself: no kernel to sum in).
// CHECK-LABEL: func.func @unpaired
// CHECK: tc.fusion({{.+}}) -> (tensor<4x8xf32>, tensor<4xf32>)
// CHECK: tc.reduce_sum %{{.+}}#0 {axes = array<i64: 0>}
// CHECK: tc.fusion({{.+}}) -> tensor<4x8xi32>
// CHECK: tc.reduce_sum %{{.+}} {axes = array<i64: 0>}
// CHECK: tc.fusion({{.+}}) -> tensor<4x8xbf16>
// CHECK: tc.reduce_sum %{{.+}} {axes = array<i64: 1>}
// CHECK: tc.fusion({{.+}}) : (tensor<4x8xf32>) -> tensor<4x8xbf16>
// CHECK: tc.reduce_sum %{{.+}} {axes = array<i64: 0>} : tensor<4x8xbf16> -> tensor<8xbf16>
func.func @unpaired(%x: tensor<4x8xf32>, %i: tensor<4x8xi32>, %y: tensor<4x8xbf16>)
    -> (tensor<8xf32>, tensor<4xf32>, tensor<8xi32>, tensor<4xbf16>, tensor<8xbf16>) {
  %r:2 = tc.fusion (%x) : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4x8xf32>):
    %e = tc.exp %a : tensor<4x8xf32>
    %s = tc.reduce_sum %e {axes = array<i64: 1>} : tensor<4x8xf32> -> tensor<4xf32>
    tc.yield %e, %s : tensor<4x8xf32>, tensor<4xf32>
  }
  %c0 = tc.reduce_sum %r#0 {axes = array<i64: 0>} : tensor<4x8xf32> -> tensor<8xf32>
  %ii = tc.fusion (%i) : (tensor<4x8xi32>) -> tensor<4x8xi32> {
  ^bb0(%a: tensor<4x8xi32>):
    %n = tc.neg %a : tensor<4x8xi32>
    tc.yield %n : tensor<4x8xi32>
  }
  %c1 = tc.reduce_sum %ii {axes = array<i64: 0>} : tensor<4x8xi32> -> tensor<8xi32>
  %yy = tc.fusion (%y) : (tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  ^bb0(%a: tensor<4x8xbf16>):
    %n = tc.neg %a : tensor<4x8xbf16>
    tc.yield %n : tensor<4x8xbf16>
  }
  %c2 = tc.reduce_sum %yy {axes = array<i64: 1>} : tensor<4x8xbf16> -> tensor<4xbf16>
  %n = tc.fusion (%x) : (tensor<4x8xf32>) -> tensor<4x8xbf16> {
  ^bb0(%a: tensor<4x8xf32>):
    %c = tc.cast %a : tensor<4x8xf32> to tensor<4x8xbf16>
    tc.yield %c : tensor<4x8xbf16>
  }
  %c4 = tc.reduce_sum %n {axes = array<i64: 0>} : tensor<4x8xbf16> -> tensor<8xbf16>
  return %c0, %r#1, %c1, %c2, %c4 : tensor<8xf32>, tensor<4xf32>, tensor<8xi32>, tensor<4xbf16>, tensor<8xbf16>
}
