//===- quantize_mx.cu - MXFP8 quantization (tc.quantize, E8M0 scales) -----===//
//
// --fp8-scaling mxfp8: OCP MX's 1x32 blocks with E8M0 (power-of-two)
// scales, bit for bit what the CPU reference (runtime/src/cpu/quantize.cpp)
// computes, the scale from the one definition both share
// (fp4::mxScaleExponent under mxScaleInv, runtime/src/base/fp4_math.h, in
// integers: no f64 on the GPU):
//   amax = max |x| over the block (NaN ignored), from the float bits of |x|
//       as unsigned integers (exact, order independent);
//   scale_inv = 2^(floor(log2 amax) - emax), clamped to 2^[-127, 127]
//       (2^-127 for amax 0, NaN for amax inf), emax 8 (E4M3) or 15 (E5M2);
//   q = cvt.rn.satfinite(x * 2^-e): the product by a power of two is x /
//       scale_inv exactly (the CPU divides in double), except below 2^-126
//       where f32 loses bits, and such values round to +-0 in both E4M3 and
//       E5M2 either way.
//
// One pass over x, the amaxes in registers:
//   - 1x32 blocks along the columns (the K of an operand stored [M, K]):
//     8 consecutive elements per thread (one 16-byte load of bf16, two of
//     f32, when cols % 8 == 0), the 4 threads of a block combining their
//     amaxes with warp shuffles; each writes its 8 bytes of q at once.
//   - 32x1 blocks along the rows (a wgrad's x and dY, dgrad's W: the
//     operand that cuBLASLt's TN-only GEMM reads as its transpose): a tile
//     of 32 rows (one block) x 128 columns per thread block, column amaxes
//     by shuffles and shared-memory atomicMax, then q (vector stores) and
//     the transposed copy q_t through shared memory, its 32 bytes per column
//     written as words.
// Every scale byte goes out twice: in tc's grid (scale_inv, what tc-run
// --check compares with the CPU) and in cuBLASLt's VEC32_UE8M0 layout for
// the operand read with K contiguous (schema/block_scale_layout.h), whose
// padding is zeroed first.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/base/fp4_math.h"
#include "runtime/src/cuda/kernels/common.cuh"
#include "runtime/src/cuda/kernels/kernels.h"
#include "runtime/src/schema/block_scale_layout.h"

