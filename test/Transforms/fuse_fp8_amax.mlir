// RUN: tc-opt %s --split-input-file --tc-fuse-fp8-amax | FileCheck %s

// Tests that a per-tensor quantize of a fusion's result (through a reshape)
// reads the amax the rebuilt fusion takes: |x| of the result in f32, NaN
// elements as 0, the max over every axis as one more result; a second
// quantize of the same result shares it.
// CHECK-LABEL: func.func @gelu
// CHECK: %[[F:.+]]:3 = tc.fusion(%{{.+}}) : (tensor<4x8x16xbf16>) -> (tensor<4x8x16xbf16>, tensor<4x8x16xbf16>, tensor<f32>)
// CHECK: %[[G:.+]] = tc.gelu
// CHECK: %[[C:.+]] = tc.cast %[[G]] {saturate = false} : tensor<4x8x16xbf16> to tensor<4x8x16xf32>
// CHECK: %[[A:.+]] = tc.abs %[[C]]
// CHECK: %[[N:.+]] = tc.isnan %[[A]]
// CHECK: %[[Z:.+]] = tc.constant dense<0.000000e+00> : tensor<4x8x16xf32>
// CHECK: %[[K:.+]] = tc.select %[[N]], %[[Z]], %[[A]]
// CHECK: %[[M:.+]] = tc.reduce_max %[[K]] {axes = array<i64: 0, 1, 2>} : tensor<4x8x16xf32> -> tensor<f32>
// CHECK: tc.yield %{{.+}}, %[[G]], %[[M]]
// CHECK: %[[R:.+]] = tc.reshape %[[F]]#1
// CHECK: tc.quantize %[[R]] amax %[[F]]#2 : tensor<f32> {block = array<i64: 32, 16>}
// CHECK: tc.quantize %[[R]] amax %[[F]]#2 : tensor<f32> {block = array<i64: 32, 16>}
func.func @gelu(%x: tensor<4x8x16xbf16>)
    -> (tensor<4x8x16xbf16>, tensor<32x16xf8E4M3FN>, tensor<1x1xf32>, tensor<32x16xf8E5M2>, tensor<1x1xf32>) {
  %y:2 = tc.fusion (%x) : (tensor<4x8x16xbf16>) -> (tensor<4x8x16xbf16>, tensor<4x8x16xbf16>) {
  ^bb0(%a: tensor<4x8x16xbf16>):
    %t = tc.tanh %a : tensor<4x8x16xbf16>
    %g = tc.gelu %a : tensor<4x8x16xbf16>
    tc.yield %t, %g : tensor<4x8x16xbf16>, tensor<4x8x16xbf16>
  }
  %m = tc.reshape %y#1 : tensor<4x8x16xbf16> to tensor<32x16xbf16>
  %q, %s = tc.quantize %m {block = array<i64: 32, 16>} : tensor<32x16xbf16> -> (tensor<32x16xf8E4M3FN>, tensor<1x1xf32>)
  %q2, %s2 = tc.quantize %m {block = array<i64: 32, 16>} : tensor<32x16xbf16> -> (tensor<32x16xf8E5M2>, tensor<1x1xf32>)
  return %y#0, %q, %s, %q2, %s2
      : tensor<4x8x16xbf16>, tensor<32x16xf8E4M3FN>, tensor<1x1xf32>, tensor<32x16xf8E5M2>, tensor<1x1xf32>
}

// -----

