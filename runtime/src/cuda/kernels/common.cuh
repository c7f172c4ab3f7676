//===- common.cuh - what every hand-written CUDA kernel of tc shares ------===//
//
// Included by the kernels/*.cu files only (the launchers' API is kernels.h):
//   - storage <-> fp32 conversion (bf16 storage, fp32 math),
//   - 8-element vector loads/stores (one 16-byte access for bf16, two for
//     f32), used when a row length is a multiple of 8 and the pointers are
//     16-byte aligned (the arena guarantees 256),
//   - FP8: the amax bits of |x|, the saturating E4M3 / E5M2 conversion,
//   - warp and block reductions (sum, max, the (max, sum-of-exp) pair of an
//     online softmax),
//   - amaxes folded into a zeroed f32 by atomicMax on its bits (the
//     quantize kernels and the producers that take their amax: norms,
//     attention),
//   - dtype dispatch and launch checking for the launchers.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_CUDA_KERNELS_COMMON_CUH
#define TC_RUNTIME_CUDA_KERNELS_COMMON_CUH

#include <cstdint>
#include <string>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "runtime/src/base/dtype.h"
#include "runtime/src/base/status.h"
#include "runtime/src/cuda/device.h"

namespace tc::rt::cuda::kern {

using bf16 = __nv_bfloat16;
using f16 = __half;

constexpr unsigned kFullMask = 0xffffffffu;

//===----------------------------------------------------------------------===//
// Conversions
//===----------------------------------------------------------------------===//

__device__ __forceinline__ float toF(float x) { return x; }
__device__ __forceinline__ float toF(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float toF(f16 x) { return __half2float(x); }

template <class T> __device__ __forceinline__ T fromF(float x);
template <> __device__ __forceinline__ float fromF<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16 fromF<bf16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ f16 fromF<f16>(float x) { return __float2half_rn(x); }

//===----------------------------------------------------------------------===//
// FP8 (the quantize kernels)
//===----------------------------------------------------------------------===//

/// The bits of |v| as an unsigned integer; 0 for NaN (ignored, as fmaxf does).
/// For non-negative floats the integer order is the float order, so amaxes
/// taken on these bits are exact and independent of the order of combining.
__device__ __forceinline__ unsigned absBits(float v) {
  unsigned b = __float_as_uint(v) & 0x7fffffffu;
  return b > 0x7f800000u ? 0u : b;
}

/// v in E4M3 (E5M2) with cvt.rn.satfinite: nearest even, +-inf and values
/// beyond the format saturating to +-max, NaN kept.
template <bool E5M2> __device__ __forceinline__ uint8_t toFp8(float v) {
  return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, E5M2 ? __NV_E5M2 : __NV_E4M3);
}

//===----------------------------------------------------------------------===//
// 8-element vectors (p must be 16-byte aligned)
//===----------------------------------------------------------------------===//

constexpr int kVec = 8;

__device__ __forceinline__ void load8(const float *p, float (&v)[8]) {
  float4 a = *reinterpret_cast<const float4 *>(p);
  float4 b = *reinterpret_cast<const float4 *>(p + 4);
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
  v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ __forceinline__ void load8(const bf16 *p, float (&v)[8]) {
  int4 raw = *reinterpret_cast<const int4 *>(p);
  const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 f = __bfloat1622float2(h[i]);
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
  }
}
__device__ __forceinline__ void load8(const f16 *p, float (&v)[8]) {
  int4 raw = *reinterpret_cast<const int4 *>(p);
  const __half2 *h = reinterpret_cast<const __half2 *>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 f = __half22float2(h[i]);
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
  }
}
__device__ __forceinline__ void store8(float *p, const float (&v)[8]) {
  *reinterpret_cast<float4 *>(p) = make_float4(v[0], v[1], v[2], v[3]);
  *reinterpret_cast<float4 *>(p + 4) = make_float4(v[4], v[5], v[6], v[7]);
}
__device__ __forceinline__ void store8(bf16 *p, const float (&v)[8]) {
  int4 raw;
  __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i)
    h[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
  *reinterpret_cast<int4 *>(p) = raw;
}
__device__ __forceinline__ void store8(f16 *p, const float (&v)[8]) {
  int4 raw;
  __half2 *h = reinterpret_cast<__half2 *>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i)
    h[i] = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
  *reinterpret_cast<int4 *>(p) = raw;
}

