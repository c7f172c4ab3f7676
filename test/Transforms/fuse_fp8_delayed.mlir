// RUN: tc-opt %s --split-input-file --tc-fuse-fp8-delayed | FileCheck %s

// Tests that tc-quantize-fp8's delayed chain of a bf16 operand (its f32
// cast, the amax, the saturating cast, the saturation count, the transposed
// copy) becomes one tc.quantize_delayed of the bf16 input, its results
// taking the uses (and the reference values) of the ops they replace.
// CHECK-LABEL: func.func @bf16_transposed
// CHECK-SAME: (%[[X:.+]]: tensor<64x32xbf16>, %[[S:.+]]: tensor<f32>)
// CHECK-NEXT: %[[Q:.+]], %[[M:.+]], %[[N:.+]], %[[T:.+]] = tc.quantize_delayed %[[X]], %[[S]] {tc.ref = array<i64: -1, 13, 5, 19, 14>} : tensor<64x32xbf16>, tensor<f32> -> (tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<32x64xf8E4M3FN>)
// CHECK-NEXT: return %[[Q]], %[[T]], %[[M]], %[[N]]
func.func @bf16_transposed(%x: tensor<64x32xbf16>, %s: tensor<f32>)
    -> (tensor<64x32xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>) {
  %xf = tc.cast %x {tc.ref = array<i64: 3, 1>} : tensor<64x32xbf16> to tensor<64x32xf32>
  %a = tc.abs %xf {tc.ref = array<i64: 4, 1>} : tensor<64x32xf32>
  %m = tc.reduce_max %a {axes = array<i64: 0, 1>, tc.ref = array<i64: 5, 1>} : tensor<64x32xf32> -> tensor<f32>
  %p = tc.mul %xf, %s {tc.ref = array<i64: 12, 1>} : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf32>
  %q = tc.cast %p {tc.ref = array<i64: 13, 1>} : tensor<64x32xf32> to tensor<64x32xf8E4M3FN>
  %t = tc.transpose %q {permutation = array<i64: 1, 0>, tc.ref = array<i64: 14, 1>} : tensor<64x32xf8E4M3FN> -> tensor<32x64xf8E4M3FN>
  %fmax = tc.constant dense<4.480000e+02> : tensor<f32>
  %ap = tc.abs %p : tensor<64x32xf32>
  %o = tc.gt %ap, %fmax : tensor<64x32xf32>, tensor<f32> -> tensor<64x32xi1>
  %of = tc.cast %o : tensor<64x32xi1> to tensor<64x32xf32>
  %n = tc.reduce_sum %of {axes = array<i64: 0, 1>, tc.ref = array<i64: 19, 1>} : tensor<64x32xf32> -> tensor<f32>
  return %q, %t, %m, %n : tensor<64x32xf8E4M3FN>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<f32>
}

// -----

// An f32 operand (no cast) read only as it is (no transposed copy), E5M2.
// CHECK-LABEL: func.func @f32_plain
// CHECK-SAME: (%[[X:.+]]: tensor<16x8xf32>, %[[S:.+]]: tensor<f32>)
// CHECK-NEXT: %[[Q:.+]], %[[M:.+]], %[[N:.+]] = tc.quantize_delayed %[[X]], %[[S]] : tensor<16x8xf32>, tensor<f32> -> (tensor<16x8xf8E5M2>, tensor<f32>, tensor<f32>)
// CHECK-NEXT: return %[[Q]], %[[M]], %[[N]]
func.func @f32_plain(%x: tensor<16x8xf32>, %s: tensor<f32>)
    -> (tensor<16x8xf8E5M2>, tensor<f32>, tensor<f32>) {
  %a = tc.abs %x : tensor<16x8xf32>
  %m = tc.reduce_max %a {axes = array<i64: 0, 1>} : tensor<16x8xf32> -> tensor<f32>
  %p = tc.mul %x, %s : tensor<16x8xf32>, tensor<f32> -> tensor<16x8xf32>
  %q = tc.cast %p : tensor<16x8xf32> to tensor<16x8xf8E5M2>
  %fmax = tc.constant dense<5.734400e+04> : tensor<f32>
  %ap = tc.abs %p : tensor<16x8xf32>
  %o = tc.gt %ap, %fmax : tensor<16x8xf32>, tensor<f32> -> tensor<16x8xi1>
  %of = tc.cast %o : tensor<16x8xi1> to tensor<16x8xf32>
  %n = tc.reduce_sum %of {axes = array<i64: 0, 1>} : tensor<16x8xf32> -> tensor<f32>
  return %q, %m, %n : tensor<16x8xf8E5M2>, tensor<f32>, tensor<f32>
}

