// RUN: split-file %s %t
// RUN: tc-opt %t/cases.mlir --split-input-file --tc-quantize-fp8 2>/dev/null | FileCheck %t/cases.mlir
// RUN: tc-opt %t/cases.mlir --split-input-file --tc-quantize-fp8 2>&1 >/dev/null | FileCheck %t/cases.mlir --check-prefix=REMARK
// RUN: not tc-opt %t/misaligned.mlir --tc-quantize-fp8 2>&1 | FileCheck %t/misaligned.mlir
// RUN: tc-opt %t/misaligned.mlir --tc-quantize-fp8=allow-fallback=true 2>/dev/null | FileCheck %t/misaligned.mlir --check-prefix=FALLBACK

//--- cases.mlir
// Tests that a marked rank-2 product becomes two E4M3 quantizations by
// their tensor amax (f32 scales) and a scaled product with the bf16 result,
// the marks kept on it.
// CHECK-LABEL: func.func @rank2
// CHECK-SAME: (%[[X:.+]]: tensor<32x64xbf16>, %[[W:.+]]: tensor<64x16xbf16>)
// CHECK-DAG: %[[QX:[a-z_0-9]+]], %[[SX:[a-z_0-9]+]] = tc.quantize %[[X]] {block = array<i64: 32, 64>, tc.precision = "f8E4M3FN", tc.precision_reason = "fp8: E4M3 copy of a product operand, tensor scaling by its current amax (saturating, round to nearest even)"} : tensor<32x64xbf16> -> (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>)
// CHECK-DAG: %[[QW:[a-z_0-9]+]], %[[SW:[a-z_0-9]+]] = tc.quantize %[[W]] {block = array<i64: 64, 16>{{.*}}} : tensor<64x16xbf16> -> (tensor<64x16xf8E4M3FN>, tensor<1x1xf32>)
// CHECK: %[[Y:.+]] = tc.scaled_matmul %[[QX]], %[[SX]], %[[QW]], %[[SW]] {tc.fp8 = "tensor", tc.fp8_role = "fprop", tc.precision = "fp8", tc.precision_reason = "linear layer fprop: f8E4M3FN x f8E4M3FN, tensor scaling, fp32 accumulation, bf16 output"} : (tensor<32x64xf8E4M3FN>, tensor<1x1xf32>, tensor<64x16xf8E4M3FN>, tensor<1x1xf32>) -> tensor<32x16xbf16>
// CHECK: return %[[Y]]
func.func @rank2(%x: tensor<32x64xbf16>, %w: tensor<64x16xbf16>) -> tensor<32x16xbf16> {
  %y = tc.matmul %x, %w {tc.fp8 = "tensor", tc.fp8_role = "fprop"} : tensor<32x64xbf16>, tensor<64x16xbf16> -> tensor<32x16xbf16>
  return %y : tensor<32x16xbf16>
}

// -----

// Tests that the bias add of a batched product moves before the reshape
// back to the batch shape, onto the [M, N] product (where the GPU's FP8 GEMM
// adds it), keeping its attributes.
// CHECK-LABEL: func.func @batched_bias
// CHECK: %[[Y2:.+]] = tc.scaled_matmul {{.*}} -> tensor<32x64xbf16>
// CHECK: %[[Z2:.+]] = tc.add %{{.+}}, %[[Y2]] {tc.precision = "bf16"} : tensor<64xbf16>, tensor<32x64xbf16> -> tensor<32x64xbf16>
// CHECK: %[[Z:.+]] = tc.reshape %[[Z2]] {{.*}} : tensor<32x64xbf16> to tensor<2x16x64xbf16>
// CHECK-NOT: tc.add
// CHECK: return %[[Z]]
func.func @batched_bias(%x: tensor<2x16x32xbf16>, %w: tensor<32x64xbf16>, %b: tensor<64xbf16>) -> tensor<2x16x64xbf16> {
  %y = tc.matmul %x, %w {tc.fp8 = "tensor", tc.fp8_role = "fprop"} : tensor<2x16x32xbf16>, tensor<32x64xbf16> -> tensor<2x16x64xbf16>
  %z = tc.add %b, %y {tc.precision = "bf16"} : tensor<64xbf16>, tensor<2x16x64xbf16> -> tensor<2x16x64xbf16>
  return %z : tensor<2x16x64xbf16>
}

// -----

