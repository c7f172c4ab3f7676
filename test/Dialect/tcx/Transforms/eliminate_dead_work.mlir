// RUN: tc-opt %s --split-input-file --tcx-eliminate-dead-work | FileCheck %s

// Tests that a transpose the matmul reads untransposed (its launch writes an
// alloc nobody reads) goes with its alloc and its kernel, and the matmul
// and the parameter it reads stay.
// CHECK-NOT: tcx.kernel
// CHECK-LABEL: func.func @linear
// CHECK-NEXT: %[[W:.+]] = tcx.param "w" {trainable} : <32x16xf32>
// CHECK-NEXT: %[[O:.+]] = tcx.alloc {kind = "output"} : <16x32xf32>
// CHECK-NEXT: tcx.matmul ins(%arg0, %[[W]] : {{.+}}) outs(%[[O]] : <16x32xf32>)
// CHECK-NEXT: return %[[O]]
tcx.kernel @linear_transpose_0 kind("transpose") {
^bb0(%arg0: tensor<32x16xf32>):
  %0 = tc.transpose %arg0 {permutation = array<i64: 1, 0>} : tensor<32x16xf32> -> tensor<16x32xf32>
  tcx.yield %0 : tensor<16x32xf32>
}
func.func @linear(%arg0: !tcx.buffer<16x16xf32>) -> !tcx.buffer<16x32xf32> {
  %0 = tcx.param "w" {trainable} : <32x16xf32>
  %1 = tcx.alloc : <16x32xf32>
  tcx.launch @linear_transpose_0 ins(%0 : !tcx.buffer<32x16xf32>) outs(%1 : !tcx.buffer<16x32xf32>) {elements = 512 : i64}
  %2 = tcx.alloc {kind = "output"} : <16x32xf32>
  tcx.matmul ins(%arg0, %0 : !tcx.buffer<16x16xf32>, !tcx.buffer<32x16xf32>) outs(%2 : <16x32xf32>) {k = 16 : i64, m = 16 : i64, n = 32 : i64, transpose_rhs = true}
  return %2 : !tcx.buffer<16x32xf32>
}

// -----

// Tests that a chain of dead work goes as a whole (the tanh's output is only
// read by a view nobody reads, the exp's only by the tanh), and that the
// work writing the returned buffer stays with its kernel.
// CHECK-NOT: tcx.kernel @chain_exp_0
// CHECK-NOT: tcx.kernel @chain_tanh_1
// CHECK-LABEL: tcx.kernel @chain_neg_2
// CHECK-LABEL: func.func @chain
// CHECK-NEXT: %[[O:.+]] = tcx.alloc {kind = "output"} : <8xf32>
// CHECK-NEXT: tcx.launch @chain_neg_2 ins(%arg0 : !tcx.buffer<8xf32>) outs(%[[O]] : !tcx.buffer<8xf32>)
// CHECK-NEXT: return %[[O]]
tcx.kernel @chain_exp_0 kind("elementwise") {
^bb0(%arg0: tensor<8xf32>):
  %0 = tc.exp %arg0 : tensor<8xf32>
  tcx.yield %0 : tensor<8xf32>
}
tcx.kernel @chain_tanh_1 kind("elementwise") {
^bb0(%arg0: tensor<8xf32>):
  %0 = tc.tanh %arg0 : tensor<8xf32>
  tcx.yield %0 : tensor<8xf32>
}
tcx.kernel @chain_neg_2 kind("elementwise") {
^bb0(%arg0: tensor<8xf32>):
  %0 = tc.neg %arg0 : tensor<8xf32>
  tcx.yield %0 : tensor<8xf32>
}
func.func @chain(%arg0: !tcx.buffer<8xf32>) -> !tcx.buffer<8xf32> {
  %0 = tcx.alloc : <8xf32>
  tcx.launch @chain_exp_0 ins(%arg0 : !tcx.buffer<8xf32>) outs(%0 : !tcx.buffer<8xf32>) {elements = 8 : i64}
  %1 = tcx.alloc : <8xf32>
  tcx.launch @chain_tanh_1 ins(%0 : !tcx.buffer<8xf32>) outs(%1 : !tcx.buffer<8xf32>) {elements = 8 : i64}
  %2 = tcx.view %1[0] : <8xf32> -> <2x4xf32>
  %3 = tcx.alloc {kind = "output"} : <8xf32>
  tcx.launch @chain_neg_2 ins(%arg0 : !tcx.buffer<8xf32>) outs(%3 : !tcx.buffer<8xf32>) {elements = 8 : i64}
  return %3 : !tcx.buffer<8xf32>
}

// -----

// Tests that work writing a persistent buffer (a parameter updated in
// place) is not dead though nothing in the function reads it.
// CHECK-LABEL: func.func @update
// CHECK: tcx.launch @update_neg_0
func.func @update(%arg0: !tcx.buffer<8xf32>) {
  %0 = tcx.param "w" {trainable} : <8xf32>
  tcx.launch @update_neg_0 ins(%arg0 : !tcx.buffer<8xf32>) outs(%0 : !tcx.buffer<8xf32>) {elements = 8 : i64}
  return
}
tcx.kernel @update_neg_0 kind("elementwise") {
^bb0(%arg0: tensor<8xf32>):
  %0 = tc.neg %arg0 : tensor<8xf32>
  tcx.yield %0 : tensor<8xf32>
}
