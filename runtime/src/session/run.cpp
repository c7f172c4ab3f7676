//===- run.cpp - the run loop: train, evaluate, generate ------------------===//
#include "runtime/src/session/run.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/src/base/host_tensor.h"
#include "runtime/src/base/json.h"
#include "runtime/src/base/npy.h"
#include "runtime/src/base/safetensors.h"
#include "runtime/src/base/tensorboard.h"
#include "runtime/src/cpu/executor.h"
#include "runtime/src/session/backend.h"

namespace tc::rt {

namespace {

bool isDir(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string stripSlashes(std::string p) {
  while (p.size() > 1 && p.back() == '/')
    p.pop_back();
  return p;
}

/// The step-NNNNNNNN checkpoint folders in `dir`, by step.
std::vector<std::pair<int64_t, std::string>> stepFolders(const std::string &dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n.size() == 13 && n.compare(0, 5, "step-") == 0 &&
          n.find_first_not_of("0123456789", 5) == std::string::npos)
        out.push_back({std::stoll(n.substr(5)), dir + "/" + n});
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string stepFolderName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", static_cast<long long>(step));
  return buf;
}

/// Where the newest checkpoint of `dir` is: `dir` itself, or (a folder of
/// --keep-checkpoints) its highest step-N folder. "" when there is none.
std::string newestCheckpoint(const std::string &dir) {
  struct stat st;
  if (::stat((dir + "/state.json").c_str(), &st) == 0)
    return dir;
  auto steps = stepFolders(dir);
  for (auto it = steps.rbegin(); it != steps.rend(); ++it)
    if (::stat((it->second + "/state.json").c_str(), &st) == 0)
      return it->second;
  return "";
}

std::string newRunId() {
  Rng r;
  r.state = static_cast<uint64_t>(
                std::chrono::system_clock::now().time_since_epoch().count()) ^
            (static_cast<uint64_t>(::getpid()) << 32);
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(r.next()));
  return buf;
}

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

/// reports["flops"] (compiler/Flops.h): what MFU and HFU need.
struct FlopsReport {
  double modelFlopsPerToken = 0;  // 6N + 12 L T d
  double hardwareFlopsPerStep = 0; // the compiler's count of the step
  std::string dtype;
  std::vector<std::pair<std::string, double>> peaks; // device name part -> dense peak
};

bool readFlops(const Artifact &a, FlopsReport *out) {
  auto it = a.reports.find("flops");
  if (it == a.reports.end())
    return false;
  JsonValue v;
  if (!parseJson(it->second, &v, "flops").isOk() || !v.isObject())
    return false;
  const JsonValue *m = v.find("model_flops_per_token"), *h = v.find("hardware_flops_per_step"),
                  *dt = v.find("dtype"), *peaks = v.find("peaks");
  if (!m || !m->isNumber() || !h || !h->isNumber() || !peaks || !peaks->isArray())
    return false;
  out->modelFlopsPerToken = m->num;
  out->hardwareFlopsPerStep = h->num;
  out->dtype = dt && dt->isString() ? dt->str : "";
  for (const JsonValue &p : peaks->array) {
    const JsonValue *n = p.find("match"), *f = p.find("dense_flops");
    if (n && n->isString() && f && f->isNumber())
      out->peaks.push_back({n->str, f->num});
  }
  return true;
}

/// The dense peak of the device named `device` ("NVIDIA H200 (sm_90, ...)"),
/// 0 when the table does not know it.
double peakFor(const FlopsReport &f, const std::string &device) {
  for (const auto &[match, flops] : f.peaks)
    if (device.find(match) != std::string::npos)
      return flops;
  return 0;
}

/// Appends lines to the metrics file, one JSON object each, flushed.
class MetricsFile {
public:
  ~MetricsFile() {
    if (f_)
      std::fclose(f_);
  }
  Status open(const std::string &path, bool append) {
    path_ = path;
    f_ = std::fopen(path.c_str(), append ? "a" : "w");
    if (!f_)
      return ioError("cannot open metrics file '" + path + "': " + std::strerror(errno));
    return Status::ok();
  }
  Status write(const std::string &json) {
    if (!f_)
      return Status::ok();
    if (std::fputs(json.c_str(), f_) < 0 || std::fputc('\n', f_) == EOF || std::fflush(f_) != 0)
      return ioError("cannot write metrics file '" + path_ + "': " + std::strerror(errno));
    return Status::ok();
  }

private:
  std::FILE *f_ = nullptr;
  std::string path_;
};

std::string jsonOrNull(double v, bool known) { return known ? shortestDecimal(v) : "null"; }

/// The data inputs of a token-file model: input_ids and labels, [B, T], and
/// optionally attention_mask (fed all ones: token windows have no padding).
struct TokenInputs {
  int ids = -1, labels = -1, mask = -1;
  size_t count = 0;
  /// The batch of a window set: input_ids and labels from `data`, ones for
  /// the mask.
  Status fill(const TokenData &data, const std::vector<uint64_t> *offsets, TokenData *random,
              Rng *rng, const std::vector<TensorType> &types, LabelShift shift,
              std::vector<HostTensor> *batch) const {
    batch->assign(count, HostTensor());
    const TensorType &t = types[static_cast<size_t>(ids)];
    HostTensor *i = &(*batch)[static_cast<size_t>(ids)], *l = &(*batch)[static_cast<size_t>(labels)];
    if (offsets)
      TC_RETURN_IF_ERROR(data.batchAt(*offsets, t.shape[1], t.dtype, i, l, shift));
    else
      TC_RETURN_IF_ERROR(random->nextBatch(t.shape[0], t.shape[1], t.dtype, rng, i, l, shift));
    if (mask >= 0) {
      const TensorType &m = types[static_cast<size_t>(mask)];
      (*batch)[static_cast<size_t>(mask)] =
          makeHostTensorInts(m, std::vector<int64_t>(static_cast<size_t>(m.numElements()), 1));
    }
    return Status::ok();
  }
};

Status tokenInputs(const std::vector<std::string> &names, const std::vector<TensorType> &types,
                   TokenInputs *out) {
  *out = TokenInputs();
  out->count = names.size();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == "input_ids")
      out->ids = static_cast<int>(i);
    if (names[i] == "labels")
      out->labels = static_cast<int>(i);
    if (names[i] == "attention_mask")
      out->mask = static_cast<int>(i);
  }
  if (out->ids < 0 || out->labels < 0 || names.size() != 2u + (out->mask >= 0)) {
    std::string s;
    for (const std::string &n : names)
      s += (s.empty() ? "" : ", ") + n;
    return invalidArgument("--data needs a model whose inputs are input_ids, labels and "
                           "optionally attention_mask (it has: " + s + ")");
  }
  const TensorType &t = types[static_cast<size_t>(out->ids)];
  if (t.shape.size() != 2 || types[static_cast<size_t>(out->labels)] != t ||
      !dtypeIsInteger(t.dtype))
    return invalidArgument("--data needs integer input_ids and labels of shape [batch, seq] "
                           "(the model has " + typeToString(t) + ")");
  if (out->mask >= 0 && types[static_cast<size_t>(out->mask)].shape != t.shape)
    return invalidArgument("--data needs attention_mask of input_ids' shape " +
                           shapeToString(t.shape) + " (the model has " +
                           typeToString(types[static_cast<size_t>(out->mask)]) + ")");
  return Status::ok();
}

