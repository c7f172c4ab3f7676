//===- Compile.cpp - import, pipeline, artifact ---------------------------===//

#include "compiler/Compile.h"

#include "compiler/Program.h"
#include "compiler/Transforms/Passes.h"
#include "dialects/tc/IR/TcOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace tc {

void loadCompilerDialects(MLIRContext &ctx) {
  DialectRegistry registry;
  registry.insert<func::FuncDialect>();
  registerTcDialect(registry);
  ctx.appendDialectRegistry(registry);
  ctx.loadAllAvailableDialects();
}

namespace {
/// Collects diagnostics into a string instead of printing them.
struct DiagnosticCollector {
  explicit DiagnosticCollector(MLIRContext &ctx)
      : handler(&ctx, [this](Diagnostic &d) {
          if (!text.empty())
            text += "\n";
          text += d.str();
          return success();
        }) {}
  std::string text;
  ScopedDiagnosticHandler handler;
};
} // namespace

LogicalResult runImportCleanup(ModuleOp module, std::string *error) {
  DiagnosticCollector diags(*module.getContext());
  PassManager pm(module.getContext());
  pm.addPass(createCanonicalizerPass());
  pm.addNestedPass<func::FuncOp>(createTcFoldConstants());
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
  if (failed(pm.run(module))) {
    *error = diags.text.empty() ? "the import-cleanup pipeline failed" : diags.text;
    return failure();
  }
  return success();
}

bool importModel(MLIRContext &ctx, const CompileOptions &opts, CompileResult *result,
                 CompileError *error) {
  std::string msg;
  auto imported = onnx_import::importOnnxFile(ctx, opts.modelPath, opts.import, &msg);
  if (failed(imported)) {
    error->kind = CompileErrorKind::BadInput;
    error->message = msg;
    return false;
  }
  result->imported = std::move(imported->module);
  // Keep the weights with the result: stash them in the artifact right away.
  rt::Artifact &a = result->artifact;
  for (onnx_import::ImportedWeight &w : imported->weights) {
    rt::Parameter p;
    p.name = w.name;
    p.type = w.tensor.type;
    p.hasData = !w.tensor.data.empty() || p.type.numElements() == 0;
    // 64-byte alignment so that a runtime can map weights in place.
    a.weights.resize((a.weights.size() + 63) / 64 * 64);
    p.offset = a.weights.size();
    p.bytes = w.tensor.data.size();
    a.weights.insert(a.weights.end(), w.tensor.data.begin(), w.tensor.data.end());
    a.params.push_back(std::move(p));
  }
  return true;
}

bool compile(MLIRContext &ctx, const CompileOptions &opts, CompileResult *result,
             CompileError *error) {
  if (opts.target != "cpu") {
    error->kind = CompileErrorKind::BadInput;
    error->message = "target '" + opts.target +
                     "' needs the CUDA backend, which this build does not have yet "
                     "(use --target cpu)";
    return false;
  }
  if (!importModel(ctx, opts, result, error))
    return false;
  {
    DiagnosticCollector diags(ctx);
    if (failed(verify(*result->imported))) {
      error->kind = CompileErrorKind::Internal;
      error->message = "the imported module does not verify: " + diags.text;
      return false;
    }
  }
  result->module = OwningOpRef<ModuleOp>(cast<ModuleOp>(result->imported->getOperation()->clone()));
  std::string msg;
  if (failed(runImportCleanup(*result->module, &msg))) {
    error->kind = CompileErrorKind::Internal;
    error->message = msg;
    return false;
  }
  rt::Artifact &a = result->artifact;
  a.target = opts.target;
  a.producer = "tc-compile 0.1";
  // Mark parameters trainable as the IR says.
  llvm::StringSet<> trainable;
  result->module->walk([&](ParameterOp p) {
    if (p.getTrainable())
      trainable.insert(p.getName());
  });
  for (rt::Parameter &p : a.params)
    p.trainable = trainable.contains(p.name);
  for (auto fn : result->module->getOps<func::FuncOp>()) {
    std::string name = fn.getName().str();
    auto program = lowerToProgram(fn, name, &msg);
    if (failed(program)) {
      error->kind = CompileErrorKind::Internal;
      error->message = "lowering @" + name + " to the reference program: " + msg;
      return false;
    }
    a.functions.push_back(std::move(*program));
  }
  return true;
}

} // namespace tc
