//===- attention_tiles.cuh - device helpers of the tensor-core attention -===//
//
// Internal to runtime/src/cuda/kernels: the pieces both tensor-core paths
// share (attention_flash.cu, FlashAttention-2 on mma.sync, and
// attention_wgmma.cu, the sm_90a warpgroup kernels): cp.async copies, the
// fp32 -> 16-bit packing of C fragments into A fragments, the stores of
// C-fragment rows, and the backward's P / dS arithmetic. Both paths hold
// their S, dP and output accumulators in the m16n8 C-fragment layout
// (wgmma's m64nN accumulators are four warps' m16 slices of it), so one
// definition serves both.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_CUDA_KERNELS_ATTENTION_TILES_CUH
#define TC_RUNTIME_CUDA_KERNELS_ATTENTION_TILES_CUH

#include <cstdint>
#include <type_traits>

#include "runtime/src/cuda/kernels/attention.cuh"

namespace tc::rt::cuda::attn {

using namespace kern;

constexpr float kLn2 = 0.6931471805599453f;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define TC_ATTN_NO_MMA 1
#endif

__device__ __forceinline__ uint32_t smemAddr(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// 16 bytes global -> shared, asynchronous; zero-fills when !valid (src is
/// then not read).
__device__ __forceinline__ void cpAsync16(uint32_t dst, const void *src, bool valid) {
#ifndef TC_ATTN_NO_MMA
  int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes)
               : "memory");
#endif
}
/// 4 bytes global -> shared, asynchronous; zero-fills when !valid.
__device__ __forceinline__ void cpAsync4(uint32_t dst, const void *src, bool valid) {
#ifndef TC_ATTN_NO_MMA
  int bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void cpAsyncCommit() {
#ifndef TC_ATTN_NO_MMA
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void cpAsyncWaitAll() {
#ifndef TC_ATTN_NO_MMA
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}

/// Two floats rounded (to nearest even) to T, lo in the low half.
template <class T> __device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, f16>) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
  } else {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
  }
}

/// The A fragment (16 rows x 16 along k) made of the C fragments of two
/// adjacent n8 tiles: the probabilities of 16 keys feed the next mma.
template <class T>
__device__ __forceinline__ void cToA(uint32_t (&a)[4], const float (&c0)[4], const float (&c1)[4]) {
  a[0] = pack2<T>(c0[0], c0[1]);
  a[1] = pack2<T>(c0[2], c0[3]);
  a[2] = pack2<T>(c1[0], c1[1]);
  a[3] = pack2<T>(c1[2], c1[3]);
}

constexpr int kThreads = 128; // 4 warps

/// Copies n fp32 values v[r0, r0 + n) (zero past `rows`) into sm[n].
template <int N>
__device__ __forceinline__ void loadVec(float *sm, const float *g, int r0, int rows) {
  static_assert(N <= kThreads, "vector longer than the block");
  int r = threadIdx.x;
  if (r < N) {
    bool valid = r0 + r < rows;
    cpAsync4(smemAddr(sm + r), valid ? g + r0 + r : g, valid);
  }
}

template <int N> __device__ __forceinline__ void zero(float (&c)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    c[i][0] = c[i][1] = c[i][2] = c[i][3] = 0.0f;
}

/// Stores rows r and r + 8 (C fragment layout, 16 x D) scaled per row into
/// a bf16 [rows, D] operand with row stride rs, rows < rows only.
/// With `amax`, the max |x| (f32, before rounding) of what it stored is
/// folded into *amax (the kernel's blockAmax takes it at its end).
template <int D, class T>
__device__ __forceinline__ void storeRows(T *g, int64_t rs, int r, int rows,
                                          const float (&c)[D / 8][4], float s0, float s1,
                                          float *amax = nullptr) {
  int t = threadIdx.x % 4;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    int row = r + half * 8;
    if (row >= rows)
      continue;
    float sc = half ? s1 : s0;
    T *p = g + static_cast<int64_t>(row) * rs + 2 * t;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      float a = c[j][2 * half] * sc, b = c[j][2 * half + 1] * sc;
      *reinterpret_cast<uint32_t *>(p + j * 8) = pack2<T>(a, b);
      if (amax)
        *amax = fmaxf(*amax, fmaxf(fabsf(a), fabsf(b)));
    }
  }
}

