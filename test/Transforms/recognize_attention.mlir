// RUN: tc-opt %s --split-input-file --tc-recognize-attention --verify-diagnostics | FileCheck %s
// With key masks off (GPU targets) the padding mask stays unfused, with a remark:
// RUN: tc-opt %s --split-input-file --tc-recognize-attention=key-masks=false 2>&1 | FileCheck %s --check-prefix=NOKEY
// NOKEY: remark: attention left unfused (matmul / softmax / matmul): a padding mask (from graph input 'attention_mask'): key masks are off (key-masks=false)
// NOKEY-NOT: key_mask

// Tests the GPT-2 (torchscript export) form: k^T as a transpose of the
// [B, T, H, D] head split, a division by sqrt(D), masked_fill of -inf where a
// bool tril buffer is false (here: true where masked), softmax, matmul with v.
// CHECK-LABEL: func.func @gpt2_masked_fill
func.func @gpt2_masked_fill(%q: tensor<1x2x4x8xf32>, %kh: tensor<1x4x2x8xf32>,
                            %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  // CHECK: %[[K:.+]] = tc.transpose %arg1 {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
  // CHECK: %[[O:.+]], %{{.+}} = tc.attention %arg0, %[[K]], %arg2 {causal = true, scale = 0.3535533966
  // CHECK-SAME: -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  // CHECK-NOT: tc.softmax
  // CHECK-NOT: tc.matmul
  // CHECK: return %[[O]]
  %kt = tc.transpose %kh {permutation = array<i64: 0, 2, 3, 1>} : tensor<1x4x2x8xf32> -> tensor<1x2x8x4xf32>
  %s = tc.matmul %q, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x4x4xf32>
  %d = tc.constant dense<2.82842712474619> : tensor<f32>
  %t = tc.div %s, %d : tensor<1x2x4x4xf32>, tensor<f32> -> tensor<1x2x4x4xf32>
  %m = tc.constant dense<[[[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]]]> : tensor<1x1x4x4xi1>
  %inf = tc.constant dense<0xFF800000> : tensor<f32>
  %f = tc.select %m, %inf, %t : tensor<1x1x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %p = tc.softmax %f {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = tc.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Tests torch's scaled_dot_product_attention export with grouped-query
// attention: sqrt(scale) on q and on k^T, an additive float mask of 0 and the
// most negative f32 (finfo.min), and key/value repeated per query head
// (repeat_kv), which become 2 key/value heads.
// CHECK-LABEL: func.func @sdpa_gqa
func.func @sdpa_gqa(%q: tensor<1x4x3x2xf32>, %k: tensor<1x2x3x2xf32>,
                    %v: tensor<1x2x3x2xf32>) -> tensor<1x4x3x2xf32> {
  // CHECK: %[[O:.+]], %{{.+}} = tc.attention %arg0, %arg1, %arg2 {causal = true, scale = 0.49999998
  // CHECK-SAME: (tensor<1x4x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>) -> (tensor<1x4x3x2xf32>, tensor<1x4x3xf32>)
  // CHECK-NOT: tc.broadcast
  // CHECK: return %[[O]]
  %k5 = tc.reshape %k : tensor<1x2x3x2xf32> to tensor<1x2x1x3x2xf32>
  %kb = tc.broadcast %k5 : tensor<1x2x1x3x2xf32> to tensor<1x2x2x3x2xf32>
  %kr = tc.reshape %kb : tensor<1x2x2x3x2xf32> to tensor<1x4x3x2xf32>
  %v5 = tc.reshape %v : tensor<1x2x3x2xf32> to tensor<1x2x1x3x2xf32>
  %vb = tc.broadcast %v5 : tensor<1x2x1x3x2xf32> to tensor<1x2x2x3x2xf32>
  %vr = tc.reshape %vb : tensor<1x2x2x3x2xf32> to tensor<1x4x3x2xf32>
  %kt = tc.transpose %kr {permutation = array<i64: 0, 1, 3, 2>} : tensor<1x4x3x2xf32> -> tensor<1x4x2x3xf32>
  %c = tc.constant dense<0.707106769> : tensor<1xf32>
  %qs = tc.mul %q, %c : tensor<1x4x3x2xf32>, tensor<1xf32> -> tensor<1x4x3x2xf32>
  %ks = tc.mul %kt, %c : tensor<1x4x2x3xf32>, tensor<1xf32> -> tensor<1x4x2x3xf32>
  %s = tc.matmul %qs, %ks : tensor<1x4x3x2xf32>, tensor<1x4x2x3xf32> -> tensor<1x4x3x3xf32>
  %mask = tc.constant dense<[[0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]> : tensor<3x3xf32>
  %a = tc.add %s, %mask : tensor<1x4x3x3xf32>, tensor<3x3xf32> -> tensor<1x4x3x3xf32>
  %p = tc.softmax %a {axis = 3 : i64} : tensor<1x4x3x3xf32>
  %o = tc.matmul %p, %vr : tensor<1x4x3x3xf32>, tensor<1x4x3x2xf32> -> tensor<1x4x3x2xf32>
  return %o : tensor<1x4x3x2xf32>
}

// -----

// Tests the dynamo export's k^T: [B*H, T, D] -> [B*H, D, T] through reshapes,
// no mask (causal = false), and a scale held in a parameter (an initializer
// the exporter folded): the run-time factor moves onto q.
// CHECK-LABEL: func.func @dynamo_3d_unmasked
func.func @dynamo_3d_unmasked(%q: tensor<2x2x3x4xf32>, %k: tensor<2x2x5x4xf32>,
                              %v: tensor<2x2x5x4xf32>) -> tensor<2x2x3x4xf32> {
  // CHECK: %[[S:.+]] = tc.parameter "val_150"
  // CHECK: %[[Q:.+]] = tc.mul %arg0, %[[S]]
  // CHECK: %[[O:.+]], %{{.+}} = tc.attention %[[Q]], %arg1, %arg2 {scale = 1.000000e+00 : f64}
  // CHECK-NOT: tc.softmax
  // CHECK: return %[[O]]
  %r = tc.reshape %k : tensor<2x2x5x4xf32> to tensor<4x5x4xf32>
  %t = tc.transpose %r {permutation = array<i64: 0, 2, 1>} : tensor<4x5x4xf32> -> tensor<4x4x5xf32>
  %kt = tc.reshape %t : tensor<4x4x5xf32> to tensor<2x2x4x5xf32>
  %sc = tc.parameter "val_150" : tensor<1xf32>
  %ks = tc.mul %kt, %sc : tensor<2x2x4x5xf32>, tensor<1xf32> -> tensor<2x2x4x5xf32>
  %s = tc.matmul %q, %ks : tensor<2x2x3x4xf32>, tensor<2x2x4x5xf32> -> tensor<2x2x3x5xf32>
  %p = tc.softmax %s {axis = 3 : i64} : tensor<2x2x3x5xf32>
  %o = tc.matmul %p, %v : tensor<2x2x3x5xf32>, tensor<2x2x5x4xf32> -> tensor<2x2x3x4xf32>
  return %o : tensor<2x2x3x4xf32>
}

// -----

// Tests that a mask other than causal (here: the last key hidden from every
// query, as a padding mask) is left alone.
// CHECK-LABEL: func.func @padding_mask_kept
func.func @padding_mask_kept(%q: tensor<1x1x2x2xf32>, %kt: tensor<1x1x2x3xf32>,
                             %v: tensor<1x1x3x2xf32>) -> tensor<1x1x2x2xf32> {
  // CHECK-NOT: tc.attention
  // CHECK: tc.softmax
  %s = tc.matmul %q, %kt : tensor<1x1x2x2xf32>, tensor<1x1x2x3xf32> -> tensor<1x1x2x3xf32>
  %mask = tc.constant dense<[[0.0, 0.0, 0xFF800000], [0.0, 0.0, 0xFF800000]]> : tensor<2x3xf32>
  %a = tc.add %s, %mask : tensor<1x1x2x3xf32>, tensor<2x3xf32> -> tensor<1x1x2x3xf32>
  // expected-remark @+1 {{attention left unfused (matmul / softmax / matmul): the mask is not understood: a constant mask that is neither causal nor empty}}
  %p = tc.softmax %a {axis = 3 : i64} : tensor<1x1x2x3xf32>
  %o = tc.matmul %p, %v : tensor<1x1x2x3xf32>, tensor<1x1x3x2xf32> -> tensor<1x1x2x2xf32>
  return %o : tensor<1x1x2x2xf32>
}

// -----

// Tests that probabilities read elsewhere (returned, e.g. attention weights
// as an output) keep the unfused chain, as does a softmax over another axis.
// CHECK-LABEL: func.func @probabilities_returned
func.func @probabilities_returned(%q: tensor<1x1x2x2xf32>, %kt: tensor<1x1x2x2xf32>,
                                  %v: tensor<1x1x2x2xf32>)
    -> (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) {
  // CHECK-NOT: tc.attention
  // CHECK: tc.softmax
  %s = tc.matmul %q, %kt : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32> -> tensor<1x1x2x2xf32>
  %p = tc.softmax %s {axis = 3 : i64} : tensor<1x1x2x2xf32>
  %o = tc.matmul %p, %v : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32> -> tensor<1x1x2x2xf32>
  %s2 = tc.matmul %q, %kt : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32> -> tensor<1x1x2x2xf32>
  // expected-remark @+1 {{attention left unfused (matmul / softmax / matmul): the softmax is not over the last axis}}
  %p2 = tc.softmax %s2 {axis = 2 : i64} : tensor<1x1x2x2xf32>
  %o2 = tc.matmul %p2, %v : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32> -> tensor<1x1x2x2xf32>
  return %o, %p, %o2 : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>
}

// -----

// Tests the dynamo export of torch's decomposed SDPA: where(isnan(p), 0, p)
// between the softmax and the value matmul (a guard for rows whose every key
// is masked, which a causal mask never has), and a mask with a batch
// dimension whose slices agree.
// CHECK-LABEL: func.func @nan_guard
func.func @nan_guard(%q: tensor<2x1x2x2xf32>, %kt: tensor<2x1x2x2xf32>,
                     %v: tensor<2x1x2x2xf32>) -> tensor<2x1x2x2xf32> {
  // CHECK: %[[K:.+]] = tc.transpose %arg1 {permutation = array<i64: 0, 1, 3, 2>}
  // CHECK: %[[O:.+]], %{{.+}} = tc.attention %arg0, %[[K]], %arg2 {causal = true, scale = 1.000000e+00 : f64}
  // CHECK-NOT: tc.isnan
  // CHECK-NOT: tc.select
  // CHECK: return %[[O]]
  %s = tc.matmul %q, %kt : tensor<2x1x2x2xf32>, tensor<2x1x2x2xf32> -> tensor<2x1x2x2xf32>
  %mask = tc.constant dense<[[[[0.0, -3.40282347E+38], [0.0, 0.0]]], [[[0.0, -3.40282347E+38], [0.0, 0.0]]]]> : tensor<2x1x2x2xf32>
  %a = tc.add %s, %mask : tensor<2x1x2x2xf32>, tensor<2x1x2x2xf32> -> tensor<2x1x2x2xf32>
  %p = tc.softmax %a {axis = 3 : i64} : tensor<2x1x2x2xf32>
  %n = tc.isnan %p : tensor<2x1x2x2xf32> -> tensor<2x1x2x2xi1>
  %z = tc.constant dense<0.0> : tensor<f32>
  %g = tc.select %n, %z, %p : tensor<2x1x2x2xi1>, tensor<f32>, tensor<2x1x2x2xf32> -> tensor<2x1x2x2xf32>
  %o = tc.matmul %g, %v : tensor<2x1x2x2xf32>, tensor<2x1x2x2xf32> -> tensor<2x1x2x2xf32>
  return %o : tensor<2x1x2x2xf32>
}

// -----

// Tests a causal mask that is not a folded constant (HF's mask beyond the
// fold limit): le(key index, query index), and-ed with a splat true,
// broadcast over the batch, select(mask, 0, finfo.min) added to the scores.
// CHECK-LABEL: func.func @causal_from_construction
func.func @causal_from_construction(%q: tensor<2x1x4x2xf32>, %kt: tensor<2x1x2x4xf32>,
                                    %v: tensor<2x1x4x2xf32>) -> tensor<2x1x4x2xf32> {
  // CHECK: tc.attention %arg0, %{{.+}}, %arg2 {causal = true, scale = 1.000000e+00 : f64}
  // CHECK-NOT: tc.le
  // CHECK-NOT: tc.softmax
  %s = tc.matmul %q, %kt : tensor<2x1x4x2xf32>, tensor<2x1x2x4xf32> -> tensor<2x1x4x4xf32>
  %qi = tc.constant dense<[[[[0], [1], [2], [3]]], [[[0], [1], [2], [3]]]]> : tensor<2x1x4x1xi64>
  %kj = tc.constant dense<[[[[0, 1, 2, 3]]]]> : tensor<1x1x1x4xi64>
  %le = tc.le %kj, %qi : tensor<1x1x1x4xi64>, tensor<2x1x4x1xi64> -> tensor<2x1x4x4xi1>
  %t = tc.constant dense<true> : tensor<i1>
  %and = tc.and %t, %le : tensor<i1>, tensor<2x1x4x4xi1> -> tensor<2x1x4x4xi1>
  %zero = tc.constant dense<0.0> : tensor<f32>
  %min = tc.constant dense<-3.40282347E+38> : tensor<f32>
  %m = tc.select %and, %zero, %min : tensor<2x1x4x4xi1>, tensor<f32>, tensor<f32> -> tensor<2x1x4x4xf32>
  %a = tc.add %s, %m : tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32> -> tensor<2x1x4x4xf32>
  %p = tc.softmax %a {axis = 3 : i64} : tensor<2x1x4x4xf32>
  %o = tc.matmul %p, %v : tensor<2x1x4x4xf32>, tensor<2x1x4x2xf32> -> tensor<2x1x4x2xf32>
  return %o : tensor<2x1x4x2xf32>
}

// -----

// Tests the same built as ge(key index - 1, query index), masked where true
// (select(cond, -inf, scores)), with the indices as float aranges.
// CHECK-LABEL: func.func @causal_lt_shifted
func.func @causal_lt_shifted(%q: tensor<1x1x3x2xf32>, %kt: tensor<1x1x2x3xf32>,
                             %v: tensor<1x1x3x2xf32>) -> tensor<1x1x3x2xf32> {
  // CHECK: tc.attention %arg0, %{{.+}}, %arg2 {causal = true, scale = 1.000000e+00 : f64}
  %s = tc.matmul %q, %kt : tensor<1x1x3x2xf32>, tensor<1x1x2x3xf32> -> tensor<1x1x3x3xf32>
  %qi = tc.constant dense<[[0.0], [1.0], [2.0]]> : tensor<3x1xf32>
  %kj = tc.constant dense<[0.0, 1.0, 2.0]> : tensor<3xf32>
  %one = tc.constant dense<1.0> : tensor<f32>
  %k1 = tc.sub %kj, %one : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  // key - 1 >= query  <=>  key > query: masked where true
  %after = tc.ge %k1, %qi : tensor<3xf32>, tensor<3x1xf32> -> tensor<3x3xi1>
  %ninf = tc.constant dense<0xFF800000> : tensor<f32>
  %m = tc.select %after, %ninf, %s : tensor<3x3xi1>, tensor<f32>, tensor<1x1x3x3xf32> -> tensor<1x1x3x3xf32>
  %p = tc.softmax %m {axis = 3 : i64} : tensor<1x1x3x3xf32>
  %o = tc.matmul %p, %v : tensor<1x1x3x3xf32>, tensor<1x1x3x2xf32> -> tensor<1x1x3x2xf32>
  return %o : tensor<1x1x3x2xf32>
}

// -----

// Tests a padding mask as HF builds it: attention_mask[b, j] gathered from
// its flattened form at b * Tk + j (the exporters' GatherND), and-ed with the
// causal mask, select(mask, 0, finfo.min) added to the scores. It becomes the
// key_mask operand (cast to i1) and finfo.min the mask_fill.
// CHECK-LABEL: func.func @padding_mask
func.func @padding_mask(%q: tensor<2x1x3x2xf32>, %kt: tensor<2x1x2x3xf32>,
                        %v: tensor<2x1x3x2xf32>,
                        %am: tensor<2x3xi64> {tc.name = "attention_mask"}) -> tensor<2x1x3x2xf32> {
  // CHECK: %[[M:.+]] = tc.cast %arg3 : tensor<2x3xi64> to tensor<2x3xi1>
  // CHECK: tc.attention %arg0, %{{.+}}, %arg2 key_mask %[[M]] {causal = true, mask_fill = -3.4028234663852886E+38 : f64, scale = 1.000000e+00 : f64}
  // CHECK-NOT: tc.softmax
  %s = tc.matmul %q, %kt : tensor<2x1x3x2xf32>, tensor<2x1x2x3xf32> -> tensor<2x1x3x3xf32>
  %flat = tc.reshape %am : tensor<2x3xi64> to tensor<6xi64>
  %idx = tc.constant dense<[[[[0, 1, 2]]], [[[3, 4, 5]]]]> : tensor<2x1x1x3xi64>
  %pad = tc.gather %flat, %idx {axis = 0 : i64} : tensor<6xi64>, tensor<2x1x1x3xi64> -> tensor<2x1x1x3xi64>
  %zi = tc.constant dense<0> : tensor<i64>
  %vis = tc.ne %pad, %zi : tensor<2x1x1x3xi64>, tensor<i64> -> tensor<2x1x1x3xi1>
  %causal = tc.constant dense<[[true, false, false], [true, true, false], [true, true, true]]> : tensor<3x3xi1>
  %both = tc.and %causal, %vis : tensor<3x3xi1>, tensor<2x1x1x3xi1> -> tensor<2x1x3x3xi1>
  %zero = tc.constant dense<0.0> : tensor<f32>
  %min = tc.constant dense<-3.40282347E+38> : tensor<f32>
  %m = tc.select %both, %zero, %min : tensor<2x1x3x3xi1>, tensor<f32>, tensor<f32> -> tensor<2x1x3x3xf32>
  %a = tc.add %s, %m : tensor<2x1x3x3xf32>, tensor<2x1x3x3xf32> -> tensor<2x1x3x3xf32>
  %p = tc.softmax %a {axis = 3 : i64} : tensor<2x1x3x3xf32>
  %o = tc.matmul %p, %v : tensor<2x1x3x3xf32>, tensor<2x1x3x2xf32> -> tensor<2x1x3x2xf32>
  return %o : tensor<2x1x3x2xf32>
}


// -----

// Tests that a mask built from a graph input in a way that is not a padding
// mask and an offset causal mask (one key too many) stay unfused, each with
// a remark saying why.
// CHECK-LABEL: func.func @unfused_with_reasons
func.func @unfused_with_reasons(%q: tensor<1x1x3x2xf32>, %kt: tensor<1x1x2x3xf32>,
                                %v: tensor<1x1x3x2xf32>,
                                %am: tensor<1x1x1x3xi1> {tc.name = "attention_mask"})
    -> (tensor<1x1x3x2xf32>, tensor<1x1x3x2xf32>) {
  // CHECK-NOT: tc.attention
  %s = tc.matmul %q, %kt : tensor<1x1x3x2xf32>, tensor<1x1x2x3xf32> -> tensor<1x1x3x3xf32>
  %zero = tc.constant dense<0.0> : tensor<f32>
  %min = tc.constant dense<-3.40282347E+38> : tensor<f32>
  %nam = tc.not %am : tensor<1x1x1x3xi1>
  %m = tc.select %nam, %zero, %min : tensor<1x1x1x3xi1>, tensor<f32>, tensor<f32> -> tensor<1x1x1x3xf32>
  %a = tc.add %s, %m : tensor<1x1x3x3xf32>, tensor<1x1x1x3xf32> -> tensor<1x1x3x3xf32>
  // expected-remark @+1 {{the mask is not understood: it depends on graph input 'attention_mask'}}
  %p = tc.softmax %a {axis = 3 : i64} : tensor<1x1x3x3xf32>
  %o = tc.matmul %p, %v : tensor<1x1x3x3xf32>, tensor<1x1x3x2xf32> -> tensor<1x1x3x2xf32>
  %s2 = tc.matmul %q, %kt : tensor<1x1x3x2xf32>, tensor<1x1x2x3xf32> -> tensor<1x1x3x3xf32>
  %qi = tc.constant dense<[[0], [1], [2]]> : tensor<3x1xi64>
  %kj = tc.constant dense<[0, 1, 2]> : tensor<3xi64>
  %one = tc.constant dense<1> : tensor<i64>
  %qi1 = tc.add %qi, %one : tensor<3x1xi64>, tensor<i64> -> tensor<3x1xi64>
  %le = tc.le %kj, %qi1 : tensor<3xi64>, tensor<3x1xi64> -> tensor<3x3xi1>
  %m2 = tc.select %le, %zero, %min : tensor<3x3xi1>, tensor<f32>, tensor<f32> -> tensor<3x3xf32>
  %a2 = tc.add %s2, %m2 : tensor<1x1x3x3xf32>, tensor<3x3xf32> -> tensor<1x1x3x3xf32>
  // expected-remark @+1 {{the mask hides other entries than the keys after each query}}
  %p2 = tc.softmax %a2 {axis = 3 : i64} : tensor<1x1x3x3xf32>
  %o2 = tc.matmul %p2, %v : tensor<1x1x3x3xf32>, tensor<1x1x3x2xf32> -> tensor<1x1x3x2xf32>
  return %o, %o2 : tensor<1x1x3x2xf32>, tensor<1x1x3x2xf32>
}
