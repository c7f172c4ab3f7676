//===- cross_entropy.cu - softmax cross-entropy with its fused backward ---===//
//
// Three launches, all deterministic:
//   1. count: one block counts the rows that are not ignored -> scratch[0];
//   2. rows: one block per row computes the online (max, sum of exp), the
//      row's loss, and (when asked) writes (softmax - onehot) * scale / count
//      over the row, in place if dlogits == logits;
//   3. mean: one block sums the per-row losses in a fixed order.
// The logits are read twice (statistics, then gradient); the gradient is
// written once, so the classifier's [rows, vocab] buffer is never re-read
// after the backward and can be the logits buffer itself.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/cuda/kernels/common.cuh"
#include "runtime/src/cuda/kernels/kernels.h"

namespace tc::rt::cuda {
namespace {

using namespace kern;

constexpr int kRowThreads = 512;
constexpr int kReduceThreads = 1024;

template <class L>
__global__ void __launch_bounds__(kReduceThreads)
    countValidKernel(const L *__restrict__ labels, int64_t rows, int64_t ignoreIndex,
                     float *__restrict__ count) {
  int c = 0;
  for (int64_t r = threadIdx.x; r < rows; r += kReduceThreads)
    c += static_cast<int64_t>(labels[r]) != ignoreIndex;
  c = blockSum(c);
  if (threadIdx.x == 0)
    *count = static_cast<float>(c);
}

template <class T, class L, bool Vec>
__global__ void __launch_bounds__(kRowThreads)
    crossEntropyRowKernel(const T *logits, const L *__restrict__ labels, float *__restrict__ losses,
                          T *dlogits, const float *__restrict__ count, int64_t cols,
                          int64_t ignoreIndex, float gradScale) {
  int64_t row = blockIdx.x;
  const T *xr = logits + row * cols;
  int64_t label = static_cast<int64_t>(labels[row]);
  bool ignored = label == ignoreIndex;
  bool bad = !ignored && (label < 0 || label >= cols);
  if (ignored) {
    if (threadIdx.x == 0)
      losses[row] = 0.0f;
    if (dlogits) {
      T *dr = dlogits + row * cols;
      for (int64_t i = threadIdx.x; i < cols; i += kRowThreads)
        dr[i] = fromF<T>(0.0f);
    }
    return;
  }
  MaxSum acc = rowMaxSum<kRowThreads, Vec>(xr, cols, threadIdx.x);
  // Read the label's logit before the barrier: with dlogits == logits another
  // thread overwrites it in the pass below.
  float target = bad ? NAN : toF(xr[label]);
  __syncthreads();
  float logSum = logf(acc.s);
  if (threadIdx.x == 0)
    losses[row] = acc.m + logSum - target;
  if (!dlogits)
    return;
  T *dr = dlogits + row * cols;
  float scale = bad ? NAN : gradScale / *count;
  float inv = 1.0f / acc.s;
  if constexpr (Vec) {
    for (int64_t i = threadIdx.x * kVec; i < cols; i += kRowThreads * kVec) {
      float v[8];
      load8(xr + i, v);
#pragma unroll
      for (int j = 0; j < 8; ++j)
        v[j] = (expf(v[j] - acc.m) * inv - (i + j == label ? 1.0f : 0.0f)) * scale;
      store8(dr + i, v);
    }
  } else {
    for (int64_t i = threadIdx.x; i < cols; i += kRowThreads) {
      float p = expf(toF(xr[i]) - acc.m) * inv;
      dr[i] = fromF<T>((p - (i == label ? 1.0f : 0.0f)) * scale);
    }
  }
}

__global__ void __launch_bounds__(kReduceThreads)
    meanLossKernel(const float *__restrict__ losses, const float *__restrict__ count, int64_t rows,
                   float *__restrict__ mean) {
  double s = 0.0;
  for (int64_t r = threadIdx.x; r < rows; r += kReduceThreads)
    s += losses[r];
  s = blockSum(s);
  if (threadIdx.x == 0)
    *mean = static_cast<float>(s / static_cast<double>(*count));
}

} // namespace

Status crossEntropyForwardBackward(DType dt, const void *logits, DType labelType,
                                   const void *labels, float *losses, float *lossMean,
                                   void *dlogits, void *scratch, int64_t rows, int64_t cols,
                                   int64_t ignoreIndex, float gradScale, cudaStream_t stream) {
  TC_RETURN_IF_ERROR(checkEntry("crossEntropyForwardBackward", rows, cols));
  if (rows == 0) {
    if (lossMean) // the mean over no rows is NaN (all bits set), as torch
      TC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(lossMean, 0xff, sizeof(float), stream));
    return Status::ok();
  }
  if (cols == 0)
    return invalidArgument("crossEntropyForwardBackward: no classes");
  if (!logits || !labels || !scratch)
    return invalidArgument("crossEntropyForwardBackward: null logits, labels or scratch");
  if (rows >= (int64_t(1) << 24))
    return invalidArgument("crossEntropyForwardBackward: 2^24 rows or more");
  float *count = static_cast<float *>(scratch);
  float *rowLoss = losses ? losses : count + 64;
  bool vec = cols % kVec == 0 && aligned16(logits) && (!dlogits || aligned16(dlogits));
  return dispatchFloat(dt, "crossEntropyForwardBackward", [&](auto tag) {
    using T = decltype(tag);
    return dispatchIndex(labelType, "crossEntropyForwardBackward", [&](auto ltag) -> Status {
      using L = decltype(ltag);
      auto *ls = static_cast<const L *>(labels);
      countValidKernel<L><<<1, kReduceThreads, 0, stream>>>(ls, rows, ignoreIndex, count);
      TC_RETURN_IF_ERROR(checkLaunch("cross_entropy_count"));
      auto *xs = static_cast<const T *>(logits);
      auto *ds = static_cast<T *>(dlogits);
      dim3 grid(static_cast<unsigned>(rows));
      if (vec)
        crossEntropyRowKernel<T, L, true><<<grid, kRowThreads, 0, stream>>>(
            xs, ls, rowLoss, ds, count, cols, ignoreIndex, gradScale);
      else
        crossEntropyRowKernel<T, L, false><<<grid, kRowThreads, 0, stream>>>(
            xs, ls, rowLoss, ds, count, cols, ignoreIndex, gradScale);
      TC_RETURN_IF_ERROR(checkLaunch("cross_entropy_rows"));
      if (lossMean) {
        meanLossKernel<<<1, kReduceThreads, 0, stream>>>(rowLoss, count, rows, lossMean);
        TC_RETURN_IF_ERROR(checkLaunch("cross_entropy_mean"));
      }
      return Status::ok();
    });
  });
}

} // namespace tc::rt::cuda
