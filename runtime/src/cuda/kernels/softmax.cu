//===- softmax.cu - softmax / log_softmax over the last axis --------------===//
//
// One block per row. Pass 1 keeps a per-thread online (max, sum of exp)
// over the row and combines them across the block; pass 2 writes
// exp(x - max) / sum or x - max - log(sum). Rows whose length is a multiple
// of 8 (with 16-byte aligned pointers) use 8-element vector accesses.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/cuda/kernels/common.cuh"
#include "runtime/src/cuda/kernels/kernels.h"

namespace tc::rt::cuda {
namespace {

using namespace kern;

constexpr int kThreads = 256;

template <class T, bool Vec, bool Log>
__global__ void __launch_bounds__(kThreads) softmaxKernel(const T *x, T *y, int64_t cols) {
  const T *xr = x + static_cast<int64_t>(blockIdx.x) * cols;
  T *yr = y + static_cast<int64_t>(blockIdx.x) * cols;
  MaxSum acc = rowMaxSum<kThreads, Vec>(xr, cols, threadIdx.x);
  const float m = acc.m, inv = 1.0f / acc.s, logSum = logf(acc.s);
  auto f = [&](float v) { return Log ? v - m - logSum : expf(v - m) * inv; };
  if constexpr (Vec) {
    for (int64_t i = threadIdx.x * kVec; i < cols; i += kThreads * kVec) {
      float v[8];
      load8(xr + i, v);
#pragma unroll
      for (int j = 0; j < 8; ++j)
        v[j] = f(v[j]);
      store8(yr + i, v);
    }
  } else {
    for (int64_t i = threadIdx.x; i < cols; i += kThreads)
      yr[i] = fromF<T>(f(toF(xr[i])));
  }
}

} // namespace

Status softmaxForward(DType dt, const void *x, void *y, int64_t rows, int64_t cols, bool log,
                      cudaStream_t stream) {
  TC_RETURN_IF_ERROR(checkEntry("softmaxForward", rows, cols));
  if (rows == 0 || cols == 0)
    return Status::ok();
  if (!x || !y)
    return invalidArgument("softmaxForward: null pointer");
  if (rows > INT32_MAX)
    return invalidArgument("softmaxForward: more than 2^31 rows");
  bool vec = cols % kVec == 0 && aligned16(x) && aligned16(y);
  return dispatchFloat(dt, "softmaxForward", [&](auto tag) {
    using T = decltype(tag);
    auto *xs = static_cast<const T *>(x);
    auto *ys = static_cast<T *>(y);
    dim3 grid(static_cast<unsigned>(rows));
    if (vec && log)
      softmaxKernel<T, true, true><<<grid, kThreads, 0, stream>>>(xs, ys, cols);
    else if (vec)
      softmaxKernel<T, true, false><<<grid, kThreads, 0, stream>>>(xs, ys, cols);
    else if (log)
      softmaxKernel<T, false, true><<<grid, kThreads, 0, stream>>>(xs, ys, cols);
    else
      softmaxKernel<T, false, false><<<grid, kThreads, 0, stream>>>(xs, ys, cols);
    return checkLaunch("softmax_forward");
  });
}

} // namespace tc::rt::cuda
