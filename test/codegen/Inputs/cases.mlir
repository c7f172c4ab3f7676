// Cases for the GPU check (test/codegen/run_generated.cpp): every function
// is fused, compiled and compared with the CPU reference on random inputs.
// Also the input of the CPU-side lit tests in test/codegen/*.test.

// Bias add + GELU (tanh) written out as ONNX exports it, f32.
func.func @gelu_chain(%x: tensor<64x768xf32>, %b: tensor<768xf32>) -> tensor<64x768xf32> {
  %half = tc.constant dense<5.000000e-01> : tensor<f32>
  %one = tc.constant dense<1.000000e+00> : tensor<f32>
  %k = tc.constant dense<0.797884583> : tensor<f32>
  %c = tc.constant dense<4.471500e-02> : tensor<f32>
  %three = tc.constant dense<3.000000e+00> : tensor<f32>
  %h = tc.add %x, %b : tensor<64x768xf32>, tensor<768xf32> -> tensor<64x768xf32>
  %p = tc.pow %h, %three : tensor<64x768xf32>, tensor<f32> -> tensor<64x768xf32>
  %q = tc.mul %p, %c : tensor<64x768xf32>, tensor<f32> -> tensor<64x768xf32>
  %r = tc.add %h, %q : tensor<64x768xf32>, tensor<64x768xf32> -> tensor<64x768xf32>
  %s = tc.mul %r, %k : tensor<64x768xf32>, tensor<f32> -> tensor<64x768xf32>
  %t = tc.tanh %s : tensor<64x768xf32>
  %u = tc.add %t, %one : tensor<64x768xf32>, tensor<f32> -> tensor<64x768xf32>
  %v = tc.mul %h, %u : tensor<64x768xf32>, tensor<64x768xf32> -> tensor<64x768xf32>
  %y = tc.mul %v, %half : tensor<64x768xf32>, tensor<f32> -> tensor<64x768xf32>
  return %y : tensor<64x768xf32>
}

// tc.gelu (erf) and silu in bf16 storage: the vector path, fp32 math.
func.func @bf16_gelu_silu(%x: tensor<32x256xbf16>, %y: tensor<32x256xbf16>) -> tensor<32x256xbf16> {
  %g = tc.gelu %x : tensor<32x256xbf16>
  %s = tc.silu %y : tensor<32x256xbf16>
  %m = tc.mul %g, %s : tensor<32x256xbf16>, tensor<32x256xbf16> -> tensor<32x256xbf16>
  return %m : tensor<32x256xbf16>
}

// Broadcasting on both sides (strided loads), f16.
func.func @broadcast_add(%a: tensor<8x1x16xf16>, %b: tensor<4x1xf16>) -> tensor<8x4x16xf16> {
  %s = tc.add %a, %b : tensor<8x1x16xf16>, tensor<4x1xf16> -> tensor<8x4x16xf16>
  %e = tc.exp %s : tensor<8x4x16xf16>
  return %e : tensor<8x4x16xf16>
}

// Leaky relu via compare + select, cast to bf16, plus a value used outside
// the group (two results).
func.func @select_cast(%x: tensor<1000xf32>) -> (tensor<1000xbf16>, tensor<1000xi1>) {
  %zero = tc.constant dense<0.000000e+00> : tensor<f32>
  %slope = tc.constant dense<1.000000e-01> : tensor<f32>
  %pos = tc.gt %x, %zero : tensor<1000xf32>, tensor<f32> -> tensor<1000xi1>
  %neg = tc.mul %x, %slope : tensor<1000xf32>, tensor<f32> -> tensor<1000xf32>
  %y = tc.select %pos, %x, %neg : tensor<1000xi1>, tensor<1000xf32>, tensor<1000xf32> -> tensor<1000xf32>
  %c = tc.cast %y : tensor<1000xf32> to tensor<1000xbf16>
  return %c, %pos : tensor<1000xbf16>, tensor<1000xi1>
}

// exp then a trailing-axis sum (warp per row); exp is also a result.
func.func @exp_sum(%x: tensor<128x1000xf32>) -> (tensor<128x1000xf32>, tensor<128xf32>) {
  %e = tc.exp %x : tensor<128x1000xf32>
  %s = tc.reduce_sum %e {axes = array<i64: 1>} : tensor<128x1000xf32> -> tensor<128xf32>
  return %e, %s : tensor<128x1000xf32>, tensor<128xf32>
}

// Block-per-row max and a bf16 mean over two trailing axes.
func.func @row_max_mean(%x: tensor<4x2048xf32>, %y: tensor<6x8x300xbf16>) -> (tensor<4x1xf32>, tensor<6xbf16>) {
  %a = tc.abs %x : tensor<4x2048xf32>
  %m = tc.reduce_max %a {axes = array<i64: 1>, keepdims = true} : tensor<4x2048xf32> -> tensor<4x1xf32>
  %n = tc.reduce_mean %y {axes = array<i64: 1, 2>} : tensor<6x8x300xbf16> -> tensor<6xbf16>
  return %m, %n : tensor<4x1xf32>, tensor<6xbf16>
}

