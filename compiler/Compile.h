//===- Compile.h - the compiler's C++ entry point ---------------*- C++ -*-===//
//
// `compile(...)` is what tc-compile (and tests) call: import a model, run the
// named pipeline, lower to the runtime program and assemble the artifact.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_COMPILE_H
#define TC_COMPILER_COMPILE_H

#include "frontends/onnx/Import.h"
#include "runtime/src/schema/init_spec.h"
#include "runtime/src/schema/program.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include "compiler/MemoryReport.h"

#include <map>
#include <optional>
#include <string>
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
};

struct CompileOptions {
  std::string modelPath;
  onnx_import::ImportOptions import;
  /// "cpu", "sm_90" (H100/H200) or "sm_120" (RTX 5090; kernels for sm_120a).
  std::string target = "cpu";
  /// GPU targets: allow TF32 tensor cores for fp32 matmuls.
  bool tf32 = false;
  /// tc-precision mode: "fp32" (default), "tf32" (annotation) or "bf16"
  /// (bf16 matmuls and elementwise math; norms, softmax, losses in f32; fp32
  /// master weights and optimizer state).
  std::string precision = "fp32";
  /// tc-recognize-attention: exported attention chains become tc.attention
  /// (off: they stay matmul / softmax / matmul, for comparison and debugging).
  bool fuseAttention = true;
  /// GPU targets: compile the generated kernels with NVRTC (cubin + PTX).
  bool compileKernels = true;
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
  mlir::OwningOpRef<mlir::ModuleOp> module;   // after the pipeline
  rt::Artifact artifact;
  std::vector<std::string> notes; // from the import (ImportResult::notes)
  /// ImportResult::droppedParameters: compile() refuses to train them.
  std::vector<std::string> droppedParameters;
  /// GPU targets: the planned execution-level module (tcx), the generated
  /// kernels (source; cubin and PTX when compiled) and the memory report.
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

/// Imports only (no passes): `result->imported` is set.
bool importModel(mlir::MLIRContext &ctx, const CompileOptions &opts,
                 CompileResult *result, CompileError *error);

/// Import + pipeline + artifact. With train.enabled the pipeline adds
/// tc-autodiff and tc-optimizer, and the artifact holds "infer", "eval_step"
/// (the same program), "grad_step", "apply_step" and "train_step", optimizer
/// state entries (kind OptimizerState, zeros) and reports["training"], a JSON
/// object with the optimizer settings, the loss name and "grad_accum" (read
/// by tc-run).
bool compile(mlir::MLIRContext &ctx, const CompileOptions &opts,
             CompileResult *result, CompileError *error);

/// The largest batch whose plan fits `card` (MemoryReport.h's fitsCard),
/// found by re-planning `opts` (a GPU target) at other batch sizes: the
/// exporter's "batch" dimension (--dim batch=B) when the model names one,
/// else axis 0 of every --input. A linear fit of two plans gives the guess;
/// plans at the guess and the guess + 1 confirm it (bisection when they do
/// not). Kernels are not compiled. `plannedTotal` is the plan of `batch`
/// (opts' own); `planned` caches totals by batch across calls (one per card).
BatchFit largestFittingBatch(const CompileOptions &opts, int64_t batch, int64_t plannedTotal,
                             const TargetDevice &card, std::map<int64_t, int64_t> *planned);

/// The batch `opts` compiles at (the "batch" dim or axis 0 of the --input
/// shapes, all equal), or -1 with `*why` set.
int64_t batchOf(const CompileOptions &opts, std::string *why);

/// The import-cleanup pipeline (canonicalize, CSE) on a module.
/// Whether `target` names a GPU ("sm_90", "sm_120", "sm_120a").
bool isGpuTarget(const std::string &target);

/// The CUDA pipeline on a copy of `module` (after training): tc-fuse, kernel
/// generation (+ NVRTC), tc-lower-to-tcx and tcx-plan-memory; fills
/// result->gpuModule, result->kernels and the artifact's "memory" report.
bool runGpuPipeline(mlir::ModuleOp module, const CompileOptions &opts,
                    CompileResult *result, CompileError *error);

/// Canonicalize, tc-fold-constants, CSE, tc-recognize-rms-norm (+
/// tc-recognize-attention with `fuseAttention`), canonicalize.
/// Remarks of the passes (what a recogniser left alone, and why) are
/// appended to `notes`.
mlir::LogicalResult runImportCleanup(mlir::ModuleOp module, std::string *error,
                                     bool fuseAttention = true,
                                     std::vector<std::string> *notes = nullptr,
                                     bool fuseKeyMasks = true);

/// tc-mark-trainable (when regexes are given or training), then with
/// opts.train.enabled tc-autodiff, tc-optimizer and a canonicalize/CSE
/// cleanup. On failure `error` holds the diagnostics.
mlir::LogicalResult runTrainingPipeline(mlir::ModuleOp module, const CompileOptions &opts,
                                        std::string *error,
                                        std::vector<std::string> *notes = nullptr);

} // namespace tc

#endif // TC_COMPILER_COMPILE_H