/// One flag against the resumed run's value.
template <typename T>
Status keep(const char *flag, bool given, const T &want, const T &had, const std::string &show,
            const std::string &shown, const std::string &dir) {
  if (given && !(want == had))
    return invalidArgument(std::string(flag) + " " + show + " conflicts with the run in '" + dir +
                           "', which was started with " + flag + " " + shown +
                           ": a resumed run keeps its configuration (start a new run from its "
                           "weights with --init " + dir + "/model.safetensors to change it)");
  return Status::ok();
}

} // namespace

Status loadArtifactWeights(Artifact *artifact, const std::string &weights, int64_t *step) {
  *step = -1;
  std::string file = weights;
  if (isDir(weights)) {
    std::string dir = newestCheckpoint(stripSlashes(weights));
    if (dir.empty())
      return notFound("'" + weights + "' holds no checkpoint (no state.json)");
    CheckpointMeta meta;
    TC_RETURN_IF_ERROR(readCheckpointMeta(dir, &meta));
    *step = meta.step;
    file = dir + "/model.safetensors";
  }
  SafetensorsFile f;
  TC_RETURN_IF_ERROR(readSafetensors(file, &f));
  std::set<std::string> wanted;
  TC_RETURN_IF_ERROR(matchEntries(*artifact, f.tensors, false, "'" + file + "'", &wanted,
                                  notInStateDict(*artifact)));
  // New weights: the replaced entries' bytes, the others' as they were.
  std::vector<uint8_t> blob;
  std::vector<Parameter> params = artifact->params;
  for (Parameter &p : params) {
    std::vector<uint8_t> bytes;
    auto it = f.tensors.find(p.name);
    if (p.kind != ParamKind::OptimizerState && it != f.tensors.end()) {
      HostTensor t = it->second;
      if (t.type.dtype != p.type.dtype)
        t = makeHostTensor(p.type, hostTensorToDoubles(t));
      bytes = std::move(t.data);
      p.init = ParamInit::Data;
      p.hasData = true;
    } else if (p.hasData) {
      bytes.assign(artifact->weights.begin() + static_cast<std::ptrdiff_t>(p.offset),
                   artifact->weights.begin() + static_cast<std::ptrdiff_t>(p.offset + p.bytes));
    }
    if (!p.hasData)
      continue;
    blob.resize((blob.size() + 63) / 64 * 64);
    p.offset = blob.size();
    p.bytes = bytes.size();
    blob.insert(blob.end(), bytes.begin(), bytes.end());
  }
  artifact->params = std::move(params);
  artifact->weights = std::move(blob);
  return validateArtifact(*artifact);
}

namespace {
std::string wallJsonPrefix(const char *kind) {
  return std::string("{\"schema\": \"") + kMetricsSchema + "\", \"kind\": \"" + kind + "\"";
}
double wall() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}
} // namespace

std::string trainMetricsJson(const StepRecord &r) {
  return wallJsonPrefix("train") + ", \"step\": " + std::to_string(r.step) +
         ", \"loss\": " + shortestDecimal(r.loss) + ", \"loss_smooth\": " +
         shortestDecimal(r.lossSmooth) + ", \"lr\": " + shortestDecimal(r.lr) +
         ", \"grad_norm\": " + shortestDecimal(r.gradNorm) + ", \"tokens\": " +
         std::to_string(r.tokens) + ", \"tokens_total\": " + std::to_string(r.tokensTotal) +
         ", \"tokens_per_s\": " + shortestDecimal(r.tokensPerS) + ", \"step_time_s\": " +
         shortestDecimal(r.stepTimeS) + ", \"elapsed_s\": " + shortestDecimal(r.elapsedS) +
         ", \"mfu\": " + jsonOrNull(r.mfu, r.mfu >= 0) + ", \"hfu\": " +
         jsonOrNull(r.hfu, r.hfu >= 0) + "}";
}

std::string valMetricsJson(const ValRecord &v) {
  return wallJsonPrefix("val") + ", \"step\": " + std::to_string(v.step) +
         ", \"val_loss\": " + shortestDecimal(v.valLoss) +
         ", \"val_tokens\": " + std::to_string(v.valTokens) + "}";
}

std::string evalLossMetricsJson(int64_t step, double loss, int64_t tokens) {
  return wallJsonPrefix("eval") + ", \"step\": " +
         (step >= 0 ? std::to_string(step) : "null") +
         ", \"function\": \"loss\", \"val_loss\": " + shortestDecimal(loss) +
         ", \"val_tokens\": " + std::to_string(tokens) + "}";
}

/// What a TrainRun keeps between its calls.
struct TrainRun::State {
  TrainOptions o;
  RunObserver quiet;
  RunObserver *obs = &quiet;
  std::string hash, resumeDir, runId, saveDir;
  CheckpointMeta resumed;
  bool resuming = false;
  bool noSource = false; ///< neither data nor feeds: stepWith only
  std::vector<HostTensor> fixed;
  TokenData data, val;
  Rng rng;
  TokenInputs tok;
  LabelShift labelShift = LabelShift::Next;
  int64_t tokensPerStep = 0;
  MetricsFile metrics;
  EventWriter tb;
  bool tbOpen = false;
  FlopsReport flops;
  double peak = 0;
  int64_t first = 1;    ///< the first step this run makes
  int64_t savedAt = -1; ///< the step last saved
  double smooth = 0, smoothWeight = 0;
  bool started = false; ///< t0 is set
  std::chrono::steady_clock::time_point t0;
};

TrainRun::TrainRun() : s_(std::make_unique<State>()) {}
TrainRun::~TrainRun() = default;

