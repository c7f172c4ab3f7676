//===- run_setup.cpp - a training run's set-up ----------------------------===//
//
// TrainRun::prepare: the run's configuration (the flags against a resumed
// checkpoint's), the Trainer on its device, the data (token windows of a
// file or a token source, or fixed feeds), --init / --resume, the --save
// checks and the metrics and TensorBoard files.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/session/run_internal.h"

#include <algorithm>
#include <map>
#include <unistd.h>

#include "runtime/src/base/npy.h"

namespace tc::rt {

namespace {

std::string newRunId() {
  Rng r;
  r.state = static_cast<uint64_t>(
                std::chrono::system_clock::now().time_since_epoch().count()) ^
            (static_cast<uint64_t>(::getpid()) << 32);
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(r.next()));
  return buf;
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

} // namespace tc::rt
