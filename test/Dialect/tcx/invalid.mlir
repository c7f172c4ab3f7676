// RUN: tc-opt %s --split-input-file --verify-diagnostics

// Tests that a buffer holds integers or floats only.
// expected-error @+1 {{buffer element type must be an integer or float type, got 'complex<f32>'}}
func.func @elt_type(%x: !tcx.buffer<4xcomplex<f32>>) {
  return
}

// -----

// Tests that a view must fit inside its source, naming both sizes.
func.func @view_oob(%a: !tcx.buffer<1024xi8>) {
  // expected-error @+1 {{view of 512 bytes at offset 768 does not fit in the source's 1024 bytes}}
  %v = tcx.view %a[768] : !tcx.buffer<1024xi8> -> !tcx.buffer<128xf32>
  return
}

// -----

// Tests that a view offset is aligned to the result's element size.
func.func @view_align(%a: !tcx.buffer<1024xi8>) {
  // expected-error @+1 {{offset 6 is not a multiple of the result element size (4 bytes of 'f32')}}
  %v = tcx.view %a[6] : !tcx.buffer<1024xi8> -> !tcx.buffer<8xf32>
  return
}

// -----

// Tests that the arena is a 1-D byte buffer.
func.func @arena_type() {
  // expected-error @+1 {{the arena is a 1-D buffer of i8, got '!tcx.buffer<16xf32>'}}
  %a = tcx.arena : !tcx.buffer<16xf32>
  return
}

// -----

// Tests that parameter kinds are checked.
func.func @param_kind() {
  // expected-error @+1 {{kind "weights" of 'w' is not one of "parameter", "buffer", "optimizer_state", "gradient", "shadow"}}
  %w = tcx.param "w" {kind = "weights"} : !tcx.buffer<4xf32>
  return
}

// -----

// Tests that alloc kinds are checked.
func.func @alloc_kind() {
  // expected-error @+1 {{kind "tmp" is not one of "activation", "backward", "scratch", "output"}}
  %w = tcx.alloc {kind = "tmp"} : !tcx.buffer<4xf32>
  return
}

// -----

// Tests that a constant matches its buffer.
func.func @const_type() {
  // expected-error @+1 {{value of type 'tensor<4xf32>' does not match the buffer '!tcx.buffer<4xf16>'}}
  %c = tcx.const dense<1.0> : tensor<4xf32> -> !tcx.buffer<4xf16>
  return
}

// -----

// Tests that a launch names an existing kernel.
func.func @no_kernel(%a: !tcx.buffer<4xf32>) {
  // expected-error @+1 {{kernel @missing is not a tcx.kernel in this module}}
  tcx.launch @missing ins(%a : !tcx.buffer<4xf32>) outs(%a : !tcx.buffer<4xf32>) {elements = 4 : i64}
  return
}

// -----

// Tests that launch buffers match the kernel's tensors, naming both.
tcx.kernel @exp kind("elementwise") {
^bb0(%a: tensor<4xf32>):
  %0 = tc.exp %a : tensor<4xf32>
  tcx.yield %0 : tensor<4xf32>
}
func.func @launch_types(%a: !tcx.buffer<4xf32>, %b: !tcx.buffer<8xf32>) {
  // expected-error @+1 {{output #0 is '!tcx.buffer<8xf32>' but @exp expects 'tensor<4xf32>'}}
  tcx.launch @exp ins(%a : !tcx.buffer<4xf32>) outs(%b : !tcx.buffer<8xf32>) {elements = 8 : i64}
  return
}

// -----

// Tests that launch arity matches the kernel.
tcx.kernel @exp kind("elementwise") {
^bb0(%a: tensor<4xf32>):
  %0 = tc.exp %a : tensor<4xf32>
  tcx.yield %0 : tensor<4xf32>
}
func.func @launch_arity(%a: !tcx.buffer<4xf32>) {
  // expected-error @+1 {{@exp takes 1 inputs, the launch gives 2}}
  tcx.launch @exp ins(%a, %a : !tcx.buffer<4xf32>, !tcx.buffer<4xf32>) outs(%a : !tcx.buffer<4xf32>) {elements = 4 : i64}
  return
}

// -----

// Tests that grid and block come together.
tcx.kernel @exp kind("elementwise") {
^bb0(%a: tensor<4xf32>):
  %0 = tc.exp %a : tensor<4xf32>
  tcx.yield %0 : tensor<4xf32>
}
func.func @launch_grid(%a: !tcx.buffer<4xf32>) {
  // expected-error @+1 {{grid and block are given together or not at all}}
  tcx.launch @exp ins(%a : !tcx.buffer<4xf32>) outs(%a : !tcx.buffer<4xf32>) {elements = 4 : i64, grid = array<i64: 1>}
  return
}

