// RUN: not tc-opt %s --split-input-file --tcx-memory-report=target=sm_90 -o /dev/null 2>&1 | FileCheck %s --check-prefix=H100
// RUN: not tc-opt %s --split-input-file --tcx-memory-report=target=sm_120 -o /dev/null 2>&1 | FileCheck %s --check-prefix=RTX
// RUN: not tc-opt %s --split-input-file --tcx-memory-report=target=sm_75 -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// Tests the table of a planned train_step: exact bytes with binary units,
// gradients counted in the arena (one per trainable parameter), the
// cuBLASLt workspace because there is a matmul, the total, and the verdict
// per card of the target (compiler/Target.cpp): its capacity as
// cudaMemGetInfo reports it, in GB and GiB, and the step plus the CUDA
// context against it.
// H100:      memory plan of @train_step for sm_90
// H100-NEXT:   parameters                 8,589,934,592  (8.0 GiB)      persistent
// H100-NEXT:   gradients                  8,589,934,592  (8.0 GiB)      in the arena (one per trainable parameter)
// H100-NEXT:   optimizer state           17,179,869,184  (16.0 GiB)     persistent
// H100-NEXT:   inputs                             1,024  (1.0 KiB)      step arguments
// H100-NEXT:   activations (peak)        34,359,738,368  (32.0 GiB)     in the arena: forward values live at once
// H100-NEXT:   backward (peak)           12,884,901,888  (12.0 GiB)     in the arena: gradients and backward temporaries
// H100-NEXT:   workspace                     33,554,432  (32.0 MiB)     cuBLASLt
// H100-NEXT:   arena peak                42,949,672,960  (40.0 GiB)     one allocation; peak live 39.5 GiB
// H100-NEXT:   total                     68,753,032,192  (64.0 GiB)     what the runtime allocates
// H100-NEXT:   NVIDIA H200: capacity {{[0-9,]+}} B ({{[0-9.]+}} GB = {{[0-9.]+}} GiB; cudaMemGetInfo total, measured on the H200 here {{.*}}); with the CUDA context ({{[0-9.]+}} MiB, measured on the H200 here {{.*}}) the step needs {{[0-9,]+}} B: fits, {{[0-9.]+}}% used, {{[0-9.]+}} GiB free
// H100-NEXT:   NVIDIA H100: capacity 84,875,870,208 B (84.9 GB = 79.0 GiB; not measured by tc: nvidia-smi's 81,559 MiB for an H100 SXM 80 GB less {{.*}} (a low estimate)); with the CUDA context ({{[0-9.]+}} MiB, assumed as measured on the H200) the step needs {{[0-9,]+}} B: fits, {{[0-9.]+}}% used
// RTX:         total                     68,753,032,192  (64.0 GiB)
// RTX-NEXT:    NVIDIA GeForce RTX 5090: capacity 33,545,977,856 B (33.5 GB = 31.2 GiB; not measured by tc: nvidia-smi's 32,607 MiB for an RTX 5090 less {{.*}} (a low estimate)); with the CUDA context ({{[0-9.]+}} MiB, assumed as measured on the H200) the step needs {{[0-9,]+}} B: does NOT fit, {{[0-9.]+}} GiB over ({{[0-9.]+}}%)
// UNKNOWN:     fit: no card of target sm_75 in the table (known: sm_90, sm_120)
module {
  func.func @train_step(%ids: !tcx.buffer<128xi64> {tc.name = "input_ids"})
      -> (!tcx.buffer<1024x1024x1024xf64> {tc.name = "update:w"})
      attributes {tcx.activation_bytes = 34359738368 : i64, tcx.arena_size = 42949672960 : i64,
                  tcx.backward_bytes = 12884901888 : i64, tcx.buffer_bytes = 0 : i64,
                  tcx.const_bytes = 0 : i64, tcx.grad_bytes = 0 : i64, tcx.input_bytes = 1024 : i64,
                  tcx.param_bytes = 8589934592 : i64, tcx.peak_live_bytes = 42412802048 : i64,
                  tcx.state_bytes = 17179869184 : i64} {
    %w = tcx.param "w" {trainable} : !tcx.buffer<1024x1024x1024xf64>
    %m = tcx.param "exp_avg:w" {kind = "optimizer_state"} : !tcx.buffer<1024x1024x1024xf64>
    tcx.matmul ins(%w, %w : !tcx.buffer<1024x1024x1024xf64>, !tcx.buffer<1024x1024x1024xf64>) outs(%m : !tcx.buffer<1024x1024x1024xf64>) {m = 32768 : i64, n = 32768 : i64, k = 32768 : i64}
    return %w : !tcx.buffer<1024x1024x1024xf64>
  }
}

// -----

// Tests that a module without a plan is an error.
// H100: error: tcx-memory-report: no planned function to report (run tcx-plan-memory)
module {
  func.func @f() {
    return
  }
}
