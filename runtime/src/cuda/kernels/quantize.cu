//===- quantize.cu - FP8 quantization by amax (tc.quantize) ---------------===//
//
// Transformer Engine's current scaling, bit for bit what the CPU reference
// (runtime/src/cpu/quantize.cpp) computes:
//   amax = max |x| over the tensor (or over each row), NaN ignored;
//   s = fmax / amax in f32 (__fdiv_rn), 1 when amax is 0 or inf, the largest
//       f32 when the quotient overflows;
//   q = cvt.rn.satfinite(x * s), the product rounded to f32 first (__fmul_rn:
//       no FMA contraction), +-inf saturating to +-fmax, NaN kept;
//   scale_inv = 1 / s in f32 (__frcp_rn, IEEE round to nearest).
//
// amax is the max of the float bits of |x| read as unsigned integers (for
// non-negative floats that order is the float order), so it is exact and
// independent of the order blocks finish in: the per-tensor pass combines
// its blocks with atomicMax on those bits, the per-row pass gives each row
// one block. The quantize pass reads the amax on the device (no host sync,
// CUDA-graph capturable) and works on tiles, so that the transposed copy
// (what cuBLASLt's TN-only FP8 GEMMs need for dgrad and wgrad) is written
// from shared memory in the same pass, coalesced. Per-tensor scaling of a
// matrix whose rows are 16-byte aligned (cols % 8 == 0: every step's
// operands) takes 64x128 tiles with 8-element loads and stores, qT written
// four rows (one 32-bit word) at a time; the 1B step's 32x32 byte-per-
// thread kernel moved about a quarter of the H200's bandwidth (45 ms of a
// 234 ms step), and stays for the other shapes and for per-row scaling.
//
// --fp8-scaling block128 (quantizeFp8Blocks): one 128x128 tile of x per
// thread block computes the amaxes of its 1x128, 128x1 or 128x128 blocks
// (shared-memory atomicMax on the same float bits), their scales, and
// quantizes the tile, writing the transposed copy through shared memory;
// the scales go out twice, in tc's layout and in the one cuBLASLt's
// VEC128 / BLK128x128 scale modes read.
//
//===----------------------------------------------------------------------===//
#include <cfloat>
#include <cmath>
#include <type_traits>

#include "runtime/src/cuda/kernels/common.cuh"
#include "runtime/src/cuda/kernels/kernels.h"

