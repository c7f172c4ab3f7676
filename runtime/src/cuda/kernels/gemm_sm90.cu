//===- gemm_sm90.cu - tc's own sm_90a GEMM: GELU + aux and DGELU ---------===//
//
// The launcher of gemm_sm90.cuh's resident deferred form for the runtime's
// Matmul (cublaslt.cpp), which times it beside cuBLASLt's GELU_AUX_BIAS and
// DGELU epilogues on a problem's first eager call and keeps the faster.
// cuBLASLt's epilogues cost ~60 us over the plain product at GPT-2's c_fc
// on the H100 (bench/RESULTS.md, stops 36-38): their GELU arithmetic and
// the extra bytes sit on each tile's critical path. Here the tile's bf16
// pre-activation (or product) stays in shared memory and its GELU (or
// gelu') runs box by box between the next tile's wgmma issues.
//
// Compiled for sm_90a only (the tc_runtime_cuda_sm90a object); the tensor
// maps are encoded through the driver's cuTensorMapEncodeTiled, found with
// cudaGetDriverEntryPointByVersion (no link against libcuda).
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <string>
#include <type_traits>

#include "runtime/src/cuda/kernels/common.cuh"
#include "runtime/src/cuda/kernels/gemm_sm90.cuh"
#include "runtime/src/cuda/kernels/kernels.h"

namespace tc::rt::cuda {

sm90gemm::EncodeTiled sm90gemm::encodeTiled() {
  static const EncodeTiled fn = [] {
    void *p = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return EncodeTiled(nullptr);
    }
    return reinterpret_cast<EncodeTiled>(p);
  }();
  return fn;
}

namespace {

namespace g90 = sm90gemm;
using g90::encodeTiled;

/// The tensor map of a row-major [rows, cols] bf16 matrix read or written in
/// boxes of [boxRows, 64] (128 bytes a row, 128-byte swizzled).
Status tensorMap(CUtensorMap *map, const void *p, int64_t rows, int64_t cols, int boxRows,
                 const char *what) {
  cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
  cuuint64_t strides[1] = {cuuint64_t(cols) * 2};
  cuuint32_t box[2] = {64, cuuint32_t(boxRows)};
  cuuint32_t elem[2] = {1, 1};
  CUresult r =
      encodeTiled()(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void *>(p), dims, strides,
                    box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return internalError(std::string("ownGemm: cuTensorMapEncodeTiled of ") + what + " [" +
                         std::to_string(rows) + ", " + std::to_string(cols) + "] failed (" +
                         std::to_string(int(r)) + ")");
  return Status::ok();
}

constexpr int kSmem = g90::Coop<3, true>::smem;

/// Launches the resident form of `kernel` over min(tiles, SMs) blocks (the
/// shared-memory opt-in raised on each call: a host attribute, cheap, and
/// right on every device of a multi-GPU process).
template <class Kernel>
Status launch(Kernel kernel, const char *name, const OwnGemmArgs &g, const CUtensorMap &ma,
              const CUtensorMap &mb, const CUtensorMap &mo, const CUtensorMap &mx,
              cudaStream_t stream) {
  int dev = 0, sms = 0;
  TC_CUDA_RETURN_IF_ERROR(cudaGetDevice(&dev));
  TC_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  TC_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const int64_t tiles = (g.m / g90::BM) * (g.n / g90::BN);
  const int grid = static_cast<int>(std::min<int64_t>(tiles, sms));
  kernel<<<grid, g90::kThreads, kSmem, stream>>>(
      ma, mb, mo, mx, static_cast<const g90::bf16 *>(g.bias), static_cast<int>(g.m),
      static_cast<int>(g.n), static_cast<int>(g.k), nullptr);
  return kern::checkLaunch(name);
}

} // namespace

bool ownGemmAvailable() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return major == 9 && minor == 0 && encodeTiled() != nullptr;
}

