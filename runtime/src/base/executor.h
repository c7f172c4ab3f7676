//===- executor.h - what every backend's executor does -----------*- C++ -*-===//
//
// The one interface behind sessions and trainers: run a function of the
// artifact, read or replace an entry of the parameter/state table the
// executor holds between calls. The CPU reference (cpu/executor.h,
// CpuExecutor) and the CUDA backend (cuda/executor.h, DeviceExecutor)
// implement it; session/backend.h picks one.
//
// Functions that update entries (their "update:NAME" results, train_step,
// apply_step) update the executor's table in place on both backends.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_BASE_EXECUTOR_H
#define TC_RUNTIME_BASE_EXECUTOR_H

#include <cstdint>
#include <deque>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "runtime/src/base/host_tensor.h"
#include "runtime/src/base/status.h"

namespace tc::rt {

/// How the CUDA backend runs (the C API's tc_cuda_options_t; tc-run sets it
/// from TC_CUDA_GRAPHS, TC_CUDA_CHECK_OPS, TC_CUDA_PROFILE, TC_MATMUL_TUNE,
/// TC_CUDA_PIPELINE).
struct CudaOptions {
  bool graphs = true;       ///< replay functions as CUDA graphs after their first run
  bool checkEachOp = false; ///< synchronise and check after every op
  bool profile = false;     ///< time every op; print the profile at the end
  bool matmulTune = true;   ///< time cuBLASLt's candidates once per matmul, keep the fastest
  /// Where the tunings' choices are kept for later processes
  /// (ExecutorOptions::matmulTuneDir; tc-run: tc's cache folder).
  std::string matmulTuneDir;
  /// Executor::submit enqueues a replayed graph and returns (off: it runs
  /// and waits, as run() does; tc-run: TC_CUDA_PIPELINE=0).
  bool pipeline = true;
};

/// What a traced run (Executor::runTraced) hands out: value `key` as soon as
/// op `op` of the function has written it. On the CPU reference the key is a
/// value id of the op-level program (Function::values), on the GPU a buffer
/// index of the device function (DeviceFunction::buffers). A non-ok status
/// stops the run with it.
using TraceSink = std::function<Status(size_t op, int32_t key, const HostTensor &value)>;

/// Where to run: the CPU reference (gpu < 0) or CUDA GPU `gpu`.
struct DeviceOptions {
  int gpu = -1;
  CudaOptions cuda;
};

/// What an executor on a GPU holds there, and what cudaMemGetInfo saw it
/// take (all zero on the CPU).
struct DeviceMemoryReport {
  std::string device; // DeviceInfo::toString()
  uint64_t parameters = 0, constants = 0, inputs = 0, workspace = 0, arena = 0, total = 0;
  int64_t measured = 0; // drop of cudaMemGetInfo's free bytes since the executor was created
  /// cudaMemGetInfo before tc allocated: the card's total, and what was in
  /// use already (the CUDA context, and any other process).
  int64_t cardTotal = 0, inUseBefore = 0;
};

class Executor {
public:
  virtual ~Executor() = default;

  /// "cpu (reference executor)", or the GPU (DeviceInfo::toString()).
  virtual std::string deviceName() const = 0;
  virtual bool onDevice() const = 0;
  virtual bool hasFunction(const std::string &name) const = 0;
  /// The result names of function `name` (nullptr when there is none).
  virtual const std::vector<std::string> *outputNames(const std::string &name) const = 0;
  /// Allocates what `name` needs without running it (a no-op on the CPU).
  virtual Status prepare(const std::string &name) { return Status::ok(); }

  /// Runs function `name` on `inputs` (in the function's input order, exact
  /// types). `outputs` gets one tensor per result; with `want` only results
  /// whose flag is true need be filled (the others may stay empty).
  virtual Status run(const std::string &name, const std::vector<HostTensor> &inputs,
                     std::vector<HostTensor> *outputs, const std::vector<bool> *want = nullptr) = 0;

  /// Enqueues a run of `name` and returns before it runs: the CUDA backend
  /// launches a function it replays as a CUDA graph behind the work already
  /// enqueued (the inputs staged at once, the results in `want` copied back
  /// behind it) and runs any other function now; the default keeps the run
  /// (its inputs copied) and runs it when it is collected, or before any
  /// other call on the executor. Runs are collected by collect(*ticket) in
  /// the order submitted, at most kMaxSubmitted uncollected. Any other call
  /// on the executor sees the state after every submitted run (their results
  /// stay for collect()).
  static constexpr size_t kMaxSubmitted = 2;
  virtual Status submit(const std::string &name, const std::vector<HostTensor> &inputs,
                        const std::vector<bool> *want, uint64_t *ticket);
  /// Waits for (or runs) the oldest submitted run, `ticket`, and hands out
  /// its results as run() would have (a failure of the run is reported here).
  virtual Status collect(uint64_t ticket, std::vector<HostTensor> *outputs);
  /// Whether submit() of `name` returns before the run (the CUDA backend:
  /// only for a function it replays as a CUDA graph).
  virtual bool defers(const std::string &name) const { return true; }

  /// run(), handing every value whose key is in `keys` to `sink` as soon as
  /// it is written (see TraceSink; the GPU runs op by op, without graphs).
  virtual Status runTraced(const std::string &name, const std::vector<HostTensor> &inputs,
                           std::vector<HostTensor> *outputs, const std::set<int32_t> &keys,
                           const TraceSink &sink) = 0;

  /// The type entry `name` is held in (f64 for f32 entries of a wide CPU run).
  virtual Status entryType(const std::string &name, TensorType *out) const = 0;
  /// Copies entry `name` to the host.
  virtual Status getEntry(const std::string &name, HostTensor *out) = 0;
  /// Replaces entry `name` (a value of entryType()).
  virtual Status setEntry(const std::string &name, const HostTensor &value) = 0;

  virtual DeviceMemoryReport memory() const { return DeviceMemoryReport(); }

protected:
  /// The tickets handed out by submit() so far.
  uint64_t tickets_ = 0;
  /// The default submit()'s runs not yet run, in order, through `ticket`
  /// (all: 0): every call of a backend that keeps them runs this first.
  void runSubmitted(uint64_t through = 0);

private:
  /// The default submit()'s runs: kept until collected; run (`ran`) when
  /// collected or before another call.
  struct Pending {
    uint64_t ticket = 0;
    std::string name;
    std::vector<HostTensor> inputs;
    bool hasWant = false;
    std::vector<bool> want;
    bool ran = false;
    Status status;
    std::vector<HostTensor> outputs;
  };
  std::deque<Pending> pending_;
  bool runningSubmitted_ = false; ///< runSubmitted's runs call run(), which calls it
};

} // namespace tc::rt

#endif // TC_RUNTIME_BASE_EXECUTOR_H
