// RUN: split-file %s %t
// RUN: tc-opt %t/grad.mlir --split-input-file --tc-autodiff | FileCheck %t/grad.mlir
// RUN: tc-opt %t/option.mlir --tc-autodiff=loss=total | FileCheck %t/option.mlir
// RUN: tc-opt %t/errors.mlir --split-input-file --tc-autodiff --verify-diagnostics
// RUN: tc-opt %t/option_errors.mlir --split-input-file --tc-autodiff=loss=logits --verify-diagnostics
// RUN: not tc-opt %t/no_infer.mlir --tc-autodiff 2>&1 | FileCheck %t/no_infer.mlir

//--- grad.mlir

// Tests that @grad_step returns the loss then one gradient per trainable
// parameter in order of first appearance; that the tied embedding (two
// tc.parameter reads of "wte") gets one gradient, the sum of the
// scatter_add of the gather and the lm_head matmul; that the broadcast bias
// is reduced over the broadcast axis; that the labels and ids get nothing;
// and that @infer is unchanged while its dead softmax is not copied.

// CHECK-LABEL: func.func @infer
// CHECK: tc.softmax
// CHECK: return
// CHECK-LABEL: func.func @grad_step
// CHECK-SAME: (%[[IDS:.+]]: tensor<4xi64> {tc.name = "ids"}, %[[LAB:.+]]: tensor<4xi64> {tc.name = "labels"})
// CHECK-SAME: -> (tensor<f32> {tc.name = "loss"}, tensor<6x3xf32> {tc.name = "grad:wte"}, tensor<3xf32> {tc.name = "grad:bias"})
// CHECK-NOT: tc.softmax
// CHECK: %[[H:.+]] = tc.add
// CHECK: %[[HEAD:.+]] = tc.parameter "wte" {trainable}
// CHECK: %[[LOGITS:.+]] = tc.matmul %[[H]], %[[HEAD]] {transpose_rhs = true}
// CHECK: %[[LOSS:.+]] = tc.cross_entropy %[[LOGITS]], %[[LAB]]
// CHECK: %[[ONE:.+]] = tc.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DL:.+]] = tc.cross_entropy_grad %[[LOGITS]], %[[LAB]], grad %[[ONE]]
// CHECK: %[[DH:.+]] = tc.matmul %[[DL]], %[[HEAD]] :
// CHECK: %[[DHEAD:.+]] = tc.matmul %[[DL]], %[[H]] {transpose_lhs = true}
// CHECK: %[[RB:.+]] = tc.reduce_sum %[[DH]] {axes = array<i64: 0>, keepdims = true} : tensor<4x3xf32> -> tensor<1x3xf32>
// CHECK: %[[DB:.+]] = tc.reshape %[[RB]] : tensor<1x3xf32> to tensor<3xf32>
// CHECK: %[[DE:.+]] = tc.scatter_add %[[DH]], %[[IDS]] {axis = 0 : i64} : tensor<4x3xf32>, tensor<4xi64> -> tensor<6x3xf32>
// CHECK: %[[DW:.+]] = tc.add %[[DE]], %[[DHEAD]] : tensor<6x3xf32>, tensor<6x3xf32>
// CHECK: return %[[LOSS]], %[[DW]], %[[DB]]
func.func @infer(%ids: tensor<4xi64> {tc.name = "ids"}, %labels: tensor<4xi64> {tc.name = "labels"})
    -> (tensor<4x6xf32> {tc.name = "probs"}, tensor<f32> {tc.name = "loss"}) {
  %wte = tc.parameter "wte" {trainable} : tensor<6x3xf32>
  %e = tc.gather %wte, %ids {axis = 0 : i64} : tensor<6x3xf32>, tensor<4xi64> -> tensor<4x3xf32>
  %b = tc.parameter "bias" {trainable} : tensor<3xf32>
  %h = tc.add %e, %b : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
  %head = tc.parameter "wte" {trainable} : tensor<6x3xf32>
  %logits = tc.matmul %h, %head {transpose_rhs = true} : tensor<4x3xf32>, tensor<6x3xf32> -> tensor<4x6xf32>
  %probs = tc.softmax %logits {axis = 1 : i64} : tensor<4x6xf32>
  %l = tc.cross_entropy %logits, %labels : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
  return %probs, %l : tensor<4x6xf32>, tensor<f32>
}

