// RUN: tc-opt %s --split-input-file | tc-opt --split-input-file | FileCheck %s

// Tests that storage ops, views and a planned arena round-trip.
// CHECK-LABEL: func.func @storage
// CHECK: tcx.arena : <4096xi8>
// CHECK: tcx.param "w" {trainable} : <16x4xbf16>
// CHECK: tcx.param "exp_avg:w" {kind = "optimizer_state"} : <16x4xf32>
// CHECK: tcx.const dense<1.000000e+00> : tensor<4xf32> -> <4xf32>
// CHECK: tcx.alloc {kind = "backward"} : <f32>
// CHECK: tcx.view %{{.+}}[256] : <4096xi8> -> <2x8xf32>
// CHECK: tcx.view %{{.+}}[0] : <2x8xf32> -> <16xf32>
func.func @storage() {
  %arena = tcx.arena : !tcx.buffer<4096xi8>
  %w = tcx.param "w" {kind = "parameter", trainable} : !tcx.buffer<16x4xbf16>
  %m = tcx.param "exp_avg:w" {kind = "optimizer_state"} : !tcx.buffer<16x4xf32>
  %c = tcx.const dense<1.0> : tensor<4xf32> -> !tcx.buffer<4xf32>
  %s = tcx.alloc {kind = "backward"} : !tcx.buffer<f32>
  %v = tcx.view %arena[256] : !tcx.buffer<4096xi8> -> !tcx.buffer<2x8xf32>
  %r = tcx.view %v[0] : !tcx.buffer<2x8xf32> -> !tcx.buffer<16xf32>
  return
}

// -----

// Tests that a generated kernel and its launch round-trip.
// CHECK-LABEL: tcx.kernel @add_0 kind("elementwise")
// CHECK: ^bb0(%[[A:.+]]: tensor<4xf32>, %[[B:.+]]: tensor<4xf32>):
// CHECK: tcx.yield
// CHECK-LABEL: func.func @launch
// CHECK: tcx.launch @add_0 ins(%{{.+}}, %{{.+}} : !tcx.buffer<4xf32>, !tcx.buffer<4xf32>) outs(%{{.+}} : !tcx.buffer<4xf32>) {elements = 4 : i64}
// CHECK: tcx.launch @add_0 ins({{.+}}) outs({{.+}}) {block = array<i64: 128>, elements = 4 : i64, grid = array<i64: 1>}
tcx.kernel @add_0 kind("elementwise") {
^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
  %0 = tc.add %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  tcx.yield %0 : tensor<4xf32>
}
func.func @launch(%a: !tcx.buffer<4xf32>, %b: !tcx.buffer<4xf32>, %c: !tcx.buffer<4xf32>) {
  tcx.launch @add_0 ins(%a, %b : !tcx.buffer<4xf32>, !tcx.buffer<4xf32>) outs(%c : !tcx.buffer<4xf32>) {elements = 4 : i64}
  tcx.launch @add_0 ins(%a, %b : !tcx.buffer<4xf32>, !tcx.buffer<4xf32>) outs(%a : !tcx.buffer<4xf32>) {elements = 4 : i64, grid = array<i64: 1>, block = array<i64: 128>}
  return
}

// -----