Status TrainRun::prepare(const Artifact *artifactPtr, const std::string &artifactPath,
                         const TrainOptions &options, RunObserver *observer, bool needSource,
                         bool *userError) {
  State &S = *s_;
  S.o = options;
  const TokenData *source = options.dataSource;
  S.o.dataSource = nullptr; // borrowed for this call only
  if (observer)
    S.obs = observer;
  artifact_ = artifactPtr;
  const Artifact &artifact = *artifactPtr;
  const TrainOptions &o = S.o;
  RunObserver *obs = S.obs;
  *userError = true; // until the run itself starts
  if (!o.data.empty() && !o.feeds.empty())
    return invalidArgument("give either --data or --feed, not both");
  if (source && (!o.data.empty() || !o.feeds.empty()))
    return invalidArgument(std::string("give either a token source (data_source) or ") +
                           (o.data.empty() ? "--feed" : "--data") + ", not both");
  if (!o.resume.empty() && !o.init.empty())
    return invalidArgument("give either --resume or --init, not both");
  if (o.saveEvery > 0 && o.save.empty())
    return invalidArgument("--save-every needs --save DIR");
  if (o.keepCheckpoints > 0 && o.save.empty())
    return invalidArgument("--keep-checkpoints needs --save DIR");
  if (o.overwrite && o.save.empty())
    return invalidArgument("--overwrite goes with --save DIR");
  if ((o.evalEvery >= 0 || o.evalIters >= 0) && o.valData.empty() && o.resume.empty())
    return invalidArgument("--eval-every and --eval-iters go with --val-data FILE");
  std::string &hash = S.hash;
  TC_RETURN_IF_ERROR(artifactHash(artifactPath, &hash));

  // The run's configuration: the flags, or the resumed run's.
  CheckpointMeta &resumed = S.resumed;
  std::string &resumeDir = S.resumeDir;
  bool resuming = S.resuming = !o.resume.empty();
  if (resuming) {
    resumeDir = newestCheckpoint(stripSlashes(o.resume));
    if (resumeDir.empty()) {
      if (!isDir(o.resume))
        return notFound("--resume '" + o.resume + "' does not exist or is not a folder");
      return notFound("--resume '" + o.resume + "' holds no checkpoint (no state.json)");
    }
    TC_RETURN_IF_ERROR(readCheckpointMeta(resumeDir, &resumed));
    if (resumeDir != stripSlashes(o.resume))
      obs->line("resuming from " + resumeDir + " (the newest checkpoint in " + o.resume + ")");
  }
  const RunConfig &had = resumed.run;
  RunConfig &run = run_;
  ExecOptions exec;
  exec.precision = o.refPrecision == "f64" ? RefPrecision::F64 : RefPrecision::F32;

  Trainer &trainer = trainer_;
  const TrainConfig *cfg = nullptr;
  // Resolve every configuration value (flag > resumed run > default).
  if (resuming) {
    std::string d = resumeDir;
    TC_RETURN_IF_ERROR(keep("--lr", o.lr >= 0, o.lr, had.lr, num(o.lr), num(had.lr), d));
    TC_RETURN_IF_ERROR(keep("--warmup", o.warmup >= 0, o.warmup, had.warmup,
                            std::to_string(o.warmup), std::to_string(had.warmup), d));
    TC_RETURN_IF_ERROR(keep("--lr-schedule", !o.schedule.empty(), o.schedule, had.schedule,
                            o.schedule, had.schedule, d));
    TC_RETURN_IF_ERROR(keep("--seed", o.seed >= 0, static_cast<uint64_t>(o.seed), had.seed,
                            std::to_string(o.seed), std::to_string(had.seed), d));
    TC_RETURN_IF_ERROR(keep("--dtype", !o.dataDtype.empty(), o.dataDtype, had.dataDtype,
                            o.dataDtype, had.dataDtype, d));
    TC_RETURN_IF_ERROR(keep("--labels", !o.labels.empty(), o.labels, had.labels, o.labels,
                            had.labels, d));
    TC_RETURN_IF_ERROR(keep("--eval-every", o.evalEvery >= 0, o.evalEvery, had.evalEvery,
                            std::to_string(o.evalEvery), std::to_string(had.evalEvery), d));
    TC_RETURN_IF_ERROR(keep("--eval-iters", o.evalIters >= 0, o.evalIters, had.evalIters,
                            std::to_string(o.evalIters), std::to_string(had.evalIters), d));
    run = had;
    if (o.steps >= 0)
      run.steps = o.steps;
    if (run.steps < resumed.step)
      return invalidArgument("checkpoint '" + resumeDir + "' is at step " +
                             std::to_string(resumed.step) + ", beyond --steps " +
                             std::to_string(run.steps));
    // The data: the same bytes as the resumed run's (its path by default).
    if (had.data.path.empty() && (!o.data.empty() || source))
      return invalidArgument("--data conflicts with the run in '" + d +
                             "', which was trained on --feed inputs");
    if (!had.data.path.empty()) {
      if (!o.feeds.empty())
        return invalidArgument("--feed conflicts with the run in '" + d +
                               "', which was trained on --data " + had.data.path);
      std::string path = o.data.empty() ? had.data.path : o.data;
      if (!source && o.data.empty() && had.data.path == kMemoryTokensPath)
        return invalidArgument("the run in '" + d + "' was trained on tokens given in memory: "
                               "give them again as its token source (data_source)");
      Status st = source ? source->fingerprint(&run.data)
                         : fileFingerprint(path, "token file", &run.data);
      if (!st.isOk())
        return st.code() == StatusCode::NotFound || st.code() == StatusCode::IoError
                   ? notFound("the run in '" + d + "' was trained on --data " + path +
                              ", which cannot be read now (" + st.message() +
                              "); give its new place with --data")
                   : st;
      if (run.data != had.data)
        return invalidArgument((source ? "the token source " + run.data.path : "--data " + path) +
                               " (" + std::to_string(run.data.bytes) +
                               " bytes, hash " + run.data.hash + ") is not the data the run in '" +
                               d + "' was trained on (" + had.data.path + ", " +
                               std::to_string(had.data.bytes) + " bytes, hash " + had.data.hash +
                               ")");
    }
    if (!had.valData.path.empty() || !o.valData.empty()) {
      if (had.valData.path.empty())
        return invalidArgument("--val-data conflicts with the run in '" + d +
                               "', which had no validation data");
      std::string path = o.valData.empty() ? had.valData.path : o.valData;
      TC_RETURN_IF_ERROR(fileFingerprint(path, "--val-data file", &run.valData));
      if (run.valData != had.valData)
        return invalidArgument("--val-data " + path + " is not the validation data of the run "
                               "in '" + d + "' (" + had.valData.path + ")");
    }
    for (const auto &[name, file] : o.feeds) {
      FileFingerprint f;
      TC_RETURN_IF_ERROR(fileFingerprint(file, "file", &f).withPrefix("--feed '" + name + "'"));
      auto it = std::find_if(had.feeds.begin(), had.feeds.end(),
                             [&](const auto &kv) { return kv.first == name; });
      if (it == had.feeds.end() || it->second != f)
        return invalidArgument("--feed " + name + "=" + file + " is not the input the run in '" +
                               d + "' was trained on" +
                               (it == had.feeds.end() ? "" : " (" + it->second.path + ")"));
    }
  } else {
    if (o.steps < 0)
      return invalidArgument("training needs --steps N");
    run.steps = o.steps;
    run.warmup = o.warmup >= 0 ? o.warmup : 0;
    run.schedule = o.schedule.empty() ? "constant" : o.schedule;
    run.seed = o.seed >= 0 ? static_cast<uint64_t>(o.seed) : 1337;
    run.dataDtype = o.data.empty() ? "" : (o.dataDtype.empty() ? "uint16" : o.dataDtype);
    if (!o.data.empty())
      TC_RETURN_IF_ERROR(fileFingerprint(o.data, "token file", &run.data));
    if (source) {
      // --dtype is --val-data's then: a token file source's own by default.
      std::string own = source->inMemory() ? "uint16" : source->dtypeName();
      if (!source->inMemory() && !o.dataDtype.empty() && o.dataDtype != own)
        return invalidArgument("--dtype " + o.dataDtype + " conflicts with the token source, "
                               "whose tokens are " + own);
      run.dataDtype = o.dataDtype.empty() ? own : o.dataDtype;
      TC_RETURN_IF_ERROR(source->fingerprint(&run.data));
    }
    if (!o.valData.empty()) {
      TC_RETURN_IF_ERROR(fileFingerprint(o.valData, "--val-data file", &run.valData));
      run.evalEvery = o.evalEvery >= 0 ? o.evalEvery : 100;
      run.evalIters = o.evalIters >= 0 ? o.evalIters : 20;
      if (run.evalIters < 1)
        return invalidArgument("--eval-iters wants a whole number >= 1");
    }
    for (const auto &[name, file] : o.feeds) {
      FileFingerprint f;
      TC_RETURN_IF_ERROR(fileFingerprint(file, "file", &f).withPrefix("--feed '" + name + "'"));
      run.feeds.push_back({name, f});
    }
  }
  exec.initSeed = run.seed;
  if (run.data.path.empty() && (o.batch > 0 || o.seq > 0))
    return invalidArgument("--batch and --seq go with --data");
  if (run.data.path.empty() && !o.labels.empty())
    return invalidArgument("--labels goes with --data (--feed gives the labels themselves)");
  if (run.data.path.empty() && !o.dataDtype.empty())
    return invalidArgument("--dtype goes with --data");

  bool deviceFailed = false;
  Status init = trainer.init(&artifact, exec, o.device, &deviceFailed);
  if (!init.isOk()) {
    if (deviceFailed)
      *userError = init.code() == StatusCode::InvalidArgument;
    return init;
  }
  cfg = &trainer.config();
  std::string deviceName = "cpu";
  if (trainer.onDevice()) {
    DeviceMemoryReport m = trainer.deviceMemory();
    deviceName = m.device;
    obs->line("device: " + m.device);
    auto gib = [](double b) { return b / 1073741824.0; };
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "device memory: parameters+state %.3f GiB, constants %.3f GiB, inputs %.3f "
                  "GiB, workspace %.3f GiB, arena %.3f GiB, total %.3f GiB (%llu bytes); "
                  "cudaMemGetInfo saw %lld bytes (%.3f GiB); the card: %lld bytes in all "
                  "(cudaMemGetInfo), %lld in use before tc allocated (%.3f GiB: the CUDA "
                  "context and other processes)",
                  gib(m.parameters), gib(m.constants), gib(m.inputs), gib(m.workspace),
                  gib(m.arena), gib(m.total), static_cast<unsigned long long>(m.total),
                  static_cast<long long>(m.measured), gib(m.measured),
                  static_cast<long long>(m.cardTotal), static_cast<long long>(m.inUseBefore),
                  gib(m.inUseBefore));
    obs->line(buf);
  } else {
    obs->line("device: " + trainer.executor().deviceName());
  }
  const std::vector<std::string> &names = trainer.dataInputNames();
  const std::vector<TensorType> &types = trainer.dataInputTypes();

  // The batch: windows of a token file or fixed feeds.
  std::vector<HostTensor> &fixed = S.fixed;
  fixed.assign(names.size(), HostTensor());
  TokenData &data = S.data, &val = S.val;
  Rng &rng = S.rng;
  rng.state = run.seed * 0x9e3779b97f4a7c15ULL + 1;
  TokenInputs &tok = S.tok;
  LabelShift &labelShift = S.labelShift;
  if (!run.data.path.empty()) {
    TC_RETURN_IF_ERROR(tokenInputs(names, types, &tok));
    const TensorType &t = types[static_cast<size_t>(tok.ids)];
    if ((o.batch > 0 && o.batch != t.shape[0]) || (o.seq > 0 && o.seq != t.shape[1]))
      return invalidArgument("--batch/--seq " + std::to_string(o.batch) + "x" +
                             std::to_string(o.seq) + " do not match the compiled input " +
                             shapeToString(t.shape) +
                             " (recompile with --dim batch=B --dim seq=T)");
    int bytes = run.dataDtype == "uint32" ? 4 : 2;
    TC_RETURN_IF_ERROR(source ? data.openCopyOf(*source) : data.open(run.data.path, bytes));
    std::string message, note;
    TC_RETURN_IF_ERROR(chooseLabels(artifact, resuming ? run.labels : o.labels, &labelShift,
                                    &message, &note));
    if (resuming) {
      message = "labels: " + run.labels + " (" +
                (labelShift == LabelShift::Same ? "labels = input_ids"
                                                : "labels = input_ids shifted by one") +
                ", as in the resumed run)";
    } else {
      run.labels = labelShift == LabelShift::Same ? "same" : "next";
      if (!note.empty())
        obs->note(note);
    }
    obs->line(message);
    if (data.numTokens() < t.shape[1] + 1)
      return invalidArgument("token file '" + run.data.path + "' has " +
                             std::to_string(data.numTokens()) + " tokens, fewer than seq+1");
    if (!run.valData.path.empty()) {
      TC_RETURN_IF_ERROR(val.open(run.valData.path, bytes));
      if (val.numTokens() < t.shape[1] + 1)
        return invalidArgument("--val-data '" + run.valData.path + "' has " +
                               std::to_string(val.numTokens()) + " tokens, fewer than seq+1");
    }
  } else if (run.feeds.empty() && o.feeds.empty() && !needSource) {
    if (!run.valData.path.empty())
      return invalidArgument("--val-data goes with --data (token windows)");
    S.noSource = true; // every step comes with its inputs (stepWith)
    // evaluate() cuts windows as the artifact's loss wants them.
    std::string message, note;
    TC_RETURN_IF_ERROR(chooseLabels(artifact, "", &labelShift, &message, &note));
  } else {
    if (!run.valData.path.empty())
      return invalidArgument("--val-data goes with --data (token windows)");
    std::map<std::string, std::string> feedFiles;
    for (const auto &[name, f] : run.feeds)
      feedFiles[name] = f.path;
    for (const auto &[name, file] : o.feeds)
      feedFiles[name] = file; // the same bytes (checked above), maybe moved
    if (o.feeds.size() != feedFiles.size() && !resuming)
      for (size_t i = 0; i < o.feeds.size(); ++i)
        for (size_t j = 0; j < i; ++j)
          if (o.feeds[i].first == o.feeds[j].first)
            return invalidArgument("--feed '" + o.feeds[i].first + "' is given twice");
    for (const auto &kv : feedFiles)
      if (std::find(names.begin(), names.end(), kv.first) == names.end())
        return invalidArgument("--feed '" + kv.first + "': the training step has no input '" +
                               kv.first + "'");
    for (size_t i = 0; i < names.size(); ++i) {
      auto it = feedFiles.find(names[i]);
      if (it == feedFiles.end())
        return invalidArgument("missing --feed for input '" + names[i] + "' (" +
                               typeToString(types[i]) + "), or use --data");
      TC_RETURN_IF_ERROR(readNpy(it->second, &fixed[i]).withPrefix("--feed '" + names[i] + "'"));
      if (fixed[i].type != types[i])
        return invalidArgument("--feed '" + names[i] + "': expected " + typeToString(types[i]) +
                               ", got " + typeToString(fixed[i].type));
    }
    TC_RETURN_IF_ERROR(checkInputRanges(artifact, names, fixed));
  }
  int64_t tokensPerMicro = 0;
  if (!names.empty())
    tokensPerMicro = types[static_cast<size_t>(tok.ids >= 0 ? tok.ids : 0)].numElements();
  S.tokensPerStep = tokensPerMicro * cfg->gradAccum;

  // Weights and the starting step.
  int64_t start = 0;
  std::string &runId = S.runId;
  runId = newRunId();
  if (!o.init.empty()) {
    std::string file = o.init;
    if (isDir(o.init)) {
      std::string dir = newestCheckpoint(stripSlashes(o.init));
      if (dir.empty())
        return notFound("--init '" + o.init + "' holds no checkpoint (no state.json)");
      file = dir + "/model.safetensors";
    }
    TC_RETURN_IF_ERROR(trainer.loadWeights(file));
  }
  if (resuming) {
    CheckpointMeta meta;
    TC_RETURN_IF_ERROR(trainer.loadCheckpoint(resumeDir, hash, &meta));
    start = meta.step;
    rng.state = meta.rngState;
    data.position = meta.dataPosition;
    runId = meta.runId;
    if (run.steps != had.steps)
      obs->line("resumed at step " + std::to_string(start) + ": --steps " +
                std::to_string(run.steps) + " replaces the run's " + std::to_string(had.steps) +
                "; the " + run.schedule + " schedule is recomputed over " +
                std::to_string(run.steps) + " steps (lr at step " + std::to_string(start + 1) +
                ": " +
                num(learningRate(start + 1, run.steps, run.lr, run.warmup, run.schedule)) +
                ", was " +
                num(learningRate(start + 1, had.steps, had.lr, had.warmup, had.schedule)) + ")");
    else
      obs->line("resumed at step " + std::to_string(start) + " of " + std::to_string(run.steps));
  } else {
    run.lr = o.lr >= 0 ? o.lr : cfg->lr;
  }

  // --save: never replace a newer checkpoint or another run's, unless asked.
  std::string &saveDir = S.saveDir;
  saveDir = o.save.empty() ? "" : stripSlashes(o.save);
  if (!saveDir.empty() && !o.overwrite) {
    std::string there = newestCheckpoint(saveDir);
    if (!there.empty()) {
      CheckpointMeta m;
      Status st = readCheckpointMeta(there, &m);
      if (!st.isOk())
        return failedPrecondition("--save '" + o.save + "' holds a checkpoint this run cannot "
                                  "read (" + st.message() + "): give --overwrite to replace it");
      if (m.runId != runId)
        return failedPrecondition(
            "--save '" + o.save + "' holds a checkpoint of another run (step " +
            std::to_string(m.step) + ", run " + m.runId +
            "): resume it with --resume " + o.save + ", save elsewhere, or give --overwrite");
      if (m.step > start)
        return failedPrecondition("--save '" + o.save + "' holds a checkpoint at step " +
                                  std::to_string(m.step) + ", newer than this run's step " +
                                  std::to_string(start) + ": resume from it with --resume " +
                                  o.save + ", or give --overwrite");
    }
  }

  MetricsFile &metrics = S.metrics;
  if (!o.metrics.empty())
    TC_RETURN_IF_ERROR(metrics.open(o.metrics, resuming));
  EventWriter &tb = S.tb;
  bool &tbOpen = S.tbOpen;
  if (!o.tensorboard.empty()) {
    TC_RETURN_IF_ERROR(tb.open(o.tensorboard));
    tbOpen = true;
  }
  FlopsReport flops;
  bool haveFlops = readFlops(artifact, &flops);
  S.peak = haveFlops ? peakFor(flops, deviceName) : 0;
  S.flops = flops;
  step_ = start;
  S.first = start + 1;

  *userError = false; // from here on, failures are the run's
  return Status::ok();
}