// -----

// Tests that a kernel body ends in tcx.yield.
// expected-error @+1 {{'tcx.kernel' op @k yields nothing}}
tcx.kernel @k kind("elementwise") {
^bb0(%a: tensor<4xf32>):
  tcx.yield
}

// -----

// Tests that unknown library kernels are rejected with the known names.
func.func @lib_name(%a: !tcx.buffer<4xf32>) {
  // expected-error @+1 {{unknown library kernel "flash_attention" (known: softmax_fwd,}}
  tcx.library "flash_attention" ins(%a : !tcx.buffer<4xf32>) outs(%a : !tcx.buffer<4xf32>)
  return
}

// -----

// Tests that library arity is checked.
func.func @lib_arity(%a: !tcx.buffer<4x8xf32>) {
  // expected-error @+1 {{"softmax_fwd" takes 1 outputs, got 2}}
  tcx.library "softmax_fwd" ins(%a : !tcx.buffer<4x8xf32>) outs(%a, %a : !tcx.buffer<4x8xf32>, !tcx.buffer<4x8xf32>) {rows = 4 : i64, cols = 8 : i64}
  return
}

// -----

// Tests that rows x cols must match the input.
func.func @lib_rows(%a: !tcx.buffer<4x8xf32>) {
  // expected-error @+1 {{"softmax_fwd" input '!tcx.buffer<4x8xf32>' has 32 elements, rows x cols is 8 x 8}}
  tcx.library "softmax_fwd" ins(%a : !tcx.buffer<4x8xf32>) outs(%a : !tcx.buffer<4x8xf32>) {rows = 8 : i64, cols = 8 : i64}
  return
}

// -----

// Tests that a library call's required attributes are present.
func.func @lib_attr(%a: !tcx.buffer<4x8xf32>) {
  // expected-error @+1 {{"softmax_fwd" needs the integer attribute 'cols'}}
  tcx.library "softmax_fwd" ins(%a : !tcx.buffer<4x8xf32>) outs(%a : !tcx.buffer<4x8xf32>) {rows = 4 : i64}
  return
}

// -----

// Tests that a scratch buffer is large enough for the launcher.
func.func @lib_scratch(%l: !tcx.buffer<32x256xf32>, %y: !tcx.buffer<32xi64>, %loss: !tcx.buffer<f32>, %s: !tcx.buffer<16xi8>) {
  // expected-error @+1 {{"cross_entropy_fwd" scratch '!tcx.buffer<16xi8>' holds 16 bytes, the launcher needs 384}}
  tcx.library "cross_entropy_fwd" ins(%l, %y : !tcx.buffer<32x256xf32>, !tcx.buffer<32xi64>) outs(%loss, %s : !tcx.buffer<f32>, !tcx.buffer<16xi8>) {rows = 32 : i64, cols = 256 : i64}
  return
}

// -----

// Tests that has_* attributes say which optional operands a call gives.
func.func @lib_has_weight(%x: !tcx.buffer<4x8xf32>, %g: !tcx.buffer<8xf32>) {
  // expected-error @+1 {{"layer_norm_fwd" takes 3 inputs (has_weight = 1, has_bias = 1), got 2}}
  tcx.library "layer_norm_fwd" ins(%x, %g : !tcx.buffer<4x8xf32>, !tcx.buffer<8xf32>) outs(%x : !tcx.buffer<4x8xf32>) {rows = 4 : i64, cols = 8 : i64, has_weight = true, has_bias = true}
  return
}

// -----

// Tests that an attribute of the wrong kind is named with the kind it wants.
func.func @lib_attr_kind(%x: !tcx.buffer<4x8xf32>) {
  // expected-error @+1 {{"layer_norm_fwd" attribute 'eps' is integer array, wants float}}
  tcx.library "layer_norm_fwd" ins(%x : !tcx.buffer<4x8xf32>) outs(%x : !tcx.buffer<4x8xf32>) {rows = 4 : i64, cols = 8 : i64, eps = array<i64: 1>}
  return
}

// -----

// Tests that an attribute the callee does not take is refused (a misspelt one).
func.func @lib_attr_unknown(%x: !tcx.buffer<4x8xf32>) {
  // expected-error @+1 {{"softmax_fwd" has no attribute 'logg' (it takes rows, cols, log)}}
  tcx.library "softmax_fwd" ins(%x : !tcx.buffer<4x8xf32>) outs(%x : !tcx.buffer<4x8xf32>) {rows = 4 : i64, cols = 8 : i64, logg = true}
  return
}

