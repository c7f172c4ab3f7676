// RUN: tc-opt %s --split-input-file --tc-fuse-attention-rotary | FileCheck %s

// Tests that the backward's rotaries of dq and dk (in place where the
// attention backward writes them, tc.grads_through_rotary) go to the call:
// tc.attention_rotary names both, and the -sin made after the call (from a
// table made before it) moves before it.
// CHECK-LABEL: func.func @both(
// CHECK: %[[NS:.+]] = tc.neg %arg2
// CHECK: tc.attention_grad {{.+}} {causal = true, scale = 3.500000e-01 : f64, tc.attention_rotary = array<i1: true, true>, tc.grads_through_rotary = array<i1: true, true, false>}
// CHECK: tc.rotary %{{.+}}, %arg1, %[[NS]] {tc.out_transposed, tc.rotary_in_place}
// CHECK: tc.rotary %{{.+}}, %arg1, %[[NS]] {tc.out_transposed, tc.rotary_in_place}
func.func @both(%q: tensor<2x4x16x64xbf16>, %c: tensor<2x16x8xbf16>, %s: tensor<2x16x8xbf16>,
                %o: tensor<2x4x16x64xbf16>, %lse: tensor<2x4x16xf32>, %gt: tensor<2x4x16x64xbf16>)
    -> (tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>) {
  %dq, %dk, %dv = tc.attention_grad %q, %q, %q, %o, %lse, %gt {scale = 0.35 : f64, causal = true, tc.grads_through_rotary = array<i1: true, true, false>}
      : (tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>,
         tensor<2x4x16x64xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x64xbf16>)
        -> (tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>)
  %ns = tc.neg %s : tensor<2x16x8xbf16>
  %dqr = tc.rotary %dq, %c, %ns {tc.out_transposed, tc.rotary_in_place} : (tensor<2x4x16x64xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>) -> tensor<2x4x16x64xbf16>
  %dkr = tc.rotary %dk, %c, %ns {tc.out_transposed, tc.rotary_in_place} : (tensor<2x4x16x64xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>) -> tensor<2x4x16x64xbf16>
  return %dqr, %dkr, %dv : tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>
}

// -----

// Tests that the call takes one pair of tables: dk's rotary, with other
// tables than dq's, keeps its kernel.
// CHECK-LABEL: func.func @other_tables(
// CHECK: tc.attention_grad {{.+}} tc.attention_rotary = array<i1: true, false>
func.func @other_tables(%q: tensor<2x4x16x64xbf16>, %c: tensor<2x16x8xbf16>, %s: tensor<2x16x8xbf16>,
                        %c2: tensor<2x16x8xbf16>, %o: tensor<2x4x16x64xbf16>,
                        %lse: tensor<2x4x16xf32>, %gt: tensor<2x4x16x64xbf16>)
    -> (tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>) {
  %dq, %dk, %dv = tc.attention_grad %q, %q, %q, %o, %lse, %gt {scale = 0.35 : f64, causal = true, tc.grads_through_rotary = array<i1: true, true, false>}
      : (tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>,
         tensor<2x4x16x64xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x64xbf16>)
        -> (tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>)
  %dqr = tc.rotary %dq, %c, %s {tc.out_transposed, tc.rotary_in_place} : (tensor<2x4x16x64xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>) -> tensor<2x4x16x64xbf16>
  %dkr = tc.rotary %dk, %c2, %s {tc.out_transposed, tc.rotary_in_place} : (tensor<2x4x16x64xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>) -> tensor<2x4x16x64xbf16>
  return %dqr, %dkr, %dv : tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>
}

// -----

