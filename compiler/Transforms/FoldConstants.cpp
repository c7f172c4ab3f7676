//===- FoldConstants.cpp - tc-fold-constants -------------------------------===//
//
// Folds tc ops with all-constant operands by running them on the reference
// executor (dialects/tc/Eval/Program.h: evaluateOp).
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "dialects/tc/Eval/Program.h"

#include "mlir/IR/Builders.h"

namespace tc {
#define GEN_PASS_DEF_TCFOLDCONSTANTS
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;

namespace {
struct FoldConstantsPass : tc::impl::TcFoldConstantsBase<FoldConstantsPass> {
  using TcFoldConstantsBase::TcFoldConstantsBase;

  void runOnOperation() override {
    SmallVector<Operation *> worklist;
    getOperation().walk([&](Operation *op) {
      if (llvm::isa<tc::TCDialect>(op->getDialect()) &&
          !llvm::isa<tc::ConstantOp, tc::ParameterOp>(op))
        worklist.push_back(op);
    });
    // Walk order is program order, so a folded producer is already a constant
    // when its users are visited.
    for (Operation *op : worklist) {
      if (!llvm::all_of(op->getOperands(), [](Value v) {
            return v.getDefiningOp<tc::ConstantOp>();
          }))
        continue;
      int64_t elements = 0;
      for (Type t : op->getResultTypes())
        if (auto rt = llvm::dyn_cast<RankedTensorType>(t))
          elements += rt.hasStaticShape() ? rt.getNumElements() : maxElements + 1;
      if (elements > maxElements)
        continue;
      std::string error;
      auto values = tc::evaluateOp(op, {}, &error);
      if (failed(values)) {
        // A run-time error (an index out of range, say) stays a run-time
        // error; the op is left as it is.
        op->emitWarning() << "not folded: " << error;
        continue;
      }
      OpBuilder b(op);
      for (auto [result, value] : llvm::zip(op->getResults(), *values))
        result.replaceAllUsesWith(tc::ConstantOp::create(b, op->getLoc(), value));
      op->erase();
    }
  }
};
} // namespace
