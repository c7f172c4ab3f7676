//===- backend.cpp - picks the executor: the CPU reference or CUDA --------===//
#include "runtime/src/session/backend.h"

#if TC_HAVE_CUDA
#include "runtime/src/cuda/executor.h"
#endif

namespace tc::rt {

namespace {
constexpr const char kNoCuda[] = "this build of tc has no CUDA backend (configure with "
                                 "-DTC_ENABLE_CUDA=ON on a machine with the CUDA toolkit)";
} // namespace

bool cudaBuilt() {
#if TC_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

Status cudaAvailable() {
#if TC_HAVE_CUDA
  return cuda::requireGpu();
#else
  return unimplemented(kNoCuda);
#endif
}

Status createExecutor(const Artifact *artifact, const ExecOptions &cpu,
                      const DeviceOptions &device, std::unique_ptr<Executor> *out) {
  if (device.gpu < 0) {
    std::unique_ptr<CpuExecutor> ex;
    TC_RETURN_IF_ERROR(CpuExecutor::create(artifact, cpu, &ex));
    *out = std::move(ex);
    return Status::ok();
  }
#if TC_HAVE_CUDA
  std::unique_ptr<cuda::DeviceExecutor> ex;
  TC_RETURN_IF_ERROR(cuda::DeviceExecutor::create(
      artifact, cuda::executorOptions(device.gpu, cpu.initSeed, device.cuda), &ex));
  *out = std::move(ex);
  return Status::ok();
#else
  return unimplemented(kNoCuda);
#endif
}

} // namespace tc::rt
