//===- run_eval.cpp - evaluation and validation ---------------------------===//
//
// The loss over evenly spaced windows of tokens: a TrainRun's validation
// (--val-data) and evaluate() on the live weights, and --eval --data
// (evaluateData) on an artifact's or a checkpoint's weights.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/session/run_internal.h"

#include "runtime/src/session/backend.h"

namespace tc::rt {

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

} // namespace tc::rt
