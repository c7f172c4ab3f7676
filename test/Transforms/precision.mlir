// RUN: tc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(tc-precision{mode=bf16}))' | FileCheck %s
// RUN: tc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(tc-precision{mode=tf32}))' | FileCheck %s --check-prefix=TF32
// RUN: tc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(tc-precision{mode=fp32}))' | FileCheck %s --check-prefix=FP32
// RUN: not tc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(tc-precision{mode=int4}))' 2>&1 | FileCheck %s --check-prefix=BAD

// Tests that an unknown mode is an error naming it.
// BAD: error: tc-precision: mode must be fp32, tf32, bf16, fp16, fp8 or fp4, got 'int4'

// Tests that matmul operands are cast to bf16 (a parameter once, right after
// its definition: an fp32 master weight), the bias add and gelu follow in
// bf16, and the result is cast back up for the function result.
// CHECK-LABEL: func.func @matmul
// CHECK-SAME: (%[[X:.+]]: tensor<2x8xf32> {tc.name = "x"}) -> (tensor<2x4xf32> {tc.name = "y"})
// CHECK: %[[XB:.+]] = tc.cast %[[X]] {tc.precision = "bf16", tc.precision_reason = "cast: to bf16 for bf16 compute"} : tensor<2x8xf32> to tensor<2x8xbf16>
// CHECK: %[[W:.+]] = tc.parameter "w" {tc.precision = "f32", tc.precision_reason = "parameter: fp32 master weight", trainable} : tensor<8x4xf32>
// CHECK: %[[WB:.+]] = tc.cast %[[W]] {{.*}} : tensor<8x4xf32> to tensor<8x4xbf16>
// CHECK: %[[B:.+]] = tc.parameter "b" {{.*}} : tensor<4xf32>
// CHECK: %[[BB:.+]] = tc.cast %[[B]] {{.*}} : tensor<4xf32> to tensor<4xbf16>
// CHECK: %[[Y:.+]] = tc.matmul %[[XB]], %[[WB]] {tc.precision = "bf16", tc.precision_reason = "matmul: bf16 operands, fp32 accumulation"} : tensor<2x8xbf16>, tensor<8x4xbf16> -> tensor<2x4xbf16>
// CHECK: %[[Z:.+]] = tc.add %[[Y]], %[[BB]] {tc.precision = "bf16", tc.precision_reason = "elementwise on bf16 inputs"} : tensor<2x4xbf16>, tensor<4xbf16> -> tensor<2x4xbf16>
// CHECK: %[[G:.+]] = tc.gelu %[[Z]] {approximate = "tanh", tc.precision = "bf16", tc.precision_reason = "elementwise on bf16 inputs"} : tensor<2x4xbf16>
// CHECK: %[[R:.+]] = tc.cast %[[G]] {tc.precision = "f32", tc.precision_reason = "cast: up to f32 for the function result"} : tensor<2x4xbf16> to tensor<2x4xf32>
// CHECK: return %[[R]] : tensor<2x4xf32>
func.func @matmul(%x: tensor<2x8xf32> {tc.name = "x"}) -> (tensor<2x4xf32> {tc.name = "y"}) {
  %w = tc.parameter "w" {trainable} : tensor<8x4xf32>
  %b = tc.parameter "b" {trainable} : tensor<4xf32>
  %y = tc.matmul %x, %w : tensor<2x8xf32>, tensor<8x4xf32> -> tensor<2x4xf32>
  %z = tc.add %y, %b : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
  %g = tc.gelu %z {approximate = "tanh"} : tensor<2x4xf32>
  return %g : tensor<2x4xf32>
}

// -----

