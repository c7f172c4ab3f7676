//===- Passes.h - CUDA code generation passes -------------------*- C++ -*-===//
#ifndef TC_COMPILER_CODEGEN_CUDA_PASSES_H
#define TC_COMPILER_CODEGEN_CUDA_PASSES_H

#include "dialects/tcx/IR/TcxOps.h"
#include "mlir/Pass/Pass.h"

namespace tc::cuda {
#define GEN_PASS_DECL
#include "compiler/codegen/cuda/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/codegen/cuda/Passes.h.inc"
} // namespace tc::cuda

#endif // TC_COMPILER_CODEGEN_CUDA_PASSES_H
