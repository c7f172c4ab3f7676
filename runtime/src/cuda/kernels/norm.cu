//===- norm.cu - layer_norm and rms_norm, forward and backward ------------===//
//
// Forward: one warp per row (8 rows per 256-thread block), all in fp32;
// vectorisable rows of at most 1024 columns are read once and held in
// registers (packed) for the mean, the centred variance and the output,
// other rows are read once per statistic (the re-reads hit L1/L2). Rows (x, y, dy, dx) and parameters
// (weight, bias and their gradients) each have a storage type: both f32, both
// bf16, or bf16 rows with f32 parameters (mixed precision: bf16 activations,
// f32 master weights, no f32 copy of the rows).
// Backward of rows of at most 4096 columns that are vectorisable (cols % 8
// == 0, 16-byte aligned): one fused kernel, a 256-thread block per chunk of
// normBackwardChunkRows(cols) rows (library_abi.h). A row of at most 768
// columns is one warp's: warp w takes rows w, w + 8, ... of the chunk, reads
// each row's x and dy once (held packed in registers across the row's two
// reductions), writes dx, and adds dy * xhat and dy to its lanes' column
// sums in row order; the 8 warps' sums are added in warp order (shared
// memory) into scratch[chunk, col] (dweight) and scratch[chunks + chunk,
// col] (dbias). A wider row is split over P = 2 warps (up to 1024 columns,
// 512 each) or 4 (up to 2048, 512 each; up to 4096, 1024 each), a group of
// P warps per row: rows g, g + 8 / P, ... of the chunk for group g; the
// row's two sums added over the group's warps in warp order through shared
// memory (a named barrier per group), the column sums over the groups in
// group order. (At d 2048 the other path took 104 us a call where the bytes
// take ~30: a dx kernel and a column kernel each reading x and dy. A row of
// 1024 in one warp held 204 registers a thread: one block an SM.) Other rows: a dx
// kernel (one warp per row, as the forward) and a
// partial kernel giving each (chunk, column) pair to one thread, which sums
// its chunk in row order into the same scratch. Then one kernel sums a
// column's chunks in a fixed order (runs of chunks, each in order, then the
// runs in order). With a colSum (the bias gradient of the Linear layer dx
// flows into, tc-fuse-bias-grad) the fused kernel also sums dx as stored
// per chunk (a third block of scratch), the other path sums dx in a pass of
// its own (columnSums). No atomics, so the bits do not depend on
// scheduling; the path and the chunking depend on the shape and alignment
// only, not on the GPU.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/cuda/kernels/common.cuh"
#include "runtime/src/cuda/kernels/kernels.h"