// -----

// Another form stays: a limit that is not the format's largest finite
// value (448 for E4M3), and a cast that does not saturate.
// CHECK-LABEL: func.func @other_limit
// CHECK-NOT: tc.quantize_delayed
// CHECK: tc.reduce_sum
func.func @other_limit(%x: tensor<16x8xf32>, %s: tensor<f32>)
    -> (tensor<16x8xf8E4M3FN>, tensor<f32>, tensor<f32>) {
  %a = tc.abs %x : tensor<16x8xf32>
  %m = tc.reduce_max %a {axes = array<i64: 0, 1>} : tensor<16x8xf32> -> tensor<f32>
  %p = tc.mul %x, %s : tensor<16x8xf32>, tensor<f32> -> tensor<16x8xf32>
  %q = tc.cast %p : tensor<16x8xf32> to tensor<16x8xf8E4M3FN>
  %fmax = tc.constant dense<4.000000e+02> : tensor<f32>
  %ap = tc.abs %p : tensor<16x8xf32>
  %o = tc.gt %ap, %fmax : tensor<16x8xf32>, tensor<f32> -> tensor<16x8xi1>
  %of = tc.cast %o : tensor<16x8xi1> to tensor<16x8xf32>
  %n = tc.reduce_sum %of {axes = array<i64: 0, 1>} : tensor<16x8xf32> -> tensor<f32>
  return %q, %m, %n : tensor<16x8xf8E4M3FN>, tensor<f32>, tensor<f32>
}

// CHECK-LABEL: func.func @not_saturating
// CHECK-NOT: tc.quantize_delayed
func.func @not_saturating(%x: tensor<16x8xf32>, %s: tensor<f32>)
    -> (tensor<16x8xf8E4M3FN>, tensor<f32>, tensor<f32>) {
  %a = tc.abs %x : tensor<16x8xf32>
  %m = tc.reduce_max %a {axes = array<i64: 0, 1>} : tensor<16x8xf32> -> tensor<f32>
  %p = tc.mul %x, %s : tensor<16x8xf32>, tensor<f32> -> tensor<16x8xf32>
  %q = tc.cast %p {saturate = false} : tensor<16x8xf32> to tensor<16x8xf8E4M3FN>
  %fmax = tc.constant dense<4.480000e+02> : tensor<f32>
  %ap = tc.abs %p : tensor<16x8xf32>
  %o = tc.gt %ap, %fmax : tensor<16x8xf32>, tensor<f32> -> tensor<16x8xi1>
  %of = tc.cast %o : tensor<16x8xi1> to tensor<16x8xf32>
  %n = tc.reduce_sum %of {axes = array<i64: 0, 1>} : tensor<16x8xf32> -> tensor<f32>
  return %q, %m, %n : tensor<16x8xf8E4M3FN>, tensor<f32>, tensor<f32>
}

// -----

