//===- column_sum.cu - column sums of a row-major matrix ------------------===//
//
// colSum[c] = sum over r of x[r, c]: a Linear layer's bias gradient, the
// column sums of its incoming gradient dY [tokens, out]. Two passes, so that
// the bits depend on the sizes only: (1) a grid of (256-column, row-part)
// blocks, 8 row lanes of 32 threads each reading 16 bytes (8 columns) a row,
// sums its part's rows in f32 into partial[part][cols]; (2) the parts added
// in order (sumColumnPartials, which quantize_fp8's column sums use too).
// The matmul's separate bias gradient (cublaslt.cpp) runs it after the plain
// product, the partial sums in the cuBLASLt workspace the product is done
// with: cuBLASLt's BGRAD epilogue keeps it from its split-K kernels, which
// the weight-gradient GEMMs (K = the tokens) need on the H200.
//
//===----------------------------------------------------------------------===//
#include <algorithm>

#include "runtime/src/cuda/kernels/common.cuh"
#include "runtime/src/cuda/kernels/kernels.h"

namespace tc::rt::cuda {
namespace {

using namespace kern;

constexpr int kColThreads = 32; // threads along the columns, 8 columns each
constexpr int kRowLanes = 8;    // threads along the rows
constexpr int kBlockCols = kColThreads * 8;
constexpr int kTargetBlocks = 512; // enough blocks for the GPU; sizes alone pick the parts

/// Block (blockIdx.x: 256 columns, blockIdx.y: rows [part * rowsPerPart,
/// +rowsPerPart)): partial[part][c] = the f32 sum of its rows of column c,
/// row lane l adding rows l, l + 8, ... of the part, then the lanes added in
/// order. Vec: cols % 8 == 0 and x 16-byte aligned (one 16-byte load of
/// bf16 a row).
template <class T, bool Vec>
__global__ void __launch_bounds__(kColThreads *kRowLanes)
    columnPartialKernel(const T *__restrict__ x, int64_t rows, int64_t cols, int64_t rowsPerPart,
                        float *__restrict__ partial) {
  __shared__ float sums[kRowLanes][kBlockCols + 1];
  const int tx = threadIdx.x % kColThreads, lane = threadIdx.x / kColThreads;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kBlockCols + tx * 8;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rowsPerPart;
  const int64_t r1 = std::min(rows, r0 + rowsPerPart);
  float acc[8] = {};
  if (c0 < cols) {
#pragma unroll 4
    for (int64_t r = r0 + lane; r < r1; r += kRowLanes) {
      const T *p = x + r * cols + c0;
      float v[8];
      if constexpr (Vec) {
        load8(p, v);
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j)
          v[j] = c0 + j < cols ? toF(p[j]) : 0.f;
      }
#pragma unroll
      for (int j = 0; j < 8; ++j)
        acc[j] += v[j];
    }
  }
#pragma unroll
  for (int j = 0; j < 8; ++j)
    sums[lane][tx * 8 + j] = acc[j];
  __syncthreads();
  const int col = threadIdx.x; // 256 threads, one column of the block each
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kBlockCols + col;
  if (c >= cols)
    return;
  float t = sums[0][col];
#pragma unroll
  for (int l = 1; l < kRowLanes; ++l)
    t += sums[l][col];
  partial[static_cast<int64_t>(blockIdx.y) * cols + c] = t;
}

constexpr int kSumCols = 32;  // columns per block of sumPartialsKernel
constexpr int kSumGroups = 8; // part groups per column

/// colSum[col] = the sum of partial[p][col] over the parts p: part group g
/// (of kSumGroups) adds parts g, g + 8, ... in order, then the groups are
/// added in order, so the result does not depend on timing. 32 columns x 8
/// groups per block: enough loads in flight for a few hundred parts.
template <class T>
__global__ void __launch_bounds__(kSumCols *kSumGroups)
    sumPartialsKernel(const float *partial, int64_t parts, int64_t cols, T *colSum) {
  __shared__ float sums[kSumGroups][kSumCols];
  const int tx = threadIdx.x % kSumCols, g = threadIdx.x / kSumCols;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kSumCols + tx;
  float acc = 0.f;
  if (col < cols)
#pragma unroll 4
    for (int64_t p = g; p < parts; p += kSumGroups)
      acc += partial[p * cols + col];
  sums[g][tx] = acc;
  __syncthreads();
  if (g != 0 || col >= cols)
    return;
  float t = sums[0][tx];
#pragma unroll
  for (int i = 1; i < kSumGroups; ++i)
    t += sums[i][tx];
  colSum[col] = fromF<T>(t);
}

/// The row parts of columnSums: about kTargetBlocks blocks in all, each part
/// a multiple of the row lanes, no more parts than `maxParts`.
int64_t rowsPerPartFor(int64_t rows, int64_t cols, int64_t maxParts) {
  int64_t colBlocks = ceilDiv(cols, kBlockCols);
  int64_t parts =
      std::clamp<int64_t>(ceilDiv(kTargetBlocks, colBlocks), 1,
                          std::max<int64_t>(1, std::min(maxParts, ceilDiv(rows, kRowLanes))));
  return ceilDiv(ceilDiv(rows, parts), kRowLanes) * kRowLanes;
}

} // namespace

