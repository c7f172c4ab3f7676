//===- attention_flash.cu - attention on 16-bit tensor cores --------------===//
//
// The fast path of attention.cu (bf16 or f16, d == dv in {32, 64, 128},
// 16-byte aligned base pointers, every stride a multiple of 8 elements,
// sm_80+): FlashAttention-2 on mma.sync.m16n8k16 (bf16 or f16 in, fp32
// accumulate; the kernels are templates over the 16-bit type T, which only
// picks the mma variant and the fp32 -> T rounding), inline PTX so the same
// code runs on sm_90 and sm_120a.
//   - Forward: a block of 4 warps owns 128 query rows (32 per warp, q held
//     as A fragments in registers); 64-key K/V tiles (32 for d = 128,
//     fastForward) stream through shared
//     memory with cp.async double buffering and are read with ldmatrix. The
//     online softmax runs in fp32 registers in the log2 domain (the max of
//     the raw scores, then one FFMA and one ex2.approx.ftz a score); the S
//     accumulators of two adjacent n8 tiles are the A fragment of P @ V, so
//     P (rounded to T) never touches shared memory. Causal blocks skip the
//     key tiles right of the diagonal and are launched heaviest first. (A
//     third K/V stage in flight measured 149 -> 155 us at GPT-2's shape on an
//     H200: not kept.)
//   - Backward, two kernels: (1) one block per (batch, head, 64 MW queries),
//     the last query blocks first, first computes D = rowsum(dout * out) of
//     its rows (fp32, kept and written to scratch), then loops over key tiles
//     recomputing S and dP = dO V^T for dQ = scale * P (dP - D) K;
//     (2) one block per (batch, kv head, 64 MW keys), the first key blocks
//     first, loops over the group's query heads and query tiles computing
//     S^T = K Q^T, P^T, dP^T = V dO^T, dS^T = P^T (dP^T - D) and accumulating
//     dV += P^T dO, dK += dS^T Q in registers (again the transposed
//     accumulators are the A fragments of the next mma). A warp owns MW m16
//     tiles of rows (MW = 2 for d <= 64: every B fragment read with ldmatrix
//     feeds two mmas, half the shared-memory traffic of 16-row warps; MW = 1
//     for d = 128, whose accumulators fill the registers); the streamed tiles
//     are consumed in 16/32-row sub-tiles, dP is issued before the exps of P
//     (one ex2.approx.ftz each), the causal/length masks only run on edge
//     sub-tiles. No atomics: every output element has one owner and a fixed
//     summation order, so the bits are the same run to run.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "runtime/src/cuda/kernels/attention_tiles.cuh"

