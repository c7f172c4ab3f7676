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
  if (o.recognizeGelu)
    pm.addNestedPass<func::FuncOp>(createTcRecognizeGelu({o.recognizeGeluErf}));
  pm.addNestedPass<func::FuncOp>(createTcRecognizeRmsNorm());
  pm.addNestedPass<func::FuncOp>(createTcRecognizeRotary());
  if (o.fuseAttention)
    pm.addNestedPass<func::FuncOp>(createTcRecognizeAttention({o.fuseKeyMasks}));
  if (o.mergeProjections)
    pm.addNestedPass<func::FuncOp>(createTcMergeProjections());
  pm.addPass(createCanonicalizerPass());
}

void buildTrainingPipeline(OpPassManager &pm, const TrainingPipelineConfig &c) {
  // Precision before autodiff: the backward differentiates the casts, so it
  // runs in bf16 where the forward does and the f32 master weights get f32
  // gradients. Runs in every mode (fp32/tf32 only annotate, for the report).
  pm.addNestedPass<func::FuncOp>(createTcPrecision(c.precision));
  // After the precision plan (the classifier's GEMM dtype is chosen), before
  // the backward (which differentiates the pad and the bias).
  if (c.padVocab > 0)
    pm.addNestedPass<func::FuncOp>(createTcPadVocab({c.padVocab}));
  if (!c.trainability.trainable.empty() || !c.trainability.freeze.empty() || c.train)
    pm.addPass(createTcMarkTrainable(c.trainability));
  if (c.train) {
    pm.addPass(createTcAutodiff(c.autodiff));
    pm.addNestedPass<func::FuncOp>(createTcConcatSliceGrads());
  }
  // FP8 after the backward exists (tc.quantize has no gradient): the
  // forward's FP8 copies are shared with dgrad and wgrad.
  if (c.precision.mode == "fp8")
    pm.addPass(createTcQuantizeFp8(c.quantizeFp8));
  // The plan casts constants at their use (a scalar 3.0 to bf16 for
  // pow(x, 3.0)) and the backward computes with constants (pow's exponent
  // 3 - 1): folded, they are constants again, which the GPU kernels take as
  // literals instead of as buffers a small kernel fills every step.
  pm.addNestedPass<func::FuncOp>(createTcFoldConstants({/*maxElements=*/1 << 12}));
  if (!c.train)
    return;
  pm.addPass(createTcOptimizer(c.optimizer));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

TrainingPipelineConfig TrainingPipelineOptions::config() const {
  TrainingPipelineConfig c;
  c.precision.mode = precision;
  c.precision.fp8Scaling = fp8Scaling;
  c.precision.keepHighPrecision.assign(keepHighPrecision.begin(), keepHighPrecision.end());
  c.precision.highPrecisionFirst = highPrecisionFirst;
  c.precision.highPrecisionLast = highPrecisionLast;
  c.precision.fp8LmHead = fp8LmHead;
  c.precision.allowFallback = allowFallback;
  c.quantizeFp8.allowFallback = allowFallback;
  c.quantizeFp8.amaxHistory = fp8AmaxHistory;
  c.quantizeFp8.amaxCompute = fp8AmaxCompute;
  c.padVocab = padVocab;
  c.trainability.trainable.assign(trainable.begin(), trainable.end());
  c.trainability.freeze.assign(freeze.begin(), freeze.end());
  c.train = train;
  c.autodiff.loss = loss;
  c.optimizer.optimizer = optimizer;
  c.optimizer.momentum = momentum;
  c.optimizer.beta1 = beta1;
  c.optimizer.beta2 = beta2;
  c.optimizer.eps = eps;
  c.optimizer.weightDecay = weightDecay;
  c.optimizer.noDecay.assign(noDecay.begin(), noDecay.end());
  c.optimizer.clipGradNorm = clipGradNorm;
  c.autodiff.lossScaling = c.optimizer.lossScaling = train && precision == "fp16";
  c.optimizer.lossScaleInit = lossScaleInit;
  c.optimizer.lossScaleGrowthInterval = lossScaleGrowthInterval;
  return c;
}

void buildGpuPipeline(OpPassManager &pm, const GpuPipelineOptions &o) {
  pm.addNestedPass<func::FuncOp>(createTcTagReferenceValues());
  pm.addNestedPass<func::FuncOp>(createTcFoldTransposes());
  pm.addNestedPass<func::FuncOp>(createTcHoistParameterCasts());
  if (o.weightShadows)
    pm.addPass(createTcShadowParameterCasts());
  // Delayed scaling's quantizations, each one call (before tc-fuse would
  // split their ops over generated kernels).
  pm.addNestedPass<func::FuncOp>(createTcFuseFp8Delayed());
  TcFuseOptions fuse;
  fuse.geluAux = o.geluAux;
  fuse.geluErf = o.geluErf;
  pm.addNestedPass<func::FuncOp>(createTcFuse(fuse));
  // What the library calls compute besides their own op, decided on tc
  // (after tc-fuse: the bf16 casts the classifier absorbs are fusions).
  pm.addNestedPass<func::FuncOp>(createTcFuseMatmulEpilogue());
  pm.addNestedPass<func::FuncOp>(createTcFuseCrossEntropy());
  pm.addNestedPass<func::FuncOp>(createTcShareNormStats());
  TcFuseBiasGradOptions biasGrad;
  biasGrad.gemmEpilogue = o.biasGradEpilogue;
  biasGrad.normColSums = o.normColSums;
  biasGrad.attentionColSums = o.attentionColSums;
  biasGrad.fusionColSums = o.fusionColSums;
  // The sums of GPT-NeoX's form are of the rotated gradients: only where
  // tc-fuse-attention-rotary runs (it undoes the pairings it cannot honour).
  biasGrad.attentionHeadColSums = o.attentionHeadColSums && o.attentionRotary;
  pm.addNestedPass<func::FuncOp>(createTcFuseBiasGrad(biasGrad));
  pm.addNestedPass<func::FuncOp>(createTcFuseFp8Amax());
  TcFuseAttentionViewsOptions views;
  views.rotaryInPlace = o.rotaryInPlace;
  pm.addNestedPass<func::FuncOp>(createTcFuseAttentionViews(views));
  if (o.attentionRotary)
    pm.addNestedPass<func::FuncOp>(createTcFuseAttentionRotary());
  TcLowerToTcxOptions lower;
  lower.tf32 = o.tf32;
  lower.wgmmaAttention = o.wgmmaAttention;
  pm.addPass(createTcLowerToTcx(lower));
  pm.addPass(tcx::createTcxEliminateDeadWork());
  if (o.sideStream) {
    tcx::TcxScheduleStreamsOptions streams;
    streams.window = o.sideStreamWindow;
    pm.addNestedPass<func::FuncOp>(tcx::createTcxScheduleStreams(streams));
  }
  pm.addNestedPass<func::FuncOp>(tcx::createTcxPlanMemory());
  cuda::TcxGenerateCudaOptions codegen;
  codegen.groupSplitRows = o.groupSplitRows;
  pm.addPass(cuda::createTcxGenerateCuda(codegen));
}

void registerTcPipelines() {
  PassPipelineRegistration<ImportCleanupPipelineOptions>(
      "tc-import-cleanup", "tc-compile's cleanup of an imported module", buildImportCleanupPipeline);
  PassPipelineRegistration<TrainingPipelineOptions>(
      "tc-training", "tc-compile's precision plan, trainability, backward and optimizer step",
      [](OpPassManager &pm, const TrainingPipelineOptions &o) {
        buildTrainingPipeline(pm, o.config());
      });
  PassPipelineRegistration<GpuPipelineOptions>(
      "tc-gpu", "tc-compile's GPU half: fusion, tcx, memory plan, CUDA codegen", buildGpuPipeline);
}

} // namespace tc