// -----

// Tests that required sizes are not negative.
func.func @lib_attr_negative(%x: !tcx.buffer<4x8xf32>) {
  // expected-error @+1 {{"gelu_fwd" attribute 'elements' is negative (-1)}}
  tcx.library "gelu_fwd" ins(%x : !tcx.buffer<4x8xf32>) outs(%x : !tcx.buffer<4x8xf32>) {elements = -1 : i64}
  return
}

// -----

// Tests that matmul operand sizes are checked against m, n, k and batch.
func.func @mm_size(%a: !tcx.buffer<8x64xf32>, %b: !tcx.buffer<64x32xf32>, %c: !tcx.buffer<8x32xf32>) {
  // expected-error @+1 {{lhs holds 512 elements, the call reads 1024 (batch 2, m 8, n 32, k 64, stride -1)}}
  tcx.matmul ins(%a, %b : !tcx.buffer<8x64xf32>, !tcx.buffer<64x32xf32>) outs(%c : !tcx.buffer<8x32xf32>) {m = 8 : i64, n = 32 : i64, k = 64 : i64, batch = 2 : i64, stride_rhs = 0 : i64}
  return
}

// -----

// Tests that a bias epilogue needs a bias of n elements.
func.func @mm_bias(%a: !tcx.buffer<8x64xf32>, %b: !tcx.buffer<64x32xf32>, %c: !tcx.buffer<8x32xf32>, %bias: !tcx.buffer<16xf32>) {
  // expected-error @+1 {{bias '!tcx.buffer<16xf32>' must have n = 32 elements}}
  tcx.matmul ins(%a, %b, %bias : !tcx.buffer<8x64xf32>, !tcx.buffer<64x32xf32>, !tcx.buffer<16xf32>) outs(%c : !tcx.buffer<8x32xf32>) {m = 8 : i64, n = 32 : i64, k = 64 : i64, epilogue = "bias"}
  return
}

// -----

// Tests that an addend (the residual added as cuBLASLt's C) has out's type.
func.func @mm_addend(%a: !tcx.buffer<8x64xf32>, %b: !tcx.buffer<64x32xf32>, %c: !tcx.buffer<8x32xf32>, %r: !tcx.buffer<8x16xf32>) {
  // expected-error @+1 {{the addend (the last input) must have out's type '!tcx.buffer<8x32xf32>'}}
  tcx.matmul ins(%a, %b, %r : !tcx.buffer<8x64xf32>, !tcx.buffer<64x32xf32>, !tcx.buffer<8x16xf32>) outs(%c : !tcx.buffer<8x32xf32>) {m = 8 : i64, n = 32 : i64, k = 64 : i64, addend = true}
  return
}

// -----

// Tests that an addend takes beta 0 (it is cuBLASLt's C with beta 1).
func.func @mm_addend_beta(%a: !tcx.buffer<8x64xf32>, %b: !tcx.buffer<64x32xf32>, %c: !tcx.buffer<8x32xf32>, %r: !tcx.buffer<8x32xf32>) {
  // expected-error @+1 {{an addend takes a non-fp8 product without device_alpha, beta or broadcast batch}}
  tcx.matmul ins(%a, %b, %r : !tcx.buffer<8x64xf32>, !tcx.buffer<64x32xf32>, !tcx.buffer<8x32xf32>) outs(%c : !tcx.buffer<8x32xf32>) {m = 8 : i64, n = 32 : i64, k = 64 : i64, addend = true, beta = 1.0 : f32}
  return
}

// -----

// Tests that a bias operand needs a bias epilogue.
func.func @mm_epilogue(%a: !tcx.buffer<8x64xf32>, %b: !tcx.buffer<64x32xf32>, %c: !tcx.buffer<8x32xf32>, %bias: !tcx.buffer<32xf32>) {
  // expected-error @+1 {{epilogue "none" takes no bias operand}}
  tcx.matmul ins(%a, %b, %bias : !tcx.buffer<8x64xf32>, !tcx.buffer<64x32xf32>, !tcx.buffer<32xf32>) outs(%c : !tcx.buffer<8x32xf32>) {m = 8 : i64, n = 32 : i64, k = 64 : i64}
  return
}

// -----

