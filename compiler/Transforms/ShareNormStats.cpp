//===- ShareNormStats.cpp - tc-share-norm-stats ---------------------------===//
//
// Pairs each layer_norm / rms_norm of the library's form with a gradient of
// the same input, scale, axis and epsilon (the same tc.norm_stats integer on
// both): the forward kernel then writes its row statistics (mean, rstd) and
// the gradient reads them instead of recomputing them with a forward pass
// of its own.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Transforms/Passes.h"

#include "llvm/ADT/DenseSet.h"

namespace tc {
#define GEN_PASS_DEF_TCSHARENORMSTATS
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;

namespace tc {
namespace {

struct TcShareNormStats : impl::TcShareNormStatsBase<TcShareNormStats> {
  void runOnOperation() override {
    DenseSet<Operation *> paired;
    int64_t next = 0;
    for (Block &block : getOperation().getBody())
      for (Operation &norm : block) {
        bool rms = isa<RmsNormOp>(norm);
        if (!rms && !isa<LayerNormOp>(norm))
          continue;
        Value x = norm.getOperand(0);
        Type elt = llvm::cast<RankedTensorType>(x.getType()).getElementType();
        Value scale = rms ? llvm::cast<RmsNormOp>(norm).getScale()
                          : llvm::cast<LayerNormOp>(norm).getScale();
        Value param = rms || scale ? scale : llvm::cast<LayerNormOp>(norm).getBias();
        if (!normTypes(elt, param))
          continue; // no library forward to write the statistics
        for (Operation *u : x.getUsers()) {
          bool match = rms ? isa<RmsNormGradOp>(u) : isa<LayerNormGradOp>(u);
          if (!match || u->getOperand(0) != x || paired.contains(u) ||
              u->getAttr("axis") != norm.getAttr("axis") ||
              u->getAttr("epsilon") != norm.getAttr("epsilon"))
            continue;
          Value uScale = u->getNumOperands() > 2 ? u->getOperand(2) : Value();
          if (uScale != scale)
            continue;
          auto id = IntegerAttr::get(IntegerType::get(&getContext(), 64), next++);
          norm.setAttr(kNormStatsAttr, id);
          u->setAttr(kNormStatsAttr, id);
          paired.insert(u);
          break;
        }
      }
  }
};

} // namespace
} // namespace tc