namespace tc::rt::cuda {
namespace {

using namespace kern;

constexpr int kMxBlock = 32;     // elements per block
constexpr int kMxThreads = 256;  // threads per thread block, both kernels
constexpr int kLanes = kMxBlock / kVec; // threads per 1x32 block: 4
constexpr int kTileCols = 128;   // 32x1 blocks: the columns of a tile
constexpr int kTileGroups = kTileCols / kVec;           // 16 threads per tile row
constexpr int kTileRowSteps = kMxThreads / kTileGroups; // 16: each thread has 2 rows

/// A block's E8M0 scale byte and the f32 multiplier 1 / scale_inv, from its
/// amax bits.
struct MxScale {
  uint8_t e8m0;
  float mult;
};

template <bool E5M2> __device__ __forceinline__ MxScale mxScale(unsigned amaxBits) {
  int x = fp4::mxScaleExponent(__uint_as_float(amaxBits), E5M2 ? 15 : 8);
  if (x == fp4::kMxScaleNan) // an inf in the block: E8M0's NaN, and every q NaN
    return {0xff, __int_as_float(0x7fc00000)};
  // scale_inv = 2^x, x in [-127, 127]; 1 / scale_inv = 2^-x in f32 (2^-127
  // is f32's subnormal with the bit 22).
  float mult = x == 127 ? __int_as_float(1 << 22) : __int_as_float((127 - x) << 23);
  return {static_cast<uint8_t>(x + 127), mult};
}

/// Stores bytes [col, col + 8) of a row of `cols` (those before its end):
/// one 8-byte store when Vec (cols % 8 == 0, the row 8-byte aligned).
template <bool Vec>
__device__ __forceinline__ void storeBytes8(uint8_t *row, int64_t col, int64_t cols,
                                            const uint8_t (&b)[kVec]) {
  if constexpr (Vec) {
    uint2 packed;
    memcpy(&packed, b, sizeof packed);
    *reinterpret_cast<uint2 *>(row + col) = packed;
  } else {
    for (int j = 0; j < kVec && col + j < cols; ++j)
      row[col + j] = b[j];
  }
}

/// 1x32 blocks along the columns of x[rows, cols]: thread g handles
/// elements [8 l, 8 l + 8) of block b of row r (g = (r * kBlocks + b) * 4 +
/// l). Vec: cols % 8 == 0, x 16- and q 8-byte aligned.
template <class T, bool E5M2, bool Vec>
__global__ void __launch_bounds__(kMxThreads)
    quantizeMxColsKernel(const T *x, uint8_t *q, uint8_t *scaleInv, uint8_t *gemm, int64_t rows,
                         int64_t cols, int64_t kBlocks) {
  const int64_t g = static_cast<int64_t>(blockIdx.x) * kMxThreads + threadIdx.x;
  const int64_t row = g / (kBlocks * kLanes), rest = g % (kBlocks * kLanes);
  const int64_t blk = rest / kLanes, col = blk * kMxBlock + (rest % kLanes) * kVec;
  // Threads past the last row still take part in the shuffles (all lanes).
  const bool live = row < rows && col < cols;
  float v[kVec];
  unsigned m = 0;
  if (live) {
    loadRow8<T, Vec>(x + row * cols, col, cols, v, 0.f);
#pragma unroll
    for (int j = 0; j < kVec; ++j)
      m = max(m, absBits(v[j]));
  }
#pragma unroll
  for (int o = kLanes / 2; o > 0; o /= 2)
    m = max(m, __shfl_xor_sync(kFullMask, m, o));
  if (!live)
    return;
  MxScale s = mxScale<E5M2>(m);
  if (rest % kLanes == 0) {
    scaleInv[row * kBlocks + blk] = s.e8m0;
    gemm[rt::blockScaleOffset(row, blk, kBlocks)] = s.e8m0;
  }
  uint8_t b[kVec];
#pragma unroll
  for (int j = 0; j < kVec; ++j)
    b[j] = toFp8<E5M2>(__fmul_rn(v[j], s.mult));
  storeBytes8<Vec>(q + row * cols, col, cols, b);
}

/// 32x1 blocks along the rows: one tile of 32 rows x 128 columns of x[rows,
/// cols] per thread block (blockIdx.x: the row block, blockIdx.y: the
/// column tile); thread t has 8 columns (t % 16) of rows t / 16 and t / 16 +
/// 16. q[rows, cols]; with Transpose, qT[cols, rows] (wordsT: rows % 4 == 0
/// and qT 4-byte aligned). gemm: the scales for qT [cols, K = rows].
template <class T, bool E5M2, bool Vec, bool Transpose>
__global__ void __launch_bounds__(kMxThreads)
    quantizeMxRowsKernel(const T *x, uint8_t *q, uint8_t *qT, uint8_t *scaleInv, uint8_t *gemm,
                         int64_t rows, int64_t cols, bool wordsT) {
  __shared__ unsigned amax[kTileCols];
  __shared__ float mult[kTileCols];
  // [column][row], an odd pitch so that a column's bytes spread over banks.
  __shared__ uint8_t tile[Transpose ? kTileCols : 1][kMxBlock + 1];
  const int tid = threadIdx.x;
  const int64_t rb = blockIdx.x, row0 = rb * kMxBlock;
  const int64_t col0 = static_cast<int64_t>(blockIdx.y) * kTileCols;
  const int c8 = (tid % kTileGroups) * kVec, r0 = tid / kTileGroups;
  const int64_t col = col0 + c8;
  if (tid < kTileCols)
    amax[tid] = 0;
  float v[2][kVec];
  unsigned m[kVec] = {};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    int64_t row = row0 + r0 + h * kTileRowSteps;
    if (row < rows && col < cols) {
      loadRow8<T, Vec>(x + row * cols, col, cols, v[h], 0.f);
#pragma unroll
      for (int j = 0; j < kVec; ++j)
        m[j] = max(m[j], absBits(v[h][j]));
    }
  }
  // Lanes l and l + 16 of a warp hold the same columns (rows r0 and r0 + 1).
#pragma unroll
  for (int j = 0; j < kVec; ++j)
    m[j] = max(m[j], __shfl_xor_sync(kFullMask, m[j], kTileGroups));
  __syncthreads();
  if ((tid & 31) < kTileGroups)
#pragma unroll
    for (int j = 0; j < kVec; ++j)
      if (m[j])
        atomicMax(&amax[c8 + j], m[j]);
  __syncthreads();
  if (tid < kTileCols && col0 + tid < cols) {
    MxScale s = mxScale<E5M2>(amax[tid]);
    mult[tid] = s.mult;
    int64_t c = col0 + tid;
    scaleInv[rb * cols + c] = s.e8m0;
    gemm[rt::blockScaleOffset(c, rb, (rows + kMxBlock - 1) / kMxBlock)] = s.e8m0;
  }
  __syncthreads();
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    int r = r0 + h * kTileRowSteps;
    int64_t row = row0 + r;
    if (row >= rows || col >= cols)
      continue;
    uint8_t b[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j)
      b[j] = toFp8<E5M2>(__fmul_rn(v[h][j], mult[c8 + j]));
    storeBytes8<Vec>(q + row * cols, col, cols, b);
    if constexpr (Transpose)
#pragma unroll
      for (int j = 0; j < kVec; ++j)
        tile[c8 + j][r] = b[j];
  }
  if constexpr (!Transpose)
    return;
  __syncthreads();
  // Word w of qT row col0 + c holds tile rows 4w..4w+3 of column c; 8
  // consecutive threads write one column's 32 contiguous bytes.
  constexpr int kWords = kMxBlock / 4;
  for (int i = tid; i < kTileCols * kWords; i += kMxThreads) {
    int c = i / kWords, r = (i % kWords) * 4;
    int64_t colT = col0 + c, row = row0 + r;
    if (colT >= cols || row >= rows)
      continue;
    uint8_t *dst = qT + colT * rows + row;
    if (wordsT) { // rows % 4 == 0: the whole word is inside the matrix
      *reinterpret_cast<uint32_t *>(dst) = tile[c][r] | tile[c][r + 1] << 8 |
                                            tile[c][r + 2] << 16 |
                                            static_cast<uint32_t>(tile[c][r + 3]) << 24;
      continue;
    }
    for (int j = 0; j < 4 && row + j < rows; ++j)
      dst[j] = tile[c][r + j];
  }
}

