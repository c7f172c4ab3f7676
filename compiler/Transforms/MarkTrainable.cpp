//===- MarkTrainable.cpp - tc-mark-trainable -------------------------------===//
//
// ONNX does not say which initializers are trainable. This pass decides it
// from regexes on the parameter names (tc-compile's --trainable / --freeze):
// floating-point parameters matching a --trainable regex (all but those the
// importer marked as torch buffers with `tc.buffer`, when none is given) and
// no --freeze regex are trainable; everything else is frozen.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringExtras.h"
#include "runtime/src/schema/name_regex.h"

namespace tc {
#define GEN_PASS_DEF_TCMARKTRAINABLE
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;

namespace {

/// Compiles every regex (rt::NameRegex: tc's one dialect); emits an error
/// naming the bad one.
LogicalResult compileAll(ModuleOp module, ArrayRef<std::string> patterns,
                         StringRef flag, std::vector<tc::rt::NameRegex> *out) {
  for (const std::string &p : patterns) {
    tc::rt::NameRegex re;
    tc::rt::Status st = tc::rt::NameRegex::compile(p, flag.str(), &re);
    if (!st.isOk())
      return module.emitError() << st.message();
    out->push_back(std::move(re));
  }
  return success();
}

struct MarkTrainablePass : tc::impl::TcMarkTrainableBase<MarkTrainablePass> {
  using TcMarkTrainableBase::TcMarkTrainableBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::vector<tc::rt::NameRegex> train, freezeRe;
    if (failed(compileAll(module, trainable, "--trainable", &train)) ||
        failed(compileAll(module, freeze, "--freeze", &freezeRe)))
      return signalPassFailure();
    auto anyMatch = [](std::vector<tc::rt::NameRegex> &res, StringRef name) {
      return llvm::any_of(res, [&](tc::rt::NameRegex &re) { return re.search(name.str()); });
    };
    // How many floating-point parameters each regex names: a regex that
    // names none is an error (a typo would otherwise train another set).
    std::vector<int> trainHits(train.size()), freezeHits(freezeRe.size());
    std::vector<std::string> examples;
    module.walk([&](tc::ParameterOp p) {
      auto type = llvm::cast<RankedTensorType>(p.getType());
      StringRef name = p.getName();
      bool isFloat = llvm::isa<FloatType>(type.getElementType());
      if (isFloat) {
        for (size_t i = 0; i < train.size(); ++i)
          trainHits[i] += train[i].search(name.str());
        for (size_t i = 0; i < freezeRe.size(); ++i)
          freezeHits[i] += freezeRe[i].search(name.str());
        if (examples.size() < 3)
          examples.push_back("'" + name.str() + "'");
      }
      // The importer marks torch buffers (tc.buffer): frozen by default,
      // trainable only when a --trainable regex names them.
      bool buffer = p->hasAttr("tc.buffer");
      bool on = isFloat && (train.empty() ? !buffer : anyMatch(train, name)) &&
                !anyMatch(freezeRe, name);
      p.setTrainable(on);
    });
    auto check = [&](StringRef flag, ArrayRef<std::string> patterns, ArrayRef<int> hits) {
      for (size_t i = 0; i < patterns.size(); ++i) {
        if (hits[i] == 0) {
          module.emitError() << flag << " '" << patterns[i]
                             << "' matches no floating-point parameter (they are named like "
                             << llvm::join(examples, ", ") << ")";
          return false;
        }
        if (report)
          module.emitRemark() << flag << " '" << patterns[i] << "' matches " << hits[i]
                              << " parameter" << (hits[i] == 1 ? "" : "s");
      }
      return true;
    };
    if (!check("--trainable", trainable, trainHits) || !check("--freeze", freeze, freezeHits))
      return signalPassFailure();
  }
};

} // namespace
