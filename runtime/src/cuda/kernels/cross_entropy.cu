//===- cross_entropy.cu - softmax cross-entropy with its fused backward ---===//
//
// Three launches, all deterministic:
//   1. count: one block counts the rows that are not ignored -> scratch[0];
//   2. rows: one block per row computes the online (max, sum of exp), the
//      row's loss, and (when asked) writes (softmax - onehot) * scale / count
//      over the row, in place if dlogits == logits;
//   3. mean: one block sums the per-row losses in a fixed order.
// bf16 rows of up to 64K classes (cols % 8 == 0, 16-byte aligned) are read
// once: each thread holds its 16-byte vectors of the row in registers, still
// packed (rows of up to 32K classes; longer ones in shared memory, two blocks
// an SM), across the row's max and sum of exp (two block reductions), then
// writes the gradient from them (one read + one write of [rows, vocab]:
// GPT-2's 1.65 GB bf16 logits move 3.3 GB, not 4.9). Other rows (f32, longer,
// unaligned or odd) are read twice: the online (max, sum of exp), then the
// gradient. Either way the gradient is written once, after every read of the
// row by its block, so the classifier's [rows, vocab] buffer is never re-read
// after the backward and can be the logits buffer itself. The held and
// shared-memory rows take exp(v - max) as one FFMA and one MUFU.EX2
// (exp2Ftz), not expf's eight instructions: two exps an element, ~40% of
// the kernel's issue slots with expf.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/cuda/kernels/common.cuh"
#include "runtime/src/cuda/kernels/kernels.h"

#include <algorithm>

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

/// The max over the block (blockDim.x a multiple of 32, at most 1024); every
/// thread gets it. fmaxf is exact and order-free (NaN dropped, as rowMaxSum's
/// online max drops it; the sum of exp then carries it).
__device__ inline float blockMaxF(float v) {
  __shared__ float partial[32];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warpMax(v);
  __syncthreads(); // partial may still be read by a previous call
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  v = lane < warps ? partial[lane] : -INFINITY;
  return warpMax(v);
}

/// The packed registers p, hidden from the optimiser (an empty asm: no
/// instruction), so that each pass over the held row converts it to floats
/// again rather than keeping the floats of the previous pass alive (twice the
/// registers: it would spill). As norm.cu's launder.
__device__ __forceinline__ void launder(int4 &p) {
  asm volatile("" : "+r"(p.x), "+r"(p.y), "+r"(p.z), "+r"(p.w));
}

/// The most 16-byte vectors of a row a thread holds in the register path
/// (R): rows of up to 64K classes.
constexpr int kMaxHeldVectors = 16;
constexpr int64_t kHeldMaxCols = int64_t(kRowThreads) * kVec * kMaxHeldVectors;

/// Blocks per SM a held row of R vectors per thread is built for: 2 (64
/// registers, 32 warps: one block's loads overlap another's math) while the
/// row (4 R registers) leaves room for the rest, else 1 (128 registers).
constexpr int heldBlocksPerSm(int r) { return r <= 8 ? 2 : 1; }

