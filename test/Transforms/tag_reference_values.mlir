// RUN: tc-opt %s --tc-tag-reference-values | FileCheck %s

// Tests the numbering of the op-level reference program (lowerToProgram):
// the two arguments are values 0 and 1, then every op's results in order, a
// multi-result op taking one id per result (its tag is [first id, number of
// results]); ops without results and the return are not tagged.
// CHECK-LABEL: func.func @ids
// CHECK: tc.add %{{.+}}, %{{.+}} {tc.ref = array<i64: 2, 1>}
// CHECK: tc.quantize %{{.+}} {block = array<i64: 4, 8>, tc.ref = array<i64: 3, 2>}
// CHECK: tc.mul %{{.+}}, %{{.+}} {tc.ref = array<i64: 5, 1>}
// CHECK-NOT: tc.ref
func.func @ids(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<1x1xf32>) {
  %0 = tc.add %x, %y : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %q, %s = tc.quantize %0 {block = array<i64: 4, 8>} : tensor<4x8xf32> -> (tensor<4x8xf8E4M3FN>, tensor<1x1xf32>)
  %1 = tc.mul %0, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return %1, %s : tensor<4x8xf32>, tensor<1x1xf32>
}
