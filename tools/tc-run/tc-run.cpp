//===- tc-run.cpp - run a compiled tc artifact ----------------------------===//
//
// Thin: parses flags, reads the environment (TC_CUDA_GRAPHS, TC_CUDA_PIPELINE,
// TC_CUDA_CHECK_OPS, TC_CUDA_PROFILE, TC_MATMUL_TUNE: the CUDA options;
// TC_CACHE_DIR: where the matmul tunings' choices are kept),
// installs the signal handlers and prints; the work is the runtime's, through
// its public C API only (tc/runtime.h: tc_run_train, tc_run_eval,
// tc_run_generate, sessions for --eval with feeds).
//
// Exit codes: 0 success; 2 usage or input error (bad flag, missing or bad
// artifact, data or checkpoint, missing/extra/ill-typed feed); 1 run-time
// failure; 128+N when signal N stopped training (after saving it with
// --save). Every error is one line on stderr starting with "tc-run: error: ".
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "runtime/include/tc/runtime.h"
#include "tools/cli.h"

namespace {

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

int fail(int code, const std::string &msg) {
  std::string line = msg;
  for (char &ch : line)
    if (ch == '\n')
      ch = ' ';
  std::fprintf(stderr, "tc-run: error: %s\n", line.c_str());
  return code;
}

constexpr const char *kUsage = R"(usage: tc-run MODEL.tca --steps N (--data TOKENS.bin | --feed NAME=FILE.npy ...) [options]
       tc-run MODEL.tca --resume DIR [--steps N] [options]
       tc-run MODEL.tca --eval (--feed NAME=FILE.npy ... | --data TOKENS.bin) [--init CKPT]
       tc-run MODEL.tca --generate --prompt 1,2,3 [--init CKPT] [--max-new-tokens N]
       tc-run MODEL.tca --check (--data TOKENS.bin | --feed NAME=FILE.npy ...) [--init CKPT]
       tc-run MODEL.tca --export-onnx OUT.onnx --export-precision nvfp4|mxfp4|fp8|bf16 [--init CKPT]

Training (the artifact of tc-compile --train):
  --steps N              the total step count; a resumed run continues to it
                         (default on --resume: the run's own total)
  --data FILE            a flat token file (nanoGPT/llm.c .bin, no header):
                         random [batch, seq] windows, seeded by --seed
  --dtype uint16|uint32  the token file's type (uint16)
  --labels next|same     what --data feeds as labels: next = input_ids shifted
                         by one (nanoGPT, llm.c); same = input_ids, for a model
                         that shifts them itself (HuggingFace
                         *ForCausalLM(labels=...)). Default: what tc-compile
                         found in the model's loss (recorded in the artifact),
                         next when it found nothing
  --batch B --seq T      must match the compiled input (a check; recompile
                         with tc-compile --dim batch=B --dim seq=T to change)
  --feed NAME=FILE.npy   a fixed input instead of --data (every input)
  --lr X                 base learning rate (default: tc-compile's --lr, 1e-3)
  --warmup W             linear warmup over steps 1..W (0)
  --lr-schedule constant|cosine
                         constant (default), or cosine from lr down to 0.1*lr
                         at step N (nanoGPT's schedule)
  --seed S               data windows and the initialisers of a model compiled
                         with --init-params (1337)
  --save DIR             checkpoint: DIR/model.safetensors (the model's own
                         names), DIR/optimizer.safetensors, DIR/state.json
                         (step, RNG, data position, the run's configuration),
                         written atomically at the end, every --save-every K
                         steps and on SIGINT/SIGTERM (a second signal exits at
                         once). Refuses to replace a newer checkpoint or one of
                         another run
  --save-every K         also save every K steps (off)
  --overwrite            let --save replace any checkpoint in DIR
  --keep-checkpoints N   save into DIR/step-NNNNNNNN folders and keep the
                         newest N (off: DIR itself is the checkpoint)
  --resume DIR           continue the run saved in DIR (or its newest
                         step-N folder) with its configuration: --lr, --warmup,
                         --lr-schedule, --seed, --data, --labels, --val-data
                         ... default to the run's, and one that differs is an
                         error; --steps may be raised (the schedule is
                         recomputed and printed)
  --init WEIGHTS         start from a checkpoint folder's or a .safetensors
                         file's weights (fresh optimizer state)
  --val-data FILE        validation tokens: val_loss every --eval-every K
                         steps (100) over --eval-iters N batches (20) of evenly
                         spaced windows (the same ones each time)
  --log-every K          a progress line every K steps (10; 0: none)
  --tensorboard DIR      TensorBoard event files with the metrics' scalars

Evaluation:
  --eval                 run eval_step (or infer, or --function NAME) once
                         with --feed inputs and print every output; with
                         --data, the mean loss over --eval-iters batches (20)
  --init CKPT            evaluate a checkpoint's (or .safetensors) weights
  --function NAME        the function to run with --feed
  --save-outputs DIR     write each output as DIR/NAME.npy

Checking the GPU against the CPU reference:
  --check                one step (the run's first: --data, --feed, --init,
                         --seed, --lr as in training) on the GPU and on the CPU
                         reference from the same state, every value both hold
                         compared (relative L2 error); prints a line per value
                         and names the first device op whose output is beyond
                         tolerance (with FP8/FP4: where a loss diverges).
                         Exit 0 when every value is within, 1 otherwise
  --check-tolerance X    one tolerance for every value (default by type: f32
                         1e-3, f16 1e-2, bf16 2e-2, fp8 2.5e-1, fp4 3e-1; at
                         least that of the step's narrowest float type)
  --function NAME        the function to check (train_step; grad_step with
                         gradient accumulation)

Generation (causal LMs with a logits output, as nanoGPT's sample.py):
  --generate             sample --max-new-tokens tokens (32) after --prompt
  --prompt IDS           the prompt's token ids, comma-separated
  --temperature X        softmax temperature (1.0; 0 is greedy)
  --top-k K              sample among the K most likely tokens (0: all)

Export (docs/export.md; the weights of the artifact or of --init):
  --export-onnx OUT.onnx the model as standard ONNX, the linear layers of the
                         --fp8 plan quantised to --export-precision
  --export-safetensors OUT
                         the same weights as safetensors
  --export-precision nvfp4|mxfp4|fp8|bf16
                         mxfp4: FLOAT4E2M1 + E8M0 1x32 scales (opset 24);
                         nvfp4: FLOAT4E2M1 + E4M3 16x16 block scales (as
                         1x16) under an FP32 tensor scale; fp8: E4M3,
                         per-tensor scale; bf16 (opset 23)

Everywhere:
  --device auto|cpu|cuda[:N]
                         auto (default): the GPU when the artifact has a GPU
                         program (tc-compile --target sm_90|sm_120) and a CUDA
                         GPU is present, else the CPU reference (with a note
                         saying why); cuda[:N] insists on GPU N
  --metrics FILE.jsonl   one JSON object per step / validation / evaluation,
                         schema "tc.metrics/1" (docs/metrics.md); appended to
                         on --resume
  --ref-precision f32|f64
                         the CPU reference's arithmetic (f32)
  -h, --help             this text
  --version              print tc's version
)";

/// Which modes a flag means something in.
enum Mode : unsigned { kTrain = 1, kEval = 2, kGenerate = 4, kCheck = 8, kExport = 16 };

struct Options {
  std::string model;
  std::string device = "auto";
  std::string function;
  std::vector<std::pair<std::string, std::string>> feeds; // name, file
  std::string refPrecision = "f32";
  std::string saveDir; // --save-outputs
  std::string exportOnnx, exportSafetensors, exportPrecision;
  bool help = false, version = false, eval = false, generate = false, check = false;
  double checkTolerance = 0;
  /// The training flags, as the runtime takes them (NULL / -1: not given).
  /// Its strings point into argv; feeds, device and stop are set when the
  /// run starts. --metrics, --data, --dtype, --labels, --init, --seed and
  /// --eval-iters of the other modes are read from here too.
  tc_train_options_t train;
  std::string prompt;
  int64_t maxNewTokens = 32, topK = 0;
  double temperature = 1.0;
  /// Every flag given, with the modes it means something in.
  std::vector<std::pair<std::string, unsigned>> given;
};

/// A whole-number flag value >= lo.
std::string parseInt(const std::string &flag, const std::string &v, int64_t lo, int64_t *out) {
  char *end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || x < lo)
    return flag + " wants a whole number >= " + std::to_string(lo) + ", got '" + v + "'";
  *out = x;
  return "";
}

std::string parseDouble(const std::string &flag, const std::string &v, double *out) {
  char *end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(d) || d < 0)
    return flag + " wants a number >= 0, got '" + v + "'";
  *out = d;
  return "";
}

/// NULL for "" (a flag given an empty value is not given).
const char *given(const char *value) { return value && *value ? value : nullptr; }

/// Parses argv; returns an error message or "".
std::string parseArgs(int argc, char **argv, Options *o) {
  std::vector<std::string> positional;
  tc_train_options_t &t = o->train;
  tc_train_options_initialize(&t);
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h") {
      o->help = true;
      continue;
    }
    if (arg.size() < 2 || arg.compare(0, 2, "--") != 0) {
      positional.push_back(arg);
      continue;
    }
    std::string flag = arg, value;
    const char *raw = nullptr; // the value in argv (kept by the options)
    bool hasValue = false;
    size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      raw = argv[i] + eq + 1;
      hasValue = true;
    }
    auto take = [&]() -> std::string {
      if (!hasValue) {
        if (i + 1 >= argc)
          return "flag " + flag + " needs a value";
        raw = argv[++i];
        value = raw;
      }
      return "";
    };
    auto noValue = [&]() -> std::string {
      return hasValue ? "flag " + flag + " takes no value" : "";
    };
    std::string err;
    unsigned modes = kTrain | kEval | kGenerate | kCheck;
    if (flag == "--help") {
      o->help = true;
    } else if (flag == "--version") {
      o->version = true;
    } else if (flag == "--eval") {
      err = noValue();
      o->eval = true;
      modes = kEval;
    } else if (flag == "--check") {
      err = noValue();
      o->check = true;
      modes = kCheck;
    } else if (flag == "--check-tolerance") {
      err = take();
      if (err.empty())
        err = parseDouble(flag, value, &o->checkTolerance);
      modes = kCheck;
    } else if (flag == "--generate") {
      err = noValue();
      o->generate = true;
      modes = kGenerate;
    } else if (flag == "--overwrite") {
      err = noValue();
      t.overwrite = true;
      modes = kTrain;
    } else if (flag == "--device") {
      err = take();
      o->device = value;
      if (err.empty() && value != "cpu" && value != "auto" && value != "cuda" &&
          !(value.compare(0, 5, "cuda:") == 0 && value.size() > 5 &&
            value.find_first_not_of("0123456789", 5) == std::string::npos))
        return "--device must be auto, cpu, cuda or cuda:N, got '" + value + "'";
    } else if (flag == "--function" || flag == "--save-outputs") {
      err = take();
      (flag == "--function" ? o->function : o->saveDir) = value;
      modes = flag == "--function" ? kEval | kCheck : kEval;
    } else if (flag == "--feed") {
      err = take();
      if (err.empty()) {
        size_t e = value.find('=');
        if (e == std::string::npos || e == 0 || e + 1 == value.size())
          return "--feed expects NAME=FILE.npy, got '" + value + "'";
        o->feeds.push_back({value.substr(0, e), value.substr(e + 1)});
      }
      modes = kTrain | kEval | kCheck;
    } else if (flag == "--metrics") {
      err = take();
      t.metrics = given(raw);
      modes = kTrain | kEval;
    } else if (flag == "--ref-precision") {
      err = take();
      o->refPrecision = value;
      if (err.empty() && value != "f32" && value != "f64")
        return "--ref-precision must be f32 or f64, got '" + value + "'";
    } else if (flag == "--steps" || flag == "--batch" || flag == "--seq" || flag == "--warmup" ||
               flag == "--save-every" || flag == "--log-every" || flag == "--seed" ||
               flag == "--keep-checkpoints" || flag == "--eval-every" || flag == "--eval-iters" ||
               flag == "--max-new-tokens" || flag == "--top-k") {
      err = take();
      int64_t x = 0;
      int64_t lo = (flag == "--batch" || flag == "--seq" || flag == "--save-every" ||
                    flag == "--keep-checkpoints" || flag == "--eval-every" ||
                    flag == "--eval-iters")
                       ? 1
                       : 0;
      if (err.empty())
        err = parseInt(flag, value, lo, &x);
      modes = kTrain;
      if (flag == "--steps") t.steps = x;
      else if (flag == "--batch") { t.batch = x; modes = kTrain | kCheck; }
      else if (flag == "--seq") { t.seq = x; modes = kTrain | kCheck; }
      else if (flag == "--warmup") t.warmup = x;
      else if (flag == "--save-every") t.save_every = x;
      else if (flag == "--log-every") t.log_every = x;
      else if (flag == "--keep-checkpoints") t.keep_checkpoints = x;
      else if (flag == "--eval-every") t.eval_every = x;
      else if (flag == "--eval-iters") { t.eval_iters = x; modes = kTrain | kEval; }
      else if (flag == "--seed") { t.seed = x; modes = kTrain | kEval | kGenerate | kCheck | kExport; }
      else if (flag == "--max-new-tokens") { o->maxNewTokens = x; modes = kGenerate; }
      else { o->topK = x; modes = kGenerate; }
    } else if (flag == "--lr" || flag == "--temperature") {
      err = take();
      double x = 0;
      if (err.empty())
        err = parseDouble(flag, value, &x);
      if (flag == "--lr") {
        t.lr = x;
        modes = kTrain | kCheck;
      } else {
        o->temperature = x;
        modes = kGenerate;
      }
    } else if (flag == "--lr-schedule") {
      err = take();
      t.schedule = given(raw);
      modes = kTrain;
      if (err.empty() && value != "constant" && value != "cosine")
        return "--lr-schedule must be constant or cosine, got '" + value + "'";
    } else if (flag == "--labels") {
      err = take();
      t.labels = given(raw);
      modes = kTrain | kEval | kCheck;
      if (err.empty() && value != "next" && value != "same")
        return "--labels must be next or same, got '" + value + "'";
    } else if (flag == "--dtype") {
      err = take();
      t.data_dtype = given(raw);
      modes = kTrain | kEval | kCheck;
      if (err.empty() && value != "uint16" && value != "uint32")
        return "--dtype must be uint16 or uint32, got '" + value + "'";
    } else if (flag == "--data" || flag == "--init") {
      err = take();
      (flag == "--data" ? t.data : t.init) = given(raw);
      modes = flag == "--data" ? kTrain | kEval | kCheck
                               : kTrain | kEval | kGenerate | kCheck | kExport;
    } else if (flag == "--save" || flag == "--resume" || flag == "--val-data" ||
               flag == "--tensorboard") {
      err = take();
      (flag == "--save" ? t.save : flag == "--resume" ? t.resume
                                   : flag == "--val-data" ? t.val_data : t.tensorboard) =
          given(raw);
      modes = kTrain;
    } else if (flag == "--export-onnx" || flag == "--export-safetensors" ||
               flag == "--export-precision") {
      err = take();
      (flag == "--export-onnx" ? o->exportOnnx
       : flag == "--export-safetensors" ? o->exportSafetensors
                                        : o->exportPrecision) = value;
      modes = kExport;
    } else if (flag == "--prompt") {
      err = take();
      o->prompt = value;
      modes = kGenerate;
    } else {
      return tc::cli::unknownOption(flag, kUsage);
    }
    if (!err.empty())
      return err;
    o->given.push_back({flag, modes});
  }
  if (o->help || o->version)
    return "";
  if (positional.empty())
    return "no artifact given (usage: tc-run MODEL.tca --steps N --data TOKENS.bin, or --help)";
  if (positional.size() > 1)
    return "unexpected argument '" + positional[1] + "' (only one artifact is allowed)";
  o->model = positional[0];
  if (o->eval + o->generate + o->check > 1)
    return "--eval, --generate and --check are different runs: give one";
  bool exporting = !o->exportOnnx.empty() || !o->exportSafetensors.empty();
  if (!exporting && !o->exportPrecision.empty())
    return "--export-precision needs --export-onnx OUT.onnx or --export-safetensors OUT";
  if (exporting && o->exportPrecision.empty())
    return "--export-onnx / --export-safetensors need --export-precision (nvfp4, mxfp4, fp8 "
           "or bf16)";
  if (exporting && (o->eval || o->generate || o->check))
    return "an export is a run of its own: give it without --eval / --generate / --check";
  // No silent no-ops: every flag must mean something in the mode it runs.
  unsigned mode = exporting    ? kExport
                  : o->check    ? kCheck
                  : o->generate ? kGenerate
                  : o->eval     ? kEval
                                : kTrain;
  bool trainingAsked = t.steps >= 0 || t.resume;
  if (mode == kCheck && !t.data && o->feeds.empty())
    return "--check needs the step's inputs: --data TOKENS.bin or --feed NAME=FILE.npy";
  if (mode == kTrain && !trainingAsked) {
    // Nothing but feeds (and their options): the old way to evaluate.
    bool onlyEval = true;
    for (const auto &[f, m] : o->given)
      onlyEval = onlyEval && (m & kEval);
    if (onlyEval && !t.data && !t.init)
      mode = kEval;
    else
      return "training needs --steps N (or --resume DIR); to evaluate, give --eval";
  }
  const char *modeName = mode == kTrain  ? "training"
                         : mode == kEval  ? "--eval"
                         : mode == kCheck ? "--check"
                         : mode == kExport ? "an export"
                                           : "--generate";
  for (const auto &[f, m] : o->given)
    if (!(m & mode))
      return f + " has no effect in " + (mode == kTrain ? std::string("training") : modeName) +
             " (it goes with " +
             ((m & kTrain)  ? "training (--steps)"
              : (m & kEval) ? "--eval"
              : (m & kCheck) ? "--check"
              : (m & kExport) ? "--export-onnx / --export-safetensors"
                              : "--generate") +
             ")";
  return "";
}

/// A status as tc-run's exit: its message (consumed) and whether it is the
/// user's input.
struct Failure {
  std::string message;
  bool input = false;
  tc_status_code_t code = TC_STATUS_OK;
};
Failure take(tc_status_t *st) {
  Failure f{tc_status_message(st), tc_status_is_input_error(st) != 0, tc_status_code(st)};
  tc_status_release(st);
  return f;
}

/// A runtime-owned string as a std::string (released).
std::string own(char *text) {
  std::string s = text ? text : "";
  tc_string_release(text);
  return s;
}

struct TensorReleaser {
  void operator()(tc_tensor_t *t) const { tc_tensor_release(t); }
};
using Tensor = std::unique_ptr<tc_tensor_t, TensorReleaser>;

std::string typeText(tc_dtype_t dtype, size_t rank, const int64_t *shape) {
  char *text = nullptr;
  tc_status_release(tc_type_to_string(dtype, rank, shape, &text));
  return own(text);
}

std::string formatValue(tc_dtype_t dtype, double v) {
  char buf[64];
  if (tc_dtype_is_float(dtype))
    std::snprintf(buf, sizeof buf, "%.6g", v);
  else
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  return buf;
}

void printOutput(const std::string &name, const tc_tensor_t *t) {
  std::vector<double> v(tc_tensor_element_count(t));
  tc_status_release(tc_tensor_to_f64(t, v.data(), v.size()));
  tc_dtype_t dtype = tc_tensor_dtype(t);
  std::string line = name + ": " + typeText(dtype, tc_tensor_rank(t), tc_tensor_shape(t));
  if (tc_tensor_rank(t) == 0 && v.size() == 1) {
    line += " = " + formatValue(dtype, v[0]);
  } else {
    line += " [";
    size_t shown = std::min<size_t>(v.size(), 6);
    for (size_t i = 0; i < shown; ++i)
      line += (i ? ", " : "") + formatValue(dtype, v[i]);
    if (v.size() > shown)
      line += ", ...";
    line += "]";
    if (!v.empty()) {
      double sum = 0, lo = v[0], hi = v[0];
      for (double x : v) {
        sum += x;
        lo = std::min(lo, x);
        hi = std::max(hi, x);
      }
      char buf[128];
      std::snprintf(buf, sizeof buf, " mean=%.6g min=%.6g max=%.6g",
                    sum / static_cast<double>(v.size()), lo, hi);
      line += buf;
    }
  }
  std::printf("%s\n", line.c_str());
}

/// Appends `line` and a newline to the metrics file.
int appendMetrics(const std::string &path, const std::string &line) {
  std::FILE *f = std::fopen(path.c_str(), "a");
  if (!f || std::fputs((line + "\n").c_str(), f) < 0 || std::fclose(f) != 0)
    return fail(kExitRuntime, "cannot append to metrics file '" + path + "': " +
                                  std::strerror(errno));
  return 0;
}

/// The CUDA backend's options, from the environment (the runtime reads none).
tc_cuda_options_t cudaOptionsFromEnv() {
  tc_session_options_t defaults;
  tc_session_options_initialize(&defaults);
  tc_cuda_options_t c = defaults.cuda;
  if (const char *g = std::getenv("TC_CUDA_GRAPHS"))
    c.graphs = std::string(g) != "0";
  if (const char *v = std::getenv("TC_CUDA_CHECK_OPS"))
    c.check_each_op = std::string(v) == "1";
  if (const char *v = std::getenv("TC_CUDA_PROFILE"))
    c.profile = std::string(v) == "1";
  if (const char *v = std::getenv("TC_MATMUL_TUNE"))
    c.matmul_tune = std::string(v) != "0";
  // The tunings' choices are kept in tc's cache folder (the same bits from
  // every run on this device, resumed or not); none without one.
  if (*tc_cache_dir())
    c.matmul_tune_dir = tc_cache_dir();
  if (const char *v = std::getenv("TC_CUDA_PIPELINE"))
    c.pipeline = std::string(v) != "0";
  return c;
}

/// Where to run: *gpu = -1 for the CPU reference, else the GPU ordinal.
/// `*note` says why --device auto runs a GPU artifact on the CPU. Returns an
/// error message or "".
std::string resolveDevice(const Options &o, const tc_artifact_t *artifact, int *gpu,
                          std::string *note) {
  *gpu = -1;
  note->clear();
  if (o.device == "cpu")
    return "";
  bool explicitGpu = o.device != "auto";
  int ordinal = explicitGpu && o.device.size() > 5 ? std::atoi(o.device.c_str() + 5) : 0;
  if (!tc_artifact_has_device_program(artifact)) {
    if (!explicitGpu)
      return "";
    return "artifact '" + o.model + "' was compiled for '" + tc_artifact_target(artifact) +
           "' and has no GPU program: compile it with tc-compile --target sm_90 (or sm_120)";
  }
  std::string fallback =
      "the artifact has a GPU program (" + std::string(tc_artifact_target(artifact)) + ") but ";
  if (o.refPrecision == "f64") {
    if (explicitGpu)
      return "--ref-precision f64 is a CPU reference mode; it does not go with --device cuda";
    *note = fallback + "--ref-precision f64 is a CPU reference mode: running on the CPU reference";
    return "";
  }
  if (!tc_cuda_built()) {
    if (explicitGpu)
      return "this tc-run was built without the CUDA backend (configure with -DTC_ENABLE_CUDA=ON)";
    *note = fallback + "this tc-run was built without the CUDA backend: running on the CPU "
            "reference";
    return "";
  }
  if (tc_status_t *st = tc_cuda_check()) {
    Failure f = take(st);
    if (explicitGpu)
      return f.message;
    *note = fallback + f.message + ": running on the CPU reference (--device cuda to insist)";
    return "";
  }
  *gpu = ordinal;
  return "";
}

std::atomic<int> gStop{0};

void onSignal(int sig) {
  if (gStop.load() != 0)
    std::_Exit(128 + sig); // a second signal: at once
  gStop.store(sig);
}

/// tc_train_options_t.should_stop: the signal that asked, 0 for none.
int stopRequested(void *) { return gStop.load(); }

std::string clockText(double s) {
  if (!(s >= 0) || !std::isfinite(s))
    return "?";
  long long t = static_cast<long long>(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", t / 60, t % 60);
  return buf;
}

std::string countText(double v) {
  char buf[32];
  if (v >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2fG", v / 1e9);
  else if (v >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
  else if (v >= 1e4)
    std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

/// Prints what a run says: lines to stdout, notes to stderr, the progress
/// bar on a terminal (stderr) and the periodic lines (kept in the scrollback).
class Printer {
public:
  explicit Printer(bool tty) : tty_(tty) {}
  void line(const std::string &text) {
    clearBar();
    std::printf("%s\n", text.c_str());
    std::fflush(stdout);
  }
  void note(const std::string &text) {
    clearBar();
    std::fprintf(stderr, "tc-run: note: %s\n", text.c_str());
  }
  void step(const tc_step_metrics_t &r) {
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "step %lld/%lld loss %.4f (avg %.4f) lr %.3g grad_norm %.3g | %s tok/s, %s "
                  "tokens | %s elapsed, ETA %s",
                  static_cast<long long>(r.step), static_cast<long long>(r.total_steps), r.loss,
                  r.loss_smooth, r.lr, r.grad_norm, countText(r.tokens_per_s).c_str(),
                  countText(static_cast<double>(r.tokens_total)).c_str(),
                  clockText(r.elapsed_s).c_str(), clockText(r.eta_s).c_str());
    std::string text = buf;
    if (r.mfu >= 0) {
      std::snprintf(buf, sizeof buf, " | MFU %.1f%% HFU %.1f%%", 100 * r.mfu, 100 * r.hfu);
      text += buf;
    }
    if (r.loss_scale > 0) {
      std::snprintf(buf, sizeof buf, " | loss scale %g%s", r.loss_scale,
                    r.skipped ? ": skipped (inf/NaN gradient), no update" : "");
      text += buf;
    }
    // A skipped step is always a line: the run made no progress there.
    if (r.periodic || r.skipped) {
      clearBar();
      std::printf("%s\n", text.c_str());
      std::fflush(stdout);
    }
    if (tty_) {
      int width = 24;
      int64_t span = std::max<int64_t>(r.total_steps - r.first_step + 1, 1);
      int filled = static_cast<int>(width * (r.step - r.first_step + 1) / span);
      std::fprintf(stderr, "\r[%s%s] %s\x1b[K", std::string(filled, '#').c_str(),
                   std::string(width - filled, '.').c_str(), text.c_str());
      barShown_ = true;
    }
  }
  void val(const tc_val_metrics_t &v) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "step %lld val_loss %.4f (%lld tokens)",
                  static_cast<long long>(v.step), v.val_loss, static_cast<long long>(v.val_tokens));
    line(buf);
  }
  void clearBar() {
    if (barShown_) {
      std::fputs("\r\x1b[K", stderr);
      barShown_ = false;
    }
  }

  /// The observer the runtime calls.
  tc_run_observer_t observer() {
    tc_run_observer_t o;
    o.line = [](void *p, const char *t) { static_cast<Printer *>(p)->line(t); };
    o.note = [](void *p, const char *t) { static_cast<Printer *>(p)->note(t); };
    o.step = [](void *p, const tc_step_metrics_t *m) { static_cast<Printer *>(p)->step(*m); };
    o.val = [](void *p, const tc_val_metrics_t *m) { static_cast<Printer *>(p)->val(*m); };
    o.user = this;
    return o;
  }

private:
  bool tty_;
  bool barShown_ = false;
};

/// --generate.
int runGenerate(const Options &o, const tc_artifact_t *artifact) {
  std::vector<int64_t> prompt;
  std::string p = o.prompt;
  for (size_t pos = 0; pos <= p.size();) {
    size_t c = p.find(',', pos);
    std::string part = p.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
    int64_t x = 0;
    std::string err = parseInt("--prompt", part, 0, &x);
    if (!err.empty())
      return fail(kExitUsage, "--prompt wants comma-separated token ids >= 0, got '" + p + "'");
    prompt.push_back(x);
    if (c == std::string::npos)
      break;
    pos = c + 1;
  }
  tc_generate_options_t g;
  tc_generate_options_initialize(&g);
  g.max_new_tokens = o.maxNewTokens;
  g.temperature = o.temperature;
  g.top_k = o.topK;
  g.seed = o.train.seed >= 0 ? static_cast<uint64_t>(o.train.seed) : 1337;
  g.init = o.train.init;
  g.ref_precision = o.refPrecision == "f64" ? TC_REF_PRECISION_F64 : TC_REF_PRECISION_F32;
  tc_tensor_t *out = nullptr;
  if (tc_status_t *st = tc_run_generate(artifact, &g, prompt.data(), prompt.size(), &out)) {
    Failure f = take(st);
    return fail(f.input ? kExitUsage : kExitRuntime, f.message);
  }
  Tensor tokens(out);
  const int64_t *ids = static_cast<const int64_t *>(tc_tensor_data(out));
  std::string line;
  for (size_t i = 0; i < tc_tensor_element_count(out); ++i)
    line += (i ? "," : "") + std::to_string(ids[i]);
  std::printf("%s\n", line.c_str());
  return 0;
}

/// Training.
int runTraining(const Options &o, const tc_artifact_t *artifact, int gpu) {
  tc_train_options_t c = o.train;
  std::vector<tc_feed_t> feeds;
  for (const auto &[name, file] : o.feeds)
    feeds.push_back({name.c_str(), file.c_str()});
  c.feeds = feeds.data();
  c.num_feeds = feeds.size();
  c.device = gpu >= 0 ? TC_DEVICE_CUDA : TC_DEVICE_CPU;
  c.device_ordinal = gpu >= 0 ? gpu : 0;
  c.ref_precision = o.refPrecision == "f64" ? TC_REF_PRECISION_F64 : TC_REF_PRECISION_F32;
  c.cuda = cudaOptionsFromEnv();
  c.should_stop = stopRequested;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  Printer printer(::isatty(2));
  tc_run_observer_t obs = printer.observer();
  tc_train_summary_t sum;
  tc_status_t *st = tc_run_train(artifact, &c, &obs, &sum);
  printer.clearBar();
  if (st) {
    Failure f = take(st);
    return fail(f.input ? kExitUsage : kExitRuntime, f.message);
  }
  if (sum.interrupted) {
    std::printf("stopped by signal %d after step %lld%s\n", sum.interrupted,
                static_cast<long long>(sum.last_step),
                c.save ? "" : " (no --save: nothing saved)");
    return 128 + sum.interrupted;
  }
  if (sum.last_step >= sum.first_step)
    std::printf("trained steps %lld..%lld in %.1f s: loss %.4f -> %.4f\n",
                static_cast<long long>(sum.first_step), static_cast<long long>(sum.last_step),
                sum.seconds, sum.first_loss, sum.last_loss);
  else
    std::printf("nothing to do: already at step %lld of %lld\n",
                static_cast<long long>(sum.first_step - 1), static_cast<long long>(sum.last_step));
  return 0;
}

/// --check: the GPU against the CPU reference on the run's first step.
int runCheck(const Options &o, const tc_artifact_t *artifact, int gpu) {
  if (gpu < 0)
    return fail(kExitUsage, "--check compares the GPU with the CPU reference: it needs a GPU "
                            "and an artifact compiled for one (--device cuda)");
  tc_train_options_t c = o.train;
  std::vector<tc_feed_t> feeds;
  for (const auto &[name, file] : o.feeds)
    feeds.push_back({name.c_str(), file.c_str()});
  c.feeds = feeds.data();
  c.num_feeds = feeds.size();
  c.steps = 1;
  c.log_every = 0;
  c.device = TC_DEVICE_CUDA;
  c.device_ordinal = gpu;
  c.cuda = cudaOptionsFromEnv();
  tc_check_options_t k;
  tc_check_options_initialize(&k);
  k.function = o.function.empty() ? nullptr : o.function.c_str();
  k.tolerance = o.checkTolerance;
  Printer printer(::isatty(2));
  tc_run_observer_t obs = printer.observer();
  char *report = nullptr;
  int64_t beyond = 0;
  tc_status_t *st = tc_run_check(artifact, &c, &k, &obs, &report, &beyond);
  printer.clearBar();
  if (st) {
    Failure f = take(st);
    return fail(f.input ? kExitUsage : kExitRuntime, f.message);
  }
  std::fputs(own(report).c_str(), stdout);
  return beyond == 0 ? 0 : kExitRuntime;
}

/// --export-onnx / --export-safetensors.
int runExport(const Options &o, const tc_artifact_t *artifact) {
  tc_export_options_t e;
  tc_export_options_initialize(&e);
  e.onnx = given(o.exportOnnx.c_str());
  e.safetensors = given(o.exportSafetensors.c_str());
  e.precision = o.exportPrecision.c_str();
  e.init = o.train.init;
  if (o.train.seed >= 0)
    e.seed = o.train.seed;
  if (tc_status_t *st = tc_run_export(artifact, &e)) {
    Failure f = take(st);
    return fail(f.input ? kExitUsage : kExitRuntime, f.message);
  }
  for (const std::string &path : {o.exportOnnx, o.exportSafetensors})
    if (!path.empty())
      std::printf("exported %s (%s)\n", path.c_str(), o.exportPrecision.c_str());
  return 0;
}

/// --eval --data.
int runEvalData(const Options &o, const tc_artifact_t *artifact, int gpu) {
  tc_eval_options_t e;
  tc_eval_options_initialize(&e);
  e.data = o.train.data;
  e.data_dtype = o.train.data_dtype;
  e.labels = o.train.labels;
  e.init = o.train.init;
  if (o.train.eval_iters > 0)
    e.iters = o.train.eval_iters;
  e.ref_precision = o.refPrecision == "f64" ? TC_REF_PRECISION_F64 : TC_REF_PRECISION_F32;
  e.device = gpu >= 0 ? TC_DEVICE_CUDA : TC_DEVICE_CPU;
  e.device_ordinal = gpu >= 0 ? gpu : 0;
  e.cuda = cudaOptionsFromEnv();
  if (o.train.seed >= 0)
    e.seed = o.train.seed;
  Printer printer(false);
  tc_run_observer_t obs = printer.observer();
  tc_eval_result_t r;
  if (tc_status_t *st = tc_run_eval(artifact, &e, &obs, &r)) {
    Failure f = take(st);
    return fail(f.input ? kExitUsage : kExitRuntime, f.message);
  }
  std::printf("eval loss %.6g over %lld batches (%lld tokens)%s\n", r.loss,
              static_cast<long long>(r.batches), static_cast<long long>(r.tokens),
              r.step >= 0 ? (" of the checkpoint at step " + std::to_string(r.step)).c_str() : "");
  if (o.train.metrics) {
    char *json = nullptr;
    tc_status_release(tc_metrics_eval_loss_json(r.step, r.loss, r.tokens, &json));
    return appendMetrics(o.train.metrics, own(json));
  }
  return 0;
}

/// --eval with --feed: one function on the given inputs.
int runEvalFeeds(const Options &o, tc_artifact_t *artifact, int gpu) {
  int64_t ckptStep = -1;
  if (o.train.init)
    if (tc_status_t *st = tc_artifact_load_weights(artifact, o.train.init, &ckptStep))
      return fail(kExitUsage, take(st).message);

  std::string fnName = o.function;
  if (fnName.empty())
    fnName = tc_artifact_has_function(artifact, "eval_step") ? "eval_step" : "infer";
  if (!tc_artifact_has_function(artifact, fnName.c_str())) {
    std::string names;
    for (size_t i = 0; i < tc_artifact_function_count(artifact); ++i)
      names += (names.empty() ? "" : ", ") + std::string(tc_artifact_function_name(artifact, i));
    return fail(kExitUsage, "artifact '" + o.model + "' has no function '" + fnName +
                                "' (it has: " + (names.empty() ? "none" : names) + ")");
  }
  const char *fn = fnName.c_str();

  // Feeds, matched to the inputs by name.
  size_t count = 0;
  tc_status_release(tc_artifact_input_count(artifact, fn, &count));
  std::vector<const char *> inputNames(count);
  for (size_t i = 0; i < count; ++i)
    tc_status_release(
        tc_artifact_input_info(artifact, fn, i, &inputNames[i], nullptr, nullptr, nullptr));
  std::map<std::string, std::string> feedFiles;
  for (const auto &[name, file] : o.feeds)
    if (!feedFiles.emplace(name, file).second)
      return fail(kExitUsage, "--feed '" + name + "' is given twice");
  for (const auto &[name, file] : feedFiles) {
    bool known = false;
    for (const char *in : inputNames)
      known |= in == name;
    if (!known) {
      std::string names;
      for (const char *in : inputNames)
        names += (names.empty() ? "" : ", ") + std::string(in);
      return fail(kExitUsage, "--feed '" + name + "': function '" + fnName +
                                  "' has no input '" + name + "' (inputs: " +
                                  (names.empty() ? "none" : names) + ")");
    }
  }
  std::vector<Tensor> inputs;
  std::vector<tc_tensor_view_t> views(count);
  for (size_t i = 0; i < count; ++i) {
    const std::string name = inputNames[i];
    auto it = feedFiles.find(name);
    if (it == feedFiles.end()) {
      tc_dtype_t dtype;
      size_t rank = 0;
      const int64_t *shape = nullptr;
      tc_status_release(tc_artifact_input_info(artifact, fn, i, nullptr, &dtype, &rank, &shape));
      return fail(kExitUsage, "missing --feed for input '" + name + "' (" +
                                  typeText(dtype, rank, shape) + ")");
    }
    tc_tensor_t *t = nullptr;
    if (tc_status_t *st = tc_npy_read(it->second.c_str(), name.c_str(), &t))
      return fail(kExitUsage, "--feed '" + name + "': " + take(st).message);
    inputs.emplace_back(t);
    tc_tensor_as_view(t, &views[i]);
  }
  if (tc_status_t *st = tc_artifact_check_inputs(artifact, fn, views.data(), views.size()))
    return fail(kExitUsage, take(st).message);

  if (gpu >= 0 && o.device == "auto" && !tc_artifact_has_device_function(artifact, fn))
    gpu = -1; // the GPU program has no such function: the CPU reference runs it
  tc_session_options_t so;
  tc_session_options_initialize(&so);
  so.device = gpu >= 0 ? TC_DEVICE_CUDA : TC_DEVICE_CPU;
  so.device_ordinal = gpu >= 0 ? gpu : 0;
  so.ref_precision = o.refPrecision == "f64" ? TC_REF_PRECISION_F64 : TC_REF_PRECISION_F32;
  so.init_seed = o.train.seed >= 0 ? static_cast<uint64_t>(o.train.seed) : 1337;
  so.cuda = cudaOptionsFromEnv();
  // A failure on the GPU that is the input's (a kernel for another card)
  // exits 2; everything else the run's.
  auto runFailure = [&](tc_status_t *st) {
    Failure f = take(st);
    return fail(gpu >= 0 && f.code == TC_STATUS_INVALID_ARGUMENT ? kExitUsage : kExitRuntime,
                f.message);
  };
  tc_session_t *session = nullptr;
  if (tc_status_t *st = tc_session_create_from_artifact(artifact, &so, &session))
    return runFailure(st);
  std::unique_ptr<tc_session_t, void (*)(tc_session_t *)> owned(session, tc_session_release);
  if (gpu >= 0 && !tc_artifact_has_device_function(artifact, fn))
    return fail(kExitRuntime,
                "the artifact's GPU program has no function '" + fnName + "' (use --device cpu)");
  size_t numOutputs = 0;
  tc_status_release(tc_session_output_count(session, fn, &numOutputs));
  std::vector<tc_tensor_t *> raw(numOutputs, nullptr);
  if (tc_status_t *st =
          tc_session_run(session, fn, views.data(), views.size(), raw.data(), raw.size()))
    return runFailure(st);
  std::vector<Tensor> outputs;
  for (tc_tensor_t *t : raw)
    outputs.emplace_back(t);

  for (tc_tensor_t *t : raw)
    printOutput(tc_tensor_name(t), t);

  if (o.train.metrics) {
    char *json = nullptr;
    tc_status_release(tc_metrics_eval_outputs_json(ckptStep, fn, raw.data(), raw.size(), &json));
    if (int rc = appendMetrics(o.train.metrics, own(json)))
      return rc;
  }
  if (!o.saveDir.empty())
    if (tc_status_t *st = tc_npy_write_dir(o.saveDir.c_str(), raw.data(), raw.size()))
      return fail(kExitRuntime, take(st).message);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  std::string err = parseArgs(argc, argv, &o);
  if (!err.empty())
    return fail(kExitUsage, err);
  if (o.version) {
    std::printf("tc-run (tc) %s\n", tc_version());
    return 0;
  }
  if (o.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  tc_artifact_t *artifact = nullptr;
  if (tc_status_t *st = tc_artifact_open(o.model.c_str(), &artifact))
    return fail(kExitUsage, take(st).message);
  std::unique_ptr<tc_artifact_t, void (*)(tc_artifact_t *)> owned(artifact, tc_artifact_release);
  if (!o.exportPrecision.empty())
    return runExport(o, artifact);
  int gpu = -1;
  std::string note;
  std::string derr = resolveDevice(o, artifact, &gpu, &note);
  if (!derr.empty())
    return fail(kExitUsage, derr);
  if (!note.empty())
    std::fprintf(stderr, "tc-run: note: %s\n", note.c_str());
  if (o.generate)
    return runGenerate(o, artifact);
  if (o.check)
    return runCheck(o, artifact, gpu);
  if (!o.eval && (o.train.steps >= 0 || o.train.resume))
    return runTraining(o, artifact, gpu);
  if (o.train.data) {
    if (!o.feeds.empty())
      return fail(kExitUsage, "give either --data or --feed, not both");
    return runEvalData(o, artifact, gpu);
  }
  if (o.train.eval_iters >= 0 || o.train.labels || o.train.data_dtype)
    return fail(kExitUsage, "--eval-iters, --labels and --dtype go with --eval --data");
  return runEvalFeeds(o, artifact, gpu);
}