/// crossEntropyRowKernel for a row of a 16-bit T held in registers: cols % 8
/// == 0, 16-byte aligned logits and dlogits, cols <= kRowThreads * kVec * R.
/// Thread t loads vectors at i = 8 t + 4096 r (r < R, i < cols; the same
/// vectors as the Vec loop of the two-pass kernel) once, packed (an int4 per
/// 8 values); the block takes the row's max, then the sum of exp(v - max),
/// both reductions in the fixed order of the threads (deterministic); then
/// each thread writes its vectors' gradient from its registers. Every load of
/// the block precedes the first barrier and every store follows the last, and
/// blocks own disjoint rows, so dlogits may be logits.
template <class T, class L, int R>
__global__ void __launch_bounds__(kRowThreads, heldBlocksPerSm(R))
    crossEntropyHeldRowKernel(const T *logits, const L *__restrict__ labels,
                              float *__restrict__ losses, T *dlogits,
                              const float *__restrict__ count, int64_t cols, int64_t ignoreIndex,
                              float gradScale) {
  static_assert(sizeof(T) == 2, "the held row packs 8 values per int4");
  constexpr int kStride = kRowThreads * kVec; // elements between a thread's vectors
  int64_t row = blockIdx.x;
  const T *xr = logits + row * cols;
  int64_t label = static_cast<int64_t>(labels[row]);
  bool ignored = label == ignoreIndex; // the same for every thread: no barrier skipped
  bool bad = !ignored && (label < 0 || label >= cols);
  int base = static_cast<int>(threadIdx.x) * kVec; // cols <= 64K: int indices
  if (ignored) {
    if (threadIdx.x == 0)
      losses[row] = 0.0f;
    if (dlogits) {
      T *dr = dlogits + row * cols;
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (base + r * kStride < cols)
          *reinterpret_cast<int4 *>(dr + base + r * kStride) = make_int4(0, 0, 0, 0); // 0.0
    }
    return;
  }
  // [R] x 8 values of the row, packed; vectors at or past cols are neither
  // loaded nor read below (every use tests i < cols as the load did).
  int4 held[R];
#pragma unroll
  for (int r = 0; r < R; ++r)
    if (base + r * kStride < cols)
      held[r] = *reinterpret_cast<const int4 *>(xr + base + r * kStride);
  // The label's logit, read before the first barrier: with dlogits == logits
  // its thread overwrites it after the last.
  float target = 0.0f;
  if (threadIdx.x == 0)
    target = bad ? NAN : toF(xr[label]);

  float m = -INFINITY; // a thread with no vector adds -inf to the max
#pragma unroll
  for (int r = 0; r < R; ++r)
    if (base + r * kStride < cols) {
      float v[8];
      load8(reinterpret_cast<const T *>(&held[r]), v);
#pragma unroll
      for (int j = 0; j < 8; ++j)
        m = fmaxf(m, v[j]);
    }
  m = blockMaxF(m);
#pragma unroll
  for (int r = 0; r < R; ++r)
    if (base + r * kStride < cols)
      launder(held[r]);
  const float mL = m * kLog2e; // exp(v - m) = 2^(v log2(e) - mL)
  float s = 0.0f;              // and 0 to the sum
#pragma unroll
  for (int r = 0; r < R; ++r)
    if (base + r * kStride < cols) {
      float v[8];
      load8(reinterpret_cast<const T *>(&held[r]), v);
#pragma unroll
      for (int j = 0; j < 8; ++j)
        s += exp2Ftz(fmaf(v[j], kLog2e, -mL));
    }
  s = blockSum(s);
  if (threadIdx.x == 0)
    losses[row] = m + logf(s) - target;
  if (!dlogits)
    return;
#pragma unroll
  for (int r = 0; r < R; ++r)
    if (base + r * kStride < cols)
      launder(held[r]);
  T *dr = dlogits + row * cols;
  float scale = bad ? NAN : gradScale / *count;
  float inv = 1.0f / s;
  // The label relative to this thread's first element (any value when bad:
  // the scale is NaN then, whatever the one-hot).
  int lab = bad ? -1 : static_cast<int>(label) - base;
#pragma unroll
  for (int r = 0; r < R; ++r)
    if (base + r * kStride < cols) {
      float v[8];
      load8(reinterpret_cast<const T *>(&held[r]), v);
#pragma unroll
      for (int j = 0; j < 8; ++j)
        v[j] = (exp2Ftz(fmaf(v[j], kLog2e, -mL)) * inv - (r * kStride + j == lab ? 1.0f : 0.0f)) *
               scale;
      store8(dr + base + r * kStride, v);
    }
}

