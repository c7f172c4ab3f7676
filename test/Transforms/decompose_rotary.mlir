// RUN: tc-opt %s --split-input-file --tc-decompose-rotary | FileCheck %s

// Tests the rotate_half layout with partial rotary (R = 4 of D = 6): the two
// halves of the first 4 features, cos/sin as [B, 1, S, R/2], the pass-through
// features concatenated back.
// CHECK-LABEL: func.func @half
func.func @half(%x: tensor<1x2x3x6xf32>, %c: tensor<1x3x2xf32>, %s: tensor<1x3x2xf32>) -> tensor<1x2x3x6xf32> {
  // CHECK-NOT: tc.rotary
  // CHECK: %[[R:.+]] = tc.slice %arg0 {starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<1x2x3x6xf32> to tensor<1x2x3x4xf32>
  // CHECK: %[[X1:.+]] = tc.slice %[[R]] {starts = array<i64: 0, 0, 0, 0>, {{.*}}} : tensor<1x2x3x4xf32> to tensor<1x2x3x2xf32>
  // CHECK: %[[X2:.+]] = tc.slice %[[R]] {starts = array<i64: 0, 0, 0, 2>, {{.*}}} : tensor<1x2x3x4xf32> to tensor<1x2x3x2xf32>
  // CHECK: %[[C:.+]] = tc.reshape %arg1 : tensor<1x3x2xf32> to tensor<1x1x3x2xf32>
  // CHECK: %[[S:.+]] = tc.reshape %arg2 : tensor<1x3x2xf32> to tensor<1x1x3x2xf32>
  // CHECK: tc.sub
  // CHECK: tc.add
  // CHECK: %[[Y:.+]] = tc.concat %{{.+}}, %{{.+}} {axis = 3 : i64} : tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x3x4xf32>
  // CHECK: %[[P:.+]] = tc.slice %arg0 {starts = array<i64: 0, 0, 0, 4>, {{.*}}} : tensor<1x2x3x6xf32> to tensor<1x2x3x2xf32>
  // CHECK: tc.concat %[[Y]], %[[P]] {axis = 3 : i64} : tensor<1x2x3x4xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x3x6xf32>
  %y = tc.rotary %x, %c, %s : (tensor<1x2x3x6xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>) -> tensor<1x2x3x6xf32>
  return %y : tensor<1x2x3x6xf32>
}

// -----

// Tests the interleaved layout: pairs through a [.., R/2, 2] view.
// CHECK-LABEL: func.func @interleaved
func.func @interleaved(%x: tensor<1x2x3x4xf32>, %c: tensor<1x3x2xf32>, %s: tensor<1x3x2xf32>) -> tensor<1x2x3x4xf32> {
  // CHECK-NOT: tc.rotary
  // CHECK: %[[V:.+]] = tc.reshape %arg0 : tensor<1x2x3x4xf32> to tensor<1x2x3x2x2xf32>
  // CHECK: tc.slice %[[V]] {starts = array<i64: 0, 0, 0, 0, 0>, {{.*}}} : tensor<1x2x3x2x2xf32> to tensor<1x2x3x2x1xf32>
  // CHECK: tc.slice %[[V]] {starts = array<i64: 0, 0, 0, 0, 1>, {{.*}}} : tensor<1x2x3x2x2xf32> to tensor<1x2x3x2x1xf32>
  // CHECK: tc.concat %{{.+}}, %{{.+}} {axis = 4 : i64} : tensor<1x2x3x2x1xf32>, tensor<1x2x3x2x1xf32> -> tensor<1x2x3x2x2xf32>
  // CHECK: tc.reshape %{{.+}} : tensor<1x2x3x2x2xf32> to tensor<1x2x3x4xf32>
  %y = tc.rotary %x, %c, %s {interleaved = true} : (tensor<1x2x3x4xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>) -> tensor<1x2x3x4xf32>
  return %y : tensor<1x2x3x4xf32>
}
