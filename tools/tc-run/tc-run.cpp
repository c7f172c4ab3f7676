//===- tc-run.cpp - run a compiled tc artifact ----------------------------===//
//
//   tc-run MODEL.tca [--device cpu|cuda] --eval [--function NAME]
//          --feed NAME=FILE.npy ... [--metrics out.jsonl]
//          [--ref-precision f32|f64] [--save-outputs DIR]
//   tc-run MODEL.tca --steps N (--feed NAME=FILE.npy ... | --data TOKENS.bin
//          [--batch B --seq T --dtype uint16|uint32 --seed S]) [--lr X]
//          [--warmup W] [--lr-schedule constant|cosine] [--metrics out.jsonl]
//          [--save DIR --save-every K] [--resume DIR] [--init W.safetensors]
//          [--ref-precision f32|f64] [--log-every K]
//
// Trains (with --steps): runs the artifact's training step (see
// runtime/src/session/trainer.h) from the checkpoint's step (or 0) up to
// step N, writing one JSON line per step to --metrics.
//
// Evaluates: runs "eval_step" if the artifact has it, else "infer" (or
// --function), prints every output, appends one JSON object per evaluation
// to --metrics with each scalar output by name, and writes the outputs as
// NAME.npy under --save-outputs. A thin main: the work is in the runtime.
//
// Exit codes: 0 success; 2 usage or input error (bad flag, missing or bad
// artifact, missing/extra/ill-typed feed); 1 run-time failure. Every error
// is one line on stderr starting with "tc-run: error: ".
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "runtime/src/base/artifact.h"
#include "runtime/src/base/host_tensor.h"
#include "runtime/src/base/json.h"
#include "runtime/src/base/npy.h"
#include "runtime/src/cpu/executor.h"
#include "runtime/src/session/trainer.h"
#include "tools/cli.h"
#if TC_HAVE_CUDA
#include "runtime/src/cuda/executor.h"
#endif

#include <chrono>
#include <unistd.h>

using namespace tc::rt;

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

constexpr const char *kUsage =
               "usage: tc-run MODEL.tca [--device auto|cpu|cuda[:N]] --eval [--function NAME]\n"
               "              --feed NAME=FILE.npy ... [--metrics OUT.jsonl]\n"
               "              [--ref-precision f32|f64] [--save-outputs DIR]\n"
               "       tc-run MODEL.tca --steps N (--feed NAME=FILE.npy ... | --data TOKENS.bin\n"
               "              [--batch B] [--seq T] [--dtype uint16|uint32] [--seed S]\n"
               "              [--labels next|same])\n"
               "              [--lr X] [--warmup W] [--lr-schedule constant|cosine]\n"
               "              [--metrics OUT.jsonl] [--save DIR] [--save-every K]\n"
               "              [--resume DIR] [--init WEIGHTS.safetensors]\n"
               "              [--ref-precision f32|f64] [--log-every K]\n"
               "\n"
               "Training: --steps is the total step count (a resumed run continues to it).\n"
               "--lr defaults to the value given to tc-compile; --warmup W ramps it\n"
               "linearly over steps 1..W; cosine then decays it to 0.1*lr at step N\n"
               "(nanoGPT's schedule). --data reads a flat token file (nanoGPT/llm.c\n"
               ".bin, no header): random windows; --labels next feeds labels =\n"
               "input_ids shifted by one (nanoGPT, llm.c), --labels same labels =\n"
               "input_ids for a model that shifts them itself (HuggingFace\n"
               "*ForCausalLM(labels=...)); the default is what tc-compile found in the\n"
               "model's loss (recorded in the artifact), next when it found nothing.\n"
               "--save writes DIR/model.safetensors (the model's own names),\n"
               "DIR/optimizer.safetensors and DIR/state.json (step, RNG, data position,\n"
               "artifact hash) every K steps and at the end, atomically.\n"
               "--seed S (default 1337) also seeds the parameter initialisers of a model\n"
               "compiled with tc-compile --init-params (--init FILE replaces them).\n"
               "--device auto (the default) runs on the GPU when the artifact has a GPU\n"
               "program (tc-compile --target sm_90|sm_120) and a CUDA GPU is present,\n"
               "else on the CPU reference; cuda[:N] insists on GPU N.\n"
    "-h/--help prints this text, --version tc's version.\n";