bool ownGemmShapeFits(int64_t m, int64_t n, int64_t k) {
  return m > 0 && n > 0 && k > 0 && m % g90::BM == 0 && n % g90::BN == 0 && k % g90::BK == 0 &&
         m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX;
}

Status ownGemm(const OwnGemmArgs &g, cudaStream_t stream) {
  TC_RETURN_IF_ERROR(requireGpu());
  const bool dgelu = g.epilogue == OwnGemmEpilogue::DGelu;
  std::string what = std::string("ownGemm (") + (dgelu ? "dgelu" : "gelu+aux") +
                     (g.exact ? " erf" : "") + (g.bKMajor ? "" : ", b [k, n]") + ", " +
                     std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k) +
                     ")";
  if (!ownGemmShapeFits(g.m, g.n, g.k))
    return invalidArgument(what + ": needs m % 128, n % 256 and k % 64 == 0, all positive");
  if (!g.a || !g.b || !g.out || !g.aux)
    return invalidArgument(what + ": a, b, out and aux must be non-null");
  if (dgelu && g.bias)
    return invalidArgument(what + ": DGELU takes no bias");
  const void *pointers[] = {g.a, g.b, g.out, g.aux, g.bias};
  for (const void *p : pointers)
    if (p && !kern::aligned16(p))
      return invalidArgument(what + ": every pointer must be 16-byte aligned");
  if (!dgelu && g.out == g.aux)
    return invalidArgument(what + ": out and aux must be distinct");
  if (!ownGemmAvailable())
    return unimplemented(what + ": needs an sm_90 GPU (H100 / H200) and a driver with "
                                "cuTensorMapEncodeTiled");
  CUtensorMap ma, mb, mo, mx;
  TC_RETURN_IF_ERROR(tensorMap(&ma, g.a, g.m, g.k, g90::BM, "a"));
  if (g.bKMajor)
    TC_RETURN_IF_ERROR(tensorMap(&mb, g.b, g.n, g.k, g90::BN, "b"));
  else
    TC_RETURN_IF_ERROR(tensorMap(&mb, g.b, g.k, g.n, 64, "b"));
  TC_RETURN_IF_ERROR(tensorMap(&mo, g.out, g.m, g.n, 64, "out"));
  // (DGELU reads its aux in halves of a [64, 64] box: gemm_sm90.cuh)
  TC_RETURN_IF_ERROR(tensorMap(&mx, g.aux, g.m, g.n, dgelu ? 32 : 64, "aux"));
  // The resident form (3 stages, deferred) by epilogue, b's layout and GELU.
  auto pick = [&](auto epi, auto bl, auto erf) {
    return launch(g90::gemmCoop<decltype(epi)::value, 3, decltype(bl)::value, true, false,
                                decltype(erf)::value>,
                  what.c_str(), g, ma, mb, mo, mx, stream);
  };
  using Dgelu = std::integral_constant<int, g90::kDgelu>;
  using Gelu = std::integral_constant<int, g90::kBiasGeluAux>;
  using KMajor = std::integral_constant<int, 0>;
  using NMajor = std::integral_constant<int, 1>;
  using Tanh = std::false_type;
  using Exact = std::true_type;
  if (dgelu) {
    if (g.exact)
      return g.bKMajor ? pick(Dgelu{}, KMajor{}, Exact{}) : pick(Dgelu{}, NMajor{}, Exact{});
    return g.bKMajor ? pick(Dgelu{}, KMajor{}, Tanh{}) : pick(Dgelu{}, NMajor{}, Tanh{});
  }
  if (g.exact)
    return g.bKMajor ? pick(Gelu{}, KMajor{}, Exact{}) : pick(Gelu{}, NMajor{}, Exact{});
  return g.bKMajor ? pick(Gelu{}, KMajor{}, Tanh{}) : pick(Gelu{}, NMajor{}, Tanh{});
}

} // namespace tc::rt::cuda
