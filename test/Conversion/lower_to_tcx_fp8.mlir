// RUN: tc-opt %s --split-input-file --tc-lower-to-tcx --verify-diagnostics | FileCheck %s

// Tests that an FP8 forward linear layer (x [M, K] @ W [N, K]^T, cuBLASLt's
// TN form) lowers to one quantize_fp8 call per operand, without transposed
// copies, and a compute_type "fp8" tcx.matmul reading q and scale_inv of
// each, with fast accumulation (a forward GEMM).
// CHECK-LABEL: func.func @linear_fwd
// CHECK: %[[QX:.+]] = tcx.alloc : <32x64xf8E4M3FN>
// CHECK: %[[SX:.+]] = tcx.alloc : <1x1xf32>
// CHECK: %[[AX:.+]] = tcx.alloc {kind = "scratch"} : <256xi8>
// CHECK: tcx.library "quantize_fp8" ins(%{{.+}} : !tcx.buffer<32x64xbf16>) outs(%[[QX]], %[[SX]], %[[AX]] : {{.+}}) {col_scaling = false, cols = 64 : i64, has_transpose = false, row_scaling = false, rows = 32 : i64}
// CHECK: %[[QW:.+]] = tcx.alloc : <128x64xf8E4M3FN>
// CHECK: %[[SW:.+]] = tcx.alloc : <1x1xf32>
// CHECK: tcx.library "quantize_fp8"
// CHECK: %[[Y:.+]] = tcx.alloc {kind = "output"} : <32x128xbf16>
// CHECK: tcx.matmul ins(%[[QX]], %[[QW]], %[[SX]], %[[SW]] : {{.+}}) outs(%[[Y]] : <32x128xbf16>) {compute_type = "fp8", fast_accum = true, k = 64 : i64, m = 32 : i64, n = 128 : i64, transpose_rhs = true}
func.func @linear_fwd(%x: tensor<32x64xbf16>, %w: tensor<128x64xbf16>) -> tensor<32x128xbf16> {
  %qx, %sx = tc.quantize %x {block = array<i64: 32, 64>} : tensor<32x64xbf16> -> (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>)
  %qw, %sw = tc.quantize %w {block = array<i64: 128, 64>} : tensor<128x64xbf16> -> (tensor<128x64xf8E4M3FN>, tensor<1x1xf32>)
  %y = tc.scaled_matmul %qx, %sx, %qw, %sw {transpose_rhs = true}
      : (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>, tensor<128x64xf8E4M3FN>, tensor<1x1xf32>) -> tensor<32x128xbf16>
  return %y : tensor<32x128xbf16>
}

// -----

// Tests that a column sum tc-fuse-bias-grad paired with a per-tensor
// quantize (the same tc.col_sum) is written by the quantize_fp8 call, an
// output before the scratch (256 B of amax, then the partials: 4 groups of 32
// rows x 16 columns x 4 B), and no kernel computes it; the keepdims result
// is that buffer.
// CHECK-LABEL: func.func @bias_grad
// CHECK: %[[C:.+]] = tcx.alloc {kind = "output"} : <1x1x16xbf16>
// CHECK: %[[A:.+]] = tcx.alloc {kind = "scratch"} : <512xi8>
// CHECK: tcx.library "quantize_fp8" ins(%{{.+}} : !tcx.buffer<128x16xbf16>) outs(%{{.+}}, %{{.+}}, %[[C]], %[[A]] : {{.+}}) {col_scaling = false, cols = 16 : i64, has_col_sum = true, has_transpose = false, row_scaling = false, rows = 128 : i64}
// CHECK-NOT: tcx.launch
// CHECK: return %{{.+}}, %{{.+}}, %[[C]]
func.func @bias_grad(%dy: tensor<4x32x16xbf16>) -> (tensor<128x16xf8E5M2>, tensor<1x1xf32>, tensor<1x1x16xbf16>) {
  %m = tc.reshape %dy : tensor<4x32x16xbf16> to tensor<128x16xbf16>
  %q, %s = tc.quantize %m {block = array<i64: 128, 16>, tc.col_sum = 0 : i64} : tensor<128x16xbf16> -> (tensor<128x16xf8E5M2>, tensor<1x1xf32>)
  %db = tc.reduce_sum %dy {axes = array<i64: 0, 1>, keepdims = true, tc.col_sum = 0 : i64} : tensor<4x32x16xbf16> -> tensor<1x1x16xbf16>
  return %q, %s, %db : tensor<128x16xf8E5M2>, tensor<1x1xf32>, tensor<1x1x16xbf16>
}

