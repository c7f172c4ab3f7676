//===- Flops.h - what MFU and HFU are measured against ----------*- C++ -*-===//
//
// reports["flops"] of an artifact, which tc-run divides by the step time and
// the device's dense peak (compiler/Target.h):
//
//   model_flops_per_token   6 N + 12 L T d, nanoGPT's (PaLM's) count: N the
//                           parameters without embeddings (those only
//                           gathered from; a tied embedding is counted, as
//                           nanoGPT counts wte), L the attention layers, T
//                           their sequence length, d = heads x head size.
//                           MFU = this x tokens/s / peak.
//   hardware_flops_per_step the compiler's own count of the step's matmul
//                           and attention FLOPs as they execute (2 M N K per
//                           matmul; attention 4 B H Tq Tk D forward and 10 B
//                           H Tq Tk D backward with its recomputed scores,
//                           halved when causal). HFU = this / step time / peak.
//   dtype, peaks            the matmuls' dtype and, per card of the target,
//                           its dense peak for it.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_FLOPS_H
#define TC_COMPILER_FLOPS_H

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <string>

namespace tc {

struct FlopCount {
  int64_t nonEmbeddingParams = 0; ///< N
  int64_t layers = 0, seq = 0, width = 0; ///< L, T, d (0 without tc.attention)
  double modelFlopsPerToken = 0;
  double hardwareFlopsPerStep = 0;
};

/// Counts over `module`: N, L, T, d from @infer; the hardware FLOPs of
/// @train_step, or gradAccum x @grad_step + @apply_step.
FlopCount countFlops(mlir::ModuleOp module, int64_t gradAccum);

/// The JSON of reports["flops"] for `target` and a matmul dtype.
std::string flopsReportJson(const FlopCount &c, const std::string &target,
                            const std::string &dtype);

} // namespace tc

#endif // TC_COMPILER_FLOPS_H
