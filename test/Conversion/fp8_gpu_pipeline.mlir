// RUN: tc-opt %s --tc-gpu | FileCheck %s
// RUN: tc-opt %s --tc-gpu | tc-opt --tcx-memory-report=target=sm_90 -o /dev/null | FileCheck %s --check-prefix=REPORT

// Tests that tc-opt's GPU pipeline (tc-fuse, the lowering, memory planning)
// runs a handwritten FP8 training step of one linear layer: the quantize
// calls and FP8 GEMMs survive the fusion passes unchanged, every buffer gets
// an arena offset, and the memory plan counts the FP8 copies: the forward
// peak is q of x (2,048 B) and W (8,192 B), their transposed copies (2,048
// and 8,192 B), the f32 logits (16,384 B) and two scales (256 B granules).
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tcx.arena_size
// CHECK: tcx.library "quantize_fp8" {{.+}} {col_scaling = false, cols = 64 : i64, has_transpose = true, row_scaling = false, rows = 32 : i64}
// CHECK: tcx.library "quantize_fp8" {{.+}} {col_scaling = false, cols = 64 : i64, has_transpose = true, row_scaling = false, rows = 128 : i64}
// CHECK: tcx.matmul {{.+}} {compute_type = "fp8", fast_accum = true, k = 64 : i64, m = 32 : i64, n = 128 : i64, transpose_rhs = true}
// CHECK: tcx.library "cross_entropy_fwd_bwd"
// CHECK: tcx.library "quantize_fp8" {{.+}} {col_scaling = false, cols = 128 : i64, has_transpose = true, row_scaling = false, rows = 32 : i64}
// CHECK: tcx.matmul {{.+}} {compute_type = "fp8", k = 128 : i64, m = 32 : i64, n = 64 : i64, transpose_rhs = true}
// CHECK: tcx.matmul {{.+}} {compute_type = "fp8", k = 32 : i64, m = 128 : i64, n = 64 : i64, transpose_rhs = true}
// CHECK-NOT: tcx.alloc
// REPORT: memory plan of @train_step for sm_90
// REPORT: activations (peak) 37,376
func.func @train_step(%x: tensor<32x64xf32> {tc.name = "x"}, %w: tensor<128x64xf32> {tc.name = "w"}, %labels: tensor<32xi64> {tc.name = "labels"}) -> (tensor<f32> {tc.name = "loss"}, tensor<32x64xf32> {tc.name = "dx"}, tensor<128x64xf32> {tc.name = "dw"}) {
  %qx, %sx = tc.quantize %x {block = array<i64: 32, 64>} : tensor<32x64xf32> -> (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>)
  %qw, %sw = tc.quantize %w {block = array<i64: 128, 64>} : tensor<128x64xf32> -> (tensor<128x64xf8E4M3FN>, tensor<1x1xf32>)
  %y = tc.scaled_matmul %qx, %sx, %qw, %sw {transpose_rhs = true}
      : (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>, tensor<128x64xf8E4M3FN>, tensor<1x1xf32>) -> tensor<32x128xf32>
  %l = tc.cross_entropy %y, %labels : (tensor<32x128xf32>, tensor<32xi64>) -> tensor<f32>
  %one = tc.constant dense<1.0> : tensor<f32>
  %dy = tc.cross_entropy_grad %y, %labels, grad %one : (tensor<32x128xf32>, tensor<32xi64>, tensor<f32>) -> tensor<32x128xf32>
  %qd, %sd = tc.quantize %dy {block = array<i64: 32, 128>} : tensor<32x128xf32> -> (tensor<32x128xf8E5M2>, tensor<1x1xf32>)
  %dx = tc.scaled_matmul %qd, %sd, %qw, %sw
      : (tensor<32x128xf8E5M2>, tensor<1x1xf32>, tensor<128x64xf8E4M3FN>, tensor<1x1xf32>) -> tensor<32x64xf32>
  %dw = tc.scaled_matmul %qd, %sd, %qx, %sx {transpose_lhs = true}
      : (tensor<32x128xf8E5M2>, tensor<1x1xf32>, tensor<32x64xf8E4M3FN>, tensor<1x1xf32>) -> tensor<128x64xf32>
  return %l, %dx, %dw : tensor<f32>, tensor<32x64xf32>, tensor<128x64xf32>
}