Status sumColumnPartials(DType dt, const float *partial, int64_t parts, int64_t cols, void *colSum,
                         cudaStream_t stream) {
  TC_RETURN_IF_ERROR(checkEntry("sumColumnPartials", parts, cols));
  if (parts == 0 || cols == 0)
    return Status::ok();
  if (!partial || !colSum)
    return invalidArgument("sumColumnPartials: null pointer");
  return dispatchFloat16(dt, "sumColumnPartials", [&](auto t) -> Status {
    using T = decltype(t);
    sumPartialsKernel<T>
        <<<static_cast<unsigned>(ceilDiv(cols, kSumCols)), kSumCols * kSumGroups, 0, stream>>>(
            partial, parts, cols, static_cast<T *>(colSum));
    return checkLaunch("sumPartialsKernel");
  });
}

size_t columnSumScratchBytes(int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0)
    return 0;
  int64_t parts = ceilDiv(rows, rowsPerPartFor(rows, cols, INT64_MAX));
  return static_cast<size_t>(parts * cols) * sizeof(float);
}

Status columnSums(DType dt, const void *x, int64_t rows, int64_t cols, void *colSum, float *partial,
                  size_t partialBytes, cudaStream_t stream) {
  TC_RETURN_IF_ERROR(checkEntry("columnSums", rows, cols));
  if (cols == 0)
    return Status::ok();
  if (!colSum || (rows > 0 && (!x || !partial)))
    return invalidArgument("columnSums: null pointer");
  int64_t maxParts =
      static_cast<int64_t>(partialBytes / (static_cast<size_t>(cols) * sizeof(float)));
  if (maxParts < 1)
    return invalidArgument("columnSums: " + std::to_string(partialBytes) +
                           " scratch bytes hold no row of " + std::to_string(cols) + " f32 sums");
  if (rows == 0) { // no rows: zeros (one part of zeros, summed)
    TC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(partial, 0, cols * sizeof(float), stream));
    return sumColumnPartials(dt, partial, 1, cols, colSum, stream);
  }
  int64_t rowsPerPart = rowsPerPartFor(rows, cols, maxParts); // <= kTargetBlocks parts
  int64_t parts = ceilDiv(rows, rowsPerPart);
  return dispatchFloat16(dt, "columnSums", [&](auto t) -> Status {
    using T = decltype(t);
    const T *xs = static_cast<const T *>(x);
    dim3 grid(static_cast<unsigned>(ceilDiv(cols, kBlockCols)), static_cast<unsigned>(parts));
    if (cols % 8 == 0 && aligned16(x))
      columnPartialKernel<T, true><<<grid, kColThreads * kRowLanes, 0, stream>>>(
          xs, rows, cols, rowsPerPart, partial);
    else
      columnPartialKernel<T, false><<<grid, kColThreads * kRowLanes, 0, stream>>>(
          xs, rows, cols, rowsPerPart, partial);
    TC_RETURN_IF_ERROR(checkLaunch("columnPartialKernel"));
    return sumColumnPartials(dt, partial, parts, cols, colSum, stream);
  });
}

} // namespace tc::rt::cuda