/// AttentionGradRotary in registers (FastParams::rotOf): rotates rows r and
/// r + 8 (C fragment layout, 16 x D; rows at or past `rows` are left) by
/// the tables cos / sin [batch, rows, 8 H8], their rows from tableRow0 (b
/// rows): the pair (k, k + 8 H8) with k in n-tile j (columns 8 j + 2 t, + 1)
/// has its partner in the same thread's n-tile j + H8.
template <int D, int H8, class T>
__device__ __forceinline__ void rotateRowsBy(float (&c)[D / 8][4], const T *cos, const T *sin,
                                             int64_t tableRow0, int r, int rows) {
  static_assert(2 * 8 * H8 <= D, "the rotated pairs fit the head");
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int row = r + hr * 8;
    if (row >= rows)
      continue;
    const int64_t base = (tableRow0 + row) * (8 * H8) + 2 * t;
#pragma unroll
    for (int j = 0; j < H8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float cs = kern::toF(cos[base + 8 * j + e]), sn = kern::toF(sin[base + 8 * j + e]);
        const float x1 = c[j][2 * hr + e], x2 = c[j + H8][2 * hr + e];
        c[j][2 * hr + e] = cs * x1 - sn * x2;
        c[j + H8][2 * hr + e] = sn * x1 + cs * x2;
      }
  }
}
/// rotateRowsBy for half = 8 H8 (a multiple of 8, 2 half <= D).
template <int D, int H8 = 1, class T>
__device__ __forceinline__ void rotateRows(float (&c)[D / 8][4], const T *cos, const T *sin,
                                           int half, int64_t tableRow0, int r, int rows) {
  if (half == 8 * H8)
    rotateRowsBy<D, H8>(c, cos, sin, tableRow0, r, rows);
  else if constexpr (2 * 8 * (H8 + 1) <= D)
    rotateRows<D, H8 + 1>(c, cos, sin, half, tableRow0, r, rows);
}

/// blockIdx.x and threadIdx.x read afresh where called (volatile: neither
/// hoisted nor kept live across the kernel's loops): an epilogue that needs
/// them costs the main loop no registers.
__device__ __forceinline__ unsigned freshBlockIdx() {
  unsigned v;
  asm volatile("mov.u32 %0, %%ctaid.x;\n" : "=r"(v));
  return v;
}
__device__ __forceinline__ int freshThreadIdx() {
  unsigned v;
  asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(v));
  return static_cast<int>(v);
}

/// The column sums (AttentionGradSums) of the rows the block stores with
/// storeRows: warp w's m16 tiles c[m] hold rows row0 + 16 m + g (+ 8) (row0:
/// the warp's first row), those < rows stored as c * scale rounded to T; the
/// sums are of the f32 values before that rounding (times scale once, after
/// the sum: within T's rounding of the stored values' sums, and ~half the
/// instructions of rounding each value first). Each thread adds its rows in
/// order, the 8 row groups of a warp are added by a fixed butterfly, the 4
/// warps in order: the f32 sums go to out[0, D). Every thread of the block
/// calls it (two barriers); smem (4 D floats) is free to overwrite once all
/// warps are past their products.
template <int D, int MW>
__device__ __forceinline__ void blockColumnSums(const float (&c)[MW][D / 8][4], float scale,
                                                int row0, int rows, float *smem, float *out) {
  const int tid = freshThreadIdx(), warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  float cs[D / 8][2];
#pragma unroll
  for (int j = 0; j < D / 8; ++j)
    cs[j][0] = cs[j][1] = 0.0f;
#pragma unroll
  for (int m = 0; m < MW; ++m)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      if (row0 + 16 * m + g + 8 * half >= rows)
        continue;
#pragma unroll
      for (int j = 0; j < D / 8; ++j) {
        cs[j][0] += c[m][j][2 * half];
        cs[j][1] += c[m][j][2 * half + 1];
      }
    }