void usage(std::FILE *out) { std::fputs(kUsage, out); }

struct Options {
  std::string model;
  std::string device = "auto";
  std::string function;
  std::vector<std::pair<std::string, std::string>> feeds; // name, file
  std::string metrics;
  std::string refPrecision = "f32";
  std::string saveDir;
  bool help = false;
  bool version = false;
  bool eval = false;
  // Training.
  int64_t steps = -1;
  std::string data, dataDtype = "uint16";
  std::string labels; // --labels next|same ("" = the artifact's convention)
  int64_t batch = -1, seq = -1, warmup = 0, saveEvery = 0, logEvery = 10;
  uint64_t seed = 1337;
  double lr = -1;
  std::string schedule = "constant";
  std::string save, resume, init;
};

/// A non-negative integer flag value.
std::string parseInt(const std::string &flag, const std::string &v, int64_t lo, int64_t *out) {
  char *end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || x < lo)
    return flag + " wants a whole number >= " + std::to_string(lo) + ", got '" + v + "'";
  *out = x;
  return "";
}

/// Parses argv; returns an error message or "".
std::string parseArgs(int argc, char **argv, Options *o) {
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.size() < 2 || arg.compare(0, 2, "--") != 0) {
      positional.push_back(arg);
      continue;
    }
    std::string flag = arg, value;
    bool hasValue = false;
    size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      hasValue = true;
    }
    auto takeValue = [&](std::string *dst) -> std::string {
      if (!hasValue) {
        if (i + 1 >= argc)
          return "flag " + flag + " needs a value";
        value = argv[++i];
      }
      *dst = value;
      return "";
    };
    std::string err;
    if (flag == "--help" || flag == "-h") {
      o->help = true;
    } else if (flag == "--version") {
      o->version = true;
    } else if (flag == "--eval") {
      if (hasValue)
        return "flag --eval takes no value";
      o->eval = true;
    } else if (flag == "--device") {
      err = takeValue(&o->device);
      if (err.empty() && o->device != "cpu" && o->device != "auto" && o->device != "cuda" &&
          !(o->device.compare(0, 5, "cuda:") == 0 && o->device.size() > 5 &&
            o->device.find_first_not_of("0123456789", 5) == std::string::npos))
        return "--device must be auto, cpu, cuda or cuda:N, got '" + o->device + "'";
    } else if (flag == "--function") {
      err = takeValue(&o->function);
    } else if (flag == "--feed") {
      std::string feed;
      err = takeValue(&feed);
      if (err.empty()) {
        size_t e = feed.find('=');
        if (e == std::string::npos || e == 0 || e + 1 == feed.size())
          return "--feed expects NAME=FILE.npy, got '" + feed + "'";
        o->feeds.push_back({feed.substr(0, e), feed.substr(e + 1)});
      }
    } else if (flag == "--metrics") {
      err = takeValue(&o->metrics);
    } else if (flag == "--ref-precision") {
      err = takeValue(&o->refPrecision);
      if (err.empty() && o->refPrecision != "f32" && o->refPrecision != "f64")
        return "--ref-precision must be f32 or f64, got '" + o->refPrecision + "'";
    } else if (flag == "--save-outputs") {
      err = takeValue(&o->saveDir);
    } else if (flag == "--steps" || flag == "--batch" || flag == "--seq" ||
               flag == "--warmup" || flag == "--save-every" || flag == "--log-every" ||
               flag == "--seed") {
      std::string v;
      err = takeValue(&v);
      int64_t x = 0;
      int64_t lo = (flag == "--batch" || flag == "--seq" || flag == "--save-every") ? 1 : 0;
      if (err.empty())
        err = parseInt(flag, v, lo, &x);
      if (err.empty()) {
        if (flag == "--steps") o->steps = x;
        else if (flag == "--batch") o->batch = x;
        else if (flag == "--seq") o->seq = x;
        else if (flag == "--warmup") o->warmup = x;
        else if (flag == "--save-every") o->saveEvery = x;
        else if (flag == "--log-every") o->logEvery = x;
        else o->seed = static_cast<uint64_t>(x);
      }
    } else if (flag == "--lr") {
      std::string v;
      err = takeValue(&v);
      char *end = nullptr;
      if (err.empty()) {
        o->lr = std::strtod(v.c_str(), &end);
        if (v.empty() || *end != '\0' || !std::isfinite(o->lr) || o->lr < 0)
          return "--lr wants a number >= 0, got '" + v + "'";
      }
    } else if (flag == "--lr-schedule") {
      err = takeValue(&o->schedule);
      if (err.empty() && o->schedule != "constant" && o->schedule != "cosine")
        return "--lr-schedule must be constant or cosine, got '" + o->schedule + "'";
    } else if (flag == "--data") {
      err = takeValue(&o->data);
    } else if (flag == "--labels") {
      err = takeValue(&o->labels);
      if (err.empty() && o->labels != "next" && o->labels != "same")
        return "--labels must be next or same, got '" + o->labels + "'";
    } else if (flag == "--dtype") {
      err = takeValue(&o->dataDtype);
      if (err.empty() && o->dataDtype != "uint16" && o->dataDtype != "uint32")
        return "--dtype must be uint16 or uint32, got '" + o->dataDtype + "'";
    } else if (flag == "--save") {
      err = takeValue(&o->save);
    } else if (flag == "--resume") {
      err = takeValue(&o->resume);
    } else if (flag == "--init") {
      err = takeValue(&o->init);
    } else {
      return tc::cli::unknownOption(flag, kUsage);
    }
    if (!err.empty())
      return err;
  }
  if (o->help || o->version)
    return "";
  if (positional.empty())
    return "no artifact given (usage: tc-run MODEL.tca --eval --feed NAME=FILE.npy ...)";
  if (positional.size() > 1)
    return "unexpected argument '" + positional[1] + "' (only one artifact is allowed)";
  o->model = positional[0];
  return "";
}

