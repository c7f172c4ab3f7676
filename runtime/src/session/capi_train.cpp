//===- capi_train.cpp - the C API: trainers and runs ----------------------===//
//
// A tc_trainer_t is a TrainRun (run.h) behind one mutex. tc_trainer_run
// holds the mutex during each step; between two steps it lets every call
// that is waiting for the mutex go first (a counter of waiters and a
// condition variable), so a call made during a step runs right after it.
// The progress snapshot has its own small lock and never waits for a step.
//
//===----------------------------------------------------------------------===//
#include "tc/runtime.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <new>

#include "runtime/src/schema/artifact.h"
#include "runtime/src/base/host_tensor.h"
#include "runtime/src/cpu/executor.h"
#include "runtime/src/session/backend.h"
#include "runtime/src/session/capi.h"
#include "runtime/src/session/export.h"
#include "runtime/src/session/run.h"
#include "runtime/src/session/trainer.h"

using namespace tc::rt;
using namespace tc::rt::capi;

namespace {

tc_step_metrics_t metricsOf(const StepRecord &r) {
  tc_step_metrics_t m;
  std::memset(&m, 0, sizeof m);
  m.step = r.step;
  m.first_step = r.first;
  m.total_steps = r.total;
  m.loss = r.loss;
  m.loss_smooth = r.lossSmooth;
  m.lr = r.lr;
  m.grad_norm = r.gradNorm;
  m.has_grad_norm = std::isfinite(r.gradNorm) ? 1 : 0;
  m.tokens = r.tokens;
  m.tokens_total = r.tokensTotal;
  m.tokens_per_s = r.tokensPerS;
  m.step_time_s = r.stepTimeS;
  m.elapsed_s = r.elapsedS;
  m.eta_s = r.etaS;
  m.mfu = r.mfu;
  m.hfu = r.hfu;
  m.periodic = r.periodic ? 1 : 0;
  m.skipped = r.skipped ? 1 : 0;
  m.loss_scale = r.lossScale;
  m.has_fp8_saturated = r.fp8Saturated >= 0 ? 1 : 0;
  m.fp8_saturated = r.fp8Saturated >= 0 ? static_cast<int64_t>(r.fp8Saturated) : 0;
  return m;
}

/// A RunObserver forwarding to the C callbacks, keeping the last step for
/// tc_trainer_progress.
class CObserver : public RunObserver {
public:
  tc_run_observer_t c{};
  std::mutex progressMutex;
  tc_step_metrics_t last{};
  bool hasLast = false;
  int64_t startStep = 0, totalSteps = 0; ///< before any step of this process