// Scaled, masked softmax (attention-like) and a bf16 log_softmax.
func.func @softmax(%x: tensor<2x4x33x33xf32>, %mask: tensor<33x33xi1>, %z: tensor<16x2048xbf16>)
    -> (tensor<2x4x33x33xf32>, tensor<16x2048xbf16>) {
  %scale = tc.constant dense<1.250000e-01> : tensor<f32>
  %ninf = tc.constant dense<-1.000000e+09> : tensor<f32>
  %s = tc.mul %x, %scale : tensor<2x4x33x33xf32>, tensor<f32> -> tensor<2x4x33x33xf32>
  %m = tc.select %mask, %s, %ninf : tensor<33x33xi1>, tensor<2x4x33x33xf32>, tensor<f32> -> tensor<2x4x33x33xf32>
  %p = tc.softmax %m {axis = 3 : i64} : tensor<2x4x33x33xf32>
  %l = tc.log_softmax %z {axis = 1 : i64} : tensor<16x2048xbf16>
  return %p, %l : tensor<2x4x33x33xf32>, tensor<16x2048xbf16>
}

// Integer arithmetic (i32 wraps, truncating division) and comparisons.
func.func @integers(%a: tensor<64xi32>, %b: tensor<64xi32>, %c: tensor<64xi64>) -> (tensor<64xi32>, tensor<64xi1>) {
  %m = tc.mul %a, %b : tensor<64xi32>, tensor<64xi32> -> tensor<64xi32>
  %d = tc.div %m, %b : tensor<64xi32>, tensor<64xi32> -> tensor<64xi32>
  %r = tc.rem %m, %b : tensor<64xi32>, tensor<64xi32> -> tensor<64xi32>
  %s = tc.sub %d, %r : tensor<64xi32>, tensor<64xi32> -> tensor<64xi32>
  %z = tc.cast %s : tensor<64xi32> to tensor<64xi64>
  %lt = tc.lt %z, %c : tensor<64xi64>, tensor<64xi64> -> tensor<64xi1>
  return %s, %lt : tensor<64xi32>, tensor<64xi1>
}

// Standalone shape ops: transpose, negative-stride slice, concat, pads.
func.func @shapes(%x: tensor<4x8x16xf32>, %y: tensor<4x3x16xf32>, %w: tensor<5x7xbf16>)
    -> (tensor<16x4x8xf32>, tensor<2x4x5xf32>, tensor<4x11x16xf32>, tensor<9x10xbf16>, tensor<7x9xbf16>, tensor<7x11xbf16>) {
  %t = tc.transpose %x {permutation = array<i64: 2, 0, 1>} : tensor<4x8x16xf32> -> tensor<16x4x8xf32>
  %s = tc.slice %x {starts = array<i64: 3, 0, 14>, strides = array<i64: -2, 2, -3>} : tensor<4x8x16xf32> to tensor<2x4x5xf32>
  %c = tc.concat %x, %y {axis = 1 : i64} : tensor<4x8x16xf32>, tensor<4x3x16xf32> -> tensor<4x11x16xf32>
  %p = tc.pad %w {low = array<i64: 1, 2>, high = array<i64: 3, 1>, value = 2.5 : f64} : tensor<5x7xbf16> -> tensor<9x10xbf16>
  %r = tc.pad %w {low = array<i64: 1, 1>, high = array<i64: 1, 1>, mode = "reflect"} : tensor<5x7xbf16> -> tensor<7x9xbf16>
  %e = tc.pad %w {low = array<i64: 0, 2>, high = array<i64: 2, 2>, mode = "edge"} : tensor<5x7xbf16> -> tensor<7x11xbf16>
  return %t, %s, %c, %p, %r, %e : tensor<16x4x8xf32>, tensor<2x4x5xf32>, tensor<4x11x16xf32>, tensor<9x10xbf16>, tensor<7x9xbf16>, tensor<7x11xbf16>
}

// insert_slice, broadcast, reshape and reductions over leading / mixed axes.
func.func @gradient_shapes(%d: tensor<4x6xf32>, %b: tensor<1x64xbf16>, %x: tensor<6x5x7xf32>)
    -> (tensor<8x16xf32>, tensor<16x64xbf16>, tensor<5x7xf32>, tensor<5xf32>, tensor<35x6xf32>) {
  %i = tc.insert_slice %d {starts = array<i64: 7, 0>, strides = array<i64: -2, 3>} : tensor<4x6xf32> to tensor<8x16xf32>
  %e = tc.broadcast %b : tensor<1x64xbf16> to tensor<16x64xbf16>
  %s = tc.reduce_sum %x {axes = array<i64: 0>} : tensor<6x5x7xf32> -> tensor<5x7xf32>
  %m = tc.reduce_max %x {axes = array<i64: 0, 2>} : tensor<6x5x7xf32> -> tensor<5xf32>
  %t = tc.transpose %x {permutation = array<i64: 1, 2, 0>} : tensor<6x5x7xf32> -> tensor<5x7x6xf32>
  %r = tc.reshape %t : tensor<5x7x6xf32> to tensor<35x6xf32>
  return %i, %e, %s, %m, %r : tensor<8x16xf32>, tensor<16x64xbf16>, tensor<5x7xf32>, tensor<5xf32>, tensor<35x6xf32>
}