// Tests that layer_norm and softmax read and produce f32 (the bf16 matmul
// result is cast up, the f32 scale/bias parameters are read directly), that
// the next matmul casts the f32 result down again, and that the bf16 copy of
// a parameter read by two matmuls is shared.
// CHECK-LABEL: func.func @norm
// CHECK: %[[W:.+]] = tc.parameter "w"
// CHECK: %[[WB:.+]] = tc.cast %[[W]] {{.*}} : tensor<8x8xf32> to tensor<8x8xbf16>
// CHECK: %[[G:.+]] = tc.parameter "g"
// CHECK: %[[B:.+]] = tc.parameter "b"
// CHECK: %[[Y:.+]] = tc.matmul %{{.+}}, %[[WB]] {{.*}} -> tensor<2x8xbf16>
// CHECK: %[[YF:.+]] = tc.cast %[[Y]] {tc.precision = "f32", tc.precision_reason = "cast: up to f32 for tc.layer_norm"} : tensor<2x8xbf16> to tensor<2x8xf32>
// CHECK: %[[N:.+]] = tc.layer_norm %[[YF]], scale %[[G]], bias %[[B]] {axis = 1 : i64, epsilon = 1.000000e-05 : f64, tc.precision = "f32", tc.precision_reason = "norm: kept in f32"} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
// CHECK: %[[S:.+]] = tc.softmax %[[N]] {axis = 1 : i64, tc.precision = "f32", tc.precision_reason = "softmax: kept in f32"} : tensor<2x8xf32>
// CHECK: %[[SB:.+]] = tc.cast %[[S]] {{.*}} : tensor<2x8xf32> to tensor<2x8xbf16>
// CHECK: tc.matmul %[[SB]], %[[WB]] {{.*}} -> tensor<2x8xbf16>
func.func @norm(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w = tc.parameter "w" {trainable} : tensor<8x8xf32>
  %g = tc.parameter "g" {trainable} : tensor<8xf32>
  %b = tc.parameter "b" {trainable} : tensor<8xf32>
  %y = tc.matmul %x, %w : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %n = tc.layer_norm %y, scale %g, bias %b {axis = 1 : i64, epsilon = 1.0e-05 : f64}
      : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %s = tc.softmax %n {axis = 1 : i64} : tensor<2x8xf32>
  %r = tc.matmul %s, %w : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}

// -----

// Tests that a norm of bf16 data whose every reader casts its output down
// reads and writes bf16 rows (f32 statistics inside, the f32 scale and bias
// read as they are): no cast up of the input, no cast down of the output;
// a norm with an f32 reader (the softmax) keeps its f32 output.
// CHECK-LABEL: func.func @norm_bf16_rows
// CHECK: %[[G:.+]] = tc.parameter "g"
// CHECK: %[[Y:.+]] = tc.matmul {{.*}} -> tensor<2x8xbf16>
// CHECK-NOT: tc.cast %[[Y]]
// CHECK: %[[N:.+]] = tc.layer_norm %[[Y]], scale %[[G]] {axis = 1 : i64, epsilon = 1.000000e-05 : f64, tc.precision = "bf16", tc.precision_reason = "norm: bf16 rows, f32 statistics and weights"} : (tensor<2x8xbf16>, tensor<8xf32>) -> tensor<2x8xbf16>
// CHECK: tc.matmul %[[N]], %{{.+}} {{.*}} -> tensor<2x8xbf16>
// CHECK: tc.layer_norm %{{.+}}, scale %[[G]] {{.*}}tc.precision = "f32"{{.*}} -> tensor<2x8xf32>
// CHECK: tc.softmax
func.func @norm_bf16_rows(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w = tc.parameter "w" {trainable} : tensor<8x8xf32>
  %g = tc.parameter "g" {trainable} : tensor<8xf32>
  %y = tc.matmul %x, %w : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %n = tc.layer_norm %y, scale %g {axis = 1 : i64, epsilon = 1.0e-05 : f64}
      : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %r = tc.matmul %n, %w : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %m = tc.layer_norm %r, scale %g {axis = 1 : i64, epsilon = 1.0e-05 : f64}
      : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %s = tc.softmax %m {axis = 1 : i64} : tensor<2x8xf32>
  return %s : tensor<2x8xf32>
}

// -----