/// crossEntropyHeldRowKernel with the row in shared memory instead of
/// registers, for rows a block would hold in more than 8 vectors a thread
/// (GPT-2's padded 50304 classes: 13, 89 registers, one block per SM, each
/// SM's rows loaded, reduced and written in turn: 2.4 TB/s). With the row's
/// 100 KB in shared memory and few registers two blocks share an SM, one's
/// loads overlapping the other's math. The row is copied with cp.async (16
/// bytes a copy, no registers) before the first barrier; a thread then reads
/// the vectors the held kernel's thread holds, in the same order, so the
/// reductions and the bits are the same; every store follows the last
/// barrier (dlogits may be logits).
template <class T, class L>
__global__ void __launch_bounds__(kRowThreads, 2)
    crossEntropySmemRowKernel(const T *logits, const L *__restrict__ labels,
                              float *__restrict__ losses, T *dlogits,
                              const float *__restrict__ count, int64_t cols, int64_t ignoreIndex,
                              float gradScale) {
  static_assert(sizeof(T) == 2, "8 values per int4");
  extern __shared__ int4 srow[]; // cols / 8 vectors
  int64_t row = blockIdx.x;
  const T *xr = logits + row * cols;
  const int nvec = static_cast<int>(cols / kVec);
  int64_t label = static_cast<int64_t>(labels[row]);
  bool ignored = label == ignoreIndex;
  bool bad = !ignored && (label < 0 || label >= cols);
  if (ignored) {
    if (threadIdx.x == 0)
      losses[row] = 0.0f;
    if (dlogits)
      for (int i = threadIdx.x; i < nvec; i += kRowThreads)
        reinterpret_cast<int4 *>(dlogits + row * cols)[i] = make_int4(0, 0, 0, 0);
    return;
  }
  for (int i = threadIdx.x; i < nvec; i += kRowThreads) {
    uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(srow + i));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(xr + i * kVec)
                 : "memory");
  }
  asm volatile("cp.async.commit_group;\n" ::: "memory");
  float target = 0.0f;
  if (threadIdx.x == 0)
    target = bad ? NAN : toF(xr[label]);
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  __syncthreads();
  float m = -INFINITY;
  for (int i = threadIdx.x; i < nvec; i += kRowThreads) {
    float v[8];
    load8(reinterpret_cast<const T *>(srow + i), v);
#pragma unroll
    for (int j = 0; j < 8; ++j)
      m = fmaxf(m, v[j]);
  }
  m = blockMaxF(m);
  const float mL = m * kLog2e;
  float s = 0.0f;
  for (int i = threadIdx.x; i < nvec; i += kRowThreads) {
    float v[8];
    load8(reinterpret_cast<const T *>(srow + i), v);
#pragma unroll
    for (int j = 0; j < 8; ++j)
      s += exp2Ftz(fmaf(v[j], kLog2e, -mL));
  }
  s = blockSum(s);
  if (threadIdx.x == 0)
    losses[row] = m + logf(s) - target;
  if (!dlogits)
    return;
  T *dr = dlogits + row * cols;
  float scale = bad ? NAN : gradScale / *count;
  float inv = 1.0f / s;
  int lab = bad ? -1 : static_cast<int>(label);
  for (int i = threadIdx.x; i < nvec; i += kRowThreads) {
    float v[8];
    load8(reinterpret_cast<const T *>(srow + i), v);
#pragma unroll
    for (int j = 0; j < 8; ++j)
      v[j] = (exp2Ftz(fmaf(v[j], kLog2e, -mL)) * inv - (i * kVec + j == lab ? 1.0f : 0.0f)) * scale;
    store8(dr + i * kVec, v);
  }
}

/// Rows the register path holds in at most this many vectors a thread run
/// there (two blocks per SM); longer ones in shared memory.
constexpr int kHeldRegisterVectors = 8;

/// The dynamic shared memory a block of this device may opt into (227 KB on
/// an H100/H200, 99 KB on an RTX 5090): rows longer than that stay in
/// registers.
inline int64_t sharedMemoryOptIn() {
  int dev = 0, bytes = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
    return 48 * 1024;
  return bytes;
}