  void line(const std::string &text) override {
    if (c.line)
      c.line(c.user, text.c_str());
  }
  void note(const std::string &text) override {
    if (c.note)
      c.note(c.user, text.c_str());
  }
  void step(const StepRecord &r) override {
    tc_step_metrics_t m = metricsOf(r);
    {
      std::lock_guard<std::mutex> g(progressMutex);
      last = m;
      hasLast = true;
    }
    if (c.step)
      c.step(c.user, &m);
  }
  void val(const ValRecord &v) override {
    if (!c.val)
      return;
    tc_val_metrics_t m{v.step, v.valLoss, v.valTokens};
    c.val(c.user, &m);
  }
};

/// The C training options (NULL: the defaults) as the runtime's; an error
/// names the field.
tc_status_t *trainOptionsOf(const tc_train_options_t *options, TrainOptions *o) {
  tc_train_options_t c;
  tc_train_options_initialize(&c);
  if (options)
    c = *options;
  if (c.steps < -1)
    return invalid("options->steps is " + std::to_string(c.steps) + ": it must be >= 0 (or -1)");
  if (c.num_feeds && !c.feeds)
    return invalid("options->feeds is NULL");
  if (c.device != TC_DEVICE_CPU && c.device != TC_DEVICE_CUDA)
    return invalid("options->device is " + std::to_string(c.device) + ": not a tc_device_t");
  if (c.device == TC_DEVICE_CUDA && c.device_ordinal < 0)
    return invalid("options->device_ordinal is " + std::to_string(c.device_ordinal) +
                   ": a GPU ordinal is >= 0");
  if (c.ref_precision != TC_REF_PRECISION_F32 && c.ref_precision != TC_REF_PRECISION_F64)
    return invalid("options->ref_precision is " + std::to_string(c.ref_precision) +
                   ": not a tc_ref_precision_t");
  if (c.save_every < 0 || c.keep_checkpoints < 0 || c.log_every < 0)
    return invalid(std::string("options->") +
                   (c.save_every < 0 ? "save_every" : c.keep_checkpoints < 0 ? "keep_checkpoints"
                                                                            : "log_every") +
                   " must be >= 0");
  o->steps = c.steps;
  o->lr = c.lr;
  o->warmup = c.warmup;
  o->schedule = str(c.schedule);
  o->seed = c.seed;
  o->data = str(c.data);
  o->dataDtype = str(c.data_dtype);
  o->labels = str(c.labels);
  o->dataSource = c.data_source ? &c.data_source->data : nullptr;
  for (size_t i = 0; i < c.num_feeds; ++i) {
    if (!c.feeds[i].name || !c.feeds[i].path)
      return invalid("options->feeds[" + std::to_string(i) + "] has a NULL name or path");
    o->feeds.push_back({c.feeds[i].name, c.feeds[i].path});
  }
  o->batch = c.batch;
  o->seq = c.seq;
  o->save = str(c.save);
  o->saveEvery = c.save_every;
  o->overwrite = c.overwrite != 0;
  o->keepCheckpoints = c.keep_checkpoints;
  o->resume = str(c.resume);
  o->init = str(c.init);
  o->valData = str(c.val_data);
  o->evalEvery = c.eval_every;
  o->evalIters = c.eval_iters;
  o->metrics = str(c.metrics);
  o->tensorboard = str(c.tensorboard);
  o->logEvery = c.log_every;
  o->refPrecision = c.ref_precision == TC_REF_PRECISION_F64 ? "f64" : "f32";
  o->device.gpu = c.device == TC_DEVICE_CUDA ? c.device_ordinal : -1;
  o->device.cuda = cudaOptionsOf(c.cuda);
  if (c.should_stop) {
    int (*fn)(void *) = c.should_stop;
    void *user = c.stop_user;
    o->stop = [fn, user] { return fn(user); };
  }
  return nullptr;
}

/// A checkpoint folder's (newest) model.safetensors, or the file itself.
std::string weightsFile(const std::string &weights) {
  std::string dir = weights;
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  CheckpointMeta meta;
  if (readCheckpointMeta(dir, &meta).isOk())
    return dir + "/model.safetensors";
  return weights;
}

} // namespace

struct tc_trainer_t {
  std::shared_ptr<const Artifact> artifact; ///< keeps the run's artifact alive
  CObserver observer;
  TrainRun run;
  std::mutex mutex;                 ///< held by every call and by each step
  std::mutex waitMutex;             ///< guards `waiting` for `waitDone`
  std::condition_variable waitDone; ///< signalled as waiting callers get `mutex`
  int waiting = 0;
  std::atomic<bool> running{false}, stopRequested{false};
  /// A CPU copy of the live weights for infer when the GPU program has none
  /// (made on demand, refreshed at every use).
  std::unique_ptr<CpuExecutor> cpuInfer;
};

