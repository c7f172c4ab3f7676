//===- device.cpp - CUDA devices, errors, streams, events, the arena ------===//
#include "runtime/src/cuda/device.h"

#include <cstdio>
#include <utility>

#include "runtime/src/base/host_tensor.h"

namespace tc::rt::cuda {

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

Status cudaStatus(cudaError_t err, const std::string &call) {
  if (err == cudaSuccess)
    return Status::ok();
  StatusCode code = StatusCode::Internal;
  switch (err) {
  case cudaErrorMemoryAllocation:
    code = StatusCode::ResourceExhausted;
    break;
  case cudaErrorNoDevice:
  case cudaErrorInsufficientDriver:
  case cudaErrorInvalidDevice:
  case cudaErrorDevicesUnavailable:
  case cudaErrorSystemDriverMismatch:
  case cudaErrorCompatNotSupportedOnDevice:
  case cudaErrorNoKernelImageForDevice:
  case cudaErrorUnsupportedPtxVersion:
  case cudaErrorInitializationError:
  case cudaErrorStubLibrary:
    code = StatusCode::FailedPrecondition;
    break;
  case cudaErrorInvalidValue:
  case cudaErrorInvalidConfiguration:
  case cudaErrorInvalidDevicePointer:
  case cudaErrorInvalidMemcpyDirection:
  case cudaErrorInvalidResourceHandle:
    code = StatusCode::InvalidArgument;
    break;
  default:
    break;
  }
  return Status(code, call + ": " + cudaGetErrorString(err) + " (" + cudaGetErrorName(err) + ")");
}

//===----------------------------------------------------------------------===//
// Devices
//===----------------------------------------------------------------------===//

namespace {

Status probeGpu(int *count) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    // Clear the error so that a later cudaGetLastError does not report it
    // again as if a launch had failed.
    (void)cudaGetLastError();
    return failedPrecondition(std::string("no CUDA GPU available: cudaGetDeviceCount: ") +
                              cudaGetErrorString(err));
  }
  if (n == 0)
    return failedPrecondition("no CUDA GPU available: cudaGetDeviceCount returned 0 devices");
  *count = n;
  return Status::ok();
}

struct GpuProbe {
  Status status;
  int count = 0;
  GpuProbe() { status = probeGpu(&count); }
};

const GpuProbe &gpuProbe() {
  static const GpuProbe probe; // thread-safe, once per process
  return probe;
}

} // namespace

Status requireGpu() { return gpuProbe().status; }

Status deviceCount(int *out) {
  const GpuProbe &p = gpuProbe();
  TC_RETURN_IF_ERROR(p.status);
  *out = p.count;
  return Status::ok();
}

std::string DeviceInfo::smName() const {
  return "sm_" + std::to_string(ccMajor) + std::to_string(ccMinor);
}

std::string DeviceInfo::toString() const {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s (%s, %d SMs, %.1f GiB, driver %d.%d, runtime %d.%d)",
                name.c_str(), smName().c_str(), smCount,
                static_cast<double>(totalBytes) / (1024.0 * 1024.0 * 1024.0), driverVersion / 1000,
                driverVersion % 1000 / 10, runtimeVersion / 1000, runtimeVersion % 1000 / 10);
  return buf;
}

Status selectDevice(int ordinal) {
  int n = 0;
  TC_RETURN_IF_ERROR(deviceCount(&n));
  if (ordinal < 0 || ordinal >= n)
    return invalidArgument("device " + std::to_string(ordinal) + " does not exist (" +
                           std::to_string(n) + " CUDA GPU(s) visible)");
  TC_RETURN_IF_ERROR(
      cudaStatus(cudaSetDevice(ordinal), "cudaSetDevice(" + std::to_string(ordinal) + ")"));
  // cudaFree(nullptr) creates the primary context now.
  TC_CUDA_RETURN_IF_ERROR(cudaFree(nullptr));
  return Status::ok();
}

Status memInfo(size_t *freeBytes, size_t *totalBytes) {
  TC_RETURN_IF_ERROR(requireGpu());
  TC_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(freeBytes, totalBytes));
  return Status::ok();
}