// Tests a batched linear layer with its dgrad and wgrad (as tc-autodiff
// writes them): x, W and the incoming gradient g are each quantized once
// (g in E5M2) and shared by the three products; the weight's transpose
// folds into the flags; [2, 16, K] becomes [32, K] through one shared
// reshape, and the wgrad's batch sum is the product over the 32 rows.
// CHECK-LABEL: func.func @layer
// CHECK-SAME: (%[[X:.+]]: tensor<2x16x32xbf16>, %[[WB:.+]]: tensor<64x32xbf16>, %[[G:.+]]: tensor<2x16x64xbf16>)
// CHECK-DAG: %[[QW:[a-z_0-9]+]], %[[SW:[a-z_0-9]+]] = tc.quantize %[[WB]] {block = array<i64: 64, 32>{{.*}}} : tensor<64x32xbf16> -> (tensor<64x32xf8E4M3FN>, tensor<1x1xf32>)
// CHECK-DAG: %[[X2:.+]] = tc.reshape %[[X]] {{.*}} : tensor<2x16x32xbf16> to tensor<32x32xbf16>
// CHECK-DAG: %[[QX:[a-z_0-9]+]], %[[SX:[a-z_0-9]+]] = tc.quantize %[[X2]] {block = array<i64: 32, 32>{{.*}}} : tensor<32x32xbf16> -> (tensor<32x32xf8E4M3FN>, tensor<1x1xf32>)
// CHECK-DAG: %[[G2:.+]] = tc.reshape %[[G]] {{.*}} : tensor<2x16x64xbf16> to tensor<32x64xbf16>
// CHECK-DAG: %[[QG:[a-z_0-9]+]], %[[SG:[a-z_0-9]+]] = tc.quantize %[[G2]] {block = array<i64: 32, 64>, tc.precision = "f8E5M2", tc.precision_reason = "fp8: E5M2 copy of an incoming gradient, {{.*}}} : tensor<32x64xbf16> -> (tensor<32x64xf8E5M2>, tensor<1x1xf32>)
// CHECK-NOT: tc.transpose
// CHECK-NOT: tc.quantize
// CHECK: %[[Y2:.+]] = tc.scaled_matmul %[[QX]], %[[SX]], %[[QW]], %[[SW]] {tc.fp8 = "tensor", tc.fp8_role = "fprop"{{.*}}, transpose_rhs = true} : {{.*}} -> tensor<32x64xbf16>
// CHECK: %[[Y:.+]] = tc.reshape %[[Y2]] {{.*}} : tensor<32x64xbf16> to tensor<2x16x64xbf16>
// CHECK: %[[DX2:.+]] = tc.scaled_matmul %[[QG]], %[[SG]], %[[QW]], %[[SW]] {tc.fp8 = "tensor", tc.fp8_grad = 0 : i64, tc.fp8_role = "dgrad", tc.precision = "fp8", tc.precision_reason = "linear layer dgrad: f8E5M2 x f8E4M3FN, {{.*}}"} : {{.*}} -> tensor<32x32xbf16>
// CHECK: %[[DX:.+]] = tc.reshape %[[DX2]] {{.*}} : tensor<32x32xbf16> to tensor<2x16x32xbf16>
// CHECK: %[[DW:.+]] = tc.scaled_matmul %[[QX]], %[[SX]], %[[QG]], %[[SG]] {tc.fp8 = "tensor", tc.fp8_grad = 1 : i64, tc.fp8_role = "wgrad", {{.*}}transpose_lhs = true} : {{.*}} -> tensor<32x64xbf16>
// CHECK-NOT: tc.reduce_sum
// CHECK: return %[[Y]], %[[DX]], %[[DW]]
func.func @layer(%x: tensor<2x16x32xbf16>, %wb: tensor<64x32xbf16>, %g: tensor<2x16x64xbf16>)
    -> (tensor<2x16x64xbf16>, tensor<2x16x32xbf16>, tensor<32x64xbf16>) {
  %wt = tc.transpose %wb {permutation = array<i64: 1, 0>} : tensor<64x32xbf16> -> tensor<32x64xbf16>
  %y = tc.matmul %x, %wt {tc.fp8 = "tensor", tc.fp8_role = "fprop"} : tensor<2x16x32xbf16>, tensor<32x64xbf16> -> tensor<2x16x64xbf16>
  %dx = tc.matmul %g, %wt {transpose_rhs = true, tc.fp8 = "tensor", tc.fp8_role = "dgrad", tc.fp8_grad = 0 : i64}
      : tensor<2x16x64xbf16>, tensor<32x64xbf16> -> tensor<2x16x32xbf16>
  %dwb = tc.matmul %x, %g {transpose_lhs = true, tc.fp8 = "tensor", tc.fp8_role = "wgrad", tc.fp8_grad = 1 : i64}
      : tensor<2x16x32xbf16>, tensor<2x16x64xbf16> -> tensor<2x32x64xbf16>
  %s = tc.reduce_sum %dwb {axes = array<i64: 0>, keepdims = true} : tensor<2x32x64xbf16> -> tensor<1x32x64xbf16>
  %dw = tc.reshape %s : tensor<1x32x64xbf16> to tensor<32x64xbf16>
  return %y, %dx, %dw : tensor<2x16x64xbf16>, tensor<2x16x32xbf16>, tensor<32x64xbf16>
}