namespace tc::rt::cuda {
namespace {

using namespace kern;

constexpr int kAmaxThreads = 256;
constexpr int kAmaxMaxBlocks = 1024;
constexpr int kTile = 32;
constexpr int kTileRowsPerPass = 8; // block (32, 8): each thread does 4 rows of a tile

template <class T>
__global__ void __launch_bounds__(kAmaxThreads)
    amaxTensorKernel(const T *x, int64_t n, bool vec, unsigned *amax) {
  unsigned m = 0;
  int64_t stride = static_cast<int64_t>(gridDim.x) * kAmaxThreads;
  int64_t tid = static_cast<int64_t>(blockIdx.x) * kAmaxThreads + threadIdx.x;
  int64_t scalarFrom = 0;
  if (vec) {
    int64_t groups = n / kVec;
    for (int64_t g = tid; g < groups; g += stride) {
      float v[8];
      load8(x + g * kVec, v);
#pragma unroll
      for (int j = 0; j < 8; ++j)
        m = max(m, absBits(v[j]));
    }
    scalarFrom = groups * kVec;
  }
  for (int64_t i = scalarFrom + tid; i < n; i += stride)
    m = max(m, absBits(toF(x[i])));
  blockAtomicMaxBits(amax, m);
}

/// One block per row: amax[row] written, not combined.
template <class T>
__global__ void __launch_bounds__(kAmaxThreads)
    amaxRowsKernel(const T *x, int64_t cols, unsigned *amax) {
  const T *xr = x + static_cast<int64_t>(blockIdx.x) * cols;
  unsigned m = 0;
  for (int64_t i = threadIdx.x; i < cols; i += kAmaxThreads)
    m = max(m, absBits(toF(xr[i])));
  m = blockMaxU32(m);
  if (threadIdx.x == 0)
    amax[blockIdx.x] = m;
}

/// Column tiles of 32 columns x (32 x 8) rows per block: amax[col] combined
/// by atomicMax on the bits (zeroed first).
template <class T>
__global__ void __launch_bounds__(kTile *kTileRowsPerPass)
    amaxColsKernel(const T *x, int64_t rows, int64_t cols, unsigned *amax) {
  __shared__ unsigned part[kTileRowsPerPass][kTile];
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTile * kTileRowsPerPass;
  unsigned m = 0;
  if (col < cols)
    for (int r = threadIdx.y; r < kTile * kTileRowsPerPass; r += kTileRowsPerPass) {
      int64_t row = row0 + r;
      if (row >= rows)
        break;
      m = max(m, absBits(toF(x[row * cols + col])));
    }
  part[threadIdx.y][threadIdx.x] = m;
  __syncthreads();
  if (threadIdx.y != 0 || col >= cols)
    return;
#pragma unroll
  for (int i = 1; i < kTileRowsPerPass; ++i)
    m = max(m, part[i][threadIdx.x]);
  if (m != 0)
    atomicMax(amax + col, m);
}

/// Transformer Engine's compute_scale_from_amax (no epsilon, no power-of-two
/// rounding), as currentScale of the CPU reference.
__device__ __forceinline__ float currentScale(float amax, float fmax) {
  if (isinf(amax) || amax == 0.f)
    return 1.f;
  float s = __fdiv_rn(fmax, amax);
  if (isinf(s))
    return FLT_MAX;
  if (isnan(s))
    return 1.f;
  return s;
}

/// Delayed scaling's statistics of one block (quantizeFp8Delayed): the max
/// of the raw bits of |x| (a NaN's exceed every number's, so the max is NaN
/// when x has one, as tc.reduce_max's) and the count of saturated elements,
/// combined into the call's amax (its f32 bits, zeroed first) and count
/// (a whole number in f32, zeroed first) by one atomic each. `tid` is the
/// thread's index in the block, `threads` the block's size (a multiple of
/// 32, at most 1024).
__device__ __forceinline__ void delayedStats(unsigned bits, int count, int tid, int threads,
                                             float *amax, float *saturated) {
  __shared__ unsigned wm[32];
  __shared__ int wc[32];
  bits = __reduce_max_sync(kFullMask, bits);
  count = __reduce_add_sync(kFullMask, count);
  if (tid % 32 == 0)
    wm[tid / 32] = bits, wc[tid / 32] = count;
  __syncthreads();
  if (tid == 0) {
    for (int w = 1; w < threads / 32; ++w)
      bits = max(bits, wm[w]), count += wc[w];
    if (bits != 0)
      atomicMax(reinterpret_cast<unsigned *>(amax), bits);
    if (count != 0)
      atomicAdd(saturated, static_cast<float>(count));
  }
}

/// One 32x32 tile of x[rows, cols] per block (blockIdx.x: row tile,
/// blockIdx.y: column tile). q[rows, cols] and, with Transpose,
/// qT[cols, rows]; scaleInv[1] (Tensor), [rows] (Row) or [cols] (Column).
///
/// With Delayed (quantizeFp8Delayed; Tensor scaling, no column sums) `amax`
/// is the scale itself and the block adds its statistics to amaxOut and
/// satOut (delayedStats).
template <class T, bool E5M2, Fp8Scaling S, bool Transpose, bool ColSum, bool Delayed = false>
__global__ void __launch_bounds__(kTile *kTileRowsPerPass)
    quantizeKernel(const T *x, const float *amax, uint8_t *q, uint8_t *qT, float *scaleInv,
                   int64_t rows, int64_t cols, float *partial, float *amaxOut,
                   float *satOut) {
  constexpr bool RowScaling = S == Fp8Scaling::Row;
  static_assert(!ColSum || S == Fp8Scaling::Tensor, "column sums ride on per-tensor scaling");
  static_assert(!Delayed || (S == Fp8Scaling::Tensor && !ColSum),
                "delayed scaling: one scale for the tensor, no column sums");
  unsigned bits = 0;
  int count = 0;
  __shared__ uint8_t tile[kTile][kTile + 1];
  __shared__ float sums[ColSum ? kTileRowsPerPass : 1][kTile];
  float acc = 0.f;
  const float fmax = E5M2 ? 57344.f : 448.f;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t col0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int tx = threadIdx.x, ty = threadIdx.y;
  float s = RowScaling ? 0.f : 1.f;
  if (S == Fp8Scaling::Tensor) {
    s = Delayed ? amax[0] : currentScale(amax[0], fmax);
    if (scaleInv && blockIdx.x == 0 && blockIdx.y == 0 && tx == 0 && ty == 0)
      scaleInv[0] = __frcp_rn(s);
  } else if (S == Fp8Scaling::Column && col0 + tx < cols) {
    s = currentScale(amax[col0 + tx], fmax);
    if (blockIdx.x == 0 && ty == 0)
      scaleInv[col0 + tx] = __frcp_rn(s);
  }
#pragma unroll
  for (int r = ty; r < kTile; r += kTileRowsPerPass) {
    int64_t row = row0 + r, col = col0 + tx;
    if (row >= rows)
      break;
    if (RowScaling) {
      s = currentScale(amax[row], fmax);
      if (blockIdx.y == 0 && tx == 0)
        scaleInv[row] = __frcp_rn(s);
    }
    if (col < cols) {
      float xv = toF(x[row * cols + col]);
      const float p = __fmul_rn(xv, s);
      uint8_t v = toFp8<E5M2>(p);
      if constexpr (Delayed) {
        bits = max(bits, __float_as_uint(xv) & 0x7fffffffu);
        count += fabsf(p) > fmax;
      }
      q[row * cols + col] = v;
      if (Transpose)
        tile[r][tx] = v;
      if (ColSum)
        acc += xv;
    }
  }
  if (ColSum) {
    // This tile's 32 rows of column col0 + tx: the 8 row groups in order.
    sums[ty][tx] = acc;
    __syncthreads();
    if (ty == 0 && col0 + tx < cols) {
      float t = sums[0][tx];
#pragma unroll
      for (int i = 1; i < kTileRowsPerPass; ++i)
        t += sums[i][tx];
      partial[blockIdx.x * cols + col0 + tx] = t;
    }
  }
  if constexpr (Delayed)
    delayedStats(bits, count, ty * kTile + tx, kTile * kTileRowsPerPass, amaxOut, satOut);
  if (!Transpose)
    return;
  __syncthreads();
  // Thread (tx, ty) writes qT[col0 + c, row0 + tx] for c = ty, ty + 8, ...:
  // consecutive threads write consecutive bytes of a qT row.
#pragma unroll
  for (int c = ty; c < kTile; c += kTileRowsPerPass) {
    int64_t col = col0 + c, row = row0 + tx;
    if (col < cols && row < rows)
      qT[col * rows + row] = tile[tx][c];
  }
}

constexpr int kVecRows = 64, kVecCols = 128, kVecThreads = 256;
constexpr int kVecThreadsPerRow = kVecCols / kVec; // 16: 8 columns each
constexpr int kVecRowsPerPass = kVecThreads / kVecThreadsPerRow;

/// Per-tensor quantization of one 64x128 tile of x[rows, cols] per block
/// (blockIdx.x: row tile, blockIdx.y: column tile); cols % 8 == 0, x 16-
/// and q 8-byte aligned. With Transpose, qT[cols, rows] too; `wordsT`: rows
/// % 4 == 0 and qT 4-byte aligned, so qT takes 32-bit stores.
/// With Delayed (no column sums) `amax` is the scale itself and the block
/// adds its statistics to amaxOut and satOut (delayedStats).
template <class T, bool E5M2, bool Transpose, bool ColSum, bool Delayed = false>
__global__ void __launch_bounds__(kVecThreads)
    quantizeVecKernel(const T *x, const float *amax, uint8_t *q, uint8_t *qT, float *scaleInv,
                      int64_t rows, int64_t cols, bool wordsT, float *partial,
                      float *amaxOut, float *satOut) {
  static_assert(!(Delayed && ColSum), "delayed scaling: no column sums");
  constexpr float kFmax = E5M2 ? 57344.f : 448.f;
  unsigned bits = 0;
  int count = 0;
  // An odd row stride (129 bytes) puts the four bytes of a qT word, which
  // come from four rows of one column, in four different banks.
  __shared__ uint8_t tile[kVecRows][kVecCols + 1];
  __shared__ float sums[ColSum ? kVecRowsPerPass : 1][kVecCols];
  float acc[kVec] = {};
  const float s = Delayed ? amax[0] : currentScale(amax[0], kFmax);
  if (scaleInv && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0)
    scaleInv[0] = __frcp_rn(s);
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kVecRows;
  const int64_t col0 = static_cast<int64_t>(blockIdx.y) * kVecCols;
  const int c8 = (threadIdx.x % kVecThreadsPerRow) * kVec;
  const int64_t col = col0 + c8;
#pragma unroll 4
  for (int r = threadIdx.x / kVecThreadsPerRow; r < kVecRows; r += kVecRowsPerPass) {
    int64_t row = row0 + r;
    if (row >= rows || col >= cols)
      break;
    float v[kVec];
    load8(x + row * cols + col, v);
    uint8_t b[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const float p = __fmul_rn(v[j], s);
      b[j] = toFp8<E5M2>(p);
      if constexpr (Delayed) {
        bits = max(bits, __float_as_uint(v[j]) & 0x7fffffffu);
        count += fabsf(p) > kFmax;
      }
    }
    uint2 packed;
    memcpy(&packed, b, sizeof packed);
    *reinterpret_cast<uint2 *>(q + row * cols + col) = packed;
    if (Transpose)
#pragma unroll
      for (int j = 0; j < kVec; ++j)
        tile[r][c8 + j] = b[j];
    if (ColSum)
#pragma unroll
      for (int j = 0; j < kVec; ++j)
        acc[j] += v[j];
  }
  if (ColSum) {
    // This tile's 64 rows of each of its 128 columns: the 16 row groups in
    // order (a thread's own 4 rows were summed in row order above).
    const int g = threadIdx.x / kVecThreadsPerRow;
#pragma unroll
    for (int j = 0; j < kVec; ++j)
      sums[g][c8 + j] = acc[j];
    __syncthreads();
    if (threadIdx.x < kVecCols && col0 + threadIdx.x < cols) {
      float t = sums[0][threadIdx.x];
#pragma unroll
      for (int i = 1; i < kVecRowsPerPass; ++i)
        t += sums[i][threadIdx.x];
      partial[blockIdx.x * cols + col0 + threadIdx.x] = t;
    }
  }
  if constexpr (Delayed)
    delayedStats(bits, count, threadIdx.x, kVecThreads, amaxOut, satOut);
  if (!Transpose)
    return;
  __syncthreads();
  // Word w of qT row col0 + c holds tile rows 4w..4w+3 of column c; 16
  // consecutive threads write one row's 64 contiguous bytes.
  constexpr int kWords = kVecRows / 4;
  for (int i = threadIdx.x; i < kVecCols * kWords; i += kVecThreads) {
    int c = i / kWords, r = (i % kWords) * 4;
    int64_t colT = col0 + c, row = row0 + r;
    if (colT >= cols || row >= rows)
      continue;
    uint8_t *dst = qT + colT * rows + row;
    if (wordsT) { // rows % 4 == 0: the whole word is inside the matrix
      *reinterpret_cast<uint32_t *>(dst) = tile[r][c] | tile[r + 1][c] << 8 |
                                            tile[r + 2][c] << 16 |
                                            static_cast<uint32_t>(tile[r + 3][c]) << 24;
      continue;
    }
    for (int j = 0; j < 4 && row + j < rows; ++j)
      dst[j] = tile[r + j][c];
  }
}

bool isFp8(DType t) { return t == DType::F8E4M3FN || t == DType::F8E5M2; }

bool aligned(const void *p, uintptr_t bytes) {
  return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0;
}

constexpr int kBlk = 128;        // block128's block side
constexpr int kBlkThreads = 256; // threads per 128x128 tile

/// Where quantizeFp8Blocks' scales go (kernels.h has the layouts).
struct BlockScaleOut {
  float *tc, *gemm, *gemmT;
  int64_t gridCols;        // tc's grid columns
  int64_t gemmLd, gemmTLd; // row pitch of gemm / gemmT
};

/// One 128x128 tile of x[rows, cols] per thread block (blockIdx.x: row
/// tile, blockIdx.y: column tile).
template <class T, bool E5M2, Fp8Blocks B, bool Transpose>
__global__ void __launch_bounds__(kBlkThreads)
    quantizeBlocksKernel(const T *x, uint8_t *q, uint8_t *qT, BlockScaleOut out, int64_t rows,
                         int64_t cols, bool pow2) {
  __shared__ unsigned amax[kBlk];
  __shared__ float scale[kBlk];
  __shared__ uint8_t tile[Transpose ? kBlk : 1][kBlk + 1];
  const float fmax = E5M2 ? 57344.f : 448.f;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kBlk;
  const int64_t col0 = static_cast<int64_t>(blockIdx.y) * kBlk;
  const int tid = threadIdx.x;
  if (tid < kBlk)
    amax[tid] = 0;
  __syncthreads();
  // Element e of the tile: local row e / 128, column e % 128 (coalesced).
  auto slot = [](int lr, int lc) {
    return B == Fp8Blocks::Cols128 ? lr : B == Fp8Blocks::Rows128 ? lc : 0;
  };
  for (int e = tid; e < kBlk * kBlk; e += kBlkThreads) {
    int lr = e / kBlk, lc = e % kBlk;
    int64_t row = row0 + lr, col = col0 + lc;
    if (row < rows && col < cols) {
      unsigned bits = absBits(toF(x[row * cols + col]));
      if (bits)
        atomicMax(&amax[slot(lr, lc)], bits);
    }
  }
  __syncthreads();
  // The scales of the tile's blocks: 128 (one per row or column) or 1.
  int nScales = B == Fp8Blocks::Square128 ? 1 : kBlk;
  if (tid < nScales) {
    float s = currentScale(__uint_as_float(amax[tid]), fmax);
    if (pow2)
      s = __uint_as_float(__float_as_uint(s) & 0xff800000u);
    scale[tid] = s;
    float inv = __frcp_rn(s);
    int64_t rb = blockIdx.x, cb = blockIdx.y;
    if (B == Fp8Blocks::Cols128) {
      int64_t row = row0 + tid;
      if (row < rows) {
        out.tc[row * out.gridCols + cb] = inv;
        out.gemm[cb * out.gemmLd + row] = inv;
      }
    } else if (B == Fp8Blocks::Rows128) {
      int64_t col = col0 + tid;
      if (col < cols) {
        out.tc[rb * out.gridCols + col] = inv;
        out.gemm[rb * out.gemmLd + col] = inv;
      }
    } else {
      out.tc[rb * out.gridCols + cb] = inv;
      out.gemm[rb * out.gemmLd + cb] = inv;
      if (out.gemmT)
        out.gemmT[cb * out.gemmTLd + rb] = inv;
    }
  }
  __syncthreads();
  for (int e = tid; e < kBlk * kBlk; e += kBlkThreads) {
    int lr = e / kBlk, lc = e % kBlk;
    int64_t row = row0 + lr, col = col0 + lc;
    if (row < rows && col < cols) {
      uint8_t v = toFp8<E5M2>(__fmul_rn(toF(x[row * cols + col]), scale[slot(lr, lc)]));
      q[row * cols + col] = v;
      if (Transpose)
        tile[lr][lc] = v;
    }
  }
  if (!Transpose)
    return;
  __syncthreads();
  // qT[col0 + c, row0 + r], consecutive threads along r (a qT row).
  for (int e = tid; e < kBlk * kBlk; e += kBlkThreads) {
    int c = e / kBlk, r = e % kBlk;
    int64_t row = row0 + r, col = col0 + c;
    if (row < rows && col < cols)
      qT[col * rows + row] = tile[r][c];
  }
}

int64_t roundUp4(int64_t v) { return (v + 3) / 4 * 4; }

} // namespace

Status quantizeFp8Blocks(DType dt, const void *x, DType qt, void *q, void *qT, float *scaleInv,
                         float *gemmScale, float *gemmScaleT, int64_t rows, int64_t cols,
                         Fp8Blocks blocks, bool pow2, cudaStream_t stream) {
  TC_RETURN_IF_ERROR(checkEntry("quantizeFp8Blocks", rows, cols));
  if (!isFp8(qt))
    return invalidArgument(
        std::string("quantizeFp8Blocks: the result must be f8E4M3FN or f8E5M2, got ") +
        dtypeName(qt));
  if (!x || !q || !scaleInv || !gemmScale)
    return invalidArgument("quantizeFp8Blocks: null pointer");
  if (qT && blocks == Fp8Blocks::Cols128)
    return invalidArgument("quantizeFp8Blocks: 1x128 blocks along the columns have no "
                           "transposed copy (its K would be the rows: quantize it in 128x1 "
                           "blocks)");
  if (gemmScaleT && (blocks != Fp8Blocks::Square128 || !qT))
    return invalidArgument("quantizeFp8Blocks: gemmScaleT is the 128x128 blocks' for qT");
  if (rows == 0 || cols == 0)
    return Status::ok();
  if (ceilDiv(rows, kBlk) > INT32_MAX || ceilDiv(cols, kBlk) > 65535)
    return invalidArgument("quantizeFp8Blocks: more than 2^23 columns or 2^38 rows");
  // The padding of the GEMM-ready layouts reads as 0.
  auto gemmFloats = [&](bool transposed) {
    return fp8BlockGemmScaleFloats(rows, cols, static_cast<int64_t>(blocks), transposed);
  };
  TC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(gemmScale, 0, gemmFloats(false) * sizeof(float), stream));
  if (gemmScaleT)
    TC_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(gemmScaleT, 0, gemmFloats(true) * sizeof(float), stream));
  int64_t rb = ceilDiv(rows, kBlk), cb = ceilDiv(cols, kBlk);
  BlockScaleOut out{scaleInv, gemmScale, gemmScaleT, 0, 0, 0};
  switch (blocks) {
  case Fp8Blocks::Cols128:
    out.gridCols = cb, out.gemmLd = roundUp4(rows);
    break;
  case Fp8Blocks::Rows128:
    out.gridCols = cols, out.gemmLd = roundUp4(cols);
    break;
  case Fp8Blocks::Square128:
    out.gridCols = cb, out.gemmLd = roundUp4(cb), out.gemmTLd = roundUp4(rb);
    break;
  }
  dim3 grid(static_cast<unsigned>(rb), static_cast<unsigned>(cb));
  bool e5m2 = qt == DType::F8E5M2;
  auto *qs = static_cast<uint8_t *>(q);
  auto *qts = static_cast<uint8_t *>(qT);
  return dispatchFloat(dt, "quantizeFp8Blocks", [&](auto tag) {
    using T = decltype(tag);
    auto *xs = static_cast<const T *>(x);
    auto launch = [&](auto kernel) {
      kernel<<<grid, kBlkThreads, 0, stream>>>(xs, qs, qts, out, rows, cols, pow2);
      return checkLaunch("quantize_fp8_block");
    };
    // E5M2 x blocks x transpose, each a kernel of its own.
    auto pick = [&](auto e5, auto b) {
      constexpr bool E = decltype(e5)::value;
      constexpr Fp8Blocks Bk = decltype(b)::value;
      if constexpr (Bk == Fp8Blocks::Cols128)
        return launch(quantizeBlocksKernel<T, E, Bk, false>);
      else
        return qT ? launch(quantizeBlocksKernel<T, E, Bk, true>)
                  : launch(quantizeBlocksKernel<T, E, Bk, false>);
    };
    auto byBlocks = [&](auto e5) {
      switch (blocks) {
      case Fp8Blocks::Cols128:
        return pick(e5, std::integral_constant<Fp8Blocks, Fp8Blocks::Cols128>());
      case Fp8Blocks::Rows128:
        return pick(e5, std::integral_constant<Fp8Blocks, Fp8Blocks::Rows128>());
      default:
        return pick(e5, std::integral_constant<Fp8Blocks, Fp8Blocks::Square128>());
      }
    };
    return e5m2 ? byBlocks(std::true_type()) : byBlocks(std::false_type());
  });
}