// Tests that an unfused attention's additive mask, read only by the softmax,
// is added in f32 (the scaled scores cast up; the f32 mask as it is: HF's
// fill finfo(f32).min has no bf16 value), while the scale before it and the
// masked fill of a second softmax's scores read by something else stay bf16.
// CHECK-LABEL: func.func @mask_add
// CHECK: %[[S:.+]] = tc.matmul {{.*}} -> tensor<2x4x4xbf16>
// CHECK: %[[C:.+]] = tc.mul %[[S]], %{{.+}} {{.*}}tc.precision = "bf16"{{.*}} -> tensor<2x4x4xbf16>
// CHECK: %[[CF:.+]] = tc.cast %[[C]] {{.*}} : tensor<2x4x4xbf16> to tensor<2x4x4xf32>
// CHECK: %[[A:.+]] = tc.add %[[CF]], %[[M:.+]] {tc.precision = "f32", tc.precision_reason = "elementwise: read only by a softmax, kept in f32"} : tensor<2x4x4xf32>, tensor<2x1x4xf32> -> tensor<2x4x4xf32>
// CHECK: tc.softmax %[[A]]
// CHECK: tc.select %{{.+}}, %{{.+}}, %{{.+}} {tc.precision = "f32", tc.precision_reason = "elementwise: read only by a softmax, kept in f32"}
// CHECK: tc.add %{{.+}}, %{{.+}} {tc.precision = "bf16"
func.func @mask_add(%q: tensor<2x4x8xf32>, %k: tensor<2x8x4xf32>, %m: tensor<2x1x4xf32>,
                    %keep: tensor<2x4x4xi1>) -> (tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) {
  %scale = tc.constant dense<0.35> : tensor<f32>
  %fill = tc.constant dense<-3.40282347e+38> : tensor<f32>
  %s = tc.matmul %q, %k : tensor<2x4x8xf32>, tensor<2x8x4xf32> -> tensor<2x4x4xf32>
  %c = tc.mul %s, %scale : tensor<2x4x4xf32>, tensor<f32> -> tensor<2x4x4xf32>
  %a = tc.add %c, %m : tensor<2x4x4xf32>, tensor<2x1x4xf32> -> tensor<2x4x4xf32>
  %p = tc.softmax %a {axis = 2 : i64} : tensor<2x4x4xf32>
  %w = tc.select %keep, %c, %fill : tensor<2x4x4xi1>, tensor<2x4x4xf32>, tensor<f32> -> tensor<2x4x4xf32>
  %p2 = tc.softmax %w {axis = 2 : i64} : tensor<2x4x4xf32>
  %o = tc.add %c, %m : tensor<2x4x4xf32>, tensor<2x1x4xf32> -> tensor<2x4x4xf32>
  return %p, %p2, %o : tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>
}

// -----

// Tests that the loss and a sum reduction run in f32 on one shared cast of
// the bf16 logits, and that integer values are untouched.
// CHECK-LABEL: func.func @loss
// CHECK-SAME: (%{{.+}}: tensor<4x8xf32>, %[[L:.+]]: tensor<4xi64>)
// CHECK: %[[Y:.+]] = tc.matmul {{.*}} -> tensor<4x16xbf16>
// CHECK: %[[YF:.+]] = tc.cast %[[Y]] {{.*}} : tensor<4x16xbf16> to tensor<4x16xf32>
// CHECK: tc.cross_entropy %[[YF]], %[[L]] {{{.*}}tc.precision = "f32", tc.precision_reason = "loss: kept in f32"} : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32>
// CHECK: tc.reduce_sum %[[YF]] {axes = array<i64: 0, 1>, tc.precision = "f32", tc.precision_reason = "reduction: accumulated in f32"} : tensor<4x16xf32> -> tensor<f32>
// CHECK: tc.constant {tc.precision = "i64", tc.precision_reason = "integer/bool: untouched"} dense<1> : tensor<4xi64>
// CHECK: tc.add %[[L]], %{{.+}} {tc.precision = "i64", tc.precision_reason = "integer/bool: untouched"} : tensor<4xi64>, tensor<4xi64> -> tensor<4xi64>
func.func @loss(%x: tensor<4x8xf32>, %labels: tensor<4xi64>) -> (tensor<f32>, tensor<f32>, tensor<4xi64>) {
  %w = tc.parameter "w" {trainable} : tensor<8x16xf32>
  %y = tc.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %l = tc.cross_entropy %y, %labels {ignore_index = -100 : i64, reduction = "mean"}
      : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32>
  %s = tc.reduce_sum %y {axes = array<i64: 0, 1>} : tensor<4x16xf32> -> tensor<f32>
  %one = tc.constant dense<1> : tensor<4xi64>
  %l2 = tc.add %labels, %one : tensor<4xi64>, tensor<4xi64> -> tensor<4xi64>
  return %l, %s, %l2 : tensor<f32>, tensor<f32>, tensor<4xi64>
}

// -----