// -----

// Tests a wgrad read only transposed (the weight stored [N, K], as
// nn.Linear's: tc-autodiff's dW is (x^T g)^T): the product is computed in
// the weight's layout, g^T x, the operands swapped (g is now the lhs:
// fp8_grad 0) and no transpose of the product is left.
// CHECK-LABEL: func.func @wgrad_read_transposed
// CHECK-SAME: (%[[X:.+]]: tensor<32x32xbf16>, %[[G:.+]]: tensor<32x64xbf16>)
// CHECK-DAG: %[[QX:[a-z_0-9]+]], %[[SX:[a-z_0-9]+]] = tc.quantize %[[X]]
// CHECK-DAG: %[[QG:[a-z_0-9]+]], %[[SG:[a-z_0-9]+]] = tc.quantize %[[G]] {{.*}} -> (tensor<32x64xf8E5M2>, tensor<1x1xf32>)
// CHECK-NOT: tc.transpose
// CHECK: %[[DW:.+]] = tc.scaled_matmul %[[QG]], %[[SG]], %[[QX]], %[[SX]] {tc.fp8 = "tensor", tc.fp8_grad = 0 : i64, tc.fp8_role = "wgrad", tc.precision = "fp8", tc.precision_reason = "linear layer wgrad: f8E5M2 x f8E4M3FN, {{.*}}", transpose_lhs = true} : {{.*}} -> tensor<64x32xbf16>
// CHECK-NOT: tc.transpose
// CHECK: return %[[DW]]
func.func @wgrad_read_transposed(%x: tensor<32x32xbf16>, %g: tensor<32x64xbf16>) -> tensor<64x32xbf16> {
  %dwt = tc.matmul %x, %g {transpose_lhs = true, tc.fp8 = "tensor", tc.fp8_role = "wgrad", tc.fp8_grad = 1 : i64}
      : tensor<32x32xbf16>, tensor<32x64xbf16> -> tensor<32x64xbf16>
  %dw = tc.transpose %dwt {permutation = array<i64: 1, 0>} : tensor<32x64xbf16> -> tensor<64x32xbf16>
  return %dw : tensor<64x32xbf16>
}

// -----

// Tests row scaling: one f32 scale per row / column along the contraction
// axis (K of x [32, 64] and of W [16, 64] read transposed; the rows of a
// wgrad's lhs read transposed).
// CHECK-LABEL: func.func @row
// CHECK-DAG: tc.quantize %arg0 {block = array<i64: 1, 64>{{.*}}} : tensor<32x64xbf16> -> (tensor<32x64xf8E4M3FN>, tensor<32x1xf32>)
// CHECK-DAG: tc.quantize %arg1 {block = array<i64: 1, 64>{{.*}}} : tensor<16x64xbf16> -> (tensor<16x64xf8E4M3FN>, tensor<16x1xf32>)
// CHECK-DAG: tc.quantize %arg0 {block = array<i64: 32, 1>{{.*}}} : tensor<32x64xbf16> -> (tensor<32x64xf8E4M3FN>, tensor<1x64xf32>)
// CHECK-DAG: tc.quantize %arg2 {block = array<i64: 32, 1>{{.*}}} : tensor<32x16xbf16> -> (tensor<32x16xf8E5M2>, tensor<1x16xf32>)
func.func @row(%x: tensor<32x64xbf16>, %w: tensor<16x64xbf16>, %g: tensor<32x16xbf16>) -> (tensor<32x16xbf16>, tensor<64x16xbf16>) {
  %y = tc.matmul %x, %w {transpose_rhs = true, tc.fp8 = "row", tc.fp8_role = "fprop"} : tensor<32x64xbf16>, tensor<16x64xbf16> -> tensor<32x16xbf16>
  %dw = tc.matmul %x, %g {transpose_lhs = true, tc.fp8 = "row", tc.fp8_role = "wgrad", tc.fp8_grad = 1 : i64} : tensor<32x64xbf16>, tensor<32x16xbf16> -> tensor<64x16xbf16>
  return %y, %dw : tensor<32x16xbf16>, tensor<64x16xbf16>
}

// -----

