// RUN: tc-opt %s --split-input-file --verify-diagnostics --tc-optimizer="optimizer=adamw loss-scaling=true loss-scale-init=1024 loss-scale-growth-interval=3" | FileCheck %s

// Tests that dynamic loss scaling (GradScaler's semantics) checks the scaled
// gradient for inf/NaN before unscaling it by 1/scale, computes the norm of
// the unscaled gradient, counts AdamW's step without the skipped steps,
// keeps every entry on a skipped step, and updates the scale and its growth
// tracker as torch._amp_update_scale_ (x0.5 on inf/NaN, x2 after
// growth-interval clean steps unless that is inf); @grad_step's read of the
// scale gets the initial value.

// CHECK-LABEL: func.func @grad_step(
// CHECK: tc.parameter "grad_scaler:scale" {tc.optimizer_state, tc.state_init = 1.024000e+03 : f64}

// CHECK-LABEL: func.func @apply_step(
// CHECK-SAME: %[[G:.+]]: tensor<4xf32> {tc.name = "grad:w"}, %[[LR:.+]]: tensor<f32> {tc.name = "lr"}, %[[STEP:.+]]: tensor<f32> {tc.name = "step"})
// CHECK-SAME: -> (tensor<f32> {tc.name = "grad_norm"}, tensor<f32> {tc.name = "skipped"}, tensor<f32> {tc.name = "loss_scale"}, tensor<4xf32> {tc.name = "update:w"}, tensor<4xf32> {tc.name = "update:exp_avg:w"}, tensor<4xf32> {tc.name = "update:exp_avg_sq:w"}, tensor<f32> {tc.name = "update:grad_scaler:scale"}, tensor<f32> {tc.name = "update:grad_scaler:growth_tracker"}, tensor<f32> {tc.name = "update:grad_scaler:skipped_steps"})
// CHECK: %[[S:.+]] = tc.parameter "grad_scaler:scale" {tc.optimizer_state, tc.state_init = 1.024000e+03 : f64} : tensor<f32>
// found_inf: any inf or NaN of the scaled gradient, one reduction.
// CHECK: %[[INF:.+]] = tc.isinf %[[G]]
// CHECK: %[[NAN:.+]] = tc.isnan %[[G]]
// CHECK: %[[BAD:.+]] = tc.or %[[INF]], %[[NAN]]
// CHECK: %[[FLAG:.+]] = tc.cast %[[BAD]] : tensor<4xi1> to tensor<4xf32>
// CHECK: %[[FOUND:.+]] = tc.reduce_max %[[FLAG]] {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
// CHECK: %[[SKIP:.+]] = tc.gt %[[FOUND]], %{{.+}} : tensor<f32>, tensor<f32> -> tensor<i1>
// Unscaled by 1/scale before the norm.
// CHECK: %[[INV:.+]] = tc.div %{{.+}}, %[[S]]
// CHECK: %[[UG:.+]] = tc.mul %[[G]], %[[INV]]
// CHECK: %[[SKIPPED:.+]] = tc.parameter "grad_scaler:skipped_steps" {tc.optimizer_state} : tensor<f32>
// CHECK: tc.mul %[[UG]], %[[UG]]
// CHECK: %[[NORM:.+]] = tc.sqrt
// AdamW's step: the step minus the skipped steps.
// CHECK: %[[ASTEP:.+]] = tc.sub %[[STEP]], %[[SKIPPED]]
// CHECK: %[[W:.+]] = tc.parameter "w" {trainable}
// CHECK: %[[M:.+]] = tc.parameter "exp_avg:w" {tc.optimizer_state}
// CHECK: tc.sub %[[UG]], %[[M]]
// CHECK: %[[V:.+]] = tc.parameter "exp_avg_sq:w" {tc.optimizer_state}
// CHECK: tc.pow %{{.+}}, %[[ASTEP]]
// CHECK: %[[NW:.+]] = tc.sub %{{.+}}, %{{.+}} : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
// A skipped step keeps the parameter and its moments.
// CHECK-NEXT: %[[KW:.+]] = tc.select %[[SKIP]], %[[W]], %[[NW]]
// CHECK: %[[KM:.+]] = tc.select %[[SKIP]], %[[M]],
// CHECK: %[[KV:.+]] = tc.select %[[SKIP]], %[[V]],
// The scale's update.
// CHECK: %[[T:.+]] = tc.parameter "grad_scaler:growth_tracker" {tc.optimizer_state} : tensor<f32>
// CHECK: %[[ZERO:.+]] = tc.constant dense<0.000000e+00>
// CHECK: %[[SUCC:.+]] = tc.add %[[T]], %{{.+}}
// CHECK: %[[INTERVAL:.+]] = tc.constant dense<3.000000e+00>
// CHECK: %[[REACHED:.+]] = tc.eq %[[SUCC]], %[[INTERVAL]]
// CHECK: %[[TWO:.+]] = tc.constant dense<2.000000e+00>
// CHECK: %[[GROWN:.+]] = tc.mul %[[S]], %[[TWO]]
// CHECK: tc.isinf %[[GROWN]]
// CHECK: tc.isnan %[[GROWN]]
// CHECK: %[[FIN:.+]] = tc.not
// CHECK: %[[GROW:.+]] = tc.and %[[REACHED]], %[[FIN]]
// CHECK: %[[CS:.+]] = tc.select %[[GROW]], %[[GROWN]], %[[S]]
// CHECK: %[[CT:.+]] = tc.select %[[REACHED]], %[[ZERO]], %[[SUCC]]
// CHECK: %[[HALF:.+]] = tc.constant dense<5.000000e-01>
// CHECK: %[[BACK:.+]] = tc.mul %[[S]], %[[HALF]]
// CHECK: %[[NS:.+]] = tc.select %[[SKIP]], %[[BACK]], %[[CS]]
// CHECK: %[[NT:.+]] = tc.select %[[SKIP]], %[[ZERO]], %[[CT]]
// CHECK: %[[NSK:.+]] = tc.add %[[SKIPPED]], %[[FOUND]]
// CHECK: return %[[NORM]], %[[FOUND]], %[[S]], %[[KW]], %[[KM]], %[[KV]], %[[NS]], %[[NT]], %[[NSK]]

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: -> (tensor<f32> {tc.name = "loss"}, tensor<f32> {tc.name = "grad_norm"}, tensor<f32> {tc.name = "skipped"}, tensor<f32> {tc.name = "loss_scale"}, tensor<4xf32> {tc.name = "update:w"}
// CHECK: tc.parameter "grad_scaler:scale" {tc.optimizer_state, tc.state_init = 1.024000e+03 : f64}
func.func @grad_step(%ids: tensor<2xi64> {tc.name = "input_ids"})
    -> (tensor<f32> {tc.name = "loss"}, tensor<4xf32> {tc.name = "grad:w"}) {
  %s = tc.parameter "grad_scaler:scale" {tc.optimizer_state} : tensor<f32>
  %w = tc.parameter "w" {trainable} : tensor<4xf32>
  %l = tc.reduce_sum %w {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
  %r = tc.reshape %s : tensor<f32> to tensor<1xf32>
  %g = tc.broadcast %r : tensor<1xf32> to tensor<4xf32>
  return %l, %g : tensor<f32>, tensor<4xf32>
}

// -----

// Tests that loss scaling refuses a @grad_step whose backward does not start
// from the scale (tc-autodiff without loss-scaling).

// expected-error @+1 {{loss-scaling: @grad_step does not read "grad_scaler:scale" (run tc-autodiff with loss-scaling=true)}}
func.func @grad_step(%ids: tensor<2xi64> {tc.name = "input_ids"})
    -> (tensor<f32> {tc.name = "loss"}, tensor<4xf32> {tc.name = "grad:w"}) {
  %w = tc.parameter "w" {trainable} : tensor<4xf32>
  %l = tc.reduce_sum %w {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}
