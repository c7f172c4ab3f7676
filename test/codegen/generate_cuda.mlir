// RUN: tc-opt %s --split-input-file --tcx-generate-cuda --verify-diagnostics | FileCheck %s

// Tests that every kernel body gets its CUDA C++ as a module-level
// tcx.cuda_source named like its extern "C" symbol, that kernels with equal
// code share one source, and that each launch gets the grid, block, n and
// meta codegen chose (a transpose: n = elements, meta = rank, dims, strides).
// CHECK: tcx.cuda_source @[[GATHER:tc_gather_[0-9a-f]+]] "{{.*}}extern \22C\22 __global__ {{.*}} [[GATHER]](
// CHECK: tcx.kernel @t_transpose_0 kind("transpose") attributes {cuda_kernel = @[[GATHER]]}
// CHECK: tcx.cuda_source @[[TANH:tc_fusion_[0-9a-f]+]] "
// CHECK: tcx.kernel @t_fusion_1 kind("fusion") attributes {cuda_kernel = @[[TANH]]}
// CHECK-NOT: tcx.cuda_source
// CHECK: tcx.kernel @t_fusion_2 kind("fusion") attributes {cuda_kernel = @[[TANH]]}
// CHECK-LABEL: func.func @t
// CHECK: tcx.launch @t_transpose_0 {{.+}} {block = array<i64: 256>, elements = 32 : i64, grid = array<i64: 1>, meta = array<i64: {{[0-9, ]+}}>, n = 32 : i64}
// CHECK: tcx.launch @t_fusion_1 {{.+}} {block = array<i64: 256>, elements = 32 : i64, grid = array<i64: 1>, meta = array<i64: 0>, n = 32 : i64}
// CHECK: tcx.launch @t_fusion_2 {{.+}} {block = array<i64: 256>, elements = 32 : i64, grid = array<i64: 1>, meta = array<i64: 0>, n = 32 : i64}
tcx.kernel @t_transpose_0 kind("transpose") {
^bb0(%a: tensor<4x8xf32>):
  %0 = tc.transpose %a {permutation = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  tcx.yield %0 : tensor<8x4xf32>
}
tcx.kernel @t_fusion_1 kind("fusion") {
^bb0(%a: tensor<8x4xf32>):
  %0 = tc.tanh %a : tensor<8x4xf32>
  tcx.yield %0 : tensor<8x4xf32>
}
tcx.kernel @t_fusion_2 kind("fusion") {
^bb0(%a: tensor<8x4xf32>):
  %0 = tc.tanh %a : tensor<8x4xf32>
  tcx.yield %0 : tensor<8x4xf32>
}
func.func @t(%x: !tcx.buffer<4x8xf32>, %y: !tcx.buffer<8x4xf32>, %z: !tcx.buffer<8x4xf32>, %w: !tcx.buffer<8x4xf32>) {
  tcx.launch @t_transpose_0 ins(%x : !tcx.buffer<4x8xf32>) outs(%y : !tcx.buffer<8x4xf32>) {elements = 32 : i64}
  tcx.launch @t_fusion_1 ins(%y : !tcx.buffer<8x4xf32>) outs(%z : !tcx.buffer<8x4xf32>) {elements = 32 : i64}
  tcx.launch @t_fusion_2 ins(%y : !tcx.buffer<8x4xf32>) outs(%w : !tcx.buffer<8x4xf32>) {elements = 32 : i64}
  return
}

// -----

// Tests that a transpose whose planes are at least 32 x 32 moves through
// shared-memory tiles: one block per 32 x 32 tile (n = tiles: 3 x 2 of the
// [70, 33] plane), reading the input's rows and writing the output's.
// CHECK: tcx.cuda_source @[[TILE:tc_transpose_[0-9a-f]+]] "{{.*}}__shared__ float tile_[32][32 + 1];{{.*}}tile_[j_][tx_] = in0[s_ + ai_ * 33u + bi_];{{.*}}out0[d_ + bi_ * 70u + ai_] = tile_[tx_][j_];
// CHECK: tcx.kernel @p_transpose_0 kind("transpose") attributes {cuda_kernel = @[[TILE]]}
// CHECK-LABEL: func.func @p
// CHECK: tcx.launch @p_transpose_0 {{.+}} {block = array<i64: 256>, elements = 2310 : i64, grid = array<i64: 6>, meta = array<i64: 32>, n = 6 : i64}
tcx.kernel @p_transpose_0 kind("transpose") {
^bb0(%a: tensor<70x33xf32>):
  %0 = tc.transpose %a {permutation = array<i64: 1, 0>} : tensor<70x33xf32> -> tensor<33x70xf32>
  tcx.yield %0 : tensor<33x70xf32>
}
func.func @p(%x: !tcx.buffer<70x33xf32>, %y: !tcx.buffer<33x70xf32>) {
  tcx.launch @p_transpose_0 ins(%x : !tcx.buffer<70x33xf32>) outs(%y : !tcx.buffer<33x70xf32>) {elements = 2310 : i64}
  return
}

// -----

// Tests that a kernel codegen has no template for (an integer matmul) keeps
// no cuda_kernel and its launch no launch parameters: the device program
// marks it as missing, and a runtime refuses the step.
// CHECK-NOT: tcx.cuda_source
// CHECK-LABEL: tcx.kernel @m_matmul_0 kind("matmul") {
// CHECK: tcx.launch @m_matmul_0 {{.+}} {elements = 4 : i64}
tcx.kernel @m_matmul_0 kind("matmul") {
^bb0(%a: tensor<2x2xi32>, %b: tensor<2x2xi32>):
  %0 = tc.matmul %a, %b : tensor<2x2xi32>, tensor<2x2xi32> -> tensor<2x2xi32>
  tcx.yield %0 : tensor<2x2xi32>
}
func.func @m(%a: !tcx.buffer<2x2xi32>, %b: !tcx.buffer<2x2xi32>, %c: !tcx.buffer<2x2xi32>) {
  tcx.launch @m_matmul_0 ins(%a, %b : !tcx.buffer<2x2xi32>, !tcx.buffer<2x2xi32>) outs(%c : !tcx.buffer<2x2xi32>) {elements = 4 : i64}
  return
}

// -----

// Tests that a body codegen cannot compile is an error on the op, naming the
// type (an FP8 result that is not a saturating cast).
tcx.kernel @c_fusion_0 kind("fusion") {
^bb0(%a: tensor<4xf8E4M3FN>):
  // expected-error @+1 {{'tc.neg' op CUDA codegen: unsupported element type in 'tensor<4xf8E4M3FN>'}}
  %0 = tc.neg %a : tensor<4xf8E4M3FN>
  tcx.yield %0 : tensor<4xf8E4M3FN>
}

// -----

// Tests that a non-saturating cast to FP8 has no kernel (PTX's FP8
// conversions saturate; the CPU reference would give NaN / inf).
tcx.kernel @n_fusion_0 kind("fusion") {
^bb0(%a: tensor<4xf32>):
  // expected-error @+1 {{'tc.cast' op CUDA codegen: unsupported element type in 'tensor<4xf8E4M3FN>'}}
  %0 = tc.cast %a {saturate = false} : tensor<4xf32> to tensor<4xf8E4M3FN>
  tcx.yield %0 : tensor<4xf8E4M3FN>
}

// -----

// Tests that a saturating cast to FP8 is generated with the FP8 conversions
// (kFp8Prelude, which kernels without FP8 values do not get) and stored as
// bytes.
// CHECK: tcx.cuda_source @[[F8:tc_fusion_[0-9a-f]+]] "{{.*}}cvt.rn.satfinite.e5m2x2.f32{{.*}}unsigned char* __restrict__ out0{{.*}}tc_round_e5m2((float)(x0)){{.*}}tc_f32_e5m2(v0)
// CHECK: tcx.kernel @s_fusion_0 kind("fusion") attributes {cuda_kernel = @[[F8]]}
tcx.kernel @s_fusion_0 kind("fusion") {
^bb0(%a: tensor<4xf32>):
  %0 = tc.cast %a : tensor<4xf32> to tensor<4xf8E5M2>
  tcx.yield %0 : tensor<4xf8E5M2>
}

// -----

// Tests that a fusion ending in column sums (tc-fuse-bias-grad's
// fusion-col-sums: a bias gradient) is one kernel over [rows, cols] in
// column tiles: 8 adjacent bf16 columns a lane (16-byte loads and stores),
// the stored values summed in f32, a partial a block in module memory, the
// last block of a tile adding the partials in order; [16384, 3072]: 12 tiles
// of 256 columns, 55 row chunks (660 blocks: five an SM by the launch bounds, one wave), the launch's n the elements.
// CHECK: tcx.cuda_source @[[CS:tc_fusion_[0-9a-f]+]] "{{.*}}__device__ float tc_cpart_[168960];{{.*}}__device__ unsigned int tc_cdone_[12];{{.*}}__launch_bounds__(256, 5){{.*}}const long long tile_ = blockIdx.x % 12, rpart_ = blockIdx.x / 12;{{.*}}TcVec<unsigned short, 8> a0 = {{.*}}cs_[k] += tc_bf16_f32(tc_f32_bf16(v1));{{.*}}tc_st_vec(reinterpret_cast<TcVec<unsigned short, 8>*>(out0 + b), o0);{{.*}}last_ = atomicAdd(&tc_cdone_[tile_], 1u) == 55 - 1;{{.*}}a_ = a_ + __ldcg(&tc_cpart_[p_ * 3072ll + col_]);{{.*}}out1[col_] = tc_f32_bf16(a_);
// CHECK: tcx.kernel @b_fusion_0 kind("fusion") attributes {cuda_kernel = @[[CS]]}
// CHECK-LABEL: func.func @b
// CHECK: tcx.launch @b_fusion_0 {{.+}} {block = array<i64: 256>, elements = 50331648 : i64, grid = array<i64: 660>, meta = array<i64: 0>, n = 50331648 : i64}
tcx.kernel @b_fusion_0 kind("fusion") {
^bb0(%a: tensor<16x1024x3072xbf16>, %g: tensor<16x1024x3072xbf16>):
  %0 = tc.erf %a : tensor<16x1024x3072xbf16>
  %1 = tc.mul %0, %g : tensor<16x1024x3072xbf16>, tensor<16x1024x3072xbf16> -> tensor<16x1024x3072xbf16>
  %2 = tc.reduce_sum %1 {axes = array<i64: 0, 1>, keepdims = true} : tensor<16x1024x3072xbf16> -> tensor<1x1x3072xbf16>
  tcx.yield %1, %2 : tensor<16x1024x3072xbf16>, tensor<1x1x3072xbf16>
}
func.func @b(%x: !tcx.buffer<16x1024x3072xbf16>, %g: !tcx.buffer<16x1024x3072xbf16>, %y: !tcx.buffer<16x1024x3072xbf16>, %s: !tcx.buffer<1x1x3072xbf16>) {
  tcx.launch @b_fusion_0 ins(%x, %g : !tcx.buffer<16x1024x3072xbf16>, !tcx.buffer<16x1024x3072xbf16>) outs(%y, %s : !tcx.buffer<16x1024x3072xbf16>, !tcx.buffer<1x1x3072xbf16>) {elements = 50331648 : i64}
  return
}
