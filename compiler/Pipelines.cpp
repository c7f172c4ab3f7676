//===- Pipelines.cpp - the named pass pipelines of tc-compile -------------===//

#include "compiler/Pipelines.h"

#include "compiler/Conversion/Passes.h"
#include "compiler/Transforms/Passes.h"
#include "compiler/codegen/cuda/Passes.h"
#include "dialects/tcx/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace tc {

void buildImportCleanupPipeline(OpPassManager &pm, const ImportCleanupPipelineOptions &o) {
  pm.addPass(createCanonicalizerPass());
  pm.addNestedPass<func::FuncOp>(createTcFoldConstants());
  pm.addPass(createCSEPass());
  pm.addNestedPass<func::FuncOp>(createTcRecognizeRmsNorm());
  if (o.fuseAttention)
    pm.addNestedPass<func::FuncOp>(createTcRecognizeAttention({o.fuseKeyMasks}));
  pm.addPass(createCanonicalizerPass());
}

void buildTrainingPipeline(OpPassManager &pm, const TrainingPipelineOptions &o) {
  // Precision before autodiff: the backward differentiates the casts, so it
  // runs in bf16 where the forward does and the f32 master weights get f32
  // gradients. Runs in every mode (fp32/tf32 only annotate, for the report).
  TcPrecisionOptions prec;
  prec.mode = o.precision;
  pm.addNestedPass<func::FuncOp>(createTcPrecision(prec));
  if (o.trainable.empty() && o.freeze.empty() && !o.train)
    return;
  TcMarkTrainableOptions mark;
  mark.report = true;
  mark.trainable.assign(o.trainable.begin(), o.trainable.end());
  mark.freeze.assign(o.freeze.begin(), o.freeze.end());
  pm.addPass(createTcMarkTrainable(mark));
  if (!o.train)
    return;
  TcAutodiffOptions ad;
  ad.loss = o.loss;
  pm.addPass(createTcAutodiff(ad));
  TcOptimizerOptions opt;
  opt.report = true;
  opt.optimizer = o.optimizer;
  opt.momentum = o.momentum;
  opt.beta1 = o.beta1;
  opt.beta2 = o.beta2;
  opt.eps = o.eps;
  opt.weightDecay = o.weightDecay;
  opt.noDecay.assign(o.noDecay.begin(), o.noDecay.end());
  opt.clipGradNorm = o.clipGradNorm;
  pm.addPass(createTcOptimizer(opt));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void buildGpuPipeline(OpPassManager &pm, const GpuPipelineOptions &o) {
  pm.addNestedPass<func::FuncOp>(createTcDecomposeRotary());
  pm.addNestedPass<func::FuncOp>(createTcFuse());
  // What the library calls compute besides their own op, decided on tc
  // (after tc-fuse: the bf16 casts the classifier absorbs are fusions).
  pm.addNestedPass<func::FuncOp>(createTcFuseMatmulEpilogue());
  pm.addNestedPass<func::FuncOp>(createTcFuseCrossEntropy());
  pm.addNestedPass<func::FuncOp>(createTcShareNormStats());
  pm.addNestedPass<func::FuncOp>(createTcFuseAttentionViews());
  TcLowerToTcxOptions lower;
  lower.tf32 = o.tf32;
  pm.addPass(createTcLowerToTcx(lower));
  pm.addPass(tcx::createTcxEliminateDeadWork());
  pm.addNestedPass<func::FuncOp>(tcx::createTcxPlanMemory());
  pm.addPass(cuda::createTcxGenerateCuda());
}

void registerTcPipelines() {
  PassPipelineRegistration<ImportCleanupPipelineOptions>(
      "tc-import-cleanup", "tc-compile's cleanup of an imported module", buildImportCleanupPipeline);
  PassPipelineRegistration<TrainingPipelineOptions>(
      "tc-training", "tc-compile's precision plan, trainability, backward and optimizer step",
      buildTrainingPipeline);
  PassPipelineRegistration<GpuPipelineOptions>(
      "tc-gpu", "tc-compile's GPU half: fusion, tcx, memory plan, CUDA codegen", buildGpuPipeline);
}

} // namespace tc
