// RUN: split-file %s %t
// RUN: tc-opt %t/marks.mlir --split-input-file --pass-pipeline='builtin.module(func.func(tc-precision{mode=fp8}))' | FileCheck %t/marks.mlir
// RUN: tc-opt %t/blocks.mlir --pass-pipeline='builtin.module(func.func(tc-precision{mode=fp8 high-precision-first=1 high-precision-last=1 keep-high-precision=^mlp_up$,proj}))' | FileCheck %t/blocks.mlir
// RUN: tc-opt %t/lm_head.mlir --pass-pipeline='builtin.module(func.func(tc-precision{mode=fp8 fp8-lm-head=true}))' | FileCheck %t/lm_head.mlir
// RUN: tc-opt %t/fallback.mlir --pass-pipeline='builtin.module(func.func(tc-precision{mode=fp8 allow-fallback=true}))' 2>/dev/null | FileCheck %t/fallback.mlir
// RUN: tc-opt %t/fallback.mlir --pass-pipeline='builtin.module(func.func(tc-precision{mode=fp8 allow-fallback=true}))' 2>&1 >/dev/null | FileCheck %t/fallback.mlir --check-prefix=REMARK
// RUN: tc-opt %t/mxfp8.mlir --pass-pipeline='builtin.module(func.func(tc-precision{mode=fp8 fp8-scaling=mxfp8 allow-fallback=true}))' | FileCheck %t/mxfp8.mlir
// RUN: not tc-opt %t/misaligned.mlir --pass-pipeline='builtin.module(func.func(tc-precision{mode=fp8}))' 2>&1 | FileCheck %t/misaligned.mlir
// RUN: tc-opt %t/none.mlir --pass-pipeline='builtin.module(func.func(tc-precision{mode=fp8}))' --verify-diagnostics
// RUN: tc-opt %t/first.mlir --pass-pipeline='builtin.module(func.func(tc-precision{mode=fp8 high-precision-first=2}))' --verify-diagnostics
// RUN: tc-opt %t/regex.mlir --pass-pipeline='builtin.module(func.func(tc-precision{mode=fp8 keep-high-precision=a\d}))' --verify-diagnostics
// RUN: tc-opt %t/block128.mlir --pass-pipeline='builtin.module(func.func(tc-precision{mode=fp8 fp8-scaling=block128 allow-fallback=true}))' | FileCheck %t/block128.mlir
// RUN: not tc-opt %t/marks.mlir --split-input-file --pass-pipeline='builtin.module(func.func(tc-precision{mode=fp8 fp8-scaling=blocks}))' 2>&1 | FileCheck %t/marks.mlir --check-prefix=UNKNOWN

//--- marks.mlir
// Tests that the scaling recipe is checked: an unknown one lists the
// valid ones.
// UNKNOWN: error: --fp8-scaling: unknown scaling 'blocks' (valid: tensor, delayed, row, mxfp8 or block128)

// Tests that a linear layer (a batched activation times a transposed 2-D
// weight parameter, through the bf16 casts) gets the FP8 mark on top of the
// bf16 plan, and that its K = 32, N = 64 meet cuBLASLt's alignment.
// CHECK-LABEL: func.func @eligible
// CHECK: tc.matmul %{{.+}}, %{{.+}} {tc.fp8 = "tensor", tc.fp8_role = "fprop", tc.precision = "fp8", tc.precision_reason = "linear layer: fp8 (tensor scaling; E4M3 operands, E5M2 gradients), fp32 accumulation, bf16 output"} : tensor<2x16x32xbf16>, tensor<32x64xbf16> -> tensor<2x16x64xbf16>
func.func @eligible(%x: tensor<2x16x32xf32>) -> tensor<2x16x64xf32> {
  %w = tc.parameter "h.0.fc.weight" {trainable} : tensor<64x32xf32>
  %wt = tc.transpose %w {permutation = array<i64: 1, 0>} : tensor<64x32xf32> -> tensor<32x64xf32>
  %y = tc.matmul %x, %wt : tensor<2x16x32xf32>, tensor<32x64xf32> -> tensor<2x16x64xf32>
  return %y : tensor<2x16x64xf32>
}

// -----