// Tests that matmul element types agree.
func.func @mm_types(%a: !tcx.buffer<8x64xbf16>, %b: !tcx.buffer<64x32xf32>, %c: !tcx.buffer<8x32xf32>) {
  // expected-error @+1 {{lhs element type 'bf16' differs from out's 'f32'}}
  tcx.matmul ins(%a, %b : !tcx.buffer<8x64xbf16>, !tcx.buffer<64x32xf32>) outs(%c : !tcx.buffer<8x32xf32>) {m = 8 : i64, n = 32 : i64, k = 64 : i64}
  return
}

// -----

// Tests that tf32 is only for f32.
func.func @mm_tf32(%a: !tcx.buffer<8x64xbf16>, %b: !tcx.buffer<64x32xbf16>, %c: !tcx.buffer<8x32xbf16>) {
  // expected-error @+1 {{compute_type "tf32" needs f32 buffers, got 'bf16'}}
  tcx.matmul ins(%a, %b : !tcx.buffer<8x64xbf16>, !tcx.buffer<64x32xbf16>) outs(%c : !tcx.buffer<8x32xbf16>) {m = 8 : i64, n = 32 : i64, k = 64 : i64, compute_type = "tf32"}
  return
}

// -----

// Tests that broadcast batch shapes must broadcast.
func.func @mm_batch(%a: !tcx.buffer<3x8x8xf32>, %b: !tcx.buffer<2x8x8xf32>, %c: !tcx.buffer<3x8x8xf32>) {
  // expected-error @+1 {{lhs_batch and rhs_batch do not broadcast at batch dim 0: 3 vs 2}}
  tcx.matmul ins(%a, %b : !tcx.buffer<3x8x8xf32>, !tcx.buffer<2x8x8xf32>) outs(%c : !tcx.buffer<3x8x8xf32>) {m = 8 : i64, n = 8 : i64, k = 8 : i64, lhs_batch = array<i64: 3>, rhs_batch = array<i64: 2>}
  return
}

// -----

// Tests that copies need equal sizes, naming both buffers.
func.func @copy_size(%a: !tcx.buffer<4xf32>, %b: !tcx.buffer<4xf16>) {
  // expected-error @+1 {{source '!tcx.buffer<4xf32>' (16 bytes) and target '!tcx.buffer<4xf16>' (8 bytes) differ in size}}
  tcx.copy %a, %b : !tcx.buffer<4xf32>, !tcx.buffer<4xf16>
  return
}

// -----

// Tests that stream numbers are non-negative.
func.func @stream() {
  // expected-error @+1 {{stream -1 is negative}}
  %e = tcx.record {stream = -1 : i64} : !tcx.event
  return
}

// -----

// Tests that a kernel's cuda_kernel must name a tcx.cuda_source.
// expected-error @+1 {{'tcx.kernel' op @exp names cuda_kernel @nowhere, which is not a tcx.cuda_source in this module}}
tcx.kernel @exp kind("elementwise") attributes {cuda_kernel = @nowhere} {
^bb0(%x: tensor<4xf32>):
  %0 = tc.exp %x : tensor<4xf32>
  tcx.yield %0 : tensor<4xf32>
}

// -----

// Tests that a generated kernel is launched with everything codegen chose.
tcx.cuda_source @tc_fusion_0 "extern \"C\" __global__ void tc_fusion_0() {}"
tcx.kernel @exp kind("fusion") attributes {cuda_kernel = @tc_fusion_0} {
^bb0(%x: tensor<4xf32>):
  %0 = tc.exp %x : tensor<4xf32>
  tcx.yield %0 : tensor<4xf32>
}
func.func @f(%a: !tcx.buffer<4xf32>) {
  // expected-error @+1 {{'tcx.launch' op launches generated kernel @tc_fusion_0 without n, a non-empty meta and a 1-D grid and block}}
  tcx.launch @exp ins(%a : !tcx.buffer<4xf32>) outs(%a : !tcx.buffer<4xf32>) {elements = 4 : i64, grid = array<i64: 1>, block = array<i64: 256>}
  return
}

// -----

// Tests that n and meta go together.
tcx.cuda_source @tc_fusion_0 "extern \"C\" __global__ void tc_fusion_0() {}"
tcx.kernel @exp kind("fusion") attributes {cuda_kernel = @tc_fusion_0} {
^bb0(%x: tensor<4xf32>):
  %0 = tc.exp %x : tensor<4xf32>
  tcx.yield %0 : tensor<4xf32>
}
func.func @f(%a: !tcx.buffer<4xf32>) {
  // expected-error @+1 {{'tcx.launch' op n and meta are given together or not at all}}
  tcx.launch @exp ins(%a : !tcx.buffer<4xf32>) outs(%a : !tcx.buffer<4xf32>) {elements = 4 : i64, n = 4 : i64}
  return
}

// -----