Status TrainRun::save(int64_t step) {
  State &S = *s_;
  const TrainOptions &o = S.o;
  const std::string &saveDir = S.saveDir;
  CheckpointMeta meta;
  meta.step = step;
  meta.rngState = S.rng.state;
  meta.dataPosition = S.data.position;
  meta.artifactHash = S.hash;
  meta.precision = o.refPrecision;
  meta.runId = S.runId;
  meta.run = run_;
  std::string target = o.keepCheckpoints > 0 ? saveDir + "/" + stepFolderName(step) : saveDir;
  if (o.keepCheckpoints > 0 && !isDir(saveDir) && ::mkdir(saveDir.c_str(), 0755) != 0)
    return ioError("cannot create '" + saveDir + "': " + std::strerror(errno));
  Status st = trainer_.saveCheckpoint(target, meta);
  if (!st.isOk())
    return Status(st.code(), "saving checkpoint '" + target + "': " + st.message());
  S.savedAt = step;
  S.obs->line("saved " + target + " (step " + std::to_string(step) + ")");
  if (o.keepCheckpoints > 0) {
    auto all = stepFolders(saveDir);
    for (size_t i = 0; i + static_cast<size_t>(o.keepCheckpoints) < all.size(); ++i)
      removeCheckpointDir(all[i].second);
  }
  return Status::ok();
}

