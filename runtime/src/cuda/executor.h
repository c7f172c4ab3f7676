//===- executor.h - runs an artifact's device program on a GPU -*- C++ -*-===//
//
// The CUDA backend's executor. It takes the artifact's device functions
// (Artifact::deviceFunctions: straight-line launch / library / matmul /
// copy / fill / record / wait ops on planned buffers) and its kernels
// (Artifact::kernels: cubins loaded with cudaLibraryLoadData, so nothing
// links -lcuda) and runs them:
//
//   - the parameter/state table lives on the device for the executor's life
//     (one allocation, entries packed at 16-byte alignment); steps update it
//     in place, the host reads or replaces entries with getEntry/setEntry;
//   - constants are uploaded once (one allocation, 256-byte aligned each);
//   - each function's transient buffers are views of one arena of the
//     planned size (Artifact::deviceFunctions[i].arenaBytes); the executor
//     keeps one arena, grown to the largest function it has run;
//   - arguments are copied into one input block per function (fixed device
//     addresses), results are copied back from wherever the program left
//     them (only those the caller asks for);
//   - matmuls go through one cuBLASLt wrapper with its preallocated
//     workspace; library ops through the launchers of kernels/kernels.h;
//   - a run of independent launches of one generated elementwise kernel (the
//     AdamW/SGD update of every parameter) is one launch of its NAME_group
//     entry point over a table of the runs' pointers and sizes.
//
// After the first run of a function on its stream the executor replays it
// as a CUDA graph (one launch per step) unless ExecutorOptions::graphs is
// off (tc-run: TC_CUDA_GRAPHS=0) or the function needs the host mid-step.
//
// It is the CUDA backend of base/executor.h. Not thread-safe: one executor
// per thread (or a lock around it).
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_CUDA_EXECUTOR_H
#define TC_RUNTIME_CUDA_EXECUTOR_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/src/base/executor.h"
#include "runtime/src/schema/program.h"
#include "runtime/src/base/status.h"
#include "runtime/src/cuda/device.h"

namespace tc::rt::cuda {

/// What the executor holds on the device, by kind (bytes it asked
/// cudaMalloc for).
struct DeviceMemoryUse {
  uint64_t parameters = 0; // parameter/state table (with 16-byte padding)
  uint64_t constants = 0;
  uint64_t inputs = 0;     // argument blocks and grouped-launch tables of the functions prepared
  uint64_t workspace = 0;  // cuBLASLt
  uint64_t arena = 0;
  uint64_t total() const { return parameters + constants + inputs + workspace + arena; }
};

struct ExecutorOptions {
  int device = 0;
  /// Synchronise and check after every op (slow; names the op that failed).
  bool checkEachOp = false;
  /// Capture each function as a CUDA graph after its first run.
  bool graphs = true;
  /// Time every op and print the profile to stderr when the executor goes.
  bool profile = false;
  /// Time cuBLASLt's candidates on a matmul's first eager call and keep the
  /// fastest (off: the heuristic's first choice, reproducibly).
  bool matmulTune = true;
  /// With matmulTune: the folder of the tuning record (Matmul::setTuningRecord:
  /// <dir>/matmul/<identity>.tsv), so that every process on this device takes
  /// the choices the first one timed (the same bits run to run, and when a
  /// run resumes in a new process); empty: each process times its own.
  std::string matmulTuneDir;
  /// submit() enqueues a replayed graph and returns (CudaOptions::pipeline).
  bool pipeline = true;
  /// Seed of the parameter initialisers (tc-compile --init-params).
  uint64_t seed = 1337;
};

/// ExecutorOptions from the backend-neutral CudaOptions.
ExecutorOptions executorOptions(int device, uint64_t seed, const CudaOptions &cuda);

class DeviceExecutor : public Executor {
public:
  /// Selects the device, checks the artifact's kernels were compiled for it,
  /// loads them, allocates the parameter table and constants and fills the
  /// table: Data entries from Artifact::weights, the others by their
  /// initialiser, run on the device (zeros, ones, normal, uniform).
  /// Entries without data are left unset (setEntry before a run that reads
  /// them; run() fails naming them otherwise).
  static Status create(const Artifact *artifact, const ExecutorOptions &opts,
                       std::unique_ptr<DeviceExecutor> *out);
  ~DeviceExecutor() override;

  const DeviceInfo &deviceInfo() const { return info_; }
  /// The GPU and, for an artifact with ops cuDNN may run (the attention
  /// forward, GELU + aux GEMMs), whether cuDNN is there ("; cuDNN 9.19.0
  /// (PATH)" or why not).
  std::string deviceName() const override {
    return info_.toString() + (cudnnStatus_.empty() ? "" : "; " + cudnnStatus_);
  }
  bool onDevice() const override { return true; }
  bool hasFunction(const std::string &name) const override;
  const DeviceFunction *function(const std::string &name) const;
  const std::vector<std::string> *outputNames(const std::string &name) const override;

  /// Allocates what `name` needs (arena, argument block, cuBLASLt) without
  /// running it, so memory use is known before the first step.
  Status prepare(const std::string &name) override;

  /// Replaces entry `name` of the parameter/state table (same type).
  Status setEntry(const std::string &name, const HostTensor &value) override;
  /// Copies entry `name` to the host.
  Status getEntry(const std::string &name, HostTensor *out) override;
  Status entryType(const std::string &name, TensorType *out) const override;
  /// Entries that have no value yet (compiled without weights, not set).
  std::vector<std::string> unsetEntries() const;

  /// Runs function `name` on `inputs` (in DeviceFunction::inputNames order,
  /// exact types) and waits for it. `outputs` gets one tensor per result;
  /// with `want` only results whose flag is true are copied back (others
  /// stay empty tensors of the right type).
  Status run(const std::string &name, const std::vector<HostTensor> &inputs,
             std::vector<HostTensor> *outputs, const std::vector<bool> *want = nullptr) override;
  /// Enqueues `name` and returns (a function replayed as a CUDA graph, with
  /// ExecutorOptions::pipeline): its arguments staged in pinned memory and
  /// copied in, the graph launched and the results in `want` copied back
  /// into the staging behind it. Otherwise it runs now (Executor::submit).
  Status submit(const std::string &name, const std::vector<HostTensor> &inputs,
                const std::vector<bool> *want, uint64_t *ticket) override;
  Status collect(uint64_t ticket, std::vector<HostTensor> *outputs) override;
  bool defers(const std::string &name) const override;

  /// run() op by op (no graph), copying each buffer in `keys` to the host
  /// for `sink` after the op that writes it.
  Status runTraced(const std::string &name, const std::vector<HostTensor> &inputs,
                   std::vector<HostTensor> *outputs, const std::set<int32_t> &keys,
                   const TraceSink &sink) override;

  const DeviceMemoryUse &memoryUse() const { return mem_; }
  /// memoryUse() with what cudaMemGetInfo saw since create().
  DeviceMemoryReport memory() const override;

private:
  struct Impl;
  DeviceExecutor();
  std::unique_ptr<Impl> impl_;
  DeviceInfo info_;
  DeviceMemoryUse mem_;
  uint64_t memEpoch_ = ~0ull; // Impl::epoch mem_ was computed at
  std::string cudnnStatus_;   // cudnnStatusLine(), for artifacts cuDNN may run
  size_t freeAtCreate_ = 0, cardTotal_ = 0; // cudaMemGetInfo before create() allocated
};

} // namespace tc::rt::cuda

#endif // TC_RUNTIME_CUDA_EXECUTOR_H
