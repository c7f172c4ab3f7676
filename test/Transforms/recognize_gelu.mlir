// RUN: tc-opt %s --split-input-file --tc-recognize-gelu --canonicalize | FileCheck %s
// RUN: tc-opt %s --split-input-file --tc-recognize-gelu=erf=true --canonicalize | FileCheck %s --check-prefix=ERF

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

// -----

// Tests the exact GELU as the dynamo exporter writes GPT-NeoX's "gelu"
// (x / sqrt 2, erf, + 1, 0.5 * (.), then x * (.)) and with the product by
// 1 / sqrt 2 and (x * 0.5) first: with erf, tc.gelu (approximate "none") of
// x; without, the chain stays.
// CHECK-LABEL: func.func @gelu_erf
// CHECK: tc.erf
// CHECK: tc.erf
// ERF-LABEL: func.func @gelu_erf
// ERF-NEXT: %[[A:.+]] = tc.gelu %arg0 : tensor<4x8xf32>
// ERF-NEXT: %[[B:.+]] = tc.gelu %arg1 : tensor<4x8xf32>
// ERF-NEXT: return %[[A]], %[[B]]
func.func @gelu_erf(%x: tensor<4x8xf32>, %z: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %sqrt2 = tc.constant dense<1.41421354> : tensor<f32>
  %rsqrt2 = tc.constant dense<0.707106769> : tensor<f32>
  %one = tc.constant dense<1.000000e+00> : tensor<f32>
  %half = tc.constant dense<5.000000e-01> : tensor<f32>
  %d = tc.div %x, %sqrt2 : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %e = tc.erf %d : tensor<4x8xf32>
  %a = tc.add %e, %one : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %h = tc.mul %half, %a : tensor<f32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %y = tc.mul %x, %h : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %zh = tc.mul %z, %half : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %zs = tc.mul %z, %rsqrt2 : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %ze = tc.erf %zs : tensor<4x8xf32>
  %za = tc.add %one, %ze : tensor<f32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %w = tc.mul %zh, %za : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return %y, %w : tensor<4x8xf32>, tensor<4x8xf32>
}
