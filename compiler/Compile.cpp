//===- Compile.cpp - import, pipeline, artifact ---------------------------===//

#include "compiler/Compile.h"
#include "compiler/Flops.h"
#include "compiler/Target.h"

#include "compiler/DeviceProgram.h"
#include "compiler/Labels.h"
#include "compiler/MemoryPlan.h"
#include "compiler/Pipelines.h"
#include "compiler/PrecisionPlan.h"
#include "compiler/Transforms/Fp4Qat.h"
#include "compiler/Transforms/Fp8Plan.h"
#include "compiler/Transforms/LossScale.h"
#include "compiler/Transforms/Passes.h"
#include "compiler/codegen/cuda/CudaCodegen.h"
#include "dialects/tc/Eval/Program.h"
#include "dialects/tc/IR/TcOps.h"
#include "dialects/tcx/IR/TcxOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <cstdio>
#include <cstring>

using namespace mlir;

namespace tc {

void loadCompilerDialects(MLIRContext &ctx) {
  DialectRegistry registry;
  registry.insert<func::FuncDialect>();
  registerTcDialect(registry);
  tcx::registerTcxDialect(registry);
  ctx.appendDialectRegistry(registry);
  ctx.loadAllAvailableDialects();
}

namespace {
/// Collects diagnostics into a string instead of printing them.
struct DiagnosticCollector {
  explicit DiagnosticCollector(MLIRContext &ctx)
      : handler(&ctx, [this](Diagnostic &d) {
          // Remarks are what a pass chose not to do and why: notes for the
          // user, not errors.
          if (d.getSeverity() == DiagnosticSeverity::Remark) {
            remarks.push_back(d.str());
            return success();
          }
          if (!text.empty())
            text += "\n";
          text += d.str();
          // The notes say where (an internal error's live user, ...).
          for (Diagnostic &n : d.getNotes())
            text += "\n  note: " + n.str();
          return success();
        }) {}
  std::string text;
  std::vector<std::string> remarks;
  ScopedDiagnosticHandler handler;
};

/// Runs `pm` on `module`: the pass failures' diagnostics into `*error`
/// (`what` when there are none), remarks into `notes`.
LogicalResult runCollecting(PassManager &pm, ModuleOp module, llvm::StringRef what,
                            std::string *error, std::vector<std::string> *notes) {
  DiagnosticCollector diags(*module.getContext());
  if (failed(pm.run(module))) {
    *error = diags.text.empty() ? what.str() + " failed" : diags.text;
    return failure();
  }
  if (notes)
    notes->insert(notes->end(), diags.remarks.begin(), diags.remarks.end());
  return success();
}
} // namespace

LogicalResult runImportCleanup(ModuleOp module, const CompileOptions &opts, std::string *error,
                               std::vector<std::string> *notes) {
  ImportCleanupPipelineOptions o;
  o.fuseAttention = opts.fuseAttention;
  // Padding masks fuse on every target (the GPU kernels' key masks).
  o.fuseKeyMasks = true;
  // GPU targets: written-out tanh GELUs become tc.gelu (a GEMM's GELU_AUX /
  // DGELU epilogues on the GPU) and an attention's q/k/v projections one GEMM,
  // the artifact's reference program too; the CPU target keeps the graph as
  // imported.
  o.recognizeGelu = isGpuTarget(opts.target);
  o.recognizeGeluErf = o.recognizeGelu && llvm::is_contained(opts.experimental, "gelu-erf");
  o.mergeProjections = isGpuTarget(opts.target);
  PassManager pm(module.getContext());
  buildImportCleanupPipeline(pm, o);
  return runCollecting(pm, module, "the import-cleanup pipeline", error, notes);
}

namespace {
std::string jsonQuote(llvm::StringRef s) {
  return llvm::formatv("{0}", llvm::json::Value(s)).str();
}

std::string jsonDouble(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

/// reports["training"]: what tc-run needs to drive the step functions.
std::string trainingConfigJson(ModuleOp module, const TrainOptions &t, bool lossScaling) {
  std::string loss = t.loss;
  if (auto grad = module.lookupSymbol<func::FuncOp>("grad_step"))
    if (auto n = grad.getResultAttrOfType<StringAttr>(0, "tc.name"))
      loss = n.getValue().str();
  double wd = t.weightDecay >= 0 ? t.weightDecay : (t.optimizer == "adamw" ? 0.01 : 0.0);
  std::string s = "{\"loss\": " + jsonQuote(loss) + ", \"optimizer\": " + jsonQuote(t.optimizer) +
                  ", \"lr\": " + jsonDouble(t.lr) + ", \"momentum\": " + jsonDouble(t.momentum) +
                  ", \"beta1\": " + jsonDouble(t.beta1) + ", \"beta2\": " + jsonDouble(t.beta2) +
                  ", \"eps\": " + jsonDouble(t.eps) + ", \"weight_decay\": " + jsonDouble(wd) +
                  ", \"no_decay\": [";
  for (size_t i = 0; i < t.noDecay.size(); ++i)
    s += (i ? ", " : "") + jsonQuote(t.noDecay[i]);
  s += "], \"grad_accum\": " + std::to_string(t.gradAccum) +
       ", \"clip_grad_norm\": " + jsonDouble(t.clipGradNorm);
  if (lossScaling)
    s += ", \"loss_scaling\": {\"init_scale\": " + jsonDouble(t.lossScaleInit) +
         ", \"growth_factor\": 2, \"backoff_factor\": 0.5, \"growth_interval\": " +
         std::to_string(t.lossScaleGrowthInterval) + "}";
  return s + "}";
}
} // namespace

LogicalResult runTrainingPipeline(ModuleOp module, const CompileOptions &opts,
                                  std::string *error, std::vector<std::string> *notes) {
  const TrainOptions &t = opts.train;
  if (t.enabled) {
    if (t.gradAccum < 1) {
      *error = "--grad-accum must be at least 1";
      return failure();
    }
    if (!module.lookupSymbol<func::FuncOp>("infer")) {
      *error = "--train needs a model with func.func @infer";
      return failure();
    }
  }
  TrainingPipelineConfig c;
  c.precision.mode = opts.precision;
  c.precision.fp8Scaling = opts.fp8.scaling;
  c.precision.fp4Format = opts.fp4.format;
  c.precision.fp4Acts = opts.fp4.acts;
  c.precision.fp4Grads = opts.fp4.grads;
  c.precision.fp4Rht = opts.fp4.rht;
  c.precision.keepHighPrecision.assign(opts.fp8.keepHighPrecision.begin(),
                                       opts.fp8.keepHighPrecision.end());
  c.precision.highPrecisionFirst = opts.fp8.highPrecisionFirst;
  c.precision.highPrecisionLast = opts.fp8.highPrecisionLast;
  c.precision.fp8LmHead = opts.fp8.lmHead;
  c.precision.allowFallback = opts.fp8.allowFallback;
  c.padVocab = opts.padVocab >= 0 ? opts.padVocab : isGpuTarget(opts.target) ? 64 : 0;
  c.quantizeFp8.allowFallback = opts.fp8.allowFallback;
  c.quantizeFp8.amaxHistory = opts.fp8.amaxHistory;
  c.quantizeFp8.amaxCompute = opts.fp8.amaxCompute;
  c.trainability.trainable.assign(opts.trainable.begin(), opts.trainable.end());
  c.trainability.freeze.assign(opts.freeze.begin(), opts.freeze.end());
  c.train = t.enabled;
  c.autodiff.loss = t.loss;
  c.optimizer.optimizer = t.optimizer;
  c.optimizer.momentum = t.momentum;
  c.optimizer.beta1 = t.beta1;
  c.optimizer.beta2 = t.beta2;
  c.optimizer.eps = t.eps;
  c.optimizer.weightDecay = t.weightDecay;
  c.optimizer.noDecay.assign(t.noDecay.begin(), t.noDecay.end());
  c.optimizer.clipGradNorm = t.clipGradNorm;
  c.autodiff.lossScaling = c.optimizer.lossScaling = t.enabled && opts.precision == "fp16";
  c.optimizer.lossScaleInit = t.lossScaleInit;
  c.optimizer.lossScaleGrowthInterval = t.lossScaleGrowthInterval;
  PassManager pm(module.getContext());
  buildTrainingPipeline(pm, c);
  return runCollecting(pm, module, "the training pipeline", error, notes);
}

namespace {
bool runGpuPipeline(ModuleOp module, const CompileOptions &opts, CompileResult *result,
                    CompileError *error);

/// A scaling without a GEMM on the target: --fp8-scaling block128 or row on
/// sm_120a, whose FP8 GEMMs have neither 1x128 / 128x128 FP32 block scales
/// nor per-row (outer-vector) scales (cuBLASLt's VEC128 / BLK128x128 and
/// OUTER_VEC_32F modes are sm_90's), or mxfp8 on sm_90, which has no
/// block-scaled tensor cores (VEC32_UE8M0 is sm_100 / sm_120's): an error
/// naming the first quantization and the alternatives, or with
/// --allow-fallback every such quantization becomes per-tensor (current
/// scaling, which every target's FP8 GEMMs take), with a note.
bool scalingOffTarget(ModuleOp module, const CompileOptions &opts, CompileResult *result,
                      CompileError *error) {
  StringRef scaling = opts.fp8.scaling;
  bool blocks = scaling == "block128", mx = scaling == "mxfp8";
  SetVector<QuantizeOp> quantized;
  module.walk([&](ScaledMatmulOp mm) {
    auto recipe = mm->getAttrOfType<StringAttr>(kFp8Attr);
    if (!recipe || recipe.getValue() != scaling)
      return;
    for (Value v : {mm.getLhs(), mm.getRhs()})
      if (auto q = v.getDefiningOp<QuantizeOp>())
        quantized.insert(q);
  });
  if (quantized.empty())
    return true;
  std::string what = mx       ? "mxfp8 (1x32 blocks, E8M0 scales)"
                     : blocks ? "block128 (1x128 / 128x128 blocks, FP32 scales)"
                              : "row (an FP32 scale per row or column)";
  std::string modes = mx       ? "sm_120a only (cuBLASLt's VEC32_UE8M0 scale mode, block-scaled "
                                 "tensor cores)"
                      : blocks ? "sm_90 only (cuBLASLt's VEC128 / BLK128x128 scale modes)"
                               : "sm_90 only (cuBLASLt's OUTER_VEC_32F scale mode)";
  std::string instead = mx ? "--fp8-scaling block128 (1x128 / 128x128 blocks, FP32 scales), row "
                             "or tensor"
                           : "--fp8-scaling mxfp8 (1x32 blocks, E8M0 scales) or tensor";
  if (!opts.fp8.allowFallback) {
    std::string node = onnxNodeOf(quantized.front()->getLoc());
    error->kind = CompileErrorKind::BadInput;
    error->message = "'tc.quantize' op" + (node.empty() ? "" : " of '" + node + "'") +
                     ": --fp8-scaling " + what + " runs on " + modes + "; on " + opts.target +
                     " use " + instead + ", or --allow-fallback to quantize per tensor";
    return false;
  }
  Builder b(module.getContext());
  std::string why = "fp8 fallback (--allow-fallback): " + scaling.str() + " has no " +
                    opts.target + " path, per-tensor (current amax) scaling instead";
  for (QuantizeOp q : quantized) {
    auto in = llvm::cast<RankedTensorType>(q.getInput().getType());
    q.setBlock(in.getShape());
    q.setPow2Scale(false);
    q.getScaleInv().setType(
        RankedTensorType::get(SmallVector<int64_t>(in.getRank(), 1), b.getF32Type()));
    annotatePrecision(
        q, typeString(llvm::cast<RankedTensorType>(q.getResult().getType()).getElementType()),
        why);
  }
  // The products now read per-tensor operands: their mark and report say so.
  module.walk([&](ScaledMatmulOp mm) {
    auto recipe = mm->getAttrOfType<StringAttr>(kFp8Attr);
    if (!recipe || recipe.getValue() != scaling)
      return;
    mm->setAttr(kFp8Attr, b.getStringAttr("tensor"));
    if (auto reason = mm->getAttrOfType<StringAttr>(kPrecisionReasonAttr))
      mm->setAttr(kPrecisionReasonAttr,
                  b.getStringAttr(reason.getValue().str() + "; fp8 fallback (--allow-fallback): " +
                                  "tensor scaling on " + opts.target));
  });
  result->notes.push_back("--fp8-scaling " + scaling.str() + " on " + opts.target +
                          " --allow-fallback: " + std::to_string(quantized.size()) +
                          " quantizations fall back to per-tensor scaling (" +
                          (mx       ? "1x32 E8M0 blocks are sm_120a's; block128 and row are "
                                      "sm_90's)"
                           : blocks ? "1x128 / 128x128 blocks are sm_90's; mxfp8 is sm_120a's "
                                      "block scaling)"
                                    : "per-row scales are sm_90's; mxfp8 is sm_120a's block "
                                      "scaling)"));
  return true;
}

/// --fp8 after the training pipeline: the CPU reference emulates it (a note
/// says so); a GPU target is an error naming the first FP8 op until the GPU
/// lowering exists, never a silent bf16 step.
bool checkFp8Target(ModuleOp module, const CompileOptions &opts, CompileResult *result,
                    CompileError *error) {
  Operation *first = nullptr;
  int64_t products = 0;
  module.walk([&](Operation *op) {
    if (!llvm::isa<QuantizeOp, ScaledMatmulOp>(op))
      return;
    if (!first)
      first = op;
    products += llvm::isa<ScaledMatmulOp>(op);
  });
  if (!first)
    return true; // tc-precision's remark says that nothing runs in FP8
  bool sm120 = opts.target.rfind("sm_120", 0) == 0;
  if ((sm120 && (opts.fp8.scaling == "block128" || opts.fp8.scaling == "row")) ||
      (isGpuTarget(opts.target) && !sm120 && opts.fp8.scaling == "mxfp8"))
    return scalingOffTarget(module, opts, result, error);
  if (isGpuTarget(opts.target))
    return true; // tc-lower-to-tcx lowers what the GPU runs, and names what it cannot
  result->notes.push_back("--fp8 on --target cpu: the CPU reference emulates FP8 (" +
                          opts.fp8.scaling +
                          " scaling; E4M3/E5M2 rounding and saturation as the GPU computes them, "
                          "fp32 accumulation) in " + std::to_string(products) +
                          " scaled products; slow, it is the numerical reference");
  return true;
}
} // namespace

namespace {

/// reports["export"]: which initializer of reports["export.onnx"] is which
/// parameter, and which are linear-layer weights (the fp8 plan's under the
/// compile's options: what --fp8 / --fp4-qat trained quantised, with the
/// axis their product contracts, in the initializer's layout), for tc-run
/// --export-onnx (runtime/src/session/export.h reads it).
std::string exportJson(func::FuncOp infer,
                       const std::vector<std::tuple<std::string, std::string, bool>> &inits,
                       const CompileOptions::Fp8Options &fp8, std::string *error) {
  Fp8PlanOptions plan;
  plan.keepHighPrecision = fp8.keepHighPrecision;
  plan.highPrecisionFirst = fp8.highPrecisionFirst;
  plan.highPrecisionLast = fp8.highPrecisionLast;
  plan.lmHead = fp8.lmHead;
  std::map<std::string, int64_t> linear = fp8LinearWeights(infer, plan, error);
  llvm::json::Array list;
  for (const auto &[init, param, transposed] : inits) {
    llvm::json::Object o{{"initializer", init}, {"param", param}, {"transposed", transposed}};
    if (auto it = linear.find(param); it != linear.end())
      o["linear_axis"] = transposed ? 1 - it->second : it->second;
    list.push_back(std::move(o));
  }
  llvm::json::Object root{{"version", 1}, {"initializers", std::move(list)}};
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::json::Value(std::move(root));
  return out;
}

} // namespace

bool compile(MLIRContext &ctx, CompileInput input, const CompileOptions &opts,
             CompileResult *result, CompileError *error) {
  if (opts.target != "cpu" && !isGpuTarget(opts.target)) {
    error->kind = CompileErrorKind::BadInput;
    error->message = "unknown target '" + opts.target + "' (cpu, sm_90 or sm_120)";
    return false;
  }
  if (!input.module || input.module->getContext() != &ctx) {
    error->kind = CompileErrorKind::Internal;
    error->message = "compile() needs an imported module of the context it is given";
    return false;
  }
  result->imported = std::move(input.module);
  result->notes = std::move(input.notes);
  // Keep the weights with the result: stash them in the artifact right away.
  rt::Artifact &a = result->artifact;
  for (auto &[name, tensor] : input.weights) {
    rt::Parameter p;
    p.name = name;
    p.type = tensor.type;
    p.hasData = !tensor.data.empty() || p.type.numElements() == 0;
    // 64-byte alignment so that a runtime can map weights in place.
    a.weights.resize((a.weights.size() + 63) / 64 * 64);
    p.offset = a.weights.size();
    p.bytes = tensor.data.size();
    a.weights.insert(a.weights.end(), tensor.data.begin(), tensor.data.end());
    a.params.push_back(std::move(p));
  }
  if (opts.train.enabled && !input.droppedParameters.empty()) {
    // Training would leave them at their initial value where PyTorch trains
    // them: refuse rather than train another model.
    const std::vector<std::string> &d = input.droppedParameters;
    std::string list;
    for (size_t i = 0; i < d.size(); ++i)
      list += (i ? ", '" : "'") + d[i] + "'";
    error->kind = CompileErrorKind::BadInput;
    error->message =
        "cannot train this export: " + std::to_string(d.size()) + " parameter" +
        (d.size() == 1 ? " of the torch module was" : "s of the torch module were") +
        " folded away by the exporter's optimizer together with " +
        (d.size() == 1 ? "its consumer" : "their consumers") +
        " (a zero-valued bias or scale is a no-op to it): " + list +
        "; export again with torch.onnx.export(..., dynamo=True, optimize=False), "
        "which keeps every parameter";
    return false;
  }
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
  if (failed(runImportCleanup(*result->module, opts, &msg, &result->notes))) {
    error->kind = CompileErrorKind::Internal;
    error->message = msg;
    return false;
  }
  if (failed(runTrainingPipeline(*result->module, opts, &msg, &result->notes))) {
    // Bad regexes, a missing loss, an op without a gradient rule: all are
    // about the model or the flags the user gave.
    error->kind = CompileErrorKind::BadInput;
    error->message = msg;
    return false;
  }
  if (opts.precision == "fp8" && !checkFp8Target(*result->module, opts, result, error))
    return false;
  // --fp4-qat: which FP4 products take sm_120a's block-scaled GEMMs, and the
  // path of each in its precision reason.
  if (opts.precision == "fp4") {
    planFp4Gemms(*result->module, opts.target);
    // The others' exact NVFP4 form (every target, the CPU reference too).
    PassManager pm(&ctx);
    pm.addNestedPass<func::FuncOp>(createTcFp4Exact());
    DiagnosticCollector diags(ctx);
    if (failed(pm.run(*result->module))) {
      error->kind = CompileErrorKind::Internal;
      error->message = "tc-fp4-exact: " + diags.text;
      return false;
    }
  }
  // A splat constant of any shape is one value to MLIR, but the artifact
  // stores it expanded: a model whose constants exceed that is bad input
  // (found by fuzzing: Dropout's mask for a [3,4,5,2,2^31] input).
  std::string tooLarge;
  result->module->walk([&](ConstantOp c) {
    auto t = toTensorType(c.getType());
    if (tooLarge.empty() && t &&
        t->numElements() > kMaxConstantBytes / rt::dtypeStorageBytes(t->dtype))
      tooLarge = "the model computes a constant of " + std::to_string(t->numElements()) +
                 " elements, more than the 4 GiB an artifact carries per constant";
  });
  if (!tooLarge.empty()) {
    error->kind = CompileErrorKind::BadInput;
    error->message = tooLarge;
    return false;
  }
  a.target = opts.target;
  a.producer = "tc-compile 0.1";
  // Trainability and optimizer state as the IR says.
  llvm::StringSet<> trainable;
  struct StateEntry {
    std::string name;
    rt::TensorType type;
    double init = 0; // kStateInitAttr
  };
  std::vector<StateEntry> state;
  llvm::StringSet<> seenState, notInStateDict, buffers;
  result->module->walk([&](ParameterOp p) {
    if (p.getTrainable())
      trainable.insert(p.getName());
    if (p->hasAttr("tc.not_in_state_dict"))
      notInStateDict.insert(p.getName());
    if (p->hasAttr("tc.buffer"))
      buffers.insert(p.getName());
    if (p->hasAttr("tc.optimizer_state") && seenState.insert(p.getName()).second)
      if (auto t = toTensorType(p.getType())) {
        auto init = p->getAttrOfType<FloatAttr>(kStateInitAttr);
        state.push_back({p.getName().str(), *t, init ? init.getValueAsDouble() : 0.0});
      }
  });
  std::vector<std::string> leftOut;
  for (rt::Parameter &p : a.params) {
    p.trainable = trainable.contains(p.name);
    // A frozen torch buffer (or folded constant) keeps its data: no
    // --init-params initialiser draws it.
    p.kind = rt::dtypeIsFloat(p.type.dtype) && !(buffers.contains(p.name) && !p.trainable)
                 ? rt::ParamKind::Parameter
                 : rt::ParamKind::Buffer;
    if (notInStateDict.contains(p.name) && !p.trainable)
      leftOut.push_back(p.name);
  }
  if (!leftOut.empty()) {
    // Checkpoints leave these out (torch's state_dict has no such entry:
    // a persistent=False buffer, a constant the exporter folded).
    std::string list;
    for (const std::string &n : leftOut)
      list += (list.empty() ? "" : ", ") + jsonQuote(n);
    a.reports["not_in_state_dict"] = "[" + list + "]";
    if (opts.train.enabled)
      result->notes.push_back(
          std::to_string(leftOut.size()) + " frozen tensor" + (leftOut.size() > 1 ? "s are" : " is") +
          " not in torch's state_dict (a buffer registered with persistent=False, or a constant "
          "the exporter folded: " + leftOut.front() + (leftOut.size() > 1 ? ", ..." : "") +
          "): checkpoints leave " + (leftOut.size() > 1 ? "them" : "it") +
          " out, so that load_model(strict=True) reads the checkpoint back");
  }
  if (rt::Status st = rt::applyInitialisers(opts.initAll, opts.initOverrides, &a); !st.isOk()) {
    error->kind = CompileErrorKind::BadInput;
    error->message = st.message();
    return false;
  }
  for (auto &[name, type, init] : state) {
    if (a.findParam(name)) {
      error->kind = CompileErrorKind::BadInput;
      error->message = "optimizer state '" + name + "' clashes with a model initializer";
      return false;
    }
    rt::Parameter p;
    p.name = name;
    p.type = type;
    p.kind = rt::ParamKind::OptimizerState;
    p.init = rt::ParamInit::Zeros;
    p.hasData = false;
    if (init != 0) {
      // A state entry that does not start at zero (the loss scale, an f32
      // scalar) carries its first value as data, as weights do.
      if (type.dtype != rt::DType::F32) {
        error->kind = CompileErrorKind::Internal;
        error->message = "optimizer state '" + name + "' has an initial value but is not f32";
        return false;
      }
      float v = static_cast<float>(init);
      a.weights.resize((a.weights.size() + 63) / 64 * 64);
      p.init = rt::ParamInit::Data;
      p.hasData = true;
      p.offset = a.weights.size();
      p.bytes = static_cast<uint64_t>(type.numElements()) * sizeof v;
      for (int64_t i = 0; i < type.numElements(); ++i) {
        uint8_t bytes[sizeof v];
        std::memcpy(bytes, &v, sizeof v);
        a.weights.insert(a.weights.end(), bytes, bytes + sizeof v);
      }
    }
    a.params.push_back(std::move(p));
  }
  if (opts.train.enabled && trainable.empty()) {
    error->kind = CompileErrorKind::BadInput;
    error->message = "--train: no parameter is trainable (check --trainable/--freeze)";
    return false;
  }
  if (opts.memoryPlanOnly) {
    if (!isGpuTarget(opts.target)) {
      error->kind = CompileErrorKind::Internal;
      error->message = "a memory-plan-only compile needs a GPU target, not " + opts.target;
      return false;
    }
    return runGpuPipeline(*result->module, opts, result, error);
  }
  for (auto fn : result->module->getOps<func::FuncOp>()) {
    std::string name = fn.getName().str();
    auto program = lowerToProgram(fn, name, &msg);
    if (failed(program)) {
      error->kind = CompileErrorKind::Internal;
      error->message = "lowering @" + name + " to the reference program: " + msg;
      return false;
    }
    a.functions.push_back(std::move(*program));
    if (opts.train.enabled && name == "infer") {
      rt::Function eval = a.functions.back();
      eval.name = "eval_step";
      a.functions.push_back(std::move(eval));
    }
  }
  if (opts.train.enabled)
    a.reports["training"] =
        trainingConfigJson(*result->module, opts.train, opts.precision == "fp16");
  if (auto infer = result->imported->lookupSymbol<func::FuncOp>("infer");
      infer && !input.exportModel.empty()) {
    a.reports["export.onnx"] = std::move(input.exportModel);
    std::string bad;
    a.reports["export"] = exportJson(infer, input.exportInits, opts.fp8, &bad);
    if (!bad.empty()) {
      error->kind = CompileErrorKind::BadInput;
      error->message = bad;
      return false;
    }
  }
  if (auto infer = result->imported->lookupSymbol<func::FuncOp>("infer")) {
    a.reports["input_ranges"] = inputRangesJson(infer);
    LabelConvention labels = detectLabelConvention(infer);
    if (!labels.convention.empty()) {
      a.reports["labels"] = labelConventionJson(labels);
      if (labels.convention == "same")
        result->notes.push_back("labels: " + labels.reason + "; recorded in the artifact, so "
                                "tc-run --data feeds labels = input_ids (--labels same)");
    }
  }
  if (opts.train.enabled)
    a.reports["flops"] = flopsReportJson(countFlops(*result->module, opts.train.gradAccum),
                                         opts.target, opts.precision);
  if (isGpuTarget(opts.target) && !runGpuPipeline(*result->module, opts, result, error))
    return false;
  // After the GPU pipeline, so that it names each product's run-time path.
  a.reports["precision"] =
      precisionReport(*result->module, opts.train.enabled ? "train_step" : "infer",
                      result->gpuModule ? *result->gpuModule : ModuleOp(), opts.target);
  return true;
}

bool isGpuTarget(const std::string &target) { return isGpuArch(target); }

namespace {
/// The levers --experimental takes, each with what it turns on: written, and
/// tested here, but not yet run on a GPU; one becomes the default (and
/// leaves this table) once gpu-check and the bench have run it
/// (bench/RESULTS.md).
struct ExperimentalLever {
  const char *name;
  const char *what;
};
const ExperimentalLever kExperimentalLevers[] = {
    {"wgmma-attention", "bf16/f16 attention with head dim 64 or 128 on sm_90a's warpgroup "
                        "MMA (wgmma) on an H100/H200, FlashAttention-2 on mma.sync elsewhere"},
    {"gelu-erf", "the exact (erf) GELU and its backward as GEMM epilogues (gelu_erf_aux, "
                 "dgelu_erf): tc's own sm_90a GEMM where the runtime takes it, else the "
                 "product and a GELU kernel"},
    {"side-stream", "the weight-gradient GEMMs on a second CUDA stream beside the rest of the "
                    "backward (tcx-schedule-streams; a second cuBLASLt workspace)"},
};
} // namespace

std::string checkExperimentalLevers(const std::vector<std::string> &names) {
  for (const std::string &name : names) {
    if (llvm::any_of(kExperimentalLevers,
                     [&](const ExperimentalLever &l) { return name == l.name; }))
      continue;
    std::string known;
    for (const ExperimentalLever &l : kExperimentalLevers)
      known += (known.empty() ? "" : ", ") + std::string(l.name);
    return "--experimental: unknown lever '" + name + "' (known: " + known + ")";
  }
  return "";
}

namespace {
/// The tc-gpu pipeline on a copy of `module` (after training), then NVRTC on
/// the sources it generated; fills result->gpuModule, result->kernels, the
/// artifact's kernels, device functions and "memory" report.
bool runGpuPipeline(ModuleOp module, const CompileOptions &opts, CompileResult *result,
                    CompileError *error) {
  MLIRContext *ctx = module.getContext();
  auto fail = [&](const std::string &what, const std::string &msg) {
    error->kind = CompileErrorKind::Internal;
    error->message = what + ": " + msg;
    return false;
  };
  // The GPU half runs on a copy, after the reference program was taken:
  // tc.fusion regions and tcx exist only on the GPU path.
  OwningOpRef<ModuleOp> fused(cast<ModuleOp>(module->clone()));
  {
    GpuPipelineOptions o;
    o.tf32 = opts.tf32;
    o.wgmmaAttention = llvm::is_contained(opts.experimental, "wgmma-attention");
    o.geluErf = llvm::is_contained(opts.experimental, "gelu-erf");
    o.sideStream = llvm::is_contained(opts.experimental, "side-stream");
    PassManager pm(ctx);
    buildGpuPipeline(pm, o);
    std::string msg;
    if (failed(runCollecting(pm, *fused, "the GPU pipeline", &msg, nullptr)))
      return fail("the GPU pipeline (tc-gpu)", msg);
  }
  // NVRTC compiles what tcx-generate-cuda wrote into the module.
  std::vector<tc::cuda::KernelSource> sources;
  for (auto src : fused->getOps<tcx::CudaSourceOp>()) {
    tc::cuda::KernelSource k;
    k.name = src.getSymName().str();
    k.source = src.getSource().str();
    sources.push_back(std::move(k));
  }
  if (opts.compileKernels && !opts.memoryPlanOnly) {
    if (!tc::cuda::haveNvrtc())
      return fail("CUDA code generation",
                  "this tc-compile was built without NVRTC, so it cannot compile kernels "
                  "for " + opts.target);
    std::string err;
    auto compiled = tc::cuda::compileKernels(sources, opts.target, &err, &result->notes);
    if (failed(compiled))
      return fail("NVRTC", err);
    for (auto &b : *compiled) {
      result->kernels.push_back({b.name, b.source, b.ptx, b.arch, b.cubin});
      result->artifact.kernels.push_back({b.name, b.arch, b.source, b.ptx, b.cubin});
    }
  } else {
    for (auto &k : sources)
      result->kernels.push_back({k.name, k.source, "", "", {}});
  }
  std::string err;
  if (!opts.memoryPlanOnly) {
    auto report = memoryReport(*fused, opts.target, /*function=*/"", &err);
    if (failed(report))
      return fail("memory report", err);
    result->artifact.reports["memory"] = *report;
  }
  {
    func::FuncOp shown = fused->lookupSymbol<func::FuncOp>("train_step");
    if (!shown || !shown->hasAttr("tcx.arena_size")) {
      shown = nullptr;
      int64_t most = -1;
      for (auto fn : fused->getOps<func::FuncOp>())
        if (fn->hasAttr("tcx.arena_size"))
          if (auto p = summarizeMemoryPlan(fn, nullptr); succeeded(p) && p->total() > most) {
            most = p->total();
            shown = fn;
          }
    }
    if (shown)
      if (auto p = summarizeMemoryPlan(shown, nullptr); succeeded(p))
        result->memoryPlan = *p;
  }
  if (opts.memoryPlanOnly)
    return true;
  std::vector<std::pair<std::string, std::vector<ReferenceBuffer>>> references;
  for (auto fn : fused->getOps<func::FuncOp>()) {
    references.emplace_back(fn.getName().str(), std::vector<ReferenceBuffer>());
    auto device = lowerToDeviceProgram(fn, &err, &references.back().second);
    if (failed(device))
      return fail("lowering @" + fn.getName().str() + " to the device program", err);
    result->artifact.deviceFunctions.push_back(std::move(*device));
  }
  // An op CUDA codegen has no kernel for: the GPU program cannot run (the
  // runtime refuses it at the first step); said now, naming them.
  std::vector<std::string> missing;
  for (const rt::DeviceFunction &fn : result->artifact.deviceFunctions)
    for (const rt::DeviceOp &op : fn.ops)
      if (op.attrs.count("missing_kernel"))
        missing.push_back("@" + fn.name + " " + op.name);
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 5; ++i)
      list += (i ? ", " : "") + missing[i];
    result->notes.push_back(std::to_string(missing.size()) + " op(s) have no CUDA kernel (" +
                            list + (missing.size() > 5 ? ", ..." : "") +
                            "): the artifact's GPU program cannot run; tc-run --device cpu runs "
                            "its reference program");
  }
  result->artifact.reports["check"] = checkReportJson(references);
  result->gpuModule = std::move(fused);
  return true;
}
} // namespace

