// RUN: tc-opt %s --tc-autodiff=loss-scaling=true | FileCheck %s

// Tests that with loss-scaling the backward starts from the loss scale (the
// f32 optimizer state "grad_scaler:scale", cast to the loss's type), so that
// every gradient comes out multiplied by it: d(loss * scale).

// CHECK-LABEL: func.func @grad_step(
// CHECK: %[[S:.+]] = tc.parameter "grad_scaler:scale" {tc.optimizer_state} : tensor<f32>
// CHECK: %[[SEED:.+]] = tc.cast %[[S]] : tensor<f32> to tensor<f16>
// CHECK: tc.reshape %[[SEED]] : tensor<f16> to tensor<1xf16>
// CHECK-NOT: dense<1.0
// CHECK: return
func.func @infer() -> (tensor<f16> {tc.name = "loss"}) {
  %w = tc.parameter "w" {trainable} : tensor<4xf16>
  %l = tc.reduce_sum %w {axes = array<i64: 0>} : tensor<4xf16> -> tensor<f16>
  return %l : tensor<f16>
}
