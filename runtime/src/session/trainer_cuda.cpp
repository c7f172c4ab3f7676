//===- trainer_cuda.cpp - the Trainer's GPU path ---------------------------===//
//
// Trainer::useDevice hands the state table to a cuda::DeviceExecutor; steps
// then run the artifact's device functions (train_step, or grad_step per
// micro-batch and apply_step) and only the loss and the gradient norm come
// back to the host. Built into every tc_runtime; without the CUDA backend
// (TC_HAVE_CUDA undefined) useDevice says so.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/session/trainer.h"

#include "runtime/src/base/host_tensor.h"

#if TC_HAVE_CUDA
#include "runtime/src/cuda/executor.h"
#endif

namespace tc::rt {

#if TC_HAVE_CUDA

struct Trainer::Gpu {
  std::unique_ptr<cuda::DeviceExecutor> exec;
  DeviceMemoryReport memory;
};

Trainer::Trainer() = default;
Trainer::~Trainer() = default;

namespace {
/// Index of the result called `name`, or -1.
int resultIndex(const DeviceFunction &fn, const std::string &name) {
  for (size_t i = 0; i < fn.outputNames.size(); ++i)
    if (fn.outputNames[i] == name)
      return static_cast<int>(i);
  return -1;
}
} // namespace

Status Trainer::useDevice(int device) {
  if (wide_)
    return invalidArgument("--ref-precision f64 is a CPU reference mode; the GPU computes in "
                           "the artifact's precision");
  auto gpu = std::make_unique<Gpu>();
  TC_RETURN_IF_ERROR(cuda::requireGpu());
  TC_RETURN_IF_ERROR(cuda::selectDevice(device));
  size_t free0 = 0, free1 = 0, total = 0;
  TC_RETURN_IF_ERROR(cuda::memInfo(&free0, &total));
  cuda::ExecutorOptions eo;
  eo.device = device;
  eo.seed = opts_.initSeed;
  TC_RETURN_IF_ERROR(cuda::DeviceExecutor::create(artifact_, eo, &gpu->exec));
  const char *first = config_.gradAccum == 1 ? "train_step" : "grad_step";
  TC_RETURN_IF_ERROR(gpu->exec->prepare(first));
  if (config_.gradAccum > 1)
    TC_RETURN_IF_ERROR(gpu->exec->prepare("apply_step"));
  TC_RETURN_IF_ERROR(cuda::memInfo(&free1, &total));
  const cuda::DeviceMemoryUse &m = gpu->exec->memoryUse();
  DeviceMemoryReport &r = gpu->memory;
  r.device = gpu->exec->deviceInfo().toString();
  r.parameters = m.parameters;
  r.constants = m.constants;
  r.inputs = m.inputs;
  r.workspace = m.workspace;
  r.arena = m.arena;
  r.total = m.total();
  r.measured = static_cast<int64_t>(free0) - static_cast<int64_t>(free1);
  r.cardTotal = static_cast<int64_t>(total);
  r.inUseBefore = static_cast<int64_t>(total) - static_cast<int64_t>(free0);
  gpu_ = std::move(gpu);
  return Status::ok();
}

DeviceMemoryReport Trainer::deviceMemory() const {
  return gpu_ ? gpu_->memory : DeviceMemoryReport();
}

Status Trainer::pushToDevice(const std::vector<std::string> &names) {
  for (const std::string &n : names) {
    const HostTensor &t = state_.at(n);
    if (t.data.empty())
      continue;
    TC_RETURN_IF_ERROR(gpu_->exec->setEntry(n, t));
  }
  return Status::ok();
}

Status Trainer::deviceState(std::map<std::string, HostTensor> *out) const {
  if (!gpu_)
    return failedPrecondition("training is not on a GPU");
  out->clear();
  for (const Parameter &p : artifact_->params) {
    HostTensor t;
    TC_RETURN_IF_ERROR(gpu_->exec->getEntry(p.name, &t));
    (*out)[p.name] = std::move(t);
  }
  return Status::ok();
}

Status Trainer::stepDevice(int64_t step, double lr,
                           const std::vector<std::vector<HostTensor>> &micro, StepResult *out) {
  cuda::DeviceExecutor &ex = *gpu_->exec;
  std::vector<HostTensor> outputs;
  auto scalarOut = [&](const DeviceFunction &fn, const std::string &name, double *v) -> Status {
    int i = resultIndex(fn, name);
    if (i < 0)
      return dataLoss("@" + fn.name + " has no result '" + name + "'");
    *v = hostTensorToDoubles(outputs[static_cast<size_t>(i)])[0];
    return Status::ok();
  };
  auto wantOnly = [](const DeviceFunction &fn, std::initializer_list<const char *> names) {
    std::vector<bool> want(fn.outputNames.size(), false);
    for (size_t i = 0; i < fn.outputNames.size(); ++i)
      for (const char *n : names)
        want[i] = want[i] || fn.outputNames[i] == n;
    return want;
  };
  if (config_.gradAccum == 1) {
    const DeviceFunction *fn = ex.function("train_step");
    if (!fn)
      return failedPrecondition("the artifact has no GPU train_step");
    std::vector<HostTensor> inputs = micro[0];
    inputs.push_back(scalar(lr));
    inputs.push_back(scalar(static_cast<double>(step)));
    std::vector<bool> want = wantOnly(*fn, {"loss", "grad_norm"});
    TC_RETURN_IF_ERROR(ex.run("train_step", inputs, &outputs, &want));
    TC_RETURN_IF_ERROR(scalarOut(*fn, config_.loss, &out->loss));
    return scalarOut(*fn, "grad_norm", &out->gradNorm);
  }
  // Gradient accumulation through the host: grad_step per micro-batch, the
  // gradients averaged in double, then apply_step.
  const DeviceFunction *afn = ex.function("apply_step");
  if (!ex.function("grad_step") || !afn)
    return failedPrecondition("the artifact has no GPU grad_step/apply_step");
  std::vector<HostTensor> inputs;
  TC_RETURN_IF_ERROR(accumulate(
      step, lr, micro,
      [&](const std::vector<HostTensor> &mb, std::vector<HostTensor> *outs) {
        return ex.run("grad_step", mb, outs);
      },
      &inputs, &out->loss));
  std::vector<bool> want = wantOnly(*afn, {"grad_norm"});
  TC_RETURN_IF_ERROR(ex.run("apply_step", inputs, &outputs, &want));
  return scalarOut(*afn, "grad_norm", &out->gradNorm);
}

Status Trainer::evalLossDevice(const std::vector<HostTensor> &batch, double *loss) {
  cuda::DeviceExecutor &ex = *gpu_->exec;
  const char *name = ex.function("eval_step") ? "eval_step" : "grad_step";
  const DeviceFunction *fn = ex.function(name);
  if (!fn)
    return failedPrecondition("the artifact has no GPU eval_step or grad_step");
  std::vector<bool> want(fn->outputNames.size(), false);
  // grad_step's first result is the loss (whatever the model named it).
  int li = std::string(name) == "grad_step" ? 0 : resultIndex(*fn, config_.loss);
  if (li < 0 || fn->outputNames.empty())
    return dataLoss("@" + fn->name + " has no result '" + config_.loss + "'");
  want[static_cast<size_t>(li)] = true;
  std::vector<HostTensor> outputs;
  TC_RETURN_IF_ERROR(ex.run(name, batch, &outputs, &want));
  *loss = hostTensorToDoubles(outputs[static_cast<size_t>(li)])[0];
  return Status::ok();
}

#else // !TC_HAVE_CUDA

struct Trainer::Gpu {};
Trainer::Trainer() = default;
Trainer::~Trainer() = default;

Status Trainer::useDevice(int) {
  return unimplemented("this build of tc has no CUDA backend (configure with "
                       "-DTC_ENABLE_CUDA=ON on a machine with the CUDA toolkit)");
}
DeviceMemoryReport Trainer::deviceMemory() const { return DeviceMemoryReport(); }
Status Trainer::pushToDevice(const std::vector<std::string> &) { return Status::ok(); }
Status Trainer::deviceState(std::map<std::string, HostTensor> *) const {
  return failedPrecondition("training is not on a GPU");
}
Status Trainer::evalLossDevice(const std::vector<HostTensor> &, double *) {
  return unimplemented("this tc was built without the CUDA backend");
}
Status Trainer::stepDevice(int64_t, double, const std::vector<std::vector<HostTensor>> &,
                           StepResult *) {
  return failedPrecondition("training is not on a GPU");
}

#endif

} // namespace tc::rt