namespace tc::rt::cuda::attn {
namespace {

using namespace kern;

//===----------------------------------------------------------------------===//
// PTX wrappers (sm_80+)
//===----------------------------------------------------------------------===//

/// Four 8x8 b16 matrices; lane l addresses row l % 8 of matrix l / 8 and
/// receives element pair (l / 4, 2 (l % 4)) of each (of the transpose with
/// `trans`).
__device__ __forceinline__ void ldsm4(uint32_t (&r)[4], uint32_t addr) {
#ifndef TC_ATTN_NO_MMA
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#endif
}
__device__ __forceinline__ void ldsm4t(uint32_t (&r)[4], uint32_t addr) {
#ifndef TC_ATTN_NO_MMA
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#endif
}

/// c[16x8] += a[16x16] b[16x8], T (bf16 or f16) in, fp32 accumulate.
/// Fragments (g = lane / 4, t = lane % 4): a = {(g, 2t), (g + 8, 2t),
/// (g, 2t + 8), (g + 8, 2t + 8)} pairs, b = {(k 2t, n g), (k 2t + 8, n g)}
/// pairs, c = {(g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1)}.
template <class T>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
#ifndef TC_ATTN_NO_MMA
  if constexpr (std::is_same_v<T, f16>)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();
#endif
}

//===----------------------------------------------------------------------===//
// Fast path: shared-memory tiles
//===----------------------------------------------------------------------===//

constexpr int kPad = 8;       // row padding (16 bytes): ldmatrix rows hit distinct banks

/// Copies rows [r0, r0 + Rows) of a [rows, D] 16-bit operand (row stride rs
/// elements) into the shared tile sm[Rows][D + kPad]; rows >= rows are zero.
/// Thread i copies the 16-byte chunk i % (D / 8) of rows i / (D / 8) + k
/// 128 / (D / 8): one 64-bit multiply a call, a 64-bit add a chunk.
template <int Rows, int D, class T>
__device__ __forceinline__ void loadTile(T *sm, const T *g, int64_t rs, int r0, int rows) {
  constexpr int kChunks = D / 8, kTotal = Rows * kChunks, kStep = kThreads / kChunks;
  static_assert(kTotal % kThreads == 0 && kThreads % kChunks == 0,
                "tile not a multiple of the block");
  const int r = threadIdx.x / kChunks, col = (threadIdx.x % kChunks) * 8;
  const T *src = g + static_cast<int64_t>(r0 + r) * rs + col;
  const int64_t step = static_cast<int64_t>(kStep) * rs;
#pragma unroll
  for (int it = 0; it < kTotal / kThreads; ++it) {
    const int row = r + it * kStep;
    const bool valid = r0 + row < rows;
    cpAsync16(smemAddr(sm + row * (D + kPad) + col), valid ? src : g, valid);
    src += step;
    asm("" : "+l"(src)); // one add a chunk: not rematerialized as a product
  }
}

/// Shared-memory address for an ldmatrix.x4 giving the A fragment of rows
/// [r0, r0 + 16), cols [c0, c0 + 16) of a [*][S] tile.
template <int S, class T> __device__ __forceinline__ uint32_t aAddr(const T *sm, int r0, int c0) {
  int lane = threadIdx.x % 32;
  return smemAddr(sm + (r0 + lane % 8 + ((lane / 8) % 2) * 8) * S + c0 + (lane / 16) * 8);
}
/// ... the B fragments (registers {0,1} and {2,3}) of the n8 tiles n0 and
/// n0 + 8 at k-step c0 of an operand stored [n][k] (K for q k^T).
template <int S, class T> __device__ __forceinline__ uint32_t bAddr(const T *sm, int n0, int c0) {
  int lane = threadIdx.x % 32;
  return smemAddr(sm + (n0 + lane % 8 + (lane / 16) * 8) * S + c0 + ((lane / 8) % 2) * 8);
}
/// ... the B fragments of the n8 tiles c0 and c0 + 8 at k-step r0 of an
/// operand stored [k][n] (V for p v), with ldmatrix.trans.
template <int S, class T> __device__ __forceinline__ uint32_t btAddr(const T *sm, int r0, int c0) {
  int lane = threadIdx.x % 32;
  return smemAddr(sm + (r0 + lane % 8 + ((lane / 8) % 2) * 8) * S + c0 + (lane / 16) * 8);
}

// A warp owns MW m16 tiles of rows (16 MW rows: queries in the forward and
// dQ, keys in dK/dV), so every B fragment read from shared memory feeds MW
// mmas and the warp has MW independent accumulator chains.

/// c[MW][N/8][4] (16 MW rows x N cols) += A times the rows [0, N) of b ([N][S]
/// tile stored [n][k]), K along k; A is rows [ra, ra + 16 MW) of the tile a.
template <int K, int N, int MW, int S, class T>
__device__ __forceinline__ void mmaTileABt(float (&c)[MW][N / 8][4], const T *a, int ra,
                                           const T *b) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    uint32_t af[MW][4];
#pragma unroll
    for (int m = 0; m < MW; ++m)
      ldsm4(af[m], aAddr<S>(a, ra + m * 16, kk * 16));
#pragma unroll
    for (int nn = 0; nn < N / 16; ++nn) {
      uint32_t bf[4];
      ldsm4(bf, bAddr<S>(b, nn * 16, kk * 16));
#pragma unroll
      for (int m = 0; m < MW; ++m) {
        mma16816<T>(c[m][2 * nn], af[m], bf[0], bf[1]);
        mma16816<T>(c[m][2 * nn + 1], af[m], bf[2], bf[3]);
      }
    }
  }
}
/// Same with the A fragments already in registers.
template <int K, int N, int MW, int S, class T>
__device__ __forceinline__ void mmaTileRegBt(float (&c)[MW][N / 8][4],
                                             const uint32_t (&af)[MW][K / 16][4], const T *b) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk)
#pragma unroll
    for (int nn = 0; nn < N / 16; ++nn) {
      uint32_t bf[4];
      ldsm4(bf, bAddr<S>(b, nn * 16, kk * 16));
#pragma unroll
      for (int m = 0; m < MW; ++m) {
        mma16816<T>(c[m][2 * nn], af[m][kk], bf[0], bf[1]);
        mma16816<T>(c[m][2 * nn + 1], af[m][kk], bf[2], bf[3]);
      }
    }
}
/// acc[MW][D/8][4] += p (C fragments, 16 MW rows x K) times b ([K][S] tile
/// stored [k][n], the first D columns).
template <int K, int D, int MW, int S, class T>
__device__ __forceinline__ void mmaTilePV(float (&acc)[MW][D / 8][4],
                                          const float (&p)[MW][K / 8][4], const T *b) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    uint32_t af[MW][4];
#pragma unroll
    for (int m = 0; m < MW; ++m)
      cToA<T>(af[m], p[m][2 * kk], p[m][2 * kk + 1]);
#pragma unroll
    for (int nd = 0; nd < D / 16; ++nd) {
      uint32_t bf[4];
      ldsm4t(bf, btAddr<S>(b, kk * 16, nd * 16));
#pragma unroll
      for (int m = 0; m < MW; ++m) {
        mma16816<T>(acc[m][2 * nd], af[m], bf[0], bf[1]);
        mma16816<T>(acc[m][2 * nd + 1], af[m], bf[2], bf[3]);
      }
    }
  }
}
/// The K/V tile stream of the forward and dQ kernels (the tiles [kt0, nKT)
/// of BK keys through sK[2][BK][D + 8], sV[2][BK][D + 8], tile kt0 issued
/// before the loop): waits for tile kt, whose buffer it returns, and, once
/// the block is done with the other buffer, issues tile kt + 1 into it.
template <int BK, int D, class T>
__device__ __forceinline__ int nextKeyTile(T *sK, T *sV, const T *k, const T *v,
                                           const FastParams<T> &p, int kt, int kt0, int nKT) {
  constexpr int S = D + kPad;
  const int buf = (kt - kt0) & 1;
  cpAsyncWaitAll();
  __syncthreads();
  if (kt + 1 < nKT) {
    loadTile<BK, D>(sK + (buf ^ 1) * BK * S, k, p.ks.row, (kt + 1) * BK, p.tk);
    loadTile<BK, D>(sV + (buf ^ 1) * BK * S, v, p.vs.row, (kt + 1) * BK, p.tk);
  }
  cpAsyncCommit();
  return buf;
}