/// Loads elements [i, i + 8) of a row of `cols` as floats: one vector access
/// when Vec (cols % 8 == 0, p 16-byte aligned), else element by element with
/// `fill` past the row's end.
template <class T, bool Vec>
__device__ __forceinline__ void loadRow8(const T *p, int64_t i, int64_t cols, float (&v)[8],
                                         float fill) {
  if constexpr (Vec) {
    load8(p + i, v);
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j)
      v[j] = i + j < cols ? toF(p[i + j]) : fill;
  }
}

/// Stores elements [i, i + 8) of a row (those before its end).
template <class T, bool Vec>
__device__ __forceinline__ void storeRow8(T *p, int64_t i, int64_t cols, const float (&v)[8]) {
  if constexpr (Vec) {
    store8(p + i, v);
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (i + j < cols)
        p[i + j] = fromF<T>(v[j]);
  }
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

__device__ __forceinline__ float warpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
__device__ __forceinline__ double warpSum(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
__device__ __forceinline__ int warpSum(int v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
__device__ __forceinline__ float warpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

/// Max over the block of unsigned values (blockDim.x a multiple of 32, at
/// most 1024); every thread gets it. Integer max is exact and order-free.
__device__ inline unsigned blockMaxU32(unsigned v) {
  __shared__ unsigned partial[32];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = __reduce_max_sync(kFullMask, v);
  __syncthreads(); // partial may still be read by a previous call
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  v = lane < warps ? partial[lane] : 0u;
  return __reduce_max_sync(kFullMask, v);
}

/// The running (max, sum of exp(x - max)) of an online softmax.
struct MaxSum {
  float m, s;
};
__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  float m = fmaxf(a.m, b.m);
  if (m == -INFINITY)
    return {m, 0.0f};
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

/// log2(e): exp(x - m) is exp2Ftz(x * kLog2e - m * kLog2e), one FFMA and one
/// MUFU.EX2 where expf takes about eight instructions.
constexpr float kLog2e = 1.4426950408889634f;

/// 2^x, one MUFU.EX2 (flush-to-zero: exp2f's denormal fix-up would only
/// rescue results below 2^-126).
__device__ __forceinline__ float exp2Ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

/// Adds one element to a running MaxSum. -inf elements (masked attention
/// scores) add nothing, also before the first finite one (where x - max would
/// be -inf - -inf = NaN).
__device__ __forceinline__ void addOnline(MaxSum &acc, float x) {
  if (x > acc.m) {
    acc.s = acc.s * expf(acc.m - x) + 1.0f; // expf(-inf) = 0 for the first
    acc.m = x;
  } else if (acc.m != -INFINITY) {
    acc.s += expf(x - acc.m);
  }
}
__device__ __forceinline__ MaxSum warpMaxSum(MaxSum v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    MaxSum other{__shfl_xor_sync(kFullMask, v.m, o), __shfl_xor_sync(kFullMask, v.s, o)};
    v = combine(v, other);
  }
  return v;
}

/// Sum over the block (blockDim.x a multiple of 32, at most 1024); every
/// thread gets the result. The order is fixed by the thread layout, so the
/// result is the same run to run.
template <class T> __device__ T blockSum(T v) {
  __shared__ T partial[32];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warpSum(v);
  __syncthreads(); // partial may still be read by a previous call
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  v = lane < warps ? partial[lane] : T(0);
  return warpSum(v);
}

__device__ inline MaxSum blockMaxSum(MaxSum v) {
  __shared__ float pm[32], ps[32];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warpMaxSum(v);
  __syncthreads();
  if (lane == 0) {
    pm[warp] = v.m;
    ps[warp] = v.s;
  }
  __syncthreads();
  v = lane < warps ? MaxSum{pm[lane], ps[lane]} : MaxSum{-INFINITY, 0.0f};
  return warpMaxSum(v);
}

/// The MaxSum of row x[0, cols) over a block of Threads threads, every
/// thread getting it: thread `tid` (its threadIdx.x) folds elements tid,
/// tid + Threads, ... (with Vec: 8-element vectors, cols a multiple of 8 and
/// x 16-byte aligned), then blockMaxSum combines them in the fixed order of
/// the threads. Softmax and cross-entropy share it, so their row statistics
/// are the same bits. (tid is a parameter, not read here, so that the
/// kernels compile to the same code as with the loop written inline.)
template <int Threads, bool Vec, class T>
__device__ __forceinline__ MaxSum rowMaxSum(const T *x, int64_t cols, unsigned tid) {
  MaxSum acc{-INFINITY, 0.0f};
  if constexpr (Vec) {
    for (int64_t i = tid * kVec; i < cols; i += Threads * kVec) {
      float v[8];
      load8(x + i, v);
#pragma unroll
      for (int j = 0; j < 8; ++j)
        addOnline(acc, v[j]);
    }
  } else {
    for (int64_t i = tid; i < cols; i += Threads)
      addOnline(acc, toF(x[i]));
  }
  return blockMaxSum(acc);
}

//===----------------------------------------------------------------------===//
// Amaxes (a zeroed f32, combined by atomicMax on the bits of |x|)
//===----------------------------------------------------------------------===//

/// The bits (absBits) of m, a max of |x| in f32, rounded to T as the
/// values were stored: rounding is monotonic, so the max of the rounded
/// values is the rounded max (and fmaxf has already dropped NaN).
template <class T> __device__ __forceinline__ unsigned storedAmaxBits(float m) {
  return absBits(toF(fromF<T>(m)));
}

/// Folds a thread's amax bits into *amax: the block's max (blockMaxU32),
/// one atomicMax by thread 0 (none for 0, which the zeroed amax holds).
/// Every thread of the block calls it.
__device__ __forceinline__ void blockAtomicMaxBits(unsigned *amax, unsigned bits) {
  bits = blockMaxU32(bits);
  if (threadIdx.x == 0 && bits != 0)
    atomicMax(amax, bits);
}

/// Folds a lane's max |x| (f32, of values stored as T) into amax (when
/// non-null): the warp's max, one atomicMax on the bits. Every lane of the
/// warp calls it.
template <class T> __device__ __forceinline__ void warpAmax(unsigned *amax, float m) {
  if (!amax)
    return;
  unsigned bits = __reduce_max_sync(kFullMask, storedAmaxBits<T>(m));
  if (threadIdx.x % 32 == 0 && bits != 0)
    atomicMax(amax, bits);
}

/// As warpAmax, one atomicMax per block; every thread of the block calls it.
template <class T> __device__ __forceinline__ void blockAmax(unsigned *amax, float m) {
  if (!amax)
    return;
  blockAtomicMaxBits(amax, storedAmaxBits<T>(m));
}

//===----------------------------------------------------------------------===//
// Host side of the launchers
//===----------------------------------------------------------------------===//

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline bool aligned16(const void *p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

/// The launch error of the last kernel, as a Status naming `kernel`.
inline Status checkLaunch(const char *kernel) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess)
    return Status::ok();
  return cudaStatus(err, std::string("launch of ") + kernel);
}

/// Zeroes a launcher's amax (f32 [1]; nothing when null) on `stream`, before
/// its kernels combine into it (the helpers above).
inline Status zeroAmax(float *amax, cudaStream_t stream) {
  if (amax)
    TC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(amax, 0, sizeof(float), stream));
  return Status::ok();
}

