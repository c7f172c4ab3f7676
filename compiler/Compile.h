//===- Compile.h - the compiler's C++ entry point ---------------*- C++ -*-===//
//
// `compile(...)` is what tc-compile (and tests) call: run the named
// pipelines (Pipelines.h) on a module a frontend imported, lower it to the
// runtime program and assemble the artifact. The compiler knows no input
// format: tools/OnnxInput.h turns an ONNX file into a CompileInput.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_COMPILE_H
#define TC_COMPILER_COMPILE_H

#include "runtime/src/schema/init_spec.h"
#include "runtime/src/schema/program.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include "compiler/MemoryPlan.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace tc {

/// Registers every dialect the compiler uses with `ctx`.
void loadCompilerDialects(mlir::MLIRContext &ctx);

/// What `--train` adds (see compile()). Semantics follow torch.optim.SGD /
/// torch.optim.AdamW; `lr` is only the default of tc-run's run-time input.
struct TrainOptions {
  bool enabled = false;
  std::string loss;                // tc.name of the loss ("" = the only scalar)
  std::string optimizer = "adamw"; // "sgd" or "adamw"
  double lr = 1e-3;
  double momentum = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weightDecay = -1.0;       // < 0: torch's default (sgd 0, adamw 0.01)
  std::vector<std::string> noDecay; // regexes: parameters without decay
  int64_t gradAccum = 1;           // micro-batches per step (tc-run averages)
  double clipGradNorm = 0.0;       // 0: no clipping
  /// Dynamic loss scaling, on with precision "fp16" (tc-optimizer
  /// loss-scaling; torch.amp.GradScaler's init_scale and growth_interval).
  double lossScaleInit = 65536.0;
  int64_t lossScaleGrowthInterval = 2000;
};

/// What a frontend gives compile(): the module (one func.func @infer of tc
/// ops) and the weights of its tc.parameter ops.
struct CompileInput {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// One per tc.parameter, in order of appearance, with the same names (data
  /// empty for weights the frontend did not read: --no-weights).
  std::vector<std::pair<std::string, rt::HostTensor>> weights;
  /// Things the user should know about the import, one line each.
  std::vector<std::string> notes;
  /// Parameters of the source model the exporter folded away together with
  /// their consumers: compile() refuses to train such a model, naming them.
  std::vector<std::string> droppedParameters;
  /// For tc-run --export-onnx (docs/export.md), opaque here: the source
  /// ONNX model without the parameters' initializers (a serialized
  /// ModelProto; empty: the frontend cannot give one), and per removed
  /// initializer (initializer, parameter, whether it holds the transpose).
  std::string exportModel;
  std::vector<std::tuple<std::string, std::string, bool>> exportInits;
};

struct CompileOptions {
  /// "cpu", "sm_90" (H100/H200) or "sm_120" (RTX 5090; kernels for sm_120a).
  std::string target = "cpu";
  /// GPU targets: allow TF32 tensor cores for fp32 matmuls.
  bool tf32 = false;
  /// GPU targets: levers written but not yet checked on a GPU, by name
  /// (kExperimentalLevers); off unless named (tc-compile --experimental).
  std::vector<std::string> experimental;
  /// tc-precision mode: "fp32" (default), "tf32" (annotation), "bf16"
  /// (bf16 matmuls and elementwise math; norms, softmax, losses in f32; fp32
  /// master weights and optimizer state), "fp16" (the same in f16; with
  /// train.enabled, dynamic loss scaling in the step), "fp8" or "fp4" (below).
  std::string precision = "fp32";
  /// precision "fp8" (tc-precision's fp8 options, Passes.td): the bf16 plan,
  /// with the linear-layer matmuls in FP8 (E4M3 operands, E5M2 gradients,
  /// fp32 accumulation, bf16 outputs). The CPU reference emulates it; GPU
  /// targets refuse it until their lowering exists.
  struct Fp8Options {
    std::string scaling = "tensor";             // tensor, delayed, row, mxfp8 or block128
    int64_t amaxHistory = 1024;                 // delayed: steps in the amax history
    std::string amaxCompute = "max";            // delayed: max or most_recent
    std::vector<std::string> keepHighPrecision; // regexes: ONNX node or weight names
    int64_t highPrecisionFirst = 0, highPrecisionLast = 0; // transformer blocks
    bool lmHead = false;        // the lm_head / tied embedding product in FP8 too
    bool allowFallback = false; // misaligned matmuls stay bf16 instead of an error
  } fp8;
  /// precision "fp4" (--fp4-qat; tc-precision's fp4 options): the bf16 plan,
  /// with the fp8 plan's linear layers reading fake-quantised weights (and
  /// activations with `acts`). The fp8 options above choose the layers.
  struct Fp4Options {
    std::string format = "nvfp4"; // nvfp4 or mxfp4
    bool acts = false;
    bool grads = false; // --fp4-qat-grads: dgrad/wgrad inputs, stochastic rounding
    bool rht = false;   // --fp4-rht: a random Hadamard transform of the wgrad inputs
  } fp4;
  /// tc-recognize-attention: exported attention chains become tc.attention
  /// (off: they stay matmul / softmax / matmul, for comparison and debugging).
  bool fuseAttention = true;
  /// tc-pad-vocab pads a classifier's class axis to a multiple of this
  /// (50257 -> 50304), the loss and gradients the same numbers; 0 turns it
  /// off; -1 (the default): 64 on GPU targets, 0 on the CPU (where it only
  /// adds work; given explicitly, the CPU reference pads too).
  int64_t padVocab = -1;
  /// GPU targets: compile the generated kernels with NVRTC (cubin + PTX).
  bool compileKernels = true;
  /// GPU targets: stop once the memory plan is known (result->memoryPlan):
  /// no kernels, no reference or device programs, no reports. For
  /// largestFittingBatch, whose batches can be in the hundreds of thousands
  /// (programs holding batch-sized constants would cost minutes and GBs).
  bool memoryPlanOnly = false;
  /// Trainability (tc-mark-trainable): regexes on the parameter names; empty
  /// `trainable` means every floating-point parameter.
  std::vector<std::string> trainable, freeze;
  TrainOptions train;
  /// --init-params: the initialiser of every model weight (ParamKind::
  /// Parameter) by role (rt::applyInitSpec with byRole); init Data keeps the
  /// imported bytes.
  rt::InitSpec initAll;
  /// --init-param REGEX=SPEC in flag order: regex (name_regex.h) searched in the
  /// parameter name; the last matching one wins over initAll.
  std::vector<std::pair<std::string, rt::InitSpec>> initOverrides;
};

