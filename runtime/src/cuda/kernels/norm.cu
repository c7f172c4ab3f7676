//===- norm.cu - layer_norm and rms_norm, forward and backward ------------===//
//
// Forward and dx: one warp per row (8 rows per 256-thread block); the row is
// read once per statistic (mean, then the centred variance, then the output:
// the re-reads hit L1/L2), all in fp32. Rows (x, y, dy, dx) and parameters
// (weight, bias and their gradients) each have a storage type: both f32, both
// bf16, or bf16 rows with f32 parameters (mixed precision: bf16 activations,
// f32 master weights, no f32 copy of the rows).
// dweight/dbias: a deterministic two-level sum over rows. Kernel 1 gives each
// (chunk of kNormBackwardChunkRows rows, column) pair to one thread, which
// sums its chunk in row order into scratch[chunk, col]; kernel 2 sums the
// chunks of a column in chunk order. No atomics, so the bits do not depend on
// scheduling; the chunking depends on the shape only, not on the GPU.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/cuda/kernels/common.cuh"
#include "runtime/src/cuda/kernels/kernels.h"

namespace tc::rt::cuda {
namespace {

using namespace kern;

constexpr int kRowsPerBlock = 8; // one warp per row
constexpr int kColThreads = 256; // threads per block of the column kernels

/// Forward of layer_norm (Rms false) or rms_norm (Rms true). Lane l handles
/// elements [8 l, 8 l + 8) of every 256-element stretch of the row. With
/// HasAmax, `amax` (non-null, zeroed before the launch) gets the block's max
/// |y| as stored (the f32 max rounded to T; NaN ignored; blockAmax).
template <class T, class W, bool Vec, bool Rms, bool HasAmax>
__global__ void __launch_bounds__(kRowsPerBlock * 32)
    normForwardKernel(const T *__restrict__ x, const W *__restrict__ weight,
                      const W *__restrict__ bias, T *__restrict__ y, float *__restrict__ meanOut,
                      float *__restrict__ rstdOut, unsigned *__restrict__ amax, int64_t rows,
                      int64_t cols, float eps) {
  int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  float m = 0.0f; // max |y| before rounding (fmaxf drops NaN)
  if (row < rows) { // no early return: the amax reduction needs the whole block
    const T *xr = x + row * cols;
    T *yr = y + row * cols;
    float mean = 0.0f;
    if constexpr (!Rms) {
      float s = 0.0f;
      for (int64_t i = lane * 8; i < cols; i += 32 * 8) {
        float v[8];
        loadRow8<T, Vec>(xr, i, cols, v, 0.0f);
#pragma unroll
        for (int j = 0; j < 8; ++j)
          s += v[j];
      }
      mean = warpSum(s) / static_cast<float>(cols);
    }
    float ss = 0.0f;
    for (int64_t i = lane * 8; i < cols; i += 32 * 8) {
      float v[8];
      loadRow8<T, Vec>(xr, i, cols, v, mean); // padding contributes 0
#pragma unroll
      for (int j = 0; j < 8; ++j)
        ss += (v[j] - mean) * (v[j] - mean);
    }
    float rstd = 1.0f / sqrtf(warpSum(ss) / static_cast<float>(cols) + eps);
    for (int64_t i = lane * 8; i < cols; i += 32 * 8) {
      float v[8], w[8], b[8];
      loadRow8<T, Vec>(xr, i, cols, v, 0.0f);
      if (weight)
        loadRow8<W, Vec>(weight, i, cols, w, 0.0f);
      if (bias)
        loadRow8<W, Vec>(bias, i, cols, b, 0.0f);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float o = (v[j] - mean) * rstd;
        if (weight)
          o *= w[j];
        if (bias)
          o += b[j];
        v[j] = o;
        if (HasAmax && (Vec || i + j < cols)) // only the non-Vec tail pads
          m = fmaxf(m, fabsf(o));
      }
      storeRow8<T, Vec>(yr, i, cols, v);
    }
    if (lane == 0) {
      if (meanOut)
        meanOut[row] = mean;
      if (rstdOut)
        rstdOut[row] = rstd;
    }
  }
  if constexpr (HasAmax)
    blockAmax<T>(amax, m);
}

/// dx of layer_norm (Rms false: mean given) or rms_norm (mean null):
///   xhat = (x - mean) rstd, g = dy * w,
///   dx = rstd (g - mean(g) - xhat mean(g xhat))   (rms: without mean(g)).
template <class T, class W, bool Vec, bool Rms>
__global__ void __launch_bounds__(kRowsPerBlock * 32)
    normBackwardDxKernel(const T *__restrict__ dy, const T *__restrict__ x,
                         const W *__restrict__ weight, const float *__restrict__ meanIn,
                         const float *__restrict__ rstdIn, T *dx, int64_t rows, int64_t cols,
                         bool accumulate) {
  int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= rows)
    return;
  const T *xr = x + row * cols, *dyr = dy + row * cols;
  T *dxr = dx + row * cols;
  float mean = Rms ? 0.0f : meanIn[row], rstd = rstdIn[row];
  float sumG = 0.0f, sumGX = 0.0f;
  for (int64_t i = lane * 8; i < cols; i += 32 * 8) {
    float v[8], g[8], w[8];
    loadRow8<T, Vec>(xr, i, cols, v, mean);
    loadRow8<T, Vec>(dyr, i, cols, g, 0.0f);
    if (weight)
      loadRow8<W, Vec>(weight, i, cols, w, 0.0f);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float gj = weight ? g[j] * w[j] : g[j];
      sumG += gj;
      sumGX += gj * (v[j] - mean) * rstd;
    }
  }
  float meanG = Rms ? 0.0f : warpSum(sumG) / static_cast<float>(cols);
  float meanGX = warpSum(sumGX) / static_cast<float>(cols);
  for (int64_t i = lane * 8; i < cols; i += 32 * 8) {
    float v[8], g[8], w[8], o[8];
    loadRow8<T, Vec>(xr, i, cols, v, mean);
    loadRow8<T, Vec>(dyr, i, cols, g, 0.0f);
    if (weight)
      loadRow8<W, Vec>(weight, i, cols, w, 0.0f);
    if (accumulate)
      loadRow8<T, Vec>(dxr, i, cols, o, 0.0f);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float gj = weight ? g[j] * w[j] : g[j];
      float xhat = (v[j] - mean) * rstd;
      float d = rstd * (gj - meanG - xhat * meanGX);
      o[j] = accumulate ? o[j] + d : d;
    }
    storeRow8<T, Vec>(dxr, i, cols, o);
  }
}