// Tests that library calls, matmuls, copies, fills and events round-trip.
// CHECK-LABEL: func.func @work
// CHECK: tcx.library "layer_norm_fwd" ins({{.+}}) outs({{.+}}) {cols = 64 : i64, eps = 1.000000e-05 : f64, has_bias = true, has_weight = true, rows = 32 : i64}
// CHECK: tcx.library "cross_entropy_fwd_bwd" ins({{.+}}) outs({{.+}}) {cols = 256 : i64, grad_scale = 1.000000e+00 : f32, ignore_index = -100 : i64, rows = 32 : i64}
// CHECK: tcx.matmul ins({{.+}}) outs({{.+}}) {batch = 4 : i64, epilogue = "bias_gelu", k = 64 : i64, m = 8 : i64, n = 256 : i64, stride_rhs = 0 : i64, transpose_rhs = true}
// CHECK: tcx.matmul ins({{.+}}) outs({{.+}}) {k = 8 : i64, lhs_batch = array<i64: 4, 1>, m = 8 : i64, n = 8 : i64, rhs_batch = array<i64: 1, 2>}
// CHECK: tcx.matmul ins({{.+}}) outs(%{{.+}} : <64x256xf32> bias_grad %{{.+}} : !tcx.buffer<256xf32>) {bias_grad = "rhs", k = 32 : i64, m = 64 : i64, n = 256 : i64, transpose_lhs = true}
// CHECK: tcx.copy
// CHECK: tcx.fill %{{.+}} {value = 1.500000e+00 : f64}
// CHECK: %[[E:.+]] = tcx.record : !tcx.event
// CHECK: tcx.wait %[[E]] {stream = 1 : i64}
func.func @work(%x: !tcx.buffer<4x8x64xf32>, %g: !tcx.buffer<64xf32>, %b: !tcx.buffer<64xf32>,
                %y: !tcx.buffer<4x8x64xf32>, %logits: !tcx.buffer<32x256xf32>,
                %labels: !tcx.buffer<32xi64>, %loss: !tcx.buffer<f32>,
                %dlogits: !tcx.buffer<32x256xf32>, %scratch: !tcx.buffer<384xi8>,
                %w: !tcx.buffer<256x64xf32>, %bias: !tcx.buffer<256xf32>,
                %out: !tcx.buffer<4x8x256xf32>, %p: !tcx.buffer<4x1x8x8xf32>,
                %q: !tcx.buffer<1x2x8x8xf32>, %pq: !tcx.buffer<4x2x8x8xf32>,
                %dw: !tcx.buffer<64x256xf32>) {
  tcx.library "layer_norm_fwd" ins(%x, %g, %b : !tcx.buffer<4x8x64xf32>, !tcx.buffer<64xf32>, !tcx.buffer<64xf32>)
      outs(%y : !tcx.buffer<4x8x64xf32>) {rows = 32 : i64, cols = 64 : i64, eps = 1.0e-05 : f64, has_weight = true, has_bias = true}
  tcx.library "cross_entropy_fwd_bwd" ins(%logits, %labels : !tcx.buffer<32x256xf32>, !tcx.buffer<32xi64>)
      outs(%loss, %dlogits, %scratch : !tcx.buffer<f32>, !tcx.buffer<32x256xf32>, !tcx.buffer<384xi8>)
      {rows = 32 : i64, cols = 256 : i64, ignore_index = -100 : i64, grad_scale = 1.0 : f32}
  tcx.matmul ins(%x, %w, %bias : !tcx.buffer<4x8x64xf32>, !tcx.buffer<256x64xf32>, !tcx.buffer<256xf32>)
      outs(%out : !tcx.buffer<4x8x256xf32>)
      {m = 8 : i64, n = 256 : i64, k = 64 : i64, batch = 4 : i64, stride_rhs = 0 : i64, transpose_rhs = true, epilogue = "bias_gelu"}
  tcx.matmul ins(%p, %q : !tcx.buffer<4x1x8x8xf32>, !tcx.buffer<1x2x8x8xf32>) outs(%pq : !tcx.buffer<4x2x8x8xf32>)
      {m = 8 : i64, n = 8 : i64, k = 8 : i64, lhs_batch = array<i64: 4, 1>, rhs_batch = array<i64: 1, 2>}
  tcx.matmul ins(%x, %dlogits : !tcx.buffer<4x8x64xf32>, !tcx.buffer<32x256xf32>) outs(%dw : !tcx.buffer<64x256xf32> bias_grad %bias : !tcx.buffer<256xf32>)
      {m = 64 : i64, n = 256 : i64, k = 32 : i64, transpose_lhs = true, bias_grad = "rhs"}
  tcx.copy %y, %x : !tcx.buffer<4x8x64xf32>, !tcx.buffer<4x8x64xf32>
  tcx.fill %loss {value = 1.5 : f64} : !tcx.buffer<f32>
  %e = tcx.record : !tcx.event
  tcx.wait %e {stream = 1 : i64}
  return
}

// -----

// Tests that the FP8 forms round-trip: a quantize_fp8 call with its
// transposed copy and amax scratch, and compute_type "fp8" matmuls (lhs,
// rhs, then their scale_inv): per tensor with fast accumulation, per row.
// CHECK-LABEL: func.func @fp8
// CHECK: tcx.library "quantize_fp8" ins({{.+}}) outs({{.+}}) {cols = 64 : i64, has_transpose = true, rows = 32 : i64}
// CHECK: tcx.matmul ins({{.+}}) outs({{.+}}) {compute_type = "fp8", fast_accum = true, k = 64 : i64, m = 32 : i64, n = 128 : i64, transpose_rhs = true}
// CHECK: tcx.matmul ins({{.+}} !tcx.buffer<32x1xf32>, !tcx.buffer<128x1xf32>) outs({{.+}}) {compute_type = "fp8", k = 64 : i64, m = 32 : i64, n = 128 : i64, transpose_rhs = true}
func.func @fp8(%x: !tcx.buffer<32x64xbf16>, %q: !tcx.buffer<32x64xf8E4M3FN>, %s: !tcx.buffer<1x1xf32>,
               %qt: !tcx.buffer<64x32xf8E4M3FN>, %amax: !tcx.buffer<256xi8>,
               %w: !tcx.buffer<128x64xf8E4M3FN>, %sw: !tcx.buffer<1xf32>, %y: !tcx.buffer<32x128xbf16>,
               %rx: !tcx.buffer<32x1xf32>, %rw: !tcx.buffer<128x1xf32>) {
  tcx.library "quantize_fp8" ins(%x : !tcx.buffer<32x64xbf16>)
      outs(%q, %s, %qt, %amax : !tcx.buffer<32x64xf8E4M3FN>, !tcx.buffer<1x1xf32>, !tcx.buffer<64x32xf8E4M3FN>, !tcx.buffer<256xi8>)
      {rows = 32 : i64, cols = 64 : i64, has_transpose = true}
  tcx.matmul ins(%q, %w, %s, %sw : !tcx.buffer<32x64xf8E4M3FN>, !tcx.buffer<128x64xf8E4M3FN>, !tcx.buffer<1x1xf32>, !tcx.buffer<1xf32>)
      outs(%y : !tcx.buffer<32x128xbf16>)
      {m = 32 : i64, n = 128 : i64, k = 64 : i64, transpose_rhs = true, compute_type = "fp8", fast_accum = true}
  tcx.matmul ins(%q, %w, %rx, %rw : !tcx.buffer<32x64xf8E4M3FN>, !tcx.buffer<128x64xf8E4M3FN>, !tcx.buffer<32x1xf32>, !tcx.buffer<128x1xf32>)
      outs(%y : !tcx.buffer<32x128xbf16>)
      {m = 32 : i64, n = 128 : i64, k = 64 : i64, transpose_rhs = true, compute_type = "fp8"}
  return
}