/// The A fragments of rows [r0, r0 + 16 MW) x [0, D) of a [*][S] tile.
template <int D, int MW, int S, class T>
__device__ __forceinline__ void loadAFrags(uint32_t (&af)[MW][D / 16][4], const T *sm, int r0) {
#pragma unroll
  for (int m = 0; m < MW; ++m)
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      ldsm4(af[m][kk], aAddr<S>(sm, r0 + m * 16, kk * 16));
}

//===----------------------------------------------------------------------===//
// Fast path: forward
//===----------------------------------------------------------------------===//

/// Shared bytes of the forward: sK, sV [2][BK][D + 8], and sQ [64 MW][D + 8]
/// unless q is staged in sK[1] (64 MW <= BK).
template <int D, int MW, int BK> constexpr int fwdSmemBytes() {
  return (4 * BK + (64 * MW <= BK ? 0 : 64 * MW)) * (D + kPad) * 2;
}

/// Grid: batch * heads * ceil(tq / 64 MW) blocks, the last query blocks
/// first; warp w owns the queries [q0 + 16 MW w, +16 MW) (q held as A
/// fragments), BK-key tiles stream through sK[2][BK], sV[2][BK]. Amax
/// (p.amax non-null) takes the amax of out; without it no amax code.
/// KeyMask (p.keys non-null): every tile masked by the key mask, and a block
/// with rows that attend to every key (a finite fill) visits every key tile.
template <class T, int D, int MW, int BK, bool Amax, bool KeyMask>
__global__ void __launch_bounds__(kThreads) flashFwdKernel(FastParams<T> p) {
  constexpr int WQ = 16 * MW, BQ = 4 * WQ, S = D + kPad;
  extern __shared__ __align__(16) unsigned char smRaw[];
  T *sK = reinterpret_cast<T *>(smRaw);               // [2][BK][S]
  T *sV = sK + 2 * BK * S;                            // [2][BK][S]
  T *sQ = BQ <= BK ? sK + BK * S : sV + 2 * BK * S;   // [BQ][S]

  const QueryBlock blk(p, BQ);
  const int bh = blk.bh, b = blk.b, h = blk.h, q0 = blk.q0;
  const T *q = blk.q(p), *k = blk.k(p), *v = blk.v(p);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int qw = q0 + warp * WQ, row0 = qw + g;

  const KeyMaskRows km = KeyMaskRows::of<KeyMask>(p, b);
  int kt0 = 0, nKT = blk.keyTiles(p, BQ, BK, KeyMask && km.avg > q0);
  if constexpr (KeyMask)
    km.keyTiles(q0, BK, nKT, &kt0, &nKT); // only the tiles with visible keys

  loadTile<BQ, D>(sQ, q, p.qs.row, q0, p.tq);
  loadTile<BK, D>(sK, k, p.ks.row, kt0 * BK, p.tk);
  loadTile<BK, D>(sV, v, p.vs.row, kt0 * BK, p.tk);
  cpAsyncCommit();
  cpAsyncWaitAll();
  __syncthreads();
  uint32_t qf[MW][D / 16][4]; // q rows [qw, qw + 16 MW) as A fragments
  loadAFrags<D, MW, S>(qf, sQ, warp * WQ);

  float o[MW][D / 8][4];
  float m[MW][2], l[MW][2]; // rows row0 + 16 i (+ 8)
#pragma unroll
  for (int i = 0; i < MW; ++i) {
    zero(o[i]);
    m[i][0] = m[i][1] = -INFINITY;
    l[i][0] = l[i][1] = 0.0f;
  }

  for (int kt = kt0; kt < nKT; ++kt) {
    const int buf = nextKeyTile<BK, D>(sK, sV, k, v, p, kt, kt0, nKT); // (q read too)
    const int k0 = kt * BK;
    if (p.causal && k0 > qw + WQ - 1 && (!KeyMask || qw >= km.avg))
      continue; // every key of the tile is right of this warp's rows
    float s[MW][BK / 8][4];
#pragma unroll
    for (int i = 0; i < MW; ++i)
      zero(s[i]);
    mmaTileRegBt<D, BK, MW, S>(s, qf, sK + buf * BK * S);
#pragma unroll
    for (int i = 0; i < MW; ++i)
      softmaxTile<BK, D, KeyMask>(s[i], o[i], m[i], l[i], p, k0, qw + 16 * i, row0 + 16 * i, t,
                                  km);
    mmaTilePV<BK, D, MW, S>(o, s, sV + buf * BK * S);
  }
  cpAsyncWaitAll();

#pragma unroll
  for (int i = 0; i < MW; ++i)
    finishForward<D, Amax>(p, o[i], m[i], l[i], b, h, bh, row0 + 16 * i, t);
}

