//===- PrecisionReport.cpp - tc-precision-report ---------------------------===//
//
// Prints tc::precisionReport of one function: lets lit check the table
// `tc-compile --report precision` prints, from tc-opt.
//
//===----------------------------------------------------------------------===//

#include "compiler/PrecisionPlan.h"
#include "compiler/Transforms/Passes.h"

#include "llvm/Support/raw_ostream.h"

namespace tc {
#define GEN_PASS_DEF_TCPRECISIONREPORT
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

namespace {
struct PrecisionReportPass : tc::impl::TcPrecisionReportBase<PrecisionReportPass> {
  using Base::Base;
  void runOnOperation() override {
    llvm::outs() << tc::precisionReport(getOperation(), function);
    llvm::outs().flush();
    markAllAnalysesPreserved();
  }
};
} // namespace
