//===- precision_test.cpp - tc-precision mode=bf16 on the gpt2 fixture ----===//
//
// Imports test/fixtures/gpt2.ts.onnx (batch 2, seq 16), runs @infer on the
// CPU reference executor in f32 and again after tc-precision mode=bf16 (the
// executor rounds every bf16 value, so this is bf16 emulated exactly): the
// losses agree within 2e-2 relative (and the same for llama.ts.onnx). Then tc-autodiff on the bf16 module must
// give f32 parameter gradients close to the f32 ones (fp32 master weights).
//
//===----------------------------------------------------------------------===//

#include "compiler/Compile.h"
#include "compiler/PrecisionPlan.h"
#include "compiler/Transforms/Passes.h"
#include "dialects/tc/Eval/Program.h"
#include "dialects/tc/IR/TcOps.h"
#include "runtime/src/base/host_tensor.h"
#include "runtime/src/base/npy.h"
#include "runtime/src/cpu/executor.h"
#include "tools/OnnxInput.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

using namespace mlir;

namespace {

const std::string kFixtures = TC_FIXTURES_DIR;

struct Fixture {
  MLIRContext ctx;
  tc::CompileInput imported;
  std::map<std::string, tc::rt::HostTensor> weights; // by parameter name
  std::vector<tc::rt::HostTensor> inputs; // input_ids, labels

  /// `model`: "gpt2" or "llama" (the TorchScript exports, batch 2, seq 16).
  bool load(const std::string &model, std::string *err) {
    tc::loadCompilerDialects(ctx);
    tc::onnx_import::ImportOptions opts;
    opts.inputShapes["input_ids"] = {2, 16};
    opts.inputShapes["labels"] = {2, 16};
    if (!tc::importOnnx(ctx, kFixtures + "/" + model + ".ts.onnx", opts, &imported, err))
      return false;
    for (const auto &[name, t] : imported.weights)
      weights[name] = t;
    tc::rt::HostTensor ids, labels;
    tc::rt::Status s1 = tc::rt::readNpy(kFixtures + "/" + model + ".input_ids.npy", &ids);
    tc::rt::Status s2 = tc::rt::readNpy(kFixtures + "/" + model + ".labels.npy", &labels);
    if (!s1.isOk() || !s2.isOk()) {
      *err = s1.isOk() ? s2.toString() : s1.toString();
      return false;
    }
    inputs = {ids, labels};
    return true;
  }

  /// A cleaned-up copy of the imported module, with `mode` applied (empty:
  /// no tc-precision) and with `train` also tc-autodiff.
  OwningOpRef<ModuleOp> prepare(const std::string &mode, bool train, std::string *err) {
    OwningOpRef<ModuleOp> m(cast<ModuleOp>(imported.module->getOperation()->clone()));
    if (failed(tc::runImportCleanup(*m, tc::CompileOptions(), err)))
      return {};
    if (!mode.empty()) {
      PassManager pm(&ctx);
      tc::TcPrecisionOptions o;
      o.mode = mode;
      pm.addNestedPass<func::FuncOp>(tc::createTcPrecision(o));
      if (failed(pm.run(*m))) {
        *err = "tc-precision failed";
        return {};
      }
    }
    if (train) {
      tc::CompileOptions opts;
      opts.train.enabled = true;
      opts.train.loss = "loss";
      if (failed(tc::runTrainingPipeline(*m, opts, err)))
        return {};
    }
    return m;
  }

  /// Runs `name` of `m` and returns its outputs with their names.
  bool run(ModuleOp m, const std::string &name, std::vector<tc::rt::HostTensor> *outs,
           std::vector<std::string> *names, std::string *err) {
    auto fn = m.lookupSymbol<func::FuncOp>(name);
    if (!fn) {
      *err = "no @" + name;
      return false;
    }
    auto lowered = tc::lowerToProgram(fn, name, err);
    if (failed(lowered))
      return false;
    *names = lowered->outputNames;
    tc::rt::Status st =
        tc::rt::runFunction(tc::rt::Artifact(), *lowered, inputs, outs, {}, &weights);
    if (!st.isOk()) {
      *err = st.toString();
      return false;
    }
    return true;
  }

  double loss(ModuleOp m, const std::string &fn, std::string *err) {
    std::vector<tc::rt::HostTensor> outs;
    std::vector<std::string> names;
    if (!run(m, fn, &outs, &names, err))
      return NAN;
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == "loss")
        return tc::rt::hostTensorToDoubles(outs[i])[0];
    *err = "no loss output";
    return NAN;
  }
};

