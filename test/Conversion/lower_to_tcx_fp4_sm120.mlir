// RUN: tc-opt %s --split-input-file --tc-lower-to-tcx --verify-diagnostics | FileCheck %s

// Tests that a product planFp4Gemms marked for sm_120a's block-scaled NVFP4
// GEMM (tc.fp4_gemm) lowers to quantize_fp4 of both fake_quantize inputs
// (x [2, 16, 64] as [32, 64]; W [64, 128] along axis 0 packed transposed as
// [128, 64] in 16x16 blocks: 128 rows of 32 bytes, 128 x 4 scale bytes, an
// f32 tensor scale) and cuBLASLt's nvfp4_gemm into the bf16 result; the
// fake_quantize calls stay for other readers.
// CHECK-LABEL: func.func @nvfp4_linear
// CHECK: tcx.library "fake_quantize"
// CHECK: tcx.library "fake_quantize"
// CHECK: %[[XQ:.+]] = tcx.alloc : <1024xi8>
// CHECK: %[[XS:.+]] = tcx.alloc : <512xi8>
// CHECK: %[[XT:.+]] = tcx.alloc : <1xf32>
// CHECK: tcx.library "quantize_fp4" ins(%{{.+}} : !tcx.buffer<2x16x64xbf16>) outs(%[[XQ]], %[[XS]], %[[XT]], %{{.+}} : {{.+}}) {blocks2d = false, has_tensor_scale = true, inner = 1 : i64, len = 64 : i64, mxfp4 = false, outer = 32 : i64, rng_stream = 0 : i64, seed = 0 : i64, stochastic = false}
// CHECK: %[[WQ:.+]] = tcx.alloc : <4096xi8>
// CHECK: %[[WS:.+]] = tcx.alloc : <512xi8>
// CHECK: %[[WT:.+]] = tcx.alloc : <1xf32>
// CHECK: tcx.library "quantize_fp4" ins(%{{.+}} : !tcx.buffer<64x128xbf16>) outs(%[[WQ]], %[[WS]], %[[WT]], %{{.+}} : {{.+}}) {blocks2d = true, has_tensor_scale = true, inner = 128 : i64, len = 64 : i64, mxfp4 = false, outer = 1 : i64
// CHECK: tcx.library "nvfp4_gemm" ins(%[[XQ]], %[[XS]], %[[XT]], %[[WQ]], %[[WS]], %[[WT]] : {{.+}}) outs(%{{.+}}, %{{.+}} : !tcx.buffer<2x16x128xbf16>, {{.+}}) {k = 64 : i64, m = 32 : i64, n = 128 : i64}
// CHECK-NOT: tcx.matmul
func.func @nvfp4_linear(%x: tensor<2x16x64xbf16>, %w: tensor<64x128xbf16>) -> tensor<2x16x128xbf16> {
  %w4 = tc.fake_quantize %w {format = "nvfp4", axis = 0 : i64, blocks2d = true} : tensor<64x128xbf16>
  %x4 = tc.fake_quantize %x {format = "nvfp4"} : tensor<2x16x64xbf16>
  %y = tc.matmul %x4, %w4 {tc.fp4_gemm = "nvfp4"} : tensor<2x16x64xbf16>, tensor<64x128xbf16> -> tensor<2x16x128xbf16>
  return %y : tensor<2x16x128xbf16>
}

// -----

// Tests that mxfp4 takes tc's mma.sync kernel (fp4_mma_gemm, no tensor
// scale), that a stochastic fake_quantize (--fp4-qat-grads) packs with its
// step, seed and stream, and that two products of one fake_quantize share
// its packed copy.
// CHECK-LABEL: func.func @mxfp4_shared
// CHECK: tcx.library "quantize_fp4" ins(%{{.+}}, %{{.+}} : !tcx.buffer<32x64xbf16>, !tcx.buffer<f32>) outs({{.+}}) {blocks2d = false, has_tensor_scale = false, inner = 1 : i64, len = 64 : i64, mxfp4 = true, outer = 32 : i64, rng_stream = 9 : i64, seed = 5 : i64, stochastic = true}
// CHECK: tcx.library "quantize_fp4"
// CHECK: tcx.library "fp4_mma_gemm" ins({{.+}}) outs(%{{.+}} : !tcx.buffer<32x96xbf16>) {k = 64 : i64, m = 32 : i64, n = 96 : i64}
// CHECK-NOT: tcx.library "quantize_fp4"
// CHECK: tcx.library "fp4_mma_gemm"
// CHECK-NOT: tcx.matmul
func.func @mxfp4_shared(%g: tensor<32x64xbf16>, %s: tensor<f32>, %w: tensor<96x64xbf16>) -> (tensor<32x96xbf16>, tensor<32x96xbf16>) {
  %g4 = tc.fake_quantize %g step %s : tensor<f32> {format = "mxfp4", stochastic = true, seed = 5 : i64, stream = 9 : i64} : tensor<32x64xbf16>
  %w4 = tc.fake_quantize %w {format = "mxfp4"} : tensor<96x64xbf16>
  %a = tc.matmul %g4, %w4 {transpose_rhs = true, tc.fp4_gemm = "mxfp4"} : tensor<32x64xbf16>, tensor<96x64xbf16> -> tensor<32x96xbf16>
  %b = tc.matmul %g4, %w4 {transpose_rhs = true, tc.fp4_gemm = "mxfp4"} : tensor<32x64xbf16>, tensor<96x64xbf16> -> tensor<32x96xbf16>
  return %a, %b : tensor<32x96xbf16>, tensor<32x96xbf16>
}

// -----

// Tests that a marked product without that form is an error naming why.
func.func @not_fp4(%x: tensor<32x64xbf16>, %w: tensor<64x96xbf16>) -> tensor<32x96xbf16> {
  %w4 = tc.fake_quantize %w {format = "mxfp4", axis = 0 : i64} : tensor<64x96xbf16>
  // expected-error @+1 {{'tc.matmul' op GPU lowering: marked tc.fp4_gemm but its lhs is not fake-quantised (bf16)}}
  %y = tc.matmul %x, %w4 {tc.fp4_gemm = "mxfp4"} : tensor<32x64xbf16>, tensor<64x96xbf16> -> tensor<32x96xbf16>
  return %y : tensor<32x96xbf16>
}
