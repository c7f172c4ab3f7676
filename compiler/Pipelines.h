//===- Pipelines.h - the named pass pipelines of tc-compile -----*- C++ -*-===//
//
// The stages compile() runs, registered by name so that tc-opt replays
// exactly what tc-compile does (as StableHLO's PassPipelines.cpp):
//
//   tc-import-cleanup  the imported module: canonicalize, fold constants,
//                      CSE, recognise RMSNorm, rotary and attention
//   tc-training        tc-precision; tc-pad-vocab (GPU targets);
//                      tc-mark-trainable; with `train`,
//                      tc-autodiff + tc-optimizer and a cleanup; in
//                      precision fp8, tc-quantize-fp8 after tc-autodiff
//                      (after tc-precision without `train`)
//   tc-gpu             the GPU half, one way: tc-fuse, tc-lower-to-tcx, tcx-plan-memory,
//                      tcx-generate-cuda (NVRTC runs after the pipeline)
//
// `tc-compile --emit=tc` prints the module after tc-training, `--emit=tcx`
// after tc-gpu; compile() builds the same pass managers. tc-training's
// builder takes the passes' own option structs (TrainingPipelineConfig):
// compile() fills them from CompileOptions, tc-opt from the command line,
// and nothing copies them again.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_PIPELINES_H
#define TC_COMPILER_PIPELINES_H

#include "compiler/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <string>