// -----

// Tests that the bias add marked as an FP8 GEMM's epilogue goes with the
// GEMM: the bias is its fifth input, the add's result its output.
// CHECK-LABEL: func.func @linear_bias
// CHECK: %[[Y:.+]] = tcx.alloc {kind = "output"} : <32x128xbf16>
// CHECK: tcx.matmul ins(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : {{.+}}, !tcx.buffer<128xbf16>) outs(%[[Y]] : <32x128xbf16>) {compute_type = "fp8", epilogue = "bias", fast_accum = true, k = 64 : i64, m = 32 : i64, n = 128 : i64, transpose_rhs = true}
// CHECK-NOT: tcx.launch
// CHECK: return
func.func @linear_bias(%x: tensor<32x64xbf16>, %w: tensor<128x64xbf16>, %b: tensor<128xbf16>) -> tensor<32x128xbf16> {
  %qx, %sx = tc.quantize %x {block = array<i64: 32, 64>} : tensor<32x64xbf16> -> (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>)
  %qw, %sw = tc.quantize %w {block = array<i64: 128, 64>} : tensor<128x64xbf16> -> (tensor<128x64xf8E4M3FN>, tensor<1x1xf32>)
  %y = tc.scaled_matmul %qx, %sx, %qw, %sw {tc.epilogue = "bias", transpose_rhs = true}
      : (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>, tensor<128x64xf8E4M3FN>, tensor<1x1xf32>) -> tensor<32x128xbf16>
  %z = tc.add %y, %b : tensor<32x128xbf16>, tensor<128xbf16> -> tensor<32x128xbf16>
  return %z : tensor<32x128xbf16>
}

// -----