BatchFit largestFittingBatch(const CompileOptions &opts, int64_t batch, int64_t plannedTotal,
                             const TargetDevice &card, std::map<int64_t, int64_t> *planned,
                             const ImportAtBatch &importAt) {
  CompileOptions planOnly = opts;
  planOnly.compileKernels = false;
  planOnly.memoryPlanOnly = true;
  BatchFit fit;
  std::map<int64_t, std::string> failures; // batches that did not compile, and why
  (*planned)[batch] = plannedTotal;
  // The plan's total at batch b; -1 when it does not compile (a batch so
  // large that a tensor passes the importer's limits: it does not fit).
  auto total = [&](int64_t b) -> int64_t {
    if (auto it = planned->find(b); it != planned->end())
      return it->second;
    MLIRContext ctx;
    loadCompilerDialects(ctx);
    CompileInput in;
    CompileResult r;
    CompileError e;
    if (!importAt(ctx, b, &in, &e.message) || !compile(ctx, std::move(in), planOnly, &r, &e) ||
        !r.memoryPlan) {
      failures[b] = e.message;
      return (*planned)[b] = -1;
    }
    return (*planned)[b] = r.memoryPlan->total();
  };
  auto fits = [&](int64_t b) {
    int64_t t = total(b);
    return t >= 0 && fitsCard(t, card);
  };
  const int64_t kMaxBatch = int64_t(1) << 40;
  // lo fits (0: none known), hi does not (-1: none known).
  int64_t lo = 0, hi = -1;
  auto record = [&](int64_t b) {
    if (fits(b))
      lo = std::max(lo, b);
    else if (hi < 0 || b < hi)
      hi = b;
  };
  record(batch);
  // Secant steps through the two plans farthest apart so far: the totals are
  // close to linear in the batch, so the line's crossing of the capacity is
  // near the answer. A step grows the batch at most 64-fold (a line through
  // small plans may be far off), and the guess and the guess + 1 bracket it.
  double room = static_cast<double>(card.memoryBytes - card.contextBytes);
  int64_t b0 = batch, b1 = batch * 2;
  record(b1);
  for (int iter = 0; iter < 10 && (hi < 0 || hi - lo > 1); ++iter) {
    int64_t t0 = total(b0), t1 = total(b1);
    if (t0 < 0 || t1 < 0 || b0 == b1 || t0 == t1)
      break;
    double slope = static_cast<double>(t1 - t0) / static_cast<double>(b1 - b0);
    if (!(slope > 0))
      break;
    double g = static_cast<double>(b1) + (room - static_cast<double>(t1)) / slope;
    double cap = static_cast<double>(std::max<int64_t>(lo, 1)) * 64;
    int64_t guess = static_cast<int64_t>(std::max(1.0, std::min({g, cap, 1e12})));
    bool moved = false;
    for (int64_t c : {guess, guess + 1})
      if (c > lo && (hi < 0 || c < hi)) {
        record(c);
        moved = true;
      }
    if (!moved)
      break;
    // Keep the guess and the farther of the two old points.
    if (std::llabs(guess - b0) > std::llabs(guess - b1))
      b1 = guess;
    else
      b0 = guess;
  }
  // Bisection where the line did not settle it.
  while (hi < 0 && lo < kMaxBatch)
    record(std::max<int64_t>(1, lo * 2));
  while (hi - lo > 1)
    record(lo + (hi - lo) / 2);
  fit.batch = lo;
  fit.note = "batch " + std::to_string(lo + 1) + " does not fit (" +
             std::to_string(planned->size()) + " plans in all)";
  if (auto f = failures.find(lo + 1); f != failures.end())
    fit.note += ": it does not compile (" + f->second + ")";
  return fit;
}

} // namespace tc