namespace tc::rt::cuda {
namespace {

using namespace kern;

constexpr int kRowsPerBlock = 8;    // one warp per row
constexpr int kColThreads = 256;    // threads per block of normBackwardPartialKernel
constexpr int kStretch = 32 * kVec; // elements of a row one warp covers per step
constexpr int kMaxStretches = 4;    // the fused backward: cols <= 4 * kStretch a warp
constexpr int kMaxRowWarps = 4;     // ... and a row over at most 4 warps
constexpr int kFusedWarps = 8;      // warps per chunk of the fused backward
constexpr int kSumWarps = 8;        // warps per 32 columns of sumChunksKernel

/// The forward's output for elements [i, i + 8) of a row (v: x there):
/// (x - mean) rstd (* weight) (+ bias), stored into yr; with HasAmax the max
/// |y| of the elements before cols (only the non-Vec tail pads) into m.
template <class T, class W, bool Vec, bool HasAmax>
__device__ __forceinline__ void normOutput8(float (&v)[8], const W *weight, const W *bias, T *yr,
                                            int64_t i, int64_t cols, float mean, float rstd,
                                            float &m) {
  float w[8], b[8];
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
    if (HasAmax && (Vec || i + j < cols))
      m = fmaxf(m, fabsf(o));
  }
  storeRow8<T, Vec>(yr, i, cols, v);
}

/// A forward row's statistics, by its warp's lane 0.
__device__ __forceinline__ void storeStats(float *meanOut, float *rstdOut, int64_t row,
                                           float mean, float rstd) {
  if (threadIdx.x % 32 == 0) {
    if (meanOut)
      meanOut[row] = mean;
    if (rstdOut)
      rstdOut[row] = rstd;
  }
}

/// dx of layer_norm (Rms false: mean given) or rms_norm (mean null):
///   xhat = (x - mean) rstd, g = dy * w,
///   dx = rstd (g - mean(g) - xhat mean(g xhat))   (rms: without mean(g)).
template <class T, class W, bool Vec, bool Rms>
__global__ void __launch_bounds__(kRowsPerBlock * 32)
    normBackwardDxKernel(const T *__restrict__ dy, const T *__restrict__ x,
                         const W *__restrict__ weight, const float *__restrict__ meanIn,
                         const float *__restrict__ rstdIn, T *dx, int64_t rows, int64_t cols,
                         const T *addTo) {
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
    if (addTo)
      loadRow8<T, Vec>(addTo + row * cols, i, cols, o, 0.0f);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float gj = weight ? g[j] * w[j] : g[j];
      float xhat = (v[j] - mean) * rstd;
      float d = rstd * (gj - meanG - xhat * meanGX);
      o[j] = addTo ? o[j] + d : d;
    }
    storeRow8<T, Vec>(dxr, i, cols, o);
  }
}

static_assert(kFusedWarps * 32 == kStretch, "storeChunkSums: a thread per column of a stretch");

/// out[c] = sum over the block's warps that hold column c, in warp order, of
/// their lanes' part (laid out as normBackwardFusedKernel holds a row: with
/// P warps a row, warp w holds columns [(w % P) S kStretch, + S kStretch))
/// for c < cols; thread t sums columns t, t + kStretch, ... Every thread of
/// the block calls it.
template <int S, int P>
__device__ __forceinline__ void storeChunkSums(float (&sums)[kFusedWarps][S * kStretch],
                                               const float (&part)[S][8], float *out,
                                               int64_t cols) {
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t base = static_cast<int64_t>(warp % P) * S * kStretch;
  __syncthreads(); // sums may still be read by a previous call
#pragma unroll
  for (int s = 0; s < S; ++s) {
    int64_t i = s * kStretch + lane * 8;
    if (base + i < cols) {
      float *p = &sums[warp][i];
      *reinterpret_cast<float4 *>(p) = make_float4(part[s][0], part[s][1], part[s][2], part[s][3]);
      *reinterpret_cast<float4 *>(p + 4) =
          make_float4(part[s][4], part[s][5], part[s][6], part[s][7]);
    }
  }
  __syncthreads();
#pragma unroll
  for (int s = 0; s < P * S; ++s) {
    int64_t c = s * kStretch + threadIdx.x;
    int owner = s / S, at = (s % S) * kStretch + threadIdx.x; // the owner's warp in group 0
    if (c < cols) {
      float t = sums[owner][at];
#pragma unroll
      for (int g = 1; g < kFusedWarps / P; ++g)
        t += sums[g * P + owner][at];
      out[c] = t;
    }
  }
}

/// 8 elements of a row as stored (one 16-byte vector for bf16, two for f32):
/// what the fused backward holds of a row across its reductions (half the
/// registers of floats for bf16), converted where used.
template <class T> struct Packed8 { int4 v[sizeof(T) / 2]; };
template <class T> __device__ __forceinline__ void loadPacked8(const T *p, Packed8<T> &r) {
#pragma unroll
  for (int k = 0; k < static_cast<int>(sizeof(T) / 2); ++k)
    r.v[k] = reinterpret_cast<const int4 *>(p)[k];
}
template <class T> __device__ __forceinline__ void zeroPacked8(Packed8<T> &r) {
#pragma unroll
  for (int k = 0; k < static_cast<int>(sizeof(T) / 2); ++k)
    r.v[k] = make_int4(0, 0, 0, 0); // 0.0 in f32 and bf16
}
template <class T> __device__ __forceinline__ void unpack8(const Packed8<T> &r, float (&v)[8]) {
  load8(reinterpret_cast<const T *>(r.v), v);
}

