//===- elementwise.cu - GELU forward/backward and casts over flat buffers -===//
//
// Grid-stride loops over groups of 8 elements: one 16-byte access per group
// for bf16 (two for f32) when the pointers are 16-byte aligned, element by
// element for the tail. GELU's forms (without cancellation): gelu.cuh.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/cuda/kernels/common.cuh"
#include "runtime/src/cuda/kernels/gelu.cuh"
#include "runtime/src/cuda/kernels/kernels.h"

namespace tc::rt::cuda {
namespace {

using namespace kern;

constexpr int kThreads = 256;

template <GeluApprox A> __device__ __forceinline__ float gelu(float x) {
  return ::tc::rt::cuda::gelu::value<A == GeluApprox::None>(x);
}
template <GeluApprox A> __device__ __forceinline__ float geluGrad(float x) {
  return ::tc::rt::cuda::gelu::grad<A == GeluApprox::None>(x);
}

/// Loads group [i, i + 8) of a flat buffer of n elements (vector access when
/// Vec and the group is whole).
template <class T, bool Vec>
__device__ __forceinline__ void loadGroup(const T *p, int64_t i, int64_t n, float (&v)[8]) {
  if (Vec && i + kVec <= n)
    loadRow8<T, true>(p, i, n, v, 0.0f);
  else
    loadRow8<T, false>(p, i, n, v, 0.0f);
}
template <class T, bool Vec>
__device__ __forceinline__ void storeGroup(T *p, int64_t i, int64_t n, const float (&v)[8]) {
  if (Vec && i + kVec <= n)
    storeRow8<T, true>(p, i, n, v);
  else
    storeRow8<T, false>(p, i, n, v);
}

#define TC_GROUP_LOOP(i, n)                                                                        \
  for (int64_t i = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) * kVec; i < (n);    \
       i += static_cast<int64_t>(gridDim.x) * kThreads * kVec)

template <class T, bool Vec, GeluApprox A>
__global__ void __launch_bounds__(kThreads) geluForwardKernel(const T *x, T *y, int64_t n) {
  TC_GROUP_LOOP(i, n) {
    float v[8];
    loadGroup<T, Vec>(x, i, n, v);
#pragma unroll
    for (int j = 0; j < 8; ++j)
      v[j] = gelu<A>(v[j]);
    storeGroup<T, Vec>(y, i, n, v);
  }
}

template <class T, bool Vec, GeluApprox A>
__global__ void __launch_bounds__(kThreads)
    geluBackwardKernel(const T *__restrict__ x, const T *dy, T *dx, int64_t n) {
  TC_GROUP_LOOP(i, n) {
    float v[8], g[8];
    loadGroup<T, Vec>(x, i, n, v);
    loadGroup<T, Vec>(dy, i, n, g);
#pragma unroll
    for (int j = 0; j < 8; ++j)
      g[j] *= geluGrad<A>(v[j]);
    storeGroup<T, Vec>(dx, i, n, g);
  }
}

template <class In, class Out, bool Vec>
__global__ void __launch_bounds__(kThreads)
    castKernel(const In *__restrict__ x, Out *__restrict__ y, int64_t n) {
  TC_GROUP_LOOP(i, n) {
    float v[8];
    loadGroup<In, Vec>(x, i, n, v);
    storeGroup<Out, Vec>(y, i, n, v);
  }
}

unsigned gridFor(int64_t n) {
  int64_t blocks = ceilDiv(n, kThreads * kVec);
  return static_cast<unsigned>(blocks < (int64_t(1) << 20) ? blocks : (int64_t(1) << 20));
}

} // namespace

Status geluForward(DType dt, GeluApprox approx, const void *x, void *y, int64_t n,
                   cudaStream_t stream) {
  TC_RETURN_IF_ERROR(checkEntry("geluForward", n));
  if (n == 0)
    return Status::ok();
  if (!x || !y)
    return invalidArgument("geluForward: null pointer");
  bool vec = aligned16(x) && aligned16(y);
  return dispatchFloat16(dt, "geluForward", [&](auto tag) {
    using T = decltype(tag);
    auto *xs = static_cast<const T *>(x);
    auto *ys = static_cast<T *>(y);
    unsigned grid = gridFor(n);
    if (approx == GeluApprox::Tanh) {
      if (vec)
        geluForwardKernel<T, true, GeluApprox::Tanh><<<grid, kThreads, 0, stream>>>(xs, ys, n);
      else
        geluForwardKernel<T, false, GeluApprox::Tanh><<<grid, kThreads, 0, stream>>>(xs, ys, n);
    } else {
      if (vec)
        geluForwardKernel<T, true, GeluApprox::None><<<grid, kThreads, 0, stream>>>(xs, ys, n);
      else
        geluForwardKernel<T, false, GeluApprox::None><<<grid, kThreads, 0, stream>>>(xs, ys, n);
    }
    return checkLaunch("gelu_forward");
  });
}

