// RUN: tc-opt %s --split-input-file --tc-recognize-gelu --canonicalize | FileCheck %s

// Tests HuggingFace's gelu_new as the dynamo exporter writes it (x * 0.5
// first, pow(x, 3)): one tc.gelu tanh of x, the chain gone.
// CHECK-LABEL: func.func @gelu_new
// CHECK-NEXT: %[[G:.+]] = tc.gelu %arg0 {approximate = "tanh"} : tensor<4x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @gelu_new(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %half = tc.constant dense<5.000000e-01> : tensor<f32>
  %three = tc.constant dense<3.000000e+00> : tensor<f32>
  %kappa = tc.constant dense<4.471500e-02> : tensor<f32>
  %beta = tc.constant dense<0.797884583> : tensor<f32>
  %one = tc.constant dense<1.000000e+00> : tensor<f32>
  %h = tc.mul %x, %half : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %p = tc.pow %x, %three : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %c = tc.mul %p, %kappa : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %s = tc.add %x, %c : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %u = tc.mul %s, %beta : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %t = tc.tanh %u : tensor<4x8xf32>
  %a = tc.add %t, %one : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %y = tc.mul %h, %a : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests torch's GELU(approximate="tanh") as older exporters write it: x * x
// * x, the constants on the left, ((1 + tanh) * x) * 0.5 last.
// CHECK-LABEL: func.func @torch_tanh
// CHECK-NEXT: %[[G:.+]] = tc.gelu %arg0 {approximate = "tanh"} : tensor<16xf32>
// CHECK-NEXT: return %[[G]]
func.func @torch_tanh(%x: tensor<16xf32>) -> tensor<16xf32> {
  %half = tc.constant dense<5.000000e-01> : tensor<f32>
  %kappa = tc.constant dense<4.471500e-02> : tensor<f32>
  %beta = tc.constant dense<0.797884583> : tensor<f32>
  %one = tc.constant dense<1.000000e+00> : tensor<f32>
  %x2 = tc.mul %x, %x : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
  %x3 = tc.mul %x2, %x : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
  %c = tc.mul %kappa, %x3 : tensor<f32>, tensor<16xf32> -> tensor<16xf32>
  %s = tc.add %c, %x : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
  %u = tc.mul %beta, %s : tensor<f32>, tensor<16xf32> -> tensor<16xf32>
  %t = tc.tanh %u : tensor<16xf32>
  %a = tc.add %one, %t : tensor<f32>, tensor<16xf32> -> tensor<16xf32>
  %m = tc.mul %a, %x : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
  %y = tc.mul %m, %half : tensor<16xf32>, tensor<f32> -> tensor<16xf32>
  return %y : tensor<16xf32>
}

// -----

// Tests what stays: another constant (0.044 for 0.044715), and a tanh read
// twice.
// CHECK-LABEL: func.func @not_gelu
// CHECK-NOT: tc.gelu
// CHECK: return
func.func @not_gelu(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %half = tc.constant dense<5.000000e-01> : tensor<f32>
  %three = tc.constant dense<3.000000e+00> : tensor<f32>
  %kappa = tc.constant dense<4.400000e-02> : tensor<f32>
  %kappa2 = tc.constant dense<4.471500e-02> : tensor<f32>
  %beta = tc.constant dense<0.797884583> : tensor<f32>
  %one = tc.constant dense<1.000000e+00> : tensor<f32>
  %h = tc.mul %x, %half : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  %p = tc.pow %x, %three : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  %c = tc.mul %p, %kappa : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  %s = tc.add %x, %c : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  %u = tc.mul %s, %beta : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  %t = tc.tanh %u : tensor<8xf32>
  %a = tc.add %t, %one : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  %y = tc.mul %h, %a : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  %c2 = tc.mul %p, %kappa2 : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  %s2 = tc.add %x, %c2 : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  %u2 = tc.mul %s2, %beta : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  %t2 = tc.tanh %u2 : tensor<8xf32>
  %a2 = tc.add %t2, %one : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  %y2 = tc.mul %h, %a2 : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  %z = tc.add %y2, %t2 : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  return %y, %z : tensor<8xf32>, tensor<8xf32>
}