Status amaxFp8(DType dt, const void *x, float *amax, int64_t rows, int64_t cols,
               Fp8Scaling scaling, cudaStream_t stream) {
  TC_RETURN_IF_ERROR(checkEntry("amaxFp8", rows, cols));
  if (!x || !amax)
    return invalidArgument("amaxFp8: null pointer");
  bool perRow = scaling == Fp8Scaling::Row, perCol = scaling == Fp8Scaling::Column;
  if (perRow && rows > INT32_MAX)
    return invalidArgument("amaxFp8: more than 2^31 rows");
  if (perCol && (ceilDiv(cols, kTile) > INT32_MAX || ceilDiv(rows, kTile * kTileRowsPerPass) > 65535))
    return invalidArgument("amaxFp8: more than 2^36 columns or 2^24 rows per column");
  int64_t n = rows * cols;
  auto *bits = reinterpret_cast<unsigned *>(amax);
  if (!perRow) // the blocks' atomicMax combines into a zeroed amax
    TC_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(amax, 0, (perCol ? std::max<int64_t>(cols, 1) : 1) * sizeof(float), stream));
  if (n == 0) {
    if (perRow && rows > 0)
      TC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(amax, 0, rows * sizeof(float), stream));
    return Status::ok();
  }
  return dispatchFloat(dt, "amaxFp8", [&](auto tag) {
    using T = decltype(tag);
    auto *xs = static_cast<const T *>(x);
    if (perCol) {
      dim3 grid(static_cast<unsigned>(ceilDiv(cols, kTile)),
                static_cast<unsigned>(ceilDiv(rows, kTile * kTileRowsPerPass)));
      amaxColsKernel<T><<<grid, dim3(kTile, kTileRowsPerPass), 0, stream>>>(xs, rows, cols, bits);
      return checkLaunch("amax_cols");
    }
    if (perRow) {
      amaxRowsKernel<T><<<static_cast<unsigned>(rows), kAmaxThreads, 0, stream>>>(xs, cols, bits);
      return checkLaunch("amax_rows");
    }
    bool vec = aligned16(x);
    int64_t blocks = std::min<int64_t>(ceilDiv(n, kAmaxThreads * kVec), kAmaxMaxBlocks);
    amaxTensorKernel<T>
        <<<static_cast<unsigned>(blocks), kAmaxThreads, 0, stream>>>(xs, n, vec, bits);
    return checkLaunch("amax_tensor");
  });
}