Status TrainRun::saveTo(const std::string &dir) {
  State &S = *s_;
  if (stripSlashes(dir) == S.saveDir)
    return save(step_);
  CheckpointMeta meta;
  meta.step = step_;
  meta.rngState = S.rng.state;
  meta.dataPosition = S.data.position;
  meta.artifactHash = S.hash;
  meta.precision = S.o.refPrecision;
  meta.runId = S.runId;
  meta.run = run_;
  Status st = trainer_.saveCheckpoint(stripSlashes(dir), meta);
  if (!st.isOk())
    return Status(st.code(), "saving checkpoint '" + dir + "': " + st.message());
  return Status::ok();
}

Status TrainRun::loadCheckpoint(const std::string &dir) {
  State &S = *s_;
  CheckpointMeta meta;
  TC_RETURN_IF_ERROR(trainer_.loadCheckpoint(stripSlashes(dir), S.hash, &meta));
  step_ = meta.step;
  S.first = meta.step + 1;
  S.rng.state = meta.rngState;
  S.data.position = meta.dataPosition;
  S.runId = meta.runId;
  return Status::ok();
}

Status TrainRun::evaluate(const TokenData &source, int64_t iters, double *loss, int64_t *tokens,
                          bool *userError) {
  State &S = *s_;
  *userError = true;
  if (iters < 1)
    return invalidArgument("iters is " + std::to_string(iters) + ": it must be >= 1");
  const std::vector<std::string> &names = trainer_.dataInputNames();
  const std::vector<TensorType> &types = trainer_.dataInputTypes();
  TokenInputs tok;
  TC_RETURN_IF_ERROR(tokenInputs(names, types, &tok));
  const TensorType &t = types[static_cast<size_t>(tok.ids)];
  if (source.numTokens() < t.shape[1] + 1)
    return invalidArgument("the tokens to evaluate are " + std::to_string(source.numTokens()) +
                           ", fewer than seq+1 = " + std::to_string(t.shape[1] + 1));
  double sum = 0;
  for (int64_t i = 0; i < iters; ++i) {
    std::vector<HostTensor> batch;
    std::vector<uint64_t> offsets = evalOffsets(source, t.shape[0], t.shape[1], i, iters);
    TC_RETURN_IF_ERROR(tok.fill(source, &offsets, nullptr, nullptr, types, S.labelShift, &batch));
    TC_RETURN_IF_ERROR(checkInputRanges(*artifact_, names, batch));
    double l = 0;
    *userError = false;
    TC_RETURN_IF_ERROR(trainer_.evalLoss(batch, &l));
    *userError = true;
    sum += l;
  }
  *userError = false;
  *loss = sum / static_cast<double>(iters);
  if (tokens)
    *tokens = iters * t.numElements();
  return Status::ok();
}

Status TrainRun::validate(int64_t step, bool *userError) {
  State &S = *s_;
  const Artifact &artifact = *artifact_;
  const std::vector<std::string> &names = trainer_.dataInputNames();
  const std::vector<TensorType> &types = trainer_.dataInputTypes();
  const RunConfig &run = run_;
  TokenInputs &tok = S.tok;
  TokenData &val = S.val;
  LabelShift labelShift = S.labelShift;
  Trainer &trainer = trainer_;
  RunObserver *obs = S.obs;
  const TensorType &t = types[static_cast<size_t>(tok.ids)];
  double sum = 0;
  for (int64_t i = 0; i < run.evalIters; ++i) {
    std::vector<HostTensor> batch;
    std::vector<uint64_t> offsets = evalOffsets(val, t.shape[0], t.shape[1], i, run.evalIters);
    TC_RETURN_IF_ERROR(tok.fill(val, &offsets, nullptr, nullptr, types, labelShift, &batch));
    Status st = checkInputRanges(artifact, names, batch);
    if (!st.isOk()) {
      *userError = true;
      return invalidArgument("--val-data '" + run.valData.path + "': " + st.message());
    }
    double l = 0;
    TC_RETURN_IF_ERROR(trainer.evalLoss(batch, &l));
    sum += l;
  }
  ValRecord v;
  v.step = step;
  v.valLoss = sum / static_cast<double>(run.evalIters);
  v.valTokens = run.evalIters * t.numElements();
  obs->val(v);
  TC_RETURN_IF_ERROR(S.metrics.write(valMetricsJson(v)));
  if (S.tbOpen)
    TC_RETURN_IF_ERROR(S.tb.scalar("val/loss", step, v.valLoss, wall()));
  return Status::ok();
}