/// r, hidden from the optimiser (an empty asm: no instruction). What is
/// computed from it afterwards is computed again, not merged with what was
/// computed from it before: the fused backward holds a row packed across its
/// reductions, not as the floats derived from it in its first pass (twice the
/// registers: it would spill).
template <class T> __device__ __forceinline__ void launder(Packed8<T> &r) {
#pragma unroll
  for (int k = 0; k < static_cast<int>(sizeof(T) / 2); ++k)
    asm volatile("" : "+r"(r.v[k].x), "+r"(r.v[k].y), "+r"(r.v[k].z), "+r"(r.v[k].w));
}

/// Forward of layer_norm (Rms false) or rms_norm (Rms true), one warp per
/// row. Lane l handles elements [8 l, 8 l + 8) of every 256-element stretch
/// of the row. With S > 0 (vectorisable rows, Vec, of at most S stretches)
/// the lane loads its pieces once and holds them packed in registers for the
/// mean, the centred variance and the output; with S == 0 it reads the row
/// once per statistic (the re-reads hit L1/L2). The arithmetic, and its
/// order, is the same either way. With HasAmax, `amax` (non-null, zeroed
/// before the launch) gets the block's max |y| as stored (the f32 max rounded
/// to T; NaN ignored; blockAmax).
template <class T, class W, int S, bool Vec, bool Rms, bool HasAmax>
__global__ void __launch_bounds__(kRowsPerBlock * 32)
    normForwardKernel(const T *__restrict__ x, const W *__restrict__ weight,
                      const W *__restrict__ bias, T *__restrict__ y, float *__restrict__ meanOut,
                      float *__restrict__ rstdOut, unsigned *__restrict__ amax, int64_t rows,
                      int64_t cols, float eps) {
  static_assert(S == 0 || Vec, "held rows are vectorisable");
  int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  float m = 0.0f; // max |y| before rounding (fmaxf drops NaN)
  if (row < rows) { // no early return: the amax reduction needs the whole block
    const T *xr = x + row * cols;
    T *yr = y + row * cols;
    Packed8<T> xp[S > 0 ? S : 1];
    if constexpr (S > 0) {
#pragma unroll
      for (int s = 0; s < S; ++s)
        if (s * kStretch + lane * 8 < cols)
          loadPacked8(xr + s * kStretch + lane * 8, xp[s]);
    }
    // f(i, v) for the lane's 8 elements from i, in row order: held, or read
    // again (past cols padded with `pad`).
    auto forEach = [&](float pad, auto f) {
      if constexpr (S > 0) {
#pragma unroll
        for (int s = 0; s < S; ++s) {
          int64_t i = s * kStretch + lane * 8;
          if (i >= cols)
            continue;
          float v[8];
          unpack8(xp[s], v);
          f(i, v);
        }
      } else {
        for (int64_t i = lane * 8; i < cols; i += kStretch) {
          float v[8];
          loadRow8<T, Vec>(xr, i, cols, v, pad);
          f(i, v);
        }
      }
    };
    float mean = 0.0f;
    if constexpr (!Rms) {
      float sum = 0.0f;
      forEach(0.0f, [&](int64_t, float(&v)[8]) {
#pragma unroll
        for (int j = 0; j < 8; ++j)
          sum += v[j];
      });
      mean = warpSum(sum) / static_cast<float>(cols);
    }
    float ss = 0.0f;
    forEach(mean, [&](int64_t, float(&v)[8]) { // padding contributes 0
#pragma unroll
      for (int j = 0; j < 8; ++j)
        ss += (v[j] - mean) * (v[j] - mean);
    });
    float rstd = 1.0f / sqrtf(warpSum(ss) / static_cast<float>(cols) + eps);
    forEach(0.0f, [&](int64_t i, float(&v)[8]) {
      normOutput8<T, W, Vec, HasAmax>(v, weight, bias, yr, i, cols, mean, rstd, m);
    });
    storeStats(meanOut, rstdOut, row, mean, rstd);
  }
  if constexpr (HasAmax)
    blockAmax<T>(amax, m);
}