// Tests the calls left alone: an interleaved rotary (the pairs' layout the
// call does not take), a gradient not rotated in place, and a table made
// from a value the backward itself makes (it cannot move before the call).
// CHECK-LABEL: func.func @left_alone(
// CHECK-NOT: tc.attention_rotary
// CHECK: return
func.func @left_alone(%q: tensor<2x4x16x64xbf16>, %c: tensor<2x16x8xbf16>, %s: tensor<2x16x8xbf16>,
                      %o: tensor<2x4x16x64xbf16>, %lse: tensor<2x4x16xf32>, %gt: tensor<2x4x16x64xbf16>)
    -> (tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>,
        tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>) {
  %dq, %dk, %dv = tc.attention_grad %q, %q, %q, %o, %lse, %gt {scale = 0.35 : f64, causal = true, tc.grads_through_rotary = array<i1: true, true, false>}
      : (tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>,
         tensor<2x4x16x64xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x64xbf16>)
        -> (tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>)
  %dqr = tc.rotary %dq, %c, %s {interleaved = true, tc.out_transposed, tc.rotary_in_place} : (tensor<2x4x16x64xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>) -> tensor<2x4x16x64xbf16>
  %dkr = tc.rotary %dk, %c, %s {tc.out_transposed} : (tensor<2x4x16x64xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>) -> tensor<2x4x16x64xbf16>
  %dq2, %dk2, %dv2 = tc.attention_grad %q, %q, %q, %o, %lse, %gt {scale = 0.35 : f64, causal = true, tc.grads_through_rotary = array<i1: true, false, false>}
      : (tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>,
         tensor<2x4x16x64xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x64xbf16>)
        -> (tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>)
  %sl = tc.slice %dv2 {starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x64xbf16> to tensor<2x1x16x8xbf16>
  %t = tc.reshape %sl : tensor<2x1x16x8xbf16> to tensor<2x16x8xbf16>
  %dqr2 = tc.rotary %dq2, %c, %t {tc.out_transposed, tc.rotary_in_place} : (tensor<2x4x16x64xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>) -> tensor<2x4x16x64xbf16>
  return %dqr, %dkr, %dv, %dqr2, %dk2, %dv2 : tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>
}

// -----

// Tests GPT-NeoX's qkv column sums paired with the call (tc-fuse-bias-grad
// attention-head-col-sums): kept where the call takes both rotaries on the
// way (@neox_taken), undone on the call and its reduce_sum where it takes
// neither (@neox_untaken: an interleaved rotary), so that nothing sums the
// gradients before they are rotated.
// CHECK-LABEL: func.func @neox_taken(
// CHECK: tc.attention_grad {{.+}}tc.attention_rotary = array<i1: true, true>, tc.col_sum = 0 : i64
// CHECK: tc.reduce_sum {{.+}}tc.col_sum = 0 : i64
func.func @neox_taken(%q: tensor<2x4x16x64xbf16>, %c: tensor<2x16x8xbf16>, %s: tensor<2x16x8xbf16>,
                      %o: tensor<2x4x16x64xbf16>, %lse: tensor<2x4x16xf32>, %gt: tensor<2x4x16x64xbf16>)
    -> tensor<1x1x768xbf16> {
  %dq, %dk, %dv = tc.attention_grad %q, %q, %q, %o, %lse, %gt {scale = 0.35 : f64, causal = true, tc.col_sum = 0 : i64, tc.grads_through_rotary = array<i1: true, true, false>}
      : (tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>,
         tensor<2x4x16x64xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x64xbf16>)
        -> (tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>)
  %dqr = tc.rotary %dq, %c, %s {tc.out_transposed, tc.rotary_in_place} : (tensor<2x4x16x64xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>) -> tensor<2x4x16x64xbf16>
  %dkr = tc.rotary %dk, %c, %s {tc.out_transposed, tc.rotary_in_place} : (tensor<2x4x16x64xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>) -> tensor<2x4x16x64xbf16>
  %cat = tc.concat %dqr, %dkr, %dv {axis = 3 : i64} : tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16> -> tensor<2x4x16x192xbf16>
  %tr = tc.transpose %cat {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x192xbf16> -> tensor<2x16x4x192xbf16>
  %g = tc.reshape %tr : tensor<2x16x4x192xbf16> to tensor<2x16x768xbf16>
  %bias = tc.reduce_sum %g {axes = array<i64: 0, 1>, keepdims = true, tc.col_sum = 0 : i64} : tensor<2x16x768xbf16> -> tensor<1x1x768xbf16>
  return %bias : tensor<1x1x768xbf16>
}

// -----

// CHECK-LABEL: func.func @neox_untaken(
// CHECK-NOT: tc.col_sum
// CHECK: return
func.func @neox_untaken(%q: tensor<2x4x16x64xbf16>, %c: tensor<2x16x8xbf16>, %s: tensor<2x16x8xbf16>,
                        %o: tensor<2x4x16x64xbf16>, %lse: tensor<2x4x16xf32>, %gt: tensor<2x4x16x64xbf16>)
    -> tensor<1x1x768xbf16> {
  %dq, %dk, %dv = tc.attention_grad %q, %q, %q, %o, %lse, %gt {scale = 0.35 : f64, causal = true, tc.col_sum = 0 : i64, tc.grads_through_rotary = array<i1: true, true, false>}
      : (tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>,
         tensor<2x4x16x64xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x64xbf16>)
        -> (tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>)
  %dqr = tc.rotary %dq, %c, %s {interleaved = true, tc.out_transposed, tc.rotary_in_place} : (tensor<2x4x16x64xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>) -> tensor<2x4x16x64xbf16>
  %dkr = tc.rotary %dk, %c, %s {interleaved = true, tc.out_transposed, tc.rotary_in_place} : (tensor<2x4x16x64xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16>) -> tensor<2x4x16x64xbf16>
  %cat = tc.concat %dqr, %dkr, %dv {axis = 3 : i64} : tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16> -> tensor<2x4x16x192xbf16>
  %tr = tc.transpose %cat {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x192xbf16> -> tensor<2x16x4x192xbf16>
  %g = tc.reshape %tr : tensor<2x16x4x192xbf16> to tensor<2x16x768xbf16>
  %bias = tc.reduce_sum %g {axes = array<i64: 0, 1>, keepdims = true, tc.col_sum = 0 : i64} : tensor<2x16x768xbf16> -> tensor<1x1x768xbf16>
  return %bias : tensor<1x1x768xbf16>
}
