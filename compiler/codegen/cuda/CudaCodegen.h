//===- CudaCodegen.h - CUDA C++ for tc kernels, NVRTC to cubin --*- C++ -*-===//
//
// One CUDA C++ kernel per `tcx.kernel` body (a `tc.fusion` that tc-fuse
// built, or a standalone shape / reduction op), made by tcx-generate-cuda
// after tc-lower-to-tcx and compiled with NVRTC to a cubin for the target
// (sm_90; sm_120a for --target sm_120) plus PTX.
//
// Kernel ABI (every generated kernel; `extern "C"`, so the name is the
// symbol):
//
//   __global__ void NAME(OUT0* out0, ..., const IN0* in0, ..., long long n,
//                        TcMeta<K> meta)
//
//   - one pointer per result (in result order), then one per operand (in
//     operand order), each to a dense row-major buffer of the value's
//     storage type: f32 float, f64 double, f16/bf16 unsigned short (IEEE /
//     bfloat16 bits), i1 unsigned char (0/1), iN/uiN the C integer of that
//     width, fp8/fp4 (shape ops only) unsigned char. Pointers may alias
//     nothing else; 16-byte alignment enables the vector path (checked at run
//     time: unaligned pointers take the scalar loop).
//   - `n`: the work count of the kernel's grid-stride loop (elements for
//     elementwise and shape kernels, rows for row kernels).
//   - `meta`: `struct TcMeta<K> { long long v[K]; }` by value (K >= 1):
//     shapes, strides and offsets; the layout is kernel-specific and the
//     compiler gives every value (KernelParam::values), so a launcher copies
//     it and never interprets it.
//   - Launch with KernelSource::launch (1-D grid and block, no dynamic shared
//     memory); any grid size is correct (grid-stride loops).
//
// Math is fp32 for f32/f16/bf16 values (f64 in double, integers in 64 bits,
// wrapped to their width after every op): 16-bit floats are widened on load
// and rounded to nearest even on store (and where a tc.cast asks for it).
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_CODEGEN_CUDA_CUDACODEGEN_H
#define TC_COMPILER_CODEGEN_CUDA_CUDACODEGEN_H

#include "dialects/tcx/IR/TcxOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tc::cuda {

enum class ParamKind {
  Output,     ///< pointer to result `index`
  Input,      ///< pointer to operand `index`
  Int64,      ///< `long long n`: values[0]
  Int64Array, ///< `TcMeta<K> meta` by value: values (K of them)
};

struct KernelParam {
  ParamKind kind;
  std::string name;            ///< as in the source: "out0", "in1", "n", "meta"
  int64_t index = -1;          ///< result / operand index for pointers
  std::string dtype;           ///< pointers: element type as MLIR prints it ("bf16")
  std::vector<int64_t> shape;  ///< pointers: the tensor's shape
  std::vector<int64_t> values; ///< Int64 / Int64Array: what to pass
};

struct LaunchConfig {
  int64_t grid = 1;  ///< blocks (1-D)
  int64_t block = 256; ///< threads per block (1-D)
};

struct KernelSource {
  /// Stable symbol: kind + FNV-1a hash of the source, so structurally equal
  /// ops (same dtypes, ranks, body) share one kernel whatever their shapes.
  std::string name;
  std::string source; ///< complete CUDA C++ translation unit
  std::vector<KernelParam> params;
  LaunchConfig launch;
  mlir::Operation *op = nullptr; ///< the op it implements
};

struct KernelBinary {
  std::string name;
  std::string source;
  std::string ptx;            ///< for compute_XX of the target
  std::vector<uint8_t> cubin; ///< SASS for the target
  std::string arch;           ///< "sm_90", "sm_120a"
  std::string log;            ///< NVRTC's log (warnings)
};

/// Ops that get a generated kernel: tc.fusion, and standalone transpose,
/// slice, broadcast, reshape, gather, concat, split, pad, insert_slice and reductions
/// (sum/mean/max/min/prod over any axes).
bool isKernelOp(mlir::Operation *op);

/// Codegen choices (tc-cuda-codegen's flags; tc-compile: the defaults).
struct CodegenOptions {
  /// A single-row reduction split over blocks (a weight
  /// gradient's sum of squares for the grad-norm clip) takes its length as
  /// n and keeps its blocks' partials and counter in slots from the launch's
  /// first block, so rows of every length share the kernel and a grouped
  /// launch takes a window of them (its source states the most blocks such
  /// a launch may span: `// tc:group_max_blocks N`).
  bool groupSplitRows = true;
};

/// The kernel for one op (isKernelOp). Failure (with a diagnostic on the op)
/// for element types or patterns codegen does not handle.
mlir::FailureOr<KernelSource> generateKernel(mlir::Operation *op,
                                             const CodegenOptions &options = {});

/// Whether the body of `kernel` gets a generated kernel: kind "fusion" (a
/// tc.fusion body), or one op that isKernelOp.
bool hasGeneratedKernel(tcx::KernelOp kernel);

/// The kernel for the body of a tcx.kernel (hasGeneratedKernel), as
/// tcx-generate-cuda makes it: the same source, parameters and launch as
/// generateKernel of the tc op the body came from. `KernelSource::op` is
/// the tcx.kernel.
mlir::FailureOr<KernelSource> generateKernel(tcx::KernelOp kernel,
                                             const CodegenOptions &options = {});

/// One KernelSource per kernel op (tc level, before tc-lower-to-tcx) of every
/// function, in walk order (names repeat where ops share a kernel;
/// compileKernels compiles each once). For tc-cuda-codegen, which tests
/// codegen on tc ops without the rest of the GPU pipeline.
mlir::FailureOr<std::vector<KernelSource>> generateKernels(mlir::ModuleOp module,
                                                           const CodegenOptions &options = {});

/// The NVRTC architecture of a tc target, as the target table (Target.h)
/// gives it: "sm_90" -> "sm_90", "sm_120" / "sm_120a" -> "sm_120a". Empty
/// for targets without a GPU ("cpu") or unknown ones.
std::string nvrtcArch(llvm::StringRef target);

/// Whether this build can compile kernels (NVRTC was found at build time).
bool haveNvrtc();

/// NVRTC's version ("13.0"), empty without NVRTC: part of the cache keys.
std::string nvrtcVersionString();

/// Compiles every distinct kernel (by name) with NVRTC for `target`, or takes
/// it from the compile cache (cache::global(); a corrupted entry is rebuilt
/// and noted in `notes`). On failure `error` names the kernel and holds
/// NVRTC's log.
mlir::FailureOr<std::vector<KernelBinary>>
compileKernels(const std::vector<KernelSource> &sources, llvm::StringRef target,
               std::string *error, std::vector<std::string> *notes = nullptr);

/// The SM architecture a cubin's ELF header declares ("sm_90", "sm_120a"),
/// read without any CUDA tool; nullopt if it is not a CUDA ELF.
std::optional<std::string> cubinArch(llvm::ArrayRef<uint8_t> cubin);

} // namespace tc::cuda

#endif // TC_COMPILER_CODEGEN_CUDA_CUDACODEGEN_H