// Tests that a frozen weight is as eligible as a trainable one, and that a
// product of two activations (attention's q k^T) is not a linear layer: it
// keeps its bf16 plan.
// CHECK-LABEL: func.func @frozen_and_activations
// CHECK: tc.matmul {{.*}}tc.fp8 = "tensor"{{.*}} -> tensor<16x16xbf16>
// CHECK: tc.matmul {{.*}}{tc.precision = "bf16", tc.precision_reason = "matmul: bf16 operands, fp32 accumulation", transpose_rhs = true} : tensor<16x16xbf16>, tensor<16x16xbf16> -> tensor<16x16xbf16>
func.func @frozen_and_activations(%x: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %w = tc.parameter "frozen.weight" : tensor<16x16xf32>
  %y = tc.matmul %x, %w : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  %s = tc.matmul %y, %y {transpose_rhs = true} : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  return %s : tensor<16x16xf32>
}

// -----

// Tests that the lm_head (the product the loss reads, through a reshape)
// stays bf16 and says why, while the layer before it is FP8.
// CHECK-LABEL: func.func @lm_head
// CHECK: tc.matmul {{.*}}tc.fp8 = "tensor", tc.fp8_role = "fprop"{{.*}} -> tensor<2x16x32xbf16>
// CHECK: tc.matmul {{.*}}{tc.precision = "bf16", tc.precision_reason = "matmul: bf16 operands, fp32 accumulation; fp8 plan: the lm_head stays high precision (--fp8-lm-head puts it in FP8)"} {{.*}} -> tensor<2x16x256xbf16>
func.func @lm_head(%x: tensor<2x16x32xf32>, %labels: tensor<32xi64>) -> (tensor<f32> {tc.name = "loss"}) {
  %w1 = tc.parameter "fc.weight" {trainable} : tensor<32x32xf32>
  %h = tc.matmul %x, %w1 : tensor<2x16x32xf32>, tensor<32x32xf32> -> tensor<2x16x32xf32>
  %w = tc.parameter "lm_head.weight" {trainable} : tensor<32x256xf32>
  %logits = tc.matmul %h, %w : tensor<2x16x32xf32>, tensor<32x256xf32> -> tensor<2x16x256xf32>
  %flat = tc.reshape %logits : tensor<2x16x256xf32> to tensor<32x256xf32>
  %l = tc.cross_entropy %flat, %labels : (tensor<32x256xf32>, tensor<32xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that an inference model's "logits" result marks its lm_head too.
// CHECK-LABEL: func.func @logits_result
// CHECK: tc.matmul {{.*}}the lm_head stays high precision
func.func @logits_result(%x: tensor<16x32xf32>) -> (tensor<16x256xf32> {tc.name = "logits"}) {
  %w = tc.parameter "out.weight" {trainable} : tensor<32x256xf32>
  %y = tc.matmul %x, %w : tensor<16x32xf32>, tensor<32x256xf32> -> tensor<16x256xf32>
  return %y : tensor<16x256xf32>
}

// -----

// Tests that the product of a tied embedding (a weight a tc.gather also
// reads) stays bf16, wherever its result goes, and that a function without
// any FP8 matmul says so.
// CHECK-LABEL: func.func @tied
// CHECK: tc.matmul {{.*}}fp8 plan: the product of a tied embedding ('wte.weight') stays high precision (--fp8-lm-head puts it in FP8)
// CHECK-NOT: tc.fp8
func.func @tied(%ids: tensor<16xi64>) -> tensor<16x256xf32> {
  %w = tc.parameter "wte.weight" {trainable} : tensor<256x32xf32>
  %e = tc.gather %w, %ids {axis = 0 : i64} : tensor<256x32xf32>, tensor<16xi64> -> tensor<16x32xf32>
  %y = tc.matmul %e, %w {transpose_rhs = true} : tensor<16x32xf32>, tensor<256x32xf32> -> tensor<16x256xf32>
  return %y : tensor<16x256xf32>
}

//--- blocks.mlir
// Tests the first / last transformer blocks (3 blocks, from "h.<i>."
// names) and the regexes, searched in the ONNX node name (the location) and
// anchored by the user, or in the weight name: only block 1's "mlp_down"
// runs in FP8.
// CHECK-LABEL: func.func @blocks
// CHECK: tc.matmul {{.*}}fp8 plan: transformer block 0 of 3 is in the first 1 kept high precision (--high-precision-first)
// CHECK: tc.matmul {{.*}}fp8 plan: kept high precision by --keep-high-precision '^mlp_up$'
// CHECK: tc.matmul {{.*}}tc.fp8 = "tensor"
// CHECK: tc.matmul {{.*}}fp8 plan: kept high precision by --keep-high-precision 'proj'
// CHECK: tc.matmul {{.*}}fp8 plan: transformer block 2 of 3 is in the last 1 kept high precision (--high-precision-last)
func.func @blocks(%x: tensor<16x32xf32>) -> tensor<16x32xf32> {
  %w0 = tc.parameter "transformer.h.0.mlp.weight" {trainable} : tensor<32x32xf32>
  %w1 = tc.parameter "transformer.h.1.mlp.up.weight" {trainable} : tensor<32x32xf32>
  %w2 = tc.parameter "transformer.h.1.mlp.down.weight" {trainable} : tensor<32x32xf32>
  %w3 = tc.parameter "transformer.h.1.attn.c_proj.weight" {trainable} : tensor<32x32xf32>
  %w4 = tc.parameter "transformer.h.2.mlp.weight" {trainable} : tensor<32x32xf32>
  %y0 = tc.matmul %x, %w0 : tensor<16x32xf32>, tensor<32x32xf32> -> tensor<16x32xf32> loc("mlp_0")
  %y1 = tc.matmul %y0, %w1 : tensor<16x32xf32>, tensor<32x32xf32> -> tensor<16x32xf32> loc("mlp_up")
  %y2 = tc.matmul %y1, %w2 : tensor<16x32xf32>, tensor<32x32xf32> -> tensor<16x32xf32> loc("mlp_up_then_down")
  %y3 = tc.matmul %y2, %w3 : tensor<16x32xf32>, tensor<32x32xf32> -> tensor<16x32xf32> loc("attn_out")
  %y4 = tc.matmul %y3, %w4 : tensor<16x32xf32>, tensor<32x32xf32> -> tensor<16x32xf32> loc("mlp_2")
  return %y4 : tensor<16x32xf32>
}

//--- lm_head.mlir
// Tests that --fp8-lm-head puts the lm_head and a tied product in FP8.
// CHECK-LABEL: func.func @lm_head
// CHECK: tc.matmul {{.*}}tc.fp8 = "tensor"{{.*}} -> tensor<16x256xbf16>
// CHECK: tc.matmul {{.*}}tc.fp8 = "tensor"{{.*}} -> tensor<16x256xbf16>
func.func @lm_head(%x: tensor<16x32xf32>, %ids: tensor<16xi64>, %labels: tensor<16xi64>) -> (tensor<f32>, tensor<16x256xf32>) {
  %w = tc.parameter "lm_head.weight" {trainable} : tensor<32x256xf32>
  %y = tc.matmul %x, %w : tensor<16x32xf32>, tensor<32x256xf32> -> tensor<16x256xf32>
  %l = tc.cross_entropy %y, %labels : (tensor<16x256xf32>, tensor<16xi64>) -> tensor<f32>
  %t = tc.parameter "wte.weight" {trainable} : tensor<256x32xf32>
  %e = tc.gather %t, %ids {axis = 0 : i64} : tensor<256x32xf32>, tensor<16xi64> -> tensor<16x32xf32>
  %z = tc.matmul %e, %t {transpose_rhs = true} : tensor<16x32xf32>, tensor<256x32xf32> -> tensor<16x256xf32>
  return %l, %z : tensor<f32>, tensor<16x256xf32>
}

//--- fallback.mlir
// Tests that with allow-fallback a misaligned layer (K = 24) stays bf16
// with the fallback as its reason, and a remark lists it.
// REMARK: remark: --fp8 --allow-fallback: 1 matmul of @fallback stays bf16 (misaligned for cuBLASLt FP8): matmul 'fc' (weight 'fc.weight') K=24, N=16
// REMARK: remark: --fp8: none of the 1 linear-layer matmuls of @fallback runs in FP8 (all kept high precision, see the precision report): the plan is bf16
// CHECK-LABEL: func.func @fallback
// CHECK: tc.matmul {{.*}}{tc.precision = "bf16", tc.precision_reason = "matmul: bf16 operands, fp32 accumulation; fp8 fallback (--allow-fallback): K=24, N=16, cuBLASLt FP8 needs K and N multiples of 16"}
func.func @fallback(%x: tensor<16x24xf32>) -> tensor<16x16xf32> {
  %w = tc.parameter "fc.weight" {trainable} : tensor<24x16xf32>
  %y = tc.matmul %x, %w : tensor<16x24xf32>, tensor<24x16xf32> -> tensor<16x16xf32> loc("fc")
  return %y : tensor<16x16xf32>
}

//--- mxfp8.mlir
// Tests that mxfp8 marks its recipe and needs multiples of 32: K = 48
// falls back.
// CHECK-LABEL: func.func @mxfp8
// CHECK: tc.matmul {{.*}}tc.fp8 = "mxfp8"{{.*}} -> tensor<16x32xbf16>
// CHECK: tc.matmul {{.*}}K=32, N=48, cuBLASLt FP8 with 1x32 blocks needs K and N multiples of 32
func.func @mxfp8(%x: tensor<16x64xf32>) -> tensor<16x48xf32> {
  %w = tc.parameter "a.weight" {trainable} : tensor<64x32xf32>
  %y = tc.matmul %x, %w : tensor<16x64xf32>, tensor<64x32xf32> -> tensor<16x32xf32>
  %v = tc.parameter "b.weight" {trainable} : tensor<32x48xf32>
  %z = tc.matmul %y, %v : tensor<16x32xf32>, tensor<32x48xf32> -> tensor<16x48xf32>
  return %z : tensor<16x48xf32>
}

//--- block128.mlir
// Tests that block128 marks its recipe and needs whole 128-blocks: K = 64
// (one partial block), K = 256 and N = 128 are marked, N = 192 falls back.
// CHECK-LABEL: func.func @block128
// CHECK: tc.matmul {{.*}}tc.fp8 = "block128"{{.*}}block128 scaling{{.*}} -> tensor<16x256xbf16>
// CHECK: tc.matmul {{.*}}tc.fp8 = "block128"{{.*}} -> tensor<16x128xbf16>
// CHECK: tc.matmul {{.*}}K=128, N=192, --fp8-scaling block128 needs K and N at most 128 (one block) or multiples of 128 (whole 128-blocks)
func.func @block128(%x: tensor<16x64xf32>) -> tensor<16x192xf32> {
  %w = tc.parameter "a.weight" {trainable} : tensor<64x256xf32>
  %y = tc.matmul %x, %w : tensor<16x64xf32>, tensor<64x256xf32> -> tensor<16x256xf32>
  %v = tc.parameter "b.weight" {trainable} : tensor<256x128xf32>
  %z = tc.matmul %y, %v : tensor<16x256xf32>, tensor<256x128xf32> -> tensor<16x128xf32>
  %u = tc.parameter "c.weight" {trainable} : tensor<128x192xf32>
  %r = tc.matmul %z, %u : tensor<16x128xf32>, tensor<128x192xf32> -> tensor<16x192xf32>
  return %r : tensor<16x192xf32>
}

//--- misaligned.mlir
// Tests that a misaligned linear layer is an error naming it and its sizes.
// CHECK: error: {{.*}}--fp8: matmul 'fc' (weight 'fc.weight') has K=32, N=40; cuBLASLt FP8 needs K and N multiples of 16: pad the layer, keep it high precision (--keep-high-precision), or --allow-fallback to run it in bf16
func.func @misaligned(%x: tensor<16x32xf32>) -> tensor<16x40xf32> {
  %w = tc.parameter "fc.weight" {trainable} : tensor<40x32xf32>
  %y = tc.matmul %x, %w {transpose_rhs = true} : tensor<16x32xf32>, tensor<40x32xf32> -> tensor<16x40xf32> loc("fc")
  return %y : tensor<16x40xf32>
}

//--- none.mlir
// Tests that a function without a linear layer is a remark, not an error.
// expected-remark @+1 {{--fp8: @none has no linear-layer matmul (a 2-D weight parameter on the right): nothing runs in FP8, the plan is bf16}}
func.func @none(%x: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %y = tc.matmul %x, %x : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  return %y : tensor<16x16xf32>
}

//--- first.mlir
// Tests that first / last blocks without any block index in the names are
// an error.
// expected-error @+1 {{--high-precision-first 2: no parameter of @noblocks has a transformer block index in its name (h.<i>., layers.<i>. or blocks.<i>.)}}
func.func @noblocks(%x: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %w = tc.parameter "hidden.0.weight" {trainable} : tensor<16x16xf32>
  %y = tc.matmul %x, %w : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  return %y : tensor<16x16xf32>
}

//--- regex.mlir
// Tests that a regex outside tc's one dialect is an error naming it.
// expected-error @+1 {{--keep-high-precision: bad regex}}
func.func @regex(%x: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %w = tc.parameter "a.weight" {trainable} : tensor<16x16xf32>
  %y = tc.matmul %x, %w : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  return %y : tensor<16x16xf32>
}
