// RUN: tc-opt %s --split-input-file --tc-quantize-fp8=amax-history=4 2>/dev/null | FileCheck %s
// RUN: tc-opt %s --split-input-file --tc-quantize-fp8="amax-history=1 amax-compute=most_recent" 2>/dev/null | FileCheck %s --check-prefix=RECENT
// RUN: not tc-opt %s --split-input-file --tc-quantize-fp8=amax-compute=mean 2>&1 | FileCheck %s --check-prefix=BAD

// Tests delayed scaling in @grad_step: each operand reads its scale (starts
// at 1) and its amax history (f32 [N - 1], zeros) as training state, is
// quantized by x * scale with a saturating cast, its scale_inv is 1 / scale;
// the window is this amax in front of the history, the step returns the
// window's newest N - 1 and the next scale fmax / max(window) (448 for E4M3)
// kept when the amax is 0 or inf, and the count of saturated elements. The
// product reads w [K, N]'s copy through a transpose to [N, K] (cuBLASLt's TN
// form: no tc.quantize writes a transposed copy here).
// CHECK-LABEL: func.func @grad_step
// CHECK-DAG: %[[S:.+]] = tc.parameter "fp8_scale:lin:fprop.x" {{{.*}}tc.optimizer_state{{.*}}tc.state_init = 1.000000e+00 : f64} : tensor<f32>
// CHECK-DAG: %[[H:.+]] = tc.parameter "fp8_amax_history:lin:fprop.x" {{{.*}}tc.optimizer_state{{.*}}} : tensor<3xf32>
// CHECK-DAG: tc.parameter "fp8_scale:lin:fprop.w"
// CHECK-DAG: %[[XF:.+]] = tc.cast %arg0 {{.*}}: tensor<32x64xbf16> to tensor<32x64xf32>
// CHECK-DAG: %[[XS:.+]] = tc.mul %[[XF]], %[[S]]
// CHECK-DAG: %[[QX:.+]] = tc.cast %[[XS]] {{.*}}: tensor<32x64xf32> to tensor<32x64xf8E4M3FN>
// CHECK-DAG: %[[QW:.+]] = tc.cast %{{.+}} : tensor<64x16xf32> to tensor<64x16xf8E4M3FN>
// CHECK-DAG: %[[QWT:.+]] = tc.transpose %[[QW]] {permutation = array<i64: 1, 0>{{.*}}} : tensor<64x16xf8E4M3FN> -> tensor<16x64xf8E4M3FN>
// CHECK-DAG: %[[WINDOW:.+]] = tc.concat %{{.+}}, %[[H]] {axis = 0 : i64} : tensor<1xf32>, tensor<3xf32> -> tensor<4xf32>
// CHECK-DAG: %[[NEXT:.+]] = tc.slice %[[WINDOW]] {starts = array<i64: 0>, strides = array<i64: 1>} : tensor<4xf32> to tensor<3xf32>
// CHECK-DAG: %[[USED:.+]] = tc.reduce_max %[[WINDOW]]
// CHECK-DAG: tc.div %{{.+}}, %[[USED]]
// CHECK-DAG: tc.constant dense<4.480000e+02> : tensor<f32>
// CHECK: tc.scaled_matmul %[[QX]], %{{.+}}, %[[QWT]], %{{.+}} {{{.*}}tc.fp8 = "delayed"{{.*}}transpose_rhs = true} : {{.*}} -> tensor<32x16xbf16>
// CHECK: return %{{.+}}, %[[NEXT]], %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : tensor<32x16xbf16>, tensor<3xf32>, tensor<f32>, tensor<3xf32>, tensor<f32>, tensor<f32>
// Another function has no step to learn from: current scaling.
// CHECK-LABEL: func.func @infer
// CHECK-NOT: fp8_scale
// CHECK: tc.quantize %arg0 {block = array<i64: 32, 64>{{.*}}tensor scaling by its current amax
// RECENT-LABEL: func.func @grad_step
// RECENT-NOT: fp8_amax_history
// RECENT-NOT: tc.concat
// RECENT: return
// BAD: tc-quantize-fp8: unknown amax-compute 'mean' (valid: max or most_recent)
func.func @grad_step(%x: tensor<32x64xbf16>, %w: tensor<64x16xbf16>) -> (tensor<32x16xbf16> {tc.name = "loss"}) {
  %y = tc.matmul %x, %w {tc.fp8 = "delayed", tc.fp8_role = "fprop"} : tensor<32x64xbf16>, tensor<64x16xbf16> -> tensor<32x16xbf16> loc("lin")
  return %y : tensor<32x16xbf16>
}
func.func @infer(%x: tensor<32x64xbf16>, %w: tensor<64x16xbf16>) -> tensor<32x16xbf16> {
  %y = tc.matmul %x, %w {tc.fp8 = "delayed", tc.fp8_role = "fprop"} : tensor<32x64xbf16>, tensor<64x16xbf16> -> tensor<32x16xbf16> loc("lin")
  return %y : tensor<32x16xbf16>
}
