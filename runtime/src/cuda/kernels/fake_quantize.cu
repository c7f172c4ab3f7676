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
// device, so the pass needs no host sync and the CPU draws the same. The
// block arithmetic is fp4_block.cuh's, which fp4_pack.cu shares. The
// unscaled form (tc-fp4-exact) writes q * block_scale and, from block 0,
// the tensor's decode scale.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/cuda/kernels/fp4_block.cuh"
#include "runtime/src/cuda/kernels/kernels.h"

namespace tc::rt::cuda {
namespace {

using namespace kern;

constexpr int kThreads = 128;

__device__ __forceinline__ float fromDouble(double v, float *) { return __double2float_rn(v); }
__device__ __forceinline__ bf16 fromDouble(double v, bf16 *) { return __double2bfloat16(v); }

/// Writes each element dequantised: y = q * blockScale * tensorDecode
/// (nvfp4) or q * scaleInv (mxfp4), exact in double, rounded once; with
/// `unscaled` (nvfp4) y = q * blockScale, exact.
template <class T, bool Nv> struct DequantSink {
  T *y;
  bool unscaled;
  Fp4BlockScales s;
  __device__ void block(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                        const Fp4BlockScales &scales) {
    s = scales;
  }
  __device__ void element(int64_t, int64_t, int64_t k, double q) {
    double dec = unscaled ? 1.0 : static_cast<double>(s.dec);
    double out = Nv ? q * s.blockScale * dec : q * s.scaleInv;
    y[k] = fromDouble(out, static_cast<T *>(nullptr));
  }
};

template <class T, bool Nv, bool Stochastic>
__global__ void __launch_bounds__(kThreads)
    fakeQuantizeKernel(const T *x, T *y, const float *amax, Fp4View v, uint64_t seed,
                       uint64_t stream, const float *step, float *tensorScale) {
  int64_t b = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (b >= v.gridRows * v.gridCols)
    return;
  DequantSink<T, Nv> sink{y, tensorScale != nullptr, {}};
  fp4QuantizeBlock<T, Nv, Stochastic>(x, amax, v, b, seed, stream, step, sink);
  if (Nv && tensorScale && b == 0) // every block derives the same decode scale
    *tensorScale = sink.s.dec;
}

} // namespace

Status fakeQuantizeFp4(DType dt, const void *x, void *y, float *amax, int64_t outer, int64_t len,
                       int64_t inner, Fp4Format format, bool blocks2d, const Fp4Stochastic *sr,
                       cudaStream_t stream, float *tensorScale) {
  TC_RETURN_IF_ERROR(checkEntry("fakeQuantizeFp4", outer * inner, len));
  bool nv = format == Fp4Format::Nvfp4;
  if (blocks2d && !nv)
    return invalidArgument("fakeQuantizeFp4: 16x16 blocks are nvfp4's only");
  if (tensorScale && !nv)
    return invalidArgument("fakeQuantizeFp4: a tensor scale is nvfp4's only");
  if (!x || !y || (nv && !amax) || (sr && !sr->step))
    return invalidArgument("fakeQuantizeFp4: null pointer");
  int64_t rows = outer * inner;
  if (rows == 0 || len == 0) // amax 0: the decode scale is 1 (the f32 bits 0x3f800000)
    return tensorScale ? fillBuffer(tensorScale, 4, 0x3f800000u, 1, stream) : Status::ok();
  Fp4View v = fp4View(outer, len, inner, nv, blocks2d);
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
                                                                     rngStream, step,
                                                                     tensorScale);
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