double TrainRun::learningRateAt(int64_t step) const {
  return learningRate(step, run_.steps, run_.lr, run_.warmup, run_.schedule);
}

Status TrainRun::setSchedule(double lr, int64_t warmup, const std::string &schedule) {
  if (!(lr >= 0) || !std::isfinite(lr))
    return invalidArgument("lr is " + num(lr) + ": it must be a number >= 0");
  if (warmup < 0)
    return invalidArgument("warmup is " + std::to_string(warmup) + ": it must be >= 0");
  if (!schedule.empty() && schedule != "constant" && schedule != "cosine")
    return invalidArgument("schedule '" + schedule + "' is neither constant nor cosine");
  run_.lr = lr;
  run_.warmup = warmup;
  if (!schedule.empty())
    run_.schedule = schedule;
  return Status::ok();
}

Status TrainRun::step(StepRecord *rec, bool *userError) {
  State &S = *s_;
  *userError = false;
  if (S.noSource)
    return failedPrecondition("the run has no data (--data or --feed): give each step its "
                              "inputs");
  if (!S.started) {
    S.started = true;
    S.t0 = std::chrono::steady_clock::now();
  }
  const Trainer &trainer = trainer_;
  const std::vector<std::string> &names = trainer.dataInputNames();
  const std::vector<TensorType> &types = trainer.dataInputTypes();
  std::vector<std::vector<HostTensor>> micro(static_cast<size_t>(trainer.config().gradAccum));
  for (auto &mb : micro) {
    if (run_.data.path.empty()) {
      mb = S.fixed;
      continue;
    }
    TC_RETURN_IF_ERROR(S.tok.fill(S.data, nullptr, &S.data, &S.rng, types, S.labelShift, &mb));
    Status st = checkInputRanges(*artifact_, names, mb);
    if (!st.isOk()) { // a token of the file the model cannot take: the user's input
      *userError = true;
      return invalidArgument("token file '" + run_.data.path + "': " + st.message());
    }
  }
  return stepWith(micro, rec, userError);
}

Status TrainRun::stepWith(const std::vector<std::vector<HostTensor>> &micro, StepRecord *rec,
                          bool *userError) {
  State &S = *s_;
  *userError = false;
  if (!S.started) {
    S.started = true;
    S.t0 = std::chrono::steady_clock::now();
  }
  int64_t step = step_ + 1;
  double lr = learningRateAt(step);
  auto clock = std::chrono::steady_clock::now;
  auto ts = clock();
  StepResult r;
  Status st = trainer_.step(step, lr, micro, &r);
  if (!st.isOk())
    return Status(st.code(), "step " + std::to_string(step) + ": " + st.message());
  double dt = std::chrono::duration<double>(clock() - ts).count();
  if (!std::isfinite(r.loss))
    return internalError(std::string("loss is ") + (std::isnan(r.loss) ? "nan" : "inf") +
                         " at step " + std::to_string(step));
  step_ = step;
  TC_RETURN_IF_ERROR(record(step, lr, dt, r, rec));
  return finishStep(step, userError);
}

Status TrainRun::record(int64_t step, double lr, double dt, const StepResult &r,
                        StepRecord *out) {
  State &S = *s_;
  const TrainOptions &o = S.o;
  auto clock = std::chrono::steady_clock::now;
  int64_t start = S.first - 1;
  int64_t tokensPerStep = S.tokensPerStep;
  // The bar's loss: an exponential moving average (0.9), bias-corrected
  // as Adam's moments are, so the first steps are not pulled to 0.
  S.smooth = 0.9 * S.smooth + 0.1 * r.loss;
  S.smoothWeight = 0.9 * S.smoothWeight + 0.1;
  StepRecord rec;
  rec.step = step;
  rec.first = start + 1;
  rec.total = run_.steps;
  rec.loss = r.loss;
  rec.lossSmooth = S.smooth / S.smoothWeight;
  rec.lr = lr;
  rec.gradNorm = r.gradNorm;
  rec.tokens = tokensPerStep;
  rec.tokensTotal = tokensPerStep * step;
  rec.tokensPerS = dt > 0 ? static_cast<double>(tokensPerStep) / dt : 0;
  rec.stepTimeS = dt;
  rec.elapsedS = std::chrono::duration<double>(clock() - S.t0).count();
  int64_t done = step - start;
  rec.etaS = rec.elapsedS / static_cast<double>(done) * static_cast<double>(run_.steps - step);
  if (S.peak > 0 && dt > 0) {
    rec.mfu = S.flops.modelFlopsPerToken * rec.tokensPerS / S.peak;
    rec.hfu = S.flops.hardwareFlopsPerStep / dt / S.peak;
  }
  rec.periodic = o.logEvery > 0 && (step % o.logEvery == 0 || step == start + 1 ||
                                    step == run_.steps);
  S.obs->step(rec);
  if (out)
    *out = rec;
  TC_RETURN_IF_ERROR(S.metrics.write(trainMetricsJson(rec)));
  if (S.tbOpen) {
    EventWriter &tb = S.tb;
    double w = wall();
    TC_RETURN_IF_ERROR(tb.scalar("train/loss", step, r.loss, w));
    TC_RETURN_IF_ERROR(tb.scalar("train/loss_smooth", step, rec.lossSmooth, w));
    TC_RETURN_IF_ERROR(tb.scalar("train/lr", step, lr, w));
    if (std::isfinite(r.gradNorm))
      TC_RETURN_IF_ERROR(tb.scalar("train/grad_norm", step, r.gradNorm, w));
    TC_RETURN_IF_ERROR(tb.scalar("train/tokens_per_s", step, rec.tokensPerS, w));
    if (rec.mfu >= 0)
      TC_RETURN_IF_ERROR(tb.scalar("train/mfu", step, rec.mfu, w));
    TC_RETURN_IF_ERROR(tb.flush());
  }
  return Status::ok();
}

Status TrainRun::finishStep(int64_t step, bool *userError) {
  State &S = *s_;
  if (!run_.valData.path.empty() && run_.evalEvery > 0 &&
      (step % run_.evalEvery == 0 || step == run_.steps))
    TC_RETURN_IF_ERROR(validate(step, userError));
  if (!S.saveDir.empty() && S.o.saveEvery > 0 && step % S.o.saveEvery == 0)
    TC_RETURN_IF_ERROR(save(step));
  return Status::ok();
}

Status TrainRun::run(TrainSummary *summary, bool *userError, const std::function<int()> &stop,
                     const std::function<void()> &between) {
  State &S = *s_;
  *userError = false;
  *summary = TrainSummary();
  auto clock = std::chrono::steady_clock::now;
  if (!S.started) {
    S.started = true;
    S.t0 = clock();
  }
  summary->first = step_ + 1;
  summary->last = step_;
  while (step_ < run_.steps) {
    StepRecord rec;
    TC_RETURN_IF_ERROR(step(&rec, userError));
    if (summary->last < summary->first)
      summary->firstLoss = rec.loss;
    summary->last = rec.step;
    summary->lastLoss = rec.loss;
    int why = S.o.stop ? S.o.stop() : 0;
    if (!why && stop)
      why = stop();
    if (why != 0 && step_ < run_.steps) {
      summary->interrupted = why;
      if (!S.saveDir.empty() && S.savedAt != step_)
        TC_RETURN_IF_ERROR(save(step_));
      summary->seconds = std::chrono::duration<double>(clock() - S.t0).count();
      return Status::ok();
    }
    if (between)
      between();
  }
  if (!S.saveDir.empty() && S.savedAt != run_.steps)
    TC_RETURN_IF_ERROR(save(run_.steps));
  summary->seconds = std::chrono::duration<double>(clock() - S.t0).count();
  return Status::ok();
}