// Standalone splits: GPT-2's qkv split of the last axis in bf16, and an
// i64 split of a middle axis into unequal pieces (inner stride 3).
func.func @splits(%x: tensor<2x16x192xbf16>, %i: tensor<4x6x3xi64>)
    -> (tensor<2x16x64xbf16>, tensor<2x16x64xbf16>, tensor<2x16x64xbf16>,
        tensor<4x1x3xi64>, tensor<4x2x3xi64>, tensor<4x3x3xi64>) {
  %q, %k, %v = tc.split %x {axis = 2 : i64} : tensor<2x16x192xbf16>
      -> tensor<2x16x64xbf16>, tensor<2x16x64xbf16>, tensor<2x16x64xbf16>
  %a, %b, %c = tc.split %i {axis = 1 : i64} : tensor<4x6x3xi64>
      -> tensor<4x1x3xi64>, tensor<4x2x3xi64>, tensor<4x3x3xi64>
  return %q, %k, %v, %a, %b, %c : tensor<2x16x64xbf16>, tensor<2x16x64xbf16>, tensor<2x16x64xbf16>,
      tensor<4x1x3xi64>, tensor<4x2x3xi64>, tensor<4x3x3xi64>
}

// Long reductions: column sums ([rows, C] -> [C], 32 outputs x 32 row groups
// per block), a middle axis, and very long rows split over blocks (the
// grad-norm sum of squares; the last block combines the partials): one row
// in 32 parts, two of a 1B model's [2048, 4096] gradient size in 512.
func.func @long_reductions(%g: tensor<2048x96xbf16>, %h: tensor<4x256x64xf32>, %w: tensor<524288xf32>,
                           %v: tensor<2x8388608xf32>)
    -> (tensor<96xbf16>, tensor<64xf32>, tensor<4x64xf32>, tensor<524288xf32>, tensor<f32>,
        tensor<2xf32>) {
  %c = tc.reduce_sum %g {axes = array<i64: 0>} : tensor<2048x96xbf16> -> tensor<96xbf16>
  %m = tc.reduce_mean %h {axes = array<i64: 0, 1>} : tensor<4x256x64xf32> -> tensor<64xf32>
  %k = tc.reduce_max %h {axes = array<i64: 1>} : tensor<4x256x64xf32> -> tensor<4x64xf32>
  %sq = tc.mul %w, %w : tensor<524288xf32>, tensor<524288xf32> -> tensor<524288xf32>
  %s = tc.reduce_sum %sq {axes = array<i64: 0>} : tensor<524288xf32> -> tensor<f32>
  %vsq = tc.mul %v, %v : tensor<2x8388608xf32>, tensor<2x8388608xf32> -> tensor<2x8388608xf32>
  %vs = tc.reduce_sum %vsq {axes = array<i64: 1>} : tensor<2x8388608xf32> -> tensor<2xf32>
  return %c, %m, %k, %sq, %s, %vs : tensor<96xbf16>, tensor<64xf32>, tensor<4x64xf32>, tensor<524288xf32>, tensor<f32>,
      tensor<2xf32>
}

// Long columns split over blocks as well (rows >= 4096): partial sums in
// module memory, the last block of a tile combines them in order.
func.func @split_columns(%z: tensor<8192x40xf32>, %y: tensor<4x2048x96xbf16>)
    -> (tensor<40xf32>, tensor<1x1x96xbf16>, tensor<96xf32>) {
  %a = tc.reduce_sum %z {axes = array<i64: 0>} : tensor<8192x40xf32> -> tensor<40xf32>
  %b = tc.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = true} : tensor<4x2048x96xbf16> -> tensor<1x1x96xbf16>
  %yf = tc.cast %y : tensor<4x2048x96xbf16> to tensor<4x2048x96xf32>
  %c = tc.reduce_max %yf {axes = array<i64: 0, 1>} : tensor<4x2048x96xf32> -> tensor<96xf32>
  return %a, %b, %c : tensor<40xf32>, tensor<1x1x96xbf16>, tensor<96xf32>
}

