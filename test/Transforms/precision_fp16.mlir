// RUN: tc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(tc-precision{mode=fp16}))' | FileCheck %s

// Tests that mode=fp16 is the bf16 plan in f16: matmul operands are cast to
// f16 (a parameter once: an fp32 master weight), the bias add follows in f16
// (the softmax is not its only reader), softmax stays f32 and the results
// are cast up.
// CHECK-LABEL: func.func @matmul
// CHECK: %[[W:.+]] = tc.parameter "w" {tc.precision = "f32", tc.precision_reason = "parameter: fp32 master weight"} : tensor<8x4xf32>
// CHECK: %[[WH:.+]] = tc.cast %[[W]] {{.*}}tc.precision_reason = "cast: to f16 for f16 compute"{{.*}} : tensor<8x4xf32> to tensor<8x4xf16>
// CHECK: %[[Y:.+]] = tc.matmul %{{.+}}, %[[WH]] {tc.precision = "f16", tc.precision_reason = "matmul: f16 operands, fp32 accumulation"} : tensor<2x8xf16>, tensor<8x4xf16> -> tensor<2x4xf16>
// CHECK: tc.add %[[Y]], %{{.+}} {tc.precision = "f16", tc.precision_reason = "elementwise on f16 inputs"} : tensor<2x4xf16>, tensor<4xf16> -> tensor<2x4xf16>
// CHECK: tc.softmax %{{.+}} {axis = 1 : i64, tc.precision = "f32", tc.precision_reason = "softmax: kept in f32"} : tensor<2x4xf32>
func.func @matmul(%x: tensor<2x8xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %w = tc.parameter "w" : tensor<8x4xf32>
  %b = tc.parameter "b" : tensor<4xf32>
  %y = tc.matmul %x, %w : tensor<2x8xf32>, tensor<8x4xf32> -> tensor<2x4xf32>
  %z = tc.add %y, %b : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
  %s = tc.softmax %z {axis = 1 : i64} : tensor<2x4xf32>
  return %s, %z : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// Tests that attention takes f16 operands in fp16 mode (the fused kernels'
// softmax statistics and accumulation stay f32; lse stays f32) and that
// norms keep f32: a norm's f16 rows are cast up, not narrowed as in bf16
// mode (the GPU's norm kernels take f32 or bf16).
// CHECK-LABEL: func.func @attention
// CHECK: tc.attention {{.*}}tc.precision = "f16", tc.precision_reason = "attention: f16 operands, f32 softmax and accumulation"{{.*}} : (tensor<1x2x4x8xf16>, tensor<1x2x4x8xf16>, tensor<1x2x4x8xf16>) -> (tensor<1x2x4x8xf16>, tensor<1x2x4xf32>)
// CHECK: tc.layer_norm {{.*}}tc.precision = "f32", tc.precision_reason = "norm: kept in f32"{{.*}} : (tensor<1x2x4x8xf32>
func.func @attention(%x: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %w = tc.parameter "w" : tensor<8x8xf32>
  %q = tc.matmul %x, %w : tensor<1x2x4x8xf32>, tensor<8x8xf32> -> tensor<1x2x4x8xf32>
  %o, %lse = tc.attention %q, %q, %q {scale = 0.35355339 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  %h = tc.matmul %o, %w : tensor<1x2x4x8xf32>, tensor<8x8xf32> -> tensor<1x2x4x8xf32>
  %n = tc.layer_norm %h {axis = 3 : i64, epsilon = 1.0e-05 : f64} : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %y = tc.matmul %n, %w : tensor<1x2x4x8xf32>, tensor<8x8xf32> -> tensor<1x2x4x8xf32>
  return %y : tensor<1x2x4x8xf32>
}