// Tests that ops with only f32 inputs stay f32, and that an f32 operand of a
// bf16 add that is an exact bf16 -> f32 widening reads the bf16 value
// instead of a new cast.
// CHECK-LABEL: func.func @follow
// CHECK-SAME: (%[[X:.+]]: tensor<4xbf16>, %[[Y:.+]]: tensor<4xf32>)
// CHECK: tc.exp %[[Y]] {tc.precision = "f32", tc.precision_reason = "elementwise on f32 inputs"} : tensor<4xf32>
// CHECK: %[[M:.+]] = tc.matmul {{.*}} -> tensor<1x4xbf16>
// CHECK: %[[R:.+]] = tc.reshape %[[M]] {tc.precision = "bf16", tc.precision_reason = "data movement on bf16 inputs"} : tensor<1x4xbf16> to tensor<4xbf16>
// CHECK: tc.add %[[R]], %[[X]] {{.*}} : tensor<4xbf16>, tensor<4xbf16> -> tensor<4xbf16>
func.func @follow(%x: tensor<4xbf16>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %up = tc.cast %x : tensor<4xbf16> to tensor<4xf32>
  %a = tc.exp %y : tensor<4xf32>
  %w = tc.parameter "w" : tensor<4x4xf32>
  %u = tc.reshape %a : tensor<4xf32> to tensor<1x4xf32>
  %m = tc.matmul %u, %w : tensor<1x4xf32>, tensor<4x4xf32> -> tensor<1x4xf32>
  %r = tc.reshape %m : tensor<1x4xf32> to tensor<4xf32>
  %s = tc.add %r, %up : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %a, %s : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that an exact round trip bf16 -> f32 -> bf16 is removed (with the
// casts nobody reads) while f32 -> bf16 -> f32, which rounds, is kept.
// CHECK-LABEL: func.func @roundtrip
// CHECK-SAME: (%[[X:.+]]: tensor<4xbf16>, %[[Y:.+]]: tensor<4xf32>)
// CHECK-NEXT: %[[C:.+]] = tc.neg %[[X]] {{.*}} : tensor<4xbf16>
// CHECK-NEXT: %[[D:.+]] = tc.cast %[[Y]] {{.*}} : tensor<4xf32> to tensor<4xbf16>
// CHECK-NEXT: %[[E:.+]] = tc.cast %[[D]] {{.*}} : tensor<4xbf16> to tensor<4xf32>
// CHECK-NEXT: %[[F:.+]] = tc.neg %[[E]] {{.*}} : tensor<4xf32>
// CHECK-NEXT: return %[[C]], %[[F]]
func.func @roundtrip(%x: tensor<4xbf16>, %y: tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xf32>) {
  %a = tc.cast %x : tensor<4xbf16> to tensor<4xf32>
  %b = tc.cast %a : tensor<4xf32> to tensor<4xbf16>
  %c = tc.neg %b : tensor<4xbf16>
  %d = tc.cast %y : tensor<4xf32> to tensor<4xbf16>
  %e = tc.cast %d : tensor<4xbf16> to tensor<4xf32>
  %f = tc.neg %e : tensor<4xf32>
  return %c, %f : tensor<4xbf16>, tensor<4xf32>
}

// -----

// Tests that tf32 and fp32 only annotate: types are unchanged, f32 matmuls
// are marked "tf32" (a hint for the GPU backend) or "f32".
// TF32-LABEL: func.func @annotate
// TF32-NOT: bf16
// TF32: tc.matmul %{{.+}}, %{{.+}} {tc.precision = "tf32", tc.precision_reason = "matmul: tf32 operands, fp32 accumulation"} : tensor<2x8xf32>, tensor<8x4xf32> -> tensor<2x4xf32>
// TF32: tc.softmax %{{.+}} {axis = 1 : i64, tc.precision = "f32", tc.precision_reason = "softmax: kept in f32"} : tensor<2x4xf32>
// FP32-LABEL: func.func @annotate
// FP32-NOT: bf16
// FP32: tc.matmul %{{.+}}, %{{.+}} {tc.precision = "f32", tc.precision_reason = "matmul: fp32 mode"} : tensor<2x8xf32>, tensor<8x4xf32> -> tensor<2x4xf32>
// FP32: tc.softmax
func.func @annotate(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
  %w = tc.parameter "w" {trainable} : tensor<8x4xf32>
  %y = tc.matmul %x, %w : tensor<2x8xf32>, tensor<8x4xf32> -> tensor<2x4xf32>
  %s = tc.softmax %y {axis = 1 : i64} : tensor<2x4xf32>
  return %s : tensor<2x4xf32>
}

// -----

// Tests that a weight's transpose read only by a bf16 matmul runs on the
// bf16 copy (data movement is exact: the cast moves before it).
// CHECK-LABEL: func.func @transpose
// CHECK: %[[W:.+]] = tc.parameter "w"
// CHECK: %[[WB:.+]] = tc.cast %[[W]] {{.*}} : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK: %[[T:.+]] = tc.transpose %[[WB]] {permutation = array<i64: 1, 0>, tc.precision = "bf16", tc.precision_reason = "data movement on bf16 inputs"} : tensor<4x8xbf16> -> tensor<8x4xbf16>
// CHECK: tc.matmul %{{.+}}, %[[T]] {{.*}} : tensor<2x8xbf16>, tensor<8x4xbf16> -> tensor<2x4xbf16>
func.func @transpose(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
  %w = tc.parameter "w" {trainable} : tensor<4x8xf32>
  %t = tc.transpose %w {permutation = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  %y = tc.matmul %x, %t : tensor<2x8xf32>, tensor<8x4xf32> -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