namespace {

/// Holds the trainer for one call, registered as waiting until it has it.
class Hold {
public:
  explicit Hold(tc_trainer_t *t) : t_(t) {
    {
      std::lock_guard<std::mutex> g(t->waitMutex);
      ++t->waiting;
    }
    lock_ = std::unique_lock<std::mutex>(t->mutex);
    {
      std::lock_guard<std::mutex> g(t->waitMutex);
      --t->waiting;
    }
    t->waitDone.notify_all();
  }

private:
  tc_trainer_t *t_;
  std::unique_lock<std::mutex> lock_;
};

tc_status_t *notWhileRunning(const tc_trainer_t *t, const char *what) {
  if (t->running.load())
    return makeStatus(TC_STATUS_FAILED_PRECONDITION,
                      std::string(what) + " changes the training state: not while tc_trainer_run "
                                          "runs (tc_trainer_request_stop first)");
  return nullptr;
}

/// The executor that runs `artifact`'s infer on the live weights: the
/// trainer's own, or a CPU copy of its model entries when its GPU program
/// has no infer function.
tc_status_t *inferExecutor(tc_trainer_t *t, Executor **out) {
  Executor &ex = t->run.trainer().executor();
  if (ex.hasFunction("infer") || !t->artifact->findFunction("infer")) {
    *out = &ex;
    return nullptr;
  }
  if (!t->cpuInfer)
    if (tc_status_t *st = toC(CpuExecutor::create(t->artifact.get(), ExecOptions(), &t->cpuInfer)))
      return st;
  for (const Parameter &p : t->artifact->params) {
    if (p.kind == ParamKind::OptimizerState)
      continue;
    HostTensor v;
    if (tc_status_t *st = toC(ex.getEntry(p.name, &v)))
      return st;
    if (tc_status_t *st = toC(t->cpuInfer->setEntry(p.name, v)))
      return st;
  }
  *out = t->cpuInfer.get();
  return nullptr;
}

void summaryOf(const TrainSummary &sum, tc_train_summary_t *out) {
  if (!out)
    return;
  out->first_step = sum.first;
  out->last_step = sum.last;
  out->first_loss = sum.firstLoss;
  out->last_loss = sum.lastLoss;
  out->seconds = sum.seconds;
  out->interrupted = sum.interrupted;
}

tc_status_t *stepOut(const Status &st, bool inputError, const StepRecord &rec,
                     tc_step_metrics_t *out) {
  if (!st.isOk())
    return toC(st, inputError);
  if (out)
    *out = metricsOf(rec);
  return nullptr;
}

} // namespace