Status quantizeFp8(DType dt, const void *x, const float *amax, DType qt, void *q, void *qT,
                   float *scaleInv, int64_t rows, int64_t cols, Fp8Scaling scaling,
                   cudaStream_t stream, void *colSum, float *partial) {
  TC_RETURN_IF_ERROR(checkEntry("quantizeFp8", rows, cols));
  if (!isFp8(qt))
    return invalidArgument(std::string("quantizeFp8: the result must be f8E4M3FN or f8E5M2, got ") +
                           dtypeName(qt));
  bool perRow = scaling == Fp8Scaling::Row, perCol = scaling == Fp8Scaling::Column;
  if (qT && perRow)
    return invalidArgument("quantizeFp8: a transposed copy needs per-tensor or per-column "
                           "scaling (its rows would need per-column scales)");
  if (colSum && scaling != Fp8Scaling::Tensor)
    return invalidArgument("quantizeFp8: column sums ride on per-tensor scaling only");
  if (!x || !amax || !q || !scaleInv || (colSum && !partial))
    return invalidArgument("quantizeFp8: null pointer");
  if (rows == 0 || cols == 0) { // amax 0: every scale is 1 (the f32 bits 0x3f800000)
    if (colSum && cols > 0) // the sums over no rows
      TC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(colSum, 0, cols * dtypeStorageBytes(dt), stream));
    return fillBuffer(scaleInv, 4, 0x3f800000u, perRow ? rows : perCol ? cols : 1, stream);
  }
  if (ceilDiv(rows, kTile) > INT32_MAX || ceilDiv(cols, kTile) > 65535)
    return invalidArgument("quantizeFp8: more than 2^21 columns or 2^36 rows");
  dim3 grid(static_cast<unsigned>(ceilDiv(rows, kTile)), static_cast<unsigned>(ceilDiv(cols, kTile)));
  dim3 block(kTile, kTileRowsPerPass);
  bool e5m2 = qt == DType::F8E5M2;
  auto *qs = static_cast<uint8_t *>(q);
  auto *qts = static_cast<uint8_t *>(qT);
  bool vec = scaling == Fp8Scaling::Tensor && cols % kVec == 0 && aligned(x, 16) && aligned(q, 8);
  static_assert(kTile == kFp8ColumnSumRows && kVecRows % kFp8ColumnSumRows == 0,
                "the partials' row groups (library_abi.h) are the tiles' rows");
  return dispatchFloat(dt, "quantizeFp8", [&](auto tag) -> Status {
    using T = decltype(tag);
    auto *xs = static_cast<const T *>(x);
    // Picks the kernel instance for the run-time flags, as constants.
    auto pick = [](bool flag, auto f) {
      return flag ? f(std::true_type()) : f(std::false_type());
    };
    Status st = pick(e5m2, [&](auto e5) {
      return pick(qT != nullptr, [&](auto tr) {
        return pick(colSum != nullptr, [&](auto cs) -> Status {
          constexpr bool E5 = decltype(e5)::value, Tr = decltype(tr)::value,
                         Cs = decltype(cs)::value;
          if (vec) {
            dim3 vgrid(static_cast<unsigned>(ceilDiv(rows, kVecRows)),
                       static_cast<unsigned>(ceilDiv(cols, kVecCols)));
            bool wordsT = rows % 4 == 0 && aligned(qT, 4);
            quantizeVecKernel<T, E5, Tr, Cs><<<vgrid, kVecThreads, 0, stream>>>(
                xs, amax, qs, qts, scaleInv, rows, cols, wordsT, partial, nullptr, nullptr);
            return checkLaunch("quantize_fp8");
          }
          auto launch = [&](auto kernel) {
            kernel<<<grid, block, 0, stream>>>(xs, amax, qs, qts, scaleInv, rows, cols, partial,
                                               nullptr, nullptr);
            return checkLaunch("quantize_fp8");
          };
          constexpr auto Row = Fp8Scaling::Row, Col = Fp8Scaling::Column, Ten = Fp8Scaling::Tensor;
          if constexpr (Cs)
            return launch(quantizeKernel<T, E5, Ten, Tr, true>);
          else if (perRow)
            return Tr ? invalidArgument("quantizeFp8: internal: a per-row copy")
                      : launch(quantizeKernel<T, E5, Row, false, false>);
          else if (perCol)
            return launch(quantizeKernel<T, E5, Col, Tr, false>);
          else
            return launch(quantizeKernel<T, E5, Ten, Tr, false>);
        });
      });
    });
    if (!st.isOk() || !colSum)
      return st;
    int64_t parts = vec ? ceilDiv(rows, kVecRows) : ceilDiv(rows, kTile);
    return sumColumnPartials(dt, partial, parts, cols, colSum, stream);
  });
}

