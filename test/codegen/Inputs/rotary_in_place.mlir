// The rotary kernels tc-lower-to-tcx makes for a rotary rotated in place in
// its projection (tc-fuse-attention-views' rotary-in-place): tc.in_place,
// the view's strides both ways. bf16 with 8 of 32 features' pairs a vector
// (GPT-NeoX's partial rotary: the vector path); f32 with 2 pairs (the
// scalar path) and interleaved pairs.
func.func @rotary_in_place(%x: tensor<2x4x16x32xbf16>, %c: tensor<2x16x8xbf16>,
                           %s: tensor<2x16x8xbf16>, %y: tensor<1x3x5x8xf32>,
                           %d: tensor<1x5x2xf32>, %e: tensor<1x5x2xf32>)
    -> (tensor<2x4x16x32xbf16>, tensor<1x3x5x8xf32>) {
  %r = tc.rotary %x, %c, %s {tc.in_place, tc.in_strides = array<i64: 6144, 96, 384>, tc.out_strides = array<i64: 6144, 96, 384>} : (tensor<2x4x16x32xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>) -> tensor<2x4x16x32xbf16>
  %q = tc.rotary %y, %d, %e {interleaved = true, tc.in_place} : (tensor<1x3x5x8xf32>, tensor<1x5x2xf32>, tensor<1x5x2xf32>) -> tensor<1x3x5x8xf32>
  return %r, %q : tensor<2x4x16x32xbf16>, tensor<1x3x5x8xf32>
}
