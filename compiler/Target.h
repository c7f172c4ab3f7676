//===- Target.h - the one table of the GPUs tc compiles for ----*- C++ -*-===//
//
// The compile targets (and the NVRTC architecture of each), and each card tc
// targets: its architecture, its memory as the driver reports
// it (cudaMemGetInfo's total, which is what a plan must fit in), its dense
// tensor-core peaks per dtype (for MFU) and its interconnect. The memory
// report's fit verdicts, the largest batch that fits, MFU, isGpuTarget and
// the CUDA code generator's architecture read it. Every number says where it
// comes from.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_TARGET_H
#define TC_COMPILER_TARGET_H

#include <cstdint>
#include <string>
#include <vector>

namespace tc {

struct TargetDevice {
  const char *name;  ///< "NVIDIA H200"
  const char *match; ///< a part of the driver's device name that picks this row: "H200"
  const char *arch;  ///< the compile target: "sm_90", "sm_120"
  /// cudaMemGetInfo's total, in bytes, and where the number comes from.
  int64_t memoryBytes;
  const char *memorySource;
  /// What is in use on the card before tc allocates: the CUDA context
  /// (cudaMemGetInfo's total - free after the context is made).
  int64_t contextBytes;
  const char *contextSource;
  /// Dense (no sparsity) peaks in FLOP/s, 0 where the card has no such unit
  /// or the table has no sourced number: bf16 and fp16 with fp32
  /// accumulation, tf32, fp8 (fp32 accumulation), fp32 without tensor cores.
  double bf16, fp16, tf32, fp8, fp32;
  const char *peakSource;
  const char *interconnect;
};

/// A compile target (tc-compile --target): the cards it runs on
/// (TargetDevice::arch) and the architecture NVRTC compiles its kernels for.
struct TargetArch {
  const char *name;    ///< "sm_90", "sm_120", "sm_120a"
  const char *devices; ///< the TargetDevice::arch of its cards
  const char *nvrtc;   ///< "sm_90", "sm_120a"
};

/// Every compile target.
const std::vector<TargetArch> &targetArches();
/// The row of `target`, or null when tc does not compile for it.
const TargetArch *findTargetArch(const std::string &target);

/// Every card, in the order the reports list them.
const std::vector<TargetDevice> &targetDevices();

/// The cards of a compile target ("sm_90": H200, H100; "sm_120": RTX 5090).
std::vector<const TargetDevice *> devicesOf(const std::string &arch);

/// The compile targets tc builds GPU programs for.
bool isGpuArch(const std::string &target);

/// The dense peak of `d` for a step whose matmuls run in `dtype` ("bf16",
/// "fp16", "tf32", "fp8", "fp32"); 0 when unknown.
double densePeak(const TargetDevice &d, const std::string &dtype);

} // namespace tc

#endif // TC_COMPILER_TARGET_H