//===----------------------------------------------------------------------===//
// Fast path: backward
//===----------------------------------------------------------------------===//
//
// Warps own MW m16 tiles (above; a 16-row warp reads a whole tile per 2
// mmas). The streamed tile is consumed in sub-tiles of SUB rows to bound the
// registers of the S/dP fragments. H200, GPT-2 shape (bf16 16x12x1024x1024,
// d 64, causal): dQ + D 0.151 ms, dK/dV 0.194 ms (16-row warps: 0.186 and
// 0.245 plus 0.019 for a separate D kernel).

/// Shared bytes of the dK/dV kernel: sK, sV [64 MW][D + 8], sQ, sO
/// [2][BQ][D + 8], sL, sD [2][BQ] floats.
template <int D, int MW, int BQ> constexpr int dkdvSmemBytes() {
  return (2 * 64 * MW + 4 * BQ) * (D + kPad) * 2 + 4 * BQ * 4;
}

/// Grid: ceil(tk / 64 MW) * batch * kvHeads blocks, the first key blocks (the
/// most work when causal) first. Warp w owns keys [k0 + 16 MW w, +16 MW) and
/// loops over the group's query heads and BQ-query tiles (double-buffered
/// with cp.async), SUB queries at a time; with KVReg its K/V A fragments stay
/// in registers. Amax (p.amaxOf names dk or dv) takes their amax; without it
/// no amax code. KeyMask: as the forward's (the query tiles of rows that
/// attend to every key are visited by every key block).
template <class T, int D, int MW, int BQ, int SUB, bool KVReg, int MinBlocks, bool Amax,
          bool KeyMask, bool ColSums = false>
