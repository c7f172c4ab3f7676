// RUN: tc-opt %s --tc-shadow-parameter-casts | FileCheck %s

// Tests that a cast of an f32 parameter to bf16 reads the parameter's
// persistent copy "shadow:<p>" in every function, that a function updating
// the parameter also returns the update cast as "update:shadow:<p>", and
// what keeps its casts: a parameter cast to two types, a cast of optimizer
// state, a cast of something else, a cast to f32.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<8x8xf32> {tc.name = "update:w"}
// CHECK-SAME: tensor<8x8xbf16> {tc.name = "update:shadow:w"})
// CHECK: %[[W:.+]] = tc.parameter "w" {trainable} : tensor<8x8xf32>
// CHECK-NEXT: %[[WB:.+]] = tc.parameter "shadow:w" : tensor<8x8xbf16>
// CHECK-NOT: tc.cast %[[W]]
// CHECK: tc.matmul %arg0, %[[WB]]
// CHECK: %[[V:.+]] = tc.parameter "v" : tensor<8x8xf32>
// CHECK: tc.cast %[[V]] : tensor<8x8xf32> to tensor<8x8xbf16>
// CHECK: tc.cast %[[V]] : tensor<8x8xf32> to tensor<8x8xf16>
// CHECK: %[[M:.+]] = tc.parameter "exp_avg:w" {tc.optimizer_state} : tensor<8x8xf32>
// CHECK: tc.cast %[[M]] : tensor<8x8xf32> to tensor<8x8xbf16>
// CHECK: %[[W2:.+]] = tc.sub %[[W]]
// CHECK: %[[C:.+]] = tc.cast %[[W2]] : tensor<8x8xf32> to tensor<8x8xbf16>
// CHECK: return %{{.+}}, %[[W2]], %[[C]] :
func.func @train_step(%x: tensor<4x8xbf16>, %g: tensor<8x8xf32>)
    -> (tensor<4x8xbf16> {tc.name = "y"}, tensor<8x8xf32> {tc.name = "update:w"}) {
  %w = tc.parameter "w" {trainable} : tensor<8x8xf32>
  %wb = tc.cast %w : tensor<8x8xf32> to tensor<8x8xbf16>
  %y = tc.matmul %x, %wb : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
  %v = tc.parameter "v" : tensor<8x8xf32>
  %vb = tc.cast %v : tensor<8x8xf32> to tensor<8x8xbf16>
  %vh = tc.cast %v : tensor<8x8xf32> to tensor<8x8xf16>
  %m = tc.parameter "exp_avg:w" {tc.optimizer_state} : tensor<8x8xf32>
  %mb = tc.cast %m : tensor<8x8xf32> to tensor<8x8xbf16>
  %y2 = tc.matmul %y, %vb : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
  %y3 = tc.matmul %y2, %mb : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
  %w2 = tc.sub %w, %g : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  return %y3, %w2 : tensor<4x8xbf16>, tensor<8x8xf32>
}

// A function that reads the copy without updating it keeps its results.
// CHECK-LABEL: func.func @infer
// CHECK-SAME: -> (tensor<4x8xbf16> {tc.name = "y"})
// CHECK: %[[S:.+]] = tc.parameter "shadow:w" : tensor<8x8xbf16>
// CHECK: tc.matmul %arg0, %[[S]]
func.func @infer(%x: tensor<4x8xbf16>) -> (tensor<4x8xbf16> {tc.name = "y"}) {
  %w = tc.parameter "w" {trainable} : tensor<8x8xf32>
  %wb = tc.cast %w : tensor<8x8xf32> to tensor<8x8xbf16>
  %y = tc.matmul %x, %wb : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
  return %y : tensor<4x8xbf16>
}

// A function that updates the parameter without reading its copy (an
// apply_step) writes the copy too, cast right after the update (where
// tc-fuse then puts the optimizer's kernel), not before the return.
// CHECK-LABEL: func.func @apply_step
// CHECK-SAME: tensor<8x8xbf16> {tc.name = "update:shadow:w"})
// CHECK: %[[U:.+]] = tc.sub
// CHECK-NEXT: %[[UC:.+]] = tc.cast %[[U]] : tensor<8x8xf32> to tensor<8x8xbf16>
// CHECK-NEXT: tc.mul %arg0, %arg0
// CHECK: return %[[U]], %{{.+}}, %[[UC]]
func.func @apply_step(%g: tensor<8x8xf32>)
    -> (tensor<8x8xf32> {tc.name = "update:w"}, tensor<8x8xf32> {tc.name = "g2"}) {
  %w = tc.parameter "w" {trainable} : tensor<8x8xf32>
  %w2 = tc.sub %w, %g : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %g2 = tc.mul %g, %g : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  return %w2, %g2 : tensor<8x8xf32>, tensor<8x8xf32>
}