std::string formatValue(const HostTensor &t, double v) {
  char buf[64];
  if (dtypeIsFloat(t.type.dtype))
    std::snprintf(buf, sizeof buf, "%.6g", v);
  else
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  return buf;
}

void printOutput(const std::string &name, const HostTensor &t) {
  std::vector<double> v = hostTensorToDoubles(t);
  std::string line = name + ": " + typeToString(t.type);
  if (t.type.shape.empty() && v.size() == 1) {
    line += " = " + formatValue(t, v[0]);
  } else {
    line += " [";
    size_t shown = std::min<size_t>(v.size(), 6);
    for (size_t i = 0; i < shown; ++i)
      line += (i ? ", " : "") + formatValue(t, v[i]);
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

std::string jsonNumber(const HostTensor &t, double v) {
  if (!std::isfinite(v))
    return "null";
  char buf[64];
  if (dtypeIsFloat(t.type.dtype))
    std::snprintf(buf, sizeof buf, "%.9g", v);
  else
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  return buf;
}

/// mkdir -p.
bool makeDirs(const std::string &dir) {
  std::string path;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    path = dir.substr(0, pos);
    if (path.empty())
      continue;
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
      return false;
  }
  struct stat st;
  return ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

/// The shortest decimal that reads back as exactly `v`.
std::string exactNumber(double v) {
  char buf[40];
  for (int digits = 15; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  return buf;
}

/// Where to run: *gpu = -1 for the CPU reference, else the GPU ordinal.
/// Returns an error message or "".
std::string resolveDevice(const Options &o, const Artifact &artifact, int *gpu) {
  *gpu = -1;
  if (o.device == "cpu")
    return "";
  bool explicitGpu = o.device != "auto";
  int ordinal = explicitGpu && o.device.size() > 5 ? std::atoi(o.device.c_str() + 5) : 0;
  if (artifact.deviceFunctions.empty()) {
    if (!explicitGpu)
      return "";
    return "artifact '" + o.model + "' was compiled for '" + artifact.target +
           "' and has no GPU program: compile it with tc-compile --target sm_90 (or sm_120)";
  }
  if (o.refPrecision == "f64") {
    if (explicitGpu)
      return "--ref-precision f64 is a CPU reference mode; it does not go with --device cuda";
    return "";
  }
#if TC_HAVE_CUDA
  Status st = cuda::requireGpu();
  if (!st.isOk())
    return explicitGpu ? st.message() : "";
  *gpu = ordinal;
  return "";
#else
  if (explicitGpu)
    return "this tc-run was built without the CUDA backend (configure with -DTC_ENABLE_CUDA=ON)";
  return "";
#endif
}

/// Everything --steps does. Returns the exit code.
int runTraining(const Options &o, const Artifact &artifact) {
  if (o.steps < 0)
    return fail(kExitUsage, "training needs --steps N");
  if (!o.data.empty() && !o.feeds.empty())
    return fail(kExitUsage, "give either --data or --feed, not both");
  if (o.data.empty() && (o.batch > 0 || o.seq > 0))
    return fail(kExitUsage, "--batch and --seq go with --data");
  if (o.data.empty() && !o.labels.empty())
    return fail(kExitUsage, "--labels goes with --data (--feed gives the labels themselves)");
  if (o.saveEvery > 0 && o.save.empty())
    return fail(kExitUsage, "--save-every needs --save DIR");
  if (!o.resume.empty() && !o.init.empty())
    return fail(kExitUsage, "give either --resume or --init, not both");

  ExecOptions exec;
  exec.precision = o.refPrecision == "f64" ? RefPrecision::F64 : RefPrecision::F32;
  exec.initSeed = o.seed; // parameter initialisers (tc-compile --init-params)
  int gpu = -1;
  std::string derr = resolveDevice(o, artifact, &gpu);
  if (!derr.empty())
    return fail(kExitUsage, derr);
  Trainer trainer;
  Status st = trainer.init(&artifact, exec, /*hostValues=*/gpu < 0);
  if (!st.isOk())
    return fail(kExitUsage, st.message());
  if (gpu >= 0) {
    st = trainer.useDevice(gpu);
    if (!st.isOk()) // the artifact or the device named does not fit this machine: an input error
      return fail(st.code() == StatusCode::InvalidArgument ? kExitUsage : kExitRuntime,
                  st.message());
    DeviceMemoryReport m = trainer.deviceMemory();
    std::printf("device: %s\n", m.device.c_str());
    std::printf("device memory: parameters+state %llu, constants %llu, inputs %llu, "
                "workspace %llu, arena %llu, total %llu bytes; cudaMemGetInfo saw %lld\n",
                (unsigned long long)m.parameters, (unsigned long long)m.constants,
                (unsigned long long)m.inputs, (unsigned long long)m.workspace,
                (unsigned long long)m.arena, (unsigned long long)m.total, (long long)m.measured);
  } else {
    std::printf("device: cpu (reference executor)\n");
  }
  std::fflush(stdout);
  std::string hash;
  st = artifactHash(o.model, &hash);
  if (!st.isOk())
    return fail(kExitUsage, st.message());
  const TrainConfig &cfg = trainer.config();
  const std::vector<std::string> &names = trainer.dataInputNames();
  const std::vector<TensorType> &types = trainer.dataInputTypes();

  // The batch: fixed feeds or windows of a token file.
  std::vector<HostTensor> fixed(names.size());
  TokenData data;
  Rng rng;
  rng.state = o.seed * 0x9e3779b97f4a7c15ULL + 1;
  int idsIndex = -1, labelsIndex = -1;
  LabelShift labelShift = LabelShift::Next;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == "input_ids")
      idsIndex = static_cast<int>(i);
    if (names[i] == "labels")
      labelsIndex = static_cast<int>(i);
  }
  if (!o.data.empty()) {
    if (names.size() != 2 || idsIndex < 0 || labelsIndex < 0)
      return fail(kExitUsage, "--data needs a model whose inputs are input_ids and labels");
    const TensorType &t = types[idsIndex];
    if (t.shape.size() != 2 || types[labelsIndex] != t || !dtypeIsInteger(t.dtype))
      return fail(kExitUsage, "--data needs integer input_ids and labels of shape [batch, seq] "
                              "(the model has " + typeToString(t) + ")");
    if ((o.batch > 0 && o.batch != t.shape[0]) || (o.seq > 0 && o.seq != t.shape[1]))
      return fail(kExitUsage, "--batch/--seq " + std::to_string(o.batch) + "x" +
                                  std::to_string(o.seq) + " do not match the compiled input " +
                                  shapeToString(t.shape) + " (recompile with --input)");
    st = data.open(o.data, o.dataDtype == "uint32" ? 4 : 2);
    if (!st.isOk())
      return fail(kExitUsage, st.message());
    std::string message, note;
    st = chooseLabels(artifact, o.labels, &labelShift, &message, &note);
    if (!st.isOk())
      return fail(kExitUsage, st.message());
    if (!note.empty())
      std::fprintf(stderr, "tc-run: note: %s\n", note.c_str());
    std::printf("%s\n", message.c_str());
    if (data.numTokens() < t.shape[1] + 1)
      return fail(kExitUsage, "token file '" + o.data + "' has " +
                                  std::to_string(data.numTokens()) + " tokens, fewer than seq+1");
  } else {
    std::map<std::string, std::string> feedFiles;
    for (const auto &[name, file] : o.feeds)
      if (!feedFiles.emplace(name, file).second)
        return fail(kExitUsage, "--feed '" + name + "' is given twice");
    for (const auto &kv : feedFiles)
      if (std::find(names.begin(), names.end(), kv.first) == names.end())
        return fail(kExitUsage, "--feed '" + kv.first + "': the training step has no input '" +
                                    kv.first + "'");
    for (size_t i = 0; i < names.size(); ++i) {
      auto it = feedFiles.find(names[i]);
      if (it == feedFiles.end())
        return fail(kExitUsage, "missing --feed for input '" + names[i] + "' (" +
                                    typeToString(types[i]) + "), or use --data");
      st = readNpy(it->second, &fixed[i]);
      if (!st.isOk())
        return fail(kExitUsage, "--feed '" + names[i] + "': " + st.message());
      if (fixed[i].type != types[i])
        return fail(kExitUsage, "--feed '" + names[i] + "': expected " + typeToString(types[i]) +
                                    ", got " + typeToString(fixed[i].type));
    }
    st = checkInputRanges(artifact, names, fixed);
    if (!st.isOk())
      return fail(kExitUsage, st.message());
  }
  int64_t tokensPerMicro = 0;
  {
    int k = idsIndex >= 0 ? idsIndex : 0;
    tokensPerMicro = names.empty() ? 0 : types[k].numElements();
  }

  int64_t start = 0;
  if (!o.init.empty()) {
    st = trainer.loadWeights(o.init);
    if (!st.isOk())
      return fail(kExitUsage, st.message());
  }
  if (!o.resume.empty()) {
    CheckpointMeta meta;
    st = trainer.loadCheckpoint(o.resume, hash, &meta);
    if (!st.isOk())
      return fail(kExitUsage, st.message());
    start = meta.step;
    rng.state = meta.rngState;
    data.position = meta.dataPosition;
    if (start > o.steps)
      return fail(kExitUsage, "checkpoint '" + o.resume + "' is at step " +
                                  std::to_string(start) + ", beyond --steps " +
                                  std::to_string(o.steps));
  }
  double baseLr = o.lr >= 0 ? o.lr : cfg.lr;

  std::FILE *metrics = nullptr;
  if (!o.metrics.empty()) {
    metrics = std::fopen(o.metrics.c_str(), o.resume.empty() ? "w" : "a");
    if (!metrics)
      return fail(kExitRuntime, "cannot open metrics file '" + o.metrics + "': " +
                                    std::strerror(errno));
  }
  auto save = [&](int64_t step) -> int {
    CheckpointMeta meta;
    meta.step = step;
    meta.rngState = rng.state;
    meta.dataPosition = data.position;
    meta.artifactHash = hash;
    meta.precision = o.refPrecision;
    Status s2 = trainer.saveCheckpoint(o.save, meta);
    if (!s2.isOk())
      return fail(kExitRuntime, "saving checkpoint '" + o.save + "': " + s2.message());
    return 0;
  };

  bool tty = ::isatty(2);
  auto clock = std::chrono::steady_clock::now;
  auto t0 = clock();
  double firstLoss = NAN, lastLoss = NAN;
  int64_t savedAt = -1;
  for (int64_t step = start + 1; step <= o.steps; ++step) {
    double lr = learningRate(step, o.steps, baseLr, o.warmup, o.schedule);
    std::vector<std::vector<HostTensor>> micro(cfg.gradAccum);
    for (auto &mb : micro) {
      if (o.data.empty()) {
        mb = fixed;
        continue;
      }
      mb.resize(2);
      st = data.nextBatch(types[idsIndex].shape[0], types[idsIndex].shape[1],
                          types[idsIndex].dtype, &rng, &mb[idsIndex], &mb[labelsIndex],
                          labelShift);
      if (!st.isOk())
        return fail(kExitRuntime, st.message());
      st = checkInputRanges(artifact, names, mb);
      if (!st.isOk()) // a token of the file the model cannot take: the user's input
        return fail(kExitUsage, "token file '" + o.data + "': " + st.message());
    }
    auto ts = clock();
    StepResult r;
    st = trainer.step(step, lr, micro, &r);
    if (!st.isOk())
      return fail(kExitRuntime, "step " + std::to_string(step) + ": " + st.message());
    double dt = std::chrono::duration<double>(clock() - ts).count();
    double tokPerS = dt > 0 ? static_cast<double>(tokensPerMicro * cfg.gradAccum) / dt : 0;
    if (!std::isfinite(r.loss)) {
      if (tty)
        std::fputc('\n', stderr);
      return fail(kExitRuntime, std::string("loss is ") + (std::isnan(r.loss) ? "nan" : "inf") +
                                    " at step " + std::to_string(step));
    }
    if (std::isnan(firstLoss))
      firstLoss = r.loss;
    lastLoss = r.loss;
    if (metrics) {
      char tail[128];
      std::snprintf(tail, sizeof tail, ", \"tokens\": %lld, \"tokens_per_s\": %.1f, "
                    "\"step_time_s\": %.4f}\n",
                    static_cast<long long>(tokensPerMicro * cfg.gradAccum), tokPerS, dt);
      std::string line = "{\"step\": " + std::to_string(step) + ", \"loss\": " +
                         exactNumber(r.loss) + ", \"lr\": " + exactNumber(lr) +
                         ", \"grad_norm\": " +
                         (std::isfinite(r.gradNorm) ? exactNumber(r.gradNorm) : "null") + tail;
      if (std::fputs(line.c_str(), metrics) < 0 || std::fflush(metrics) != 0)
        return fail(kExitRuntime, "cannot write metrics file '" + o.metrics + "'");
    }
    if (tty) {
      int width = 30;
      int filled = static_cast<int>(width * step / std::max<int64_t>(o.steps, 1));
      std::string bar(filled, '#');
      bar += std::string(width - filled, '.');
      std::fprintf(stderr, "\r[%s] step %lld/%lld loss %.4f lr %.3g grad_norm %.3g %.0f tok/s ",
                   bar.c_str(), static_cast<long long>(step), static_cast<long long>(o.steps),
                   r.loss, lr, r.gradNorm, tokPerS);
      if (step == o.steps)
        std::fputc('\n', stderr);
    } else if (o.logEvery > 0 && (step % o.logEvery == 0 || step == start + 1 || step == o.steps)) {
      std::printf("step %lld/%lld loss %.4f lr %.3g grad_norm %.3g %.0f tok/s\n",
                  static_cast<long long>(step), static_cast<long long>(o.steps), r.loss, lr,
                  r.gradNorm, tokPerS);
      std::fflush(stdout);
    }
    if (!o.save.empty() && o.saveEvery > 0 && step % o.saveEvery == 0) {
      if (int rc = save(step))
        return rc;
      savedAt = step;
    }
  }
  if (metrics)
    std::fclose(metrics);
  if (!o.save.empty() && savedAt != o.steps)
    if (int rc = save(o.steps))
      return rc;
  double secs = std::chrono::duration<double>(clock() - t0).count();
  if (o.steps > start)
    std::printf("trained steps %lld..%lld in %.1f s: loss %.4f -> %.4f\n",
                static_cast<long long>(start + 1), static_cast<long long>(o.steps), secs,
                firstLoss, lastLoss);
  else
    std::printf("nothing to do: already at step %lld of %lld\n", static_cast<long long>(start),
                static_cast<long long>(o.steps));
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  std::string err = parseArgs(argc, argv, &o);
  if (!err.empty())
    return fail(kExitUsage, err);
  if (o.version) {
    std::printf("tc-run (tc) %s\n", tc::cli::kVersion);
    return 0;
  }
  if (o.help) {
    usage(stdout);
    return 0;
  }
  Artifact artifact;
  Status st = readArtifact(o.model, &artifact);
  if (!st.isOk())
    return fail(kExitUsage, st.message());
  bool training = o.steps >= 0 || !o.data.empty() || !o.save.empty() || !o.resume.empty() ||
                  !o.init.empty();
  if (training && o.eval)
    return fail(kExitUsage, "--eval does not go with the training flags");
  if (training)
    return runTraining(o, artifact);

  std::string fnName = o.function;
  if (fnName.empty())
    fnName = artifact.findFunction("eval_step") ? "eval_step" : "infer";
  const Function *fn = artifact.findFunction(fnName);
  if (!fn) {
    std::string names;
    for (const Function &f : artifact.functions)
      names += (names.empty() ? "" : ", ") + f.name;
    return fail(kExitUsage, "artifact '" + o.model + "' has no function '" + fnName +
                                "' (it has: " + (names.empty() ? "none" : names) + ")");
  }

  // Feeds, matched to the inputs by name.
  std::map<std::string, std::string> feedFiles;
  for (const auto &[name, file] : o.feeds)
    if (!feedFiles.emplace(name, file).second)
      return fail(kExitUsage, "--feed '" + name + "' is given twice");
  for (const auto &[name, file] : feedFiles) {
    bool known = false;
    for (const std::string &in : fn->inputNames)
      known |= in == name;
    if (!known) {
      std::string names;
      for (const std::string &in : fn->inputNames)
        names += (names.empty() ? "" : ", ") + in;
      return fail(kExitUsage, "--feed '" + name + "': function '" + fn->name +
                                  "' has no input '" + name + "' (inputs: " +
                                  (names.empty() ? "none" : names) + ")");
    }
  }
  std::vector<HostTensor> inputs(fn->inputs.size());
  for (size_t i = 0; i < fn->inputs.size(); ++i) {
    const std::string &name = fn->inputNames[i];
    auto it = feedFiles.find(name);
    if (it == feedFiles.end())
      return fail(kExitUsage, "missing --feed for input '" + name + "' (" +
                                  typeToString(fn->values[fn->inputs[i]]) + ")");
    st = readNpy(it->second, &inputs[i]);
    if (!st.isOk())
      return fail(kExitUsage, "--feed '" + name + "': " + st.message());
  }
  st = checkInputs(*fn, inputs);
  if (st.isOk())
    st = checkInputRanges(artifact, fn->inputNames, inputs);
  if (!st.isOk())
    return fail(kExitUsage, st.message());

  ExecOptions exec;
  exec.precision = o.refPrecision == "f64" ? RefPrecision::F64 : RefPrecision::F32;
  exec.initSeed = o.seed; // parameter initialisers (tc-compile --init-params)
  std::vector<HostTensor> outputs;
  int gpu = -1;
  std::string derr = resolveDevice(o, artifact, &gpu);
  if (!derr.empty())
    return fail(kExitUsage, derr);
  if (gpu >= 0 && o.device == "auto" && !artifact.findDeviceFunction(fn->name))
    gpu = -1; // the GPU program has no such function: the CPU reference runs it
#if TC_HAVE_CUDA
  if (gpu >= 0) {
    cuda::ExecutorOptions eo;
    eo.device = gpu;
    eo.seed = o.seed;
    std::unique_ptr<cuda::DeviceExecutor> ex;
    st = cuda::DeviceExecutor::create(&artifact, eo, &ex);
    if (st.isOk() && !ex->hasFunction(fn->name))
      st = notFound("the artifact's GPU program has no function '" + fn->name +
                    "' (use --device cpu)");
    if (st.isOk())
      st = ex->run(fn->name, inputs, &outputs);
    if (!st.isOk())
      return fail(st.code() == StatusCode::InvalidArgument ? kExitUsage : kExitRuntime,
                  st.message());
  } else
#endif
  {
    st = runFunction(artifact, *fn, inputs, &outputs, exec);
    if (!st.isOk())
      return fail(kExitRuntime, st.message());
  }

  for (size_t i = 0; i < outputs.size(); ++i)
    printOutput(fn->outputNames[i], outputs[i]);

  if (!o.metrics.empty()) {
    std::string line = "{\"mode\":\"eval\"";
    for (size_t i = 0; i < outputs.size(); ++i) {
      const HostTensor &t = outputs[i];
      if (!t.type.shape.empty())
        continue;
      line += "," + jsonQuote(fn->outputNames[i]) + ":" +
              jsonNumber(t, hostTensorToDoubles(t)[0]);
    }
    line += "}\n";
    std::FILE *f = std::fopen(o.metrics.c_str(), "a");
    if (!f || std::fputs(line.c_str(), f) < 0 || std::fclose(f) != 0)
      return fail(kExitRuntime, "cannot append to metrics file '" + o.metrics +
                                    "': " + std::strerror(errno));
  }

  if (!o.saveDir.empty()) {
    if (!makeDirs(o.saveDir))
      return fail(kExitRuntime, "cannot create folder '" + o.saveDir + "': " +
                                    std::strerror(errno));
    for (size_t i = 0; i < outputs.size(); ++i) {
      HostTensor t = outputs[i];
      // bf16/fp8/fp4 have no numpy dtype: widen to f32 (exact).
      if (!npyDescr(t.type.dtype))
        t = makeHostTensor({DType::F32, t.type.shape}, hostTensorToDoubles(t));
      std::string file = fn->outputNames[i];
      for (char &ch : file)
        if (ch == '/' || ch == '\\')
          ch = '_'; // output names are not paths
      std::string path = o.saveDir + "/" + file + ".npy";
      st = writeNpy(path, t);
      if (!st.isOk())
        return fail(kExitRuntime, st.message());
    }
  }
  return 0;
}