/// normForwardKernel for the row's layout: held in registers when
/// vectorisable with at most kMaxStretches stretches, else read per pass.
template <class T, class W, bool Rms, bool HasAmax>
auto forwardKernel(bool vec, int64_t stretches) {
  return !vec             ? normForwardKernel<T, W, 0, false, Rms, HasAmax>
         : stretches == 1 ? normForwardKernel<T, W, 1, true, Rms, HasAmax>
         : stretches == 2 ? normForwardKernel<T, W, 2, true, Rms, HasAmax>
         : stretches == 3 ? normForwardKernel<T, W, 3, true, Rms, HasAmax>
         : stretches == 4 ? normForwardKernel<T, W, 4, true, Rms, HasAmax>
                          : normForwardKernel<T, W, 0, true, Rms, HasAmax>;
}

/// Blocks per SM the fused backward is built for: 2 (16 warps: enough loads
/// in flight) where what it holds fits in 128 registers with room to spare
/// (the row packed: x, dy and the dx added to; the lane's column sums), else
/// 1 (no spills, half the warps).
template <class T, int S, bool Rms> constexpr int fusedBlocksPerSm() {
  int packed = 3 * S * 2 * static_cast<int>(sizeof(T)), colSums = (Rms ? 8 : 16) * S;
  return packed + colSums <= 96 ? 2 : 1;
}

/// The whole backward of one chunk of chunkRows rows (blockIdx.x)
/// of layer_norm (Rms false) or rms_norm, the math of normBackwardDxKernel and
/// normBackwardPartialKernel: dx (when non-null) and the chunk's dweight /
/// dbias partials. Rows are vectorisable (cols % 8 == 0, 16-byte aligned) with
/// cols <= P * S * kStretch; HasW: weight is non-null. A row is P warps'
/// (a group: warps g P .. g P + P - 1 take rows g, g + 8 / P, ...); warp
/// part p of a group holds columns [p S kStretch, (p + 1) S kStretch): lane l
/// elements [8 l, 8 l + 8) of each of its S stretches (none at or past cols
/// are loaded or stored) and its column sums over the group's rows. ColSum:
/// also the chunk's column sums of dx as stored (the bias gradient of the
/// Linear layer dx flows into) at scratch[2 chunks + chunk, col].
template <class T, class W, int S, int P, bool Rms, bool HasW, bool ColSum>
__global__ void __launch_bounds__(kFusedWarps * 32, fusedBlocksPerSm<T, S, Rms>())
    normBackwardFusedKernel(const T *__restrict__ dy, const T *__restrict__ x,
                            const W *__restrict__ weight, const float *__restrict__ meanIn,
                            const float *__restrict__ rstdIn, T *dx, float *__restrict__ scratch,
                            int64_t rows, int64_t cols, int64_t chunks, int64_t chunkRows,
                            const T *addTo, bool wantW, bool wantB) {
  static_assert(P == 1 || P == 2 || P == 4, "a row over 1, 2 or 4 warps");
  constexpr int kGroups = kFusedWarps / P; // rows the block works on at once
  __shared__ __align__(16) float sums[kFusedWarps][S * kStretch]; // one quantity per warp
  // A row's two sums, one pair per warp, double-buffered by row parity: a
  // warp writes row n's pair only after every warp of its group has passed
  // row n - 1's barrier, so after they read row n - 2's.
  __shared__ float2 rowSums[P > 1 ? 2 : 1][kFusedWarps];
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = warp / P;
  const int64_t base = static_cast<int64_t>(warp % P) * S * kStretch; // the warp's first column
  int64_t chunk = blockIdx.x;
  int64_t r0 = chunk * chunkRows;
  int64_t r1 = min(rows, r0 + chunkRows);
  wantB = wantB && !Rms;
  float dw[S][8], db[S][8]; // the lane's column sums over the group's rows
  // ColSum: the lane's sums of dx as stored, kept in its own slots of `sums`
  // (idle until storeChunkSums; registers for them would halve the blocks an
  // SM holds: 178 registers a thread for bf16 layer_norm at 768).
  float(&dsAcc)[kFusedWarps][S * kStretch] = sums;
#pragma unroll
  for (int s = 0; s < S; ++s)
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      dw[s][j] = db[s][j] = 0.0f;
      if constexpr (ColSum)
        dsAcc[warp][s * kStretch + lane * 8 + j] = 0.0f;
    }
  // Stretch s of a held row: xhat, g = dy * w and dy (g and dy 0 past cols).
  auto rowAt = [&](const Packed8<T> &xp, const Packed8<T> &dyp, int s, float mean, float rstd,
                   float (&xhat)[8], float (&g)[8], float (&d)[8]) {
    int64_t i = base + s * kStretch + lane * 8;
    float w[8] = {}; // 0 past cols: g must be 0 there (0 * an unset register can be NaN)
    unpack8(xp, xhat);
    unpack8(dyp, d);
    if (HasW && i < cols)
      loadRow8<W, true>(weight, i, cols, w, 0.0f);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      xhat[j] = (xhat[j] - mean) * rstd;
      g[j] = HasW ? d[j] * w[j] : d[j];
    }
  };
  int parity = 0;
