// RUN: tc-opt %s --pass-pipeline='builtin.module(func.func(tc-precision{mode=bf16}),tc-precision-report)' -o /dev/null | FileCheck %s
// RUN: tc-opt %s --tc-precision-report=function=grad_step -o /dev/null | FileCheck %s --check-prefix=UNANNOTATED
// RUN: tc-opt %s --tc-precision-report=function=nope -o /dev/null | FileCheck %s --check-prefix=MISSING

// Tests the table: one line per op (name, result type, precision, reason),
// the counts per precision, and the share of matmul FLOPs in bf16: the
// [2,8]x[8,16] matmul (2*2*8*16 = 512 FLOPs) is bf16, the integer one (16)
// is not.
// CHECK: precision report: @infer (9 ops)
// CHECK-NEXT: matmul FLOPs in bf16: 512 of 528 (97.0%)
// CHECK-NEXT: counts: bf16 3, f32 4, i64 2
// CHECK-NEXT: by kind:
// CHECK-NEXT: tc.cast 3 bf16 2, f32 1: cast: to bf16 for bf16 compute (2); cast: up to f32 for tc.layer_norm (1)
// CHECK-NEXT: tc.parameter 1 f32 1: parameter: fp32 master weight
// CHECK-NEXT: tc.matmul 2 bf16 1, i64 1: integer/bool: untouched (1); matmul: bf16 operands, fp32 accumulation (1)
// CHECK-NEXT: tc.layer_norm 1 f32 1: norm: kept in f32
// CHECK-NEXT: tc.cross_entropy 1 f32 1: loss: kept in f32
// CHECK-NEXT: tc.constant 1 i64 1: integer/bool: untouched
// CHECK-NEXT: ops:
// CHECK-NEXT: op type precision reason onnx node
// CHECK-NEXT: tc.cast tensor<2x8xbf16> bf16 cast: to bf16 for bf16 compute
// CHECK-NEXT: tc.parameter tensor<8x16xf32> f32 parameter: fp32 master weight
// CHECK-NEXT: tc.cast tensor<8x16xbf16> bf16 cast: to bf16 for bf16 compute
// CHECK-NEXT: tc.matmul tensor<2x16xbf16> bf16 matmul: bf16 operands, fp32 accumulation
// CHECK-NEXT: tc.cast tensor<2x16xf32> f32 cast: up to f32 for tc.layer_norm
// CHECK-NEXT: tc.layer_norm tensor<2x16xf32> f32 norm: kept in f32
// CHECK-NEXT: tc.cross_entropy tensor<f32> f32 loss: kept in f32
// CHECK-NEXT: tc.constant tensor<2x2xi64> i64 integer/bool: untouched
// CHECK-NEXT: tc.matmul tensor<2x2xi64> i64 integer/bool: untouched
func.func @infer(%x: tensor<2x8xf32>, %labels: tensor<2xi64>) -> (tensor<f32>, tensor<2x2xi64>) {
  %w = tc.parameter "w" {trainable} : tensor<8x16xf32>
  %y = tc.matmul %x, %w : tensor<2x8xf32>, tensor<8x16xf32> -> tensor<2x16xf32>
  %n = tc.layer_norm %y {axis = 1 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x16xf32>) -> tensor<2x16xf32>
  %l = tc.cross_entropy %n, %labels : (tensor<2x16xf32>, tensor<2xi64>) -> tensor<f32>
  %c = tc.constant dense<1> : tensor<2x2xi64>
  %i = tc.matmul %c, %c : tensor<2x2xi64>, tensor<2x2xi64> -> tensor<2x2xi64>
  return %l, %i : tensor<f32>, tensor<2x2xi64>
}

// Tests that ops without the pass's attributes (the backward tc-autodiff
// builds) are described by their types.
// UNANNOTATED: precision report: @grad_step (2 ops)
// UNANNOTATED: matmul FLOPs in bf16: 0 of 0 (0.0%)
// UNANNOTATED: counts: bf16 1, f32 1
// UNANNOTATED: tc.cast tensor<4xf32> f32 (derived from types)
// UNANNOTATED: tc.neg tensor<4xbf16> bf16 (derived from types)
func.func @grad_step(%g: tensor<4xbf16>) -> (tensor<4xf32>, tensor<4xbf16>) {
  %0 = tc.cast %g : tensor<4xbf16> to tensor<4xf32>
  %1 = tc.neg %g : tensor<4xbf16>
  return %0, %1 : tensor<4xf32>, tensor<4xbf16>
}

// MISSING: precision report: no function @nope