__global__ void __launch_bounds__(kThreads, MinBlocks) flashBwdDkDvKernel(FastParams<T> p) {
  constexpr int WK = 16 * MW, BK = 4 * WK, S = D + kPad;
  static_assert(BQ % SUB == 0 && SUB % 16 == 0, "query sub-tile");
  extern __shared__ __align__(16) unsigned char smRaw[];
  T *sK = reinterpret_cast<T *>(smRaw);                   // [BK][S]
  T *sV = sK + BK * S;                                    // [BK][S]
  T *sQ = sV + BK * S;                                    // [2][BQ][S]
  T *sO = sQ + 2 * BQ * S;                                // [2][BQ][S]
  float *sL = reinterpret_cast<float *>(sO + 2 * BQ * S); // [2][BQ]
  float *sD = sL + 2 * BQ;                                // [2][BQ]

  const KeyBlock blk(p);
  const int b = blk.b, kvh = blk.kvh, kb = blk.kb;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int k0 = kb * BK, kw = k0 + warp * WK;
  const KeyMaskRows km = KeyMaskRows::of<KeyMask>(p, b);
  const uint32_t kvis = KeyMask ? keyRowBits<MW>(p, km.keys, kw, g) : 0;
  int nQT = (p.tq + BQ - 1) / BQ, qtStart = p.causal && km.avg == 0 ? min(k0 / BQ, nQT) : 0;
  if constexpr (KeyMask)
    if (km.hiddenKeys(k0, k0 + BK)) // only rows that attend to every key see them
      qtStart = 0, nQT = min(nQT, (km.avg + BQ - 1) / BQ);
  const int perHead = nQT - qtStart, nIt = p.group * perHead;

  const T *k = p.k + b * p.ks.batch + kvh * p.ks.head;
  const T *v = p.v + b * p.vs.batch + kvh * p.vs.head;
  loadTile<BK, D>(sK, k, p.ks.row, k0, p.tk);
  loadTile<BK, D>(sV, v, p.vs.row, k0, p.tk);
  // Iteration it visits head kvh group + it / perHead, query tile qtStart +
  // it % perHead: counted one step at a time (no integer division).
  int issueHead = 0, issueTile = 0; // of the next tile to issue
  auto issue = [&](int buf) {
    int h = kvh * p.group + issueHead, q0 = (qtStart + issueTile) * BQ;
    if (++issueTile == perHead)
      issueTile = 0, ++issueHead;
    loadTile<BQ, D>(sQ + buf * BQ * S, p.q + b * p.qs.batch + h * p.qs.head, p.qs.row, q0, p.tq);
    loadTile<BQ, D>(sO + buf * BQ * S, p.dout + b * p.dos.batch + h * p.dos.head, p.dos.row, q0,
                    p.tq);
    int64_t bh = static_cast<int64_t>(b) * p.heads + h;
    loadVec<BQ>(sL + buf * BQ, p.lseIn + bh * p.tq, q0, p.tq);
    loadVec<BQ>(sD + buf * BQ, p.dd + bh * p.tq, q0, p.tq);
  };
  if (nIt > 0)
    issue(0);
  cpAsyncCommit();

  constexpr int kRegM = KVReg ? MW : 1, kRegK = KVReg ? D / 16 : 1;
  uint32_t kf[kRegM][kRegK][4], vf[kRegM][kRegK][4]; // with KVReg: K, V rows as A fragments
  float dk[MW][D / 8][4], dv[MW][D / 8][4];
#pragma unroll
  for (int m = 0; m < MW; ++m) {
    zero(dk[m]);
    zero(dv[m]);
  }
  int tile = 0; // the query tile of iteration it, less qtStart
  for (int it = 0; it < nIt; ++it) {
    const int buf = it & 1;
    cpAsyncWaitAll();
    __syncthreads();
    if (it + 1 < nIt)
      issue(buf ^ 1);
    cpAsyncCommit();
    if constexpr (KVReg) {
      if (it == 0) {
        loadAFrags<D, MW, S>(kf, sK, warp * WK);
        loadAFrags<D, MW, S>(vf, sV, warp * WK);
      }
    }
    const int q0 = (qtStart + tile) * BQ;
    if (++tile == perHead)
      tile = 0;
    if (p.causal && kw > q0 + BQ - 1 && (!KeyMask || q0 >= km.avg))
      continue; // every key of this warp is right of every query of the tile
    const T *qT = sQ + buf * BQ * S, *oT = sO + buf * BQ * S;
    const float *lseT = sL + buf * BQ, *ddT = sD + buf * BQ;
#pragma unroll 1
    for (int sq = 0; sq < BQ; sq += SUB) {
      const int qs = q0 + sq; // queries [qs, qs + SUB)
      if (qs >= p.tq)
        break;
      if (p.causal && kw > qs + SUB - 1 && (!KeyMask || qs >= km.avg))
        continue;
      const T *q = qT + sq * S, *dO = oT + sq * S;
      float l2[SUB / 8][2], dd[SUB / 8][2]; // lse * log2(e) and D of this thread's columns
#pragma unroll
      for (int j = 0; j < SUB / 8; ++j) {
        int c = sq + j * 8 + 2 * t;
        float2 lv = *reinterpret_cast<const float2 *>(lseT + c);
        float2 dvv = *reinterpret_cast<const float2 *>(ddT + c);
        l2[j][0] = lv.x * kLog2e, l2[j][1] = lv.y * kLog2e;
        dd[j][0] = dvv.x, dd[j][1] = dvv.y;
      }
      float s[MW][SUB / 8][4]; // S^T: this warp's keys x the sub-tile's queries
#pragma unroll
      for (int m = 0; m < MW; ++m)
        zero(s[m]);
      if constexpr (KVReg)
        mmaTileRegBt<D, SUB, MW, S>(s, kf, q);
      else
        mmaTileABt<D, SUB, MW, S>(s, sK, warp * WK, q);
      float dp[MW][SUB / 8][4]; // dP^T = V dO^T, issued before the exps
#pragma unroll
      for (int m = 0; m < MW; ++m)
        zero(dp[m]);
      if constexpr (KVReg)
        mmaTileRegBt<D, SUB, MW, S>(dp, vf, dO);
      else
        mmaTileABt<D, SUB, MW, S>(dp, sV, warp * WK, dO);
      // P^T (0 past tq and where key > query), then dS^T; only edge
      // sub-tiles need the mask.
      if (KeyMask && km.needsKeys(kw, kw + WK, qs)) {
        maskAndExpKeys<MW, SUB, true>(s, l2, p, km.keys, kvis, km.avg, kw, qs, g, t);
      } else {
        const bool mask = qs + SUB > p.tq || (p.causal && qs < kw + WK - 1);
        maskAndExp<MW, SUB, true>(s, l2, p, mask, kw, qs, g, t);
      }
      dsFromP<MW, SUB, true>(dp, s, dd);
      mmaTilePV<SUB, D, MW, S>(dv, s, dO); // dV += P^T dO
      mmaTilePV<SUB, D, MW, S>(dk, dp, q); // dK += dS^T Q
    }
  }
  cpAsyncWaitAll();
  float amax = 0.0f;
  const bool amaxK = Amax && gradAmax(p, kAmaxOfDk), amaxV = Amax && gradAmax(p, kAmaxOfDv);
  // The backward's rotary of dk (AttentionGradRotary; never with an amax,
  // whose instances carry no code for it); the column sums below are of the
  // rotated values.
  if constexpr (!Amax)
    if (p.rotOf & kAmaxOfDk)
#pragma unroll
      for (int m = 0; m < MW; ++m)
        rotateRows<D>(dk[m], p.rotCos, p.rotSin, p.rotHalf, static_cast<int64_t>(b) * p.tk,
                      kw + m * 16 + g, p.tk);
#pragma unroll
  for (int m = 0; m < MW; ++m) {
    int key = kw + m * 16 + g;
    storeRows<D>(p.dk + b * p.dks.batch + kvh * p.dks.head, p.dks.row, key, p.tk, dk[m], p.scale,
                 p.scale, amaxK ? &amax : nullptr);
    storeRows<D>(p.dv + b * p.dvs.batch + kvh * p.dvs.head, p.dvs.row, key, p.tk, dv[m], 1.0f,
                 1.0f, amaxV ? &amax : nullptr);
  }
  if constexpr (Amax)
    blockAmax<T>(gradAmax(p, kAmaxOfDk | kAmaxOfDv), amax);
  if constexpr (ColSums) { // the bias gradient's partials of these keys (AttentionGradSums)
    // The block's batch, kv head and key block from blockIdx read afresh.
    const KeyBlock at(p, freshBlockIdx());
    const int64_t part =
        (static_cast<int64_t>(at.b) * ((p.tk + BK - 1) / BK) + at.kb) * p.csRowKV +
        static_cast<int64_t>(at.kvh) * p.csHead;
    float *sm = reinterpret_cast<float *>(smRaw);
    blockColumnSums<D, MW>(dk, p.scale, kw, p.tk, sm, p.csK + part);
    blockColumnSums<D, MW>(dv, 1.0f, kw, p.tk, sm, p.csV + part);
  }
}