/// scratch[chunk, col] = sum over the chunk's rows of dy * xhat (and, for
/// layer_norm with dbias, scratch[chunks + chunk, col] = sum of dy).
template <class T, bool Rms>
__global__ void __launch_bounds__(kColThreads)
    normBackwardPartialKernel(const T *__restrict__ dy, const T *__restrict__ x,
                              const float *__restrict__ meanIn, const float *__restrict__ rstdIn,
                              float *__restrict__ scratch, int64_t rows, int64_t cols,
                              int64_t chunks, bool wantW, bool wantB) {
  int64_t col = static_cast<int64_t>(blockIdx.x) * kColThreads + threadIdx.x;
  int64_t chunk = blockIdx.y;
  if (col >= cols)
    return;
  int64_t r0 = chunk * kNormBackwardChunkRows;
  int64_t r1 = min(rows, r0 + kNormBackwardChunkRows);
  float sw = 0.0f, sb = 0.0f;
  for (int64_t r = r0; r < r1; ++r) {
    float g = toF(dy[r * cols + col]);
    float mean = Rms ? 0.0f : meanIn[r];
    sw += g * (toF(x[r * cols + col]) - mean) * rstdIn[r];
    sb += g;
  }
  if (wantW)
    scratch[chunk * cols + col] = sw;
  if (wantB)
    scratch[(chunks + chunk) * cols + col] = sb;
}

/// out[col] (+)= sum over chunks (in order) of part[chunk, col].
template <class T>
__global__ void __launch_bounds__(kColThreads)
    sumChunksKernel(const float *__restrict__ part, T *__restrict__ out, int64_t chunks,
                    int64_t cols, bool accumulate) {
  int64_t col = static_cast<int64_t>(blockIdx.x) * kColThreads + threadIdx.x;
  if (col >= cols)
    return;
  float s = 0.0f;
  for (int64_t c = 0; c < chunks; ++c)
    s += part[c * cols + col];
  if (accumulate)
    s += toF(out[col]);
  out[col] = fromF<T>(s);
}