/// Launches crossEntropySmemRowKernel with `bytes` of dynamic shared memory.
/// The opt-in, the most any row takes on this device (the same whatever the
/// row, so that a graph captured after one launch stays valid after
/// another), is set on every eager launch (a function attribute of the
/// current device, no stream work); a captured launch relies on the eager
/// one before it (the executor runs a step eagerly before capturing).
template <class T, class L>
Status launchSmemRows(dim3 grid, cudaStream_t stream, int64_t bytes, const T *logits,
                      const L *labels, float *losses, T *dlogits, const float *count, int64_t cols,
                      int64_t ignoreIndex, float gradScale) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  TC_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &capture));
  if (capture == cudaStreamCaptureStatusNone) {
    int64_t most = std::min<int64_t>(sharedMemoryOptIn(), kHeldMaxCols * sizeof(T));
    TC_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(crossEntropySmemRowKernel<T, L>,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(most)));
    TC_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(crossEntropySmemRowKernel<T, L>,
                                                 cudaFuncAttributePreferredSharedMemoryCarveout,
                                                 cudaSharedmemCarveoutMaxShared));
  }
  crossEntropySmemRowKernel<T, L><<<grid, kRowThreads, bytes, stream>>>(
      logits, labels, losses, dlogits, count, cols, ignoreIndex, gradScale);
  return Status::ok();
}

/// Launches crossEntropyHeldRowKernel with the first R of (R, Rest...) that
/// is >= perThread, the vectors a thread holds of a row (the last R covers
/// kHeldMaxCols). Steps: R = 8 holds LLaMA's 32000 classes with 2 blocks per
/// SM; longer rows go to crossEntropySmemRowKernel where the device's shared
/// memory holds them, else to R = 13 (GPT-2's padded 50304) or 16, one block
/// per SM; the unused vectors of a larger R cost a predicated-off test each,
/// its registers the occupancy (heldBlocksPerSm).
template <class T, class L, int R, int... Rest>
void launchHeldRows(dim3 grid, cudaStream_t stream, int64_t perThread, const T *logits,
                    const L *labels, float *losses, T *dlogits, const float *count, int64_t cols,
                    int64_t ignoreIndex, float gradScale) {
  if constexpr (sizeof...(Rest) > 0) {
    if (perThread > R)
      return launchHeldRows<T, L, Rest...>(grid, stream, perThread, logits, labels, losses, dlogits,
                                           count, cols, ignoreIndex, gradScale);
  }
  crossEntropyHeldRowKernel<T, L, R><<<grid, kRowThreads, 0, stream>>>(
      logits, labels, losses, dlogits, count, cols, ignoreIndex, gradScale);
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
      bool held = false;
      if constexpr (sizeof(T) == 2) {
        held = vec && cols <= kHeldMaxCols;
        int64_t perThread = ceilDiv(cols / kVec, kRowThreads);
        int64_t bytes = cols * static_cast<int64_t>(sizeof(T));
        if (held && perThread > kHeldRegisterVectors && bytes <= sharedMemoryOptIn()) {
          Status st = launchSmemRows<T, L>(grid, stream, bytes, xs, ls, rowLoss, ds, count, cols,
                                           ignoreIndex, gradScale);
          TC_RETURN_IF_ERROR(st);
        } else if (held) {
          launchHeldRows<T, L, 2, 4, kHeldRegisterVectors, 10, 13, kMaxHeldVectors>(
              grid, stream, perThread, xs, ls, rowLoss, ds, count, cols, ignoreIndex, gradScale);
        }
      }
      if (!held && vec)
        crossEntropyRowKernel<T, L, true><<<grid, kRowThreads, 0, stream>>>(
            xs, ls, rowLoss, ds, count, cols, ignoreIndex, gradScale);
      else if (!held)
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
