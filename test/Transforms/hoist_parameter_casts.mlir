// RUN: tc-opt %s --tc-hoist-parameter-casts | FileCheck %s

// Tests that the casts of parameters move right after their parameters (the
// other ops keep their order), and that a cast of anything else stays.
// CHECK-LABEL: func.func @hoist
// CHECK-NEXT: %[[W:.+]] = tc.parameter "w"
// CHECK-NEXT: tc.cast %[[W]] : tensor<8x8xf32> to tensor<8x8xbf16>
// CHECK-NEXT: %[[V:.+]] = tc.parameter "v"
// CHECK-NEXT: tc.cast %[[V]] : tensor<8x8xf32> to tensor<8x8xbf16>
// CHECK-NEXT: tc.exp %arg0
// CHECK-NEXT: tc.cast %{{.+}} : tensor<4x8xbf16> to tensor<4x8xf32>
// CHECK-NEXT: tc.matmul
func.func @hoist(%x: tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xf32>) {
  %w = tc.parameter "w" : tensor<8x8xf32>
  %v = tc.parameter "v" : tensor<8x8xf32>
  %y = tc.exp %x : tensor<4x8xbf16>
  %yf = tc.cast %y : tensor<4x8xbf16> to tensor<4x8xf32>
  %wb = tc.cast %w : tensor<8x8xf32> to tensor<8x8xbf16>
  %z = tc.matmul %y, %wb : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
  %vb = tc.cast %v : tensor<8x8xf32> to tensor<8x8xbf16>
  %u = tc.matmul %z, %vb : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
  return %u, %yf : tensor<4x8xbf16>, tensor<4x8xf32>
}