/// Calls f(T{}, W{}) for the row / parameter storage pairs the kernels are
/// built for: (f32, f32), (bf16, bf16) and (bf16, f32).
template <class F> Status dispatchNorm(DType dt, DType pt, const char *what, F &&f) {
  if (dt == DType::F32 && pt == DType::F32)
    return f(float{}, float{});
  if (dt == DType::BF16 && pt == DType::BF16)
    return f(bf16{}, bf16{});
  if (dt == DType::BF16 && pt == DType::F32)
    return f(bf16{}, float{});
  return invalidArgument(std::string(what) + ": rows " + dtypeName(dt) + " with parameters " +
                         dtypeName(pt) +
                         " (supported: f32/f32, bf16/bf16, bf16 rows with f32 parameters)");
}

bool rowsVectorisable(int64_t cols, std::initializer_list<const void *> ptrs) {
  if (cols % kVec != 0)
    return false;
  for (const void *p : ptrs)
    if (p && !aligned16(p))
      return false;
  return true;
}

Status checkRows(const char *what, int64_t rows, int64_t cols) {
  TC_RETURN_IF_ERROR(checkEntry(what, rows, cols));
  if (ceilDiv(rows, kRowsPerBlock) > INT32_MAX)
    return invalidArgument(std::string(what) + ": too many rows");
  return Status::ok();
}

template <bool Rms>
Status normForward(const char *what, DType dt, DType pt, const void *x, const void *weight,
                   const void *bias, void *y, float *mean, float *rstd, int64_t rows, int64_t cols,
                   float eps, cudaStream_t stream, float *amax) {
  TC_RETURN_IF_ERROR(checkRows(what, rows, cols));
  TC_RETURN_IF_ERROR(zeroAmax(amax, stream)); // the blocks' atomicMax combines into it
  if (rows == 0 || cols == 0)
    return Status::ok();
  if (!x || !y)
    return invalidArgument(std::string(what) + ": null x or y");
  bool vec = rowsVectorisable(cols, {x, y, weight, bias});
  dim3 grid(static_cast<unsigned>(ceilDiv(rows, kRowsPerBlock)));
  return dispatchNorm(dt, pt, what, [&](auto tag, auto ptag) {
    using T = decltype(tag);
    using W = decltype(ptag);
    auto *xs = static_cast<const T *>(x);
    auto *ws = static_cast<const W *>(weight);
    auto *bs = static_cast<const W *>(bias);
    auto *ys = static_cast<T *>(y);
    auto *bits = reinterpret_cast<unsigned *>(amax);
    auto kernel = vec ? (bits ? normForwardKernel<T, W, true, Rms, true>
                              : normForwardKernel<T, W, true, Rms, false>)
                      : (bits ? normForwardKernel<T, W, false, Rms, true>
                              : normForwardKernel<T, W, false, Rms, false>);
    kernel<<<grid, kRowsPerBlock * 32, 0, stream>>>(xs, ws, bs, ys, mean, rstd, bits, rows, cols,
                                                    eps);
    return checkLaunch(Rms ? "rms_norm_forward" : "layer_norm_forward");
  });
}