// Tests that only a generated kernel takes n and meta.
tcx.kernel @exp kind("elementwise") {
^bb0(%x: tensor<4xf32>):
  %0 = tc.exp %x : tensor<4xf32>
  tcx.yield %0 : tensor<4xf32>
}
func.func @f(%a: !tcx.buffer<4xf32>) {
  // expected-error @+1 {{'tcx.launch' op gives n/meta but @exp has no generated kernel (cuda_kernel)}}
  tcx.launch @exp ins(%a : !tcx.buffer<4xf32>) outs(%a : !tcx.buffer<4xf32>) {elements = 4 : i64, n = 4 : i64, meta = array<i64: 0>}
  return
}

// -----

// Tests that an fp8 matmul is TN only (cuBLASLt's FP8 GEMMs).
func.func @mm_fp8_nn(%a: !tcx.buffer<32x64xf8E4M3FN>, %b: !tcx.buffer<64x128xf8E4M3FN>, %s: !tcx.buffer<1xf32>, %c: !tcx.buffer<32x128xbf16>) {
  // expected-error @+1 {{compute_type "fp8" is TN only: lhs [m, k] and rhs [n, k] (transpose_rhs, not transpose_lhs)}}
  tcx.matmul ins(%a, %b, %s, %s : !tcx.buffer<32x64xf8E4M3FN>, !tcx.buffer<64x128xf8E4M3FN>, !tcx.buffer<1xf32>, !tcx.buffer<1xf32>) outs(%c : !tcx.buffer<32x128xbf16>) {m = 32 : i64, n = 128 : i64, k = 64 : i64, compute_type = "fp8"}
  return
}

// -----

// Tests that an fp8 matmul takes both scales.
func.func @mm_fp8_no_scales(%a: !tcx.buffer<32x64xf8E4M3FN>, %b: !tcx.buffer<128x64xf8E4M3FN>, %c: !tcx.buffer<32x128xbf16>) {
  // expected-error @+1 {{compute_type "fp8" takes lhs, rhs, lhs_scale_inv and rhs_scale_inv, got 2 inputs}}
  tcx.matmul ins(%a, %b : !tcx.buffer<32x64xf8E4M3FN>, !tcx.buffer<128x64xf8E4M3FN>) outs(%c : !tcx.buffer<32x128xbf16>) {m = 32 : i64, n = 128 : i64, k = 64 : i64, transpose_rhs = true, compute_type = "fp8"}
  return
}

// -----

// Tests that the scales are one per operand or one per row of both (not mixed).
func.func @mm_fp8_row_scales(%a: !tcx.buffer<32x64xf8E4M3FN>, %b: !tcx.buffer<128x64xf8E4M3FN>, %sa: !tcx.buffer<32x1xf32>, %sb: !tcx.buffer<1xf32>, %c: !tcx.buffer<32x128xbf16>) {
  // expected-error @+1 {{takes f32 scales, one per operand (per tensor) or m and n of them (per row, batch 1), got lhs_scale_inv '!tcx.buffer<32x1xf32>' and rhs_scale_inv '!tcx.buffer<1xf32>'}}
  tcx.matmul ins(%a, %b, %sa, %sb : !tcx.buffer<32x64xf8E4M3FN>, !tcx.buffer<128x64xf8E4M3FN>, !tcx.buffer<32x1xf32>, !tcx.buffer<1xf32>) outs(%c : !tcx.buffer<32x128xbf16>) {m = 32 : i64, n = 128 : i64, k = 64 : i64, transpose_rhs = true, compute_type = "fp8"}
  return
}

// -----

// Tests that E5M2 x E5M2 is refused (cuBLASLt has no such kernel).
func.func @mm_fp8_e5m2(%a: !tcx.buffer<32x64xf8E5M2>, %b: !tcx.buffer<128x64xf8E5M2>, %s: !tcx.buffer<1xf32>, %c: !tcx.buffer<32x128xbf16>) {
  // expected-error @+1 {{has no E5M2 x E5M2 form (cuBLASLt)}}
  tcx.matmul ins(%a, %b, %s, %s : !tcx.buffer<32x64xf8E5M2>, !tcx.buffer<128x64xf8E5M2>, !tcx.buffer<1xf32>, !tcx.buffer<1xf32>) outs(%c : !tcx.buffer<32x128xbf16>) {m = 32 : i64, n = 128 : i64, k = 64 : i64, transpose_rhs = true, compute_type = "fp8"}
  return
}

// -----

