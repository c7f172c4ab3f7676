//===- EliminateDeadWork.cpp - tcx-eliminate-dead-work --------------------===//
//
// Removes tcx work whose outputs nobody reads, the allocs it wrote, the
// views, consts and params left unread, and the kernels no launch uses.
// tc-lower-to-tcx converts 1:1, so what a library call or view made
// redundant (a transpose folded into every matmul that read it, the
// widening cast under a bf16 fused classifier, a split whose pieces are
// read in place) goes here.
//
//===----------------------------------------------------------------------===//

#include "dialects/tcx/Transforms/Passes.h"

#include "llvm/ADT/DenseSet.h"

namespace tcx {
#define GEN_PASS_DEF_TCXELIMINATEDEADWORK
#include "dialects/tcx/Transforms/Passes.h.inc"
} // namespace tcx

using namespace mlir;

namespace {

/// Whether `use` only writes its buffer (an output of a launch, library
/// call, matmul, copy or fill).
bool isWriteOnlyUse(OpOperand &use) {
  Operation *u = use.getOwner();
  if (auto l = llvm::dyn_cast<tcx::LaunchOp>(u))
    return use.getOperandNumber() >= l.getInputs().size();
  if (auto l = llvm::dyn_cast<tcx::LibraryOp>(u))
    return use.getOperandNumber() >= l.getInputs().size();
  if (auto m = llvm::dyn_cast<tcx::MatmulOp>(u))
    return use.getOperandNumber() >= m.getInputs().size(); // out, bias_grad_out, aux_out
  if (auto c = llvm::dyn_cast<tcx::CopyOp>(u))
    return use.get() == c.getTarget();
  return isa<tcx::FillOp>(u);
}

void eliminateDeadWork(Block &body) {
  bool changed = true;
  while (changed) {
    changed = false;
    // Views nobody reads (e.g. of a split whose pieces are now read in
    // place) do not keep their buffer's writer alive.
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (isa<tcx::ViewOp>(op) && op.use_empty())
        op.erase();
    // Snapshot the work ops (allocs erased below are never in it).
    SmallVector<Operation *> work;
    for (Operation &op : llvm::reverse(body))
      if (isa<tcx::LaunchOp, tcx::LibraryOp, tcx::MatmulOp>(op))
        work.push_back(&op);
    for (Operation *op : work) {
      // Dead when every buffer it writes is an alloc only written.
      bool dead = true;
      for (OpOperand &operand : op->getOpOperands()) {
        if (!isWriteOnlyUse(operand))
          continue;
        auto alloc = operand.get().getDefiningOp<tcx::AllocOp>();
        if (!alloc || !llvm::all_of(alloc->getUses(), isWriteOnlyUse)) {
          dead = false;
          break;
        }
      }
      if (!dead)
        continue;
      SmallVector<Operation *> allocs;
      for (OpOperand &operand : op->getOpOperands())
        if (isWriteOnlyUse(operand))
          allocs.push_back(operand.get().getDefiningOp());
      op->erase();
      for (Operation *a : allocs)
        if (a->use_empty())
          a->erase();
      changed = true;
    }
  }
  for (Operation &op : llvm::make_early_inc_range(body))
    if (isa<tcx::ViewOp, tcx::ConstOp, tcx::ParamOp>(op) && op.use_empty())
      op.erase();
}

struct TcxEliminateDeadWork : tcx::impl::TcxEliminateDeadWorkBase<TcxEliminateDeadWork> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto fn : module.getOps<func::FuncOp>())
      if (llvm::hasSingleElement(fn.getBody()))
        eliminateDeadWork(fn.getBody().front());
    DenseSet<StringRef> used;
    module.walk([&](tcx::LaunchOp l) { used.insert(l.getKernel()); });
    for (auto k : llvm::make_early_inc_range(module.getOps<tcx::KernelOp>()))
      if (!used.contains(k.getSymName()))
        k.erase();
  }
};

} // namespace
