// RUN: tc-opt %s --split-input-file --tc-fuse=gelu-aux=true | FileCheck %s
// RUN: tc-opt %s --split-input-file --tc-fuse | FileCheck %s --check-prefix=OFF
// RUN: tc-opt %s --split-input-file --tc-fuse="gelu-aux=true gelu-erf=true" | FileCheck %s --check-prefix=ERF

// Tests tc-fuse's gelu-aux: a training step's MLP (the bias add reshaped,
// the GELU's input read by the backward too) keeps its tanh GELU out of the
// fusions, marked tc.gelu_aux, for the GEMM's GELU_AUX_BIAS epilogue; the
// backward's elementwise chain is still one fusion. Without gelu-aux the
// GELU is fused.
// CHECK-LABEL: func.func @mlp
// CHECK: %[[P:.+]] = tc.matmul
// CHECK-NEXT: %[[H:.+]] = tc.add %[[P]], %arg2
// CHECK-NEXT: %[[R:.+]] = tc.reshape %[[H]]
// CHECK-NEXT: tc.gelu %[[R]] {approximate = "tanh", tc.gelu_aux}
// CHECK: tc.fusion
// OFF-LABEL: func.func @mlp
// OFF-NOT: tc.gelu_aux
// OFF: tc.fusion
func.func @mlp(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>, %dy: tensor<2x4x32xf32>)
    -> (tensor<2x4x32xf32>, tensor<2x4x32xf32>) {
  %p = tc.matmul %x, %w : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  %h = tc.add %p, %b : tensor<8x32xf32>, tensor<32xf32> -> tensor<8x32xf32>
  %r = tc.reshape %h : tensor<8x32xf32> to tensor<2x4x32xf32>
  %g = tc.gelu %r {approximate = "tanh"} : tensor<2x4x32xf32>
  %t = tc.tanh %r : tensor<2x4x32xf32>
  %d = tc.mul %dy, %t : tensor<2x4x32xf32>, tensor<2x4x32xf32> -> tensor<2x4x32xf32>
  return %g, %d : tensor<2x4x32xf32>, tensor<2x4x32xf32>
}

// -----

// Tests what gelu-aux leaves alone: a GELU that is its bias add's only
// reader (the plain GELU_BIAS epilogue takes it, unmarked), an erf GELU,
// and a GELU of an elementwise result.
// CHECK-LABEL: func.func @not_aux
// CHECK-NOT: tc.gelu_aux
// CHECK: return
func.func @not_aux(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>)
    -> (tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>) {
  %p = tc.matmul %x, %w : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  %h = tc.add %p, %b : tensor<8x32xf32>, tensor<32xf32> -> tensor<8x32xf32>
  %g = tc.gelu %h {approximate = "tanh"} : tensor<8x32xf32>
  %p2 = tc.matmul %x, %w : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  %h2 = tc.add %p2, %b : tensor<8x32xf32>, tensor<32xf32> -> tensor<8x32xf32>
  %e = tc.gelu %h2 : tensor<8x32xf32>
  %n = tc.neg %h2 : tensor<8x32xf32>
  %t = tc.gelu %n {approximate = "tanh"} : tensor<8x32xf32>
  return %g, %e, %t, %n : tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// Tests the backward's g * gelu'(x) (tc-autodiff's expression, named
// tc.gelu_grad) on a GEMM's product through its reshape: the mul and the
// expression's ops are marked tc.dgelu and left out of fusions, for the
// GEMM's DGELU epilogue. Without gelu-aux they are one fusion.
// CHECK-LABEL: func.func @dgelu
// CHECK-COUNT-6: tc.dgelu
// CHECK: tc.mul %{{.+}}, %{{.+}} {tc.dgelu, tc.gelu_grad = "tanh"}
// CHECK-NOT: tc.fusion
// OFF-LABEL: func.func @dgelu
// OFF-NOT: tc.dgelu
// OFF: tc.fusion
func.func @dgelu(%dy: tensor<8x16xf32>, %w: tensor<32x16xf32>, %x: tensor<2x4x32xf32>) -> tensor<2x4x32xf32> {
  %p = tc.matmul %dy, %w {transpose_rhs = true} : tensor<8x16xf32>, tensor<32x16xf32> -> tensor<8x32xf32>
  %g = tc.reshape %p : tensor<8x32xf32> to tensor<2x4x32xf32>
  %c1 = tc.constant dense<1.0> : tensor<f32>
  %k = tc.constant dense<0.797884583> : tensor<f32>
  %x2 = tc.mul %x, %x : tensor<2x4x32xf32>, tensor<2x4x32xf32> -> tensor<2x4x32xf32>
  %u = tc.mul %x2, %k : tensor<2x4x32xf32>, tensor<f32> -> tensor<2x4x32xf32>
  %t = tc.tanh %u : tensor<2x4x32xf32>
  %a = tc.add %t, %c1 : tensor<2x4x32xf32>, tensor<f32> -> tensor<2x4x32xf32>
  %b = tc.mul %a, %x : tensor<2x4x32xf32>, tensor<2x4x32xf32> -> tensor<2x4x32xf32>
  %d = tc.add %b, %x2 : tensor<2x4x32xf32>, tensor<2x4x32xf32> -> tensor<2x4x32xf32>
  %r = tc.mul %g, %d {tc.gelu_grad = "tanh"} : tensor<2x4x32xf32>, tensor<2x4x32xf32> -> tensor<2x4x32xf32>
  return %r : tensor<2x4x32xf32>
}


// -----

// Tests gelu-erf: with it the exact (erf) GELU of a GEMM's biased product
// that the backward reads too is marked tc.gelu_aux, and the backward's
// g * gelu'(x) named "none" (tc-autodiff's erf form) on a GEMM's product is
// marked tc.dgelu, as the tanh form's are; without it both stay in fusions.
// CHECK-LABEL: func.func @erf
// CHECK-NOT: tc.gelu_aux
// CHECK-NOT: tc.dgelu
// CHECK: return
// ERF-LABEL: func.func @erf
// ERF: tc.gelu %{{.+}} {tc.gelu_aux}
// ERF: tc.mul %{{.+}}, %{{.+}} {tc.dgelu, tc.gelu_grad = "none"}
func.func @erf(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>, %dy: tensor<8x16xf32>, %w2: tensor<32x16xf32>)
    -> (tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>) {
  %p = tc.matmul %x, %w : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  %h = tc.add %p, %b : tensor<8x32xf32>, tensor<32xf32> -> tensor<8x32xf32>
  %g = tc.gelu %h : tensor<8x32xf32>
  %c = tc.constant dense<0.707106769> : tensor<f32>
  %h2 = tc.mul %h, %h : tensor<8x32xf32>, tensor<8x32xf32> -> tensor<8x32xf32>
  %u = tc.mul %h2, %c : tensor<8x32xf32>, tensor<f32> -> tensor<8x32xf32>
  %e = tc.erf %u : tensor<8x32xf32>
  %q = tc.matmul %dy, %w2 {transpose_rhs = true} : tensor<8x16xf32>, tensor<32x16xf32> -> tensor<8x32xf32>
  %r = tc.mul %q, %e {tc.gelu_grad = "none"} : tensor<8x32xf32>, tensor<8x32xf32> -> tensor<8x32xf32>
  return %g, %h, %r : tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>
}
