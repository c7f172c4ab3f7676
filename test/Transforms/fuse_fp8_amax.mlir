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

// -----

// Tests the library producers: a layer_norm's result (through a reshape),
// an rms_norm's, and attention's output through the transpose back and a
// reshape get an amax result that the quantize reads; the norms keep their
// attributes (tc.norm_stats pairs the forward with its gradient).
// CHECK-LABEL: func.func @norms_and_attention
// CHECK: %[[LN:.+]], %[[LA:.+]] = tc.layer_norm %arg0, scale %arg1, bias %arg2 {axis = 2 : i64, epsilon = 1.000000e-05 : f64, tc.norm_stats = 3 : i64} : (tensor<2x16x64xbf16>, tensor<64xf32>, tensor<64xf32>) -> (tensor<2x16x64xbf16>, tensor<f32>)
// CHECK: %[[LR:.+]] = tc.reshape %[[LN]]
// CHECK: tc.quantize %[[LR]] amax %[[LA]] : tensor<f32>
// CHECK: %[[RN:.+]], %[[RA:.+]] = tc.rms_norm %arg0, scale %arg1 {{.+}} -> (tensor<2x16x64xbf16>, tensor<f32>)
// CHECK: tc.quantize %{{.+}} amax %[[RA]] : tensor<f32>
// CHECK: %[[O:.+]], %[[LSE:.+]], %[[OA:.+]] = tc.attention %arg3, %arg3, %arg3 {causal = true, scale = 1.250000e-01 : f64} : {{.+}} -> (tensor<2x4x16x16xbf16>, tensor<2x4x16xf32>, tensor<f32>)
// CHECK: %[[T:.+]] = tc.transpose %[[O]]
// CHECK: %[[TR:.+]] = tc.reshape %[[T]]
// CHECK: tc.quantize %[[TR]] amax %[[OA]] : tensor<f32>
func.func @norms_and_attention(%x: tensor<2x16x64xbf16>, %w: tensor<64xf32>, %b: tensor<64xf32>,
                               %q: tensor<2x4x16x16xbf16>)
    -> (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>, tensor<32x64xf8E4M3FN>, tensor<1x1xf32>,
        tensor<32x64xf8E4M3FN>, tensor<1x1xf32>, tensor<2x4x16xf32>) {
  %y = tc.layer_norm %x, scale %w, bias %b {axis = 2 : i64, epsilon = 1.0e-05 : f64, tc.norm_stats = 3 : i64}
      : (tensor<2x16x64xbf16>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xbf16>
  %ym = tc.reshape %y : tensor<2x16x64xbf16> to tensor<32x64xbf16>
  %q0, %s0 = tc.quantize %ym {block = array<i64: 32, 64>} : tensor<32x64xbf16> -> (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>)
  %r = tc.rms_norm %x, scale %w {axis = 2 : i64, epsilon = 1.0e-06 : f64}
      : (tensor<2x16x64xbf16>, tensor<64xf32>) -> tensor<2x16x64xbf16>
  %rm = tc.reshape %r : tensor<2x16x64xbf16> to tensor<32x64xbf16>
  %q1, %s1 = tc.quantize %rm {block = array<i64: 32, 64>} : tensor<32x64xbf16> -> (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>)
  %o, %lse = tc.attention %q, %q, %q {scale = 0.125 : f64, causal = true}
      : (tensor<2x4x16x16xbf16>, tensor<2x4x16x16xbf16>, tensor<2x4x16x16xbf16>)
        -> (tensor<2x4x16x16xbf16>, tensor<2x4x16xf32>)
  %t = tc.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x16xbf16> -> tensor<2x16x4x16xbf16>
  %tm = tc.reshape %t : tensor<2x16x4x16xbf16> to tensor<32x64xbf16>
  %q2, %s2 = tc.quantize %tm {block = array<i64: 32, 64>} : tensor<32x64xbf16> -> (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>)
  return %q0, %s0, %q1, %s1, %q2, %s2, %lse
      : tensor<32x64xf8E4M3FN>, tensor<1x1xf32>, tensor<32x64xf8E4M3FN>, tensor<1x1xf32>,
        tensor<32x64xf8E4M3FN>, tensor<1x1xf32>, tensor<2x4x16xf32>
}

// -----

// Tests attention_grad: the concat of its three gradients (each through a
// transpose and a reshape: the fused QKV projection's gradient) takes one
// amax of all three (amax_of = 7), the rebuilt op keeping its attributes
// (a mark here; in the GPU pipeline tc-fuse-attention-views runs after this
// pass and marks the rebuilt op: fuse_attention_views_amax.mlir); in the
// second function dvalue alone is quantized (amax_of = 4), and the
// quantize of a fusion of dquery that already reduces is left alone.
// CHECK-LABEL: func.func @attention_grad_concat
// CHECK: %dquery, %dkey, %dvalue, %[[GA:.+]] = tc.attention_grad {{.+}} {amax_of = 7 : i64, causal = true, scale = 1.250000e-01 : f64, tc.grads_into_concat} : {{.+}} -> ({{.+}}, tensor<f32>)
// CHECK: %[[C:.+]] = tc.concat
// CHECK: %[[CR:.+]] = tc.reshape %[[C]]
// CHECK: tc.quantize %[[CR]] amax %[[GA]] : tensor<f32>
func.func @attention_grad_concat(%q: tensor<2x4x16x16xbf16>, %o: tensor<2x4x16x16xbf16>,
                                 %lse: tensor<2x4x16xf32>, %g: tensor<2x4x16x16xbf16>)
    -> (tensor<32x192xf8E5M2>, tensor<1x1xf32>) {
  %d:3 = tc.attention_grad %q, %q, %q, %o, %lse, %g {scale = 0.125 : f64, causal = true, tc.grads_into_concat}
      : (tensor<2x4x16x16xbf16>, tensor<2x4x16x16xbf16>, tensor<2x4x16x16xbf16>,
         tensor<2x4x16x16xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x16xbf16>)
        -> (tensor<2x4x16x16xbf16>, tensor<2x4x16x16xbf16>, tensor<2x4x16x16xbf16>)
  %t0 = tc.transpose %d#0 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x16xbf16> -> tensor<2x16x4x16xbf16>
  %t1 = tc.transpose %d#1 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x16xbf16> -> tensor<2x16x4x16xbf16>
  %t2 = tc.transpose %d#2 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x16xbf16> -> tensor<2x16x4x16xbf16>
  %r0 = tc.reshape %t0 : tensor<2x16x4x16xbf16> to tensor<2x16x64xbf16>
  %r1 = tc.reshape %t1 : tensor<2x16x4x16xbf16> to tensor<2x16x64xbf16>
  %r2 = tc.reshape %t2 : tensor<2x16x4x16xbf16> to tensor<2x16x64xbf16>
  %c = tc.concat %r0, %r1, %r2 {axis = 2 : i64} : tensor<2x16x64xbf16>, tensor<2x16x64xbf16>, tensor<2x16x64xbf16> -> tensor<2x16x192xbf16>
  %cm = tc.reshape %c : tensor<2x16x192xbf16> to tensor<32x192xbf16>
  %qq, %s = tc.quantize %cm {block = array<i64: 32, 192>} : tensor<32x192xbf16> -> (tensor<32x192xf8E5M2>, tensor<1x1xf32>)
  return %qq, %s : tensor<32x192xf8E5M2>, tensor<1x1xf32>
}

// CHECK-LABEL: func.func @attention_grad_value
// CHECK: %dquery, %dkey, %dvalue, %[[GA:.+]] = tc.attention_grad {{.+}} {amax_of = 4 : i64, {{.+}}} : {{.+}} -> ({{.+}}, tensor<f32>)
// CHECK: tc.quantize %{{.+}} {block
// CHECK: tc.quantize %{{.+}} amax %[[GA]] : tensor<f32>
func.func @attention_grad_value(%q: tensor<2x4x16x16xbf16>, %o: tensor<2x4x16x16xbf16>,
                                %lse: tensor<2x4x16xf32>, %g: tensor<2x4x16x16xbf16>)
    -> (tensor<2x4x16x16xbf16>, tensor<128x16xf8E5M2>, tensor<1x1xf32>, tensor<128x16xf8E5M2>, tensor<1x1xf32>) {
  %d:3 = tc.attention_grad %q, %q, %q, %o, %lse, %g {scale = 0.125 : f64, causal = true}
      : (tensor<2x4x16x16xbf16>, tensor<2x4x16x16xbf16>, tensor<2x4x16x16xbf16>,
         tensor<2x4x16x16xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x16xbf16>)
        -> (tensor<2x4x16x16xbf16>, tensor<2x4x16x16xbf16>, tensor<2x4x16x16xbf16>)
  %e:2 = tc.fusion (%d#0) : (tensor<2x4x16x16xbf16>) -> (tensor<2x4x16x16xbf16>, tensor<f32>) {
  ^bb0(%a: tensor<2x4x16x16xbf16>):
    %n = tc.neg %a : tensor<2x4x16x16xbf16>
    %af = tc.cast %a {saturate = false} : tensor<2x4x16x16xbf16> to tensor<2x4x16x16xf32>
    %s = tc.reduce_sum %af {axes = array<i64: 0, 1, 2, 3>} : tensor<2x4x16x16xf32> -> tensor<f32>
    tc.yield %n, %s : tensor<2x4x16x16xbf16>, tensor<f32>
  }
  %em = tc.reshape %e#0 : tensor<2x4x16x16xbf16> to tensor<128x16xbf16>
  %q0, %s0 = tc.quantize %em {block = array<i64: 128, 16>} : tensor<128x16xbf16> -> (tensor<128x16xf8E5M2>, tensor<1x1xf32>)
  %vm = tc.reshape %d#2 : tensor<2x4x16x16xbf16> to tensor<128x16xbf16>
  %q1, %s1 = tc.quantize %vm {block = array<i64: 128, 16>} : tensor<128x16xbf16> -> (tensor<128x16xf8E5M2>, tensor<1x1xf32>)
  return %e#0, %q0, %s0, %q1, %s1
      : tensor<2x4x16x16xbf16>, tensor<128x16xf8E5M2>, tensor<1x1xf32>, tensor<128x16xf8E5M2>, tensor<1x1xf32>
}

// -----

// Tests that the bf16 narrowing of a fused classifier's gradient takes no
// amax: cross_entropy_fwd_bwd writes that gradient itself (its fusion is no
// kernel), so the quantize keeps its own amax pass (--fp8-lm-head).
// CHECK-LABEL: func.func @classifier_gradient
// CHECK: %[[F:.+]] = tc.fusion(%{{.+}}) : (tensor<16x32xf32>) -> tensor<16x32xbf16>
// CHECK-NOT: tc.reduce_max
// CHECK: tc.quantize %[[F]] {block
func.func @classifier_gradient(%x: tensor<16x32xf32>, %y: tensor<16xi64>)
    -> (tensor<f32>, tensor<16x32xf8E5M2>, tensor<1x1xf32>) {
  %l = tc.cross_entropy %x, %y {tc.fused_grad} : (tensor<16x32xf32>, tensor<16xi64>) -> tensor<f32>
  %one = tc.constant dense<1.0> : tensor<f32>
  %d = tc.cross_entropy_grad %x, %y, grad %one {tc.fused_grad} : (tensor<16x32xf32>, tensor<16xi64>, tensor<f32>) -> tensor<16x32xf32>
  %n = tc.fusion (%d) : (tensor<16x32xf32>) -> tensor<16x32xbf16> {
  ^bb0(%a: tensor<16x32xf32>):
    %c = tc.cast %a : tensor<16x32xf32> to tensor<16x32xbf16>
    tc.yield %c : tensor<16x32xbf16>
  }
  %q, %s = tc.quantize %n {block = array<i64: 16, 32>} : tensor<16x32xbf16> -> (tensor<16x32xf8E5M2>, tensor<1x1xf32>)
  return %l, %q, %s : tensor<f32>, tensor<16x32xf8E5M2>, tensor<1x1xf32>
}
