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
