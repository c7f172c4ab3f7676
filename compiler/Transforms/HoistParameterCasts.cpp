//===- HoistParameterCasts.cpp - tc-hoist-parameter-casts ------------------===//
//
// The precision plan casts each fp32 master weight to the 16-bit type its
// GEMMs read, where the importer put the weight's first use: in HF Llama's
// dynamo export next to each layer, so the 98 casts of a step were 98
// launches between the layers' kernels. Moved right after the parameter they
// read (the parameters open the function), they are adjacent launches of one
// kernel that the runtime groups into one. Their results are the GEMMs'
// operands in the forward and the backward, live to the backward anyway:
// the plan's peak does not move.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"

namespace tc {
#define GEN_PASS_DEF_TCHOISTPARAMETERCASTS
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;
using namespace tc;

namespace {

struct TcHoistParameterCasts : tc::impl::TcHoistParameterCastsBase<TcHoistParameterCasts> {
  void runOnOperation() override {
    SmallVector<CastOp> casts;
    getOperation().walk([&](CastOp c) {
      auto p = c.getInput().getDefiningOp<ParameterOp>();
      if (p && p->getBlock() == c->getBlock())
        casts.push_back(c);
    });
    for (CastOp c : casts)
      c->moveAfter(c.getInput().getDefiningOp());
  }
};

} // namespace