namespace tc {

struct ImportCleanupPipelineOptions
    : mlir::PassPipelineOptions<ImportCleanupPipelineOptions> {
  Option<bool> fuseAttention{*this, "fuse-attention",
                             llvm::cl::desc("tc-recognize-attention: exported attention chains "
                                            "become tc.attention"),
                             llvm::cl::init(true)};
  Option<bool> fuseKeyMasks{*this, "fuse-key-masks",
                            llvm::cl::desc("also fuse attention with a padding (key) mask"),
                            llvm::cl::init(true)};
  Option<bool> mergeProjections{*this, "merge-projections",
                                llvm::cl::desc("tc-merge-projections: one GEMM for an attention's "
                                               "q/k/v projections (tc-compile: on for GPU targets)"),
                                llvm::cl::init(false)};
  Option<bool> recognizeGelu{*this, "recognize-gelu",
                             llvm::cl::desc("tc-recognize-gelu: written-out tanh GELU chains "
                                            "become tc.gelu (tc-compile: on for GPU targets)"),
                             llvm::cl::init(false)};
  Option<bool> recognizeGeluErf{
      *this, "recognize-gelu-erf",
      llvm::cl::desc("With recognize-gelu, written-out exact (erf) GELUs too (tc-compile "
                     "--experimental=gelu-erf)"),
      llvm::cl::init(false)};
};

/// What tc-training runs, as the option structs of its passes.
struct TrainingPipelineConfig {
  TrainingPipelineConfig() {
    trainability.report = true;
    optimizer.report = true;
  }
  TcPrecisionOptions precision;
  /// tc-pad-vocab's multiple (GPU targets: 64), 0 when it does not run.
  int64_t padVocab = 0;
  /// tc-mark-trainable runs when `train` is set or a regex is given.
  TcMarkTrainableOptions trainability;
  /// Adds the backward (tc-autodiff) and the optimizer step (tc-optimizer).
  bool train = false;
  TcAutodiffOptions autodiff;
  /// Runs when precision.mode is "fp8".
  TcQuantizeFp8Options quantizeFp8;
  TcOptimizerOptions optimizer;
};

/// tc-training's command-line options (tc-opt).
struct TrainingPipelineOptions : mlir::PassPipelineOptions<TrainingPipelineOptions> {
  Option<std::string> precision{*this, "precision",
                                llvm::cl::desc("tc-precision mode: fp32, tf32, bf16, fp16 "
                                               "(with train: dynamic loss scaling) or fp8"),
                                llvm::cl::init("fp32")};
  Option<std::string> fp8Scaling{
      *this, "fp8-scaling", llvm::cl::desc("tc-precision: tensor, delayed, row, mxfp8 or block128"),
      llvm::cl::init("tensor")};
  ListOption<std::string> keepHighPrecision{
      *this, "keep-high-precision",
      llvm::cl::desc("tc-precision: regexes of matmuls kept out of fp8")};
  Option<int64_t> highPrecisionFirst{*this, "high-precision-first",
                                     llvm::cl::desc("tc-precision: first N blocks stay bf16"),
                                     llvm::cl::init(0)};
  Option<int64_t> highPrecisionLast{*this, "high-precision-last",
                                    llvm::cl::desc("tc-precision: last N blocks stay bf16"),
                                    llvm::cl::init(0)};
  Option<int64_t> fp8AmaxHistory{*this, "fp8-amax-history",
                                 llvm::cl::desc("tc-quantize-fp8: delayed scaling's history"),
                                 llvm::cl::init(1024)};
  Option<std::string> fp8AmaxCompute{*this, "fp8-amax-compute",
                                     llvm::cl::desc("tc-quantize-fp8: max or most_recent"),
                                     llvm::cl::init("max")};
  Option<bool> fp8LmHead{*this, "fp8-lm-head", llvm::cl::desc("tc-precision: lm_head in fp8"),
                         llvm::cl::init(false)};
  Option<bool> allowFallback{*this, "allow-fallback",
                             llvm::cl::desc("tc-precision: misaligned fp8 matmuls stay bf16"),
                             llvm::cl::init(false)};
  Option<int64_t> padVocab{*this, "pad-vocab",
                           llvm::cl::desc("tc-pad-vocab: the class axis' multiple (0: off)"),
                           llvm::cl::init(0)};
  ListOption<std::string> trainable{*this, "trainable",
                                    llvm::cl::desc("tc-mark-trainable: trainable regexes")};
  ListOption<std::string> freeze{*this, "freeze",
                                 llvm::cl::desc("tc-mark-trainable: frozen regexes")};
  Option<bool> train{*this, "train",
                     llvm::cl::desc("add the backward and the optimizer step (tc-autodiff, "
                                    "tc-optimizer)"),
                     llvm::cl::init(false)};
  Option<std::string> loss{*this, "loss", llvm::cl::desc("tc-autodiff: the loss's tc.name"),
                           llvm::cl::init("")};
  Option<std::string> optimizer{*this, "optimizer", llvm::cl::desc("sgd or adamw"),
                                llvm::cl::init("adamw")};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                          llvm::cl::init(0.0)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("AdamW beta1"), llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("AdamW beta2"), llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::desc("AdamW eps"), llvm::cl::init(1e-8)};
  Option<double> weightDecay{*this, "weight-decay",
                             llvm::cl::desc("< 0: torch's default (sgd 0, adamw 0.01)"),
                             llvm::cl::init(-1.0)};
  ListOption<std::string> noDecay{*this, "no-decay",
                                  llvm::cl::desc("regexes of parameters without decay")};
  Option<double> clipGradNorm{*this, "clip-grad-norm",
                              llvm::cl::desc("clip the global gradient norm (0: no clipping)"),
                              llvm::cl::init(0.0)};
  Option<double> lossScaleInit{*this, "loss-scale-init",
                               llvm::cl::desc("fp16: the initial loss scale"),
                               llvm::cl::init(65536.0)};
  Option<int64_t> lossScaleGrowthInterval{
      *this, "loss-scale-growth-interval",
      llvm::cl::desc("fp16: clean steps after which the loss scale doubles"),
      llvm::cl::init(2000)};

  TrainingPipelineConfig config() const;
};