// FP8 casts as delayed scaling writes them (x * scale, saturating, round to
// nearest even): E4M3 with values past 448 and in its subnormals, E5M2 past
// 57344; the transposed E4M3 copy; a dequantizing cast back to f32.
func.func @fp8_casts(%x: tensor<64x48xf32>)
    -> (tensor<64x48xf8E4M3FN>, tensor<64x48xf8E4M3FN>, tensor<64x48xf8E5M2>, tensor<48x64xf8E4M3FN>,
        tensor<64x48xf32>) {
  %big = tc.constant dense<3.000000e+02> : tensor<f32>
  %tiny = tc.constant dense<2.000000e-03> : tensor<f32>
  %huge = tc.constant dense<4.000000e+04> : tensor<f32>
  %a = tc.mul %x, %big : tensor<64x48xf32>, tensor<f32> -> tensor<64x48xf32>
  %qa = tc.cast %a : tensor<64x48xf32> to tensor<64x48xf8E4M3FN>
  %b = tc.mul %x, %tiny : tensor<64x48xf32>, tensor<f32> -> tensor<64x48xf32>
  %qb = tc.cast %b : tensor<64x48xf32> to tensor<64x48xf8E4M3FN>
  %c = tc.mul %x, %huge : tensor<64x48xf32>, tensor<f32> -> tensor<64x48xf32>
  %qc = tc.cast %c : tensor<64x48xf32> to tensor<64x48xf8E5M2>
  %t = tc.transpose %qa {permutation = array<i64: 1, 0>} : tensor<64x48xf8E4M3FN> -> tensor<48x64xf8E4M3FN>
  %d = tc.cast %qc : tensor<64x48xf8E5M2> to tensor<64x48xf32>
  return %qa, %qb, %qc, %t, %d : tensor<64x48xf8E4M3FN>, tensor<64x48xf8E4M3FN>, tensor<64x48xf8E5M2>,
      tensor<48x64xf8E4M3FN>, tensor<64x48xf32>
}

// Full max / min reductions beside elementwise results (tc-fuse-fp8-amax's
// amax of an FP8 quantize, in the kernel that writes the quantized tensor):
// bf16 GELU with max |x| of it over every element, NaN as 0 (the 16-byte
// vector path, 4096 blocks combined by the last), and an f32 broadcast add
// (strided loads: the scalar path) with its min.
func.func @full_max(%x: tensor<2048x4096xbf16>, %a: tensor<3x5x7xf32>, %b: tensor<7xf32>)
    -> (tensor<2048x4096xbf16>, tensor<f32>, tensor<3x5x7xf32>, tensor<f32>) {
  %g = tc.gelu %x : tensor<2048x4096xbf16>
  %gf = tc.cast %g {saturate = false} : tensor<2048x4096xbf16> to tensor<2048x4096xf32>
  %m = tc.abs %gf : tensor<2048x4096xf32>
  %n = tc.isnan %m : tensor<2048x4096xf32> -> tensor<2048x4096xi1>
  %z = tc.constant dense<0.000000e+00> : tensor<2048x4096xf32>
  %k = tc.select %n, %z, %m : tensor<2048x4096xi1>, tensor<2048x4096xf32>, tensor<2048x4096xf32> -> tensor<2048x4096xf32>
  %amax = tc.reduce_max %k {axes = array<i64: 0, 1>} : tensor<2048x4096xf32> -> tensor<f32>
  %s = tc.add %a, %b : tensor<3x5x7xf32>, tensor<7xf32> -> tensor<3x5x7xf32>
  %lo = tc.reduce_min %s {axes = array<i64: 0, 1, 2>} : tensor<3x5x7xf32> -> tensor<f32>
  return %g, %amax, %s, %lo : tensor<2048x4096xbf16>, tensor<f32>, tensor<3x5x7xf32>, tensor<f32>
}

// Rotary embedding (tc-recognize-rotary's op): bf16 activations with bf16
// tables, HF's rotate_half layout, all features rotated (Llama's head dim
// 64); f32 interleaved with a partial rotary (16 of 24 features, the rest
// copied) and an odd token count.
func.func @rotary(%x: tensor<2x4x32x64xbf16>, %c: tensor<2x32x32xbf16>, %s: tensor<2x32x32xbf16>,
                  %y: tensor<1x3x5x24xf32>, %d: tensor<1x5x8xf32>, %e: tensor<1x5x8xf32>)
    -> (tensor<2x4x32x64xbf16>, tensor<1x3x5x24xf32>) {
  %r = tc.rotary %x, %c, %s : (tensor<2x4x32x64xbf16>, tensor<2x32x32xbf16>, tensor<2x32x32xbf16>) -> tensor<2x4x32x64xbf16>
  %q = tc.rotary %y, %d, %e {interleaved = true} : (tensor<1x3x5x24xf32>, tensor<1x5x8xf32>, tensor<1x5x8xf32>) -> tensor<1x3x5x24xf32>
  return %r, %q : tensor<2x4x32x64xbf16>, tensor<1x3x5x24xf32>
}

