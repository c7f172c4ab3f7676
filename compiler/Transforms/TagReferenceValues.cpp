//===- TagReferenceValues.cpp - tc-tag-reference-values -------------------===//
//
// The first pass of the GPU pipeline: every op gets the id of its first
// result in the op-level reference program (tagReferenceValues), so that the
// device program can say which reference value each buffer holds.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "dialects/tc/Eval/Program.h"

namespace tc {
#define GEN_PASS_DEF_TCTAGREFERENCEVALUES
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;

namespace {
struct TcTagReferenceValues : tc::impl::TcTagReferenceValuesBase<TcTagReferenceValues> {
  using Base::Base;
  void runOnOperation() override { tc::tagReferenceValues(getOperation()); }
};
} // namespace
