// RUN: tc-opt %s --split-input-file --tc-fold-constants | FileCheck %s

// Tests that an op on constants becomes a constant holding its result.
// CHECK-LABEL: func.func @add
func.func @add() -> tensor<2xi64> {
  // CHECK: %[[C:.+]] = tc.constant dense<[2, 4]> : tensor<2xi64>
  // CHECK-NOT: tc.add
  // CHECK: return %[[C]]
  %a = tc.constant dense<[1, 2]> : tensor<2xi64>
  %b = tc.add %a, %a : tensor<2xi64>, tensor<2xi64> -> tensor<2xi64>
  return %b : tensor<2xi64>
}

// -----

// Tests that chains fold in one run and that float math uses the reference
// executor's semantics (sqrt of 4 then broadcast).
// CHECK-LABEL: func.func @chain
func.func @chain() -> tensor<2x2xf32> {
  // CHECK: tc.constant dense<2.000000e+00> : tensor<2x2xf32>
  %a = tc.constant dense<4.0> : tensor<f32>
  %b = tc.sqrt %a : tensor<f32>
  %c = tc.broadcast %b : tensor<f32> to tensor<2x2xf32>
  return %c : tensor<2x2xf32>
}

// -----

// Tests that ops reading an argument or a parameter are left alone.
// CHECK-LABEL: func.func @not_constant
func.func @not_constant(%x: tensor<2xf32>) -> tensor<2xf32> {
  // CHECK: tc.parameter
  // CHECK: tc.add
  // CHECK: tc.mul
  %w = tc.parameter "w" : tensor<2xf32>
  %c = tc.constant dense<1.0> : tensor<2xf32>
  %a = tc.add %w, %c : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  %m = tc.mul %a, %x : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  return %m : tensor<2xf32>
}

// -----

// Tests that a causal mask built from iota-like constants folds to a bool constant.
// CHECK-LABEL: func.func @mask
func.func @mask() -> tensor<2x2xi1> {
  // CHECK: tc.constant dense<{{\[\[}}true, false], [true, true]]> : tensor<2x2xi1>
  %r = tc.constant dense<[[0], [1]]> : tensor<2x1xi64>
  %c = tc.constant dense<[0, 1]> : tensor<2xi64>
  %m = tc.ge %r, %c : tensor<2x1xi64>, tensor<2xi64> -> tensor<2x2xi1>
  return %m : tensor<2x2xi1>
}
