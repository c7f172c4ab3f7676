// RUN: tc-opt %s --split-input-file --tc-lower-to-tcx --verify-diagnostics | FileCheck %s

// Tests that tc.fake_quantize (--fp4-qat) lowers to the runtime's
// "fake_quantize" call: the input as [outer, len, inner] with the blocks
// along the op's axis, nvfp4's scratch (the tensor amax), and a bf16 matmul
// reading the result.
// CHECK-LABEL: func.func @fp4_linear
// CHECK: %[[W4:.+]] = tcx.alloc : <64x128xbf16>
// CHECK: tcx.library "fake_quantize" ins(%{{.+}} : !tcx.buffer<64x128xbf16>) outs(%[[W4]], %{{.+}} : {{.+}}) {blocks2d = true, inner = 128 : i64, len = 64 : i64, mxfp4 = false, outer = 1 : i64, rng_stream = 0 : i64, seed = 0 : i64, stochastic = false, unscaled = false}
// CHECK: %[[X4:.+]] = tcx.alloc : <2x16x64xbf16>
// CHECK: tcx.library "fake_quantize" ins(%{{.+}} : !tcx.buffer<2x16x64xbf16>) outs(%[[X4]], %{{.+}} : {{.+}}) {blocks2d = false, inner = 1 : i64, len = 64 : i64, mxfp4 = true, outer = 32 : i64, rng_stream = 0 : i64, seed = 0 : i64, stochastic = false, unscaled = false}
// CHECK: tcx.matmul ins(%[[X4]], %[[W4]] :
func.func @fp4_linear(%x: tensor<2x16x64xbf16>, %w: tensor<64x128xbf16>) -> tensor<2x16x128xbf16> {
  %w4 = tc.fake_quantize %w {format = "nvfp4", axis = 0 : i64, blocks2d = true} : tensor<64x128xbf16>
  %x4 = tc.fake_quantize %x {format = "mxfp4"} : tensor<2x16x64xbf16>
  %y = tc.matmul %x4, %w4 : tensor<2x16x64xbf16>, tensor<64x128xbf16> -> tensor<2x16x128xbf16>
  return %y : tensor<2x16x128xbf16>
}

// -----

// Tests that stochastic rounding (--fp4-qat-grads) passes its step buffer
// (read on the device), seed and stream.
// CHECK-LABEL: func.func @fp4_grad
// CHECK: tcx.library "fake_quantize" ins(%{{.+}}, %{{.+}} : !tcx.buffer<32x96xbf16>, !tcx.buffer<f32>) outs({{.+}}) {blocks2d = false, inner = 96 : i64, len = 32 : i64, mxfp4 = false, outer = 1 : i64, rng_stream = -3 : i64, seed = 5 : i64, stochastic = true, unscaled = false}
func.func @fp4_grad(%g: tensor<32x96xbf16>, %s: tensor<f32>) -> tensor<32x96xbf16> {
  %g4 = tc.fake_quantize %g step %s : tensor<f32> {format = "nvfp4", axis = 0 : i64, stochastic = true, seed = 5 : i64, stream = -3 : i64} : tensor<32x96xbf16>
  return %g4 : tensor<32x96xbf16>
}

// -----

// Tests that tc-fp4-exact's form lowers: the unscaled "fake_quantize" writes
// the tensor scale as its second output, and the matmul reads the scale as
// a device alpha, its last input.
// CHECK-LABEL: func.func @fp4_exact
// CHECK: %[[U:.+]] = tcx.alloc : <64x128xbf16>
// CHECK: %[[T:.+]] = tcx.alloc : <f32>
// CHECK: tcx.library "fake_quantize" ins(%{{.+}} : !tcx.buffer<64x128xbf16>) outs(%[[U]], %[[T]], %{{.+}} : {{.+}}) {{{.*}}stochastic = false, unscaled = true}
// CHECK: tcx.matmul ins(%{{.+}}, %[[U]], %[[T]] : {{.+}}) outs({{.+}}) {{{.*}}device_alpha = true
func.func @fp4_exact(%x: tensor<2x16x64xbf16>, %w: tensor<64x128xbf16>) -> tensor<2x16x128xbf16> {
  %u, %t = tc.fake_quantize %w {format = "nvfp4", axis = 0 : i64, blocks2d = true, unscaled = true} : tensor<64x128xbf16> -> tensor<f32>
  %y = tc.matmul %x, %u alpha %t : tensor<f32> : tensor<2x16x64xbf16>, tensor<64x128xbf16> -> tensor<2x16x128xbf16>
  return %y : tensor<2x16x128xbf16>
}
