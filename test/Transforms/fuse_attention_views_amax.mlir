// RUN: tc-opt %s --split-input-file --tc-fuse-fp8-amax --tc-fuse-attention-views | FileCheck %s
// RUN: tc-opt %s --split-input-file --tc-fuse-fp8-amax --tc-fuse-attention-views --tc-lower-to-tcx | FileCheck %s --check-prefix=LOWER

// Tests tc-fuse-attention-views after tc-fuse-fp8-amax, the GPU pipeline's
// order: the attention ops that took an amax (for the quantizes of the
// output projection's input and of the fused qkv projection's gradient) are
// marked as they would be without one, the forward's output to be written
// through its transpose back (tc.out_transposed), dq, dk, dv into the
// concat (tc.grads_into_concat); the calls write each amax (has_amax;
// amax_of = 7, of the three gradients) that the quantizes read, and no
// kernel is left between the backward and its quantize.
// CHECK-LABEL: func.func @qkv_amax
// CHECK: %[[O:.+]], %{{.+}}, %[[OA:.+]] = tc.attention {{.+}} {causal = true, scale = 3.500000e-01 : f64, tc.out_transposed} : {{.+}} -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>, tensor<f32>)
// CHECK: tc.quantize %{{.+}} amax %[[OA]] : tensor<f32>
// CHECK: %{{.+}}, %{{.+}}, %{{.+}}, %[[GA:.+]] = tc.attention_grad {{.+}} {amax_of = 7 : i64, causal = true, scale = 3.500000e-01 : f64, tc.grads_into_concat} : {{.+}} -> ({{.+}}, tensor<f32>)
// CHECK: tc.quantize %{{.+}} amax %[[GA]] : tensor<f32>
// LOWER-LABEL: func.func @qkv_amax
// LOWER: %[[O:.+]] = tcx.alloc : <2x16x4x8xbf16>
// LOWER: %[[OA:.+]] = tcx.alloc : <f32>
// LOWER: tcx.library "attention_fwd" ins({{.+}}) outs(%[[O]], %{{.+}}, %[[OA]] : {{.+}}) {{{.*}}has_amax = true{{.*}}o_strides = array<i64: 512, 8, 32>
// LOWER: %[[OM:.+]] = tcx.view %[[O]][0] : <2x16x4x8xbf16> -> <32x32xbf16>
// LOWER: tcx.library "quantize_fp8" ins(%[[OM]], %[[OA]] :
// LOWER: %[[CAT:.+]] = tcx.alloc : <2x16x96xbf16>
// LOWER-DAG: %[[DQ:.+]] = tcx.view %[[CAT]][0] : <2x16x96xbf16> -> <2x16x4x8xbf16>
// LOWER-DAG: %[[DK:.+]] = tcx.view %[[CAT]][64] : <2x16x96xbf16> -> <2x16x4x8xbf16>
// LOWER-DAG: %[[DV:.+]] = tcx.view %[[CAT]][128] : <2x16x96xbf16> -> <2x16x4x8xbf16>
// LOWER: %[[GA:.+]] = tcx.alloc : <f32>
// LOWER: tcx.library "attention_bwd" ins({{.+}}) outs(%[[DQ]], %[[DK]], %[[DV]], %[[GA]], %{{.+}} : {{.+}}) {amax_of = 7 : i64, {{.+}}has_amax = true
// LOWER-NOT: tcx.launch
// LOWER: %[[CM:.+]] = tcx.view %[[CAT]][0] : <2x16x96xbf16> -> <32x96xbf16>
// LOWER: tcx.library "quantize_fp8" ins(%[[CM]], %[[GA]] :
func.func @qkv_amax(%qkv: tensor<2x16x96xbf16>, %g: tensor<2x16x4x8xbf16>)
    -> (tensor<32x32xf8E4M3FN>, tensor<1x1xf32>, tensor<32x96xf8E5M2>, tensor<1x1xf32>) {
  %q, %k, %v = tc.split %qkv {axis = 2 : i64} : tensor<2x16x96xbf16> -> tensor<2x16x32xbf16>, tensor<2x16x32xbf16>, tensor<2x16x32xbf16>
  %q4 = tc.reshape %q : tensor<2x16x32xbf16> to tensor<2x16x4x8xbf16>
  %k4 = tc.reshape %k : tensor<2x16x32xbf16> to tensor<2x16x4x8xbf16>
  %v4 = tc.reshape %v : tensor<2x16x32xbf16> to tensor<2x16x4x8xbf16>
  %qt = tc.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
  %kt = tc.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
  %vt = tc.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
  %gt = tc.transpose %g {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x8xbf16> -> tensor<2x4x16x8xbf16>
  %o, %lse = tc.attention %qt, %kt, %vt {scale = 0.35 : f64, causal = true}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
  %ot = tc.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %om = tc.reshape %ot : tensor<2x16x4x8xbf16> to tensor<32x32xbf16>
  %q0, %s0 = tc.quantize %om {block = array<i64: 32, 32>} : tensor<32x32xbf16> -> (tensor<32x32xf8E4M3FN>, tensor<1x1xf32>)
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
  %dm = tc.reshape %dqkv : tensor<2x16x96xbf16> to tensor<32x96xbf16>
  %q1, %s1 = tc.quantize %dm {block = array<i64: 32, 96>} : tensor<32x96xbf16> -> (tensor<32x96xf8E5M2>, tensor<1x1xf32>)
  return %q0, %s0, %q1, %s1 : tensor<32x32xf8E4M3FN>, tensor<1x1xf32>, tensor<32x96xf8E5M2>, tensor<1x1xf32>
}

// -----

// Tests an attention_grad that has an amax result already (of dvalue,
// amax_of = 4; the quantize reads it): tc-fuse-attention-views marks dq and
// dv, each read only by its head transpose, to be written through it, and
// the call writes the amax of dv so written.
// CHECK-LABEL: func.func @value_amax
// CHECK: %{{.+}}, %{{.+}}, %{{.+}}, %[[GA:.+]] = tc.attention_grad {{.+}} {amax_of = 4 : i64, causal = true, scale = 3.500000e-01 : f64, tc.grads_transposed = array<i1: true, false, true>}
// CHECK: tc.quantize %{{.+}} amax %[[GA]] : tensor<f32>
// LOWER-LABEL: func.func @value_amax
// LOWER: %[[DV:.+]] = tcx.alloc : <2x16x4x8xbf16>
// LOWER: %[[GA:.+]] = tcx.alloc : <f32>
// LOWER: tcx.library "attention_bwd" ins({{.+}}) outs(%{{.+}}, %{{.+}}, %[[DV]], %[[GA]], %{{.+}} : {{.+}}) {amax_of = 4 : i64, {{.+}}dv_strides = array<i64: 512, 8, 32>, has_amax = true
// LOWER: %[[VM:.+]] = tcx.view %[[DV]][0] : <2x16x4x8xbf16> -> <32x32xbf16>
// LOWER: tcx.library "quantize_fp8" ins(%[[VM]], %[[GA]] :
func.func @value_amax(%qt: tensor<2x4x16x8xbf16>, %kt: tensor<2x4x16x8xbf16>, %vt: tensor<2x4x16x8xbf16>,
                      %o: tensor<2x4x16x8xbf16>, %lse: tensor<2x4x16xf32>, %gt: tensor<2x4x16x8xbf16>)
    -> (tensor<2x16x4x8xbf16>, tensor<2x4x16x8xbf16>, tensor<32x32xf8E5M2>, tensor<1x1xf32>) {
  %dq, %dk, %dv, %amax = tc.attention_grad %qt, %kt, %vt, %o, %lse, %gt {scale = 0.35 : f64, causal = true, amax_of = 4 : i64}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>,
         tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<f32>)
  %dqt = tc.transpose %dq {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %dvt = tc.transpose %dv {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x16x8xbf16> -> tensor<2x16x4x8xbf16>
  %dvm = tc.reshape %dvt : tensor<2x16x4x8xbf16> to tensor<32x32xbf16>
  %q, %s = tc.quantize %dvm amax %amax : tensor<f32> {block = array<i64: 32, 32>} : tensor<32x32xbf16> -> (tensor<32x32xf8E5M2>, tensor<1x1xf32>)
  return %dqt, %dk, %q, %s : tensor<2x16x4x8xbf16>, tensor<2x4x16x8xbf16>, tensor<32x32xf8E5M2>, tensor<1x1xf32>
}