// Tests mxfp8: 1x32 blocks along the contraction axis, E8M0 scales.
// CHECK-LABEL: func.func @mxfp8
// CHECK-DAG: tc.quantize %arg0 {block = array<i64: 1, 32>{{.*}}} : tensor<32x64xbf16> -> (tensor<32x64xf8E4M3FN>, tensor<32x2xf8E8M0FNU>)
// CHECK-DAG: tc.quantize %arg1 {block = array<i64: 32, 1>{{.*}}} : tensor<64x32xbf16> -> (tensor<64x32xf8E4M3FN>, tensor<2x32xf8E8M0FNU>)
// CHECK: tc.scaled_matmul {{.*}} -> tensor<32x32xbf16>
func.func @mxfp8(%x: tensor<32x64xbf16>, %w: tensor<64x32xbf16>) -> tensor<32x32xbf16> {
  %y = tc.matmul %x, %w {tc.fp8 = "mxfp8", tc.fp8_role = "fprop"} : tensor<32x64xbf16>, tensor<64x32xbf16> -> tensor<32x32xbf16>
  return %y : tensor<32x32xbf16>
}

// -----

// Tests that a marked product whose layout does not fold into rank 2 (two
// batched operands without a batch sum) stays a bf16 matmul, says why,
// and loses its marks.
// REMARK: remark: --fp8: the fprop product in @batched stays bf16: fp8 plan: this product's layout does not fold into a rank-2 FP8 product, kept in bf16
// CHECK-LABEL: func.func @batched
// CHECK: tc.matmul %arg0, %arg1 {tc.precision = "bf16", tc.precision_reason = "matmul: bf16 operands, fp32 accumulation; fp8 plan: this product's layout does not fold into a rank-2 FP8 product, kept in bf16"}
func.func @batched(%a: tensor<2x16x32xbf16>, %b: tensor<2x32x16xbf16>) -> tensor<2x16x16xbf16> {
  %y = tc.matmul %a, %b {tc.fp8 = "tensor", tc.fp8_role = "fprop"} : tensor<2x16x32xbf16>, tensor<2x32x16xbf16> -> tensor<2x16x16xbf16>
  return %y : tensor<2x16x16xbf16>
}

// -----

// Tests block128 (Transformer Engine's Float8BlockScaling): x and dY in
// 1x128 blocks along K with power-of-two f32 scales, W in 128x128 blocks
// shared by fprop and dgrad; wgrad contracts over the 128 rows, so it
// quantizes x and dY again in 128x1 blocks (the transposed operands' own
// 1x128 blocks, as DeepSeek-V3 does). A dim below 128 is one block (N = 64).
// CHECK-LABEL: func.func @block128
// CHECK-DAG: tc.quantize %{{.+}} {block = array<i64: 64, 128>, pow2_scale = true, tc.precision = "f8E4M3FN", tc.precision_reason = "fp8: E4M3 copy of a product operand, block128 scaling (128x128 blocks, fp32 power-of-two scales) by each block's current amax (saturating, round to nearest even)"} : tensor<64x256xbf16> -> (tensor<64x256xf8E4M3FN>, tensor<1x2xf32>)
// CHECK-DAG: tc.quantize %{{.+}} {block = array<i64: 1, 128>, pow2_scale = true, {{.*}}block128 scaling (1x128 blocks{{.*}}} : tensor<128x256xbf16> -> (tensor<128x256xf8E4M3FN>, tensor<128x2xf32>)
// CHECK-DAG: tc.quantize %{{.+}} {block = array<i64: 1, 64>, pow2_scale = true, {{.*}}} : tensor<128x64xbf16> -> (tensor<128x64xf8E5M2>, tensor<128x1xf32>)
// CHECK-DAG: tc.quantize %{{.+}} {block = array<i64: 128, 1>, pow2_scale = true, {{.*}}} : tensor<128x256xbf16> -> (tensor<128x256xf8E4M3FN>, tensor<1x256xf32>)
// CHECK-DAG: tc.quantize %{{.+}} {block = array<i64: 128, 1>, pow2_scale = true, {{.*}}} : tensor<128x64xbf16> -> (tensor<128x64xf8E5M2>, tensor<1x64xf32>)
// CHECK: tc.scaled_matmul {{.*}}tc.fp8_role = "fprop"{{.*}} : (tensor<128x256xf8E4M3FN>, tensor<128x2xf32>, tensor<64x256xf8E4M3FN>, tensor<1x2xf32>) -> tensor<128x64xbf16>
// CHECK: tc.scaled_matmul {{.*}}tc.fp8_role = "dgrad"{{.*}} : (tensor<128x64xf8E5M2>, tensor<128x1xf32>, tensor<64x256xf8E4M3FN>, tensor<1x2xf32>) -> tensor<128x256xbf16>
// CHECK: tc.scaled_matmul {{.*}}tc.fp8_role = "wgrad"{{.*}} : (tensor<128x256xf8E4M3FN>, tensor<1x256xf32>, tensor<128x64xf8E5M2>, tensor<1x64xf32>) -> tensor<256x64xbf16>
func.func @block128(%x: tensor<2x64x256xbf16>, %wb: tensor<64x256xbf16>, %g: tensor<2x64x64xbf16>)
    -> (tensor<2x64x64xbf16>, tensor<2x64x256xbf16>, tensor<256x64xbf16>) {
  %wt = tc.transpose %wb {permutation = array<i64: 1, 0>} : tensor<64x256xbf16> -> tensor<256x64xbf16>
  %y = tc.matmul %x, %wt {tc.fp8 = "block128", tc.fp8_role = "fprop"} : tensor<2x64x256xbf16>, tensor<256x64xbf16> -> tensor<2x64x64xbf16>
  %dx = tc.matmul %g, %wt {transpose_rhs = true, tc.fp8 = "block128", tc.fp8_role = "dgrad", tc.fp8_grad = 0 : i64}
      : tensor<2x64x64xbf16>, tensor<256x64xbf16> -> tensor<2x64x256xbf16>
  %dwb = tc.matmul %x, %g {transpose_lhs = true, tc.fp8 = "block128", tc.fp8_role = "wgrad", tc.fp8_grad = 1 : i64}
      : tensor<2x64x256xbf16>, tensor<2x64x64xbf16> -> tensor<2x256x64xbf16>
  %s = tc.reduce_sum %dwb {axes = array<i64: 0>, keepdims = true} : tensor<2x256x64xbf16> -> tensor<1x256x64xbf16>
  %dw = tc.reshape %s : tensor<1x256x64xbf16> to tensor<256x64xbf16>
  return %y, %dx, %dw : tensor<2x64x64xbf16>, tensor<2x64x256xbf16>, tensor<256x64xbf16>
}