Status quantizeFp8Delayed(DType dt, const void *x, const float *scale, DType qt, void *q,
                          void *qT, float *scaleInv, float *amax, float *saturated, int64_t rows,
                          int64_t cols, cudaStream_t stream) {
  TC_RETURN_IF_ERROR(checkEntry("quantizeFp8Delayed", rows, cols));
  if (!isFp8(qt))
    return invalidArgument(
        std::string("quantizeFp8Delayed: the result must be f8E4M3FN or f8E5M2, got ") +
        dtypeName(qt));
  if (!x || !scale || !q || !amax || !saturated)
    return invalidArgument("quantizeFp8Delayed: null pointer");
  TC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(amax, 0, sizeof(float), stream));
  TC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(saturated, 0, sizeof(float), stream));
  if (rows == 0 || cols == 0) // the compiler takes this call for non-empty tensors only
    return invalidArgument("quantizeFp8Delayed: an empty tensor");
  if (ceilDiv(rows, kTile) > INT32_MAX || ceilDiv(cols, kTile) > 65535)
    return invalidArgument("quantizeFp8Delayed: more than 2^21 columns or 2^36 rows");
  const bool e5m2 = qt == DType::F8E5M2;
  auto *qs = static_cast<uint8_t *>(q);
  auto *qts = static_cast<uint8_t *>(qT);
  const bool vec = cols % kVec == 0 && aligned(x, 16) && aligned(q, 8);
  return dispatchFloat(dt, "quantizeFp8Delayed", [&](auto tag) -> Status {
    using T = decltype(tag);
    auto *xs = static_cast<const T *>(x);
    auto pick = [](bool flag, auto f) {
      return flag ? f(std::true_type()) : f(std::false_type());
    };
    return pick(e5m2, [&](auto e5) {
      return pick(qT != nullptr, [&](auto tr) -> Status {
        constexpr bool E5 = decltype(e5)::value, Tr = decltype(tr)::value;
        if (vec) {
          dim3 vgrid(static_cast<unsigned>(ceilDiv(rows, kVecRows)),
                     static_cast<unsigned>(ceilDiv(cols, kVecCols)));
          const bool wordsT = rows % 4 == 0 && aligned(qT, 4);
          quantizeVecKernel<T, E5, Tr, false, true><<<vgrid, kVecThreads, 0, stream>>>(
              xs, scale, qs, qts, scaleInv, rows, cols, wordsT, nullptr, amax, saturated);
        } else {
          dim3 grid(static_cast<unsigned>(ceilDiv(rows, kTile)),
                    static_cast<unsigned>(ceilDiv(cols, kTile)));
          quantizeKernel<T, E5, Fp8Scaling::Tensor, Tr, false, true>
              <<<grid, dim3(kTile, kTileRowsPerPass), 0, stream>>>(
                  xs, scale, qs, qts, scaleInv, rows, cols, nullptr, amax, saturated);
        }
        return checkLaunch("quantize_fp8_delayed");
      });
    });
  });
}

