// RUN: tc-opt %s --split-input-file --tc-share-norm-stats | FileCheck %s

// Tests that a layer_norm and the gradient of the same input, scale, axis
// and epsilon get the same tc.norm_stats, and a gradient with another
// epsilon gets none.
// CHECK-LABEL: func.func @pair
// CHECK: tc.layer_norm {{.+}} {axis = 1 : i64, epsilon = 1.000000e-05 : f64, tc.norm_stats = 0 : i64}
// CHECK: tc.layer_norm_grad {{.+}} {axis = 1 : i64, epsilon = 1.000000e-05 : f64, tc.norm_stats = 0 : i64}
// CHECK: tc.layer_norm_grad {{.+}} {axis = 1 : i64, epsilon = 9.9999999999999995E-7 : f64} :
func.func @pair(%x: tensor<16x8xf32>, %dy: tensor<16x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>)
    -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>) {
  %y = tc.layer_norm %x, scale %g, bias %b {axis = 1 : i64, epsilon = 1.0e-05 : f64}
      : (tensor<16x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<16x8xf32>
  %dx, %dg, %db = tc.layer_norm_grad %x, %dy, scale %g {axis = 1 : i64, epsilon = 1.0e-05 : f64}
      : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<8xf32>) -> (tensor<16x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %ex, %eg, %eb = tc.layer_norm_grad %x, %dy, scale %g {axis = 1 : i64, epsilon = 1.0e-06 : f64}
      : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<8xf32>) -> (tensor<16x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %y, %dx, %ex : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>
}

// -----

// Tests that rms_norms are paired the same way, and that one of rows the
// library has no kernel for (f16) is not.
// CHECK-LABEL: func.func @rms
// CHECK: tc.rms_norm {{.+}} {axis = 1 : i64, epsilon = 9.9999999999999995E-7 : f64, tc.norm_stats = 0 : i64}
// CHECK: tc.rms_norm_grad {{.+}} {axis = 1 : i64, epsilon = 9.9999999999999995E-7 : f64, tc.norm_stats = 0 : i64}
// CHECK-NOT: tc.norm_stats
// CHECK: return
func.func @rms(%x: tensor<16x8xf32>, %dy: tensor<16x8xf32>, %g: tensor<8xf32>,
               %h: tensor<16x8xf16>, %dh: tensor<16x8xf16>, %gh: tensor<8xf16>)
    -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf16>, tensor<16x8xf16>) {
  %y = tc.rms_norm %x, scale %g {axis = 1 : i64, epsilon = 1.0e-06 : f64}
      : (tensor<16x8xf32>, tensor<8xf32>) -> tensor<16x8xf32>
  %dx, %dg = tc.rms_norm_grad %x, %dy, scale %g {axis = 1 : i64, epsilon = 1.0e-06 : f64}
      : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<8xf32>) -> (tensor<16x8xf32>, tensor<8xf32>)
  %z = tc.rms_norm %h, scale %gh {axis = 1 : i64, epsilon = 1.0e-06 : f64}
      : (tensor<16x8xf16>, tensor<8xf16>) -> tensor<16x8xf16>
  %dz, %dgh = tc.rms_norm_grad %h, %dh, scale %gh {axis = 1 : i64, epsilon = 1.0e-06 : f64}
      : (tensor<16x8xf16>, tensor<16x8xf16>, tensor<8xf16>) -> (tensor<16x8xf16>, tensor<8xf16>)
  return %y, %dx, %z, %dz : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf16>, tensor<16x8xf16>
}
