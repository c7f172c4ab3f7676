// RUN: tc-opt %s --split-input-file --tc-fp4-exact | FileCheck %s

// Tests that a product of an nvfp4 weight reads its unscaled twin with the
// tensor scale as alpha, that two nvfp4 operands give the f32 product of
// their scales, that one fake_quantize read by two products gets one twin,
// and that the scaled results nobody reads any more are erased.
// CHECK-LABEL: func.func @products
// CHECK-NOT: tc.fake_quantize %{{[a-z0-9]+}} {axis
// CHECK: %[[W:[a-z_0-9]+]], %[[TW:[a-z_0-9]+]] = tc.fake_quantize %arg1 {axis = 1 : i64, blocks2d = true, format = "nvfp4", {{.*}}unscaled = true} : tensor<64x32xbf16> -> tensor<f32>
// CHECK: %[[X:[a-z_0-9]+]], %[[TX:[a-z_0-9]+]] = tc.fake_quantize %arg0 {axis = 1 : i64, format = "nvfp4", {{.*}}unscaled = true} : tensor<8x32xbf16> -> tensor<f32>
// CHECK: tc.matmul %arg0, %[[W]] alpha %[[TW]] : tensor<f32> {{{.*}}transpose_rhs = true}
// CHECK: %[[A:[0-9]+]] = tc.mul %[[TX]], %[[TW]] {{.*}}: tensor<f32>, tensor<f32> -> tensor<f32>
// CHECK: tc.matmul %[[X]], %[[W]] alpha %[[A]] : tensor<f32> {{{.*}}transpose_rhs = true}
func.func @products(%x: tensor<8x32xbf16>, %w: tensor<64x32xbf16>) -> (tensor<8x64xbf16>, tensor<8x64xbf16>) {
  %w4 = tc.fake_quantize %w {format = "nvfp4", axis = 1 : i64, blocks2d = true} : tensor<64x32xbf16>
  %x4 = tc.fake_quantize %x {format = "nvfp4", axis = 1 : i64} : tensor<8x32xbf16>
  %y = tc.matmul %x, %w4 {transpose_rhs = true} : tensor<8x32xbf16>, tensor<64x32xbf16> -> tensor<8x64xbf16>
  %z = tc.matmul %x4, %w4 {transpose_rhs = true} : tensor<8x32xbf16>, tensor<64x32xbf16> -> tensor<8x64xbf16>
  return %y, %z : tensor<8x64xbf16>, tensor<8x64xbf16>
}

// -----

// Tests that mxfp4 (power-of-two scales: already exact), sm_120a's
// block-scaled products (tc.fp4_gemm) and a scaled result read by another
// op are left as they are, and that stochastic rounding keeps its draws.
// CHECK-LABEL: func.func @left_alone
// CHECK: %[[M:[a-z_0-9]+]] = tc.fake_quantize %arg1 {axis = 1 : i64, format = "mxfp4"}
// CHECK: tc.matmul %arg0, %[[M]] {transpose_rhs = true}
// CHECK: %[[N:[a-z_0-9]+]] = tc.fake_quantize %arg1 {axis = 1 : i64, format = "nvfp4"} :
// CHECK: tc.matmul %arg0, %[[N]] {tc.fp4_gemm = "nvfp4", transpose_rhs = true}
// CHECK: tc.neg %[[N]]
// CHECK: %[[S:[a-z_0-9]+]], %[[TS:[a-z_0-9]+]] = tc.fake_quantize %arg1 step %arg2 : tensor<f32> {format = "nvfp4", seed = 3 : i64, stochastic = true, stream = 9 : i64, {{.*}}unscaled = true}
// CHECK: tc.matmul %arg0, %[[S]] alpha %[[TS]]
func.func @left_alone(%x: tensor<8x32xbf16>, %w: tensor<64x32xbf16>, %s: tensor<f32>) -> (tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<64x32xbf16>, tensor<8x64xbf16>) {
  %m4 = tc.fake_quantize %w {format = "mxfp4", axis = 1 : i64} : tensor<64x32xbf16>
  %a = tc.matmul %x, %m4 {transpose_rhs = true} : tensor<8x32xbf16>, tensor<64x32xbf16> -> tensor<8x64xbf16>
  %n4 = tc.fake_quantize %w {format = "nvfp4", axis = 1 : i64} : tensor<64x32xbf16>
  %b = tc.matmul %x, %n4 {transpose_rhs = true, tc.fp4_gemm = "nvfp4"} : tensor<8x32xbf16>, tensor<64x32xbf16> -> tensor<8x64xbf16>
  %c = tc.neg %n4 : tensor<64x32xbf16>
  %g4 = tc.fake_quantize %w step %s : tensor<f32> {format = "nvfp4", stochastic = true, seed = 3 : i64, stream = 9 : i64} : tensor<64x32xbf16>
  %d = tc.matmul %x, %g4 {transpose_rhs = true} : tensor<8x32xbf16>, tensor<64x32xbf16> -> tensor<8x64xbf16>
  return %a, %b, %c, %d : tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<64x32xbf16>, tensor<8x64xbf16>
}
