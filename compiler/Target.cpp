//===- Target.cpp - the one table of the GPUs tc compiles for -------------===//
#include "compiler/Target.h"

namespace tc {

const std::vector<TargetDevice> &targetDevices() {
  // Peaks: NVIDIA's datasheets (H100/H200 SXM: dense bf16/fp16 989.4
  // TFLOP/s, tf32 494.7, fp8 1978.9, fp32 66.9; the RTX 5090 from the RTX
  // Blackwell architecture whitepaper: dense bf16/fp16 with fp32
  // accumulation 209.5, fp32 104.8; its fp8/fp4 with fp32 accumulation are
  // not entered until sourced). Capacity: cudaMemGetInfo's total on the H200 here (gpu-check's run-loop
  // row, 2026-12-01) is 644,939,776 B below the 143,771 MiB nvidia-smi shows for the same card
  // (.library/device/KINDS.md, 2026-10-29); the H100 and RTX 5090 rows subtract that gap from
  // their nvidia-smi totals, an estimate on the low side (the gap grows with the memory size).
  static const std::vector<TargetDevice> kDevices = {
      {"NVIDIA H200", "H200", "sm_90", 150'109'880'320ll,
       "cudaMemGetInfo total, measured on the H200 here (bench/RESULTS.md, 2026-12-01)",
       552'402'944ll, "measured on the H200 here (bench/RESULTS.md, 2026-12-01)",
       989.4e12, 989.4e12, 494.7e12, 1978.9e12, 66.9e12, "NVIDIA H200 SXM datasheet",
       "NVLink 4 (900 GB/s) on SXM boards"},
      {"NVIDIA H100", "H100", "sm_90", 84'875'870'208ll,
       "not measured by tc: nvidia-smi's 81,559 MiB for an H100 SXM 80 GB less the 644,939,776 B "
       "by which cudaMemGetInfo's total is below nvidia-smi's on the H200 here (a low estimate)",
       552'402'944ll, "assumed as measured on the H200",
       989.4e12, 989.4e12, 494.7e12, 1978.9e12, 66.9e12, "NVIDIA H100 SXM datasheet",
       "NVLink 4 (900 GB/s) on SXM boards"},
      {"NVIDIA GeForce RTX 5090", "RTX 5090", "sm_120", 33'545'977'856ll,
       "not measured by tc: nvidia-smi's 32,607 MiB for an RTX 5090 less the 644,939,776 B by "
       "which cudaMemGetInfo's total is below nvidia-smi's on the H200 here (a low estimate)",
       552'402'944ll, "assumed as measured on the H200", 209.5e12,
       209.5e12, 104.8e12, 0, 104.8e12, "NVIDIA RTX Blackwell GPU architecture whitepaper",
       "PCIe 5.0 x16 (no NVLink)"},
  };
  return kDevices;
}

const std::vector<TargetArch> &targetArches() {
  static const std::vector<TargetArch> kArches = {
      {"sm_90", "sm_90", "sm_90"},
      // Block-scaled FP8/FP4 MMA needs the architecture-specific features.
      {"sm_120", "sm_120", "sm_120a"},
      {"sm_120a", "sm_120", "sm_120a"},
  };
  return kArches;
}

const TargetArch *findTargetArch(const std::string &target) {
  for (const TargetArch &a : targetArches())
    if (target == a.name)
      return &a;
  return nullptr;
}

std::vector<const TargetDevice *> devicesOf(const std::string &arch) {
  const TargetArch *a = findTargetArch(arch);
  std::vector<const TargetDevice *> out;
  for (const TargetDevice &d : targetDevices())
    if (a && std::string(a->devices) == d.arch)
      out.push_back(&d);
  return out;
}

bool isGpuArch(const std::string &target) { return findTargetArch(target) != nullptr; }

double densePeak(const TargetDevice &d, const std::string &dtype) {
  if (dtype == "bf16")
    return d.bf16;
  if (dtype == "fp16")
    return d.fp16;
  if (dtype == "tf32")
    return d.tf32;
  if (dtype == "fp8")
    return d.fp8;
  if (dtype == "fp32")
    return d.fp32;
  return 0;
}

} // namespace tc
