//===- executor.h - the CPU reference executor ------------------*- C++ -*-===//
//
// Interprets a Function of an Artifact op by op on the host. It is the
// numerical oracle of tc: plain loops, computing in double, with exact
// emulation of every storage format at op boundaries:
//   - values declared f32 are rounded to float after every op in
//     RefPrecision::F32 (the default) and kept in double in RefPrecision::F64;
//   - values declared bf16/f16/fp8/fp4 are always rounded to their format
//     (round to nearest even; overflow as float_format.h describes);
//   - integers are computed in int64 and wrapped to their declared width;
//   - reductions, softmax, norms and losses accumulate in double.
// Errors (bad inputs, unknown ops, out-of-range indices, parameters without
// data) come back as a Status naming the op and the value, never a crash.
//
// CpuExecutor is the CPU backend of base/executor.h: runFunction with the
// parameter/state table held between calls (filled from the artifact's
// weights and initialisers once), updated in place by the functions that
// return "update:NAME" results, as the CUDA executor updates its table.
//
// Thread-safety: runFunction only reads the artifact and the function, so
// any number of threads may call it concurrently on the same artifact. A
// CpuExecutor runs functions that update nothing concurrently and the others
// one at a time (a shared mutex).
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_CPU_EXECUTOR_H
#define TC_RUNTIME_CPU_EXECUTOR_H

#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "runtime/src/base/executor.h"
#include "runtime/src/schema/program.h"
#include "runtime/src/base/status.h"

namespace tc::rt {

enum class RefPrecision { F32, F64 };

struct ExecOptions {
  RefPrecision precision = RefPrecision::F32;
  /// With RefPrecision::F64: f32 values crossing the function boundary
  /// (inputs, parameter overrides, outputs) may be / are exchanged as f64
  /// host tensors, so that state kept between calls (a training loop's
  /// parameters and optimizer state) is never rounded to f32.
  bool wideF32 = false;
  /// Seed of the parameter initialisers (init.h) of entries whose
  /// initialiser is not Data (tc-run --seed).
  uint64_t initSeed = 0;
  /// A traced run (Executor::runTraced): the value ids handed to `trace`,
  /// each rounded to its declared type, as soon as its op has run.
  const std::set<int32_t> *traceKeys = nullptr;
  const TraceSink *trace = nullptr;
};

/// Runs `fn` (a function of `artifact`) on `inputs`, given in the order of
/// fn.inputs, and returns the results in the order of fn.outputs, each typed
/// as fn.values declares. Parameters are looked up by name: first in
/// `overrides` (if non-null), then in the artifact's weights.
Status runFunction(const Artifact &artifact, const Function &fn,
                   const std::vector<HostTensor> &inputs,
                   std::vector<HostTensor> *outputs, const ExecOptions &opts = {},
                   const std::map<std::string, HostTensor> *overrides = nullptr);

/// The input checks runFunction does first: the count, then every input's
/// dtype, shape and byte size against fn.values ("input 'ids': expected i64
/// 2x16, got i32 2x16"). InvalidArgument on mismatch.
/// With `acceptF64ForF32`, an f64 input is also accepted where f32 is declared.
Status checkInputs(const Function &fn, const std::vector<HostTensor> &inputs,
                   bool acceptF64ForF32 = false);

/// The CPU reference as an Executor: the artifact (which must outlive it)
/// and the state table. f32 entries are held in f64 with RefPrecision::F64
/// (opts.wideF32 is set), so a float64 run never rounds to f32.
class CpuExecutor : public Executor {
public:
  /// Fills the table: entries with data or an initialiser (seeded by
  /// opts.initSeed) get their values; entries compiled without weights stay
  /// unset (typed, no bytes) until setEntry (a run reading one fails with
  /// init.h's missingDataMessage).
  static Status create(const Artifact *artifact, const ExecOptions &opts,
                       std::unique_ptr<CpuExecutor> *out);

  std::string deviceName() const override { return "cpu (reference executor)"; }
  bool onDevice() const override { return false; }
  bool hasFunction(const std::string &name) const override;
  const std::vector<std::string> *outputNames(const std::string &name) const override;
  Status run(const std::string &name, const std::vector<HostTensor> &inputs,
             std::vector<HostTensor> *outputs, const std::vector<bool> *want = nullptr) override;
  Status runTraced(const std::string &name, const std::vector<HostTensor> &inputs,
                   std::vector<HostTensor> *outputs, const std::set<int32_t> &keys,
                   const TraceSink &sink) override;
  Status entryType(const std::string &name, TensorType *out) const override;
  Status getEntry(const std::string &name, HostTensor *out) override;
  Status setEntry(const std::string &name, const HostTensor &value) override;

private:
  CpuExecutor() = default;
  Status runWith(const std::string &name, const std::vector<HostTensor> &inputs,
                 std::vector<HostTensor> *outputs, const ExecOptions &opts);
  const Artifact *artifact_ = nullptr;
  ExecOptions opts_;
  std::map<std::string, HostTensor> state_;
  mutable std::shared_mutex mutex_; ///< shared: runs that update nothing, reads
};

/// Whether the executor implements op `name` ("tc.add").
bool isSupportedOp(const std::string &name);
/// Every op name the executor implements, sorted.
std::vector<std::string> supportedOps();

} // namespace tc::rt

#endif // TC_RUNTIME_CPU_EXECUTOR_H
