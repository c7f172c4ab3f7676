// RUN: tc-opt %s --tc-optimizer="optimizer=adamw beta2=0.999 eps=1e-8" | FileCheck %s --check-prefix=ADAMW
// RUN: tc-opt %s --tc-optimizer="optimizer=sgd momentum=0.9" | FileCheck %s --check-prefix=SGD

// Tests that the update of a bf16 parameter is computed in f32 and rounded
// to bf16 at the end (torch's CPU kernels compute bf16/f16 in float): in bf16
// itself beta2 = 0.999 rounds to 1.0, so the bias correction 1 - beta2^step
// was 0 and every AdamW step divided by zero (loss NaN at step 2).

// ADAMW-LABEL: func.func @apply_step(
// ADAMW-SAME: %[[G:.+]]: tensor<4xbf16> {tc.name = "grad:w"}
// ADAMW-SAME: -> (tensor<f32> {tc.name = "grad_norm"}, tensor<4xbf16> {tc.name = "update:w"}, tensor<4xbf16> {tc.name = "update:exp_avg:w"}, tensor<4xbf16> {tc.name = "update:exp_avg_sq:w"})
// ADAMW-NOT: tensor<bf16>
// ADAMW-DAG: tc.constant dense<9.990000e-01> : tensor<f32>
// ADAMW-DAG: tc.constant dense<9.99999993E-9> : tensor<f32>
// ADAMW-DAG: %[[W:.+]] = tc.parameter "w" {trainable} : tensor<4xbf16>
// ADAMW-DAG: %[[WF:.+]] = tc.cast %[[W]] : tensor<4xbf16> to tensor<4xf32>
// ADAMW-DAG: %[[GF:.+]] = tc.cast %[[G]] : tensor<4xbf16> to tensor<4xf32>
// ADAMW-DAG: %[[M:.+]] = tc.parameter "exp_avg:w" {tc.optimizer_state} : tensor<4xbf16>
// ADAMW-DAG: tc.cast %[[M]] : tensor<4xbf16> to tensor<4xf32>
// ADAMW-DAG: %[[V:.+]] = tc.parameter "exp_avg_sq:w" {tc.optimizer_state} : tensor<4xbf16>
// ADAMW-DAG: tc.cast %[[V]] : tensor<4xbf16> to tensor<4xf32>
// ADAMW: %[[NW:.+]] = tc.sub %{{.+}}, %{{.+}} : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
// ADAMW: %[[NWB:.+]] = tc.cast %[[NW]] : tensor<4xf32> to tensor<4xbf16>
// ADAMW: return %{{.+}}, %[[NWB]], %{{.+}}, %{{.+}} : tensor<f32>, tensor<4xbf16>, tensor<4xbf16>, tensor<4xbf16>

// SGD-LABEL: func.func @apply_step(
// SGD-NOT: tensor<bf16>
// SGD-DAG: tc.constant dense<0.899999976> : tensor<f32>
// SGD-DAG: %[[BUF:.+]] = tc.parameter "momentum_buffer:w" {tc.optimizer_state} : tensor<4xbf16>
// SGD-DAG: tc.cast %[[BUF]] : tensor<4xbf16> to tensor<4xf32>
// SGD: return %{{.+}}, %{{.+}}, %{{.+}} : tensor<f32>, tensor<4xbf16>, tensor<4xbf16>

func.func @grad_step(%ids: tensor<2xi64> {tc.name = "input_ids"})
    -> (tensor<f32> {tc.name = "loss"}, tensor<4xbf16> {tc.name = "grad:w"}) {
  %w = tc.parameter "w" {trainable} : tensor<4xbf16>
  %l = tc.reduce_sum %w {axes = array<i64: 0>} : tensor<4xbf16> -> tensor<bf16>
  %f = tc.cast %l : tensor<bf16> to tensor<f32>
  return %f, %w : tensor<f32>, tensor<4xbf16>
}
