//===- CudaCodegen.cpp - CUDA C++ source for tc kernels --------------------===//
//
// Three kernel shapes:
//   - elementwise fusions: a grid-stride loop over the iteration space, every
//     body value a per-thread scalar evaluated at the thread's index (numpy
//     broadcasting is index projection, so it composes); a 16-byte vector
//     path when every pointer is dense and aligned;
//   - row fusions (a final trailing-axis reduction, or last-axis softmax):
//     a warp (rows of up to 4096 elements) or a block per row, the chain recomputed
//     per pass, warp-shuffle / shared-memory reductions;
//   - standalone shape ops and reductions over any axes: generic strided
//     kernels whose shapes and strides come in `meta`.
// The ABI is documented in CudaCodegen.h. This file dispatches an op (or a
// tcx.kernel body) to its generator: FusionKernels.cpp, ShapeKernels.cpp,
// ReduceKernels.cpp (ScalarExpr.cpp gives each elementwise op's C
// expression, KernelSupport.h what they share).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/cuda/CudaCodegen.h"
#include "compiler/codegen/cuda/KernelSupport.h"
#include "compiler/Target.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;

namespace tc::cuda {

using namespace detail;

bool isKernelOp(Operation *op) {
  // A gather is the embedding library call where TcToTcx lowers it (rows of
  // a 2-D f32/bf16 table), this kernel otherwise (indexGatherKernel).
  return llvm::isa<tc::FusionOp, tc::RotaryOp>(op) || tc::isReduction(op) ||
         tc::isDataMovement(op);
}

FailureOr<KernelSource> generateKernel(Operation *op, const CodegenOptions &options) {
  for (Type t : llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes())) {
    auto rt = llvm::dyn_cast<RankedTensorType>(t);
    if (!rt || !rt.hasStaticShape() || storageType(rt.getElementType()).empty())
      return op->emitOpError() << "CUDA codegen: unsupported type " << t;
  }
  if (auto f = llvm::dyn_cast<tc::FusionOp>(op))
    return fusionKernel(f, options);
  Value in = op->getNumOperands() ? op->getOperand(0) : Value();
  if (auto t = llvm::dyn_cast<tc::TransposeOp>(op)) {
    auto st = denseStrides(shapeOf(in));
    SmallVector<int64_t> s;
    for (int64_t p : t.getPermutation())
      s.push_back(st[p]);
    return gatherKernel(op, s, 0, SmallVector<int64_t>(shapeOf(t.getResult())));
  }
  if (auto sl = llvm::dyn_cast<tc::SliceOp>(op)) {
    auto st = denseStrides(shapeOf(in));
    SmallVector<int64_t> s;
    int64_t base = 0;
    for (size_t d = 0; d < st.size(); ++d) {
      s.push_back(st[d] * sl.getStrides()[d]);
      base += sl.getStarts()[d] * st[d];
    }
    return gatherKernel(op, s, base, SmallVector<int64_t>(shapeOf(sl.getResult())));
  }
  if (auto b = llvm::dyn_cast<tc::BroadcastOp>(op)) {
    auto os = shapeOf(b.getResult());
    return gatherKernel(op, broadcastStrides(shapeOf(in), os), 0, SmallVector<int64_t>(os));
  }
  if (llvm::isa<tc::ReshapeOp>(op)) {
    int64_t n = product(shapeOf(in));
    return gatherKernel(op, {1}, 0, {n});
  }
  if (auto g = llvm::dyn_cast<tc::GatherOp>(op))
    return indexGatherKernel(g);
  if (auto c = llvm::dyn_cast<tc::ConcatOp>(op))
    return concatKernel(c);
  if (auto sp = llvm::dyn_cast<tc::SplitOp>(op))
    return splitKernel(sp);
  if (auto p = llvm::dyn_cast<tc::PadOp>(op))
    return padKernel(p);
  if (auto s = llvm::dyn_cast<tc::InsertSliceOp>(op))
    return insertSliceKernel(s);
  if (auto r = llvm::dyn_cast<tc::RotaryOp>(op))
    return rotaryKernel(r);
  if (llvm::isa<tc::ReduceSumOp, tc::ReduceMeanOp, tc::ReduceMaxOp, tc::ReduceMinOp, tc::ReduceProdOp>(op))
    return reduceKernel(op);
  return op->emitOpError() << "CUDA codegen: no kernel for this op";
}

/// The one op a standalone kernel's body holds (then the yield), else null.
static Operation *soleOp(tcx::KernelOp kernel) {
  Block &body = kernel.getEntry();
  if (body.empty() || std::next(body.begin()) == body.end() ||
      std::next(body.begin(), 2) != body.end())
    return nullptr;
  return &body.front();
}

bool hasGeneratedKernel(tcx::KernelOp kernel) {
  if (kernel.getKind() == "fusion")
    return true;
  Operation *op = soleOp(kernel);
  return op && isKernelOp(op) && !llvm::isa<tc::FusionOp>(op);
}

FailureOr<KernelSource> generateKernel(tcx::KernelOp kernel, const CodegenOptions &options) {
  if (kernel.getKind() == "fusion") {
    for (Type t : llvm::concat<Type>(kernel.getEntry().getArgumentTypes(),
                                     kernel.getEntry().getTerminator()->getOperandTypes())) {
      auto rt = llvm::dyn_cast<RankedTensorType>(t);
      if (!rt || !rt.hasStaticShape() || storageType(rt.getElementType()).empty())
        return kernel.emitOpError() << "CUDA codegen: unsupported type " << t;
    }
    return fusionKernel(kernel, options);
  }
  if (!hasGeneratedKernel(kernel))
    return kernel.emitOpError() << "CUDA codegen: no kernel for kind '" << kernel.getKind()
                                << "'";
  return generateKernel(soleOp(kernel), options);
}

FailureOr<std::vector<KernelSource>> generateKernels(ModuleOp module,
                                                     const CodegenOptions &options) {
  std::vector<KernelSource> out;
  bool ok = true;
  module.walk([&](Operation *op) {
    if (!isKernelOp(op) || llvm::isa<tc::FusionOp>(op->getParentOp()))
      return;
    auto k = generateKernel(op, options);
    if (failed(k)) {
      ok = false;
      return;
    }
    out.push_back(std::move(*k));
  });
  if (!ok)
    return failure();
  return out;
}

std::string nvrtcArch(llvm::StringRef target) {
  const TargetArch *a = findTargetArch(target.str());
  return a ? a->nvrtc : "";
}

} // namespace tc::cuda