template <bool Rms>
Status normBackward(const char *what, DType dt, DType pt, const void *dy, const void *x,
                    const void *weight,
                    const float *mean, const float *rstd, void *dx, void *dweight, void *dbias,
                    void *scratch, int64_t rows, int64_t cols, bool accumulate,
                    cudaStream_t stream) {
  TC_RETURN_IF_ERROR(checkRows(what, rows, cols));
  if (rows == 0 || cols == 0)
    return Status::ok();
  if (!dy || !x || !rstd || (!Rms && !mean))
    return invalidArgument(std::string(what) + ": null dy, x, mean or rstd");
  bool wantW = weight && dweight, wantB = dbias != nullptr;
  if ((wantW || wantB) && !scratch)
    return invalidArgument(std::string(what) + ": parameter gradients need scratch");
  int64_t chunks = ceilDiv(rows, kNormBackwardChunkRows);
  if (chunks > 65535)
    return invalidArgument(std::string(what) + ": more than 65535 chunks of rows");
  bool vec = rowsVectorisable(cols, {dy, x, weight, dx});
  return dispatchNorm(dt, pt, what, [&](auto tag, auto ptag) -> Status {
    using T = decltype(tag);
    using W = decltype(ptag);
    auto *dys = static_cast<const T *>(dy);
    auto *xs = static_cast<const T *>(x);
    auto *ws = static_cast<const W *>(weight);
    if (dx) {
      dim3 grid(static_cast<unsigned>(ceilDiv(rows, kRowsPerBlock)));
      auto *dxs = static_cast<T *>(dx);
      if (vec)
        normBackwardDxKernel<T, W, true, Rms><<<grid, kRowsPerBlock * 32, 0, stream>>>(
            dys, xs, ws, mean, rstd, dxs, rows, cols, accumulate);
      else
        normBackwardDxKernel<T, W, false, Rms><<<grid, kRowsPerBlock * 32, 0, stream>>>(
            dys, xs, ws, mean, rstd, dxs, rows, cols, accumulate);
      TC_RETURN_IF_ERROR(checkLaunch(Rms ? "rms_norm_backward_dx" : "layer_norm_backward_dx"));
    }
    if (!wantW && !wantB)
      return Status::ok();
    float *part = static_cast<float *>(scratch);
    unsigned colBlocks = static_cast<unsigned>(ceilDiv(cols, kColThreads));
    normBackwardPartialKernel<T, Rms>
        <<<dim3(colBlocks, static_cast<unsigned>(chunks)), kColThreads, 0, stream>>>(
            dys, xs, mean, rstd, part, rows, cols, chunks, wantW, wantB);
    TC_RETURN_IF_ERROR(checkLaunch("norm_backward_partial"));
    if (wantW) {
      sumChunksKernel<W><<<colBlocks, kColThreads, 0, stream>>>(part, static_cast<W *>(dweight),
                                                                chunks, cols, accumulate);
      TC_RETURN_IF_ERROR(checkLaunch("norm_backward_sum_chunks"));
    }
    if (wantB) {
      sumChunksKernel<W><<<colBlocks, kColThreads, 0, stream>>>(
          part + chunks * cols, static_cast<W *>(dbias), chunks, cols, accumulate);
      TC_RETURN_IF_ERROR(checkLaunch("norm_backward_sum_chunks"));
    }
    return Status::ok();
  });
}

} // namespace

Status layerNormForward(DType dt, DType pt, const void *x, const void *weight, const void *bias,
                        void *y, float *mean, float *rstd, int64_t rows, int64_t cols, float eps,
                        cudaStream_t stream, float *amax) {
  return normForward<false>("layerNormForward", dt, pt, x, weight, bias, y, mean, rstd, rows,
                            cols, eps, stream, amax);
}

Status rmsNormForward(DType dt, DType pt, const void *x, const void *weight, void *y, float *rstd,
                      int64_t rows, int64_t cols, float eps, cudaStream_t stream, float *amax) {
  return normForward<true>("rmsNormForward", dt, pt, x, weight, nullptr, y, nullptr, rstd, rows,
                           cols, eps, stream, amax);
}

Status layerNormBackward(DType dt, DType pt, const void *dy, const void *x, const void *weight,
                         const float *mean, const float *rstd, void *dx, void *dweight, void *dbias,
                         void *scratch, int64_t rows, int64_t cols, bool accumulate,
                         cudaStream_t stream) {
  return normBackward<false>("layerNormBackward", dt, pt, dy, x, weight, mean, rstd, dx, dweight,
                             dbias, scratch, rows, cols, accumulate, stream);
}

Status rmsNormBackward(DType dt, DType pt, const void *dy, const void *x, const void *weight,
                       const float *rstd, void *dx, void *dweight, void *scratch, int64_t rows,
                       int64_t cols, bool accumulate, cudaStream_t stream) {
  return normBackward<true>("rmsNormBackward", dt, pt, dy, x, weight, nullptr, rstd, dx, dweight,
                            nullptr, scratch, rows, cols, accumulate, stream);
}

} // namespace tc::rt::cuda
