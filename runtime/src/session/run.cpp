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
#if TC_HAVE_CUDA
#include "runtime/src/cuda/executor.h"
#endif

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

/// The token offsets of batch `index` of `iters` evenly spaced window
/// batches (the same ones every time, covering the file).
std::vector<uint64_t> evalOffsets(const TokenData &data, const TensorType &t, int64_t index,
                                  int64_t iters) {
  int64_t batch = t.shape[0], seq = t.shape[1];
  int64_t windows = iters * batch;
  int64_t span = data.numTokens() - seq - 1;
  std::vector<uint64_t> offsets(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    int64_t k = index * batch + b;
    offsets[static_cast<size_t>(b)] =
        windows > 1 ? static_cast<uint64_t>(span * k / (windows - 1)) : 0;
  }
  return offsets;
}

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

Status train(const Artifact &artifact, const std::string &artifactPath, const TrainOptions &o,
             RunObserver *obs, TrainSummary *summary, bool *userError) {
  RunObserver quiet;
  if (!obs)
    obs = &quiet;
  *userError = true; // until the run itself starts
  *summary = TrainSummary();
  if (!o.data.empty() && !o.feeds.empty())
    return invalidArgument("give either --data or --feed, not both");
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

  std::string hash;
  TC_RETURN_IF_ERROR(artifactHash(artifactPath, &hash));

  // The run's configuration: the flags, or the resumed run's.
  CheckpointMeta resumed;
  std::string resumeDir;
  bool resuming = !o.resume.empty();
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
  RunConfig run;
  ExecOptions exec;
  exec.precision = o.refPrecision == "f64" ? RefPrecision::F64 : RefPrecision::F32;

  Trainer trainer;
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
    if (had.data.path.empty() && !o.data.empty())
      return invalidArgument("--data conflicts with the run in '" + d +
                             "', which was trained on --feed inputs");
    if (!had.data.path.empty()) {
      if (!o.feeds.empty())
        return invalidArgument("--feed conflicts with the run in '" + d +
                               "', which was trained on --data " + had.data.path);
      std::string path = o.data.empty() ? had.data.path : o.data;
      Status st = fileFingerprint(path, "token file", &run.data);
      if (!st.isOk())
        return st.code() == StatusCode::NotFound || st.code() == StatusCode::IoError
                   ? notFound("the run in '" + d + "' was trained on --data " + path +
                              ", which cannot be read now (" + st.message() +
                              "); give its new place with --data")
                   : st;
      if (run.data != had.data)
        return invalidArgument("--data " + path + " (" + std::to_string(run.data.bytes) +
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

  TC_RETURN_IF_ERROR(trainer.init(&artifact, exec, /*hostValues=*/o.gpu < 0));
  cfg = &trainer.config();
  std::string deviceName = "cpu";
  if (o.gpu >= 0) {
    Status st = trainer.useDevice(o.gpu);
    if (!st.isOk()) {
      *userError = st.code() == StatusCode::InvalidArgument;
      return st;
    }
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
    obs->line("device: cpu (reference executor)");
  }
  const std::vector<std::string> &names = trainer.dataInputNames();
  const std::vector<TensorType> &types = trainer.dataInputTypes();

  // The batch: windows of a token file or fixed feeds.
  std::vector<HostTensor> fixed(names.size());
  TokenData data, val;
  Rng rng;
  rng.state = run.seed * 0x9e3779b97f4a7c15ULL + 1;
  TokenInputs tok;
  LabelShift labelShift = LabelShift::Next;
  if (!run.data.path.empty()) {
    TC_RETURN_IF_ERROR(tokenInputs(names, types, &tok));
    const TensorType &t = types[static_cast<size_t>(tok.ids)];
    if ((o.batch > 0 && o.batch != t.shape[0]) || (o.seq > 0 && o.seq != t.shape[1]))
      return invalidArgument("--batch/--seq " + std::to_string(o.batch) + "x" +
                             std::to_string(o.seq) + " do not match the compiled input " +
                             shapeToString(t.shape) +
                             " (recompile with --dim batch=B --dim seq=T)");
    int bytes = run.dataDtype == "uint32" ? 4 : 2;
    TC_RETURN_IF_ERROR(data.open(run.data.path, bytes));
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
  int64_t tokensPerStep = tokensPerMicro * cfg->gradAccum;

  // Weights and the starting step.
  int64_t start = 0;
  std::string runId = newRunId();
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
  std::string saveDir = o.save.empty() ? "" : stripSlashes(o.save);
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

  MetricsFile metrics;
  if (!o.metrics.empty())
    TC_RETURN_IF_ERROR(metrics.open(o.metrics, resuming));
  EventWriter tb;
  bool tbOpen = false;
  if (!o.tensorboard.empty()) {
    TC_RETURN_IF_ERROR(tb.open(o.tensorboard));
    tbOpen = true;
  }
  FlopsReport flops;
  bool haveFlops = readFlops(artifact, &flops);
  double peak = haveFlops ? peakFor(flops, deviceName) : 0;

  *userError = false; // from here on, failures are the run's
  auto wall = [] {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  int64_t savedAt = -1;
  auto save = [&](int64_t step) -> Status {
    CheckpointMeta meta;
    meta.step = step;
    meta.rngState = rng.state;
    meta.dataPosition = data.position;
    meta.artifactHash = hash;
    meta.precision = o.refPrecision;
    meta.runId = runId;
    meta.run = run;
    std::string target = o.keepCheckpoints > 0 ? saveDir + "/" + stepFolderName(step) : saveDir;
    if (o.keepCheckpoints > 0 && !isDir(saveDir) && ::mkdir(saveDir.c_str(), 0755) != 0)
      return ioError("cannot create '" + saveDir + "': " + std::strerror(errno));
    Status st = trainer.saveCheckpoint(target, meta);
    if (!st.isOk())
      return Status(st.code(), "saving checkpoint '" + target + "': " + st.message());
    savedAt = step;
    obs->line("saved " + target + " (step " + std::to_string(step) + ")");
    if (o.keepCheckpoints > 0) {
      auto all = stepFolders(saveDir);
      for (size_t i = 0; i + static_cast<size_t>(o.keepCheckpoints) < all.size(); ++i)
        removeCheckpointDir(all[i].second);
    }
    return Status::ok();
  };
  auto validate = [&](int64_t step) -> Status {
    const TensorType &t = types[static_cast<size_t>(tok.ids)];
    double sum = 0;
    for (int64_t i = 0; i < run.evalIters; ++i) {
      std::vector<HostTensor> batch;
      std::vector<uint64_t> offsets = evalOffsets(val, t, i, run.evalIters);
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
    TC_RETURN_IF_ERROR(metrics.write(std::string("{\"schema\": \"") + kMetricsSchema +
                                     "\", \"kind\": \"val\", \"step\": " + std::to_string(step) +
                                     ", \"val_loss\": " + shortestDecimal(v.valLoss) +
                                     ", \"val_tokens\": " + std::to_string(v.valTokens) + "}"));
    if (tbOpen)
      TC_RETURN_IF_ERROR(tb.scalar("val/loss", step, v.valLoss, wall()));
    return Status::ok();
  };

  auto clock = std::chrono::steady_clock::now;
  auto t0 = clock();
  summary->first = start + 1;
  summary->last = start;
  double smooth = 0, smoothWeight = 0;
  for (int64_t step = start + 1; step <= run.steps; ++step) {
    double lr = learningRate(step, run.steps, run.lr, run.warmup, run.schedule);
    std::vector<std::vector<HostTensor>> micro(static_cast<size_t>(cfg->gradAccum));
    for (auto &mb : micro) {
      if (run.data.path.empty()) {
        mb = fixed;
        continue;
      }
      TC_RETURN_IF_ERROR(tok.fill(data, nullptr, &data, &rng, types, labelShift, &mb));
      Status st = checkInputRanges(artifact, names, mb);
      if (!st.isOk()) { // a token of the file the model cannot take: the user's input
        *userError = true;
        return invalidArgument("token file '" + run.data.path + "': " + st.message());
      }
    }
    auto ts = clock();
    StepResult r;
    Status st = trainer.step(step, lr, micro, &r);
    if (!st.isOk())
      return Status(st.code(), "step " + std::to_string(step) + ": " + st.message());
    double dt = std::chrono::duration<double>(clock() - ts).count();
    if (!std::isfinite(r.loss))
      return internalError(std::string("loss is ") + (std::isnan(r.loss) ? "nan" : "inf") +
                           " at step " + std::to_string(step));
    // The bar's loss: an exponential moving average (0.9), bias-corrected
    // as Adam's moments are, so the first steps are not pulled to 0.
    smooth = 0.9 * smooth + 0.1 * r.loss;
    smoothWeight = 0.9 * smoothWeight + 0.1;
    StepRecord rec;
    rec.step = step;
    rec.first = start + 1;
    rec.total = run.steps;
    rec.loss = r.loss;
    rec.lossSmooth = smooth / smoothWeight;
    rec.lr = lr;
    rec.gradNorm = r.gradNorm;
    rec.tokens = tokensPerStep;
    rec.tokensTotal = tokensPerStep * step;
    rec.tokensPerS = dt > 0 ? static_cast<double>(tokensPerStep) / dt : 0;
    rec.stepTimeS = dt;
    rec.elapsedS = std::chrono::duration<double>(clock() - t0).count();
    int64_t done = step - start;
    rec.etaS = rec.elapsedS / static_cast<double>(done) * static_cast<double>(run.steps - step);
    if (peak > 0 && dt > 0) {
      rec.mfu = flops.modelFlopsPerToken * rec.tokensPerS / peak;
      rec.hfu = flops.hardwareFlopsPerStep / dt / peak;
    }
    rec.periodic = o.logEvery > 0 && (step % o.logEvery == 0 || step == start + 1 ||
                                      step == run.steps);
    if (summary->last < summary->first)
      summary->firstLoss = r.loss;
    summary->last = step;
    summary->lastLoss = r.loss;
    obs->step(rec);
    TC_RETURN_IF_ERROR(metrics.write(
        std::string("{\"schema\": \"") + kMetricsSchema + "\", \"kind\": \"train\", \"step\": " +
        std::to_string(step) + ", \"loss\": " + shortestDecimal(r.loss) + ", \"loss_smooth\": " +
        shortestDecimal(rec.lossSmooth) + ", \"lr\": " + shortestDecimal(lr) +
        ", \"grad_norm\": " + shortestDecimal(r.gradNorm) + ", \"tokens\": " +
        std::to_string(rec.tokens) + ", \"tokens_total\": " + std::to_string(rec.tokensTotal) +
        ", \"tokens_per_s\": " + shortestDecimal(rec.tokensPerS) + ", \"step_time_s\": " +
        shortestDecimal(dt) + ", \"elapsed_s\": " + shortestDecimal(rec.elapsedS) +
        ", \"mfu\": " + jsonOrNull(rec.mfu, rec.mfu >= 0) + ", \"hfu\": " +
        jsonOrNull(rec.hfu, rec.hfu >= 0) + "}"));
    if (tbOpen) {
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
    if (!run.valData.path.empty() && run.evalEvery > 0 &&
        (step % run.evalEvery == 0 || step == run.steps))
      TC_RETURN_IF_ERROR(validate(step));
    if (!saveDir.empty() && o.saveEvery > 0 && step % o.saveEvery == 0)
      TC_RETURN_IF_ERROR(save(step));
    if (o.stop && o.stop->load() != 0 && step < run.steps) {
      summary->interrupted = o.stop->load();
      if (!saveDir.empty() && savedAt != step)
        TC_RETURN_IF_ERROR(save(step));
      summary->seconds = std::chrono::duration<double>(clock() - t0).count();
      return Status::ok();
    }
  }
  if (!saveDir.empty() && savedAt != run.steps)
    TC_RETURN_IF_ERROR(save(run.steps));
  summary->seconds = std::chrono::duration<double>(clock() - t0).count();
  return Status::ok();
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
#if TC_HAVE_CUDA
  std::unique_ptr<cuda::DeviceExecutor> ex;
  if (o.gpu >= 0 && a.findDeviceFunction(fn->name)) {
    cuda::ExecutorOptions eo;
    eo.device = o.gpu;
    eo.seed = static_cast<uint64_t>(o.seed);
    Status st = cuda::DeviceExecutor::create(&a, eo, &ex);
    if (!st.isOk()) {
      *userError = st.code() == StatusCode::InvalidArgument;
      return st;
    }
    obs->line("device: " + ex->deviceInfo().toString());
  } else
#endif
  {
    obs->line("device: cpu (reference executor)");
  }
  double sum = 0;
  for (int64_t i = 0; i < o.iters; ++i) {
    std::vector<HostTensor> batch, outputs;
    std::vector<uint64_t> offsets = evalOffsets(data, t, i, o.iters);
    TC_RETURN_IF_ERROR(tok.fill(data, &offsets, nullptr, nullptr, types, shift, &batch));
    Status st = checkInputRanges(a, fn->inputNames, batch);
    if (!st.isOk()) {
      *userError = true;
      return invalidArgument("token file '" + o.data + "': " + st.message());
    }
#if TC_HAVE_CUDA
    if (ex)
      st = ex->run(fn->name, batch, &outputs);
    else
#endif
      st = runFunction(a, *fn, batch, &outputs, exec);
    TC_RETURN_IF_ERROR(st);
    sum += hostTensorToDoubles(outputs[static_cast<size_t>(lossIndex)])[0];
  }
  out->loss = sum / static_cast<double>(o.iters);
  out->batches = o.iters;
  out->tokens = o.iters * t.numElements();
  return Status::ok();
}

Status generate(const Artifact &artifact, const GenerateOptions &o, std::vector<int64_t> *tokens,
                bool *userError) {
  *userError = true;
  if (o.prompt.empty())
    return invalidArgument("--generate needs a prompt of at least one token (--prompt 1,2,3)");
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    return invalidArgument("--temperature wants a number >= 0");
  if (o.topK < 0)
    return invalidArgument("--top-k wants a whole number >= 0");
  Artifact a = artifact;
  int64_t step = -1;
  if (!o.init.empty())
    TC_RETURN_IF_ERROR(loadArtifactWeights(&a, o.init, &step));
  const Function *fn = a.findFunction("infer");
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
  const TensorType &lt = fn->values[static_cast<size_t>(fn->outputs[static_cast<size_t>(logits)])];
  std::vector<TensorType> types;
  int ids = -1;
  for (size_t i = 0; i < fn->inputs.size(); ++i) {
    types.push_back(fn->values[static_cast<size_t>(fn->inputs[i])]);
    if (fn->inputNames[i] == "input_ids")
      ids = static_cast<int>(i);
  }
  if (ids < 0 && types.size() == 1)
    ids = 0;
  if (ids < 0)
    return invalidArgument("--generate needs a model input named input_ids");
  const TensorType &it = types[static_cast<size_t>(ids)];
  if (it.shape.size() != 2 || !dtypeIsInteger(it.dtype))
    return invalidArgument("--generate needs input_ids of shape [batch, seq] (the model has " +
                           typeToString(it) + ")");
  int64_t T = it.shape[1], B = it.shape[0], V = lt.shape[2];
  // Other inputs: labels (ignored by the logits; all -100 where allowed,
  // else 0) and attention_mask (ones over the context, zeros after it).
  ExecOptions exec;
  exec.precision = o.refPrecision == "f64" ? RefPrecision::F64 : RefPrecision::F32;
  exec.initSeed = o.seed;
  Rng rng;
  rng.state = o.seed * 0x9e3779b97f4a7c15ULL + 7;
  *userError = false;
  std::vector<int64_t> seqTokens = o.prompt;
  for (int64_t n = 0; n < o.maxNewTokens; ++n) {
    int64_t ctx = std::min<int64_t>(static_cast<int64_t>(seqTokens.size()), T);
    std::vector<int64_t> row(static_cast<size_t>(B * T), 0);
    for (int64_t t = 0; t < ctx; ++t)
      row[static_cast<size_t>(t)] = seqTokens[seqTokens.size() - static_cast<size_t>(ctx) +
                                              static_cast<size_t>(t)];
    std::vector<HostTensor> inputs(types.size());
    for (size_t i = 0; i < types.size(); ++i) {
      const std::string &name = fn->inputNames[i];
      if (static_cast<int>(i) == ids) {
        inputs[i] = makeHostTensorInts(types[i], row);
      } else if (name == "attention_mask") {
        std::vector<int64_t> m(static_cast<size_t>(types[i].numElements()), 0);
        for (int64_t t = 0; t < ctx && t < static_cast<int64_t>(m.size()); ++t)
          m[static_cast<size_t>(t)] = 1;
        for (int64_t b = 1; b < B; ++b)
          for (int64_t t = 0; t < T; ++t)
            m[static_cast<size_t>(b * T + t)] = 1;
        inputs[i] = makeHostTensorInts(types[i], m);
      } else if (name == "labels" && dtypeIsInteger(types[i].dtype)) {
        // Any label in range: the logits do not depend on the labels.
        inputs[i] = makeHostTensorInts(types[i], row);
      } else {
        *userError = true;
        return invalidArgument("--generate does not know what to feed the model's input '" +
                               name + "' (" + typeToString(types[i]) +
                               "): it feeds input_ids, attention_mask and labels");
      }
    }
    Status st = checkInputRanges(a, fn->inputNames, inputs);
    if (!st.isOk()) {
      *userError = true;
      return invalidArgument("--prompt: " + st.message());
    }
    std::vector<HostTensor> outputs;
    TC_RETURN_IF_ERROR(runFunction(a, *fn, inputs, &outputs, exec));
    std::vector<double> all = hostTensorToDoubles(outputs[static_cast<size_t>(logits)]);
    std::vector<double> z(all.begin() + (ctx - 1) * V, all.begin() + ctx * V);
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

} // namespace tc::rt
