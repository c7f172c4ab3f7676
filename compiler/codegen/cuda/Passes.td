//===- Passes.td - CUDA code generation passes ------------*- tablegen -*-===//
//
// The last stage of the GPU pipeline: tcx kernel bodies to CUDA C++.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_CODEGEN_CUDA_PASSES_TD
#define TC_COMPILER_CODEGEN_CUDA_PASSES_TD

include "mlir/Pass/PassBase.td"

def TcxGenerateCuda : Pass<"tcx-generate-cuda", "mlir::ModuleOp"> {
  let summary = "Generate the CUDA C++ of every tcx.kernel and how to launch it";
  let description = [{
    Runs after tc-lower-to-tcx and reads only tcx: every `tcx.kernel` whose
    body codegen handles (kind "fusion", or one transpose / slice /
    broadcast / reshape / concat / split / pad / insert_slice / reduction op)
    gets one CUDA C++ kernel (compiler/codegen/cuda/CudaCodegen.h gives the
    ABI). The source becomes a module-level `tcx.cuda_source` named like
    its `extern "C"` symbol (kind + hash of the source, so equal kernels
    share one), the kernel names it in `cuda_kernel`, and every
    `tcx.launch` of the kernel gets the launch codegen chose: `grid`,
    `block`, and the scalar arguments `n` and `meta`. A kernel codegen does
    not handle (e.g. an integer matmul) keeps no `cuda_kernel`: the device
    program marks its launch as missing a kernel, and a runtime refuses
    the step. Nothing is written back into tc ops; NVRTC compiles the
    sources after the pipeline.

    Before:
    ```mlir
    tcx.kernel @f_transpose_0 kind("transpose") {
    ^bb0(%a: tensor<4x8xf32>):
      %0 = tc.transpose %a {permutation = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
      tcx.yield %0 : tensor<8x4xf32>
    }
    ... tcx.launch @f_transpose_0 ins(%x : ...) outs(%y : ...) {elements = 32 : i64}
    ```
    After:
    ```mlir
    tcx.cuda_source @tc_gather_<hash> "..."
    tcx.kernel @f_transpose_0 kind("transpose") attributes {cuda_kernel = @tc_gather_<hash>} {...}
    ... tcx.launch @f_transpose_0 ins(...) outs(...)
          {block = array<i64: 256>, elements = 32 : i64, grid = array<i64: 1>,
           meta = array<i64: ...>, n = 32 : i64}
    ```
  }];
  let options = [
    Option<"groupSplitRows", "group-split-rows", "bool", /*default=*/"false",
           "Split single-row reductions share one kernel with grouped launches "
           "(CodegenOptions::groupSplitRows; tc-compile --experimental=group-sums)">,
  ];
  let dependentDialects = ["::tcx::TcxDialect"];
}

#endif // TC_COMPILER_CODEGEN_CUDA_PASSES_TD