#pragma unroll 1
  for (int64_t r = r0 + group; r < r1; r += kGroups) {
    const T *xr = x + r * cols, *dyr = dy + r * cols;
    float mean = Rms ? 0.0f : meanIn[r], rstd = rstdIn[r];
    Packed8<T> xp[S], dyp[S];
#pragma unroll
    for (int s = 0; s < S; ++s) {
      int64_t i = base + s * kStretch + lane * 8;
      if (i < cols) {
        loadPacked8(xr + i, xp[s]);
        loadPacked8(dyr + i, dyp[s]);
      } else {
        zeroPacked8(xp[s]);
        zeroPacked8(dyp[s]);
      }
    }
    float sumG = 0.0f, sumGX = 0.0f;
#pragma unroll
    for (int s = 0; s < S; ++s) {
      float xhat[8], g[8], d[8];
      rowAt(xp[s], dyp[s], s, mean, rstd, xhat, g, d);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        dw[s][j] += d[j] * xhat[j];
        db[s][j] += d[j];
        sumG += g[j];
        sumGX += g[j] * xhat[j];
      }
    }
    if (!dx)
      continue;
    T *dxr = dx + r * cols;
    Packed8<T> dxp[S]; // the row to add to, loaded before the reductions wait
    if (addTo)
#pragma unroll
      for (int s = 0; s < S; ++s) {
        int64_t i = base + s * kStretch + lane * 8;
        if (i < cols)
          loadPacked8(addTo + r * cols + i, dxp[s]);
      }
#pragma unroll
    for (int s = 0; s < S; ++s) {
      launder(xp[s]);
      launder(dyp[s]);
    }
    float rowG = Rms ? 0.0f : warpSum(sumG), rowGX = warpSum(sumGX);
    if constexpr (P > 1) {
      // The group's warps' sums, added in warp order.
      if (lane == 0)
        rowSums[parity][warp] = make_float2(rowG, rowGX);
      asm volatile("bar.sync %0, %1;" ::"r"(1 + group), "r"(P * 32) : "memory");
      float2 t = rowSums[parity][group * P];
#pragma unroll
      for (int w = 1; w < P; ++w) {
        float2 u = rowSums[parity][group * P + w];
        t.x += u.x, t.y += u.y;
      }
      rowG = t.x, rowGX = t.y;
      parity ^= 1;
    }
    float meanG = Rms ? 0.0f : rowG / static_cast<float>(cols);
    float meanGX = rowGX / static_cast<float>(cols);
