//===- MemoryPlan.h - the memory report of a planned step -------*- C++ -*-===//
//
// What `tc-compile --report memory` prints: the bytes of every category of a
// step planned by tcx-plan-memory, the total the runtime allocates, and
// whether it fits each GPU of the target.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_MEMORYPLAN_H
#define TC_COMPILER_MEMORYPLAN_H

#include "compiler/Target.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tc {

/// Byte counts of one planned function (all exact).
struct MemoryPlanSummary {
  std::string function;
  int64_t parameters = 0;      // tcx.param kind "parameter"
  int64_t modelBuffers = 0;    // kind "buffer" (non-trainable model tensors)
  int64_t optimizerState = 0;  // kind "optimizer_state"
  int64_t persistentGradients = 0; // kind "gradient" (@grad_step results)
  int64_t weightCopies = 0;        // kind "shadow" (tc-shadow-parameter-casts)
  int64_t arenaGradients = 0;  // trainable parameters' bytes: their gradients, in the arena
  int64_t constants = 0;       // tcx.const
  int64_t inputs = 0;          // function arguments (bound by the runtime)
  int64_t activations = 0;     // peak live "activation" allocs
  int64_t backward = 0;        // peak live "backward" allocs
  int64_t narrowCopies = 0;    // peak live FP8/FP4 buffers (within activations + backward)
  int64_t peakLive = 0;        // peak live bytes of every alloc
  int64_t arena = 0;           // tcx.arena_size
  int64_t workspace = 0;       // cuBLASLt workspaces, one a stream with matmuls (0 without)
  /// What the runtime allocates on the device for this step.
  int64_t total() const {
    return parameters + modelBuffers + optimizerState + persistentGradients + weightCopies +
           constants + inputs + arena + workspace;
  }
};

/// Reads the attributes tcx-plan-memory set on `fn`; fails (with `error`)
/// when `fn` has no plan.
mlir::FailureOr<MemoryPlanSummary> summarizeMemoryPlan(mlir::func::FuncOp fn,
                                                       std::string *error);

/// The largest batch that fits one card, found by re-planning (Compile.h's
/// largestFittingBatch): batch < 0 when it was not searched, 0 when not even
/// batch 1 fits; `note` says why it was not searched or what bounds it.
struct BatchFit {
  int64_t batch = -1;
  std::string note;
};

/// The table for one function and a target ("sm_90", "sm_120"): one line per
/// category with exact bytes and binary units beside, the total, and per
/// card of the target (compiler/Target.h) its capacity (cudaMemGetInfo's
/// total, in GB = 1e9 B and GiB = 2^30 B, and where the number comes from)
/// and the verdict: the step fits when its total plus the CUDA context
/// (measured) is at most the capacity. With `fits` (one per card, in the
/// table's order) the largest batch that fits each card. An unknown target
/// gets the table and a line saying no card of it is known.
std::string memoryReport(const MemoryPlanSummary &summary, llvm::StringRef target,
                         const std::vector<BatchFit> &fits = {});

/// The same as JSON: {"function", "target", "bytes": {category: n},
/// "total", "cards": [{"name", "capacity_bytes", "capacity_source",
/// "context_bytes", "fits", "free_bytes", "largest_batch"?, "note"?}]}.
std::string memoryReportJson(const MemoryPlanSummary &summary, llvm::StringRef target,
                             const std::vector<BatchFit> &fits = {});

/// Whether `summary` fits card `d`: total + context <= capacity.
bool fitsCard(int64_t total, const TargetDevice &d);

/// The report of `function` in a planned module (default: @train_step when
/// there is one, else every planned function, one table each). Fails with
/// `error` set when nothing is planned or `function` is missing/unplanned.
mlir::FailureOr<std::string> memoryReport(mlir::ModuleOp module, llvm::StringRef target,
                                          llvm::StringRef function, std::string *error);

/// "1.5 MiB" (binary units, one decimal; plain bytes under 1 KiB).
std::string humanBytes(int64_t bytes);

} // namespace tc

#endif // TC_COMPILER_MEMORYPLAN_H