bool alignedTo(const void *p, uintptr_t bytes) {
  return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0;
}

} // namespace

Status quantizeMx(DType dt, const void *x, DType qt, void *q, void *qT, uint8_t *scaleInv,
                  uint8_t *gemmScale, int64_t rows, int64_t cols, bool alongRows,
                  cudaStream_t stream) {
  TC_RETURN_IF_ERROR(checkEntry("quantizeMx", rows, cols));
  if (qt != DType::F8E4M3FN && qt != DType::F8E5M2)
    return invalidArgument(std::string("quantizeMx: the result must be f8E4M3FN or f8E5M2, got ") +
                           dtypeName(qt));
  if (!x || !q || !scaleInv || !gemmScale)
    return invalidArgument("quantizeMx: null pointer");
  if (qT && !alongRows)
    return invalidArgument("quantizeMx: 1x32 blocks along the columns have no transposed copy "
                           "(its K would be the rows: quantize it in 32x1 blocks)");
  if (rows == 0 || cols == 0)
    return Status::ok();
  int64_t outer = alongRows ? cols : rows, kBlocks = ceilDiv(alongRows ? rows : cols, kMxBlock);
  TC_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(gemmScale, 0, rt::blockScaleLayoutBytes(outer, kBlocks), stream));
  bool e5m2 = qt == DType::F8E5M2;
  bool vec = cols % kVec == 0 && alignedTo(x, 16) && alignedTo(q, 8);
  auto *qs = static_cast<uint8_t *>(q);
  auto *qts = static_cast<uint8_t *>(qT);
  return dispatchFloat(dt, "quantizeMx", [&](auto tag) {
    using T = decltype(tag);
    auto *xs = static_cast<const T *>(x);
    // E5M2 x vector loads (x transposed copy), each a kernel of its own.
    auto pick = [&](auto launch) {
      auto byVec = [&](auto e5) {
        return vec ? launch(e5, std::true_type()) : launch(e5, std::false_type());
      };
      return e5m2 ? byVec(std::true_type()) : byVec(std::false_type());
    };
    if (!alongRows) {
      int64_t blocks = ceilDiv(rows * kBlocks * kLanes, kMxThreads);
      if (blocks > INT32_MAX)
        return invalidArgument("quantizeMx: more than 2^36 blocks of 32");
      return pick([&](auto e5, auto v) {
        quantizeMxColsKernel<T, decltype(e5)::value, decltype(v)::value>
            <<<static_cast<unsigned>(blocks), kMxThreads, 0, stream>>>(xs, qs, scaleInv,
                                                                      gemmScale, rows, cols,
                                                                      kBlocks);
        return checkLaunch("quantize_mx");
      });
    }
    if (kBlocks > INT32_MAX || ceilDiv(cols, kTileCols) > 65535)
      return invalidArgument("quantizeMx: more than 2^23 columns or 2^36 rows");
    dim3 grid(static_cast<unsigned>(kBlocks), static_cast<unsigned>(ceilDiv(cols, kTileCols)));
    bool wordsT = rows % 4 == 0 && alignedTo(qT, 4);
    return pick([&](auto e5, auto v) {
      constexpr bool E = decltype(e5)::value, V = decltype(v)::value;
      if (qT)
        quantizeMxRowsKernel<T, E, V, true><<<grid, kMxThreads, 0, stream>>>(
            xs, qs, qts, scaleInv, gemmScale, rows, cols, wordsT);
      else
        quantizeMxRowsKernel<T, E, V, false><<<grid, kMxThreads, 0, stream>>>(
            xs, qs, qts, scaleInv, gemmScale, rows, cols, wordsT);
      return checkLaunch("quantize_mx");
    });
  });
}

} // namespace tc::rt::cuda
