//===- run_loop.cpp - the training loop -----------------------------------===//
//
// A TrainRun's steps: the micro-batches of a step from the run's data or
// the caller's, the step itself, its record (observer, metrics, TensorBoard),
// validation and --save-every after it, and run() to the planned total.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/session/run_internal.h"

#include <cmath>

namespace tc::rt {

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
  if (!S.started) {
    S.started = true;
    S.t0 = std::chrono::steady_clock::now();
  }
  std::vector<std::vector<HostTensor>> micro;
  TC_RETURN_IF_ERROR(nextMicroBatches(&micro, userError));
  return stepWith(micro, rec, userError);
}

Status TrainRun::nextMicroBatches(std::vector<std::vector<HostTensor>> *micro, bool *userError) {
  State &S = *s_;
  *userError = false;
  if (S.noSource)
    return failedPrecondition("the run has no data (--data or --feed): give each step its "
                              "inputs");
  const Trainer &trainer = trainer_;
  const std::vector<std::string> &names = trainer.dataInputNames();
  const std::vector<TensorType> &types = trainer.dataInputTypes();
  micro->assign(static_cast<size_t>(trainer.config().gradAccum), {});
  for (auto &mb : *micro) {
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
  return Status::ok();
}

Status TrainRun::stepWith(const std::vector<std::vector<HostTensor>> &micro, StepRecord *rec,
                          bool *userError) {
  *userError = false;
  InFlight f;
  TC_RETURN_IF_ERROR(submitStep(micro, &f));
  return completeStep(f, Clock::time_point(), rec, userError);
}

Status TrainRun::submitStep(const std::vector<std::vector<HostTensor>> &micro, InFlight *f) {
  State &S = *s_;
  if (!S.started) {
    S.started = true;
    S.t0 = Clock::now();
  }
  f->step = step_ + 1 + inFlight_;
  f->lr = learningRateAt(f->step);
  f->submitted = Clock::now();
  Status st = trainer_.submitStep(f->step, f->lr, micro, &f->ticket);
  if (!st.isOk())
    return Status(st.code(), "step " + std::to_string(f->step) + ": " + st.message());
  ++inFlight_;
  return Status::ok();
}

Status TrainRun::completeStep(const InFlight &f, Clock::time_point previousDone, StepRecord *rec,
                              bool *userError) {
  *userError = false;
  StepResult r;
  Status st = trainer_.collectStep(f.ticket, &r);
  --inFlight_;
  Clock::time_point done = Clock::now();
  lastDone_ = done;
  if (!st.isOk())
    return Status(st.code(), "step " + std::to_string(f.step) + ": " + st.message());
  // The step's time: from its submission, or from the previous step's end
  // where it was enqueued behind that step (the GPU's time between them).
  double dt = std::chrono::duration<double>(done - std::max(f.submitted, previousDone)).count();
  // A step that loss scaling skipped made no update: its loss may be inf
  // (an f16 overflow in the forward), as torch's GradScaler allows.
  if (!std::isfinite(r.loss) && !r.skipped)
    return internalError(std::string("loss is ") + (std::isnan(r.loss) ? "nan" : "inf") +
                         " at step " + std::to_string(f.step));
  step_ = f.step;
  TC_RETURN_IF_ERROR(record(f.step, f.lr, dt, r, rec));
  return finishStep(f.step, userError);
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
  if (std::isfinite(r.loss)) { // (not on a skipped step's inf loss)
    S.smooth = 0.9 * S.smooth + 0.1 * r.loss;
    S.smoothWeight = 0.9 * S.smoothWeight + 0.1;
  }
  StepRecord rec;
  rec.step = step;
  rec.first = start + 1;
  rec.total = run_.steps;
  rec.loss = r.loss;
  rec.lossSmooth = S.smoothWeight > 0 ? S.smooth / S.smoothWeight : r.loss;
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
  rec.skipped = r.skipped;
  rec.lossScale = r.lossScale;
  rec.fp8Saturated = r.fp8Saturated;
  S.obs->step(rec);
  if (out)
    *out = rec;
  TC_RETURN_IF_ERROR(S.metrics.write(trainMetricsJson(rec)));
  if (S.tbOpen) {
    EventWriter &tb = S.tb;
    double w = wall();
    if (std::isfinite(r.loss)) { // the JSONL's null: no scalar at that step
      TC_RETURN_IF_ERROR(tb.scalar("train/loss", step, r.loss, w));
      TC_RETURN_IF_ERROR(tb.scalar("train/loss_smooth", step, rec.lossSmooth, w));
    }
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

bool TrainRun::validatesAfter(int64_t step) const {
  return !run_.valData.path.empty() && run_.evalEvery > 0 &&
         (step % run_.evalEvery == 0 || step == run_.steps);
}

bool TrainRun::savesAfter(int64_t step) const {
  return !s_->saveDir.empty() && s_->o.saveEvery > 0 && step % s_->o.saveEvery == 0;
}

Status TrainRun::finishStep(int64_t step, bool *userError) {
  if (validatesAfter(step))
    TC_RETURN_IF_ERROR(validate(step, userError));
  if (savesAfter(step))
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
  // Pipelined: while step N runs, step N + 1's batch is made and the step
  // enqueued behind it (where the trainer defers steps: on the GPU, a
  // replayed graph), so the GPU does not wait for the host between steps.
  // Not past a step that validates or saves after it (their reads and the
  // checkpoint are step N's), nor past the last, nor once a stop is asked.
  auto pauses = [&](int64_t step) {
    return step >= run_.steps || validatesAfter(step) || savesAfter(step) ||
           !trainer_.defersSteps();
  };
  InFlight cur, next;
  bool haveCur = false, haveNext = false;
  Clock::time_point previousDone;
  // The step behind `cur` when `cur` fails: it was enqueued (on the GPU it
  // runs regardless), so it is collected and counted, unrecorded: the state
  // and currentStep() stay in agreement.
  auto drain = [&]() {
    if (haveNext) {
      StepResult ignored;
      if (trainer_.collectStep(next.ticket, &ignored).isOk())
        step_ = next.step;
      --inFlight_;
      haveNext = false;
    }
  };
  // A stop asked for (the callbacks clear what they report: kept here),
  // looked at before the next step is enqueued and after each step.
  int why = 0;
  auto pollStop = [&]() {
    if (!why && S.o.stop)
      why = S.o.stop();
    if (!why && stop)
      why = stop();
    return why;
  };
  std::vector<std::vector<HostTensor>> micro;
  while (step_ < run_.steps) {
    if (!haveCur) {
      TC_RETURN_IF_ERROR(nextMicroBatches(&micro, userError));
      TC_RETURN_IF_ERROR(submitStep(micro, &cur));
      haveCur = true;
      previousDone = Clock::time_point();
    }
    Status ahead = Status::ok();
    bool aheadUserError = false;
    if (!pauses(cur.step) && !pollStop()) {
      ahead = nextMicroBatches(&micro, &aheadUserError);
      if (ahead.isOk()) {
        ahead = submitStep(micro, &next);
        haveNext = ahead.isOk();
      }
    }
    StepRecord rec;
    Status st = completeStep(cur, previousDone, &rec, userError);
    if (!st.isOk()) {
      drain();
      return st;
    }
    previousDone = lastDone_;
    haveCur = haveNext;
    cur = next;
    haveNext = false;
    if (summary->last < summary->first)
      summary->firstLoss = rec.loss;
    summary->last = rec.step;
    summary->lastLoss = rec.loss;
    if (!ahead.isOk()) { // the next batch's failure, after this step's record
      *userError = aheadUserError;
      return ahead;
    }
    if (pollStop() != 0 && step_ < run_.steps) {
      if (haveCur) { // the step already enqueued ends the run
        TC_RETURN_IF_ERROR(completeStep(cur, previousDone, &rec, userError));
        haveCur = false;
        summary->last = rec.step;
        summary->lastLoss = rec.loss;
      }
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
  if (trainer_.onDevice()) {
    // After the steps: CUDA graphs, loaded modules and library handles are
    // there too; measured as a PyTorch process is (bench/hf.sh compares).
    DeviceMemoryReport m = trainer_.deviceMemory();
    S.obs->line("device memory in use after the last step: " +
                std::to_string(m.measured + m.inUseBefore) +
                " bytes on the card (cudaMemGetInfo total - free: the CUDA context, tc's "
                "allocations and any other process's)");
  }
  return Status::ok();
}

Status train(const Artifact &artifact, const std::string &artifactPath, const TrainOptions &o,
             RunObserver *obs, TrainSummary *summary, bool *userError) {
  *summary = TrainSummary();
  TrainRun run;
  TC_RETURN_IF_ERROR(run.prepare(&artifact, artifactPath, o, obs, /*needSource=*/true, userError));
  return run.run(summary, userError, nullptr, nullptr);
}

} // namespace tc::rt