// Tests that k (and n) must be multiples of 16.
func.func @mm_fp8_k(%a: !tcx.buffer<32x40xf8E4M3FN>, %b: !tcx.buffer<128x40xf8E4M3FN>, %s: !tcx.buffer<1xf32>, %c: !tcx.buffer<32x128xbf16>) {
  // expected-error @+1 {{compute_type "fp8" needs k and n multiples of 16, got k 40, n 128}}
  tcx.matmul ins(%a, %b, %s, %s : !tcx.buffer<32x40xf8E4M3FN>, !tcx.buffer<128x40xf8E4M3FN>, !tcx.buffer<1xf32>, !tcx.buffer<1xf32>) outs(%c : !tcx.buffer<32x128xbf16>) {m = 32 : i64, n = 128 : i64, k = 40 : i64, transpose_rhs = true, compute_type = "fp8"}
  return
}

// -----

// Tests that an fp8 matmul takes a bias epilogue (its fifth input, out's
// type) and no other.
func.func @mm_fp8_gelu(%a: !tcx.buffer<32x64xf8E4M3FN>, %b: !tcx.buffer<128x64xf8E4M3FN>, %s: !tcx.buffer<1xf32>, %c: !tcx.buffer<32x128xbf16>) {
  // expected-error @+1 {{compute_type "fp8" takes no epilogue but "bias", got "gelu"}}
  tcx.matmul ins(%a, %b, %s, %s : !tcx.buffer<32x64xf8E4M3FN>, !tcx.buffer<128x64xf8E4M3FN>, !tcx.buffer<1xf32>, !tcx.buffer<1xf32>) outs(%c : !tcx.buffer<32x128xbf16>) {m = 32 : i64, n = 128 : i64, k = 64 : i64, transpose_rhs = true, compute_type = "fp8", epilogue = "gelu"}
  return
}

// -----

func.func @mm_fp8_bias_missing(%a: !tcx.buffer<32x64xf8E4M3FN>, %b: !tcx.buffer<128x64xf8E4M3FN>, %s: !tcx.buffer<1xf32>, %c: !tcx.buffer<32x128xbf16>) {
  // expected-error @+1 {{compute_type "fp8" takes lhs, rhs, lhs_scale_inv, rhs_scale_inv and the bias, got 4 inputs}}
  tcx.matmul ins(%a, %b, %s, %s : !tcx.buffer<32x64xf8E4M3FN>, !tcx.buffer<128x64xf8E4M3FN>, !tcx.buffer<1xf32>, !tcx.buffer<1xf32>) outs(%c : !tcx.buffer<32x128xbf16>) {m = 32 : i64, n = 128 : i64, k = 64 : i64, transpose_rhs = true, compute_type = "fp8", epilogue = "bias"}
  return
}

// -----

func.func @mm_fp8_bias_type(%a: !tcx.buffer<32x64xf8E4M3FN>, %b: !tcx.buffer<128x64xf8E4M3FN>, %s: !tcx.buffer<1xf32>, %bias: !tcx.buffer<128xf32>, %c: !tcx.buffer<32x128xbf16>) {
  // expected-error @+1 {{bias element type 'f32' differs from out's 'bf16'}}
  tcx.matmul ins(%a, %b, %s, %s, %bias : !tcx.buffer<32x64xf8E4M3FN>, !tcx.buffer<128x64xf8E4M3FN>, !tcx.buffer<1xf32>, !tcx.buffer<1xf32>, !tcx.buffer<128xf32>) outs(%c : !tcx.buffer<32x128xbf16>) {m = 32 : i64, n = 128 : i64, k = 64 : i64, transpose_rhs = true, compute_type = "fp8", epilogue = "bias"}
  return
}

// -----

// Tests that fast accumulation is an FP8 attribute only.
func.func @mm_fast_accum(%a: !tcx.buffer<8x64xbf16>, %b: !tcx.buffer<64x32xbf16>, %c: !tcx.buffer<8x32xbf16>) {
  // expected-error @+1 {{fast_accum applies to compute_type "fp8" only}}
  tcx.matmul ins(%a, %b : !tcx.buffer<8x64xbf16>, !tcx.buffer<64x32xbf16>) outs(%c : !tcx.buffer<8x32xbf16>) {m = 8 : i64, n = 32 : i64, k = 64 : i64, fast_accum = true}
  return
}

// -----

