// RUN: tc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(tc-pad-vocab{multiple=64}))' | FileCheck %s

// Tests a tied head (W [C, K], transpose_rhs) of 100 classes through a
// reshape and a cast to the loss: W is padded with 28 zero rows, the
// product gets the -inf bias on the padding, the reshape, the cast and the
// loss read 128 classes; the returned logits read the first 100 back.
// CHECK-LABEL: func.func @tied
// CHECK: %[[WP:.+]] = tc.pad %{{.+}} {high = array<i64: 28, 0>, low = array<i64: 0, 0>} : tensor<100x32xbf16> -> tensor<128x32xbf16>
// CHECK: %[[B:.+]] = tc.constant dense<"0x0000{{(0000)*}}80FF{{(80FF)*}}"> : tensor<128xbf16>
// CHECK: %[[P:.+]] = tc.matmul %{{.+}}, %[[WP]] {transpose_rhs = true} : tensor<2x4x32xbf16>, tensor<128x32xbf16> -> tensor<2x4x128xbf16>
// CHECK: %[[L:.+]] = tc.add %[[P]], %[[B]] : tensor<2x4x128xbf16>, tensor<128xbf16> -> tensor<2x4x128xbf16>
// CHECK: %[[R:.+]] = tc.reshape %[[L]] : tensor<2x4x128xbf16> to tensor<8x128xbf16>
// CHECK: %[[C:.+]] = tc.cast %[[R]] : tensor<8x128xbf16> to tensor<8x128xf32>
// CHECK: %[[LOSS:.+]] = tc.cross_entropy %[[C]], %{{.+}} : (tensor<8x128xf32>, tensor<8xi64>) -> tensor<f32>
// CHECK: %[[O:.+]] = tc.slice %[[L]] {starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : tensor<2x4x128xbf16> to tensor<2x4x100xbf16>
// CHECK: return %[[LOSS]], %[[O]]
func.func @tied(%x: tensor<2x4x32xbf16>, %w: tensor<100x32xbf16>, %y: tensor<8xi64>)
    -> (tensor<f32>, tensor<2x4x100xbf16>) {
  %l = tc.matmul %x, %w {transpose_rhs = true} : tensor<2x4x32xbf16>, tensor<100x32xbf16> -> tensor<2x4x100xbf16>
  %r = tc.reshape %l : tensor<2x4x100xbf16> to tensor<8x100xbf16>
  %c = tc.cast %r : tensor<8x100xbf16> to tensor<8x100xf32>
  %loss = tc.cross_entropy %c, %y {ignore_index = -100 : i64} : (tensor<8x100xf32>, tensor<8xi64>) -> tensor<f32>
  return %loss, %l : tensor<f32>, tensor<2x4x100xbf16>
}

// -----

// Tests an untied head read as [K, C] (no transpose): W is padded along its
// columns; the f32 bias holds -inf (0xFF800000) on the padding.
// CHECK-LABEL: func.func @untied
// CHECK: tc.pad %{{.+}} {high = array<i64: 0, 63>, low = array<i64: 0, 0>} : tensor<16x65xf32> -> tensor<16x128xf32>
// CHECK: tc.constant dense<"0x{{(00000000)+}}{{(000080FF)+}}"> : tensor<128xf32>
// CHECK: tc.matmul {{.+}} : tensor<8x16xf32>, tensor<16x128xf32> -> tensor<8x128xf32>
// CHECK: tc.cross_entropy {{.+}} : (tensor<8x128xf32>, tensor<8xi64>) -> tensor<f32>
func.func @untied(%x: tensor<8x16xf32>, %w: tensor<16x65xf32>, %y: tensor<8xi64>) -> tensor<f32> {
  %l = tc.matmul %x, %w : tensor<8x16xf32>, tensor<16x65xf32> -> tensor<8x65xf32>
  %loss = tc.cross_entropy %l, %y : (tensor<8x65xf32>, tensor<8xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests what is left alone: classes already a multiple of 64, a loss with
// class weights, and logits that are not a matmul's product (a softmax's
// input through an add here).
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: tc.pad
// CHECK: return
func.func @left_alone(%x: tensor<8x16xf32>, %w: tensor<128x16xf32>, %v: tensor<100x16xf32>,
                      %cw: tensor<100xf32>, %b: tensor<100xf32>, %y: tensor<8xi64>)
    -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  %l0 = tc.matmul %x, %w {transpose_rhs = true} : tensor<8x16xf32>, tensor<128x16xf32> -> tensor<8x128xf32>
  %a = tc.cross_entropy %l0, %y : (tensor<8x128xf32>, tensor<8xi64>) -> tensor<f32>
  %l1 = tc.matmul %x, %v {transpose_rhs = true} : tensor<8x16xf32>, tensor<100x16xf32> -> tensor<8x100xf32>
  %c = tc.cross_entropy %l1, %y, weight %cw : (tensor<8x100xf32>, tensor<8xi64>, tensor<100xf32>) -> tensor<f32>
  %l2 = tc.add %l1, %b : tensor<8x100xf32>, tensor<100xf32> -> tensor<8x100xf32>
  %d = tc.cross_entropy %l2, %y : (tensor<8x100xf32>, tensor<8xi64>) -> tensor<f32>
  return %a, %c, %d : tensor<f32>, tensor<f32>, tensor<f32>
}