/// Shared rows (of D + 8 bf16) of the dQ kernel: sQ, sO [64 MW] and sK, sV
/// [2][BK], sK/sV over sQ/sO when q and dout go to registers (QOReg); then
/// sDD [64 MW] floats.
template <int D, int MW, int BK, bool QOReg> constexpr int dqSmemRows() {
  return QOReg ? std::max(2 * 64 * MW, 4 * BK) : 2 * 64 * MW + 4 * BK;
}
template <int D, int MW, int BK, bool QOReg> constexpr int dqSmemBytes() {
  return dqSmemRows<D, MW, BK, QOReg>() * (D + kPad) * 2 + 64 * MW * 4;
}

/// Grid: ceil(tq / 64 MW) * batch * heads blocks, the last query blocks
/// first. Warp w owns queries [q0 + 16 MW w, +16 MW) and loops over BK-key
/// tiles (double-buffered), SUB keys at a time. The block first computes
/// D = rowsum(dout * out) of its rows (kThreads / 64 MW threads per row, fixed
/// order) for itself and, through p.dd, for the dK/dV kernel launched after it.
/// Amax (p.amaxOf names dq) takes the amax of dq; without it no amax code.
/// KeyMask: as the forward's.
template <class T, int D, int MW, int BK, int SUB, bool QOReg, int MinBlocks, bool Amax,
          bool KeyMask, bool ColSums = false>
__global__ void __launch_bounds__(kThreads, MinBlocks) flashBwdDqKernel(FastParams<T> p) {
  constexpr int WQ = 16 * MW, BQ = 4 * WQ, S = D + kPad;
  static_assert(BK % SUB == 0 && SUB % 16 == 0, "key sub-tile");
  extern __shared__ __align__(16) unsigned char smRaw[];
  T *sQ = reinterpret_cast<T *>(smRaw); // [BQ][S]
  T *sO = sQ + BQ * S;                  // [BQ][S]
  T *sK = QOReg ? sQ : sO + BQ * S;     // [2][BK][S]
  T *sV = sK + 2 * BK * S;              // [2][BK][S]
  float *sDD = reinterpret_cast<float *>(sQ + dqSmemRows<D, MW, BK, QOReg>() * S); // [BQ]

  const QueryBlock blk(p, BQ);
  const int bh = blk.bh, b = blk.b, h = blk.h, q0 = blk.q0;
  const T *k = blk.k(p), *v = blk.v(p);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int qw = q0 + warp * WQ;

  loadTile<BQ, D>(sQ, p.q + b * p.qs.batch + h * p.qs.head, p.qs.row, q0, p.tq);
  loadTile<BQ, D>(sO, p.dout + b * p.dos.batch + h * p.dos.head, p.dos.row, q0, p.tq);
  cpAsyncCommit();
  float lse2[MW][2];
#pragma unroll
  for (int m = 0; m < MW; ++m)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      int row = qw + m * 16 + g + r * 8;
      lse2[m][r] = row < p.tq ? p.lseIn[static_cast<int64_t>(bh) * p.tq + row] * kLog2e : 0.0f;
    }
  RowsumDoutOut<D, BQ, T> rowsum; // D = rowsum(dout * out); out read now
  rowsum.load(p, b, h, q0);
  cpAsyncWaitAll();
  __syncthreads();
  rowsum.store(p, bh, q0, sDD, [&](int r, int c) { return sO + r * S + c; });
  constexpr int kRegM = QOReg ? MW : 1, kRegK = QOReg ? D / 16 : 1;
  uint32_t qf[kRegM][kRegK][4], of[kRegM][kRegK][4]; // with QOReg: q, dout rows as A fragments
  if constexpr (QOReg) {
    loadAFrags<D, MW, S>(qf, sQ, warp * WQ);
    loadAFrags<D, MW, S>(of, sO, warp * WQ);
  }
  __syncthreads(); // sDD written; with QOReg the staging area is free
  float dd[MW][2];
#pragma unroll
  for (int m = 0; m < MW; ++m)
#pragma unroll
    for (int r = 0; r < 2; ++r)
      dd[m][r] = sDD[warp * WQ + m * 16 + g + r * 8];

  const KeyMaskRows km = KeyMaskRows::of<KeyMask>(p, b);
  int kt0 = 0, nKT = blk.keyTiles(p, BQ, BK, KeyMask && km.avg > q0);
  if constexpr (KeyMask)
    km.keyTiles(q0, BK, nKT, &kt0, &nKT); // only the tiles with visible keys
  loadTile<BK, D>(sK, k, p.ks.row, kt0 * BK, p.tk);
  loadTile<BK, D>(sV, v, p.vs.row, kt0 * BK, p.tk);
  cpAsyncCommit();

  float dq[MW][D / 8][4];
