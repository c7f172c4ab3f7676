//===- fake_quantize.cu - NVFP4 / MXFP4 fake quantisation (tc.fake_quantize) -===//
//
// deq(quant(x)) bit for bit what the CPU reference (runtime/src/cpu/
// quantize.cpp, fakeQuantizeKernel) computes; the arithmetic both call is
// runtime/src/base/fp4_math.h:
//   nvfp4: the tensor's amax (amaxFp8's exact pass over the float bits, NaN
//     ignored), each block's amax, its E4M3 decode scale (cvt.rn.satfinite
//     of the f32 chain), q = e2m1(x * encode), y = q * block_scale *
//     tensor_decode formed exactly in double and rounded once to y's type;
//   mxfp4: per 1x32 block the E8M0 scale, y = e2m1(x / s) * s (exact in
//     double), rounded once.
// x is viewed as [outer, len, inner] with the blocks along len (the axis of
// the op): 1x16 / 1x32 blocks, or 16x16 blocks of the [outer * inner, len]
// matrix (blocks2d: rank 2, weights). One thread per block: it takes the
// block's amax and writes its elements. With stochastic rounding element k
// (its index in x's row-major layout) draws init_rng.h's
// uniform01(seed, mix64(stream + step * kGamma), k), the step read on the
// device, so the pass needs no host sync and the CPU draws the same.
//
//===----------------------------------------------------------------------===//
#include <cfloat>

#include <cuda_fp8.h>

#include "runtime/src/base/fp4_math.h"
#include "runtime/src/base/init_rng.h"
#include "runtime/src/cuda/kernels/common.cuh"
#include "runtime/src/cuda/kernels/kernels.h"

namespace tc::rt::cuda {
namespace {

using namespace kern;

constexpr int kThreads = 128;

__device__ __forceinline__ float fromDouble(double v, float *) { return __double2float_rn(v); }
__device__ __forceinline__ bf16 fromDouble(double v, bf16 *) { return __double2bfloat16(v); }

/// NVFP4's E4M3 rounding of a block's decode scale (saturating, as the
/// CPU's saturatingRound), back as a float.
__device__ __forceinline__ float e4m3(float s) {
  __nv_fp8_storage_t b = __nv_cvt_float_to_fp8(s, __NV_SATFINITE, __NV_E4M3);
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(b, __NV_E4M3)));
}

struct View {
  int64_t rows, len, inner; // rows = outer * inner of the [rows, len] view
  int64_t gridRows, gridCols;
  int blockRows, blockCols;
  bool rowsFastest; // consecutive threads on consecutive rows (inner > 1: coalesced)
};

template <class T, bool Nv, bool Stochastic>
__global__ void __launch_bounds__(kThreads)
    fakeQuantizeKernel(const T *x, T *y, const float *amax, View v, uint64_t seed,
                       uint64_t stream, const float *step) {
  int64_t b = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (b >= v.gridRows * v.gridCols)
    return;
  int64_t rb = v.rowsFastest ? b % v.gridRows : b / v.gridCols;
  int64_t cb = v.rowsFastest ? b / v.gridRows : b % v.gridCols;
  int64_t i0 = rb * v.blockRows, i1 = min(i0 + v.blockRows, v.rows);
  int64_t j0 = cb * v.blockCols, j1 = min(j0 + v.blockCols, v.len);
  auto at = [&](int64_t i, int64_t j) {
    return (i / v.inner * v.len + j) * v.inner + i % v.inner;
  };
  float blockAmax = 0.f;
  for (int64_t i = i0; i < i1; ++i)
    for (int64_t j = j0; j < j1; ++j)
      blockAmax = fmaxf(blockAmax, fabsf(toF(x[at(i, j)])));
  uint64_t key = 0;
  if (Stochastic)
    key = initrng::mix64(stream + static_cast<uint64_t>(*step) * initrng::kGamma);
  // Nv: y = q * blockScale * tensorDecode; mx: y = q * scaleInv (exact in double).
  float enc = 1.f, dec = 1.f, blockScale = 0.f, encode = 0.f;
  double scaleInv = 1.0;
  if (Nv) {
    enc = fp4::nvfp4TensorEncode(amax[0]);
    dec = 1.0f / enc;
    blockScale = e4m3(fp4::nvfp4BlockScaleUnrounded(blockAmax, enc));
    encode = fp4::nvfp4ElementEncode(blockScale, dec);
  } else {
    scaleInv = fp4::mxScaleInv(blockAmax, fp4::kE2M1Emax);
  }
  for (int64_t i = i0; i < i1; ++i)
    for (int64_t j = j0; j < j1; ++j) {
      int64_t k = at(i, j);
      double u = Stochastic ? initrng::uniform01(seed, key, static_cast<uint64_t>(k)) : -1.0;
      float xv = toF(x[k]);
      double out = Nv ? fp4::roundE2M1(xv * encode, u) * blockScale * static_cast<double>(dec)
                      : fp4::roundE2M1(xv / scaleInv, u) * scaleInv;
      y[k] = fromDouble(out, static_cast<T *>(nullptr));
    }
}

} // namespace

Status fakeQuantizeFp4(DType dt, const void *x, void *y, float *amax, int64_t outer, int64_t len,
                       int64_t inner, Fp4Format format, bool blocks2d, const Fp4Stochastic *sr,
                       cudaStream_t stream) {
  TC_RETURN_IF_ERROR(checkEntry("fakeQuantizeFp4", outer * inner, len));
  bool nv = format == Fp4Format::Nvfp4;
  if (blocks2d && !nv)
    return invalidArgument("fakeQuantizeFp4: 16x16 blocks are nvfp4's only");
  if (!x || !y || (nv && !amax) || (sr && !sr->step))
    return invalidArgument("fakeQuantizeFp4: null pointer");
  int64_t rows = outer * inner;
  if (rows == 0 || len == 0)
    return Status::ok();
  View v;
  v.rows = rows;
  v.len = len;
  v.inner = inner;
  v.blockRows = blocks2d ? 16 : 1;
  v.blockCols = nv ? 16 : 32;
  v.gridRows = ceilDiv(rows, v.blockRows);
  v.gridCols = ceilDiv(len, v.blockCols);
  v.rowsFastest = inner > 1;
  int64_t blocks = ceilDiv(v.gridRows * v.gridCols, kThreads);
  if (blocks > INT32_MAX)
    return invalidArgument("fakeQuantizeFp4: more than 2^38 blocks");
  if (nv) // the tensor amax the blocks' scales derive from
    TC_RETURN_IF_ERROR(amaxFp8(dt, x, amax, 1, rows * len, Fp8Scaling::Tensor, stream));
  uint64_t seed = sr ? sr->seed : 0, rngStream = sr ? sr->stream : 0;
  const float *step = sr ? sr->step : nullptr;
  return dispatchFloat(dt, "fakeQuantizeFp4", [&](auto tag) {
    using T = decltype(tag);
    auto *xs = static_cast<const T *>(x);
    auto *ys = static_cast<T *>(y);
    auto launch = [&](auto kernel) {
      kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(xs, ys, amax, v, seed,
                                                                     rngStream, step);
      return checkLaunch("fake_quantize");
    };
    if (nv)
      return sr ? launch(fakeQuantizeKernel<T, true, true>)
                : launch(fakeQuantizeKernel<T, true, false>);
    return sr ? launch(fakeQuantizeKernel<T, false, true>)
              : launch(fakeQuantizeKernel<T, false, false>);
  });
}

} // namespace tc::rt::cuda
