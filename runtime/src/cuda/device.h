//===- device.h - CUDA devices, errors, streams, events, the arena -*- C++ -*-===//
//
// The foundation of the CUDA backend, through the CUDA runtime API only
// (cudart is linked statically and loads the driver itself; tc never links
// -lcuda, so a binary starts on a machine without a GPU or driver and every
// entry point here returns a Status saying so, never aborts).
//
//   - Status wrapping of cudaError_t: the code, the call that failed and the
//     CUDA error string ("cudaMalloc(1048576 bytes): out of memory").
//   - Device query and selection.
//   - RAII Stream and Event.
//   - DeviceArena: the one device allocation of a session (a single cudaMalloc
//     of the size the compiler's memory plan gives), sub-buffers by offset.
//   - Host <-> device copies of rt::HostTensor (storage format is the same on
//     both sides: bf16 is 2 bytes, little-endian).
//
// Thread-safety: the free functions are thread-safe (cudart is); a Stream,
// Event or DeviceArena object is not (use one per thread or lock).
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_CUDA_DEVICE_H
#define TC_RUNTIME_CUDA_DEVICE_H

#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

#include "runtime/src/schema/program.h"
#include "runtime/src/base/status.h"

namespace tc::rt::cuda {

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

/// OK for cudaSuccess; otherwise "<call>: <cuda error string> (<error name>)"
/// with a code chosen from the error: ResourceExhausted for out of memory,
/// FailedPrecondition for no device / no or old driver, InvalidArgument for
/// invalid values, Internal for the rest (launch failures, illegal
/// addresses...). `call` names the call and, where useful, its arguments.
Status cudaStatus(cudaError_t err, const std::string &call);

/// Returns from the enclosing function when the CUDA runtime call `expr`
/// fails; the Status names the call as written.
#define TC_CUDA_RETURN_IF_ERROR(expr)                                                              \
  do {                                                                                             \
    cudaError_t tc_cuda_err_ = (expr);                                                             \
    if (tc_cuda_err_ != cudaSuccess)                                                               \
      return ::tc::rt::cuda::cudaStatus(tc_cuda_err_, #expr);                                      \
  } while (0)

//===----------------------------------------------------------------------===//
// Devices
//===----------------------------------------------------------------------===//

/// OK when at least one CUDA GPU is usable; otherwise FailedPrecondition
/// "no CUDA GPU available: cudaGetDeviceCount: <cuda error string>" (or
/// "...: cudaGetDeviceCount returned 0 devices"). Cheap after the first call
/// (the answer is cached for the life of the process).
Status requireGpu();

/// Number of CUDA GPUs; the requireGpu() error when there is none.
Status deviceCount(int *out);

struct DeviceInfo {
  int ordinal = 0;
  std::string name;      // "NVIDIA H200"
  int ccMajor = 0;       // compute capability, 9.0 for H100/H200,
  int ccMinor = 0;       // 12.0 for RTX 5090
  int smCount = 0;       // streaming multiprocessors
  size_t totalBytes = 0; // global memory
  size_t freeBytes = 0;  // free at the time of the query
  size_t l2Bytes = 0;
  size_t sharedPerBlockOptin = 0; // max dynamic shared memory per block
  int runtimeVersion = 0;         // cudart, e.g. 13000
  int driverVersion = 0;          // e.g. 13000 (CUDA version the driver supports)

  /// "sm_90"
  std::string smName() const;
  /// "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB, driver 13.0, runtime 13.0)"
  std::string toString() const;
};

/// The compute capability of the current device (9, 0 for sm_90), cheap
/// enough for a launcher to ask before it picks an arch-specific path.
Status currentComputeCapability(int *major, int *minor);

/// Queries device `ordinal` (makes it current, creating its context, so that
/// freeBytes is meaningful).
Status queryDevice(int ordinal, DeviceInfo *out);

/// Makes device `ordinal` current for the calling thread and creates its
/// primary context now (so that the first real call does not pay for it).
Status selectDevice(int ordinal);

/// cudaMemGetInfo of the current device.
Status memInfo(size_t *freeBytes, size_t *totalBytes);

//===----------------------------------------------------------------------===//
// Streams and events
//===----------------------------------------------------------------------===//

/// An owned cudaStream_t (non-blocking with respect to the legacy default
/// stream). Move-only; destroyed with the object.
class Stream {
public:
  Stream() = default;
  ~Stream();
  Stream(Stream &&o) noexcept : s_(o.s_) { o.s_ = nullptr; }
  Stream &operator=(Stream &&o) noexcept;
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;

  /// Creates a stream on the current device (priority 0 = default).
  static Status create(Stream *out, int priority = 0);
  cudaStream_t get() const { return s_; }
  Status synchronize() const;

private:
  cudaStream_t s_ = nullptr;
};

/// An owned cudaEvent_t. Move-only.
class Event {
public:
  Event() = default;
  ~Event();
  Event(Event &&o) noexcept : e_(o.e_) { o.e_ = nullptr; }
  Event &operator=(Event &&o) noexcept;
  Event(const Event &) = delete;
  Event &operator=(const Event &) = delete;

  /// `timing` false gives a cheaper event usable only for ordering.
  static Status create(Event *out, bool timing = false);
  cudaEvent_t get() const { return e_; }
  Status record(cudaStream_t stream) const;
  /// Makes `stream` wait for this event (cross-stream dependency).
  Status waitOn(cudaStream_t stream) const;
  Status synchronize() const;
  /// Milliseconds between two recorded timing events.
  static Status elapsedMs(const Event &start, const Event &end, float *ms);

private:
  cudaEvent_t e_ = nullptr;
};

//===----------------------------------------------------------------------===//
// The arena
//===----------------------------------------------------------------------===//

/// The one device allocation of a session. The compiler's memory plan gives
/// every buffer an offset in it (a multiple of kAlignment) and the peak size;
/// the runtime allocates exactly that with one cudaMalloc and addresses
/// buffers by offset. Move-only; freed with the object.
class DeviceArena {
public:
  /// Buffer offsets must be multiples of this (cudaMalloc gives 256-byte
  /// aligned memory; 256 also satisfies 16-byte vector loads and cuBLASLt's
  /// best alignment).
  static constexpr size_t kAlignment = 256;

  DeviceArena() = default;
  ~DeviceArena();
  DeviceArena(DeviceArena &&o) noexcept;
  DeviceArena &operator=(DeviceArena &&o) noexcept;
  DeviceArena(const DeviceArena &) = delete;
  DeviceArena &operator=(const DeviceArena &) = delete;

  /// Allocates `bytes` on the current device (one cudaMalloc; 0 bytes gives an
  /// empty arena without allocating). ResourceExhausted names the size and the
  /// free memory when it does not fit.
  static Status create(size_t bytes, DeviceArena *out);

  void *base() const { return base_; }
  size_t size() const { return size_; }

  /// The sub-buffer [offset, offset + bytes): InvalidArgument when it leaves
  /// the arena or offset is not a multiple of kAlignment.
  Status slice(size_t offset, size_t bytes, void **out) const;
  /// The same without checks (for hot paths whose plan was checked once).
  void *at(size_t offset) const { return static_cast<char *>(base_) + offset; }

  /// Sets [offset, offset + bytes) to zero on `stream`.
  Status zero(size_t offset, size_t bytes, cudaStream_t stream) const;

  /// Frees the memory now (also done by the destructor).
  void reset();

private:
  void *base_ = nullptr;
  size_t size_ = 0;
};

/// Rounds `bytes` up to a multiple of DeviceArena::kAlignment.
inline size_t alignArena(size_t bytes) {
  return (bytes + DeviceArena::kAlignment - 1) / DeviceArena::kAlignment * DeviceArena::kAlignment;
}

//===----------------------------------------------------------------------===//
// Host <-> device copies
//===----------------------------------------------------------------------===//

/// Copies the bytes of `src` to `dst` (device memory of dstBytes bytes, which
/// must equal the tensor's storage size) on `stream`. The copy is asynchronous
/// with respect to the host only for pinned host memory; HostTensor memory is
/// pageable, so the call returns once the data has been staged.
Status copyToDevice(const HostTensor &src, void *dst, size_t dstBytes, cudaStream_t stream);

/// Fills `out` (type `type`) from device memory `src` and waits for `stream`.
Status copyToHost(const void *src, const TensorType &type, HostTensor *out, cudaStream_t stream);

} // namespace tc::rt::cuda

#endif // TC_RUNTIME_CUDA_DEVICE_H