#pragma unroll
    for (int s = 0; s < S; ++s) {
      int64_t i = base + s * kStretch + lane * 8;
      if (i >= cols)
        continue;
      float xhat[8], g[8], d[8], o[8];
      rowAt(xp[s], dyp[s], s, mean, rstd, xhat, g, d);
      if (addTo)
        unpack8(dxp[s], o);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float v = rstd * (g[j] - meanG - xhat[j] * meanGX);
        o[j] = addTo ? o[j] + v : v;
      }
      storeRow8<T, true>(dxr, i, cols, o);
      if constexpr (ColSum) {
        float4 *acc = reinterpret_cast<float4 *>(&dsAcc[warp][s * kStretch + lane * 8]);
        float4 a = acc[0], b = acc[1];
        a.x += toF(fromF<T>(o[0]));
        a.y += toF(fromF<T>(o[1]));
        a.z += toF(fromF<T>(o[2]));
        a.w += toF(fromF<T>(o[3]));
        b.x += toF(fromF<T>(o[4]));
        b.y += toF(fromF<T>(o[5]));
        b.z += toF(fromF<T>(o[6]));
        b.w += toF(fromF<T>(o[7]));
        acc[0] = a;
        acc[1] = b;
      }
    }
  }
  float ds[ColSum ? S : 1][8]; // read back before storeChunkSums writes `sums`
  if constexpr (ColSum)
#pragma unroll
    for (int s = 0; s < S; ++s)
#pragma unroll
      for (int j = 0; j < 8; ++j)
        ds[s][j] = dsAcc[warp][s * kStretch + lane * 8 + j];
  if (wantW)
    storeChunkSums<S, P>(sums, dw, scratch + chunk * cols, cols);
  if (wantB)
    storeChunkSums<S, P>(sums, db, scratch + (chunks + chunk) * cols, cols);
  if constexpr (ColSum)
    storeChunkSums<S, P>(sums, ds, scratch + (2 * chunks + chunk) * cols, cols);
}