/// Calls f(float{}) or f(bf16{}) for the storage dtype `dt`.
template <class F> Status dispatchFloat(DType dt, const char *what, F &&f) {
  switch (dt) {
  case DType::F32:
    return f(float{});
  case DType::BF16:
    return f(bf16{});
  default:
    return invalidArgument(std::string(what) + ": dtype must be f32 or bf16, got " + dtypeName(dt));
  }
}

/// Calls f(float{}), f(bf16{}) or f(f16{}) for the storage dtype `dt`: the
/// kernels the fp16 plan reaches (attention, GELU); it keeps norms, softmax
/// and losses in f32.
template <class F> Status dispatchFloat16(DType dt, const char *what, F &&f) {
  switch (dt) {
  case DType::F32:
    return f(float{});
  case DType::BF16:
    return f(bf16{});
  case DType::F16:
    return f(f16{});
  default:
    return invalidArgument(std::string(what) + ": dtype must be f32, bf16 or f16, got " +
                           dtypeName(dt));
  }
}

/// Calls f(int32_t{}) or f(int64_t{}) for an index dtype.
template <class F> Status dispatchIndex(DType dt, const char *what, F &&f) {
  switch (dt) {
  case DType::I32:
    return f(int32_t{});
  case DType::I64:
    return f(int64_t{});
  default:
    return invalidArgument(std::string(what) + ": index dtype must be i32 or i64, got " +
                           dtypeName(dt));
  }
}

/// Common entry checks of a launcher: a usable GPU, non-negative sizes.
inline Status checkEntry(const char *what, int64_t a, int64_t b = 0) {
  TC_RETURN_IF_ERROR(requireGpu());
  if (a < 0 || b < 0)
    return invalidArgument(std::string(what) + ": negative size");
  return Status::ok();
}

} // namespace tc::rt::cuda::kern

#endif // TC_RUNTIME_CUDA_KERNELS_COMMON_CUH
