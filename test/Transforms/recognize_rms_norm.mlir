// RUN: tc-opt %s --split-input-file --tc-recognize-rms-norm --verify-diagnostics | FileCheck %s

// Tests HuggingFace's LlamaRMSNorm as exported: pow(x, 2), mean over the last
// axis, + eps, 1 / sqrt, x * r, then the weight on the left.
// CHECK-LABEL: func.func @hf_llama
// CHECK: %[[Y:.+]] = tc.rms_norm %arg0, scale %arg1 {axis = 2 : i64, epsilon = 9.9999999747524271E-7 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK-NOT: tc.reduce_mean
// CHECK-NOT: tc.sqrt
// CHECK: return %[[Y]]
func.func @hf_llama(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %two = tc.constant dense<2.0> : tensor<f32>
  %eps = tc.constant dense<1.0e-06> : tensor<f32>
  %one = tc.constant dense<1.0> : tensor<f32>
  %p = tc.pow %x, %two : tensor<2x4x8xf32>, tensor<f32> -> tensor<2x4x8xf32>
  %m = tc.reduce_mean %p {axes = array<i64: 2>, keepdims = true} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %a = tc.add %m, %eps : tensor<2x4x1xf32>, tensor<f32> -> tensor<2x4x1xf32>
  %s = tc.sqrt %a : tensor<2x4x1xf32>
  %r = tc.div %one, %s : tensor<f32>, tensor<2x4x1xf32> -> tensor<2x4x1xf32>
  %n = tc.mul %x, %r : tensor<2x4x8xf32>, tensor<2x4x1xf32> -> tensor<2x4x8xf32>
  %y = tc.mul %w, %n : tensor<8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Tests x * x, rsqrt, the weight on the right, and x itself read elsewhere
// (a residual): x stays, the chain goes.
// CHECK-LABEL: func.func @rsqrt_weight_right
// CHECK: %[[Y:.+]] = tc.rms_norm %arg0, scale %arg1 {axis = 1 : i64, epsilon = 9.9999997473787516E-6 : f64}
// CHECK: tc.add %[[Y]], %arg0
func.func @rsqrt_weight_right(%x: tensor<3x8xf32>, %w: tensor<8xf32>) -> tensor<3x8xf32> {
  %eps = tc.constant dense<1.0e-05> : tensor<1xf32>
  %p = tc.mul %x, %x : tensor<3x8xf32>, tensor<3x8xf32> -> tensor<3x8xf32>
  %m = tc.reduce_mean %p {axes = array<i64: 1>, keepdims = true} : tensor<3x8xf32> -> tensor<3x1xf32>
  %a = tc.add %eps, %m : tensor<1xf32>, tensor<3x1xf32> -> tensor<3x1xf32>
  %r = tc.rsqrt %a : tensor<3x1xf32>
  %n = tc.mul %r, %x : tensor<3x1xf32>, tensor<3x8xf32> -> tensor<3x8xf32>
  %y = tc.mul %n, %w : tensor<3x8xf32>, tensor<8xf32> -> tensor<3x8xf32>
  %z = tc.add %y, %x : tensor<3x8xf32>, tensor<3x8xf32> -> tensor<3x8xf32>
  return %z : tensor<3x8xf32>
}

// -----

// Tests x / sqrt(.) and no weight (the normalised x read by a matmul).
// CHECK-LABEL: func.func @divide_no_scale
// CHECK: %[[Y:.+]] = tc.rms_norm %arg0 {axis = 1 : i64, epsilon = 9.9999997473787516E-6 : f64} : (tensor<3x8xf32>) -> tensor<3x8xf32>
// CHECK: tc.matmul %[[Y]], %arg1
func.func @divide_no_scale(%x: tensor<3x8xf32>, %v: tensor<8x2xf32>) -> tensor<3x2xf32> {
  %eps = tc.constant dense<1.0e-05> : tensor<f32>
  %p = tc.mul %x, %x : tensor<3x8xf32>, tensor<3x8xf32> -> tensor<3x8xf32>
  %m = tc.reduce_mean %p {axes = array<i64: 1>, keepdims = true} : tensor<3x8xf32> -> tensor<3x1xf32>
  %a = tc.add %m, %eps : tensor<3x1xf32>, tensor<f32> -> tensor<3x1xf32>
  %s = tc.sqrt %a : tensor<3x1xf32>
  %n = tc.div %x, %s : tensor<3x8xf32>, tensor<3x1xf32> -> tensor<3x8xf32>
  %y = tc.matmul %n, %v : tensor<3x8xf32>, tensor<8x2xf32> -> tensor<3x2xf32>
  return %y : tensor<3x2xf32>
}

// -----

// Tests what is left alone: the mean over a leading axis (silently: not an
// RMSNorm), and a chain whose reciprocal is also read elsewhere (a remark).
// CHECK-LABEL: func.func @not_rms_norm
// CHECK-NOT: tc.rms_norm
// CHECK-COUNT-2: tc.reduce_mean
func.func @not_rms_norm(%x: tensor<3x8xf32>) -> (tensor<3x8xf32>, tensor<3x8xf32>, tensor<3x1xf32>) {
  %eps = tc.constant dense<1.0e-05> : tensor<f32>
  %p = tc.mul %x, %x : tensor<3x8xf32>, tensor<3x8xf32> -> tensor<3x8xf32>
  %m = tc.reduce_mean %p {axes = array<i64: 0>, keepdims = true} : tensor<3x8xf32> -> tensor<1x8xf32>
  %a = tc.add %m, %eps : tensor<1x8xf32>, tensor<f32> -> tensor<1x8xf32>
  %r = tc.rsqrt %a : tensor<1x8xf32>
  %n = tc.mul %x, %r : tensor<3x8xf32>, tensor<1x8xf32> -> tensor<3x8xf32>
  %p2 = tc.mul %x, %x : tensor<3x8xf32>, tensor<3x8xf32> -> tensor<3x8xf32>
  // expected-remark @+1 {{RMSNorm left unfused (written out): the reciprocal RMS does not multiply the same x (or is read elsewhere)}}
  %m2 = tc.reduce_mean %p2 {axes = array<i64: 1>, keepdims = true} : tensor<3x8xf32> -> tensor<3x1xf32>
  %a2 = tc.add %m2, %eps : tensor<3x1xf32>, tensor<f32> -> tensor<3x1xf32>
  %r2 = tc.rsqrt %a2 : tensor<3x1xf32>
  %n2 = tc.mul %x, %r2 : tensor<3x8xf32>, tensor<3x1xf32> -> tensor<3x8xf32>
  return %n, %n2, %r2 : tensor<3x8xf32>, tensor<3x8xf32>, tensor<3x1xf32>
}
