// RUN: tc-opt %s --split-input-file --tc-concat-slice-grads | FileCheck %s

// Tests the qkv split's gradient of the dynamo exporter (three slices of
// the last axis): the add tree of three insert_slices (in any order) is one
// concat of dq, dk, dv.
// CHECK-LABEL: func.func @qkv
// CHECK-NEXT: %[[G:.+]] = tc.concat %arg0, %arg1, %arg2 {axis = 2 : i64} : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x24xf32>
// CHECK-NEXT: return %[[G]]
func.func @qkv(%dq: tensor<2x4x8xf32>, %dk: tensor<2x4x8xf32>, %dv: tensor<2x4x8xf32>) -> tensor<2x4x24xf32> {
  %a = tc.insert_slice %dq {starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : tensor<2x4x8xf32> to tensor<2x4x24xf32>
  %b = tc.insert_slice %dk {starts = array<i64: 0, 0, 8>, strides = array<i64: 1, 1, 1>} : tensor<2x4x8xf32> to tensor<2x4x24xf32>
  %c = tc.insert_slice %dv {starts = array<i64: 0, 0, 16>, strides = array<i64: 1, 1, 1>} : tensor<2x4x8xf32> to tensor<2x4x24xf32>
  %s = tc.add %c, %a : tensor<2x4x24xf32>, tensor<2x4x24xf32> -> tensor<2x4x24xf32>
  %g = tc.add %b, %s : tensor<2x4x24xf32>, tensor<2x4x24xf32> -> tensor<2x4x24xf32>
  return %g : tensor<2x4x24xf32>
}

// -----

// Tests a gap (a piece no gradient reaches): zeros fill it.
// CHECK-LABEL: func.func @gap
// CHECK: %[[Z:.+]] = tc.constant dense<0.000000e+00> : tensor<4x8xf32>
// CHECK: tc.concat %arg0, %[[Z]], %arg1 {axis = 1 : i64}
func.func @gap(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x24xf32> {
  %a = tc.insert_slice %x {starts = array<i64: 0, 0>, strides = array<i64: 1, 1>} : tensor<4x8xf32> to tensor<4x24xf32>
  %b = tc.insert_slice %y {starts = array<i64: 0, 16>, strides = array<i64: 1, 1>} : tensor<4x8xf32> to tensor<4x24xf32>
  %g = tc.add %a, %b : tensor<4x24xf32>, tensor<4x24xf32> -> tensor<4x24xf32>
  return %g : tensor<4x24xf32>
}

// -----

// Tests what stays: overlapping windows, a window along two axes, and an
// insert_slice another op also reads.
// CHECK-LABEL: func.func @stays
// CHECK-NOT: tc.concat
// CHECK: return
func.func @stays(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %z: tensor<2x8xf32>)
    -> (tensor<4x24xf32>, tensor<4x24xf32>, tensor<4x24xf32>) {
  %a = tc.insert_slice %x {starts = array<i64: 0, 0>, strides = array<i64: 1, 1>} : tensor<4x8xf32> to tensor<4x24xf32>
  %b = tc.insert_slice %y {starts = array<i64: 0, 4>, strides = array<i64: 1, 1>} : tensor<4x8xf32> to tensor<4x24xf32>
  %o = tc.add %a, %b : tensor<4x24xf32>, tensor<4x24xf32> -> tensor<4x24xf32>
  %c = tc.insert_slice %z {starts = array<i64: 1, 16>, strides = array<i64: 1, 1>} : tensor<2x8xf32> to tensor<4x24xf32>
  %d = tc.insert_slice %y {starts = array<i64: 0, 8>, strides = array<i64: 1, 1>} : tensor<4x8xf32> to tensor<4x24xf32>
  %t = tc.add %c, %d : tensor<4x24xf32>, tensor<4x24xf32> -> tensor<4x24xf32>
  %e = tc.insert_slice %x {starts = array<i64: 0, 16>, strides = array<i64: 1, 1>} : tensor<4x8xf32> to tensor<4x24xf32>
  %u = tc.add %d, %e : tensor<4x24xf32>, tensor<4x24xf32> -> tensor<4x24xf32>
  return %o, %t, %u : tensor<4x24xf32>, tensor<4x24xf32>, tensor<4x24xf32>
}
