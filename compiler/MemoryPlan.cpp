//===- MemoryPlan.cpp - the memory report of a planned step ---------------===//

#include "compiler/MemoryPlan.h"
#include "runtime/src/schema/library_abi.h"

#include "dialects/tcx/IR/TcxOps.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <set>

using namespace mlir;

namespace tc {

namespace {

/// "1,234,567"
std::string grouped(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

int64_t intAttr(func::FuncOp fn, StringRef name) {
  if (auto a = fn->getAttrOfType<IntegerAttr>(name))
    return a.getInt();
  return 0;
}
} // namespace

bool fitsCard(int64_t total, const TargetDevice &d) {
  return total + d.contextBytes <= d.memoryBytes;
}

namespace {
/// "150.1 GB = 139.8 GiB"
std::string bothUnits(int64_t bytes) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%.1f GB = %.1f GiB", bytes / 1e9, bytes / 1073741824.0);
  return s;
}

/// `s` as a JSON string.
std::string q(llvm::StringRef s) { return llvm::formatv("{0}", llvm::json::Value(s)).str(); }
} // namespace

std::string humanBytes(int64_t bytes) {
  static const char *units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024)
    return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024.0 && u < 3) {
    v /= 1024.0;
    ++u;
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%.1f ", v) << units[u];
  return s;
}

FailureOr<MemoryPlanSummary> summarizeMemoryPlan(func::FuncOp fn, std::string *error) {
  if (!fn->hasAttr("tcx.arena_size")) {
    if (error)
      *error = "@" + fn.getName().str() + " has no memory plan (run tcx-plan-memory)";
    return failure();
  }
  MemoryPlanSummary s;
  s.function = fn.getName().str();
  s.parameters = intAttr(fn, "tcx.param_bytes");
  s.modelBuffers = intAttr(fn, "tcx.buffer_bytes");
  s.optimizerState = intAttr(fn, "tcx.state_bytes");
  s.persistentGradients = intAttr(fn, "tcx.grad_bytes");
  s.weightCopies = intAttr(fn, "tcx.shadow_bytes");
  s.constants = intAttr(fn, "tcx.const_bytes");
  s.inputs = intAttr(fn, "tcx.input_bytes");
  s.activations = intAttr(fn, "tcx.activation_bytes");
  s.backward = intAttr(fn, "tcx.backward_bytes");
  s.narrowCopies = intAttr(fn, "tcx.narrow_bytes");
  s.peakLive = intAttr(fn, "tcx.peak_live_bytes");
  s.arena = intAttr(fn, "tcx.arena_size");
  bool trains = false;
  llvm::StringSet<> trainable;
  std::set<int64_t> matmulStreams; // each has its own cuBLASLt workspace
  fn.walk([&](Operation *op) {
    if (auto m = llvm::dyn_cast<tcx::MatmulOp>(op))
      matmulStreams.insert(m.getStream());
    if (auto p = llvm::dyn_cast<tcx::ParamOp>(op)) {
      if (p.getKind() == "optimizer_state" || p.getKind() == "gradient")
        trains = true;
      if (p.getTrainable() && p.getKind() == "parameter" && trainable.insert(p.getName()).second)
        s.arenaGradients += llvm::cast<tcx::BufferType>(p.getType()).getSizeInBytes();
    }
  });
  // Gradients live in the arena of a step that computes them without
  // keeping them (train_step); grad_step keeps them persistent instead.
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (auto n = fn.getResultAttrOfType<StringAttr>(i, "tc.name"))
      if (n.getValue().starts_with("update:"))
        trains = true;
  if (!trains || s.persistentGradients > 0)
    s.arenaGradients = 0;
  s.workspace = static_cast<int64_t>(matmulStreams.size()) * rt::kCublasLtWorkspaceBytes;
  return s;
}

