// RUN: tc-opt %s --split-input-file --verify-diagnostics --tc-optimizer="optimizer=sgd momentum=0.9 weight-decay=0.01 no-decay=bias" | FileCheck %s --check-prefix=SGD
// RUN: tc-opt %s --split-input-file --verify-diagnostics --tc-optimizer="optimizer=adamw clip-grad-norm=1.0" | FileCheck %s --check-prefix=ADAMW

// Tests that SGD with momentum reads one momentum buffer per parameter,
// decays only the parameters not matched by no-decay, and that @train_step
// inlines @grad_step and returns the loss first.

// SGD-LABEL: func.func @apply_step(
// SGD-SAME: %[[G:.+]]: tensor<4xf32> {tc.name = "grad:w"}, %[[GB:.+]]: tensor<4xf32> {tc.name = "grad:fc.bias"}, %[[LR:.+]]: tensor<f32> {tc.name = "lr"}, %[[STEP:.+]]: tensor<f32> {tc.name = "step"})
// SGD-SAME: -> (tensor<f32> {tc.name = "grad_norm"}, tensor<4xf32> {tc.name = "update:w"}, tensor<4xf32> {tc.name = "update:momentum_buffer:w"}, tensor<4xf32> {tc.name = "update:fc.bias"}, tensor<4xf32> {tc.name = "update:momentum_buffer:fc.bias"})
// SGD: %[[NORM:.+]] = tc.sqrt
// SGD: %[[W:.+]] = tc.parameter "w" {trainable}
// SGD: %[[WD:.+]] = tc.constant dense<0.00999999977>
// SGD: %[[DW:.+]] = tc.mul %[[W]], %[[WD]]
// SGD: %[[GD:.+]] = tc.add %[[G]], %[[DW]]
// SGD: %[[BUF:.+]] = tc.parameter "momentum_buffer:w" {tc.optimizer_state}
// SGD: %[[MU:.+]] = tc.constant dense<0.899999976>
// SGD: %[[BM:.+]] = tc.mul %[[BUF]], %[[MU]]
// SGD: %[[NB:.+]] = tc.add %[[BM]], %[[GD]]
// SGD: %[[STEPD:.+]] = tc.mul %[[LR]], %[[NB]]
// SGD: %[[NW:.+]] = tc.sub %[[W]], %[[STEPD]]
// SGD: %[[B:.+]] = tc.parameter "fc.bias" {trainable}
// SGD-NOT: tc.mul %[[B]]
// SGD: %[[BBUF:.+]] = tc.parameter "momentum_buffer:fc.bias" {tc.optimizer_state}
// SGD: %[[BBM:.+]] = tc.mul %[[BBUF]]
// SGD: %[[BNB:.+]] = tc.add %[[BBM]], %[[GB]]
// SGD: %[[BSTEP:.+]] = tc.mul %[[LR]], %[[BNB]]
// SGD: %[[NBIAS:.+]] = tc.sub %[[B]], %[[BSTEP]]
// SGD: return %[[NORM]], %[[NW]], %[[NB]], %[[NBIAS]], %[[BNB]]

// SGD-LABEL: func.func @train_step(
// SGD-SAME: tensor<2xi64> {tc.name = "input_ids"}, %{{.+}}: tensor<f32> {tc.name = "lr"}, %{{.+}}: tensor<f32> {tc.name = "step"})
// SGD-SAME: -> (tensor<f32> {tc.name = "loss"}, tensor<f32> {tc.name = "grad_norm"}, tensor<4xf32> {tc.name = "update:w"}
// SGD: %[[TL:.+]] = tc.reduce_sum
// SGD: return %[[TL]],

// ADAMW-LABEL: func.func @apply_step(
// ADAMW-SAME: -> (tensor<f32> {tc.name = "grad_norm"}, tensor<4xf32> {tc.name = "update:w"}, tensor<4xf32> {tc.name = "update:exp_avg:w"}, tensor<4xf32> {tc.name = "update:exp_avg_sq:w"}
// Clipping: min(1, max_norm / (norm + 1e-6)) scales every gradient.
// ADAMW: %[[N:.+]] = tc.sqrt
// ADAMW: %[[EPS6:.+]] = tc.constant dense<9.99999997E-7>
// ADAMW: %[[D:.+]] = tc.add %[[N]], %[[EPS6]]
// ADAMW: %[[C:.+]] = tc.div %{{.+}}, %[[D]]
// ADAMW: %[[CC:.+]] = tc.min %[[C]]
// ADAMW: %[[CG:.+]] = tc.mul %arg0, %[[CC]]
// Decoupled decay (torch's default 0.01) before the moments.
// ADAMW: %[[W:.+]] = tc.parameter "w" {trainable}
// ADAMW: tc.mul %[[W]]
// ADAMW: tc.parameter "exp_avg:w" {tc.optimizer_state}
// ADAMW: tc.parameter "exp_avg_sq:w" {tc.optimizer_state}
// Bias correction with the step input.
// ADAMW: tc.pow %{{.+}}, %arg3
// ADAMW: tc.pow %{{.+}}, %arg3
// ADAMW: return %[[N]],
// ADAMW-LABEL: func.func @train_step(
func.func @grad_step(%ids: tensor<2xi64> {tc.name = "input_ids"})
    -> (tensor<f32> {tc.name = "loss"}, tensor<4xf32> {tc.name = "grad:w"},
        tensor<4xf32> {tc.name = "grad:fc.bias"}) {
  %w = tc.parameter "w" {trainable} : tensor<4xf32>
  %b = tc.parameter "fc.bias" {trainable} : tensor<4xf32>
  %l = tc.reduce_sum %w {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
  return %l, %w, %b : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that a module without @grad_step is an error.
// expected-error @+1 {{no func.func @grad_step (run tc-autodiff first)}}
module {
  func.func @infer() -> (tensor<f32> {tc.name = "loss"}) {
    %c = tc.constant dense<1.0> : tensor<f32>
    return %c : tensor<f32>
  }
}

// -----

// Tests that a result that is not a "grad:" gradient is an error.
module {
  // expected-error @+1 {{result #1 of @grad_step is not a floating gradient named "grad:<parameter>"}}
  func.func @grad_step() -> (tensor<f32> {tc.name = "loss"}, tensor<4xf32> {tc.name = "w"}) {
    %w = tc.parameter "w" {trainable} : tensor<4xf32>
    %l = tc.reduce_sum %w {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
    return %l, %w : tensor<f32>, tensor<4xf32>
  }
}