Status train(const Artifact &artifact, const std::string &artifactPath, const TrainOptions &o,
             RunObserver *obs, TrainSummary *summary, bool *userError) {
  *summary = TrainSummary();
  TrainRun run;
  TC_RETURN_IF_ERROR(run.prepare(&artifact, artifactPath, o, obs, /*needSource=*/true, userError));
  return run.run(summary, userError, nullptr, nullptr);
}

Status evaluateData(const Artifact &artifact, const EvalDataOptions &o, RunObserver *obs,
                    EvalDataResult *out, bool *userError) {
  RunObserver quiet;
  if (!obs)
    obs = &quiet;
  *userError = true;
  if (o.iters < 1)
    return invalidArgument("--eval-iters wants a whole number >= 1");
  Artifact a = artifact;
  if (!o.init.empty())
    TC_RETURN_IF_ERROR(loadArtifactWeights(&a, o.init, &out->step));
  ExecOptions exec;
  exec.precision = o.refPrecision == "f64" ? RefPrecision::F64 : RefPrecision::F32;
  exec.initSeed = static_cast<uint64_t>(o.seed);
  // The loss function: eval_step (a training artifact) or infer.
  const Function *fn = a.findFunction("eval_step");
  if (!fn)
    fn = a.findFunction("infer");
  if (!fn)
    return invalidArgument("the artifact has no eval_step or infer function");
  std::vector<TensorType> types;
  for (int32_t id : fn->inputs)
    types.push_back(fn->values[static_cast<size_t>(id)]);
  TokenInputs tok;
  TC_RETURN_IF_ERROR(tokenInputs(fn->inputNames, types, &tok));
  int lossIndex = -1;
  TrainConfig cfg;
  std::string lossName = readTrainConfig(a, &cfg).isOk() ? cfg.loss : "loss";
  for (size_t i = 0; i < fn->outputNames.size(); ++i)
    if (fn->outputNames[i] == lossName ||
        (lossIndex < 0 && fn->values[static_cast<size_t>(fn->outputs[i])].shape.empty()))
      lossIndex = static_cast<int>(i);
  if (lossIndex < 0)
    return invalidArgument("--eval --data needs a model with a scalar loss output (function '" +
                           fn->name + "' has none)");
  TokenData data;
  TC_RETURN_IF_ERROR(data.open(o.data, o.dataDtype == "uint32" ? 4 : 2));
  const TensorType &t = types[static_cast<size_t>(tok.ids)];
  if (data.numTokens() < t.shape[1] + 1)
    return invalidArgument("token file '" + o.data + "' has " + std::to_string(data.numTokens()) +
                           " tokens, fewer than seq+1");
  LabelShift shift = LabelShift::Next;
  std::string message, note;
  TC_RETURN_IF_ERROR(chooseLabels(a, o.labels, &shift, &message, &note));
  if (!note.empty())
    obs->note(note);
  obs->line(message);
  *userError = false;
  // The GPU when its program has the loss function, else the CPU reference.
  DeviceOptions device = o.device;
  if (!a.findDeviceFunction(fn->name))
    device.gpu = -1;
  std::unique_ptr<Executor> ex;
  Status made = createExecutor(&a, exec, device, &ex);
  if (!made.isOk()) {
    *userError = made.code() == StatusCode::InvalidArgument;
    return made;
  }
  obs->line("device: " + ex->deviceName());
  double sum = 0;
  for (int64_t i = 0; i < o.iters; ++i) {
    std::vector<HostTensor> batch, outputs;
    std::vector<uint64_t> offsets = evalOffsets(data, t.shape[0], t.shape[1], i, o.iters);
    TC_RETURN_IF_ERROR(tok.fill(data, &offsets, nullptr, nullptr, types, shift, &batch));
    Status st = checkInputRanges(a, fn->inputNames, batch);
    if (!st.isOk()) {
      *userError = true;
      return invalidArgument("token file '" + o.data + "': " + st.message());
    }
    TC_RETURN_IF_ERROR(ex->run(fn->name, batch, &outputs));
    sum += hostTensorToDoubles(outputs[static_cast<size_t>(lossIndex)])[0];
  }
  out->loss = sum / static_cast<double>(o.iters);
  out->batches = o.iters;
  out->tokens = o.iters * t.numElements();
  return Status::ok();
}