#pragma unroll
  for (int j = 0; j < D / 8; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
#pragma unroll
      for (int x = 4; x < 32; x *= 2)
        cs[j][e] += __shfl_xor_sync(0xffffffffu, cs[j][e], x);
      cs[j][e] *= scale;
    }
  __syncthreads(); // smem's earlier readers are done
  if (g == 0)
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      smem[warp * D + 8 * j + 2 * t] = cs[j][0];
      smem[warp * D + 8 * j + 2 * t + 1] = cs[j][1];
    }
  __syncthreads();
  for (int col = tid; col < D; col += kThreads)
    out[col] = ((smem[col] + smem[D + col]) + smem[2 * D + col]) + smem[3 * D + col];
}

/// The per-query statistic (lse * log2(e) or D) of accumulator element
/// [m][j][e]: the dQ kernel's tile is S (rows are queries, so x is [MW][2],
/// one per row half), the dK/dV kernel's is S^T (Transposed: columns are
/// queries, x is [SUB / 8][2], one per column pair).
template <bool Transposed, class X>
__device__ __forceinline__ float queryStat(const X &x, int m, int j, int e) {
  if constexpr (Transposed)
    return x[j][e & 1];
  else
    return x[m][e >> 1];
}

/// P = exp2(S * scale * log2(e) - lse * log2(e)) in place over a warp's
/// MW x SUB sub-tile, then, on edge sub-tiles (`mask`), P = 0 past the
/// tensor (keys past tk, or queries past tq when Transposed) and where the
/// key is right of the query (causal). Rows start at row0 + 16 m + g (+ 8),
/// columns at col0 + 8 j + 2 t (+ 1); rows are queries and columns keys, or
/// the other way round when Transposed. Both backward kernels run it, so
/// their P and dS are computed the same way.
template <int MW, int SUB, bool Transposed, class L, class T>
__device__ __forceinline__ void maskAndExp(float (&s)[MW][SUB / 8][4], const L &l2,
                                           const FastParams<T> &p, bool mask, int row0, int col0,
                                           int g, int t) {
#pragma unroll
  for (int m = 0; m < MW; ++m)
#pragma unroll
    for (int j = 0; j < SUB / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        s[m][j][e] = exp2Ftz(s[m][j][e] * p.scaleLog2 - queryStat<Transposed>(l2, m, j, e));
  if (mask) {
#pragma unroll
    for (int m = 0; m < MW; ++m)
#pragma unroll
      for (int j = 0; j < SUB / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          int col = col0 + j * 8 + 2 * t + (e & 1), row = row0 + m * 16 + g + (e >> 1) * 8;
          if ((Transposed ? col >= p.tq : col >= p.tk) ||
              (p.causal && (Transposed ? row > col : col > row)))
            s[m][j][e] = 0.0f;
        }
  }
}

/// maskAndExp's key-masked form (every sub-tile): P = 0 past the tensor,
/// where the key is right of the query (causal) or hidden by `keys` (the
/// batch's row of p.keys); the queries before `avg` (averagedRows) take
/// every key with its averagedRaw score instead. Transposed (rows are the
/// warp's keys, the same every sub-tile): `rowVis` holds whether key row
/// 16 m + g + 8 h is visible (and < tk) at bit 2 m + h (keyRowBits), and
/// `keys` is not read.
template <int MW, int SUB, bool Transposed, class L, class T>
__device__ __forceinline__ void maskAndExpKeys(float (&s)[MW][SUB / 8][4], const L &l2,
                                               const FastParams<T> &p, const uint8_t *keys,
                                               uint32_t rowVis, int avg, int row0, int col0, int g,
                                               int t) {
  // Branch-free: a clamped key index for the loads; the averaged rows'
  // scores only where the sub-tile holds such a query (its first one is
  // col0 when Transposed, else row0).
  const bool anyAveraged = (Transposed ? col0 : row0) < avg;
  auto tile = [&](auto averaged) {
#pragma unroll
    for (int m = 0; m < MW; ++m)
#pragma unroll
      for (int j = 0; j < SUB / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = col0 + j * 8 + 2 * t + (e & 1), row = row0 + m * 16 + g + (e >> 1) * 8;
          const int query = Transposed ? col : row, key = Transposed ? row : col;
          const bool inRange = query < p.tq && key < p.tk;
          bool visible;
          if constexpr (Transposed)
            visible = (rowVis >> (2 * m + (e >> 1))) & 1;
          else
            visible = keys[key < p.tk ? key : p.tk - 1] != 0; // always loaded: no branch
          visible = visible & !(p.causal & (key > query));
          float x = s[m][j][e];
          bool live = inRange && visible;
          if constexpr (decltype(averaged)::value) {
            const bool av = query < avg;
            x = av ? averagedRaw(x, p.scale, p.invScale, p.fill) : x;
            live = inRange && (av || visible);
          }
          s[m][j][e] =
              live ? exp2Ftz(x * p.scaleLog2 - queryStat<Transposed>(l2, m, j, e)) : 0.0f;
        }
  };
  if (anyAveraged)
    tile(std::true_type{});
  else
    tile(std::false_type{});
}

/// maskAndExpKeys' rowVis of the key rows row0 + 16 m + g (+ 8).
template <int MW, class T>
__device__ __forceinline__ uint32_t keyRowBits(const FastParams<T> &p, const uint8_t *keys,
                                               int row0, int g) {
  uint32_t bits = 0;
#pragma unroll
  for (int m = 0; m < MW; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      int key = row0 + 16 * m + g + 8 * h;
      if (key < p.tk && keys[key] != 0)
        bits |= 1u << (2 * m + h);
    }
  return bits;
}

/// The visible keys of batch b lie in [first, end) (first = tk, end = 0
/// when none is), every one of them visible when *dense (left or right
/// padding; not a mask with holes): computed by the whole block, every
/// thread calls it (it synchronises).
template <class T>
__device__ __forceinline__ void visibleKeyRange(const FastParams<T> &p, int b, int *first,
                                                int *end, bool *dense) {
  __shared__ int lo, hi, count;
  if (threadIdx.x == 0)
    lo = p.tk, hi = 0, count = 0;
  __syncthreads();
  const uint8_t *m = p.keys + static_cast<int64_t>(b) * p.tk;
  int f = p.tk, e = 0, n = 0;
  for (int j = threadIdx.x; j < p.tk; j += blockDim.x)
    if (m[j] != 0) {
      f = min(f, j);
      e = j + 1;
      ++n;
    }
  if (f < p.tk) {
    atomicMin(&lo, f);
    atomicMax(&hi, e);
    atomicAdd(&count, n);
  }
  __syncthreads();
  *first = lo, *end = hi;
  *dense = count == max(hi - lo, 0);
}

/// A key-masked block's view of batch b: its row of p.keys, the span
/// [first, end) of its visible keys and the rows that attend to every key
/// (averagedRows). Without KeyMask: every key, no such row.
struct KeyMaskRows {
  const uint8_t *keys = nullptr;
  int first = 0, end = INT32_MAX, avg = 0;
  bool dense = true;
  template <bool KeyMask, class T>
  __device__ __forceinline__ static KeyMaskRows of(const FastParams<T> &p, int b) {
    KeyMaskRows r;
    if constexpr (KeyMask) {
      r.keys = p.keys + static_cast<int64_t>(b) * p.tk;
      visibleKeyRange(p, b, &r.first, &r.end, &r.dense);
      r.avg = averagedRows(r.first, p.tq, p.tk, p.causal, p.fill);
    }
    return r;
  }
  /// The key tiles [*begin, *end) of `bk` keys a block of queries from q0
  /// visits, of the `n` it would without a mask: those holding visible
  /// keys, or all n when some of its rows attend to every key.
  __device__ __forceinline__ void keyTiles(int q0, int bk, int n, int *begin, int *endTile) const {
    *begin = 0, *endTile = n;
    if (avg > q0)
      return;
    *begin = min(first / bk, n);
    *endTile = min(n, (end + bk - 1) / bk);
  }
  /// Whether a tile of the keys [k0, k1) and the queries from q0 on needs
  /// the key mask: unless every one of its keys is visible (inside a dense
  /// [first, end)) and none of its queries attends to every key, the tile
  /// takes the causal / length masks alone, as without a key mask (a padded
  /// batch's interior tiles).
  __device__ __forceinline__ bool needsKeys(int k0, int k1, int q0) const {
    return !dense || k0 < first || k1 > end || q0 < avg;
  }
  /// Whether the keys [k0, k1) are hidden from every query that does not
  /// attend to every key (before the first or after the last visible key).
  __device__ __forceinline__ bool hiddenKeys(int k0, int k1) const {
    return k1 <= first || k0 >= end;
  }
};

/// dS = P (dP - D) in place of dP (D per query, as queryStat reads it).
template <int MW, int SUB, bool Transposed, class X>
__device__ __forceinline__ void dsFromP(float (&dp)[MW][SUB / 8][4],
                                        const float (&s)[MW][SUB / 8][4], const X &dd) {
#pragma unroll
  for (int m = 0; m < MW; ++m)
#pragma unroll
    for (int j = 0; j < SUB / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        dp[m][j][e] = s[m][j][e] * (dp[m][j][e] - queryStat<Transposed>(dd, m, j, e));
}


/// A forward or dQ block: its (batch, head), kv head and first query row.
/// blockIdx.x enumerates the batch * heads pairs of each query block, the
/// last query blocks (with the most keys when causal) first.
struct QueryBlock {
  int bh, b, h, kvh, q0;
  /// Block bx's (blockIdx.x by default).
  template <class T>
  __device__ __forceinline__ QueryBlock(const FastParams<T> &p, int rows,
                                        unsigned bx = blockIdx.x) {
    const int bhCount = p.batch * p.heads, nQB = (p.tq + rows - 1) / rows;
    bh = bx % bhCount;
    q0 = (nQB - 1 - bx / bhCount) * rows;
    b = bh / p.heads, h = bh % p.heads, kvh = h / p.group;
  }
  /// The block's head of q and kv head of k and v.
  template <class T> __device__ __forceinline__ const T *q(const FastParams<T> &p) const {
    return p.q + b * p.qs.batch + h * p.qs.head;
  }
  template <class T> __device__ __forceinline__ const T *k(const FastParams<T> &p) const {
    return p.k + b * p.ks.batch + kvh * p.ks.head;
  }
  template <class T> __device__ __forceinline__ const T *v(const FastParams<T> &p) const {
    return p.v + b * p.vs.batch + kvh * p.vs.head;
  }
  /// The key tiles of `bk` keys the block's `rows` queries see (all of
  /// them, or up to the last row's diagonal when causal and not `all`: a
  /// block with rows that attend to every key).
  template <class T>
  __device__ __forceinline__ int keyTiles(const FastParams<T> &p, int rows, int bk,
                                          bool all = false) const {
    int n = (p.tk + bk - 1) / bk;
    return p.causal && !all ? min(n, (min(q0 + rows, p.tq) - 1) / bk + 1) : n;
  }
};

/// The block of the dK/dV kernels: grid ceil(tk / rows) * batch * kvHeads,
/// the first key blocks (the most work when causal) first; block bx's
/// (blockIdx.x by default) batch, kv head and key block.
struct KeyBlock {
  int b, kvh, kb;
  template <class T>
  __device__ __forceinline__ explicit KeyBlock(const FastParams<T> &p, unsigned bx = blockIdx.x) {
    const int bkvCount = p.batch * p.kvHeads, bkv = bx % bkvCount;
    kb = bx / bkvCount, b = bkv / p.kvHeads, kvh = bkv % p.kvHeads;
  }
};

/// D = rowsum(dout * out) of the BQ query rows from q0, kThreads / BQ
/// threads a row, each summing a fixed part of its columns in a fixed order
/// (the same bits run to run): load() reads this thread's part of out from
/// global memory (issued before the wait for the dout tile); store() reads
/// dout through at(row, col) (8 contiguous elements of the shared tile) and
/// writes D to sDD[row] and p.dd.
template <int D, int BQ, class T> struct RowsumDoutOut {
  static constexpr int kTpr = kThreads / BQ, kCols = D / kTpr;
  static_assert(kThreads % BQ == 0 && kCols % 8 == 0, "D split");
  int dRow = threadIdx.x / kTpr, dCol = threadIdx.x % kTpr * kCols;
  bool dValid = false;
  int4 oRaw[kCols / 8];

  __device__ __forceinline__ void load(const FastParams<T> &p, int b, int h, int q0) {
    dValid = q0 + dRow < p.tq;
    const T *o = p.o + b * p.os.batch + h * p.os.head +
                 static_cast<int64_t>(dValid ? q0 + dRow : 0) * p.os.row + dCol;
#pragma unroll
    for (int c = 0; c < kCols / 8; ++c)
      oRaw[c] = dValid ? *reinterpret_cast<const int4 *>(o + c * 8) : make_int4(0, 0, 0, 0);
  }

  template <class At>
  __device__ __forceinline__ void store(const FastParams<T> &p, int bh, int q0, float *sDD,
                                        At at) {
    float part[2] = {0.0f, 0.0f};
#pragma unroll
    for (int c = 0; c < kCols / 8; ++c) {
      float x[8], y[8];
      load8(reinterpret_cast<const T *>(&oRaw[c]), x);
      load8(at(dRow, dCol + c * 8), y);
#pragma unroll
      for (int i = 0; i < 8; ++i)
        part[c % 2] = fmaf(x[i], y[i], part[c % 2]);
    }
    float acc = part[0] + part[1];
#pragma unroll
    for (int off = 1; off < kTpr; off *= 2)
      acc += __shfl_xor_sync(kFullMask, acc, off);
    if (threadIdx.x % kTpr == 0) {
      sDD[dRow] = acc;
      if (dValid)
        p.dd[static_cast<int64_t>(bh) * p.tq + q0 + dRow] = acc;
    }
  }
};

/// Launches `kernel` (kThreads threads a block) over `blocks` blocks with
/// `smem` bytes of dynamic shared memory, raising the limit past 48 KiB.
template <class Kernel, class T>
Status launchFast(Kernel kernel, const char *name, int64_t blocks, int smem,
                  const FastParams<T> &p, cudaStream_t stream) {
  if (smem > 48 * 1024)
    TC_CUDA_RETURN_IF_ERROR(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  kernel<<<static_cast<unsigned>(blocks), kThreads, smem, stream>>>(p);
  return checkLaunch(name);
}

//===----------------------------------------------------------------------===//
// The forward's online softmax (both paths' forward kernels)
//===----------------------------------------------------------------------===//

/// One key tile of the forward's online softmax over a warp's 16 query rows
/// (row0 = qw + g and row0 + 8; C fragments): S (BK keys from k0) becomes P in
/// place (scale * log2(e) folded in, masked past tk and right of the row when
/// causal, on edge tiles only), the running max m and sum l of the two rows
/// (m in the scaled, log2 domain) are updated and o, the output accumulator,
/// is rescaled to the new max. The scale is positive (attention.cu sends
/// others to the generic path), so the max is taken over the raw scores and
/// each score costs a max, one FFMA (s * scale * log2(e) - max) and one
/// MUFU.EX2 (exp2Ftz). With KeyMask every tile is masked as maskAndExpKeys
/// masks (`km`: the batch's key row and its rows that attend to every key).
/// With Defer, o is left alone and the two rows' rescale factors go to
/// deferred[2] (rescaleRows applies them), for a kernel whose o is still
/// being accumulated by an asynchronous product.
template <int BK, int D, bool KeyMask = false, bool Defer = false, class T>
__device__ __forceinline__ void softmaxTile(float (&s)[BK / 8][4], float (&o)[D / 8][4],
                                            float (&m)[2], float (&l)[2], const FastParams<T> &p,
                                            int k0, int qw, int row0, int t,
                                            const KeyMaskRows &km = {},
                                            float *deferred = nullptr) {
  const bool mask = k0 + BK > p.tk || (p.causal && k0 + BK - 1 > qw);
  const float sl = p.scaleLog2;
  // The masks first, branch-free, and on edge tiles only (one branch a
  // tile, not a branch a score), then the max.
  bool keyed = false; // this tile takes the key mask (needsKeys)
  if constexpr (KeyMask) {
    // Branch-free: a clamped index for the loads; the averaged rows
    // (attending to every key) only in a warp that holds one.
    keyed = km.needsKeys(k0, k0 + BK, qw);
    auto keyMasked = [&](auto averaged) {
#pragma unroll
      for (int j = 0; j < BK / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = k0 + j * 8 + 2 * t + (e & 1), row = row0 + (e >> 1) * 8;
          const bool inRange = key < p.tk;
          const bool shown = km.keys[inRange ? key : p.tk - 1] != 0; // always loaded: no branch
          const bool visible = inRange & !(p.causal & (key > row)) & shown;
          float y = visible ? s[j][e] : -INFINITY;
          if constexpr (decltype(averaged)::value) {
            const float a =
                inRange ? averagedRaw(s[j][e], p.scale, p.invScale, p.fill) : -INFINITY;
            y = row < km.avg ? a : y;
          }
          s[j][e] = y;
        }
    };
    if (keyed) {
      if (qw < km.avg) // warp-uniform
        keyMasked(std::true_type{});
      else
        keyMasked(std::false_type{});
    }
  }
  if (!keyed && mask) {
#pragma unroll
    for (int j = 0; j < BK / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = k0 + j * 8 + 2 * t + (e & 1), row = row0 + (e >> 1) * 8;
        float x = s[j][e];
        x = key >= p.tk || (p.causal && key > row) ? -INFINITY : x;
        s[j][e] = x;
      }
  }
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int j = 0; j < BK / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      mx[e >> 1] = fmaxf(mx[e >> 1], s[j][e]);
  float mu[2], nmu[2], corr[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(kFullMask, mx[r], 1));
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(kFullMask, mx[r], 2));
    // (max s) * sl == max(s * sl) for sl > 0: rounding is monotonic.
    float nm = fmaxf(m[r], mx[r] * sl);
    mu[r] = nm == -INFINITY ? 0.0f : nm; // a row with no key yet: no NaN
    nmu[r] = -mu[r];
    corr[r] = exp2Ftz(m[r] - mu[r]);
    m[r] = nm;
    l[r] *= corr[r];
  }
  if constexpr (Defer) {
    deferred[0] = corr[0], deferred[1] = corr[1];
  } else if (__any_sync(kFullMask, corr[0] != 1.0f || corr[1] != 1.0f)) {
    // Only when a row's max moved (o * 1 is o: skipping it changes no bit).
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        o[j][e] *= corr[e >> 1];
  }
#pragma unroll
  for (int j = 0; j < BK / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float x = exp2Ftz(fmaf(s[j][e], sl, nmu[e >> 1]));
      s[j][e] = x;
      l[e >> 1] += x;
    }
}

/// o's rows row0 and row0 + 8 times softmaxTile's deferred factors.
template <int D>
__device__ __forceinline__ void rescaleRows(float (&o)[D / 8][4], const float (&corr)[2]) {
#pragma unroll
  for (int j = 0; j < D / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      o[j][e] *= corr[e >> 1];
}

/// The forward's end: out = o / l (rows row0 and row0 + 8 of batch b, head
/// h), its amax (Amax), and lse = max * ln 2 + log(l) (-inf for a row with
/// no key).
template <int D, bool Amax, class T>
__device__ __forceinline__ void finishForward(const FastParams<T> &p, const float (&o)[D / 8][4],
                                              float (&m)[2], float (&l)[2], int b, int h, int bh,
                                              int row0, int t) {
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(kFullMask, l[r], 1);
    l[r] += __shfl_xor_sync(kFullMask, l[r], 2);
    inv[r] = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
  }
  float amax = 0.0f;
  storeRows<D>(p.out + b * p.os.batch + h * p.os.head, p.os.row, row0, p.tq, o, inv[0], inv[1],
               Amax ? &amax : nullptr);
  if constexpr (Amax)
    blockAmax<T>(p.amax, amax);
  if (p.lse && t == 0) {
    float *lse = p.lse + static_cast<int64_t>(bh) * p.tq;
#pragma unroll
    for (int r = 0; r < 2; ++r)
      if (row0 + r * 8 < p.tq)
        lse[row0 + r * 8] = l[r] > 0.0f ? m[r] * kLn2 + logf(l[r]) : -INFINITY;
  }
}

} // namespace tc::rt::cuda::attn

#endif // TC_RUNTIME_CUDA_KERNELS_ATTENTION_TILES_CUH