// Rotary read and written in place (tc-lower-to-tcx's strides): Llama's q
// out of its [B, T, H*D] projection through the head transpose, the result
// written straight into the head transpose back (bf16: the vector path);
// GPT-NeoX's q / k / v sliced out of a per-head qkv [B, T, H, 3D] (f32, a
// partial rotary over 4 of 8 features: the scalar path), each written into
// its piece of the concat that the head transpose back reads.
func.func @rotary_in_place(%x: tensor<2x32x256xbf16>, %c: tensor<2x32x32xbf16>,
                           %s: tensor<2x32x32xbf16>, %y: tensor<1x5x72xf32>,
                           %d: tensor<1x5x2xf32>, %e: tensor<1x5x2xf32>)
    -> (tensor<2x32x256xbf16>, tensor<1x5x72xf32>) {
  %xr = tc.reshape %x : tensor<2x32x256xbf16> to tensor<2x32x4x64xbf16>
  %xt = tc.transpose %xr {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x32x4x64xbf16> -> tensor<2x4x32x64xbf16>
  %r = tc.rotary %xt, %c, %s : (tensor<2x4x32x64xbf16>, tensor<2x32x32xbf16>, tensor<2x32x32xbf16>) -> tensor<2x4x32x64xbf16>
  %rt = tc.transpose %r {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x32x64xbf16> -> tensor<2x32x4x64xbf16>
  %rr = tc.reshape %rt : tensor<2x32x4x64xbf16> to tensor<2x32x256xbf16>
  %yr = tc.reshape %y : tensor<1x5x72xf32> to tensor<1x5x3x24xf32>
  %yt = tc.transpose %yr {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x5x3x24xf32> -> tensor<1x3x5x24xf32>
  %q = tc.slice %yt {starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<1x3x5x24xf32> to tensor<1x3x5x8xf32>
  %k = tc.slice %yt {starts = array<i64: 0, 0, 0, 8>, strides = array<i64: 1, 1, 1, 1>} : tensor<1x3x5x24xf32> to tensor<1x3x5x8xf32>
  %v = tc.slice %yt {starts = array<i64: 0, 0, 0, 16>, strides = array<i64: 1, 1, 1, 1>} : tensor<1x3x5x24xf32> to tensor<1x3x5x8xf32>
  %qr = tc.rotary %q, %d, %e : (tensor<1x3x5x8xf32>, tensor<1x5x2xf32>, tensor<1x5x2xf32>) -> tensor<1x3x5x8xf32>
  %kr = tc.rotary %k, %d, %e : (tensor<1x3x5x8xf32>, tensor<1x5x2xf32>, tensor<1x5x2xf32>) -> tensor<1x3x5x8xf32>
  %vr = tc.rotary %v, %d, %e : (tensor<1x3x5x8xf32>, tensor<1x5x2xf32>, tensor<1x5x2xf32>) -> tensor<1x3x5x8xf32>
  %cat = tc.concat %qr, %kr, %vr {axis = 3 : i64} : tensor<1x3x5x8xf32>, tensor<1x3x5x8xf32>, tensor<1x3x5x8xf32> -> tensor<1x3x5x24xf32>
  %ct = tc.transpose %cat {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x3x5x24xf32> -> tensor<1x5x3x24xf32>
  %cr = tc.reshape %ct : tensor<1x5x3x24xf32> to tensor<1x5x72xf32>
  return %rr, %cr : tensor<2x32x256xbf16>, tensor<1x5x72xf32>
}

// Short sums of squares (the grad-norm clip's per-gradient sums): one block
// each, the row's length the launch's n, so that rows of any length share
// one kernel and the runtime runs consecutive ones as one grouped launch
// (the two bf16 vectors here; the f32 one is another kernel).
func.func @short_sums(%a: tensor<2304xbf16>, %b: tensor<3072xbf16>, %c: tensor<768xf32>)
    -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  %af = tc.cast %a : tensor<2304xbf16> to tensor<2304xf32>
  %a2 = tc.mul %af, %af : tensor<2304xf32>, tensor<2304xf32> -> tensor<2304xf32>
  %sa = tc.reduce_sum %a2 {axes = array<i64: 0>} : tensor<2304xf32> -> tensor<f32>
  %bf = tc.cast %b : tensor<3072xbf16> to tensor<3072xf32>
  %b2 = tc.mul %bf, %bf : tensor<3072xf32>, tensor<3072xf32> -> tensor<3072xf32>
  %sb = tc.reduce_sum %b2 {axes = array<i64: 0>} : tensor<3072xf32> -> tensor<f32>
  %c2 = tc.mul %c, %c : tensor<768xf32>, tensor<768xf32> -> tensor<768xf32>
  %sc = tc.reduce_sum %c2 {axes = array<i64: 0>} : tensor<768xf32> -> tensor<f32>
  return %sa, %sb, %sc : tensor<f32>, tensor<f32>, tensor<f32>
}

// GPT-NeoX's written-out erf GELU backward (bf16): the divisions by the
// constant sqrt(2) become products by its reciprocal (within an ulp of the
// quotient), the erf and exp stay.
func.func @erf_gelu_grad(%x: tensor<256x1024xbf16>, %dy: tensor<256x1024xbf16>) -> tensor<256x1024xbf16> {
  %r2 = tc.constant dense<1.4140625> : tensor<bf16>
  %half = tc.constant dense<5.000000e-01> : tensor<bf16>
  %one = tc.constant dense<1.000000e+00> : tensor<bf16>
  %k = tc.constant dense<1.125000e+00> : tensor<bf16>
  %a = tc.div %x, %r2 : tensor<256x1024xbf16>, tensor<bf16> -> tensor<256x1024xbf16>
  %e = tc.erf %a : tensor<256x1024xbf16>
  %e1 = tc.add %e, %one : tensor<256x1024xbf16>, tensor<bf16> -> tensor<256x1024xbf16>
  %cdf = tc.mul %e1, %half : tensor<256x1024xbf16>, tensor<bf16> -> tensor<256x1024xbf16>
  %t1 = tc.mul %dy, %cdf : tensor<256x1024xbf16>, tensor<256x1024xbf16> -> tensor<256x1024xbf16>
  %dx = tc.mul %dy, %x : tensor<256x1024xbf16>, tensor<256x1024xbf16> -> tensor<256x1024xbf16>
  %dxh = tc.mul %dx, %half : tensor<256x1024xbf16>, tensor<bf16> -> tensor<256x1024xbf16>
  %a2 = tc.mul %a, %a : tensor<256x1024xbf16>, tensor<256x1024xbf16> -> tensor<256x1024xbf16>
  %na2 = tc.neg %a2 : tensor<256x1024xbf16>
  %ex = tc.exp %na2 : tensor<256x1024xbf16>
  %pdf = tc.mul %ex, %k : tensor<256x1024xbf16>, tensor<bf16> -> tensor<256x1024xbf16>
  %t2 = tc.mul %dxh, %pdf : tensor<256x1024xbf16>, tensor<256x1024xbf16> -> tensor<256x1024xbf16>
  %t3 = tc.div %t2, %r2 : tensor<256x1024xbf16>, tensor<bf16> -> tensor<256x1024xbf16>
  %g = tc.add %t1, %t3 : tensor<256x1024xbf16>, tensor<256x1024xbf16> -> tensor<256x1024xbf16>
  return %g : tensor<256x1024xbf16>
}

// Long sums of squares (a weight gradient's, for the grad-norm clip): split
// over blocks whose partials go to slots from the launch's first block, the
// row's length the launch's n, so the runtime runs consecutive ones as one
// grouped launch (the two bf16 matrices here, of different lengths and
// block counts).
func.func @long_sums(%a: tensor<768x3072xbf16>, %b: tensor<256x768xbf16>) -> (tensor<f32>, tensor<f32>) {
  %af = tc.cast %a : tensor<768x3072xbf16> to tensor<768x3072xf32>
  %a2 = tc.mul %af, %af : tensor<768x3072xf32>, tensor<768x3072xf32> -> tensor<768x3072xf32>
  %sa = tc.reduce_sum %a2 {axes = array<i64: 0, 1>} : tensor<768x3072xf32> -> tensor<f32>
  %bf = tc.cast %b : tensor<256x768xbf16> to tensor<256x768xf32>
  %b2 = tc.mul %bf, %bf : tensor<256x768xf32>, tensor<256x768xf32> -> tensor<256x768xf32>
  %sb = tc.reduce_sum %b2 {axes = array<i64: 0, 1>} : tensor<256x768xf32> -> tensor<f32>
  return %sa, %sb : tensor<f32>, tensor<f32>
}

// Rotary and attention around a projection made here (GPT-NeoX's per-head
// qkv [B, T, H, 3D]: q, k, v slices; a partial rotary over 16 of 64
// features), forward and backward, the backward's rotaries (tables cos and
// -sin) and dv going into the qkv gradient: in cases-exp.tca (tc-compile
// --experimental=rotary-in-place, wgmma-attention) the rotaries rotate q and
// k where the projection holds them and attention reads them there, and the
// attention backward writes dq, dk into the gradient, where their rotaries
// rotate them.
func.func @rotary_attention(%x: tensor<2x64x32xbf16>, %w: tensor<32x768xbf16>,
                            %c: tensor<2x64x8xbf16>, %s: tensor<2x64x8xbf16>,
                            %ns: tensor<2x64x8xbf16>, %g: tensor<2x4x64x64xbf16>)
    -> (tensor<2x4x64x64xbf16>, tensor<2x64x4x192xbf16>) {
  %p = tc.matmul %x, %w : tensor<2x64x32xbf16>, tensor<32x768xbf16> -> tensor<2x64x768xbf16>
  %qkv = tc.reshape %p : tensor<2x64x768xbf16> to tensor<2x64x4x192xbf16>
  %t = tc.transpose %qkv {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x64x4x192xbf16> -> tensor<2x4x64x192xbf16>
  %q = tc.slice %t {starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x64x192xbf16> to tensor<2x4x64x64xbf16>
  %k = tc.slice %t {starts = array<i64: 0, 0, 0, 64>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x64x192xbf16> to tensor<2x4x64x64xbf16>
  %v = tc.slice %t {starts = array<i64: 0, 0, 0, 128>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x64x192xbf16> to tensor<2x4x64x64xbf16>
  %qr = tc.rotary %q, %c, %s : (tensor<2x4x64x64xbf16>, tensor<2x64x8xbf16>, tensor<2x64x8xbf16>) -> tensor<2x4x64x64xbf16>
  %kr = tc.rotary %k, %c, %s : (tensor<2x4x64x64xbf16>, tensor<2x64x8xbf16>, tensor<2x64x8xbf16>) -> tensor<2x4x64x64xbf16>
  %o, %lse = tc.attention %qr, %kr, %v {scale = 0.125 : f64, causal = true}
      : (tensor<2x4x64x64xbf16>, tensor<2x4x64x64xbf16>, tensor<2x4x64x64xbf16>)
        -> (tensor<2x4x64x64xbf16>, tensor<2x4x64xf32>)
  %dq, %dk, %dv = tc.attention_grad %qr, %kr, %v, %o, %lse, %g {scale = 0.125 : f64, causal = true}
      : (tensor<2x4x64x64xbf16>, tensor<2x4x64x64xbf16>, tensor<2x4x64x64xbf16>,
         tensor<2x4x64x64xbf16>, tensor<2x4x64xf32>, tensor<2x4x64x64xbf16>)
        -> (tensor<2x4x64x64xbf16>, tensor<2x4x64x64xbf16>, tensor<2x4x64x64xbf16>)
  %dqr = tc.rotary %dq, %c, %ns : (tensor<2x4x64x64xbf16>, tensor<2x64x8xbf16>, tensor<2x64x8xbf16>) -> tensor<2x4x64x64xbf16>
  %dkr = tc.rotary %dk, %c, %ns : (tensor<2x4x64x64xbf16>, tensor<2x64x8xbf16>, tensor<2x64x8xbf16>) -> tensor<2x4x64x64xbf16>
  %cat = tc.concat %dqr, %dkr, %dv {axis = 3 : i64} : tensor<2x4x64x64xbf16>, tensor<2x4x64x64xbf16>, tensor<2x4x64x64xbf16> -> tensor<2x4x64x192xbf16>
  %ct = tc.transpose %cat {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x64x192xbf16> -> tensor<2x64x4x192xbf16>
  return %o, %ct : tensor<2x4x64x64xbf16>, tensor<2x64x4x192xbf16>
}

// Gathers that are not the embedding library call (a generic kernel): bool
// data along axis 0 (a padding mask indexed by positions, as the dynamo
// exporter writes HF's mask), f32 along a middle axis and i64 rows, with
// negative indices (the inputs' random ints are in [-6, 9]).
func.func @index_gathers(%m: tensor<32xi1>, %p: tensor<2x1x1x16xi64>, %x: tensor<3x12x5xf32>,
                         %i: tensor<4x2xi64>, %y: tensor<10x3xi64>)
    -> (tensor<2x1x1x16xi1>, tensor<3x4x2x5xf32>, tensor<4x2x3xi64>) {
  %a = tc.gather %m, %p {axis = 0 : i64} : tensor<32xi1>, tensor<2x1x1x16xi64> -> tensor<2x1x1x16xi1>
  %b = tc.gather %x, %i {axis = 1 : i64} : tensor<3x12x5xf32>, tensor<4x2xi64> -> tensor<3x4x2x5xf32>
  %c = tc.gather %y, %i {axis = 0 : i64} : tensor<10x3xi64>, tensor<4x2xi64> -> tensor<4x2x3xi64>
  return %a, %b, %c : tensor<2x1x1x16xi1>, tensor<3x4x2x5xf32>, tensor<4x2x3xi64>
}

// Transposes through shared-memory tiles (both sides of the plane >= 32):
// planes indexed by a leading dim, partial tiles on both sides (bf16 [3, 40,
// 72] -> [3, 72, 40], f32 [70, 33]); a 4-D permutation whose planes are
// [36, 40] with two plane dims around them; an fp8 plane of 100 x 200.
func.func @transposes(%x: tensor<3x40x72xbf16>, %y: tensor<70x33xf32>, %z: tensor<2x40x3x36xf32>,
                      %w: tensor<100x200xf32>)
    -> (tensor<3x72x40xbf16>, tensor<33x70xf32>, tensor<2x3x36x40xf32>, tensor<200x100xf8E5M2>) {
  %t = tc.transpose %x {permutation = array<i64: 0, 2, 1>} : tensor<3x40x72xbf16> -> tensor<3x72x40xbf16>
  %u = tc.transpose %y {permutation = array<i64: 1, 0>} : tensor<70x33xf32> -> tensor<33x70xf32>
  %v = tc.transpose %z {permutation = array<i64: 0, 2, 3, 1>} : tensor<2x40x3x36xf32> -> tensor<2x3x36x40xf32>
  %q = tc.cast %w : tensor<100x200xf32> to tensor<100x200xf8E5M2>
  %r = tc.transpose %q {permutation = array<i64: 1, 0>} : tensor<100x200xf8E5M2> -> tensor<200x100xf8E5M2>
  return %t, %u, %v, %r : tensor<3x72x40xbf16>, tensor<33x70xf32>, tensor<2x3x36x40xf32>, tensor<200x100xf8E5M2>
}

// Transposes by 32-bit words (1- and 2-byte elements whose sizes and strides
// are multiples of the word): fp8 planes of a batch over full and partial
// 128 x 128 tiles, bf16 over 64 x 64 tiles, and an fp8 whose 70 columns
// take the element tiles.
func.func @transposes_words(%x: tensor<2x260x136xf32>, %y: tensor<130x68xbf16>,
                            %z: tensor<33x70xf32>)
    -> (tensor<2x136x260xf8E4M3FN>, tensor<68x130xbf16>, tensor<70x33xf8E5M2>) {
  %q = tc.cast %x : tensor<2x260x136xf32> to tensor<2x260x136xf8E4M3FN>
  %t = tc.transpose %q {permutation = array<i64: 0, 2, 1>} : tensor<2x260x136xf8E4M3FN> -> tensor<2x136x260xf8E4M3FN>
  %u = tc.transpose %y {permutation = array<i64: 1, 0>} : tensor<130x68xbf16> -> tensor<68x130xbf16>
  %c = tc.cast %z : tensor<33x70xf32> to tensor<33x70xf8E5M2>
  %v = tc.transpose %c {permutation = array<i64: 1, 0>} : tensor<33x70xf8E5M2> -> tensor<70x33xf8E5M2>
  return %t, %u, %v : tensor<2x136x260xf8E4M3FN>, tensor<68x130xbf16>, tensor<70x33xf8E5M2>
}

// Column sums of an elementwise chain's result (a Linear layer's bias
// gradient; tc-fuse-bias-grad fusion-col-sums moves them into the fusion
// writing the values): bf16 through a reshape to [tokens, cols] (one column
// tile, 16-byte vectors); f16 over three column tiles, the last partial,
// keepdims; f32 with a broadcast operand (strided loads: a column a lane).
func.func @col_sum_bf16(%x: tensor<4x64x96xbf16>, %g: tensor<4x64x96xbf16>)
    -> (tensor<4x64x96xbf16>, tensor<96xbf16>) {
  %e = tc.erf %x : tensor<4x64x96xbf16>
  %d = tc.mul %e, %g : tensor<4x64x96xbf16>, tensor<4x64x96xbf16> -> tensor<4x64x96xbf16>
  %m = tc.reshape %d : tensor<4x64x96xbf16> to tensor<256x96xbf16>
  %s = tc.reduce_sum %m {axes = array<i64: 0>} : tensor<256x96xbf16> -> tensor<96xbf16>
  return %d, %s : tensor<4x64x96xbf16>, tensor<96xbf16>
}

func.func @col_sum_tiles(%x: tensor<512x600xf16>, %y: tensor<512x600xf16>)
    -> (tensor<512x600xf16>, tensor<1x600xf16>) {
  %a = tc.add %x, %y : tensor<512x600xf16>, tensor<512x600xf16> -> tensor<512x600xf16>
  %t = tc.tanh %a : tensor<512x600xf16>
  %s = tc.reduce_sum %t {axes = array<i64: 0>, keepdims = true} : tensor<512x600xf16> -> tensor<1x600xf16>
  return %t, %s : tensor<512x600xf16>, tensor<1x600xf16>
}

func.func @col_sum_strided(%x: tensor<300x40xf32>, %b: tensor<40xf32>)
    -> (tensor<300x40xf32>, tensor<40xf32>) {
  %a = tc.add %x, %b : tensor<300x40xf32>, tensor<40xf32> -> tensor<300x40xf32>
  %e = tc.exp %a : tensor<300x40xf32>
  %s = tc.reduce_sum %e {axes = array<i64: 0>} : tensor<300x40xf32> -> tensor<40xf32>
  return %e, %s : tensor<300x40xf32>, tensor<40xf32>
}