struct GpuPipelineOptions : mlir::PassPipelineOptions<GpuPipelineOptions> {
  Option<bool> tf32{*this, "tf32",
                    llvm::cl::desc("TF32 tensor cores for fp32 matmuls (tc-lower-to-tcx)"),
                    llvm::cl::init(false)};
  Option<bool> biasGradEpilogue{
      *this, "bias-grad-epilogue",
      llvm::cl::desc("Bias gradients from the weight-gradient GEMMs' BGRAD epilogue "
                     "(tc-fuse-bias-grad gemm-epilogue)"),
      llvm::cl::init(true)};
  Option<bool> normColSums{
      *this, "norm-col-sums",
      llvm::cl::desc("Norm backward calls sum the dx they write for the bias gradient of the "
                     "Linear layer it feeds (tc-fuse-bias-grad norm-col-sums)"),
      llvm::cl::init(true)};
  Option<bool> attentionColSums{
      *this, "attention-col-sums",
      llvm::cl::desc("Attention backward calls sum the dq / dk / dv they write for the bias "
                     "gradient of the fused qkv projection whose gradient they form "
                     "(tc-fuse-bias-grad attention-col-sums)"),
      llvm::cl::init(true)};
  Option<bool> fusionColSums{
      *this, "fusion-col-sums",
      llvm::cl::desc("Generated elementwise kernels sum the dY they write for the bias gradient "
                     "of the Linear layer it feeds (tc-fuse-bias-grad fusion-col-sums)"),
      llvm::cl::init(true)};
  Option<bool> geluAux{
      *this, "gelu-aux",
      llvm::cl::desc("A GEMM's GELU_AUX epilogue computes the GELU a training step's backward "
                     "reads the input of (tc-fuse gelu-aux)"),
      llvm::cl::init(true)};
  Option<bool> geluErf{
      *this, "gelu-erf",
      llvm::cl::desc("With gelu-aux, the exact (erf) GELU and its backward too, as the GEMM's "
                     "gelu_erf_aux / dgelu_erf epilogues (tc-fuse gelu-erf; tc-compile "
                     "--experimental=gelu-erf)"),
      llvm::cl::init(false)};
  Option<bool> rotaryInPlace{
      *this, "rotary-in-place",
      llvm::cl::desc("Rotaries rotate q / k in place in their projection (tc-fuse-attention-views)"),
      llvm::cl::init(true)};
  Option<bool> attentionRotary{
      *this, "attention-rotary",
      llvm::cl::desc("Attention backward calls rotate the dq / dk they store: the backward's "
                     "rotaries make no kernel (tc-fuse-attention-rotary)"),
      llvm::cl::init(true)};
  Option<bool> attentionHeadColSums{
      *this, "attention-head-col-sums",
      llvm::cl::desc("With attention-col-sums and attention-rotary, GPT-NeoX's qkv bias gradient "
                     "too (heads interleaved; tc-fuse-bias-grad attention-head-col-sums)"),
      llvm::cl::init(true)};
  Option<bool> weightShadows{
      *this, "weight-shadows",
      llvm::cl::desc("The 16-bit copies of the weights persist across steps, written by the "
                     "optimizer (tc-shadow-parameter-casts)"),
      llvm::cl::init(true)};
  Option<bool> wgmmaAttention{
      *this, "wgmma-attention",
      llvm::cl::desc("Attention calls take the sm_90a (wgmma) kernels where the GPU has them "
                     "(tc-lower-to-tcx; tc-compile --experimental=wgmma-attention)"),
      llvm::cl::init(false)};
  Option<bool> sideStream{
      *this, "side-stream",
      llvm::cl::desc("Weight-gradient matmuls on a second stream beside the backward "
                     "(tcx-schedule-streams; tc-compile --experimental=side-stream)"),
      llvm::cl::init(false)};
  Option<int64_t> sideStreamWindow{
      *this, "side-stream-window",
      llvm::cl::desc("tcx-schedule-streams' window: the most stream-0 ops a side matmul runs "
                     "beside (0: no limit)"),
      llvm::cl::init(2)};
  Option<bool> groupSplitRows{
      *this, "group-split-rows",
      llvm::cl::desc("Split single-row reductions in grouped launches (tcx-generate-cuda)"),
      llvm::cl::init(true)};
};

void buildImportCleanupPipeline(mlir::OpPassManager &pm,
                                const ImportCleanupPipelineOptions &options);
void buildTrainingPipeline(mlir::OpPassManager &pm, const TrainingPipelineConfig &config);
void buildGpuPipeline(mlir::OpPassManager &pm, const GpuPipelineOptions &options);

/// Registers tc-import-cleanup, tc-training and tc-gpu (for tc-opt).
void registerTcPipelines();

} // namespace tc

#endif // TC_COMPILER_PIPELINES_H