// The tensor's bookkeeping (tc-quantize-fp8's window of this amax and the
// stored ones, the next history a slice of it, the next scale's select
// chain, 1 / scale for the product) becomes one tc.fp8_scale_update right
// after the quantization, with the reference values of what it replaces.
// CHECK-LABEL: func.func @bookkeeping
// CHECK-SAME: (%[[X:.+]]: tensor<16x8xf32>, %[[S:.+]]: tensor<f32>, %[[H:.+]]: tensor<3xf32>)
// CHECK-NEXT: %[[Q:.+]], %[[M:.+]], %[[N:.+]] = tc.quantize_delayed %[[X]], %[[S]]
// CHECK-NEXT: %[[NS:.+]], %[[INV:.+]], %[[NH:.+]] = tc.fp8_scale_update %[[M]], %[[S]], %[[H]] {fmax = 4.480000e+02 : f64, tc.ref = array<i64: -1, 40, 30, 33>} : tensor<f32>, tensor<f32>, tensor<3xf32> -> (tensor<f32>, tensor<f32>, tensor<3xf32>)
// CHECK-NEXT: %[[R:.+]] = tc.reshape %[[INV]] : tensor<f32> to tensor<1x1xf32>
// CHECK-NEXT: return %[[Q]], %[[R]], %[[NH]], %[[NS]], %[[N]]
func.func @bookkeeping(%x: tensor<16x8xf32>, %s: tensor<f32>, %h: tensor<3xf32>)
    -> (tensor<16x8xf8E4M3FN>, tensor<1x1xf32>, tensor<3xf32>, tensor<f32>, tensor<f32>) {
  %zero = tc.constant dense<0.000000e+00> : tensor<f32>
  %fmax = tc.constant dense<4.480000e+02> : tensor<f32>
  %one = tc.constant dense<1.000000e+00> : tensor<f32>
  %big = tc.constant dense<3.40282347E+38> : tensor<f32>
  %a = tc.abs %x : tensor<16x8xf32>
  %m = tc.reduce_max %a {axes = array<i64: 0, 1>} : tensor<16x8xf32> -> tensor<f32>
  %p = tc.mul %x, %s : tensor<16x8xf32>, tensor<f32> -> tensor<16x8xf32>
  %q = tc.cast %p : tensor<16x8xf32> to tensor<16x8xf8E4M3FN>
  %inv = tc.div %one, %s {tc.ref = array<i64: 30, 1>} : tensor<f32>, tensor<f32> -> tensor<f32>
  %inv2 = tc.reshape %inv : tensor<f32> to tensor<1x1xf32>
  %ap = tc.abs %p : tensor<16x8xf32>
  %o = tc.gt %ap, %fmax : tensor<16x8xf32>, tensor<f32> -> tensor<16x8xi1>
  %of = tc.cast %o : tensor<16x8xi1> to tensor<16x8xf32>
  %n = tc.reduce_sum %of {axes = array<i64: 0, 1>} : tensor<16x8xf32> -> tensor<f32>
  %front = tc.reshape %m : tensor<f32> to tensor<1xf32>
  %w = tc.concat %front, %h {axis = 0 : i64} : tensor<1xf32>, tensor<3xf32> -> tensor<4xf32>
  %nh = tc.slice %w {starts = array<i64: 0>, strides = array<i64: 1>, tc.ref = array<i64: 33, 1>} : tensor<4xf32> to tensor<3xf32>
  %used = tc.reduce_max %w {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
  %pos = tc.gt %used, %zero : tensor<f32>, tensor<f32> -> tensor<i1>
  %inf = tc.isinf %used : tensor<f32> -> tensor<i1>
  %fin = tc.not %inf : tensor<i1>
  %ok = tc.and %pos, %fin : tensor<i1>, tensor<i1> -> tensor<i1>
  %quo = tc.div %fmax, %used : tensor<f32>, tensor<f32> -> tensor<f32>
  %ovf = tc.isinf %quo : tensor<f32> -> tensor<i1>
  %cap = tc.select %ovf, %big, %quo : tensor<i1>, tensor<f32>, tensor<f32> -> tensor<f32>
  %ns = tc.select %ok, %cap, %s {tc.ref = array<i64: 40, 1>} : tensor<i1>, tensor<f32>, tensor<f32> -> tensor<f32>
  return %q, %inv2, %nh, %ns, %n : tensor<16x8xf8E4M3FN>, tensor<1x1xf32>, tensor<3xf32>, tensor<f32>, tensor<f32>
}

// -----

// most_recent without a history (--fp8-amax-history 1): the scale from this
// step's amax alone, E5M2's largest finite value.
// CHECK-LABEL: func.func @most_recent
// CHECK: %[[Q:.+]], %[[M:.+]], %[[N:.+]] = tc.quantize_delayed
// CHECK-NEXT: %[[NS:.+]], %[[INV:.+]] = tc.fp8_scale_update %[[M]], %{{.+}} {fmax = 5.734400e+04 : f64, most_recent} : tensor<f32>, tensor<f32> -> (tensor<f32>, tensor<f32>)
// CHECK-NOT: tc.select
// CHECK: return %[[Q]], %[[INV]], %[[NS]], %[[N]]
func.func @most_recent(%x: tensor<16x8xf32>, %s: tensor<f32>)
    -> (tensor<16x8xf8E5M2>, tensor<f32>, tensor<f32>, tensor<f32>) {
  %zero = tc.constant dense<0.000000e+00> : tensor<f32>
  %fmax = tc.constant dense<5.734400e+04> : tensor<f32>
  %one = tc.constant dense<1.000000e+00> : tensor<f32>
  %big = tc.constant dense<3.40282347E+38> : tensor<f32>
  %a = tc.abs %x : tensor<16x8xf32>
  %m = tc.reduce_max %a {axes = array<i64: 0, 1>} : tensor<16x8xf32> -> tensor<f32>
  %p = tc.mul %x, %s : tensor<16x8xf32>, tensor<f32> -> tensor<16x8xf32>
  %q = tc.cast %p : tensor<16x8xf32> to tensor<16x8xf8E5M2>
  %inv = tc.div %one, %s : tensor<f32>, tensor<f32> -> tensor<f32>
  %ap = tc.abs %p : tensor<16x8xf32>
  %o = tc.gt %ap, %fmax : tensor<16x8xf32>, tensor<f32> -> tensor<16x8xi1>
  %of = tc.cast %o : tensor<16x8xi1> to tensor<16x8xf32>
  %n = tc.reduce_sum %of {axes = array<i64: 0, 1>} : tensor<16x8xf32> -> tensor<f32>
  %pos = tc.gt %m, %zero : tensor<f32>, tensor<f32> -> tensor<i1>
  %inf = tc.isinf %m : tensor<f32> -> tensor<i1>
  %fin = tc.not %inf : tensor<i1>
  %ok = tc.and %pos, %fin : tensor<i1>, tensor<i1> -> tensor<i1>
  %quo = tc.div %fmax, %m : tensor<f32>, tensor<f32> -> tensor<f32>
  %ovf = tc.isinf %quo : tensor<f32> -> tensor<i1>
  %cap = tc.select %ovf, %big, %quo : tensor<i1>, tensor<f32>, tensor<f32> -> tensor<f32>
  %ns = tc.select %ok, %cap, %s : tensor<i1>, tensor<f32>, tensor<f32> -> tensor<f32>
  return %q, %inv, %ns, %n : tensor<16x8xf8E5M2>, tensor<f32>, tensor<f32>, tensor<f32>
}

// -----

// A window max read elsewhere too: the bookkeeping stays as it is (the
// quantization is still fused).
// CHECK-LABEL: func.func @window_max_used
// CHECK: tc.quantize_delayed
// CHECK-NOT: tc.fp8_scale_update
// CHECK: tc.concat
func.func @window_max_used(%x: tensor<16x8xf32>, %s: tensor<f32>, %h: tensor<3xf32>)
    -> (tensor<16x8xf8E4M3FN>, tensor<f32>, tensor<3xf32>, tensor<f32>, tensor<f32>, tensor<f32>) {
  %zero = tc.constant dense<0.000000e+00> : tensor<f32>
  %fmax = tc.constant dense<4.480000e+02> : tensor<f32>
  %one = tc.constant dense<1.000000e+00> : tensor<f32>
  %big = tc.constant dense<3.40282347E+38> : tensor<f32>
  %a = tc.abs %x : tensor<16x8xf32>
  %m = tc.reduce_max %a {axes = array<i64: 0, 1>} : tensor<16x8xf32> -> tensor<f32>
  %p = tc.mul %x, %s : tensor<16x8xf32>, tensor<f32> -> tensor<16x8xf32>
  %q = tc.cast %p : tensor<16x8xf32> to tensor<16x8xf8E4M3FN>
  %inv = tc.div %one, %s : tensor<f32>, tensor<f32> -> tensor<f32>
  %ap = tc.abs %p : tensor<16x8xf32>
  %o = tc.gt %ap, %fmax : tensor<16x8xf32>, tensor<f32> -> tensor<16x8xi1>
  %of = tc.cast %o : tensor<16x8xi1> to tensor<16x8xf32>
  %n = tc.reduce_sum %of {axes = array<i64: 0, 1>} : tensor<16x8xf32> -> tensor<f32>
  %front = tc.reshape %m : tensor<f32> to tensor<1xf32>
  %w = tc.concat %front, %h {axis = 0 : i64} : tensor<1xf32>, tensor<3xf32> -> tensor<4xf32>
  %nh = tc.slice %w {starts = array<i64: 0>, strides = array<i64: 1>} : tensor<4xf32> to tensor<3xf32>
  %used = tc.reduce_max %w {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
  %pos = tc.gt %used, %zero : tensor<f32>, tensor<f32> -> tensor<i1>
  %inf = tc.isinf %used : tensor<f32> -> tensor<i1>
  %fin = tc.not %inf : tensor<i1>
  %ok = tc.and %pos, %fin : tensor<i1>, tensor<i1> -> tensor<i1>
  %quo = tc.div %fmax, %used : tensor<f32>, tensor<f32> -> tensor<f32>
  %ovf = tc.isinf %quo : tensor<f32> -> tensor<i1>
  %cap = tc.select %ovf, %big, %quo : tensor<i1>, tensor<f32>, tensor<f32> -> tensor<f32>
  %ns = tc.select %ok, %cap, %s : tensor<i1>, tensor<f32>, tensor<f32> -> tensor<f32>
  return %q, %inv, %nh, %ns, %n, %used : tensor<16x8xf8E4M3FN>, tensor<f32>, tensor<3xf32>, tensor<f32>, tensor<f32>, tensor<f32>
}