std::string memoryReport(const MemoryPlanSummary &s, StringRef target,
                         const std::vector<BatchFit> &fits) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << "memory plan of @" << s.function << " for " << target
     << " (bytes exact; KiB/MiB/GiB are powers of 1024)\n";
  auto line = [&](StringRef what, int64_t bytes, StringRef note) {
    os << "  " << llvm::left_justify(what, 28) << llvm::right_justify(grouped(bytes), 17) << "  "
       << llvm::left_justify("(" + humanBytes(bytes) + ")", 13);
    if (!note.empty())
      os << "  " << note;
    os << "\n";
  };
  line("parameters", s.parameters, "persistent");
  if (s.modelBuffers)
    line("model buffers", s.modelBuffers, "persistent, not trained");
  if (s.persistentGradients)
    line("gradients", s.persistentGradients, "persistent");
  else
    line("gradients", s.arenaGradients, s.arenaGradients ? "in the arena (one per trainable parameter)" : "");
  line("optimizer state", s.optimizerState, "persistent");
  if (s.weightCopies)
    line("16-bit weight copies", s.weightCopies, "persistent, written by the optimizer");
  if (s.constants)
    line("constants", s.constants, "persistent, read-only");
  line("inputs", s.inputs, "step arguments");
  line("activations (peak)", s.activations, "in the arena: forward values live at once");
  if (s.backward)
    line("backward (peak)", s.backward, "in the arena: gradients and backward temporaries");
  line("workspace", s.workspace, s.workspace ? "cuBLASLt" : "no matmuls");
  line("arena peak", s.arena, ("one allocation; peak live " + humanBytes(s.peakLive)).c_str());
  if (s.narrowCopies)
    line("  fp8/fp4 copies (peak)", s.narrowCopies,
         "in the arena: quantized operands and transposed copies live at once");
  int64_t total = s.total();
  line("total", total, "what the runtime allocates");
  std::vector<const TargetDevice *> cards = devicesOf(target.str());
  for (size_t i = 0; i < cards.size(); ++i) {
    const TargetDevice &d = *cards[i];
    int64_t need = total + d.contextBytes;
    double used = 100.0 * static_cast<double>(need) / static_cast<double>(d.memoryBytes);
    os << "  " << d.name << ": capacity " << grouped(d.memoryBytes) << " B ("
       << bothUnits(d.memoryBytes) << "; " << d.memorySource << "); with the CUDA context ("
       << humanBytes(d.contextBytes) << ", " << d.contextSource << ") the step needs "
       << grouped(need) << " B: ";
    if (fitsCard(total, d))
      os << "fits, " << llvm::format("%.1f", used) << "% used, "
         << humanBytes(d.memoryBytes - need) << " free";
    else
      os << "does NOT fit, " << humanBytes(need - d.memoryBytes) << " over ("
         << llvm::format("%.1f", used) << "%)";
    os << "\n";
    if (i < fits.size()) {
      const BatchFit &f = fits[i];
      if (f.batch > 0)
        os << "    largest batch that fits: " << f.batch << " (re-planned)";
      else if (f.batch == 0)
        os << "    largest batch that fits: none (batch 1 does not fit)";
      else
        os << "    largest batch: not searched";
      if (!f.note.empty())
        os << "; " << f.note;
      os << "\n";
    }
  }
  if (cards.empty())
    os << "  fit: no card of target " << target << " in the table (known: sm_90, sm_120)\n";
  return out;
}

std::string memoryReportJson(const MemoryPlanSummary &s, StringRef target,
                             const std::vector<BatchFit> &fits) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << "{\"schema\": \"tc.metrics/1\", \"kind\": \"memory_report\", \"function\": "
     << q(s.function) << ", \"target\": " << q(target)
     << ", \"unit\": \"bytes\", \"bytes\": {\"parameters\": " << s.parameters
     << ", \"model_buffers\": " << s.modelBuffers
     << ", \"gradients\": " << (s.persistentGradients ? s.persistentGradients : s.arenaGradients)
     << ", \"gradients_in_arena\": " << (s.persistentGradients ? "false" : "true")
     << ", \"optimizer_state\": " << s.optimizerState << ", \"weight_copies\": " << s.weightCopies
     << ", \"constants\": " << s.constants << ", \"inputs\": " << s.inputs
     << ", \"activations_peak\": " << s.activations << ", \"backward_peak\": " << s.backward
     << ", \"narrow_copies_peak\": " << s.narrowCopies << ", \"workspace\": " << s.workspace
     << ", \"arena\": " << s.arena << ", \"peak_live\": " << s.peakLive
     << "}, \"total\": " << s.total() << ", \"cards\": [";
  std::vector<const TargetDevice *> cards = devicesOf(target.str());
  for (size_t i = 0; i < cards.size(); ++i) {
    const TargetDevice &d = *cards[i];
    bool fit = fitsCard(s.total(), d);
    os << (i ? ", " : "") << "{\"name\": " << q(d.name) << ", \"capacity_bytes\": "
       << d.memoryBytes << ", \"capacity_source\": " << q(d.memorySource)
       << ", \"context_bytes\": " << d.contextBytes << ", \"fits\": " << (fit ? "true" : "false")
       << ", \"free_bytes\": " << d.memoryBytes - s.total() - d.contextBytes;
    if (i < fits.size()) {
      if (fits[i].batch >= 0)
        os << ", \"largest_batch\": " << fits[i].batch;
      if (!fits[i].note.empty())
        os << ", \"note\": " << q(fits[i].note);
    }
    os << "}";
  }
  os << "]}\n";
  return out;
}

FailureOr<std::string> memoryReport(ModuleOp module, StringRef target, StringRef function,
                                    std::string *error) {
  SmallVector<func::FuncOp> fns;
  if (!function.empty()) {
    auto fn = module.lookupSymbol<func::FuncOp>(function);
    if (!fn) {
      if (error)
        *error = "no function @" + function.str() + " to report";
      return failure();
    }
    fns.push_back(fn);
  } else if (auto train = module.lookupSymbol<func::FuncOp>("train_step");
             train && train->hasAttr("tcx.arena_size")) {
    fns.push_back(train);
  } else {
    for (auto fn : module.getOps<func::FuncOp>())
      if (fn->hasAttr("tcx.arena_size"))
        fns.push_back(fn);
  }
  if (fns.empty()) {
    if (error)
      *error = "no planned function to report (run tcx-plan-memory)";
    return failure();
  }
  std::string out;
  for (func::FuncOp fn : fns) {
    auto s = summarizeMemoryPlan(fn, error);
    if (failed(s))
      return failure();
    out += memoryReport(*s, target);
  }
  return out;
}

} // namespace tc