#pragma unroll
  for (int m = 0; m < MW; ++m)
    zero(dq[m]);
  for (int kt = kt0; kt < nKT; ++kt) {
    const int buf = nextKeyTile<BK, D>(sK, sV, k, v, p, kt, kt0, nKT);
    const T *kT = sK + buf * BK * S, *vT = sV + buf * BK * S;
#pragma unroll 1
    for (int sk = 0; sk < BK; sk += SUB) {
      const int ks = kt * BK + sk; // keys [ks, ks + SUB)
      if (ks >= p.tk || (p.causal && ks > qw + WQ - 1 && (!KeyMask || qw >= km.avg)))
        break; // past the keys, or right of every query of this warp
      const T *kS = kT + sk * S, *vS = vT + sk * S;
      float s[MW][SUB / 8][4];
#pragma unroll
      for (int m = 0; m < MW; ++m)
        zero(s[m]);
      if constexpr (QOReg)
        mmaTileRegBt<D, SUB, MW, S>(s, qf, kS);
      else
        mmaTileABt<D, SUB, MW, S>(s, sQ, warp * WQ, kS);
      float dp[MW][SUB / 8][4]; // dP = dO V^T, issued before the exps
#pragma unroll
      for (int m = 0; m < MW; ++m)
        zero(dp[m]);
      if constexpr (QOReg)
        mmaTileRegBt<D, SUB, MW, S>(dp, of, vS);
      else
        mmaTileABt<D, SUB, MW, S>(dp, sO, warp * WQ, vS);
      // P (0 past tk and where key > query), then dS; only edge sub-tiles
      // need the mask.
      if (KeyMask && km.needsKeys(ks, ks + SUB, qw)) {
        maskAndExpKeys<MW, SUB, false>(s, lse2, p, km.keys, 0, km.avg, qw, ks, g, t);
      } else {
        const bool mask = ks + SUB > p.tk || (p.causal && ks + SUB - 1 > qw);
        maskAndExp<MW, SUB, false>(s, lse2, p, mask, qw, ks, g, t);
      }
      dsFromP<MW, SUB, false>(dp, s, dd);
      mmaTilePV<SUB, D, MW, S>(dq, dp, kS); // dQ += dS K
    }
  }
  cpAsyncWaitAll();
  float amax = 0.0f;
  // The backward's rotary of dq (as dk's above).
  if constexpr (!Amax)
    if (p.rotOf & kAmaxOfDq)
#pragma unroll
      for (int m = 0; m < MW; ++m)
        rotateRows<D>(dq[m], p.rotCos, p.rotSin, p.rotHalf, static_cast<int64_t>(b) * p.tq,
                      qw + m * 16 + g, p.tq);
#pragma unroll
  for (int m = 0; m < MW; ++m)
    storeRows<D>(p.dq + b * p.dqs.batch + h * p.dqs.head, p.dqs.row, qw + m * 16 + g, p.tq, dq[m],
                 p.scale, p.scale, Amax ? &amax : nullptr);
  if constexpr (Amax)
    blockAmax<T>(gradAmax(p, kAmaxOfDq), amax);
  if constexpr (ColSums) { // the bias gradient's partial of these rows (AttentionGradSums)
    // The block's batch, head and row block from blockIdx read afresh.
    const QueryBlock at(p, BQ, freshBlockIdx());
    const int64_t chunk = static_cast<int64_t>(at.b) * ((p.tq + BQ - 1) / BQ) + at.q0 / BQ;
    blockColumnSums<D, MW>(dq, p.scale, qw, p.tq, reinterpret_cast<float *>(smRaw),
                           p.csQ + chunk * p.csRowQ + static_cast<int64_t>(at.h) * p.csHead);
  }
}

template <int D, int MW, int BK, bool KeyMask, class T>
Status launchFwd(const FastParams<T> &p, cudaStream_t stream) {
  int64_t blocks = ceilDiv(p.tq, 64 * MW) * p.batch * p.heads;
  auto kernel = p.amax ? flashFwdKernel<T, D, MW, BK, true, KeyMask>
                       : flashFwdKernel<T, D, MW, BK, false, KeyMask>;
  return launchFast(kernel, "attention_forward", blocks, fwdSmemBytes<D, MW, BK>(), p, stream);
}

/// 128 query rows a block (32 a warp: every K/V fragment read with ldmatrix
/// feeds two mmas, as in the backward) with 64-key tiles for d <= 64, 32-key
/// tiles for d = 128 (ptxas: d 64 244 registers, d 128 255; no spill), but
/// 64 rows (16 a warp) and 64-key tiles for d = 128 with a key mask (the
/// 128-row kernel would spill). Measured on an H100 (causal, T = 1024;
/// bench/RESULTS.md, 2026-12-05): 16x12 heads of d 64 134 -> 116 us against
/// 64-row blocks, 8x16 of d 128 190 -> 164 us.
template <int D, class T> Status fastForward(const FastParams<T> &p, cudaStream_t stream) {
  if constexpr (D <= 64)
    return p.keys ? launchFwd<D, 2, 64, true>(p, stream) : launchFwd<D, 2, 64, false>(p, stream);
  else
    return p.keys ? launchFwd<D, 1, 64, true>(p, stream) : launchFwd<D, 2, 32, false>(p, stream);
}