/// The loss of `model` in emulated bf16 is within 2e-2 relative of f32
/// (`refLoss`: PyTorch's float32 loss from <model>.ref.json).
void checkLoss(const std::string &model, double refLoss) {
  SCOPED_TRACE(model);
  Fixture f;
  std::string err;
  ASSERT_TRUE(f.load(model, &err)) << err;
  auto m32 = f.prepare("", false, &err);
  ASSERT_TRUE(m32) << err;
  auto m16 = f.prepare("bf16", false, &err);
  ASSERT_TRUE(m16) << err;

  // The plan: bf16 matmuls, every op annotated.
  int64_t bf16Matmuls = 0, unannotated = 0;
  m16->walk([&](Operation *op) {
    if (!llvm::isa<tc::TCDialect>(op->getDialect()))
      return;
    if (!op->hasAttr("tc.precision"))
      ++unannotated;
    if (auto mm = llvm::dyn_cast<tc::MatmulOp>(op))
      bf16Matmuls += llvm::isa<BFloat16Type>(
          llvm::cast<RankedTensorType>(mm.getType()).getElementType());
  });
  EXPECT_GT(bf16Matmuls, 0);
  EXPECT_EQ(unannotated, 0);
  std::string report = tc::precisionReport(*m16, "infer");
  EXPECT_NE(report.find("matmul FLOPs in bf16:"), std::string::npos) << report;
  EXPECT_NE(report.find("(100.0%)"), std::string::npos) << report;

  double l32 = f.loss(*m32, "infer", &err);
  ASSERT_FALSE(std::isnan(l32)) << err;
  double l16 = f.loss(*m16, "infer", &err);
  ASSERT_FALSE(std::isnan(l16)) << err;
  EXPECT_NEAR(l32, refLoss, 1e-4 * refLoss);
  EXPECT_NE(l16, l32) << "bf16 changed nothing: was the plan applied?";
  EXPECT_LE(std::fabs(l16 - l32), 2e-2 * std::fabs(l32)) << "f32 " << l32 << " bf16 " << l16;
  std::printf("%s loss: f32 %.7f, emulated bf16 %.7f (rel %.2e)\n", model.c_str(), l32,
              l16, std::fabs(l16 - l32) / std::fabs(l32));
}

TEST(Precision, Gpt2Bf16LossWithin2e2OfF32) { checkLoss("gpt2", 5.5439434); }
TEST(Precision, LlamaBf16LossWithin2e2OfF32) { checkLoss("llama", 5.5601921); }

TEST(Precision, Gpt2Bf16GradientsAreF32AndClose) {
  Fixture f;
  std::string err;
  ASSERT_TRUE(f.load("gpt2", &err)) << err;
  auto m32 = f.prepare("", true, &err);
  ASSERT_TRUE(m32) << err;
  auto m16 = f.prepare("bf16", true, &err);
  ASSERT_TRUE(m16) << err;
  std::vector<tc::rt::HostTensor> g32, g16;
  std::vector<std::string> n32, n16;
  ASSERT_TRUE(f.run(*m32, "grad_step", &g32, &n32, &err)) << err;
  ASSERT_TRUE(f.run(*m16, "grad_step", &g16, &n16, &err)) << err;
  ASSERT_EQ(n32, n16);
  ASSERT_GT(n16.size(), 1u);
  double loss32 = tc::rt::hostTensorToDoubles(g32[0])[0];
  double loss16 = tc::rt::hostTensorToDoubles(g16[0])[0];
  EXPECT_LE(std::fabs(loss16 - loss32), 2e-2 * std::fabs(loss32));
  // Global gradient norms and their difference.
  double sq32 = 0, sqDiff = 0;
  for (size_t i = 1; i < n16.size(); ++i) {
    SCOPED_TRACE(n16[i]);
    EXPECT_EQ(g16[i].type.dtype, tc::rt::DType::F32) << "master-weight gradients stay f32";
    EXPECT_EQ(g16[i].type.shape, g32[i].type.shape);
    auto a = tc::rt::hostTensorToDoubles(g32[i]);
    auto b = tc::rt::hostTensorToDoubles(g16[i]);
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) {
      ASSERT_TRUE(std::isfinite(b[k]));
      sq32 += a[k] * a[k];
      sqDiff += (a[k] - b[k]) * (a[k] - b[k]);
    }
  }
  double rel = std::sqrt(sqDiff) / std::sqrt(sq32);
  std::printf("gpt2 gradients: |g32| %.5f, |g16 - g32| / |g32| %.3e\n", std::sqrt(sq32), rel);
  EXPECT_LT(rel, 5e-2);
}

} // namespace