// Tests an f32 result (no cast) and what is left alone: a quantize of a
// function argument, per-row scaling, a fusion that already reduces, one
// with a result of another shape, and a second result of a fusion that
// took an amax already (one reduction per kernel).
// CHECK-LABEL: func.func @left_alone
// CHECK: tc.fusion{{.+}} -> (tensor<64x32xf32>, tensor<64x32xf32>, tensor<f32>)
// CHECK-NOT: tc.cast
// CHECK: tc.abs
// CHECK: tc.reduce_max {{.+}} -> tensor<f32>
// CHECK: tc.quantize %{{.+}}#0 amax %{{.+}}#2 : tensor<f32>
// CHECK: tc.quantize %{{.+}}#1 {block
// CHECK: tc.quantize %arg0 {block
// CHECK: tc.quantize %{{.+}} {block = array<i64: 1, 32>}
// CHECK: tc.quantize %{{.+}} {block = array<i64: 64, 32>}
// CHECK: tc.quantize %{{.+}} {block = array<i64: 64, 32>}
// CHECK-NOT: amax
// CHECK: return
func.func @left_alone(%x: tensor<64x32xf32>, %b: tensor<32xf32>)
    -> (tensor<64x32xf8E4M3FN>, tensor<1x1xf32>, tensor<64x32xf8E4M3FN>, tensor<1x1xf32>,
        tensor<64x32xf8E4M3FN>, tensor<1x1xf32>, tensor<64x32xf8E4M3FN>, tensor<64x1xf32>,
        tensor<64x32xf8E4M3FN>, tensor<1x1xf32>, tensor<64xf32>, tensor<64x32xf8E4M3FN>, tensor<1x1xf32>,
        tensor<32xf32>) {
  %two:2 = tc.fusion (%x) : (tensor<64x32xf32>) -> (tensor<64x32xf32>, tensor<64x32xf32>) {
  ^bb0(%a: tensor<64x32xf32>):
    %e = tc.exp %a : tensor<64x32xf32>
    %n = tc.neg %a : tensor<64x32xf32>
    tc.yield %e, %n : tensor<64x32xf32>, tensor<64x32xf32>
  }
  %q0, %s0 = tc.quantize %two#0 {block = array<i64: 64, 32>} : tensor<64x32xf32> -> (tensor<64x32xf8E4M3FN>, tensor<1x1xf32>)
  %q1, %s1 = tc.quantize %two#1 {block = array<i64: 64, 32>} : tensor<64x32xf32> -> (tensor<64x32xf8E4M3FN>, tensor<1x1xf32>)
  %q2, %s2 = tc.quantize %x {block = array<i64: 64, 32>} : tensor<64x32xf32> -> (tensor<64x32xf8E4M3FN>, tensor<1x1xf32>)
  %r = tc.fusion (%x) : (tensor<64x32xf32>) -> tensor<64x32xf32> {
  ^bb0(%a: tensor<64x32xf32>):
    %e = tc.exp %a : tensor<64x32xf32>
    tc.yield %e : tensor<64x32xf32>
  }
  %q3, %s3 = tc.quantize %r {block = array<i64: 1, 32>} : tensor<64x32xf32> -> (tensor<64x32xf8E4M3FN>, tensor<64x1xf32>)
  %red:2 = tc.fusion (%x) : (tensor<64x32xf32>) -> (tensor<64x32xf32>, tensor<64xf32>) {
  ^bb0(%a: tensor<64x32xf32>):
    %e = tc.exp %a : tensor<64x32xf32>
    %s = tc.reduce_sum %e {axes = array<i64: 1>} : tensor<64x32xf32> -> tensor<64xf32>
    tc.yield %e, %s : tensor<64x32xf32>, tensor<64xf32>
  }
  %q4, %s4 = tc.quantize %red#0 {block = array<i64: 64, 32>} : tensor<64x32xf32> -> (tensor<64x32xf8E4M3FN>, tensor<1x1xf32>)
  %bc:2 = tc.fusion (%x, %b) : (tensor<64x32xf32>, tensor<32xf32>) -> (tensor<64x32xf32>, tensor<32xf32>) {
  ^bb0(%a: tensor<64x32xf32>, %c: tensor<32xf32>):
    %e = tc.add %a, %c : tensor<64x32xf32>, tensor<32xf32> -> tensor<64x32xf32>
    %n = tc.neg %c : tensor<32xf32>
    tc.yield %e, %n : tensor<64x32xf32>, tensor<32xf32>
  }
  %q5, %s5 = tc.quantize %bc#0 {block = array<i64: 64, 32>} : tensor<64x32xf32> -> (tensor<64x32xf8E4M3FN>, tensor<1x1xf32>)
  return %q0, %s0, %q1, %s1, %q2, %s2, %q3, %s3, %q4, %s4, %red#1, %q5, %s5, %bc#1
      : tensor<64x32xf8E4M3FN>, tensor<1x1xf32>, tensor<64x32xf8E4M3FN>, tensor<1x1xf32>,
        tensor<64x32xf8E4M3FN>, tensor<1x1xf32>, tensor<64x32xf8E4M3FN>, tensor<64x1xf32>,
        tensor<64x32xf8E4M3FN>, tensor<1x1xf32>, tensor<64xf32>, tensor<64x32xf8E4M3FN>, tensor<1x1xf32>,
        tensor<32xf32>
}
