//===- executor_impl.h - the CUDA executor's state --------------*- C++ -*-===//
//
// What executor.cpp (set-up, the parameter table, prepared functions, the
// arena, entry I/O), executor_ops.cpp (device ops as launch closures,
// grouped launches) and executor_run.cpp (a run: arguments, launches or a
// CUDA graph, the profile, results) share: DeviceExecutor::Impl and the
// prepared functions it keeps. Nothing else includes it.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_CUDA_EXECUTOR_IMPL_H
#define TC_RUNTIME_CUDA_EXECUTOR_IMPL_H

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "runtime/src/cuda/cublaslt.h"
#include "runtime/src/cuda/executor.h"
#include "runtime/src/cuda/op_attrs.h"

namespace tc::rt::cuda {

/// The alignment of entries in the parameter table and of arguments.
constexpr uint64_t kParamAlignment = 16;

inline uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/// A generated kernel's launch arguments, as DeviceProgram writes them.
struct LaunchAttrs {
  int64_t n = 0, grid = 0, block = 0;
  std::vector<long long> meta;
};

/// The n, meta, grid and block of a launch op, checked.
Status readLaunch(const OpAttrs &a, LaunchAttrs *out);

/// One parameter/state entry on the device.
struct Entry {
  const Parameter *param = nullptr;
  uint64_t offset = 0; // into `block`
  void *block = nullptr; // the table allocation, or a device-only block
  uint64_t bytes = 0;  // storage bytes of its type (Parameter::bytes is 0 without data)
  bool set = false;
};

/// A prepared device function.
struct Prepared {
  const DeviceFunction *fn = nullptr;
  void *inputBlock = nullptr;
  std::vector<uint64_t> inputOffsets;
  std::vector<uint64_t> argBytes; // per argument: its bytes (0: nothing reads it)
  void *constBlock = nullptr;
  std::vector<uint64_t> constOffsets;
  uint64_t inputBytes = 0, constBytes = 0; // the two blocks' sizes
  std::vector<std::function<Status()>> ops;
  std::vector<int64_t> opStream;    // per closure: the stream it enqueues on
  std::vector<std::string> opNames; // for errors
  std::vector<size_t> opEnd;         // per closure: one past the last device op it runs
  std::vector<std::string> profileNames;
  std::set<std::string> paramsRead;
  bool capturable = true;
  void *arenaBase = nullptr; // the arena the closures point into
  uint64_t runs = 0;
  cudaGraphExec_t graph = nullptr;
  std::vector<void *> groupTables; // device item tables of grouped launches
  uint64_t groupBytes = 0;
  // submit()'s pinned staging, two slots used in turn: the arguments laid out
  // as inputBlock, then every result at 16-byte alignment (resultOffsets);
  // `staged` is recorded after a slot's copies back.
  char *stage[2] = {nullptr, nullptr};
  cudaEvent_t staged[2] = {nullptr, nullptr};
  std::vector<uint64_t> resultOffsets;
  uint64_t stageBytes = 0;
  uint64_t submits = 0;
};

/// A run DeviceExecutor::submit enqueued (slot >= 0: its copies back land in
/// the function's staging slot) or ran at once (slot -1: status, outputs).
struct Submitted {
  uint64_t ticket = 0;
  Prepared *p = nullptr;
  std::string name;
  int slot = -1;
  bool hasWant = false; // else every result is wanted
  std::vector<bool> want;
  Status status;
  std::vector<HostTensor> outputs;
};

struct DeviceExecutor::Impl {
  const Artifact *artifact = nullptr;
  ExecutorOptions opts;
  std::vector<cudaLibrary_t> libraries;
  std::map<std::string, cudaKernel_t> kernels;
  std::map<std::string, cudaKernel_t> groupKernels; // NAME -> NAME_group
  std::map<std::string, int64_t> groupMaxBlocks;    // NAME -> most blocks a grouped launch spans
  void *table = nullptr;
  uint64_t tableBytes = 0;
  std::map<std::string, Entry> entries;
  // Persistent buffers the device program names but the parameter table does
  // not hold: grad_step's "grad:<p>" gradients (kept for apply_step), in one
  // zeroed block allocated when the first function that names them is prepared.
  std::deque<Parameter> deviceOnly;
  std::vector<void *> deviceOnlyBlocks;
  uint64_t deviceOnlyBytes = 0;
  /// Entry name -> its 16-bit copies ("shadow:<name>", kShadowPrefix), which
  /// setEntry refreshes.
  std::map<std::string, std::vector<std::string>> shadows;
  Status addDeviceOnly(const DeviceFunction &fn);
  /// Casts f32 entry `source` into its copy `shadow` (stream 0, not waited for).
  Status refreshShadow(const std::string &shadow, const std::string &source);
  DeviceArena arena;
  // One cuBLASLt wrapper and workspace a stream that runs matmuls (two
  // streams' matmuls may run at once: tcx-schedule-streams).
  std::map<int64_t, std::unique_ptr<Matmul>> matmuls;
  /// The matmul tunings' choices, shared by every Matmul (ExecutorOptions::
  /// matmulTuneDir; null: each Matmul times its own).
  std::shared_ptr<TuningRecord> tuningRecord;
  std::map<int64_t, void *> workspaces;
  int64_t buildStream = 0; // the stream of the op buildOp is building
  std::deque<Stream> streams;
  std::map<std::string, Prepared> prepared;
  std::deque<Submitted> submitted; // oldest first
  /// Waits for every enqueued submitted run (what it reports stays for
  /// collect): before any call that could change what they use.
  void finishSubmitted();
  /// `name`'s prepared function where submit() can enqueue it and return
  /// (Executor::defers), else null.
  Prepared *deferrable(const std::string &name);
  uint64_t epoch = 0; // bumped when a function is prepared or the arena grows
  std::deque<Event> events; // deque: closures hold pointers to them
  // ExecutorOptions::profile (tc-run: TC_CUDA_PROFILE=1): per-op GPU time
  // (events around every op, no graphs), summed by op name over every run but
  // the first and printed to stderr at the end.
  bool profile = false;
  // A traced run (runTraced): the buffers handed to `trace` after their ops.
  const std::set<int32_t> *traceKeys = nullptr;
  const TraceSink *trace = nullptr;
  std::vector<cudaEvent_t> marks;
  struct OpTime {
    double ms = 0;
    int64_t calls = 0;
  };
  std::map<std::string, OpTime> opTimes;
  double profiledMs = 0;