// Tests the backward of an FP8 linear layer: dgrad (dY @ W) reads W's
// transposed copy [K, N] as cuBLASLt's rhs, wgrad (dY^T @ X) the copies of
// dY and X, so those three quantize calls write their copy too (an alloc of
// its own: the memory plan counts it; dY's is a backward buffer), and the
// backward GEMMs run without fast accumulation.
// CHECK-LABEL: func.func @linear_train
// CHECK: %[[QX:.+]] = tcx.alloc : <32x64xf8E4M3FN>
// CHECK: %[[SX:.+]] = tcx.alloc : <1x1xf32>
// CHECK: %[[XT:.+]] = tcx.alloc : <64x32xf8E4M3FN>
// CHECK: tcx.library "quantize_fp8" ins(%{{.+}} : !tcx.buffer<32x64xf32>) outs(%[[QX]], %[[SX]], %[[XT]], %{{.+}} : {{.+}}) {col_scaling = false, cols = 64 : i64, has_transpose = true, row_scaling = false, rows = 32 : i64}
// CHECK: %[[QW:.+]] = tcx.alloc : <128x64xf8E4M3FN>
// CHECK: %[[SW:.+]] = tcx.alloc : <1x1xf32>
// CHECK: %[[WT:.+]] = tcx.alloc : <64x128xf8E4M3FN>
// CHECK: tcx.library "quantize_fp8" {{.+}} {col_scaling = false, cols = 64 : i64, has_transpose = true, row_scaling = false, rows = 128 : i64}
// CHECK: tcx.matmul ins(%[[QX]], %[[QW]], %[[SX]], %[[SW]] : {{.+}}) {compute_type = "fp8", fast_accum = true, k = 64 : i64, m = 32 : i64, n = 128 : i64, transpose_rhs = true}
// CHECK: tcx.library "cross_entropy_bwd"
// CHECK: %[[QD:.+]] = tcx.alloc {kind = "backward"} : <32x128xf8E5M2>
// CHECK: %[[SD:.+]] = tcx.alloc {kind = "backward"} : <1x1xf32>
// CHECK: %[[DT:.+]] = tcx.alloc {kind = "backward"} : <128x32xf8E5M2>
// CHECK: tcx.library "quantize_fp8" {{.+}} {col_scaling = false, cols = 128 : i64, has_transpose = true, row_scaling = false, rows = 32 : i64}
// CHECK: tcx.matmul ins(%[[QD]], %[[WT]], %[[SD]], %[[SW]] : {{.+}}) outs(%{{.+}} : <32x64xf32>) {compute_type = "fp8", k = 128 : i64, m = 32 : i64, n = 64 : i64, transpose_rhs = true}
// CHECK: tcx.matmul ins(%[[DT]], %[[XT]], %[[SD]], %[[SX]] : {{.+}}) outs(%{{.+}} : <128x64xf32>) {compute_type = "fp8", k = 32 : i64, m = 128 : i64, n = 64 : i64, transpose_rhs = true}
func.func @linear_train(%x: tensor<32x64xf32>, %w: tensor<128x64xf32>, %labels: tensor<32xi64>) -> (tensor<f32>, tensor<32x64xf32>, tensor<128x64xf32>) {
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

// -----

// Tests that per-row scaling (block [1, ..., 1, cols]) of a rank-3 tensor is
// one quantize_fp8 call over its [rows, cols] view with row_scaling and
// one f32 amax per row in the scratch (32 rows: 128 bytes, one granule).
// CHECK-LABEL: func.func @per_row
// CHECK: tcx.alloc {kind = "output"} : <4x8x32xf8E5M2>
// CHECK: tcx.alloc {kind = "output"} : <4x8x1xf32>
// CHECK: tcx.alloc {kind = "scratch"} : <256xi8>
// CHECK: tcx.library "quantize_fp8" {{.+}} {col_scaling = false, cols = 32 : i64, has_transpose = false, row_scaling = true, rows = 32 : i64}
func.func @per_row(%x: tensor<4x8x32xbf16>) -> (tensor<4x8x32xf8E5M2>, tensor<4x8x1xf32>) {
  %q, %s = tc.quantize %x {block = array<i64: 1, 1, 32>} : tensor<4x8x32xbf16> -> (tensor<4x8x32xf8E5M2>, tensor<4x8x1xf32>)
  return %q, %s : tensor<4x8x32xf8E5M2>, tensor<4x8x1xf32>
}

// -----

// Tests that a contraction that is not a multiple of 16 is an error naming
// the op (cuBLASLt's FP8 leading dimensions), not a silent fallback.
func.func @k_unaligned(%x: tensor<32x40xbf16>, %w: tensor<128x40xbf16>) -> tensor<32x128xbf16> {
  %qx, %sx = tc.quantize %x {block = array<i64: 32, 40>} : tensor<32x40xbf16> -> (tensor<32x40xf8E4M3FN>, tensor<1x1xf32>)
  %qw, %sw = tc.quantize %w {block = array<i64: 128, 40>} : tensor<128x40xbf16> -> (tensor<128x40xf8E4M3FN>, tensor<1x1xf32>)
  // expected-error @+1 {{'tc.scaled_matmul' op GPU lowering: K = 40 is not a multiple of 16 (cuBLASLt's FP8 GEMMs need 16-byte leading dimensions): the precision plan should have kept this matmul in bf16}}
  %y = tc.scaled_matmul %qx, %sx, %qw, %sw {transpose_rhs = true}
      : (tensor<32x40xf8E4M3FN>, tensor<1x1xf32>, tensor<128x40xf8E4M3FN>, tensor<1x1xf32>) -> tensor<32x128xbf16>
  return %y : tensor<32x128xbf16>
}

// -----

// Tests that an output width that is not a multiple of 16 is refused too.
func.func @n_unaligned(%qx: tensor<32x64xf8E4M3FN>, %sx: tensor<1x1xf32>, %qw: tensor<24x64xf8E4M3FN>, %sw: tensor<1x1xf32>) -> tensor<32x24xbf16> {
  // expected-error @+1 {{N = 24 is not a multiple of 16}}
  %y = tc.scaled_matmul %qx, %sx, %qw, %sw {transpose_rhs = true}
      : (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>, tensor<24x64xf8E4M3FN>, tensor<1x1xf32>) -> tensor<32x24xbf16>
  return %y : tensor<32x24xbf16>
}

// -----

// Tests that E5M2 x E5M2 (no cuBLASLt kernel) is an error naming the op.
func.func @e5m2_both(%a: tensor<32x64xf8E5M2>, %sa: tensor<1x1xf32>, %b: tensor<32x64xf8E5M2>, %sb: tensor<1x1xf32>) -> tensor<32x32xbf16> {
  // expected-error @+1 {{cuBLASLt has no f8E5M2 x f8E5M2 GEMM}}
  %y = tc.scaled_matmul %a, %sa, %b, %sb {transpose_rhs = true}
      : (tensor<32x64xf8E5M2>, tensor<1x1xf32>, tensor<32x64xf8E5M2>, tensor<1x1xf32>) -> tensor<32x32xbf16>
  return %y : tensor<32x32xbf16>
}

// -----

// Tests that an operand read transposed must come from a per-tensor
// tc.quantize (which writes the copy): a function argument has none.
func.func @no_copy(%a: tensor<32x64xf8E4M3FN>, %sa: tensor<1x1xf32>, %b: tensor<64x32xf8E4M3FN>, %sb: tensor<1x1xf32>) -> tensor<32x32xbf16> {
  // expected-error @+1 {{rhs is read transposed (cuBLASLt's FP8 GEMMs are TN only), and only a rank-2 per-tensor or per-column tc.quantize writes the transposed copy}}
  %y = tc.scaled_matmul %a, %sa, %b, %sb
      : (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>, tensor<64x32xf8E4M3FN>, tensor<1x1xf32>) -> tensor<32x32xbf16>
  return %y : tensor<32x32xbf16>
}

// -----

// Tests mxfp8 (E8M0 scales): a forward x (1x32) @ W (1x32)^T quantizes each
// operand with one quantize_mx call (no copy), whose scale_gemm (the
// VEC32_UE8M0 layout: 128 x 4 padded bytes here) the tcx.matmul reads with
// lhs_blocks = rhs_blocks = 3 and no fast accumulation; a dgrad dY (1x32) @
// W reads W quantized in 32x1 blocks through its transposed copy, with the
// scales of the copy's layout.
// CHECK-LABEL: func.func @mx_linear
// CHECK: %[[QX:.+]] = tcx.alloc : <32x64xf8E4M3FN>
// CHECK: %[[SX:.+]] = tcx.alloc {tcx.fp8_scales} : <32x2xf8E8M0FNU>
// CHECK: %[[GX:.+]] = tcx.alloc {tcx.fp8_scales} : <512xf8E8M0FNU>
// CHECK: tcx.library "quantize_mx" ins(%{{.+}} : !tcx.buffer<32x64xbf16>) outs(%[[QX]], %[[SX]], %[[GX]] : {{.+}}) {along_rows = false, cols = 64 : i64, has_transpose = false, rows = 32 : i64}
// CHECK: %[[QW:.+]] = tcx.alloc : <128x64xf8E4M3FN>
// CHECK: %[[GW:.+]] = tcx.alloc {tcx.fp8_scales} : <512xf8E8M0FNU>
// CHECK: tcx.library "quantize_mx" {{.+}} {along_rows = false, cols = 64 : i64, has_transpose = false, rows = 128 : i64}
// CHECK: %[[QWR:.+]] = tcx.alloc : <128x64xf8E4M3FN>
// CHECK: %[[SWR:.+]] = tcx.alloc {tcx.fp8_scales} : <4x64xf8E8M0FNU>
// CHECK: %[[WT:.+]] = tcx.alloc : <64x128xf8E4M3FN>
// CHECK: %[[GWR:.+]] = tcx.alloc {tcx.fp8_scales} : <512xf8E8M0FNU>
// CHECK: tcx.library "quantize_mx" {{.+}} outs(%[[QWR]], %[[SWR]], %[[WT]], %[[GWR]] : {{.+}}) {along_rows = true, cols = 64 : i64, has_transpose = true, rows = 128 : i64}
// CHECK: tcx.matmul ins(%[[QX]], %[[QW]], %[[GX]], %[[GW]] : {{.+}}) {compute_type = "fp8", k = 64 : i64, lhs_blocks = 3 : i64, m = 32 : i64, n = 128 : i64, rhs_blocks = 3 : i64, transpose_rhs = true}
// CHECK: tcx.matmul ins(%{{.+}}, %[[WT]], %{{.+}}, %[[GWR]] : {{.+}}) {compute_type = "fp8", k = 128 : i64, lhs_blocks = 3 : i64, m = 32 : i64, n = 64 : i64, rhs_blocks = 3 : i64, transpose_rhs = true}
func.func @mx_linear(%x: tensor<32x64xbf16>, %w: tensor<128x64xbf16>, %dy: tensor<32x128xbf16>) -> (tensor<32x128xbf16>, tensor<32x64xbf16>) {
  %qx, %sx = tc.quantize %x {block = array<i64: 1, 32>} : tensor<32x64xbf16> -> (tensor<32x64xf8E4M3FN>, tensor<32x2xf8E8M0FNU>)
  %qw, %sw = tc.quantize %w {block = array<i64: 1, 32>} : tensor<128x64xbf16> -> (tensor<128x64xf8E4M3FN>, tensor<128x2xf8E8M0FNU>)
  %qwr, %swr = tc.quantize %w {block = array<i64: 32, 1>} : tensor<128x64xbf16> -> (tensor<128x64xf8E4M3FN>, tensor<4x64xf8E8M0FNU>)
  %qd, %sd = tc.quantize %dy {block = array<i64: 1, 32>} : tensor<32x128xbf16> -> (tensor<32x128xf8E5M2>, tensor<32x4xf8E8M0FNU>)
  %y = tc.scaled_matmul %qx, %sx, %qw, %sw {transpose_rhs = true}
      : (tensor<32x64xf8E4M3FN>, tensor<32x2xf8E8M0FNU>, tensor<128x64xf8E4M3FN>, tensor<128x2xf8E8M0FNU>) -> tensor<32x128xbf16>
  %dx = tc.scaled_matmul %qd, %sd, %qwr, %swr
      : (tensor<32x128xf8E5M2>, tensor<32x4xf8E8M0FNU>, tensor<128x64xf8E4M3FN>, tensor<4x64xf8E8M0FNU>) -> tensor<32x64xbf16>
  return %y, %dx : tensor<32x128xbf16>, tensor<32x64xbf16>
}

// -----

// Tests that an mxfp8 operand whose blocks do not run along the product's
// K is refused (W's 1x32 blocks run along K of the forward, not of dgrad).
func.func @mx_wrong_axis(%w: tensor<128x64xbf16>, %dy: tensor<32x128xbf16>) -> tensor<32x64xbf16> {
  %qw, %sw = tc.quantize %w {block = array<i64: 1, 32>} : tensor<128x64xbf16> -> (tensor<128x64xf8E4M3FN>, tensor<128x2xf8E8M0FNU>)
  %qd, %sd = tc.quantize %dy {block = array<i64: 1, 32>} : tensor<32x128xbf16> -> (tensor<32x128xf8E5M2>, tensor<32x4xf8E8M0FNU>)
  // expected-error @+1 {{'tc.scaled_matmul' op GPU lowering: an mxfp8 operand's 1x32 blocks do not run along the product's K (quantize it along the axis the product contracts)}}
  %dx = tc.scaled_matmul %qd, %sd, %qw, %sw
      : (tensor<32x128xf8E5M2>, tensor<32x4xf8E8M0FNU>, tensor<128x64xf8E4M3FN>, tensor<128x2xf8E8M0FNU>) -> tensor<32x64xbf16>
  return %dx : tensor<32x64xbf16>
}

// -----

// Tests that E8M0 scales in blocks other than 1x32 / 32x1 have no kernel.
func.func @mx_blocks(%x: tensor<64x64xbf16>) -> (tensor<64x64xf8E4M3FN>, tensor<2x2xf8E8M0FNU>) {
  // expected-error @+1 {{'tc.quantize' op GPU lowering: the GPU's MXFP8 kernel quantizes rank-2 tensors in 1x32 or 32x1 blocks (f8E8M0FNU scales), not 32x32}}
  %q, %s = tc.quantize %x {block = array<i64: 32, 32>} : tensor<64x64xbf16> -> (tensor<64x64xf8E4M3FN>, tensor<2x2xf8E8M0FNU>)
  return %q, %s : tensor<64x64xf8E4M3FN>, tensor<2x2xf8E8M0FNU>
}

// -----

// Tests that 2-D blocks other than a row are refused with the forms that exist.
func.func @blocks_2d(%x: tensor<256x256xbf16>) -> (tensor<256x256xf8E4M3FN>, tensor<2x2xf32>) {
  // expected-error @+1 {{the GPU quantizes per tensor, per row (block [1, ..., 1, 256]) or per column of a matrix (block [256, 1]); other blocks have no kernel yet}}
  %q, %s = tc.quantize %x {block = array<i64: 128, 128>} : tensor<256x256xbf16> -> (tensor<256x256xf8E4M3FN>, tensor<2x2xf32>)
  return %q, %s : tensor<256x256xf8E4M3FN>, tensor<2x2xf32>
}

// -----

// Tests per-row scaling of a forward GEMM (x and W quantized by rows, scale
// grids [M, 1] and [N, 1]): cuBLASLt's outer-vector scaling, without fast
// accumulation (cuBLASLt has no such algorithm with it).
// CHECK-LABEL: func.func @linear_rows
// CHECK: tcx.library "quantize_fp8" {{.+}} {col_scaling = false, cols = 64 : i64, has_transpose = false, row_scaling = true, rows = 32 : i64}
// CHECK: tcx.matmul ins({{.+}} : {{.+}}, !tcx.buffer<32x1xf32>, !tcx.buffer<128x1xf32>) outs(%{{.+}} : <32x128xbf16>) {compute_type = "fp8", k = 64 : i64, m = 32 : i64, n = 128 : i64, transpose_rhs = true}
func.func @linear_rows(%x: tensor<32x64xbf16>, %w: tensor<128x64xbf16>) -> tensor<32x128xbf16> {
  %qx, %sx = tc.quantize %x {block = array<i64: 1, 64>} : tensor<32x64xbf16> -> (tensor<32x64xf8E4M3FN>, tensor<32x1xf32>)
  %qw, %sw = tc.quantize %w {block = array<i64: 1, 64>} : tensor<128x64xbf16> -> (tensor<128x64xf8E4M3FN>, tensor<128x1xf32>)
  %y = tc.scaled_matmul %qx, %sx, %qw, %sw {transpose_rhs = true}
      : (tensor<32x64xf8E4M3FN>, tensor<32x1xf32>, tensor<128x64xf8E4M3FN>, tensor<128x1xf32>) -> tensor<32x128xbf16>
  return %y : tensor<32x128xbf16>
}

// -----

// Tests a row-scaled wgrad (dW [N, K] = dY^T @ X, as tc-quantize-fp8 plans
// it): dY and X are quantized per column (scale grids [1, N] and [1, K]),
// and those quantize calls write the transposed copies, each row of which
// has its scale: the GEMM reads the copies.
// CHECK-LABEL: func.func @wgrad_rows
// CHECK: %[[DT:.+]] = tcx.alloc : <128x32xf8E5M2>
// CHECK: tcx.library "quantize_fp8" {{.+}} outs(%{{.+}}, %{{.+}}, %[[DT]], %{{.+}} : {{.+}}) {col_scaling = true, cols = 128 : i64, has_transpose = true, row_scaling = false, rows = 32 : i64}
// CHECK: %[[XT:.+]] = tcx.alloc : <64x32xf8E4M3FN>
// CHECK: tcx.library "quantize_fp8" {{.+}} outs(%{{.+}}, %{{.+}}, %[[XT]], %{{.+}} : {{.+}}) {col_scaling = true, cols = 64 : i64, has_transpose = true, row_scaling = false, rows = 32 : i64}
// CHECK: tcx.matmul ins(%[[DT]], %[[XT]], {{.+}} : {{.+}}, !tcx.buffer<1x128xf32>, !tcx.buffer<1x64xf32>) outs(%{{.+}} : <128x64xbf16>) {compute_type = "fp8", k = 32 : i64, m = 128 : i64, n = 64 : i64, transpose_rhs = true}
func.func @wgrad_rows(%dy: tensor<32x128xbf16>, %x: tensor<32x64xbf16>) -> tensor<128x64xbf16> {
  %qd, %sd = tc.quantize %dy {block = array<i64: 32, 1>} : tensor<32x128xbf16> -> (tensor<32x128xf8E5M2>, tensor<1x128xf32>)
  %qx, %sx = tc.quantize %x {block = array<i64: 32, 1>} : tensor<32x64xbf16> -> (tensor<32x64xf8E4M3FN>, tensor<1x64xf32>)
  %dw = tc.scaled_matmul %qd, %sd, %qx, %sx {transpose_lhs = true}
      : (tensor<32x128xf8E5M2>, tensor<1x128xf32>, tensor<32x64xf8E4M3FN>, tensor<1x64xf32>) -> tensor<128x64xbf16>
  return %dw : tensor<128x64xbf16>
}

// -----

// Tests that per-row scales of an operand read transposed are refused (its
// copy would need per-column scales: a grid [1, M]).
func.func @rows_transposed(%a: tensor<64x32xf8E4M3FN>, %sa: tensor<64x1xf32>, %b: tensor<128x64xf8E4M3FN>, %sb: tensor<128x1xf32>) -> tensor<32x128xbf16> {
  // expected-error @+1 {{the GPU's FP8 GEMM takes one scale per operand, or one per row of lhs [M, K] and rhs [N, K] as it reads them (outer-vector scaling), not tensor<64x1xf32> and tensor<128x1xf32> scales}}
  %y = tc.scaled_matmul %a, %sa, %b, %sb {transpose_lhs = true, transpose_rhs = true}
      : (tensor<64x32xf8E4M3FN>, tensor<64x1xf32>, tensor<128x64xf8E4M3FN>, tensor<128x1xf32>) -> tensor<32x128xbf16>
  return %y : tensor<32x128xbf16>
}


// -----

// Tests that a given amax must be of exactly the elements quantized
// (fp8AmaxCoverage): a layer norm's amax (of its result 0) read by the
// quantize of another tensor would saturate what exceeds it.
func.func @amax_of_another(%x: tensor<4x8xbf16>, %z: tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xf8E4M3FN>, tensor<1x1xf32>) {
  %y, %m = tc.layer_norm %x {axis = 1 : i64, epsilon = 1.0e-05 : f64}
      : (tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<f32>)
  // expected-error @+1 {{'tc.quantize' op GPU lowering: its amax is the amax of result 0 of a 'tc.layer_norm', which its input (through reshapes and transposes) is not}}
  %q, %s = tc.quantize %z amax %m : tensor<f32> {block = array<i64: 4, 8>} : tensor<4x8xbf16> -> (tensor<4x8xf8E4M3FN>, tensor<1x1xf32>)
  return %y, %q, %s : tensor<4x8xbf16>, tensor<4x8xf8E4M3FN>, tensor<1x1xf32>
}

// -----

// Tests that an attention_grad's amax of dvalue (amax_of = 4) cannot be the
// amax of dquery's quantize.
func.func @grad_amax_of_another(%qt: tensor<2x4x16x8xbf16>, %kt: tensor<2x4x16x8xbf16>, %vt: tensor<2x4x16x8xbf16>,
                                %o: tensor<2x4x16x8xbf16>, %lse: tensor<2x4x16xf32>, %gt: tensor<2x4x16x8xbf16>)
    -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<32x32xf8E5M2>, tensor<1x1xf32>) {
  %dq, %dk, %dv, %amax = tc.attention_grad %qt, %kt, %vt, %o, %lse, %gt {scale = 0.35 : f64, causal = true, amax_of = 4 : i64}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>,
         tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<f32>)
  %dqt = tc.transpose %dq {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %dqm = tc.reshape %dqt : tensor<2x16x4x8xbf16> to tensor<32x32xbf16>
  // expected-error @+1 {{its amax is that of the gradients amax_of = 4 names (dvalue) of a 'tc.attention_grad', but its input (through reshapes and transposes) is dquery: the amax must be of exactly the elements quantized}}
  %q, %s = tc.quantize %dqm amax %amax : tensor<f32> {block = array<i64: 32, 32>} : tensor<32x32xbf16> -> (tensor<32x32xf8E5M2>, tensor<1x1xf32>)
  return %dk, %dv, %q, %s : tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<32x32xf8E5M2>, tensor<1x1xf32>
}
