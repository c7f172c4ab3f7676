//===- GenerateCuda.cpp - tcx-generate-cuda --------------------------------===//
//
// CUDA C++ for every tcx.kernel body, as module-level tcx.cuda_source ops,
// and the launch parameters codegen chose on each tcx.launch. The GPU
// pipeline's last stage: it reads tcx only, and nothing flows back.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/cuda/CudaCodegen.h"
#include "compiler/codegen/cuda/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"

namespace tc::cuda {
#define GEN_PASS_DEF_TCXGENERATECUDA
#include "compiler/codegen/cuda/Passes.h.inc"
} // namespace tc::cuda

using namespace mlir;

namespace {

struct TcxGenerateCuda : tc::cuda::impl::TcxGenerateCudaBase<TcxGenerateCuda> {
  using TcxGenerateCudaBase::TcxGenerateCudaBase;
  void runOnOperation() override {
    tc::cuda::CodegenOptions options;
    options.groupSplitRows = groupSplitRows;
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    SymbolTable symbols(module);
    // The launch of each generated kernel, keyed by the tcx.kernel.
    llvm::StringMap<tc::cuda::KernelSource> generated;
    // Sources in the order of their first kernel, placed before it.
    llvm::StringMap<tcx::CudaSourceOp> sources;
    bool ok = true;
    for (auto kernel : llvm::make_early_inc_range(module.getOps<tcx::KernelOp>())) {
      if (!tc::cuda::hasGeneratedKernel(kernel))
        continue;
      FailureOr<tc::cuda::KernelSource> k = tc::cuda::generateKernel(kernel, options);
      if (failed(k)) {
        ok = false;
        continue;
      }
      auto it = sources.find(k->name);
      if (it == sources.end()) {
        OpBuilder b(kernel);
        auto src = tcx::CudaSourceOp::create(b, kernel.getLoc(), b.getStringAttr(k->name),
                                             b.getStringAttr(k->source));
        if (symbols.lookup(k->name)) {
          src.erase();
          kernel.emitOpError() << "generated kernel name " << k->name
                               << " clashes with a symbol of the module";
          ok = false;
          continue;
        }
        symbols.insert(src);
        it = sources.try_emplace(k->name, src).first;
      }
      kernel.setCudaKernelAttr(FlatSymbolRefAttr::get(ctx, k->name));
      generated[kernel.getSymName()] = std::move(*k);
    }
    if (!ok)
      return signalPassFailure();
    Builder b(ctx);
    module.walk([&](tcx::LaunchOp l) {
      auto it = generated.find(l.getKernel());
      if (it == generated.end())
        return;
      const tc::cuda::KernelSource &k = it->second;
      for (const tc::cuda::KernelParam &p : k.params) {
        if (p.kind == tc::cuda::ParamKind::Int64)
          l.setNAttr(b.getI64IntegerAttr(p.values.at(0)));
        else if (p.kind == tc::cuda::ParamKind::Int64Array)
          l.setMetaAttr(b.getDenseI64ArrayAttr(p.values));
      }
      l.setGridAttr(b.getDenseI64ArrayAttr({k.launch.grid}));
      l.setBlockAttr(b.getDenseI64ArrayAttr({k.launch.block}));
    });
  }
};

} // namespace