  /// Frees every device allocation; prints the profile first (profile on).
  ~Impl();
  /// The per-op GPU times to stderr (ExecutorOptions::profile), at the end.
  void reportProfile();

  cudaStream_t stream(int64_t id) { return streams.at(static_cast<size_t>(id)).get(); }

  /// Grows `pool` (streams or events) to `count` created handles.
  template <class Handle> static Status growTo(std::deque<Handle> &pool, int64_t count) {
    while (static_cast<int64_t>(pool.size()) < count) {
      Handle h;
      TC_RETURN_IF_ERROR(Handle::create(&h));
      pool.push_back(std::move(h));
    }
    return Status::ok();
  }
  Status ensureStreams(int64_t count) { return growTo(streams, count); }
  Status ensureEvents(int64_t count) { return growTo(events, count); }

  /// The device pointer of buffer `index` of `p`'s function, bounds-checked
  /// (`where` names the op in errors).
  Status pointer(Prepared &p, int32_t index, void **out, const std::string &where);

  Status buildOp(Prepared &p, const DeviceOp &op, size_t index);
  Status buildLaunch(Prepared &p, const DeviceOp &op, const std::string &where,
                     const std::vector<void *> &ins, const std::vector<void *> &outs,
                     cudaStream_t s);
  Status buildLibrary(Prepared &p, const DeviceOp &op, const std::string &where,
                      const std::vector<void *> &ins, const std::vector<void *> &outs,
                      cudaStream_t s);
  Status buildMatmul(Prepared &p, const DeviceOp &op, const std::string &where,
                     const std::vector<void *> &ins, const std::vector<void *> &outs,
                     cudaStream_t s);
  /// The "nvfp4_gemm" library call: cuBLASLt's NVFP4 GEMM (Matmul::runNvfp4).
  Status buildNvfp4Gemm(Prepared &p, const DeviceOp &op, const std::string &where,
                        const std::vector<void *> &ins, const std::vector<void *> &outs,
                        cudaStream_t s);
  /// The cuBLASLt wrapper and workspace of stream `sid`, made on first use.
  Status ensureMatmul(int64_t sid, Matmul **out);
  /// Waits for every stream (after a failure, before an error is returned).
  void synchronizeAll();
  Status prepare(const std::string &name, Prepared **out);
  Status resolve(Prepared &p);
  Status findGroup(Prepared &p, size_t first, size_t *end,
                   std::vector<std::vector<size_t>> *classes);
  Status buildGroup(Prepared &p, const std::vector<size_t> &members);
};

/// The type of buffer `index` of `p`'s function.
inline const TensorType &bufType(const Prepared &p, int32_t index) {
  return p.fn->buffers[static_cast<size_t>(index)].type;
}

} // namespace tc::rt::cuda

#endif // TC_RUNTIME_CUDA_EXECUTOR_IMPL_H