//--- misaligned.mlir
// Tests that a wgrad over B*T = 7 rows breaks cuBLASLt's FP8 alignment: an
// error naming the layer, or with allow-fallback a bf16 matmul (its batch
// sum kept) with the fallback as its reason, while the fprop still is FP8.
// CHECK: error: {{.*}}--fp8: the wgrad of matmul 'fc' has K=7, N=16; cuBLASLt FP8 needs K and N multiples of 16 (K of a wgrad is batch x sequence): change the shape, keep the layer high precision (--keep-high-precision), or --allow-fallback to run it in bf16
// FALLBACK-LABEL: func.func @wgrad
// FALLBACK: tc.scaled_matmul {{.*}}tc.fp8_role = "fprop"
// FALLBACK: tc.matmul %{{.+}}, %{{.+}} {tc.precision = "bf16", tc.precision_reason = "matmul: bf16 operands, fp32 accumulation; fp8 fallback (--allow-fallback): K=7, N=16, cuBLASLt FP8 needs K and N multiples of 16", transpose_lhs = true} : tensor<1x7x32xbf16>, tensor<1x7x16xbf16> -> tensor<1x32x16xbf16>
// FALLBACK: tc.reduce_sum
// FALLBACK-NOT: tc.quantize
func.func @wgrad(%x: tensor<1x7x32xbf16>, %w: tensor<32x16xbf16>, %g: tensor<1x7x16xbf16>) -> (tensor<1x7x16xbf16>, tensor<32x16xbf16>) {
  %y = tc.matmul %x, %w {tc.fp8 = "tensor", tc.fp8_role = "fprop"} : tensor<1x7x32xbf16>, tensor<32x16xbf16> -> tensor<1x7x16xbf16> loc("fc")
  %dwb = tc.matmul %x, %g {transpose_lhs = true, tc.fp8 = "tensor", tc.fp8_role = "wgrad", tc.fp8_grad = 1 : i64}
      : tensor<1x7x32xbf16>, tensor<1x7x16xbf16> -> tensor<1x32x16xbf16> loc("fc")
  %s = tc.reduce_sum %dwb {axes = array<i64: 0>, keepdims = true} : tensor<1x32x16xbf16> -> tensor<1x32x16xbf16>
  %dw = tc.reshape %s : tensor<1x32x16xbf16> to tensor<32x16xbf16>
  return %y, %dw : tensor<1x7x16xbf16>, tensor<32x16xbf16>
}
