//===- init.cu - parameter initialisers on the device ---------------------===//
//
// Fills a parameter's buffer with its initialiser (zeros, ones, normal,
// uniform) on the GPU, so that a large model is initialised where it runs
// instead of being copied from the host. Every element is an independent
// draw of init_rng.h's counter-based RNG at (seed, FNV-1a 64 of the name,
// element index): a grid-stride loop, any geometry gives the same values, and
// they equal the host's initParameter (init.cpp) to 1 ulp of the dtype (see
// init_rng.h for why normal may differ by 1 ulp; the rest is bit-identical).
// The math is in double (one rounding to the storage dtype, as the host).
//
//===----------------------------------------------------------------------===//
#include <cuda_fp16.h>

#include "runtime/src/base/host_tensor.h"
#include "runtime/src/base/init.h"
#include "runtime/src/base/init_rng.h"
#include "runtime/src/cuda/kernels/common.cuh"
#include "runtime/src/cuda/kernels/kernels.h"

namespace tc::rt::cuda {
namespace {

using namespace kern;

constexpr int kThreads = 256;

/// Rounds once from double to the storage type (nearest-even), saturating
/// to the largest finite value as the host's storeDouble(..., saturate).
template <class T> __device__ __forceinline__ T fromDouble(double v);
template <> __device__ __forceinline__ float fromDouble<float>(double v) {
  return __double2float_rn(v);
}
template <> __device__ __forceinline__ bf16 fromDouble<bf16>(double v) {
  const double kMax = 3.3895313892515355e38; // (2 - 2^-7) 2^127
  return __double2bfloat16(fmin(fmax(v, -kMax), kMax));
}
template <> __device__ __forceinline__ __half fromDouble<__half>(double v) {
  return __double2half(fmin(fmax(v, -65504.0), 65504.0));
}

/// out[n] = initialiser `init` (ParamInit) with arguments a, b.
template <class T>
__global__ void initKernel(T *out, int64_t n, int init, uint64_t seed, uint64_t stream, double a,
                           double b) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    double v = 0.0;
    uint64_t k = static_cast<uint64_t>(i);
    if (init == static_cast<int>(ParamInit::Ones))
      v = 1.0;
    else if (init == static_cast<int>(ParamInit::Normal))
      v = initrng::normal(seed, stream, k, a, b);
    else if (init == static_cast<int>(ParamInit::Uniform))
      v = initrng::uniform(seed, stream, k, a, b);
    out[i] = fromDouble<T>(v);
  }
}

template <class T>
Status launchInit(void *dst, int64_t n, ParamInit init, uint64_t seed, uint64_t stream, double a,
                  double b, cudaStream_t cs) {
  // Enough blocks to fill the GPU; the grid-stride loop covers the rest.
  int64_t blocks = ceilDiv(n, kThreads);
  if (blocks > 65536)
    blocks = 65536;
  initKernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, cs>>>(
      static_cast<T *>(dst), n, static_cast<int>(init), seed, stream, a, b);
  return checkLaunch("initKernel");
}

} // namespace

Status initParameterDevice(const Parameter &p, uint64_t seed, void *dst, cudaStream_t stream) {
  std::string where = "initParameterDevice: parameter '" + p.name + "'";
  int64_t n = 0;
  TC_RETURN_IF_ERROR(checkedNumElements(p.type.shape, &n).withPrefix(where));
  TC_RETURN_IF_ERROR(checkEntry("initParameterDevice", n));
  if (p.init == ParamInit::Data)
    return failedPrecondition(p.hasData ? where + " is initialised from the artifact's data"
                                        : missingDataMessage(p.name));
  if (n == 0)
    return Status::ok();
  if (!dst)
    return invalidArgument(where + ": null pointer");
  uint64_t s = paramStream(p.name);
  double a = p.initArgs[0], b = p.initArgs[1];
  switch (p.type.dtype) {
  case DType::F32:
    return launchInit<float>(dst, n, p.init, seed, s, a, b, stream);
  case DType::BF16:
    return launchInit<bf16>(dst, n, p.init, seed, s, a, b, stream);
  case DType::F16:
    return launchInit<__half>(dst, n, p.init, seed, s, a, b, stream);
  default:
    return unimplemented(where + ": device initialisers support f32, bf16 and f16, not " +
                         std::string(dtypeName(p.type.dtype)) +
                         " (initialise it on the host with initParameter and copy it)");
  }
}

} // namespace tc::rt::cuda
