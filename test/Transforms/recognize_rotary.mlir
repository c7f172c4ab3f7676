// RUN: tc-opt %s --split-input-file --tc-recognize-rotary | FileCheck %s

// Tests HF's written-out rotary (Llama's apply_rotary_pos_emb: tables
// cos/sin(concat(f, f)) unsqueezed to [1, 1, S, R], the products in either
// order): one tc.rotary over the tables' first halves, broadcast to the
// batch; the slices, negation and concat are gone.
// CHECK-LABEL: func.func @llama
// CHECK: %[[C:.+]] = tc.broadcast %{{.+}} : tensor<1x16x4xf32> to tensor<2x16x4xf32>
// CHECK: %[[S:.+]] = tc.broadcast %{{.+}} : tensor<1x16x4xf32> to tensor<2x16x4xf32>
// CHECK: %[[Y:.+]] = tc.rotary %arg0, %[[C]], %[[S]] : (tensor<2x4x16x8xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>) -> tensor<2x4x16x8xf32>
// CHECK-NOT: tc.neg
// CHECK: return %[[Y]]
func.func @llama(%x: tensor<2x4x16x8xf32>, %f: tensor<1x16x4xf32>) -> tensor<2x4x16x8xf32> {
  %e = tc.concat %f, %f {axis = 2 : i64} : tensor<1x16x4xf32>, tensor<1x16x4xf32> -> tensor<1x16x8xf32>
  %c3 = tc.cos %e : tensor<1x16x8xf32>
  %s3 = tc.sin %e : tensor<1x16x8xf32>
  %c = tc.reshape %c3 : tensor<1x16x8xf32> to tensor<1x1x16x8xf32>
  %s = tc.reshape %s3 : tensor<1x16x8xf32> to tensor<1x1x16x8xf32>
  %x1 = tc.slice %x {starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x8xf32> to tensor<2x4x16x4xf32>
  %x2 = tc.slice %x {starts = array<i64: 0, 0, 0, 4>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x8xf32> to tensor<2x4x16x4xf32>
  %n = tc.neg %x2 : tensor<2x4x16x4xf32>
  %r = tc.concat %n, %x1 {axis = 3 : i64} : tensor<2x4x16x4xf32>, tensor<2x4x16x4xf32> -> tensor<2x4x16x8xf32>
  %a = tc.mul %x, %c : tensor<2x4x16x8xf32>, tensor<1x1x16x8xf32> -> tensor<2x4x16x8xf32>
  %b = tc.mul %s, %r : tensor<1x1x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>
  %y = tc.add %b, %a : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>
  return %y : tensor<2x4x16x8xf32>
}

// -----

// Tests what is left alone: tables whose halves are not provably equal (an
// argument), and a rotate_half whose slice another op also reads.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: tc.rotary
// CHECK: return
func.func @left_alone(%x: tensor<2x4x16x8xf32>, %c: tensor<1x1x16x8xf32>, %s: tensor<1x1x16x8xf32>)
    -> (tensor<2x4x16x8xf32>, tensor<2x4x16x4xf32>) {
  %x1 = tc.slice %x {starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x8xf32> to tensor<2x4x16x4xf32>
  %x2 = tc.slice %x {starts = array<i64: 0, 0, 0, 4>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x16x8xf32> to tensor<2x4x16x4xf32>
  %n = tc.neg %x2 : tensor<2x4x16x4xf32>
  %r = tc.concat %n, %x1 {axis = 3 : i64} : tensor<2x4x16x4xf32>, tensor<2x4x16x4xf32> -> tensor<2x4x16x8xf32>
  %a = tc.mul %x, %c : tensor<2x4x16x8xf32>, tensor<1x1x16x8xf32> -> tensor<2x4x16x8xf32>
  %b = tc.mul %r, %s : tensor<2x4x16x8xf32>, tensor<1x1x16x8xf32> -> tensor<2x4x16x8xf32>
  %y = tc.add %a, %b : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>
  return %y, %x1 : tensor<2x4x16x8xf32>, tensor<2x4x16x4xf32>
}