struct CompileResult {
  mlir::OwningOpRef<mlir::ModuleOp> imported; // straight from the frontend
  mlir::OwningOpRef<mlir::ModuleOp> module;   // after tc-training (--emit=tc)
  rt::Artifact artifact;
  std::vector<std::string> notes; // the import's and the passes' remarks
  /// GPU targets: the execution-level module after tc-gpu (--emit=tcx), the
  /// generated kernels (its tcx.cuda_source ops, in order; cubin and PTX
  /// when compiled) and the memory report.
  mlir::OwningOpRef<mlir::ModuleOp> gpuModule;
  struct Kernel {
    std::string name, source, ptx, arch;
    std::vector<uint8_t> cubin;
  };
  std::vector<Kernel> kernels;
  /// GPU targets: the plan the memory report shows (@train_step, else the
  /// planned function with the largest total).
  std::optional<MemoryPlanSummary> memoryPlan;
};

/// Error classes, so that tools can choose exit codes: bad input (the model,
/// a flag) is the user's to fix (exit 2); internal failures are tc's (exit 1).
enum class CompileErrorKind { None, BadInput, Internal };

struct CompileError {
  CompileErrorKind kind = CompileErrorKind::None;
  std::string message;
};

/// Pipelines + artifact for `input` (its module is moved into
/// result->imported; its context is `ctx`). With train.enabled the pipeline adds
/// tc-autodiff and tc-optimizer, and the artifact holds "infer", "eval_step"
/// (the same program), "grad_step", "apply_step" and "train_step", optimizer
/// state entries (kind OptimizerState, zeros) and reports["training"], a JSON
/// object with the optimizer settings, the loss name and "grad_accum" (read
/// by tc-run).
bool compile(mlir::MLIRContext &ctx, CompileInput input, const CompileOptions &opts,
             CompileResult *result, CompileError *error);

/// A frontend's import of the model at batch `batch` (largestFittingBatch
/// re-plans at other batches); false with `*error` set when it fails.
using ImportAtBatch = std::function<bool(mlir::MLIRContext &ctx, int64_t batch,
                                         CompileInput *input, std::string *error)>;

/// The largest batch whose plan fits `card` (MemoryReport.h's fitsCard),
/// found by re-planning `opts` (a GPU target) at other batch sizes, each
/// imported by `importAt`. A linear fit of two plans gives the guess;
/// plans at the guess and the guess + 1 confirm it (bisection when they do
/// not). Kernels are not compiled. `plannedTotal` is the plan of `batch`
/// (opts' own); `planned` caches totals by batch across calls (one per card).
BatchFit largestFittingBatch(const CompileOptions &opts, int64_t batch, int64_t plannedTotal,
                             const TargetDevice &card, std::map<int64_t, int64_t> *planned,
                             const ImportAtBatch &importAt);

/// Whether `target` names a GPU ("sm_90", "sm_120", "sm_120a"): the target
/// table (Target.h) has it.
bool isGpuTarget(const std::string &target);

/// "" when every name is a lever --experimental takes (Compile.cpp's table:
/// bias-grad, group-sums, gelu, merge-qkv), else the error naming the first unknown one and
/// the known ones.
std::string checkExperimentalLevers(const std::vector<std::string> &names);

/// The tc-import-cleanup pipeline on `module` with the options `opts` gives
/// it. Remarks of the passes (what a recogniser left alone, and why) are
/// appended to `notes`; on failure `error` holds the diagnostics.
mlir::LogicalResult runImportCleanup(mlir::ModuleOp module, const CompileOptions &opts,
                                     std::string *error,
                                     std::vector<std::string> *notes = nullptr);

/// The tc-training pipeline on `module` with the options `opts` gives it.
mlir::LogicalResult runTrainingPipeline(mlir::ModuleOp module, const CompileOptions &opts,
                                        std::string *error,
                                        std::vector<std::string> *notes = nullptr);

} // namespace tc

#endif // TC_COMPILER_COMPILE_H