// -----

// Tests that a strided slice's gradient is an insert_slice with the same
// starts and strides, that a non-trainable parameter gets no gradient, and
// that a trainable parameter the loss does not depend on gets zeros.

// CHECK-LABEL: func.func @grad_step
// CHECK-SAME: -> (tensor<f64> {tc.name = "loss"}, tensor<8x7xf64> {tc.name = "grad:x"}, tensor<2xf64> {tc.name = "grad:unused"})
// CHECK: %[[D:.+]] = tc.insert_slice %{{.+}} {starts = array<i64: 7, 6>, strides = array<i64: -2, -3>} : tensor<4x3xf64> to tensor<8x7xf64>
// CHECK: %[[Z:.+]] = tc.constant dense<0.000000e+00> : tensor<2xf64>
// CHECK: return %{{.+}}, %[[D]], %[[Z]]
func.func @infer() -> (tensor<f64> {tc.name = "loss"}) {
  %x = tc.parameter "x" {trainable} : tensor<8x7xf64>
  %u = tc.parameter "unused" {trainable} : tensor<2xf64>
  %c = tc.parameter "frozen" : tensor<4x3xf64>
  %s = tc.slice %x {starts = array<i64: 7, 6>, strides = array<i64: -2, -3>} : tensor<8x7xf64> to tensor<4x3xf64>
  %m = tc.mul %s, %c : tensor<4x3xf64>, tensor<4x3xf64> -> tensor<4x3xf64>
  %l = tc.reduce_sum %m {axes = array<i64: 0, 1>} : tensor<4x3xf64> -> tensor<f64>
  return %l : tensor<f64>
}

// -----

// Tests that tc.fake_quantize (FP4 QAT) passes the gradient straight
// through: d w = d (fake_quantize w), here the frozen factor c times the
// loss's seed 1 (no op between the mul's gradient and the result).