/// scratch[chunk, col] = sum over the chunk's rows of dy * xhat (and, for
/// layer_norm with dbias, scratch[chunks + chunk, col] = sum of dy).
template <class T, bool Rms>
__global__ void __launch_bounds__(kColThreads)
    normBackwardPartialKernel(const T *__restrict__ dy, const T *__restrict__ x,
                              const float *__restrict__ meanIn, const float *__restrict__ rstdIn,
                              float *__restrict__ scratch, int64_t rows, int64_t cols,
                              int64_t chunks, int64_t chunkRows, bool wantW, bool wantB) {
  int64_t col = static_cast<int64_t>(blockIdx.x) * kColThreads + threadIdx.x;
  int64_t chunk = blockIdx.y;
  if (col >= cols)
    return;
  int64_t r0 = chunk * chunkRows;
  int64_t r1 = min(rows, r0 + chunkRows);
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

/// out[col] (+)= sum over chunks of part[chunk, col] for the 32 columns of
/// the block, with (part, out) = (part, dweight) for blockIdx.y 0 and
/// (part + chunks * cols, dbias) for 1 (nothing for a null out). Warp w sums
/// its run of chunks [w n, w n + n) in chunk order, then the runs' sums are
/// added in warp order: a fixed order, independent of scheduling.
template <class T>
__global__ void __launch_bounds__(kSumWarps * 32)
    sumChunksKernel(const float *__restrict__ part, T *dweight, T *dbias, int64_t chunks,
                    int64_t cols, bool accumulate) {
  __shared__ float runs[kSumWarps][32];
  T *out = blockIdx.y == 0 ? dweight : dbias;
  if (!out) // the whole block
    return;
  part += blockIdx.y * chunks * cols;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int64_t col = static_cast<int64_t>(blockIdx.x) * 32 + lane;
  int64_t n = (chunks + kSumWarps - 1) / kSumWarps;
  int64_t c0 = warp * n, c1 = min(chunks, c0 + n);
  float s = 0.0f;
  if (col < cols) {
#pragma unroll 8
    for (int64_t c = c0; c < c1; ++c)
      s += part[c * cols + col];
  }
  runs[warp][lane] = s;
  __syncthreads();
  if (warp != 0 || col >= cols)
    return;
  s = runs[0][lane];
#pragma unroll
  for (int w = 1; w < kSumWarps; ++w)
    s += runs[w][lane];
  if (accumulate)
    s += toF(out[col]);
  out[col] = fromF<T>(s);
}

/// normBackwardFusedKernel for a row of `stretches` (1 to kMaxRowWarps *
/// kMaxStretches): one warp's up to 3 (the rows of 64-row chunks,
/// normBackwardChunkRows), else 2 warps of 2 stretches (4), 4 of 2 (up to 8:
/// two blocks an SM, where 4 stretches a warp hold ~205 registers a thread)
/// or 4 of kMaxStretches.
template <class T, class W, bool Rms, bool HasW, bool ColSum>
auto fusedBackwardKernel(int64_t stretches) {
  return stretches == 1   ? normBackwardFusedKernel<T, W, 1, 1, Rms, HasW, ColSum>
         : stretches == 2 ? normBackwardFusedKernel<T, W, 2, 1, Rms, HasW, ColSum>
         : stretches == 3 ? normBackwardFusedKernel<T, W, 3, 1, Rms, HasW, ColSum>
         : stretches == 4 ? normBackwardFusedKernel<T, W, 2, 2, Rms, HasW, ColSum>
         : stretches <= 8 ? normBackwardFusedKernel<T, W, 2, 4, Rms, HasW, ColSum>
                          : normBackwardFusedKernel<T, W, kMaxStretches, 4, Rms, HasW, ColSum>;
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
    const int64_t stretches = ceilDiv(cols, kStretch);
    auto kernel = bits ? forwardKernel<T, W, Rms, true>(vec, stretches)
                       : forwardKernel<T, W, Rms, false>(vec, stretches);
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
                    cudaStream_t stream, const void *dresidual, void *colSum) {
  TC_RETURN_IF_ERROR(checkRows(what, rows, cols));
  if (dresidual && (accumulate || !dx))
    return invalidArgument(std::string(what) + ": dresidual takes a dx and no accumulate");
  if (colSum && (accumulate || !dx))
    return invalidArgument(std::string(what) + ": dx's column sums take a dx and no accumulate");
  if (cols == 0)
    return Status::ok();
  if (rows == 0)
    return colSum ? fillBuffer(colSum, dtypeStorageBytes(dt), 0, cols, stream)
                  : Status::ok();
  if (!dy || !x || !rstd || (!Rms && !mean))
    return invalidArgument(std::string(what) + ": null dy, x, mean or rstd");
  bool wantW = weight && dweight, wantB = dbias != nullptr;
  if (!dx && !wantW && !wantB)
    return Status::ok();
  if ((wantW || wantB || colSum) && !scratch)
    return invalidArgument(std::string(what) +
                           ": parameter gradients and column sums need scratch");
  const int64_t chunkRows = normBackwardChunkRows(cols);
  int64_t chunks = ceilDiv(rows, chunkRows);
  if (chunks > 65535)
    return invalidArgument(std::string(what) + ": more than 65535 chunks of rows");
  bool vec = rowsVectorisable(cols, {dy, x, weight, dx, dresidual});
  int64_t stretches = ceilDiv(cols, kStretch);
  bool fused = vec && stretches <= kMaxRowWarps * kMaxStretches;
  return dispatchNorm(dt, pt, what, [&](auto tag, auto ptag) -> Status {
    using T = decltype(tag);
    using W = decltype(ptag);
    auto *dys = static_cast<const T *>(dy);
    auto *xs = static_cast<const T *>(x);
    auto *ws = static_cast<const W *>(weight);
    auto *dxs = static_cast<T *>(dx);
    // The rows dx adds to: its own (accumulate) or the residual's gradient.
    const T *addTo = accumulate ? dxs : static_cast<const T *>(dresidual);
    float *part = static_cast<float *>(scratch);
    float *sumPart = part + 2 * chunks * cols; // dx's column sums (colSum)
    if (fused) {
      auto kernel = colSum ? (weight ? fusedBackwardKernel<T, W, Rms, true, true>(stretches)
                                     : fusedBackwardKernel<T, W, Rms, false, true>(stretches))
                           : (weight ? fusedBackwardKernel<T, W, Rms, true, false>(stretches)
                                     : fusedBackwardKernel<T, W, Rms, false, false>(stretches));
      kernel<<<static_cast<unsigned>(chunks), kFusedWarps * 32, 0, stream>>>(
          dys, xs, ws, mean, rstd, dxs, part, rows, cols, chunks, chunkRows, addTo, wantW, wantB);
      TC_RETURN_IF_ERROR(checkLaunch(Rms ? "rms_norm_backward" : "layer_norm_backward"));
      if (colSum)
        TC_RETURN_IF_ERROR(sumColumnPartials(dt, sumPart, chunks, cols, colSum, stream));
    } else {
      if (dx) {
        dim3 grid(static_cast<unsigned>(ceilDiv(rows, kRowsPerBlock)));
        if (vec)
          normBackwardDxKernel<T, W, true, Rms><<<grid, kRowsPerBlock * 32, 0, stream>>>(
              dys, xs, ws, mean, rstd, dxs, rows, cols, addTo);
        else
          normBackwardDxKernel<T, W, false, Rms><<<grid, kRowsPerBlock * 32, 0, stream>>>(
              dys, xs, ws, mean, rstd, dxs, rows, cols, addTo);
        TC_RETURN_IF_ERROR(checkLaunch(Rms ? "rms_norm_backward_dx" : "layer_norm_backward_dx"));
        if (colSum) // a pass over dx as stored
          TC_RETURN_IF_ERROR(columnSums(dt, dx, rows, cols, colSum, sumPart,
                                        static_cast<size_t>(chunks * cols) * sizeof(float),
                                        stream));
      }
      if (wantW || wantB) {
        unsigned colBlocks = static_cast<unsigned>(ceilDiv(cols, kColThreads));
        normBackwardPartialKernel<T, Rms>
            <<<dim3(colBlocks, static_cast<unsigned>(chunks)), kColThreads, 0, stream>>>(
                dys, xs, mean, rstd, part, rows, cols, chunks, chunkRows, wantW, wantB);
        TC_RETURN_IF_ERROR(checkLaunch("norm_backward_partial"));
      }
    }
    if (!wantW && !wantB)
      return Status::ok();
    dim3 grid(static_cast<unsigned>(ceilDiv(cols, 32)), wantB ? 2u : 1u);
    sumChunksKernel<W>
        <<<grid, kSumWarps * 32, 0, stream>>>(part, wantW ? static_cast<W *>(dweight) : nullptr,
                                              static_cast<W *>(dbias), chunks, cols, accumulate);
    return checkLaunch("norm_backward_sum_chunks");
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
                         cudaStream_t stream, const void *dresidual, void *colSum) {
  return normBackward<false>("layerNormBackward", dt, pt, dy, x, weight, mean, rstd, dx, dweight,
                             dbias, scratch, rows, cols, accumulate, stream, dresidual, colSum);
}

Status rmsNormBackward(DType dt, DType pt, const void *dy, const void *x, const void *weight,
                       const float *rstd, void *dx, void *dweight, void *scratch, int64_t rows,
                       int64_t cols, bool accumulate, cudaStream_t stream,
                       const void *dresidual, void *colSum) {
  return normBackward<true>("rmsNormBackward", dt, pt, dy, x, weight, nullptr, rstd, dx, dweight,
                            nullptr, scratch, rows, cols, accumulate, stream, dresidual, colSum);
}

} // namespace tc::rt::cuda
