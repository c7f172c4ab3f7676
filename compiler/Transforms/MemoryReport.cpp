//===- MemoryReport.cpp - tcx-memory-report --------------------------------===//
//
// Prints tc::memoryReport of a planned module: lets lit check the table
// `tc-compile --report memory` prints, from tc-opt.
//
//===----------------------------------------------------------------------===//

#include "compiler/MemoryPlan.h"
#include "compiler/Transforms/Passes.h"

#include "llvm/Support/raw_ostream.h"

namespace tc {
#define GEN_PASS_DEF_TCXMEMORYREPORT
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;

namespace {
struct TcxMemoryReport : tc::impl::TcxMemoryReportBase<TcxMemoryReport> {
  using Base::Base;
  void runOnOperation() override {
    std::string error;
    auto report = tc::memoryReport(getOperation(), target, function, &error);
    if (failed(report)) {
      getOperation().emitError() << "tcx-memory-report: " << error;
      return signalPassFailure();
    }
    llvm::outs() << *report;
    llvm::outs().flush();
    markAllAnalysesPreserved();
  }
};
} // namespace