// CHECK-LABEL: func.func @grad_step
// CHECK-SAME: -> (tensor<f32> {tc.name = "loss"}, tensor<16x16xf32> {tc.name = "grad:w"})
// CHECK: %[[C:.+]] = tc.parameter "c" : tensor<16x16xf32>
// CHECK: tc.fake_quantize
// CHECK: %[[G:.+]] = tc.broadcast
// CHECK-NEXT: %[[D:.+]] = tc.mul %[[G]], %[[C]]
// CHECK-NEXT: return %{{.+}}, %[[D]]
func.func @infer() -> (tensor<f32> {tc.name = "loss"}) {
  %w = tc.parameter "w" {trainable} : tensor<16x16xf32>
  %c = tc.parameter "c" : tensor<16x16xf32>
  %q = tc.fake_quantize %w {format = "nvfp4", blocks2d = true} : tensor<16x16xf32>
  %m = tc.mul %q, %c : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  %l = tc.reduce_sum %m {axes = array<i64: 0, 1>} : tensor<16x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a parameter used by both operands of one op gets the sum of
// both contributions.

// CHECK-LABEL: func.func @grad_step
// CHECK: %[[X:.+]] = tc.parameter "x" {trainable}
// CHECK: tc.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[G:.+]] = tc.broadcast %{{.+}} : tensor<1xf32> to tensor<3xf32>
// CHECK: %[[A:.+]] = tc.mul %[[G]], %[[X]]
// CHECK: %[[B:.+]] = tc.mul %[[G]], %[[X]]
// CHECK: %[[S:.+]] = tc.add %[[A]], %[[B]]
// CHECK: return %{{.+}}, %[[S]]
func.func @infer() -> (tensor<f32> {tc.name = "loss"}) {
  %x = tc.parameter "x" {trainable} : tensor<3xf32>
  %sq = tc.mul %x, %x : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %l = tc.reduce_sum %sq {axes = array<i64: 0>} : tensor<3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that norms differentiate to one gradient op each (their row
// statistics recomputed by the op, or taken from the forward on the GPU):
// layer_norm's three gradients and rms_norm's two, each accumulated into
// its operand.
// CHECK-LABEL: func.func @grad_step
// CHECK: %[[RX:.+]], %[[RG:.+]] = tc.rms_norm_grad %{{.+}}, %{{.+}}, scale %{{.+}} {axis = 1 : i64, epsilon = 9.9999999999999995E-7 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
// CHECK: %[[DX:.+]], %[[DG:.+]], %[[DB:.+]] = tc.layer_norm_grad %{{.+}}, %[[RX]], scale %{{.+}} {axis = 1 : i64, epsilon = 1.000000e-05 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK: return %{{.+}}, %[[DX]], %[[DG]], %[[DB]], %[[RG]]
func.func @infer(%x: tensor<4x8xf32> {tc.name = "x"}) -> (tensor<f32> {tc.name = "loss"}) {
  %p = tc.parameter "p" {trainable} : tensor<4x8xf32>
  %g = tc.parameter "g" {trainable} : tensor<8xf32>
  %b = tc.parameter "b" {trainable} : tensor<8xf32>
  %w = tc.parameter "w" {trainable} : tensor<8xf32>
  %a = tc.add %x, %p : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %n = tc.layer_norm %a, scale %g, bias %b {axis = 1 : i64, epsilon = 1.0e-05 : f64}
      : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %r = tc.rms_norm %n, scale %w {axis = 1 : i64, epsilon = 1.0e-06 : f64}
      : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %l = tc.reduce_sum %r {axes = array<i64: 0, 1>} : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that the backward products of an FP8-marked matmul carry the mark
// with their role and the operand that is the incoming gradient (E5M2 in
// tc-quantize-fp8): dgrad reads it as operand 0, wgrad (W read transposed,
// so dW^T = g^T x) as operand 0 too; an unmarked matmul's backward has none.
// CHECK-LABEL: func.func @grad_step
// CHECK: tc.matmul %{{.+}}, %{{.+}} {tc.fp8 = "tensor", tc.fp8_role = "fprop", transpose_rhs = true}
// CHECK: tc.matmul %{{.+}}, %{{.+}} {transpose_rhs = true} : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
// CHECK: tc.matmul %{{.+}}, %{{.+}} {transpose_lhs = true} : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<16x16xf32>
// CHECK: tc.matmul %{{.+}}, %{{.+}} {tc.fp8 = "tensor", tc.fp8_grad = 0 : i64, tc.fp8_role = "dgrad"} : tensor<4x16xf32>, tensor<16x32xf32> -> tensor<4x32xf32>
// CHECK: tc.matmul %{{.+}}, %{{.+}} {tc.fp8 = "tensor", tc.fp8_grad = 0 : i64, tc.fp8_role = "wgrad", transpose_lhs = true} : tensor<4x16xf32>, tensor<4x32xf32> -> tensor<16x32xf32>
// CHECK-NOT: tc.fp8
// CHECK: return
func.func @infer(%x0: tensor<4x32xf32> {tc.name = "x"}) -> (tensor<f32> {tc.name = "loss"}) {
  %p = tc.parameter "p" {trainable} : tensor<4x32xf32>
  %x = tc.add %x0, %p : tensor<4x32xf32>, tensor<4x32xf32> -> tensor<4x32xf32>
  %w = tc.parameter "w" {trainable} : tensor<16x32xf32>
  %y = tc.matmul %x, %w {transpose_rhs = true, tc.fp8 = "tensor", tc.fp8_role = "fprop"} : tensor<4x32xf32>, tensor<16x32xf32> -> tensor<4x16xf32>
  %v = tc.parameter "v" {trainable} : tensor<16x16xf32>
  %z = tc.matmul %y, %v : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
  %l = tc.reduce_sum %z {axes = array<i64: 0, 1>} : tensor<4x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that the gradient of a GELU ends in g * gelu'(x) named by its form,
// tc.gelu_grad = "none" (erf, backpropagated first) and "tanh" (the GPU
// pipeline's DGELU epilogues find them by the name).
// CHECK-LABEL: func.func @grad_step
// CHECK: tc.erf
// CHECK: tc.mul %{{.+}}, %{{.+}} {tc.gelu_grad = "none"}
// CHECK: tc.mul %{{.+}}, %{{.+}} {tc.gelu_grad = "tanh"}
// CHECK-NOT: tc.gelu_grad
// CHECK: return
func.func @infer() -> (tensor<f32> {tc.name = "loss"}) {
  %x = tc.parameter "x" {trainable} : tensor<4x3xf32>
  %g = tc.gelu %x {approximate = "tanh"} : tensor<4x3xf32>
  %e = tc.gelu %g : tensor<4x3xf32>
  %l = tc.reduce_sum %e {axes = array<i64: 0, 1>} : tensor<4x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

//--- option.mlir

// Tests that loss=<name> picks the loss among several scalar results and
// that @grad_step's first result keeps that name.

// CHECK-LABEL: func.func @grad_step
// CHECK-SAME: -> (tensor<f32> {tc.name = "total"}, tensor<3xf32> {tc.name = "grad:w"})
func.func @infer() -> (tensor<f32> {tc.name = "aux"}, tensor<f32> {tc.name = "total"}) {
  %w = tc.parameter "w" {trainable} : tensor<3xf32>
  %s = tc.reduce_sum %w {axes = array<i64: 0>} : tensor<3xf32> -> tensor<f32>
  %t = tc.exp %s : tensor<f32>
  return %s, %t : tensor<f32>, tensor<f32>
}

//--- errors.mlir

// Tests that reflect padding between a parameter and the loss is an error
// naming the op.
func.func @infer() -> (tensor<f32> {tc.name = "loss"}) {
  %x = tc.parameter "x" {trainable} : tensor<4xf32>
  // expected-error @+1 {{'tc.pad' op has no gradient rule in tc-autodiff: the gradient of mode "reflect" is not supported (only "constant")}}
  %p = tc.pad %x {low = array<i64: 1>, high = array<i64: 1>, mode = "reflect"} : tensor<4xf32> -> tensor<6xf32>
  %l = tc.reduce_sum %p {axes = array<i64: 0>} : tensor<6xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that an op without a rule (here a call) is an error naming it.
func.func private @helper(tensor<4xf32>) -> tensor<4xf32>
func.func @infer() -> (tensor<f32> {tc.name = "loss"}) {
  %x = tc.parameter "x" {trainable} : tensor<4xf32>
  // expected-error @+1 {{'func.call' op has no gradient rule in tc-autodiff: it lies between a trainable parameter and the loss}}
  %c = func.call @helper(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %l = tc.reduce_sum %c {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a trainable class weight of cross_entropy is refused (the
// weight is not differentiable).
func.func @infer(%y: tensor<2xi64>) -> (tensor<f32> {tc.name = "loss"}) {
  %x = tc.parameter "x" {trainable} : tensor<2x3xf32>
  %w = tc.parameter "w" {trainable} : tensor<3xf32>
  // expected-error @+1 {{'tc.cross_entropy' op has no gradient rule in tc-autodiff: the class weight operand is not differentiable}}
  %l = tc.cross_entropy %x, %y, weight %w : (tensor<2x3xf32>, tensor<2xi64>, tensor<3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that the loss must be unambiguous without the loss option.
// expected-error @+1 {{tc-autodiff: @infer has 2 floating-point scalar results; name the loss with the pass option loss=<tc.name>}}
func.func @infer() -> (tensor<f32>, tensor<f32>) {
  %x = tc.parameter "x" {trainable} : tensor<4xf32>
  %l = tc.reduce_sum %x {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
  return %l, %l : tensor<f32>, tensor<f32>
}

// -----

// Tests that a trainable integer parameter is an error.
func.func @infer(%s: tensor<f32>) -> (tensor<f32> {tc.name = "loss"}) {
  // expected-error @+1 {{trainable parameter 'steps' has the non-floating type 'tensor<4xi64>' and cannot get a gradient}}
  %x = tc.parameter "steps" {trainable} : tensor<4xi64>
  return %s : tensor<f32>
}

//--- option_errors.mlir

// Tests that the named loss must be a floating-point scalar.
// expected-error @+1 {{tc-autodiff: the loss "logits" has type 'tensor<2xf32>', not a floating-point scalar}}
func.func @infer() -> (tensor<2xf32> {tc.name = "logits"}) {
  %x = tc.parameter "x" {trainable} : tensor<2xf32>
  return %x : tensor<2xf32>
}

// -----

// Tests that the named loss must exist.
// expected-error @+1 {{tc-autodiff: @infer has no result named "logits" (its results are named "loss")}}
func.func @infer() -> (tensor<f32> {tc.name = "loss"}) {
  %x = tc.parameter "x" {trainable} : tensor<f32>
  return %x : tensor<f32>
}

//--- no_infer.mlir

// Tests that a module without @infer is an error.
// CHECK: error: tc-autodiff: the module has no func.func @infer with a body
func.func @main() {
  return
}