Status currentComputeCapability(int *major, int *minor) {
  int dev = 0;
  TC_CUDA_RETURN_IF_ERROR(cudaGetDevice(&dev));
  TC_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, dev));
  TC_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(minor, cudaDevAttrComputeCapabilityMinor, dev));
  return Status::ok();
}

Status queryDevice(int ordinal, DeviceInfo *out) {
  int n = 0;
  TC_RETURN_IF_ERROR(deviceCount(&n));
  if (ordinal < 0 || ordinal >= n)
    return invalidArgument("device " + std::to_string(ordinal) + " does not exist (" +
                           std::to_string(n) + " CUDA GPU(s) visible)");
  int previous = 0;
  TC_CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous));
  TC_RETURN_IF_ERROR(selectDevice(ordinal));
  cudaDeviceProp prop{};
  Status st = cudaStatus(cudaGetDeviceProperties(&prop, ordinal),
                         "cudaGetDeviceProperties(" + std::to_string(ordinal) + ")");
  DeviceInfo info;
  if (st.isOk()) {
    info.ordinal = ordinal;
    info.name = prop.name;
    info.ccMajor = prop.major;
    info.ccMinor = prop.minor;
    info.smCount = prop.multiProcessorCount;
    info.totalBytes = prop.totalGlobalMem;
    info.l2Bytes = static_cast<size_t>(prop.l2CacheSize);
    info.sharedPerBlockOptin = prop.sharedMemPerBlockOptin;
    st = cudaStatus(cudaMemGetInfo(&info.freeBytes, &info.totalBytes), "cudaMemGetInfo");
  }
  if (st.isOk())
    st = cudaStatus(cudaRuntimeGetVersion(&info.runtimeVersion), "cudaRuntimeGetVersion");
  if (st.isOk())
    st = cudaStatus(cudaDriverGetVersion(&info.driverVersion), "cudaDriverGetVersion");
  Status back = cudaStatus(cudaSetDevice(previous), "cudaSetDevice (restoring)");
  TC_RETURN_IF_ERROR(st);
  TC_RETURN_IF_ERROR(back);
  *out = std::move(info);
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Streams and events
//===----------------------------------------------------------------------===//

Stream::~Stream() {
  if (s_)
    (void)cudaStreamDestroy(s_);
}

Stream &Stream::operator=(Stream &&o) noexcept {
  if (this != &o) {
    if (s_)
      (void)cudaStreamDestroy(s_);
    s_ = o.s_;
    o.s_ = nullptr;
  }
  return *this;
}

Status Stream::create(Stream *out, int priority) {
  TC_RETURN_IF_ERROR(requireGpu());
  cudaStream_t s = nullptr;
  TC_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, priority));
  *out = Stream();
  out->s_ = s;
  return Status::ok();
}

Status Stream::synchronize() const {
  TC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s_));
  return Status::ok();
}

Event::~Event() {
  if (e_)
    (void)cudaEventDestroy(e_);
}

Event &Event::operator=(Event &&o) noexcept {
  if (this != &o) {
    if (e_)
      (void)cudaEventDestroy(e_);
    e_ = o.e_;
    o.e_ = nullptr;
  }
  return *this;
}

Status Event::create(Event *out, bool timing) {
  TC_RETURN_IF_ERROR(requireGpu());
  cudaEvent_t e = nullptr;
  TC_CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  *out = Event();
  out->e_ = e;
  return Status::ok();
}

Status Event::record(cudaStream_t stream) const {
  TC_CUDA_RETURN_IF_ERROR(cudaEventRecord(e_, stream));
  return Status::ok();
}

Status Event::waitOn(cudaStream_t stream) const {
  TC_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, e_, 0));
  return Status::ok();
}

Status Event::synchronize() const {
  TC_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(e_));
  return Status::ok();
}

Status Event::elapsedMs(const Event &start, const Event &end, float *ms) {
  TC_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(ms, start.e_, end.e_));
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// The arena
//===----------------------------------------------------------------------===//

DeviceArena::~DeviceArena() { reset(); }