namespace {

/// What the sampler feeds the infer function and where it reads the logits.
struct InferFeed {
  const Function *fn = nullptr;
  int logits = -1, ids = -1;
  std::vector<TensorType> types;
  int64_t B = 0, T = 0, V = 0;
};

Status inferFeed(const Artifact &a, InferFeed *f) {
  const Function *fn = f->fn = a.findFunction("infer");
  if (!fn)
    return invalidArgument("the artifact has no infer function");
  // The logits: an output named logits, else the only float [B, T, V] one.
  int logits = -1, floats3 = 0;
  std::string outs;
  for (size_t i = 0; i < fn->outputNames.size(); ++i) {
    const TensorType &t = fn->values[static_cast<size_t>(fn->outputs[i])];
    outs += (outs.empty() ? "" : ", ") + fn->outputNames[i] + " " + typeToString(t);
    if (fn->outputNames[i] == "logits")
      logits = static_cast<int>(i);
    if (t.shape.size() == 3 && dtypeIsFloat(t.dtype))
      ++floats3;
  }
  if (logits < 0 && floats3 == 1)
    for (size_t i = 0; i < fn->outputNames.size(); ++i) {
      const TensorType &t = fn->values[static_cast<size_t>(fn->outputs[i])];
      if (t.shape.size() == 3 && dtypeIsFloat(t.dtype))
        logits = static_cast<int>(i);
    }
  if (logits < 0)
    return invalidArgument("--generate needs a causal LM with a logits output [batch, seq, "
                           "vocab]; the model's outputs are: " + outs +
                           " (export the logits too, as the README's recipe does)");
  f->logits = logits;
  const TensorType &lt = fn->values[static_cast<size_t>(fn->outputs[static_cast<size_t>(logits)])];
  for (size_t i = 0; i < fn->inputs.size(); ++i) {
    f->types.push_back(fn->values[static_cast<size_t>(fn->inputs[i])]);
    if (fn->inputNames[i] == "input_ids")
      f->ids = static_cast<int>(i);
  }
  if (f->ids < 0 && f->types.size() == 1)
    f->ids = 0;
  if (f->ids < 0)
    return invalidArgument("--generate needs a model input named input_ids");
  const TensorType &it = f->types[static_cast<size_t>(f->ids)];
  if (it.shape.size() != 2 || !dtypeIsInteger(it.dtype))
    return invalidArgument("--generate needs input_ids of shape [batch, seq] (the model has " +
                           typeToString(it) + ")");
  f->T = it.shape[1];
  f->B = it.shape[0];
  f->V = lt.shape[2];
  return Status::ok();
}

/// The logits of the last context position after `seqTokens` (cropped to
/// the last T): one infer call. Other inputs: labels (ignored by the logits;
/// any in range) and attention_mask (ones over the context, zeros after).
Status lastLogits(const Artifact &a, Executor &ex, const InferFeed &f,
                  const std::vector<int64_t> &seqTokens, std::vector<double> *z,
                  bool *userError) {
  const Function *fn = f.fn;
  int64_t B = f.B, T = f.T, V = f.V;
  int64_t ctx = std::min<int64_t>(static_cast<int64_t>(seqTokens.size()), T);
  std::vector<int64_t> row(static_cast<size_t>(B * T), 0);
  for (int64_t t = 0; t < ctx; ++t)
    row[static_cast<size_t>(t)] = seqTokens[seqTokens.size() - static_cast<size_t>(ctx) +
                                            static_cast<size_t>(t)];
  std::vector<HostTensor> inputs(f.types.size());
  for (size_t i = 0; i < f.types.size(); ++i) {
    const std::string &name = fn->inputNames[i];
    const TensorType &type = f.types[i];
    if (static_cast<int>(i) == f.ids) {
      inputs[i] = makeHostTensorInts(type, row);
    } else if (name == "attention_mask") {
      std::vector<int64_t> m(static_cast<size_t>(type.numElements()), 0);
      for (int64_t t = 0; t < ctx && t < static_cast<int64_t>(m.size()); ++t)
        m[static_cast<size_t>(t)] = 1;
      for (int64_t b = 1; b < B; ++b)
        for (int64_t t = 0; t < T; ++t)
          m[static_cast<size_t>(b * T + t)] = 1;
      inputs[i] = makeHostTensorInts(type, m);
    } else if (name == "labels" && dtypeIsInteger(type.dtype)) {
      // Any label in range: the logits do not depend on the labels.
      inputs[i] = makeHostTensorInts(type, row);
    } else {
      *userError = true;
      return invalidArgument("--generate does not know what to feed the model's input '" +
                             name + "' (" + typeToString(type) +
                             "): it feeds input_ids, attention_mask and labels");
    }
  }
  Status st = checkInputRanges(a, fn->inputNames, inputs);
  if (!st.isOk()) {
    *userError = true;
    return invalidArgument("--prompt: " + st.message());
  }
  *userError = false;
  if (!ex.hasFunction(fn->name))
    return failedPrecondition("the " + std::string(ex.onDevice() ? "GPU program" : "artifact") +
                              " has no function '" + fn->name + "'");
  std::vector<HostTensor> outputs;
  std::vector<bool> want(fn->outputs.size(), false);
  want[static_cast<size_t>(f.logits)] = true;
  TC_RETURN_IF_ERROR(ex.run(fn->name, inputs, &outputs, &want));
  std::vector<double> all = hostTensorToDoubles(outputs[static_cast<size_t>(f.logits)]);
  z->assign(all.begin() + (ctx - 1) * V, all.begin() + ctx * V);
  return Status::ok();
}

Status checkGenerateOptions(const GenerateOptions &o) {
  if (o.prompt.empty())
    return invalidArgument("--generate needs a prompt of at least one token (--prompt 1,2,3)");
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    return invalidArgument("--temperature wants a number >= 0");
  if (o.topK < 0)
    return invalidArgument("--top-k wants a whole number >= 0");
  return Status::ok();
}

/// The sampler's loop on the feed `f` of `a`. `first` (may be null) gets
/// the logits the first new token is drawn from, computed also when no
/// token is to be drawn.
Status sample(const Artifact &a, Executor &ex, const InferFeed &f, const GenerateOptions &o,
              std::vector<double> *first, std::vector<int64_t> *tokens, bool *userError) {
  int64_t V = f.V;
  Rng rng;
  rng.state = o.seed * 0x9e3779b97f4a7c15ULL + 7;
  *userError = false;
  std::vector<int64_t> seqTokens = o.prompt;
  for (int64_t n = 0; n < o.maxNewTokens || (n == 0 && first); ++n) {
    std::vector<double> z;
    TC_RETURN_IF_ERROR(lastLogits(a, ex, f, seqTokens, &z, userError));
    if (n == 0 && first) {
      *first = z;
      if (o.maxNewTokens == 0)
        break;
    }
    int64_t next = 0;
    if (o.temperature == 0) {
      next = std::max_element(z.begin(), z.end()) - z.begin();
    } else {
      for (double &x : z)
        x /= o.temperature;
      if (o.topK > 0 && o.topK < V) {
        std::vector<double> sorted = z;
        std::nth_element(sorted.begin(), sorted.begin() + (o.topK - 1), sorted.end(),
                         std::greater<double>());
        double kth = sorted[static_cast<size_t>(o.topK - 1)];
        for (double &x : z)
          if (x < kth)
            x = -INFINITY;
      }
      double mx = *std::max_element(z.begin(), z.end()), sum = 0;
      for (double &x : z) {
        x = std::exp(x - mx);
        sum += x;
      }
      double u = static_cast<double>(rng.next() >> 11) * 0x1.0p-53 * sum, acc = 0;
      next = V - 1;
      for (int64_t v = 0; v < V; ++v) {
        acc += z[static_cast<size_t>(v)];
        if (u < acc) {
          next = v;
          break;
        }
      }
    }
    seqTokens.push_back(next);
  }
  *tokens = std::move(seqTokens);
  return Status::ok();
}

} // namespace

Status generateWith(const Artifact &a, Executor &ex, const GenerateOptions &o,
                    std::vector<int64_t> *tokens, bool *userError) {
  *userError = true;
  TC_RETURN_IF_ERROR(checkGenerateOptions(o));
  InferFeed f;
  TC_RETURN_IF_ERROR(inferFeed(a, &f));
  return sample(a, ex, f, o, nullptr, tokens, userError);
}

Status inferGreedy(const Artifact &a, Executor &ex, const std::vector<int64_t> &context,
                   int64_t maxNewTokens, HostTensor *logits, std::vector<int64_t> *tokens,
                   bool *userError) {
  *userError = true;
  if (context.empty())
    return invalidArgument("the context needs at least one token");
  if (maxNewTokens < 0)
    return invalidArgument("max_new_tokens is " + std::to_string(maxNewTokens) +
                           ": it must be >= 0");
  InferFeed f;
  TC_RETURN_IF_ERROR(inferFeed(a, &f));
  GenerateOptions g;
  g.prompt = context;
  g.maxNewTokens = maxNewTokens;
  g.temperature = 0;
  std::vector<double> z;
  TC_RETURN_IF_ERROR(sample(a, ex, f, g, &z, tokens, userError));
  *logits = makeHostTensor({DType::F32, {f.V}}, z);
  return Status::ok();
}

Status nextLogits(const Artifact &a, Executor &ex, const std::vector<int64_t> &context,
                  HostTensor *logits, bool *userError) {
  *userError = true;
  if (context.empty())
    return invalidArgument("the context needs at least one token");
  InferFeed f;
  TC_RETURN_IF_ERROR(inferFeed(a, &f));
  std::vector<double> z;
  TC_RETURN_IF_ERROR(lastLogits(a, ex, f, context, &z, userError));
  *logits = makeHostTensor({DType::F32, {f.V}}, z);
  return Status::ok();
}

Status generate(const Artifact &artifact, const GenerateOptions &o, std::vector<int64_t> *tokens,
                bool *userError) {
  *userError = true;
  TC_RETURN_IF_ERROR(checkGenerateOptions(o));
  Artifact a = artifact;
  int64_t step = -1;
  if (!o.init.empty())
    TC_RETURN_IF_ERROR(loadArtifactWeights(&a, o.init, &step));
  InferFeed f;
  TC_RETURN_IF_ERROR(inferFeed(a, &f));
  ExecOptions exec;
  exec.precision = o.refPrecision == "f64" ? RefPrecision::F64 : RefPrecision::F32;
  exec.initSeed = o.seed;
  std::unique_ptr<Executor> ex;
  TC_RETURN_IF_ERROR(createExecutor(&a, exec, DeviceOptions(), &ex));
  return generateWith(a, *ex, o, tokens, userError);
}

} // namespace tc::rt