extern "C" {

void tc_train_options_initialize(tc_train_options_t *out_options) {
  if (!out_options)
    return;
  std::memset(out_options, 0, sizeof *out_options);
  tc_train_options_t &o = *out_options;
  o.steps = -1;
  o.lr = -1;
  o.warmup = -1;
  o.seed = -1;
  o.batch = -1;
  o.seq = -1;
  o.eval_every = -1;
  o.eval_iters = -1;
  o.log_every = 10;
  o.device = TC_DEVICE_CPU;
  o.ref_precision = TC_REF_PRECISION_F32;
  initializeCudaOptions(&o.cuda);
}

void tc_eval_options_initialize(tc_eval_options_t *out_options) {
  if (!out_options)
    return;
  std::memset(out_options, 0, sizeof *out_options);
  out_options->iters = 20;
  out_options->seed = 1337;
  out_options->device = TC_DEVICE_CPU;
  out_options->ref_precision = TC_REF_PRECISION_F32;
  initializeCudaOptions(&out_options->cuda);
}

tc_status_t *tc_trainer_create(const tc_artifact_t *artifact, const tc_train_options_t *options,
                               const tc_run_observer_t *observer, tc_trainer_t **out_trainer) {
  if (!out_trainer)
    return invalid("out_trainer is NULL");
  *out_trainer = nullptr;
  if (!artifact)
    return invalid("artifact is NULL");
  TrainOptions o;
  if (tc_status_t *st = trainOptionsOf(options, &o))
    return st;
  std::unique_ptr<tc_trainer_t> t(new (std::nothrow) tc_trainer_t);
  if (!t)
    return makeStatus(TC_STATUS_RESOURCE_EXHAUSTED, "out of memory creating a trainer");
  t->artifact = artifact->artifact;
  if (observer)
    t->observer.c = *observer;
  bool inputError = false;
  try {
    if (tc_status_t *st = toC(t->run.prepare(t->artifact.get(), artifact->path, o, &t->observer,
                                             /*needSource=*/false, &inputError),
                              &inputError))
      return st;
  } catch (const std::bad_alloc &) {
    return makeStatus(TC_STATUS_RESOURCE_EXHAUSTED, "out of memory creating a trainer");
  }
  t->observer.startStep = t->run.currentStep();
  t->observer.totalSteps = t->run.totalSteps();
  *out_trainer = t.release();
  return nullptr;
}

void tc_trainer_release(tc_trainer_t *trainer) { delete trainer; }

tc_status_t *tc_trainer_run(tc_trainer_t *trainer, tc_train_summary_t *out_summary) {
  if (!trainer)
    return invalid("trainer is NULL");
  if (out_summary)
    std::memset(out_summary, 0, sizeof *out_summary);
  if (trainer->running.exchange(true))
    return makeStatus(TC_STATUS_FAILED_PRECONDITION,
                      "tc_trainer_run is running already on this trainer");
  std::unique_lock<std::mutex> lock(trainer->mutex);
  auto between = [&] {
    // Let every caller waiting now have the trainer, then take it back.
    lock.unlock();
    {
      std::unique_lock<std::mutex> g(trainer->waitMutex);
      trainer->waitDone.wait(g, [&] { return trainer->waiting == 0; });
    }
    lock.lock();
  };
  auto stop = [&] { return trainer->stopRequested.exchange(false) ? -1 : 0; };
  TrainSummary sum;
  bool inputError = false;
  Status st = trainer->run.run(&sum, &inputError, stop, between);
  trainer->running.store(false);
  if (!st.isOk())
    return toC(st, inputError);
  summaryOf(sum, out_summary);
  return nullptr;
}

void tc_trainer_request_stop(tc_trainer_t *trainer) {
  if (trainer)
    trainer->stopRequested.store(true);
}

tc_status_t *tc_trainer_step(tc_trainer_t *trainer, tc_step_metrics_t *out_metrics) {
  if (!trainer)
    return invalid("trainer is NULL");
  Hold hold(trainer);
  if (tc_status_t *st = notWhileRunning(trainer, "tc_trainer_step"))
    return st;
  StepRecord rec;
  bool inputError = false;
  Status st = trainer->run.step(&rec, &inputError);
  return stepOut(st, inputError, rec, out_metrics);
}

tc_status_t *tc_trainer_step_inputs(tc_trainer_t *trainer, const tc_tensor_view_t *inputs,
                                    size_t num_inputs, tc_step_metrics_t *out_metrics) {
  if (!trainer)
    return invalid("trainer is NULL");
  if (num_inputs && !inputs)
    return invalid("inputs is NULL");
  Hold hold(trainer);
  if (tc_status_t *st = notWhileRunning(trainer, "tc_trainer_step_inputs"))
    return st;
  const std::vector<std::string> &names = trainer->run.dataInputNames();
  const std::vector<TensorType> &types = trainer->run.dataInputTypes();
  size_t accum = static_cast<size_t>(trainer->run.trainer().config().gradAccum);
  std::vector<std::vector<HostTensor>> micro(accum, std::vector<HostTensor>(names.size()));
  std::vector<size_t> seen(names.size(), 0);
  for (size_t i = 0; i < num_inputs; ++i) {
    std::string what = "inputs[" + std::to_string(i) + "]";
    if (!inputs[i].name)
      return invalid(what + " has no name");
    size_t slot = std::find(names.begin(), names.end(), inputs[i].name) - names.begin();
    if (slot == names.size())
      return invalid(what + ": the training step has no input '" + inputs[i].name + "'");
    if (seen[slot] == accum)
      return invalid(what + ": input '" + inputs[i].name + "' is given more than grad_accum = " +
                     std::to_string(accum) + " times");
    HostTensor &t = micro[seen[slot]++][slot];
    if (tc_status_t *st = fromView(&inputs[i], what, &t))
      return st;
    if (t.type != types[slot])
      return invalid(what + " '" + inputs[i].name + "': expected " + typeToString(types[slot]) +
                     ", got " + typeToString(t.type));
    if (tc_status_t *st = toC(checkHostTensor(t, what + " '" + inputs[i].name + "'"), true))
      return st;
  }
  for (size_t k = 0; k < names.size(); ++k)
    if (seen[k] != accum)
      return invalid("input '" + names[k] + "' is given " + std::to_string(seen[k]) +
                     " times; a step takes it grad_accum = " + std::to_string(accum) + " times");
  for (const std::vector<HostTensor> &mb : micro)
    if (tc_status_t *st = toC(checkInputRanges(*trainer->artifact, names, mb), true))
      return st;
  StepRecord rec;
  bool inputError = false;
  Status st = trainer->run.stepWith(micro, &rec, &inputError);
  return stepOut(st, inputError, rec, out_metrics);
}

tc_status_t *tc_trainer_progress(tc_trainer_t *trainer, tc_trainer_progress_t *out_progress) {
  if (!trainer)
    return invalid("trainer is NULL");
  if (!out_progress)
    return invalid("out_progress is NULL");
  std::memset(out_progress, 0, sizeof *out_progress);
  out_progress->running = trainer->running.load() ? 1 : 0;
  out_progress->stop_requested = trainer->stopRequested.load() ? 1 : 0;
  std::lock_guard<std::mutex> g(trainer->observer.progressMutex);
  out_progress->has_last = trainer->observer.hasLast ? 1 : 0;
  out_progress->last = trainer->observer.last;
  // The step and total come from the last record (a step in flight is not
  // counted): reading the run itself would wait for the step.
  out_progress->step =
      trainer->observer.hasLast ? trainer->observer.last.step : trainer->observer.startStep;
  out_progress->total_steps = trainer->observer.hasLast ? trainer->observer.last.total_steps
                                                        : trainer->observer.totalSteps;
  return nullptr;
}

tc_status_t *tc_trainer_next_logits(tc_trainer_t *trainer, const int64_t *context,
                                    size_t context_length, tc_tensor_t **out_logits) {
  if (!out_logits)
    return invalid("out_logits is NULL");
  *out_logits = nullptr;
  if (!trainer)
    return invalid("trainer is NULL");
  if (context_length && !context)
    return invalid("context is NULL");
  Hold hold(trainer);
  Executor *ex = nullptr;
  if (tc_status_t *st = inferExecutor(trainer, &ex))
    return st;
  HostTensor logits;
  bool inputError = false;
  if (tc_status_t *st = toC(nextLogits(*trainer->artifact, *ex,
                                       std::vector<int64_t>(context, context + context_length),
                                       &logits, &inputError),
                            &inputError))
    return st;
  *out_logits = newTensor("logits", logits);
  return *out_logits ? nullptr : makeStatus(TC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
}

tc_status_t *tc_trainer_generate(tc_trainer_t *trainer, const tc_generate_options_t *options,
                                 const int64_t *prompt, size_t prompt_length,
                                 tc_tensor_t **out_tokens) {
  if (!out_tokens)
    return invalid("out_tokens is NULL");
  *out_tokens = nullptr;
  if (!trainer)
    return invalid("trainer is NULL");
  GenerateOptions g;
  if (tc_status_t *st = generateOptionsOf(options, prompt, prompt_length, &g))
    return st;
  Hold hold(trainer);
  Executor *ex = nullptr;
  if (tc_status_t *st = inferExecutor(trainer, &ex))
    return st;
  std::vector<int64_t> tokens;
  bool inputError = false;
  if (tc_status_t *st = toC(generateWith(*trainer->artifact, *ex, g, &tokens, &inputError),
                            &inputError))
    return st;
  return tokensTensor(tokens, out_tokens);
}

tc_status_t *tc_trainer_infer_greedy(tc_trainer_t *trainer, const int64_t *prompt,
                                     size_t prompt_length, int64_t max_new_tokens,
                                     tc_tensor_t **out_logits, tc_tensor_t **out_tokens) {
  if (tc_status_t *st = inferArguments(prompt, prompt_length, out_logits, out_tokens))
    return st;
  if (!trainer)
    return invalid("trainer is NULL");
  Hold hold(trainer); // one hold: no step between the logits and the tokens
  Executor *ex = nullptr;
  if (tc_status_t *st = inferExecutor(trainer, &ex))
    return st;
  HostTensor logits;
  std::vector<int64_t> tokens;
  bool inputError = false;
  if (tc_status_t *st = toC(inferGreedy(*trainer->artifact, *ex,
                                        std::vector<int64_t>(prompt, prompt + prompt_length),
                                        max_new_tokens, &logits, &tokens, &inputError),
                            &inputError))
    return st;
  return inferResult(logits, tokens, defaultAllocator(), out_logits, out_tokens);
}

tc_status_t *tc_trainer_learning_rate(tc_trainer_t *trainer, int64_t step, double *out_lr) {
  if (!trainer)
    return invalid("trainer is NULL");
  if (!out_lr)
    return invalid("out_lr is NULL");
  if (step < 0)
    return invalid("step is " + std::to_string(step) + ": it must be >= 1 (or 0: the next)");
  Hold hold(trainer);
  *out_lr = trainer->run.learningRateAt(step == 0 ? trainer->run.currentStep() + 1 : step);
  return nullptr;
}

tc_status_t *tc_trainer_set_learning_rate(tc_trainer_t *trainer, double lr, int64_t warmup,
                                          const char *schedule) {
  if (!trainer)
    return invalid("trainer is NULL");
  Hold hold(trainer);
  if (tc_status_t *st = notWhileRunning(trainer, "tc_trainer_set_learning_rate"))
    return st;
  return toC(trainer->run.setSchedule(lr, warmup, str(schedule)), true);
}

tc_status_t *tc_trainer_get_parameter(tc_trainer_t *trainer, const char *name,
                                      tc_tensor_t **out_value) {
  if (!out_value)
    return invalid("out_value is NULL");
  *out_value = nullptr;
  if (!trainer)
    return invalid("trainer is NULL");
  if (!name)
    return invalid("name is NULL");
  Hold hold(trainer);
  HostTensor v;
  if (tc_status_t *st = toC(trainer->run.trainer().getEntry(name, &v), true))
    return st;
  *out_value = newTensor(name, v);
  return *out_value ? nullptr : makeStatus(TC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
}

tc_status_t *tc_trainer_set_parameter(tc_trainer_t *trainer, const tc_tensor_view_t *value) {
  if (!trainer)
    return invalid("trainer is NULL");
  HostTensor v;
  if (tc_status_t *st = fromView(value, "value", &v))
    return st;
  if (!value->name)
    return invalid("value has no name (the entry to replace)");
  Hold hold(trainer);
  if (tc_status_t *st = notWhileRunning(trainer, "tc_trainer_set_parameter"))
    return st;
  return toC(trainer->run.trainer().setEntry(value->name, v), true);
}

tc_status_t *tc_trainer_save(tc_trainer_t *trainer, const char *dir) {
  if (!trainer)
    return invalid("trainer is NULL");
  if (!dir || !*dir)
    return invalid("dir is NULL or empty");
  Hold hold(trainer);
  return toC(trainer->run.saveTo(dir));
}

tc_status_t *tc_trainer_load_checkpoint(tc_trainer_t *trainer, const char *dir) {
  if (!trainer)
    return invalid("trainer is NULL");
  if (!dir)
    return invalid("dir is NULL");
  Hold hold(trainer);
  if (tc_status_t *st = notWhileRunning(trainer, "tc_trainer_load_checkpoint"))
    return st;
  return toC(trainer->run.loadCheckpoint(dir), true);
}

tc_status_t *tc_trainer_load_weights(tc_trainer_t *trainer, const char *weights) {
  if (!trainer)
    return invalid("trainer is NULL");
  if (!weights)
    return invalid("weights is NULL");
  Hold hold(trainer);
  if (tc_status_t *st = notWhileRunning(trainer, "tc_trainer_load_weights"))
    return st;
  return toC(trainer->run.trainer().loadWeights(weightsFile(weights)), true);
}

tc_status_t *tc_run_train(const tc_artifact_t *artifact, const tc_train_options_t *options,
                          const tc_run_observer_t *observer, tc_train_summary_t *out_summary) {
  if (out_summary)
    std::memset(out_summary, 0, sizeof *out_summary);
  if (!artifact)
    return invalid("artifact is NULL");
  TrainOptions o;
  if (tc_status_t *st = trainOptionsOf(options, &o))
    return st;
  CObserver obs;
  if (observer)
    obs.c = *observer;
  TrainSummary sum;
  bool inputError = false;
  if (tc_status_t *st = toC(train(*artifact->artifact, artifact->path, o, &obs, &sum,
                                  &inputError),
                            &inputError))
    return st;
  summaryOf(sum, out_summary);
  return nullptr;
}

void tc_check_options_initialize(tc_check_options_t *out_options) {
  if (!out_options)
    return;
  std::memset(out_options, 0, sizeof *out_options);
}

tc_status_t *tc_run_check(const tc_artifact_t *artifact, const tc_train_options_t *train,
                          const tc_check_options_t *options, const tc_run_observer_t *observer,
                          char **out_report, int64_t *out_beyond) {
  if (!out_report || !out_beyond)
    return invalid("out_report or out_beyond is NULL");
  *out_report = nullptr;
  *out_beyond = 0;
  if (!artifact)
    return invalid("artifact is NULL");
  TrainOptions o;
  if (tc_status_t *st = trainOptionsOf(train, &o))
    return st;
  CheckOptions c;
  if (options) {
    c.function = options->function ? options->function : "";
    if (!(options->tolerance >= 0))
      return invalid("tolerance must be >= 0");
    c.tolerance = options->tolerance;
  }
  CObserver obs;
  if (observer)
    obs.c = *observer;
  TrainRun run;
  CheckReport report;
  bool inputError = false;
  Status st = run.prepare(artifact->artifact.get(), artifact->path, o, &obs, /*needSource=*/true,
                          &inputError);
  if (st.isOk())
    st = run.check(c, &report, &inputError);
  if (tc_status_t *s = toC(st, &inputError))
    return s;
  *out_report = copyString(report.text());
  *out_beyond = report.beyond;
  return nullptr;
}

tc_status_t *tc_run_eval(const tc_artifact_t *artifact, const tc_eval_options_t *options,
                         const tc_run_observer_t *observer, tc_eval_result_t *out_result) {
  if (!out_result)
    return invalid("out_result is NULL");
  std::memset(out_result, 0, sizeof *out_result);
  if (!artifact)
    return invalid("artifact is NULL");
  tc_eval_options_t c;
  tc_eval_options_initialize(&c);
  if (options)
    c = *options;
  if (!c.data)
    return invalid("options->data is NULL: evaluation needs a token file");
  if (c.device != TC_DEVICE_CPU && c.device != TC_DEVICE_CUDA)
    return invalid("options->device is " + std::to_string(c.device) + ": not a tc_device_t");
  EvalDataOptions e;
  e.data = c.data;
  if (c.data_dtype)
    e.dataDtype = c.data_dtype;
  e.labels = str(c.labels);
  e.init = str(c.init);
  e.iters = c.iters;
  e.refPrecision = c.ref_precision == TC_REF_PRECISION_F64 ? "f64" : "f32";
  e.device.gpu = c.device == TC_DEVICE_CUDA ? c.device_ordinal : -1;
  e.device.cuda = cudaOptionsOf(c.cuda);
  e.seed = c.seed;
  CObserver obs;
  if (observer)
    obs.c = *observer;
  EvalDataResult r;
  bool inputError = false;
  if (tc_status_t *st = toC(evaluateData(*artifact->artifact, e, &obs, &r, &inputError),
                            &inputError))
    return st;
  out_result->loss = r.loss;
  out_result->tokens = r.tokens;
  out_result->batches = r.batches;
  out_result->step = r.step;
  return nullptr;
}

void tc_export_options_initialize(tc_export_options_t *out_options) {
  if (!out_options)
    return;
  std::memset(out_options, 0, sizeof *out_options);
  out_options->seed = 1337;
}

tc_status_t *tc_run_export(const tc_artifact_t *artifact, const tc_export_options_t *options) {
  if (!artifact)
    return invalid("artifact is NULL");
  if (!options || !options->precision)
    return invalid(std::string("options->precision is NULL: give one of ") + kExportPrecisions);
  ExportOptions o;
  o.onnxPath = str(options->onnx);
  o.safetensorsPath = str(options->safetensors);
  o.precision = options->precision;
  o.init = str(options->init);
  o.seed = static_cast<uint64_t>(options->seed);
  return toC(exportModel(*artifact->artifact, o), /*inputError=*/true);
}

tc_status_t *tc_trainer_eval(tc_trainer_t *trainer, const tc_token_source_t *source,
                             int64_t iters, double *out_loss, int64_t *out_tokens) {
  if (!trainer)
    return invalid("trainer is NULL");
  if (!source)
    return invalid("source is NULL");
  if (!out_loss)
    return invalid("out_loss is NULL");
  if (iters < 1)
    return invalid("iters is " + std::to_string(iters) + ": it must be >= 1");
  Hold hold(trainer);
  bool inputError = false;
  return toC(trainer->run.evaluate(source->data, iters, out_loss, out_tokens, &inputError),
             &inputError);
}

} // extern "C"
