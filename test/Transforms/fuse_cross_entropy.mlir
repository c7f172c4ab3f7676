// RUN: tc-opt %s --split-input-file --tc-fuse-cross-entropy | FileCheck %s

// Tests that cross_entropy and the gradient of the same logits and labels
// with a constant scale are paired (tc.fused_grad on both).
// CHECK-LABEL: func.func @pair
// CHECK: tc.cross_entropy %{{.+}}, %{{.+}} {tc.fused_grad}
// CHECK: tc.cross_entropy_grad %{{.+}}, %{{.+}}, grad %{{.+}} {tc.fused_grad}
func.func @pair(%x: tensor<16x32xf32>, %y: tensor<16xi64>) -> (tensor<f32>, tensor<16x32xf32>) {
  %l = tc.cross_entropy %x, %y : (tensor<16x32xf32>, tensor<16xi64>) -> tensor<f32>
  %one = tc.constant dense<1.0> : tensor<f32>
  %d = tc.cross_entropy_grad %x, %y, grad %one : (tensor<16x32xf32>, tensor<16xi64>, tensor<f32>) -> tensor<16x32xf32>
  return %l, %d : tensor<f32>, tensor<16x32xf32>
}

// -----

// Tests that a gradient whose scale is computed after the forward, or of
// other labels, is not paired.
// CHECK-LABEL: func.func @no_pair
// CHECK-NOT: tc.fused_grad
// CHECK: return
func.func @no_pair(%x: tensor<16x32xf32>, %y: tensor<16xi64>, %z: tensor<16xi64>, %s: tensor<f32>)
    -> (tensor<f32>, tensor<16x32xf32>, tensor<16x32xf32>) {
  %l = tc.cross_entropy %x, %y : (tensor<16x32xf32>, tensor<16xi64>) -> tensor<f32>
  %s2 = tc.mul %s, %l : tensor<f32>, tensor<f32> -> tensor<f32>
  %d = tc.cross_entropy_grad %x, %y, grad %s2 : (tensor<16x32xf32>, tensor<16xi64>, tensor<f32>) -> tensor<16x32xf32>
  %e = tc.cross_entropy_grad %x, %z, grad %s : (tensor<16x32xf32>, tensor<16xi64>, tensor<f32>) -> tensor<16x32xf32>
  return %l, %d, %e : tensor<f32>, tensor<16x32xf32>, tensor<16x32xf32>
}

// -----

// Tests that bf16 logits widened for the loss only, with a gradient only
// narrowed back, are marked tc.bf16_logits: the call reads and writes bf16.
// CHECK-LABEL: func.func @bf16
// CHECK: tc.cross_entropy %{{.+}}, %{{.+}} {tc.bf16_logits, tc.fused_grad}
// CHECK: tc.cross_entropy_grad %{{.+}}, %{{.+}}, grad %{{.+}} {tc.fused_grad}
func.func @bf16(%x: tensor<16x32xbf16>, %y: tensor<16xi64>) -> (tensor<f32>, tensor<16x32xbf16>) {
  %w = tc.fusion (%x) : (tensor<16x32xbf16>) -> tensor<16x32xf32> {
  ^bb0(%a: tensor<16x32xbf16>):
    %0 = tc.cast %a : tensor<16x32xbf16> to tensor<16x32xf32>
    tc.yield %0 : tensor<16x32xf32>
  }
  %l = tc.cross_entropy %w, %y : (tensor<16x32xf32>, tensor<16xi64>) -> tensor<f32>
  %one = tc.constant dense<1.0> : tensor<f32>
  %d = tc.cross_entropy_grad %w, %y, grad %one : (tensor<16x32xf32>, tensor<16xi64>, tensor<f32>) -> tensor<16x32xf32>
  %n = tc.fusion (%d) : (tensor<16x32xf32>) -> tensor<16x32xbf16> {
  ^bb0(%a: tensor<16x32xf32>):
    %0 = tc.cast %a : tensor<16x32xf32> to tensor<16x32xbf16>
    tc.yield %0 : tensor<16x32xbf16>
  }
  return %l, %n : tensor<f32>, tensor<16x32xbf16>
}

// -----

// Tests that widened logits another op also reads are not marked
// tc.bf16_logits (the f32 copy must exist anyway).
// CHECK-LABEL: func.func @bf16_shared
// CHECK: tc.cross_entropy %{{.+}}, %{{.+}} : (
func.func @bf16_shared(%x: tensor<16x32xbf16>, %y: tensor<16xi64>) -> (tensor<f32>, tensor<16x32xf32>) {
  %w = tc.fusion (%x) : (tensor<16x32xbf16>) -> tensor<16x32xf32> {
  ^bb0(%a: tensor<16x32xbf16>):
    %0 = tc.cast %a : tensor<16x32xbf16> to tensor<16x32xf32>
    tc.yield %0 : tensor<16x32xf32>
  }
  %l = tc.cross_entropy %w, %y : (tensor<16x32xf32>, tensor<16xi64>) -> tensor<f32>
  %e = tc.exp %w : tensor<16x32xf32>
  return %l, %e : tensor<f32>, tensor<16x32xf32>
}