Status geluBackward(DType dt, GeluApprox approx, const void *x, const void *dy, void *dx, int64_t n,
                    cudaStream_t stream) {
  TC_RETURN_IF_ERROR(checkEntry("geluBackward", n));
  if (n == 0)
    return Status::ok();
  if (!x || !dy || !dx)
    return invalidArgument("geluBackward: null pointer");
  bool vec = aligned16(x) && aligned16(dy) && aligned16(dx);
  return dispatchFloat16(dt, "geluBackward", [&](auto tag) {
    using T = decltype(tag);
    auto *xs = static_cast<const T *>(x);
    auto *dys = static_cast<const T *>(dy);
    auto *dxs = static_cast<T *>(dx);
    unsigned grid = gridFor(n);
    if (approx == GeluApprox::Tanh) {
      if (vec)
        geluBackwardKernel<T, true, GeluApprox::Tanh>
            <<<grid, kThreads, 0, stream>>>(xs, dys, dxs, n);
      else
        geluBackwardKernel<T, false, GeluApprox::Tanh>
            <<<grid, kThreads, 0, stream>>>(xs, dys, dxs, n);
    } else {
      if (vec)
        geluBackwardKernel<T, true, GeluApprox::None>
            <<<grid, kThreads, 0, stream>>>(xs, dys, dxs, n);
      else
        geluBackwardKernel<T, false, GeluApprox::None>
            <<<grid, kThreads, 0, stream>>>(xs, dys, dxs, n);
    }
    return checkLaunch("gelu_backward");
  });
}

Status castBuffer(DType from, const void *x, DType to, void *y, int64_t n, cudaStream_t stream) {
  TC_RETURN_IF_ERROR(checkEntry("castBuffer", n));
  if (n == 0)
    return Status::ok();
  if (!x || !y)
    return invalidArgument("castBuffer: null pointer");
  bool vec = aligned16(x) && aligned16(y);
  unsigned grid = gridFor(n);
  return dispatchFloat16(from, "castBuffer", [&](auto inTag) {
    using In = decltype(inTag);
    return dispatchFloat16(to, "castBuffer", [&](auto outTag) -> Status {
      using Out = decltype(outTag);
      if (from == to) {
        TC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(y, x, static_cast<size_t>(n) * sizeof(In),
                                                cudaMemcpyDeviceToDevice, stream));
        return Status::ok();
      }
      auto *xs = static_cast<const In *>(x);
      auto *ys = static_cast<Out *>(y);
      if (vec)
        castKernel<In, Out, true><<<grid, kThreads, 0, stream>>>(xs, ys, n);
      else
        castKernel<In, Out, false><<<grid, kThreads, 0, stream>>>(xs, ys, n);
      return checkLaunch("cast");
    });
  });
}

namespace {
template <typename T> __global__ void fillKernel(T *y, T v, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    y[i] = v;
}
} // namespace

Status fillBuffer(void *y, int elementBytes, uint64_t pattern, int64_t n, cudaStream_t stream) {
  TC_RETURN_IF_ERROR(checkEntry("fillBuffer", n));
  if (n == 0)
    return Status::ok();
  if (!y)
    return invalidArgument("fillBuffer: null pointer");
  unsigned grid = gridFor(n);
  switch (elementBytes) {
  case 1:
    fillKernel<<<grid, kThreads, 0, stream>>>(static_cast<uint8_t *>(y), (uint8_t)pattern, n);
    break;
  case 2:
    fillKernel<<<grid, kThreads, 0, stream>>>(static_cast<uint16_t *>(y), (uint16_t)pattern, n);
    break;
  case 4:
    fillKernel<<<grid, kThreads, 0, stream>>>(static_cast<uint32_t *>(y), (uint32_t)pattern, n);
    break;
  case 8:
    fillKernel<<<grid, kThreads, 0, stream>>>(static_cast<uint64_t *>(y), pattern, n);
    break;
  default:
    return invalidArgument("fillBuffer: element size " + std::to_string(elementBytes) +
                           " (1, 2, 4 or 8 bytes)");
  }
  return checkLaunch("fill");
}

} // namespace tc::rt::cuda