DeviceArena::DeviceArena(DeviceArena &&o) noexcept : base_(o.base_), size_(o.size_) {
  o.base_ = nullptr;
  o.size_ = 0;
}

DeviceArena &DeviceArena::operator=(DeviceArena &&o) noexcept {
  if (this != &o) {
    reset();
    base_ = o.base_;
    size_ = o.size_;
    o.base_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

void DeviceArena::reset() {
  if (base_)
    (void)cudaFree(base_);
  base_ = nullptr;
  size_ = 0;
}

Status DeviceArena::create(size_t bytes, DeviceArena *out) {
  TC_RETURN_IF_ERROR(requireGpu());
  out->reset();
  if (bytes == 0)
    return Status::ok();
  void *p = nullptr;
  cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    (void)cudaGetLastError(); // out of memory is not sticky: clear it
    Status st = cudaStatus(err, "cudaMalloc(" + std::to_string(bytes) + " bytes) for the arena");
    size_t freeB = 0, totalB = 0;
    if (cudaMemGetInfo(&freeB, &totalB) == cudaSuccess)
      st = Status(st.code(), st.message() + "; " + std::to_string(freeB) + " of " +
                                 std::to_string(totalB) + " bytes free");
    return st;
  }
  out->base_ = p;
  out->size_ = bytes;
  return Status::ok();
}

Status DeviceArena::slice(size_t offset, size_t bytes, void **out) const {
  if (offset % kAlignment != 0)
    return invalidArgument("arena offset " + std::to_string(offset) + " is not a multiple of " +
                           std::to_string(kAlignment));
  if (offset > size_ || bytes > size_ - offset)
    return invalidArgument("arena buffer [" + std::to_string(offset) + ", " +
                           std::to_string(offset) + " + " + std::to_string(bytes) +
                           ") leaves the arena of " + std::to_string(size_) + " bytes");
  *out = at(offset);
  return Status::ok();
}

Status DeviceArena::zero(size_t offset, size_t bytes, cudaStream_t stream) const {
  if (offset > size_ || bytes > size_ - offset)
    return invalidArgument("arena range [" + std::to_string(offset) + ", " +
                           std::to_string(offset) + " + " + std::to_string(bytes) +
                           ") leaves the arena of " + std::to_string(size_) + " bytes");
  if (bytes == 0)
    return Status::ok();
  TC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(at(offset), 0, bytes, stream));
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Copies
//===----------------------------------------------------------------------===//

Status copyToDevice(const HostTensor &src, void *dst, size_t dstBytes, cudaStream_t stream) {
  TC_RETURN_IF_ERROR(requireGpu());
  TC_RETURN_IF_ERROR(checkHostTensor(src, "copyToDevice source"));
  if (src.data.size() != dstBytes)
    return invalidArgument("copyToDevice: " + typeToString(src.type) + " has " +
                           std::to_string(src.data.size()) + " bytes, destination " +
                           std::to_string(dstBytes));
  if (dstBytes == 0)
    return Status::ok();
  TC_RETURN_IF_ERROR(
      cudaStatus(cudaMemcpyAsync(dst, src.data.data(), dstBytes, cudaMemcpyHostToDevice, stream),
                 "cudaMemcpyAsync(host to device, " + std::to_string(dstBytes) + " bytes)"));
  return Status::ok();
}

Status copyToHost(const void *src, const TensorType &type, HostTensor *out, cudaStream_t stream) {
  TC_RETURN_IF_ERROR(requireGpu());
  int64_t n = 0;
  TC_RETURN_IF_ERROR(checkedNumElements(type.shape, &n));
  HostTensor t;
  t.type = type;
  t.data.resize(static_cast<size_t>(storageBytes(type)));
  if (!t.data.empty()) {
    TC_RETURN_IF_ERROR(cudaStatus(
        cudaMemcpyAsync(t.data.data(), src, t.data.size(), cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync(device to host, " + std::to_string(t.data.size()) + " bytes)"));
    TC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  }
  *out = std::move(t);
  return Status::ok();
}

} // namespace tc::rt::cuda