namespace {

constexpr int kScaleUpdateThreads = 256;

/// A float's bits mapped so that unsigned order is float order (NaNs
/// aside: the caller tests them apart).
__device__ __forceinline__ unsigned orderedBits(float v) {
  unsigned b = __float_as_uint(v);
  return b & 0x80000000u ? ~b : b | 0x80000000u;
}
__device__ __forceinline__ float fromOrderedBits(unsigned k) {
  return __uint_as_float(k & 0x80000000u ? k & 0x7fffffffu : ~k);
}

/// fp8ScaleUpdate's one block (kernels.h has the contract).
__global__ void __launch_bounds__(kScaleUpdateThreads)
    scaleUpdateKernel(const float *amax, const float *scale, const float *history, int64_t len,
                      float fmax, bool mostRecent, float *nextScale, float *scaleInv,
                      float *nextHistory) {
  const float a = amax[0], s = scale[0];
  bool nan = false;
  unsigned key = 0;
  if (!mostRecent)
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
      const float v = history[i];
      nan |= isnan(v);
      key = max(key, orderedBits(v));
    }
  nan = __syncthreads_or(nan);
  key = blockMaxU32(key); // ends with every thread past its history reads
  // The shift, from the end in chunks of the block: a chunk reads
  // history[lo - 1 .. hi - 1], which no chunk has written yet (they wrote
  // above hi), then writes [lo .. hi]: right in place too.
  for (int64_t hi = len - 1; hi >= 0; hi -= blockDim.x) {
    const int64_t i = hi - threadIdx.x;
    const float v = i > 0 ? history[i - 1] : a;
    __syncthreads();
    if (i >= 0)
      nextHistory[i] = v;
  }
  if (threadIdx.x != 0)
    return;
  float used = a;
  if (!mostRecent && (nan || isnan(a)))
    used = __uint_as_float(0x7fc00000u);
  else if (!mostRecent && len > 0)
    used = fmaxf(a, fromOrderedBits(key));
  const float q = __fdiv_rn(fmax, used);
  scaleInv[0] = __fdiv_rn(1.f, s);
  nextScale[0] = used > 0.f && !isinf(used) ? (isinf(q) ? FLT_MAX : q) : s;
}

} // namespace

Status fp8ScaleUpdate(const float *amax, const float *scale, const float *history, int64_t len,
                      float fmax, bool mostRecent, float *nextScale, float *scaleInv,
                      float *nextHistory, cudaStream_t stream) {
  if (!amax || !scale || !nextScale || !scaleInv || (len > 0 && (!history || !nextHistory)))
    return invalidArgument("fp8ScaleUpdate: null pointer");
  if (len < 0 || !(fmax > 0.f) || std::isinf(fmax))
    return invalidArgument("fp8ScaleUpdate: a negative history length or a bad fmax");
  scaleUpdateKernel<<<1, kScaleUpdateThreads, 0, stream>>>(amax, scale, history, len, fmax,
                                                           mostRecent, nextScale, scaleInv,
                                                           nextHistory);
  return checkLaunch("fp8_scale_update");
}

} // namespace tc::rt::cuda
