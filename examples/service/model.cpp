//===- model.cpp - the service's model over the tc C API -------------------===//
//
// A job is one tc_trainer_run on its own thread; its observer's step
// callback records each step's loss and speed for /train/status. Synthetic
// data is a seeded random sequence repeated (so the loss has something to
// learn), fed as a token source in memory (tc_train_options_t.data_source):
// the runtime cuts its windows as it cuts a token file's.
//
//===----------------------------------------------------------------------===//
#include "examples/service/model.h"

#include <chrono>
#include <cstdio>

namespace tc_service {
namespace {

/// The message of `st` ("" for NULL), freeing it.
std::string takeMessage(tc_status_t *st) {
  std::string m = tc_status_message(st);
  tc_status_release(st);
  return m;
}

/// A runtime failure as a reply: the request's fault (a bad option, a token
/// id the model refuses, a token file that is missing or malformed) is a
/// 400, anything else a 500. Frees `st`.
Failure failureOf(tc_status_t *st, const std::string &what) {
  bool input = tc_status_is_input_error(st) || tc_status_code(st) == TC_STATUS_INVALID_ARGUMENT;
  return Failure{input ? 400 : 500, what + ": " + takeMessage(st)};
}

double secondsNow() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

using TensorPtr = std::unique_ptr<tc_tensor_t, void (*)(tc_tensor_t *)>;
TensorPtr owned(tc_tensor_t *t) { return TensorPtr(t, tc_tensor_release); }

void printLine(void *, const char *text) { std::fprintf(stderr, "tc-service: %s\n", text); }
void printNote(void *, const char *text) { std::fprintf(stderr, "tc-service: note: %s\n", text); }

/// One input or output of an artifact's function.
struct ValueInfo {
  std::string name;
  tc_dtype_t dtype;
  std::vector<int64_t> shape;
};
using CountFn = tc_status_t *(*)(const tc_artifact_t *, const char *, size_t *);
using InfoFn = tc_status_t *(*)(const tc_artifact_t *, const char *, size_t, const char **,
                                tc_dtype_t *, size_t *, const int64_t **);

/// The inputs (tc_artifact_input_*) or outputs (tc_artifact_output_*) of `fn`.
bool valueInfos(const tc_artifact_t *a, const char *fn, CountFn count, InfoFn info,
                std::vector<ValueInfo> *out, std::string *error) {
  size_t n = 0;
  if (tc_status_t *st = count(a, fn, &n))
    return *error = takeMessage(st), false;
  for (size_t i = 0; i < n; ++i) {
    const char *name;
    tc_dtype_t dtype;
    size_t rank;
    const int64_t *shape;
    if (tc_status_t *st = info(a, fn, i, &name, &dtype, &rank, &shape))
      return *error = takeMessage(st), false;
    out->push_back({name, dtype, std::vector<int64_t>(shape, shape + rank)});
  }
  return true;
}

/// The value named `name` among `values`, else the only one that `fits`
/// (nullptr when none or several fit).
const ValueInfo *pick(const std::vector<ValueInfo> &values, const std::string &name,
                      bool (*fits)(const ValueInfo &)) {
  const ValueInfo *only = nullptr;
  int fitting = 0;
  for (const ValueInfo &v : values) {
    if (!fits(v))
      continue;
    if (v.name == name)
      return &v;
    only = &v;
    ++fitting;
  }
  return fitting == 1 ? only : nullptr;
}

/// Reads [batch, seq] from infer's input_ids and vocab from its logits
/// [batch, seq, vocab], found as the runtime's generation finds them
/// (runtime.h, "generation"): by name, else the only candidate.
bool modelShape(const tc_artifact_t *a, int64_t *batch, int64_t *seq, int64_t *vocab,
                std::string *error) {
  std::vector<ValueInfo> inputs, outputs;
  if (!valueInfos(a, "infer", tc_artifact_input_count, tc_artifact_input_info, &inputs, error) ||
      !valueInfos(a, "infer", tc_artifact_output_count, tc_artifact_output_info, &outputs, error))
    return *error = "the artifact's infer function: " + *error, false;
  const ValueInfo *ids = pick(inputs, "input_ids", [](const ValueInfo &v) {
    return v.shape.size() == 2 && !tc_dtype_is_float(v.dtype);
  });
  const ValueInfo *logits = pick(outputs, "logits", [](const ValueInfo &v) {
    return v.shape.size() == 3 && tc_dtype_is_float(v.dtype) != 0;
  });
  if (!ids || !logits)
    return *error = "tc-service serves causal LMs: the artifact's infer function needs an "
                    "integer input input_ids [batch, seq] and a float output logits [batch, "
                    "seq, vocab]",
           false;
  *batch = ids->shape[0];
  *seq = ids->shape[1];
  *vocab = logits->shape[2];
  return true;
}

/// splitmix64, for the synthetic tokens.
uint64_t nextRandom(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// `count` synthetic tokens of [0, vocab): a random sequence of 257 tokens
/// (drawn from `seed`) repeated.
std::vector<int64_t> syntheticTokens(int64_t vocab, int64_t seed, size_t count) {
  uint64_t state = static_cast<uint64_t>(seed);
  std::vector<int64_t> period(257);
  for (int64_t &t : period)
    t = static_cast<int64_t>(nextRandom(&state) % static_cast<uint64_t>(vocab));
  std::vector<int64_t> tokens(count);
  for (size_t i = 0; i < count; ++i)
    tokens[i] = period[i % period.size()];
  return tokens;
}

} // namespace

struct Model::Run {
  tc_trainer_t *trainer = nullptr;
  ~Run() { tc_trainer_release(trainer); }
};

std::unique_ptr<Model> Model::load(const std::string &path, const std::string &device,
                                   std::string *error) {
  std::unique_ptr<Model> m(new Model);
  m->path_ = path;
  m->device_ = device;
  tc_device_t dev = device == "cuda" ? TC_DEVICE_CUDA : TC_DEVICE_CPU;
  if (tc_status_t *st = tc_artifact_open(path.c_str(), &m->artifact_))
    return *error = takeMessage(st), nullptr;

  if (!modelShape(m->artifact_, &m->batch_, &m->context_, &m->vocab_, error))
    return nullptr;
  m->canTrain_ = tc_artifact_has_function(m->artifact_, "train_step") ||
                 tc_artifact_has_function(m->artifact_, "grad_step");
  if (!m->canTrain_) { // /infer from a session
    tc_session_options_t so;
    tc_session_options_initialize(&so);
    so.device = dev;
    if (tc_status_t *st = tc_session_create_from_artifact(m->artifact_, &so, &m->session_))
      return *error = takeMessage(st), nullptr;
    return m;
  }

  // The idle trainer: the artifact's weights, for eval and infer before the
  // first job. It has no data and never steps.
  tc_train_options_t o;
  tc_train_options_initialize(&o);
  o.steps = 1;
  o.log_every = 0;
  o.device = dev;
  tc_run_observer_t obs = {printLine, printNote, nullptr, nullptr, nullptr};
  auto run = std::make_shared<Run>();
  if (tc_status_t *st = tc_trainer_create(m->artifact_, &o, &obs, &run->trainer))
    return *error = takeMessage(st), nullptr;
  m->run_ = run;
  return m;
}

Model::~Model() {
  JobStatus ignored;
  Failure none;
  stopJob(&ignored, &none);
  if (job_.joinable())
    job_.join();
  run_.reset();
  tc_session_release(session_);
  tc_artifact_release(artifact_);
}

std::shared_ptr<Model::Run> Model::current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return run_;
}

bool Model::infer(const std::vector<int64_t> &tokens, int64_t newTokens,
                  std::vector<float> *logits, std::vector<int64_t> *generated,
                  Failure *failure) {
  // One call for both: the logits and the tokens come from the same weights
  // even while a job steps.
  std::shared_ptr<Run> run = current();
  tc_tensor_t *rawLogits = nullptr, *rawTokens = nullptr;
  tc_status_t *st =
      run ? tc_trainer_infer_greedy(run->trainer, tokens.data(), tokens.size(), newTokens,
                                    &rawLogits, &rawTokens)
          : tc_session_infer_greedy(session_, tokens.data(), tokens.size(), newTokens, &rawLogits,
                                    &rawTokens);
  if (st)
    return *failure = failureOf(st, "inference"), false;
  TensorPtr lg = owned(rawLogits), all = owned(rawTokens);
  const float *data = static_cast<const float *>(tc_tensor_data(lg.get()));
  logits->assign(data, data + tc_tensor_element_count(lg.get()));
  const int64_t *ids = static_cast<const int64_t *>(tc_tensor_data(all.get()));
  size_t n = tc_tensor_element_count(all.get());
  generated->assign(ids + (n > tokens.size() ? tokens.size() : n), ids + n);
  return true;
}

bool Model::eval(const std::vector<int64_t> &tokens, double *loss, int64_t *evaluated,
                 Failure *failure) {
  std::shared_ptr<Run> run = current();
  if (!run)
    return *failure = {409, "/eval needs an artifact compiled with tc-compile --train (its "
                            "eval_step); " + path_ + " has none"},
           false;
  tc_token_source_t *source = nullptr;
  if (tc_status_t *st = tc_token_source_from_memory(tokens.data(), tokens.size(), &source))
    return *failure = failureOf(st, "tokens"), false;
  tc_status_t *st = tc_trainer_eval(run->trainer, source, 1, loss, evaluated);
  tc_token_source_release(source);
  if (st)
    return *failure = failureOf(st, "evaluation"), false;
  return true;
}

void Model::onStep(void *user, const tc_step_metrics_t *m) {
  Model *self = static_cast<Model *>(user);
  std::lock_guard<std::mutex> lock(self->mutex_);
  self->losses_.push_back(m->loss);
  self->status_.step = m->step;
  self->status_.loss = m->loss;
  self->status_.tokensPerS = m->tokens_per_s;
}

bool Model::startJob(const JobConfig &c, Failure *failure) {
  std::lock_guard<std::mutex> serial(jobMutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (status_.state == "running")
      return *failure = {409, "a training job is running (step " + std::to_string(status_.step) +
                                  " of " + std::to_string(status_.steps) +
                                  "); POST /train/stop first"},
             false;
  }
  if (!canTrain_)
    return *failure = {409, "the artifact " + path_ +
                                " was compiled without --train: it has no training step"},
           false;
  if (job_.joinable())
    job_.join(); // the last job, finished by itself

  auto run = std::make_shared<Run>();
  tc_token_source_t *synthetic = nullptr;
  if (c.data.empty()) {
    std::vector<int64_t> tokens =
        syntheticTokens(vocab_, c.seed, static_cast<size_t>(batch_ * (context_ + 1)) * 64);
    if (tc_status_t *st = tc_token_source_from_memory(tokens.data(), tokens.size(), &synthetic))
      return *failure = failureOf(st, "the synthetic tokens"), false;
  }
  tc_train_options_t o;
  tc_train_options_initialize(&o);
  o.steps = c.steps;
  o.lr = c.lr;
  o.warmup = c.warmup;
  o.schedule = c.schedule.c_str();
  o.seed = c.seed;
  if (synthetic) {
    o.data_source = synthetic;
  } else {
    o.data = c.data.c_str();
    o.data_dtype = c.dataDtype.c_str();
  }
  o.log_every = 0;
  o.device = device_ == "cuda" ? TC_DEVICE_CUDA : TC_DEVICE_CPU;
  tc_run_observer_t obs = {printLine, printNote, onStep, nullptr, this};
  tc_status_t *st = tc_trainer_create(artifact_, &o, &obs, &run->trainer);
  tc_token_source_release(synthetic); // the trainer keeps its own copy
  if (st)
    return *failure = failureOf(st, "the training job"), false;

  std::lock_guard<std::mutex> lock(mutex_);
  run_ = run;
  status_ = JobStatus();
  status_.state = "running";
  status_.steps = c.steps;
  status_.data = c.data.empty() ? "synthetic" : c.data;
  losses_.clear();
  jobStart_ = secondsNow();
  job_ = std::thread(&Model::runJob, this, run);
  return true;
}

void Model::runJob(std::shared_ptr<Run> run) {
  tc_train_summary_t summary;
  tc_status_t *st = tc_trainer_run(run->trainer, &summary);
  std::lock_guard<std::mutex> lock(mutex_);
  status_.elapsedS = secondsNow() - jobStart_;
  if (st) {
    status_.state = "failed";
    status_.error = takeMessage(st);
  } else {
    status_.state = summary.interrupted ? "stopped" : "finished";
  }
}

bool Model::stopJob(JobStatus *after, Failure *failure) {
  std::lock_guard<std::mutex> serial(jobMutex_);
  std::shared_ptr<Run> run;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (status_.state != "running")
      return *failure = {409, status_.state == "idle"
                                  ? "no training job is running (none has started)"
                                  : "no training job is running (the last one " +
                                        status_.state + ")"},
             false;
    run = run_;
  }
  tc_trainer_request_stop(run->trainer);
  job_.join();
  *after = status();
  return true;
}

JobStatus Model::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  JobStatus s = status_;
  if (s.state == "running")
    s.elapsedS = secondsNow() - jobStart_;
  return s;
}

std::vector<double> Model::losses() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return losses_;
}

} // namespace tc_service