/// Template arguments: head dim, m16 tiles per warp, streamed tile rows,
/// sub-tile rows, A fragments held in registers, min blocks per SM; the
/// kernel with Amax when p.amaxOf names one of its gradients.
template <int D, int MW, int BK, int SUB, bool QOReg, int MinBlocks, class T>
Status launchDq(const FastParams<T> &p, cudaStream_t stream) {
  int64_t blocks = ceilDiv(p.tq, 64 * MW) * p.batch * p.heads;
  const bool amax = gradAmax(p, kAmaxOfDq);
  // The column sums (p.csQ) come without an amax or a key mask (attention.cu).
  auto kernel = p.csQ ? flashBwdDqKernel<T, D, MW, BK, SUB, QOReg, MinBlocks, false, false, true>
                : p.keys
                    ? (amax ? flashBwdDqKernel<T, D, MW, BK, SUB, QOReg, MinBlocks, true, true>
                            : flashBwdDqKernel<T, D, MW, BK, SUB, QOReg, MinBlocks, false, true>)
                    : (amax ? flashBwdDqKernel<T, D, MW, BK, SUB, QOReg, MinBlocks, true, false>
                            : flashBwdDqKernel<T, D, MW, BK, SUB, QOReg, MinBlocks, false, false>);
  return launchFast(kernel, "attention_backward_dq", blocks, dqSmemBytes<D, MW, BK, QOReg>(), p,
                    stream);
}
template <int D, int MW, int BQ, int SUB, bool KVReg, int MinBlocks, class T>
Status launchDkDv(const FastParams<T> &p, cudaStream_t stream) {
  int64_t blocks = ceilDiv(p.tk, 64 * MW) * p.batch * p.kvHeads;
  const bool amax = gradAmax(p, kAmaxOfDk | kAmaxOfDv);
  auto kernel =
      p.csK ? flashBwdDkDvKernel<T, D, MW, BQ, SUB, KVReg, MinBlocks, false, false, true>
      : p.keys
          ? (amax ? flashBwdDkDvKernel<T, D, MW, BQ, SUB, KVReg, MinBlocks, true, true>
                  : flashBwdDkDvKernel<T, D, MW, BQ, SUB, KVReg, MinBlocks, false, true>)
          : (amax ? flashBwdDkDvKernel<T, D, MW, BQ, SUB, KVReg, MinBlocks, true, false>
                  : flashBwdDkDvKernel<T, D, MW, BQ, SUB, KVReg, MinBlocks, false, false>);
  return launchFast(kernel, "attention_backward_dkdv", blocks, dkdvSmemBytes<D, MW, BQ>(), p,
                    stream);
}

/// dQ (and D) first: the dK/dV kernel reads D from scratch. Tilings measured
/// on an H200 (causal, T = 1024): d <= 64 takes MW = 2 (32 rows per warp) in
/// both kernels; d = 128 keeps MW = 1, its accumulators filling the
/// registers, with 64-query tiles for dK/dV (0.517 ms for 8x16 heads).
/// With sums.out the kernels' column-sum partials are laid out from p.csQ
/// (gradSumParts) and summed into sums.out after them.
template <int D, class T>
Status fastBackward(const FastParams<T> &p0, cudaStream_t stream, const AttentionGradSums &sums) {
  constexpr int MW = D == 128 ? 1 : 2; // m16 tiles a warp, both kernels
  FastParams<T> p = p0;
  const AttentionShape s{p.batch, p.heads, p.kvHeads, p.tq, p.tk, D, D};
  const GradSumParts parts =
      gradSumParts(s, p.csQ, ceilDiv(p.tq, 64 * MW), ceilDiv(p.tk, 64 * MW), sums);
  if (sums.out) { // a chunk is a block's rows
    p.csQ = parts.q, p.csK = parts.k, p.csV = parts.v;
    p.csRowQ = static_cast<int>(parts.rowQ), p.csRowKV = static_cast<int>(parts.rowK);
    p.csHead = static_cast<int>(parts.headQ); // headK, headV alike: dv == d here
  } else {
    p.csQ = p.csK = p.csV = nullptr;
  }
  if constexpr (D == 32) {
    TC_RETURN_IF_ERROR((launchDq<32, MW, 64, 32, true, 2>(p, stream)));
    TC_RETURN_IF_ERROR((launchDkDv<32, MW, 64, 32, true, 2>(p, stream)));
  } else if constexpr (D == 64) {
    TC_RETURN_IF_ERROR((launchDq<64, MW, 64, 16, true, 2>(p, stream)));
    TC_RETURN_IF_ERROR((launchDkDv<64, MW, 64, 32, false, 2>(p, stream)));
  } else {
    TC_RETURN_IF_ERROR((launchDq<128, MW, 32, 32, true, 1>(p, stream)));
    TC_RETURN_IF_ERROR((launchDkDv<128, MW, 64, 32, false, 1>(p, stream)));
  }
  if (!sums.out)
    return Status::ok();
  return finishGradSums<T>(s, parts, sums, stream);
}

} // namespace

template <class T> Status flashForward(const FastParams<T> &p, int64_t d, cudaStream_t stream) {
  switch (d) {
  case 32:
    return fastForward<32>(p, stream);
  case 64:
    return fastForward<64>(p, stream);
  default:
    return fastForward<128>(p, stream);
  }
}

template <class T>
Status flashBackward(const FastParams<T> &p, int64_t d, cudaStream_t stream,
                     const AttentionGradSums &sums) {
  switch (d) {
  case 32:
    return fastBackward<32>(p, stream, sums);
  case 64:
    return fastBackward<64>(p, stream, sums);
  default:
    return fastBackward<128>(p, stream, sums);
  }
}

template Status flashForward(const FastParams<bf16> &, int64_t, cudaStream_t);
template Status flashForward(const FastParams<f16> &, int64_t, cudaStream_t);
template Status flashBackward(const FastParams<bf16> &, int64_t, cudaStream_t,
                              const AttentionGradSums &);
template Status flashBackward(const FastParams<f16> &, int64_t, cudaStream_t,
                              const AttentionGradSums &);

} // namespace tc::rt::cuda::attn