// Tests that quantize_fp8 with a transposed copy lists it before the scratch
// (the ABI's has_transpose operand).
func.func @quantize_fp8_outs(%x: !tcx.buffer<32x64xbf16>, %q: !tcx.buffer<32x64xf8E4M3FN>, %s: !tcx.buffer<1xf32>, %amax: !tcx.buffer<256xi8>) {
  // expected-error @+1 {{takes 4 outputs (has_transpose = 1, has_col_sum = 0), got 3}}
  tcx.library "quantize_fp8" ins(%x : !tcx.buffer<32x64xbf16>) outs(%q, %s, %amax : !tcx.buffer<32x64xf8E4M3FN>, !tcx.buffer<1xf32>, !tcx.buffer<256xi8>) {rows = 32 : i64, cols = 64 : i64, has_transpose = true}
  return
}

// -----

// Tests that 1x32 e8m0 block scales (mxfp8, lhs_blocks = 3) take both
// operands.
func.func @mm_mx_mixed(%a: !tcx.buffer<32x64xf8E4M3FN>, %b: !tcx.buffer<128x64xf8E4M3FN>, %s: !tcx.buffer<512xf8E8M0FNU>, %c: !tcx.buffer<32x128xbf16>) {
  // expected-error @+1 {{1x32 e8m0 block scales (3) take both operands and k a multiple of 32, got lhs_blocks 3, rhs_blocks 1, k 64}}
  tcx.matmul ins(%a, %b, %s, %s : !tcx.buffer<32x64xf8E4M3FN>, !tcx.buffer<128x64xf8E4M3FN>, !tcx.buffer<512xf8E8M0FNU>, !tcx.buffer<512xf8E8M0FNU>) outs(%c : !tcx.buffer<32x128xbf16>) {m = 32 : i64, n = 128 : i64, k = 64 : i64, transpose_rhs = true, compute_type = "fp8", lhs_blocks = 3, rhs_blocks = 1}
  return
}

// -----

// Tests that mxfp8's scales are E8M0 bytes of cuBLASLt's VEC32_UE8M0 layout
// (rows padded to 128, scale columns to 4: 256 x 4 bytes for n = 144).
func.func @mm_mx_scale_size(%a: !tcx.buffer<32x64xf8E4M3FN>, %b: !tcx.buffer<144x64xf8E4M3FN>, %s: !tcx.buffer<512xf8E8M0FNU>, %c: !tcx.buffer<32x144xbf16>) {
  // expected-error @+1 {{1x32 block scales must be f8E8M0FNU of 512 and 1024 elements (cuBLASLt's VEC32_UE8M0 layout), got lhs_scale_inv '!tcx.buffer<512xf8E8M0FNU>' and rhs_scale_inv '!tcx.buffer<512xf8E8M0FNU>'}}
  tcx.matmul ins(%a, %b, %s, %s : !tcx.buffer<32x64xf8E4M3FN>, !tcx.buffer<144x64xf8E4M3FN>, !tcx.buffer<512xf8E8M0FNU>, !tcx.buffer<512xf8E8M0FNU>) outs(%c : !tcx.buffer<32x144xbf16>) {m = 32 : i64, n = 144 : i64, k = 64 : i64, transpose_rhs = true, compute_type = "fp8", lhs_blocks = 3, rhs_blocks = 3}
  return
}

// -----

// Tests that a bias gradient needs its output, of the summed operand's
// length (n for rhs) and out's element type.
func.func @mm_bias_grad_len(%x: !tcx.buffer<64x16xbf16>, %dy: !tcx.buffer<64x32xbf16>, %dw: !tcx.buffer<16x32xbf16>, %db: !tcx.buffer<16xbf16>) {
  // expected-error @+1 {{bias_grad_out '!tcx.buffer<16xbf16>' must hold 32 elements of 'bf16' (the sum over k of rhs)}}
  tcx.matmul ins(%x, %dy : !tcx.buffer<64x16xbf16>, !tcx.buffer<64x32xbf16>) outs(%dw : !tcx.buffer<16x32xbf16> bias_grad %db : !tcx.buffer<16xbf16>) {m = 16 : i64, n = 32 : i64, k = 64 : i64, transpose_lhs = true, bias_grad = "rhs"}
  return
}

// -----

func.func @mm_bias_grad_missing(%x: !tcx.buffer<64x16xbf16>, %dy: !tcx.buffer<64x32xbf16>, %dw: !tcx.buffer<16x32xbf16>) {
  // expected-error @+1 {{bias_grad "lhs" needs its bias_grad_out}}
  tcx.matmul ins(%x, %dy : !tcx.buffer<64x16xbf16>, !tcx.buffer<64x32xbf16>) outs(%dw : !tcx.buffer<16x32xbf16>) {m = 16 : i64, n = 32 : i64, k = 64 : i64, transpose_lhs = true, bias_grad = "lhs"}
  return
}

// -----

