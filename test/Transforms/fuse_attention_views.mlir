// RUN: tc-opt %s --split-input-file --tc-fuse-attention-views | FileCheck %s
// RUN: tc-opt %s --split-input-file --tc-fuse-attention-views="rotary-in-place=true" | FileCheck %s --check-prefix=INPLACE

// Tests that the forward's output, read by its transpose back to
// [B, T, H, D] and by the backward as its result, is marked to be written
// through the transpose, and that the backward's dq and dv (each read only
// by a head transpose) are, dk (returned as is) not.
// CHECK-LABEL: func.func @strided
// CHECK: tc.attention {{.+}} {causal = true, scale = 3.500000e-01 : f64, tc.out_transposed}
// CHECK: tc.attention_grad {{.+}} {causal = true, scale = 3.500000e-01 : f64, tc.grads_transposed = array<i1: true, false, true>}
func.func @strided(%qt: tensor<2x4x16x8xbf16>, %kt: tensor<2x4x16x8xbf16>, %vt: tensor<2x4x16x8xbf16>,
                   %gt: tensor<2x4x16x8xbf16>)
    -> (tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x16x4x8xbf16>) {
  %o, %lse = tc.attention %qt, %kt, %vt {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
  %ot = tc.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %dq, %dk, %dv = tc.attention_grad %qt, %kt, %vt, %o, %lse, %gt {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>,
         tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
  %dqt = tc.transpose %dq {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %dvt = tc.transpose %dv {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  return %ot, %dqt, %dk, %dvt : tensor<2x16x4x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x16x4x8xbf16>
}

// -----

// Tests that dq, dk, dv going through their transposes and reshapes into
// one concat along the last axis of [B, T, 3C] (a fused qkv projection's
// gradient) are marked to be written into it, and that an output returned
// as is is not written through anything.
// CHECK-LABEL: func.func @qkv
// CHECK: tc.attention {{.+}} {causal = true, scale = 3.500000e-01 : f64} :
// CHECK: tc.attention_grad {{.+}} {causal = true, scale = 3.500000e-01 : f64, tc.grads_into_concat}
func.func @qkv(%qt: tensor<2x4x16x8xbf16>, %kt: tensor<2x4x16x8xbf16>, %vt: tensor<2x4x16x8xbf16>,
               %gt: tensor<2x4x16x8xbf16>) -> (tensor<2x4x16x8xbf16>, tensor<2x16x96xbf16>) {
  %o, %lse = tc.attention %qt, %kt, %vt {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
  %dq, %dk, %dv = tc.attention_grad %qt, %kt, %vt, %o, %lse, %gt {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>,
         tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
  %dqt = tc.transpose %dq {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %dkt = tc.transpose %dk {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %dvt = tc.transpose %dv {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %dq3 = tc.reshape %dqt : tensor<2x16x4x8xbf16> to tensor<2x16x32xbf16>
  %dk3 = tc.reshape %dkt : tensor<2x16x4x8xbf16> to tensor<2x16x32xbf16>
  %dv3 = tc.reshape %dvt : tensor<2x16x4x8xbf16> to tensor<2x16x32xbf16>
  %dqkv = tc.concat %dq3, %dk3, %dv3 {axis = 2 : i64} : tensor<2x16x32xbf16>, tensor<2x16x32xbf16>, tensor<2x16x32xbf16> -> tensor<2x16x96xbf16>
  return %o, %dqkv : tensor<2x4x16x8xbf16>, tensor<2x16x96xbf16>
}

// -----

// Tests GPT-NeoX's per-head qkv [B, T, H, 3D] around attention: v, a slice
// of the head transpose read by attention alone, becomes the head transpose
// of a slice of the qkv (read in place by attention; q and k stay slices,
// which the rotary reads in place). In the backward the rotated dq and dk
// and the attention's dv are concatenated and transposed back: both rotary
// gradients and dv (tc.grads_transposed's third flag) are marked to be
// written into their pieces of the concat.
// With rotary-in-place, the forward's rotaries stay as they are (the qkv,
// a function argument, is not made in the function) while the backward's
// rotate dq and dk in place in their pieces of the concat, where the
// attention backward writes them (tc.grads_through_rotary).
// CHECK-LABEL: func.func @neox(
// CHECK-NOT: tc.grads_through_rotary
// INPLACE-LABEL: func.func @neox(
// INPLACE-NOT: tc.rotary_in_place
// INPLACE: tc.attention_grad {{.+}} tc.grads_through_rotary = array<i1: true, true, false>, tc.grads_transposed = array<i1: false, false, true>}
// INPLACE: tc.rotary %{{.+}} {tc.out_transposed, tc.rotary_in_place}
// INPLACE: tc.rotary %{{.+}} {tc.out_transposed, tc.rotary_in_place}
// INPLACE: return
// CHECK: %[[T:.+]] = tc.transpose %arg0 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x24xbf16> -> tensor<2x4x16x24xbf16>
// CHECK: %[[Q:.+]] = tc.slice %[[T]] {starts = array<i64: 0, 0, 0, 0>
// CHECK: %[[K:.+]] = tc.slice %[[T]] {starts = array<i64: 0, 0, 0, 8>
// CHECK: %[[VS:.+]] = tc.slice %arg0 {starts = array<i64: 0, 0, 0, 16>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x16x4x24xbf16> to tensor<2x16x4x8xbf16>
// CHECK: %[[V:.+]] = tc.transpose %[[VS]] {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
// CHECK: %[[QR:.+]] = tc.rotary %[[Q]], %arg1, %arg2 :
// CHECK: tc.attention %[[QR]], %{{.+}}, %[[V]]
// CHECK: tc.attention_grad {{.+}} {causal = true, scale = 3.500000e-01 : f64, tc.grads_transposed = array<i1: false, false, true>}
// CHECK: tc.rotary {{.+}} {tc.out_transposed}
// CHECK: tc.rotary {{.+}} {tc.out_transposed}
// CHECK: tc.concat
func.func @neox(%qkv: tensor<2x16x4x24xbf16>, %c: tensor<2x16x2xbf16>, %s: tensor<2x16x2xbf16>,
                %ns: tensor<2x16x2xbf16>, %gt: tensor<2x4x16x8xbf16>)
    -> (tensor<2x4x16x8xbf16>, tensor<2x16x4x24xbf16>) {
  %t = tc.transpose %qkv {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x24xbf16> -> tensor<2x4x16x24xbf16>
  %q = tc.slice %t {starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x8xbf16>
  %k = tc.slice %t {starts = array<i64: 0, 0, 0, 8>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x8xbf16>
  %v = tc.slice %t {starts = array<i64: 0, 0, 0, 16>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x8xbf16>
  %qr = tc.rotary %q, %c, %s : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %kr = tc.rotary %k, %c, %s : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %o, %lse = tc.attention %qr, %kr, %v {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
  %dq, %dk, %dv = tc.attention_grad %qr, %kr, %v, %o, %lse, %gt {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>,
         tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
  %dqr = tc.rotary %dq, %c, %ns : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %dkr = tc.rotary %dk, %c, %ns : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %cat = tc.concat %dqr, %dkr, %dv {axis = 3 : i64} : tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16> -> tensor<2x4x16x24xbf16>
  %ct = tc.transpose %cat {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x24xbf16> -> tensor<2x16x4x24xbf16>
  return %o, %ct : tensor<2x4x16x8xbf16>, tensor<2x16x4x24xbf16>
}

// -----

// Tests that a rotary whose only reader is a head transpose (Llama's dq
// going back to [B, T, H, D]) is marked, one whose result is also returned
// is not, and that a concat with a piece no kernel writes in place (a
// slice) marks none of its pieces.
// CHECK-LABEL: func.func @rotary_marks
// CHECK: tc.rotary %arg0, %arg1, %arg2 {tc.out_transposed}
// CHECK: tc.rotary %arg0, %arg1, %arg2 :
// CHECK: tc.rotary %arg0, %arg1, %arg2 :
// CHECK-NOT: tc.out_transposed
// CHECK: return
func.func @rotary_marks(%x: tensor<2x4x16x8xbf16>, %c: tensor<2x16x2xbf16>, %s: tensor<2x16x2xbf16>)
    -> (tensor<2x16x4x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4x16xbf16>) {
  %a = tc.rotary %x, %c, %s : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %at = tc.transpose %a {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %b = tc.rotary %x, %c, %s : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %bt = tc.transpose %b {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %d = tc.rotary %x, %c, %s : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %e = tc.slice %x {starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x8xbf16> to tensor<2x4x16x8xbf16>
  %cat = tc.concat %d, %e {axis = 3 : i64} : tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16> -> tensor<2x4x16x16xbf16>
  %ct = tc.transpose %cat {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x16xbf16> -> tensor<2x16x4x16xbf16>
  return %at, %b, %bt, %ct : tensor<2x16x4x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x16x4x8xbf16>, tensor<2x16x4x16xbf16>
}

// -----

// Tests tc-merge-projections' Llama layout: one [B, T, N] GEMM for q (2
// heads), k and v (1 head each, GQA). v, read by attention alone while q and
// k go through rotaries, is marked to be copied (tc.copy_slice: read in
// place it would keep the whole projection until the backward). In the
// backward the rotated dq, dk and the attention's dv go through their head
// transposes and reshapes into one [B, T, N] concat: both rotaries and dv
// are marked to be written into their pieces of it.
// CHECK-LABEL: func.func @merged_qkv
// CHECK: tc.slice %arg0 {starts = array<i64: 0, 0, 0>
// CHECK: tc.slice %arg0 {starts = array<i64: 0, 0, 8>
// CHECK: tc.slice %arg0 {starts = array<i64: 0, 0, 12>, strides = array<i64: 1, 1, 1>, tc.copy_slice}
// CHECK: tc.attention_grad {{.+}} {causal = true, scale = 5.000000e-01 : f64, tc.grads_transposed = array<i1: false, false, true>}
// CHECK: tc.rotary {{.+}} {tc.out_transposed}
// CHECK: tc.rotary {{.+}} {tc.out_transposed}
// CHECK: tc.concat
func.func @merged_qkv(%y: tensor<2x8x16xbf16>, %c: tensor<2x8x2xbf16>, %s: tensor<2x8x2xbf16>,
                      %ns: tensor<2x8x2xbf16>, %gt: tensor<2x2x8x4xbf16>)
    -> (tensor<2x2x8x4xbf16>, tensor<2x8x16xbf16>) {
  %q = tc.slice %y {starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : tensor<2x8x16xbf16> to tensor<2x8x8xbf16>
  %k = tc.slice %y {starts = array<i64: 0, 0, 8>, strides = array<i64: 1, 1, 1>} : tensor<2x8x16xbf16> to tensor<2x8x4xbf16>
  %v = tc.slice %y {starts = array<i64: 0, 0, 12>, strides = array<i64: 1, 1, 1>} : tensor<2x8x16xbf16> to tensor<2x8x4xbf16>
  %q4 = tc.reshape %q : tensor<2x8x8xbf16> to tensor<2x8x2x4xbf16>
  %k4 = tc.reshape %k : tensor<2x8x4xbf16> to tensor<2x8x1x4xbf16>
  %v4 = tc.reshape %v : tensor<2x8x4xbf16> to tensor<2x8x1x4xbf16>
  %qt = tc.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x8x2x4xbf16> -> tensor<2x2x8x4xbf16>
  %kt = tc.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x8x1x4xbf16> -> tensor<2x1x8x4xbf16>
  %vt = tc.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x8x1x4xbf16> -> tensor<2x1x8x4xbf16>
  %qr = tc.rotary %qt, %c, %s : (tensor<2x2x8x4xbf16>, tensor<2x8x2xbf16>, tensor<2x8x2xbf16>) -> tensor<2x2x8x4xbf16>
  %kr = tc.rotary %kt, %c, %s : (tensor<2x1x8x4xbf16>, tensor<2x8x2xbf16>, tensor<2x8x2xbf16>) -> tensor<2x1x8x4xbf16>
  %o, %lse = tc.attention %qr, %kr, %vt {scale = 0.5 : f64, causal = true}
      : (tensor<2x2x8x4xbf16>, tensor<2x1x8x4xbf16>, tensor<2x1x8x4xbf16>)
        -> (tensor<2x2x8x4xbf16>, tensor<2x2x8xf32>)
  %dq, %dk, %dv = tc.attention_grad %qr, %kr, %vt, %o, %lse, %gt {scale = 0.5 : f64, causal = true}
      : (tensor<2x2x8x4xbf16>, tensor<2x1x8x4xbf16>, tensor<2x1x8x4xbf16>,
         tensor<2x2x8x4xbf16>, tensor<2x2x8xf32>, tensor<2x2x8x4xbf16>)
        -> (tensor<2x2x8x4xbf16>, tensor<2x1x8x4xbf16>, tensor<2x1x8x4xbf16>)
  %dqr = tc.rotary %dq, %c, %ns : (tensor<2x2x8x4xbf16>, tensor<2x8x2xbf16>, tensor<2x8x2xbf16>) -> tensor<2x2x8x4xbf16>
  %dkr = tc.rotary %dk, %c, %ns : (tensor<2x1x8x4xbf16>, tensor<2x8x2xbf16>, tensor<2x8x2xbf16>) -> tensor<2x1x8x4xbf16>
  %dqt = tc.transpose %dqr {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x2x8x4xbf16> -> tensor<2x8x2x4xbf16>
  %dkt = tc.transpose %dkr {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x1x8x4xbf16> -> tensor<2x8x1x4xbf16>
  %dvt = tc.transpose %dv {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x1x8x4xbf16> -> tensor<2x8x1x4xbf16>
  %dq3 = tc.reshape %dqt : tensor<2x8x2x4xbf16> to tensor<2x8x8xbf16>
  %dk3 = tc.reshape %dkt : tensor<2x8x1x4xbf16> to tensor<2x8x4xbf16>
  %dv3 = tc.reshape %dvt : tensor<2x8x1x4xbf16> to tensor<2x8x4xbf16>
  %cat = tc.concat %dq3, %dk3, %dv3 {axis = 2 : i64} : tensor<2x8x8xbf16>, tensor<2x8x4xbf16>, tensor<2x8x4xbf16> -> tensor<2x8x16xbf16>
  return %o, %cat : tensor<2x2x8x4xbf16>, tensor<2x8x16xbf16>
}


// -----

// Tests rotary-in-place on GPT-NeoX's layout with the projection made in
// the function: q and k, slices of the per-head qkv that their rotaries
// alone read, are rotated where they are (tc.rotary_in_place: the rotaries'
// results are read by attention ops alone), and v, the projection then
// living until the backward, stays a slice read in place (not the head
// transpose of a slice). Without the option nothing is rotated in place.
// CHECK-LABEL: func.func @neox_projected
// CHECK-NOT: tc.rotary_in_place
// CHECK: return
// INPLACE-LABEL: func.func @neox_projected
// INPLACE: %[[T:.+]] = tc.transpose %{{.+}} {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x24xbf16> -> tensor<2x4x16x24xbf16>
// INPLACE: %[[Q:.+]] = tc.slice %[[T]] {starts = array<i64: 0, 0, 0, 0>
// INPLACE: %[[K:.+]] = tc.slice %[[T]] {starts = array<i64: 0, 0, 0, 8>
// INPLACE: %[[V:.+]] = tc.slice %[[T]] {starts = array<i64: 0, 0, 0, 16>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x8xbf16>
// INPLACE: %[[QR:.+]] = tc.rotary %[[Q]], %arg2, %arg3 {tc.rotary_in_place}
// INPLACE: %[[KR:.+]] = tc.rotary %[[K]], %arg2, %arg3 {tc.rotary_in_place}
// INPLACE: tc.attention %[[QR]], %[[KR]], %[[V]]
func.func @neox_projected(%x: tensor<2x16x8xbf16>, %w: tensor<8x96xbf16>, %c: tensor<2x16x2xbf16>,
                          %s: tensor<2x16x2xbf16>, %gt: tensor<2x4x16x8xbf16>)
    -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>) {
  %p = tc.matmul %x, %w : tensor<2x16x8xbf16>, tensor<8x96xbf16> -> tensor<2x16x96xbf16>
  %qkv = tc.reshape %p : tensor<2x16x96xbf16> to tensor<2x16x4x24xbf16>
  %t = tc.transpose %qkv {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x24xbf16> -> tensor<2x4x16x24xbf16>
  %q = tc.slice %t {starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x8xbf16>
  %k = tc.slice %t {starts = array<i64: 0, 0, 0, 8>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x8xbf16>
  %v = tc.slice %t {starts = array<i64: 0, 0, 0, 16>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x8xbf16>
  %qr = tc.rotary %q, %c, %s : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %kr = tc.rotary %k, %c, %s : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %o, %lse = tc.attention %qr, %kr, %v {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
  %dq, %dk, %dv = tc.attention_grad %qr, %kr, %v, %o, %lse, %gt {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>,
         tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
  return %o, %dq, %dk, %dv : tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>
}

// -----

// Tests what keeps a rotary out of place with rotary-in-place: another
// value read out of the same projection overlapping q's features (a
// returned slice of them) and a rotary whose result something other than
// attention reads (returned). (@neox's projection, a function argument, is
// not rotated in place either: it is not made in the function.)
// INPLACE-LABEL: func.func @in_place_refused
// INPLACE-NOT: tc.rotary_in_place
// INPLACE: return
func.func @in_place_refused(%x: tensor<2x16x8xbf16>, %w: tensor<8x96xbf16>, %c: tensor<2x16x2xbf16>,
                            %s: tensor<2x16x2xbf16>)
    -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x4xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>) {
  %p = tc.matmul %x, %w : tensor<2x16x8xbf16>, tensor<8x96xbf16> -> tensor<2x16x96xbf16>
  %qkv = tc.reshape %p : tensor<2x16x96xbf16> to tensor<2x16x4x24xbf16>
  %t = tc.transpose %qkv {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x24xbf16> -> tensor<2x4x16x24xbf16>
  %q = tc.slice %t {starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x8xbf16>
  %q2 = tc.slice %t {starts = array<i64: 0, 0, 0, 4>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x4xbf16>
  %k = tc.slice %t {starts = array<i64: 0, 0, 0, 8>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x8xbf16>
  %v = tc.slice %t {starts = array<i64: 0, 0, 0, 16>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x24xbf16> to tensor<2x4x16x8xbf16>
  %qr = tc.rotary %q, %c, %s : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %kr = tc.rotary %k, %c, %s : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %o, %lse = tc.attention %qr, %kr, %v {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
  return %o, %q2, %kr, %v : tensor<2x4x16x8xbf16>, tensor<2x4x16x4xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>
}

// -----

// Tests GPT-NeoX's per-head qkv split (rather than sliced) into q, k, v, as
// some exports write it: v, a split piece read by attention alone, becomes
// the head transpose of a slice of the qkv, as a sliced v does; q and k stay
// split pieces (read in place by their rotaries, headSplitSource); with
// rotary-in-place (the projection made here) they are rotated in place and v
// stays a piece read in place.
// CHECK-LABEL: func.func @neox_split
// CHECK: %[[T:.+]] = tc.transpose %{{.+}} {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x24xbf16> -> tensor<2x4x16x24xbf16>
// CHECK: %[[VS:.+]] = tc.slice %{{.+}} {starts = array<i64: 0, 0, 0, 16>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x16x4x24xbf16> to tensor<2x16x4x8xbf16>
// CHECK: %[[V:.+]] = tc.transpose %[[VS]] {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
// CHECK: %[[S:.+]]:3 = tc.split %[[T]] {axis = 3 : i64}
// CHECK: %[[QR:.+]] = tc.rotary %[[S]]#0, %arg2, %arg3 :
// CHECK: tc.attention %[[QR]], %{{.+}}, %[[V]]
// INPLACE-LABEL: func.func @neox_split
// INPLACE: %[[S:.+]]:3 = tc.split
// INPLACE: %[[QR:.+]] = tc.rotary %[[S]]#0, %arg2, %arg3 {tc.rotary_in_place}
// INPLACE: %[[KR:.+]] = tc.rotary %[[S]]#1, %arg2, %arg3 {tc.rotary_in_place}
// INPLACE: tc.attention %[[QR]], %[[KR]], %[[S]]#2
func.func @neox_split(%x: tensor<2x16x8xbf16>, %w: tensor<8x96xbf16>, %c: tensor<2x16x2xbf16>,
                      %s: tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16> {
  %p = tc.matmul %x, %w : tensor<2x16x8xbf16>, tensor<8x96xbf16> -> tensor<2x16x96xbf16>
  %qkv = tc.reshape %p : tensor<2x16x96xbf16> to tensor<2x16x4x24xbf16>
  %t = tc.transpose %qkv {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x24xbf16> -> tensor<2x4x16x24xbf16>
  %q, %k, %v = tc.split %t {axis = 3 : i64} : tensor<2x4x16x24xbf16> -> tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>
  %qr = tc.rotary %q, %c, %s : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %kr = tc.rotary %k, %c, %s : (tensor<2x4x16x8xbf16>, tensor<2x16x2xbf16>, tensor<2x16x2xbf16>) -> tensor<2x4x16x8xbf16>
  %o, %lse = tc.attention %qr, %kr, %v {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
  return %o : tensor<2x4x16x8xbf16>
}