// Tests that a bias gradient takes no other epilogue (cuBLASLt's BGRAD
// epilogues are alone).
func.func @mm_bias_grad_epilogue(%x: !tcx.buffer<64x16xbf16>, %dy: !tcx.buffer<64x32xbf16>, %b: !tcx.buffer<32xbf16>, %dw: !tcx.buffer<16x32xbf16>, %db: !tcx.buffer<32xbf16>) {
  // expected-error @+1 {{bias_grad takes a non-fp8 product of batch 1 without epilogue, addend, device_alpha, broadcast, alpha or beta}}
  tcx.matmul ins(%x, %dy, %b : !tcx.buffer<64x16xbf16>, !tcx.buffer<64x32xbf16>, !tcx.buffer<32xbf16>) outs(%dw : !tcx.buffer<16x32xbf16> bias_grad %db : !tcx.buffer<32xbf16>) {m = 16 : i64, n = 32 : i64, k = 64 : i64, transpose_lhs = true, epilogue = "bias", bias_grad = "rhs"}
  return
}

// -----

// Tests that a GELU aux epilogue needs its aux output, of out's element
// count and type.
func.func @mm_gelu_aux_missing(%x: !tcx.buffer<8x16xf32>, %w: !tcx.buffer<16x32xf32>, %y: !tcx.buffer<8x32xf32>) {
  // expected-error @+1 {{epilogue "gelu_aux" needs its aux_out}}
  tcx.matmul ins(%x, %w : !tcx.buffer<8x16xf32>, !tcx.buffer<16x32xf32>) outs(%y : !tcx.buffer<8x32xf32>) {m = 8 : i64, n = 32 : i64, k = 16 : i64, epilogue = "gelu_aux"}
  return
}

// -----

func.func @mm_gelu_aux_size(%x: !tcx.buffer<8x16xf32>, %w: !tcx.buffer<16x32xf32>, %y: !tcx.buffer<8x32xf32>, %a: !tcx.buffer<8x16xf32>) {
  // expected-error @+1 {{aux_out '!tcx.buffer<8x16xf32>' must hold out's elements ('!tcx.buffer<8x32xf32>')}}
  tcx.matmul ins(%x, %w : !tcx.buffer<8x16xf32>, !tcx.buffer<16x32xf32>) outs(%y : !tcx.buffer<8x32xf32> aux %a : !tcx.buffer<8x16xf32>) {m = 8 : i64, n = 32 : i64, k = 16 : i64, epilogue = "gelu_aux"}
  return
}

// -----

// Tests that DGELU takes the GELU's input as its third input, of out's
// element count.
func.func @mm_dgelu_x(%a: !tcx.buffer<8x16xf32>, %w: !tcx.buffer<16x32xf32>, %x: !tcx.buffer<8x16xf32>, %y: !tcx.buffer<8x32xf32>) {
  // expected-error @+1 {{dgelu's GELU input '!tcx.buffer<8x16xf32>' must hold out's elements ('!tcx.buffer<8x32xf32>')}}
  tcx.matmul ins(%a, %w, %x : !tcx.buffer<8x16xf32>, !tcx.buffer<16x32xf32>, !tcx.buffer<8x16xf32>) outs(%y : !tcx.buffer<8x32xf32>) {m = 8 : i64, n = 32 : i64, k = 16 : i64, epilogue = "dgelu"}
  return
}

// -----

func.func @mm_dgelu_missing(%a: !tcx.buffer<8x16xf32>, %w: !tcx.buffer<16x32xf32>, %y: !tcx.buffer<8x32xf32>) {
  // expected-error @+1 {{epilogue "dgelu" takes lhs, rhs and the GELU's input, beta 0, no addend or device_alpha}}
  tcx.matmul ins(%a, %w : !tcx.buffer<8x16xf32>, !tcx.buffer<16x32xf32>) outs(%y : !tcx.buffer<8x32xf32>) {m = 8 : i64, n = 32 : i64, k = 16 : i64, epilogue = "dgelu"}
  return
}


// -----

func.func @matmul_stream(%a: !tcx.buffer<4x8xf32>, %b: !tcx.buffer<8x4xf32>, %o: !tcx.buffer<4x4xf32>) {
  // expected-error @+1 {{stream 16 is not 0..15 (the runtime's streams)}}
  tcx.matmul ins(%a, %b : !tcx.buffer<4x8xf32>, !tcx.buffer<8x4xf32>) outs(%o : !tcx.buffer<4x4xf32>) {m = 4 : i64, n = 4 : i64, k = 8 : i64, stream = 16 : i64}
  return
}
