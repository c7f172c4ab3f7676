//===- attention_tma.cuh - the TMA/wgmma attention's device pieces -------===//
//
// The TMA + wgmma attention kernels bench/attn_sm90.cu times (forward, dQ,
// dK/dV; in the runtime behind TC_ATTN_TMA in stop 40, removed in stop 41: +0.6%
// on GPT-2's step on an H100, bench/RESULTS.md) and the pieces they share: the tile sizes and shared-memory layout, the m64n64k16
// product with its A operand in registers, the register pins around wgmma
// fences and waits, the score and PV issues, one tile's online softmax.
// sm_90a only (wgmma).
//
//===----------------------------------------------------------------------===//
#ifndef TC_BENCH_ATTENTION_TMA_CUH
#define TC_BENCH_ATTENTION_TMA_CUH

#include "runtime/src/cuda/kernels/attention_tiles.cuh"
#include "runtime/src/cuda/kernels/gemm_sm90.cuh"

namespace tc::rt::cuda::attn::tma {

namespace g90 = sm90gemm;
using bf16 = __nv_bfloat16;

constexpr int kD = 64, kBQ = 128, kBN = 128;
constexpr int kTile = kBN * kD * 2; // bytes of a K or V tile (and of Q)

/// Offsets into the 1024-aligned dynamic shared memory: Q, the stages' K
/// and V tiles, the barriers (then 1024 bytes of alignment slack).
template <int Stages> struct TmaLayout {
  static constexpr int q = 0, k = kTile, v = k + Stages * kTile, bars = v + Stages * kTile,
                       bytes = bars + 64 + 1024;
};

/// Thread 0 initialises a block's barriers: `once` (a one-shot load: Q, or
/// K and V) and a ring of `stages` (full: the producer's one arrive with its
/// bytes; empty: both consumer warpgroups' arrives); then the block syncs.
__device__ __forceinline__ void initBarriers(uint64_t *once, uint64_t *full, uint64_t *empty,
                                             int stages) {
  if (threadIdx.x == 0) {
    g90::mbarInit(once, 1);
    for (int s = 0; s < stages; ++s) {
      g90::mbarInit(&full[s], 1);
      g90::mbarInit(&empty[s], 2);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
}

/// O (64 x 64 a warpgroup) += P (64 x 16 keys, bf16 A fragments in
/// registers) V (16 keys x 64, N-major in shared memory: transposed B).
__device__ __forceinline__ void wgmmaPV(float (&d)[32], const uint32_t (&a)[4], uint64_t descB) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
               "{" TC_R32 "}, "
               "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
               : TC_F32
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(descB));
}

/// Keeps the compiler from moving register reads or writes across a wgmma
/// fence, issue or wait.
template <int N> __device__ __forceinline__ void pin(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    asm volatile("" : "+f"(r[i])::"memory");
}
template <int N> __device__ __forceinline__ void pin(uint32_t (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
      asm volatile("" : "+r"(r[i][j])::"memory");
}

/// S = Q K^T (64 x 128 a warpgroup), uncommitted.
__device__ __forceinline__ void issueScores(float (&sc)[64], uint64_t dQ, uint64_t dK) {
#pragma unroll
  for (int k = 0; k < kD / 16; ++k)
    g90::wgmma128<0>(sc, dQ + 2 * k, dK + 2 * k, k > 0 ? 1 : 0);
}
/// O += P V over KS k-steps of 16 keys (a tile's 128: 8); also dQ += dS K,
/// dV += P^T dO and dK += dS^T Q with their A fragments and B tiles.
template <int KS>
__device__ __forceinline__ void issuePV(float (&o)[32], const uint32_t (&pa)[KS][4], uint64_t dV) {
#pragma unroll
  for (int kk = 0; kk < KS; ++kk) {
    const uint32_t a[4] = {pa[kk][0], pa[kk][1], pa[kk][2], pa[kk][3]};
    wgmmaPV(o, a, dV + 128 * kk); // 16 keys of 128 bytes further a step
  }
}

/// Where a tile's scores are masked: columns at or past kLim (keys past
/// tk) and, when causal, columns c with c + kRel > row (key > query; kRel =
/// the tile's first key less the block's first query). A tile inside both
/// limits masks nothing (every row's limit is past its last column).
struct TileMask {
  int kLim, kRel;
  bool causal;
};

/// One tile's online softmax: sc (raw scores) to the log2 domain, masked;
/// the rows' running max m and sum l (l rescaled, then added to); corr, the
/// factor that rescales O; P as bf16 A fragments (k-step kk: rows r and
/// r + 8, keys 16 kk + 2 t4.. and + 8).
__device__ __forceinline__ void softmaxTile(float (&sc)[64], const TileMask &mk, int rowIn, int t4,
                                            float scaleLog2, float (&m)[2], float (&l)[2],
                                            float (&corr)[2], uint32_t (&pa)[8][4]) {
  // A row's columns from lim[h] on are masked (past tk, or key > query).
  int lim[2];
#pragma unroll
  for (int h = 0; h < 2; ++h)
    lim[h] = mk.causal ? min(mk.kLim, rowIn + 8 * h - mk.kRel + 1) : mk.kLim;
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    const int col = 8 * (i / 4) + 2 * t4 + (i % 2);
    sc[i] = col >= lim[(i / 2) % 2] ? -INFINITY : sc[i] * scaleLog2;
  }
  float mu[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = m[h];
#pragma unroll
    for (int jj = 0; jj < 16; ++jj)
      mx = fmaxf(mx, fmaxf(sc[4 * jj + 2 * h], sc[4 * jj + 2 * h + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(kern::kFullMask, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(kern::kFullMask, mx, 2));
    mu[h] = mx == -INFINITY ? 0.0f : mx; // a row with no key yet: nothing to scale
    corr[h] = kern::exp2Ftz(m[h] - mu[h]);
    m[h] = mx;
    l[h] *= corr[h];
  }
#pragma unroll
  for (int jj = 0; jj < 16; ++jj) {
    float p[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      p[e] = kern::exp2Ftz(sc[4 * jj + e] - mu[e / 2]);
      l[e / 2] += p[e];
    }
    pa[jj / 2][2 * (jj % 2)] = pack2<bf16>(p[0], p[1]);     // row r, keys 8 jj + 2 t4
    pa[jj / 2][2 * (jj % 2) + 1] = pack2<bf16>(p[2], p[3]); // row r + 8
  }
}

__device__ __forceinline__ void rescale(float (&o)[32], const float (&corr)[2]) {
#pragma unroll
  for (int i = 0; i < 32; ++i)
    o[i] *= corr[(i / 2) % 2];
}

__device__ __forceinline__ void tmaLoad4d(void *dst, const CUtensorMap *map, uint64_t *bar, int c0,
                                          int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(g90::smemAddr(dst)),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(g90::smemAddr(bar)), "r"(c0), "r"(c1),
               "r"(c2), "r"(c3)
               : "memory");
}

/// A block of 128 queries of one (batch, head) and its key tiles: the
/// forward's and the dQ kernel's grid, ceil(tq / 128) * batch * heads
/// blocks, causal: the last query blocks (the most key tiles) first.
struct QueryBlock128 {
  int nQ, qb, bh, b, h, kvh, q0, nTiles;
  __device__ explicit QueryBlock128(const FastParams<bf16> &p) {
    const int BH = p.batch * p.heads, nK = (p.tk + kBN - 1) / kBN;
    nQ = (p.tq + kBQ - 1) / kBQ;
    const int qi = static_cast<int>(blockIdx.x) / BH;
    bh = static_cast<int>(blockIdx.x) % BH;
    qb = p.causal ? nQ - 1 - qi : qi, b = bh / p.heads, h = bh % p.heads;
    kvh = h / p.group, q0 = qb * kBQ;
    nTiles = p.causal ? min(nK, qb + 1) : nK; // causal: keys <= queries
  }
};

/// The producer thread's loads of a query block's K and V tiles (its kv
/// head's), tile j into stage j % Stages of the rings at k and v (kTile
/// bytes a stage), each stage's full barrier told both tiles' bytes once its
/// empty barrier has passed.
template <int Stages>
__device__ __forceinline__ void loadKeyTiles(unsigned char *k, unsigned char *v,
                                             const CUtensorMap *mapK, const CUtensorMap *mapV,
                                             uint64_t *full, uint64_t *empty,
                                             const QueryBlock128 &qb) {
  for (int j = 0, s = 0, ph = 0; j < qb.nTiles; ++j) {
    g90::mbarWait(&empty[s], ph ^ 1);
    g90::mbarExpectTx(&full[s], 2 * kTile);
    tmaLoad4d(k + s * kTile, mapK, &full[s], 0, j * kBN, qb.kvh, qb.b);
    tmaLoad4d(v + s * kTile, mapV, &full[s], 0, j * kBN, qb.kvh, qb.b);
    if (++s == Stages)
      s = 0, ph ^= 1;
  }
}

/// Grid: ceil(tq / 128) * batch * heads blocks of 384 threads, one an SM;
/// causal: the blocks of the last query tiles (the most key tiles) first.
template <bool Overlap>
__global__ void __launch_bounds__(384, 1)
    tmaFwdKernel(const __grid_constant__ CUtensorMap mapQ, const __grid_constant__ CUtensorMap mapK,
                 const __grid_constant__ CUtensorMap mapV, const FastParams<bf16> p) {
  constexpr int kStages = Overlap ? 3 : 2;
  using L = TmaLayout<kStages>;
  extern __shared__ unsigned char smemRaw[];
  unsigned char *base = g90::alignedSmem(smemRaw);
  uint64_t *bars = reinterpret_cast<uint64_t *>(base + L::bars);
  uint64_t *qFull = bars, *full = bars + 1, *empty = bars + 1 + kStages;
  const QueryBlock128 qbk(p);
  const int bh = qbk.bh, b = qbk.b, h = qbk.h, q0 = qbk.q0, nTiles = qbk.nTiles;
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  initBarriers(qFull, full, empty, kStages);
  if (wg == 0) {
    g90::setMaxRegsDec<24>();
    if (tid == 0) {
      g90::mbarExpectTx(qFull, kTile);
      tmaLoad4d(base + L::q, &mapQ, qFull, 0, q0, h, b);
      loadKeyTiles<kStages>(base + L::k, base + L::v, &mapK, &mapV, full, empty, qbk);
    }
    return;
  }
  g90::setMaxRegsInc<240>();
  const int g = wg - 1, warp = tid / 32, lane = tid % 32, t4 = lane % 4;
  const int rowIn = 64 * g + 16 * warp + lane / 4; // this thread's first row in the block (+8)
  const uint64_t dQ = g90::descSw128(base + L::q + g * 64 * kD * 2);
  auto dK = [&](int s) { return g90::descSw128(base + L::k + s * kTile); };
  auto dV = [&](int s) { return g90::descSw128N(base + L::v + s * kTile); };
  auto release = [&](int s) {
    if (tid == 0)
      g90::mbarArrive(&empty[s]);
  };
  auto maskOf = [&](int j) { return TileMask{p.tk - j * kBN, j * kBN - q0, p.causal}; };
  float o[32];
#pragma unroll
  for (int i = 0; i < 32; ++i)
    o[i] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, corr[2];
  float sc[64];
  g90::mbarWait(qFull, 0);
  if constexpr (!Overlap) {
    for (int j = 0, s = 0, ph = 0; j < nTiles; ++j) {
      g90::mbarWait(&full[s], ph);
      g90::wgmmaFence();
      issueScores(sc, dQ, dK(s));
      g90::wgmmaCommit();
      g90::wgmmaWait<0>();
      pin(sc);
      uint32_t pa[8][4];
      softmaxTile(sc, maskOf(j), rowIn, t4, p.scaleLog2, m, l, corr, pa);
      rescale(o, corr);
      pin(o); // the rescaled O and P's fragments written before the fence
      pin(pa);
      g90::wgmmaFence();
      issuePV(o, pa, dV(s));
      g90::wgmmaCommit();
      g90::wgmmaWait<0>();
      pin(o);
      release(s);
      if (++s == kStages)
        s = 0, ph ^= 1;
    }
  } else {
    uint32_t pa0[8][4], pa1[8][4]; // P of the even / odd tiles
    g90::mbarWait(&full[0], 0);
    g90::wgmmaFence();
    issueScores(sc, dQ, dK(0));
    g90::wgmmaCommit();
    g90::wgmmaWait<0>();
    pin(sc);
    softmaxTile(sc, maskOf(0), rowIn, t4, p.scaleLog2, m, l, corr, pa0); // O is zero
    auto step = [&](int j, uint32_t(&paCur)[8][4], uint32_t(&paPrev)[8][4]) {
      const int s = j % kStages, sp = (j - 1) % kStages;
      g90::mbarWait(&full[s], (j / kStages) & 1);
      pin(o);
      pin(paPrev);
      g90::wgmmaFence();
      issueScores(sc, dQ, dK(s));
      g90::wgmmaCommit();
      issuePV(o, paPrev, dV(sp));
      g90::wgmmaCommit();
      g90::wgmmaWait<1>(); // S_j done; PV_{j-1} runs on under the softmax
      pin(sc);
      softmaxTile(sc, maskOf(j), rowIn, t4, p.scaleLog2, m, l, corr, paCur);
      g90::wgmmaWait<0>();
      pin(o);
      rescale(o, corr);
      release(sp);
    };
    for (int j = 1; j < nTiles; j += 2) {
      step(j, pa1, pa0);
      if (j + 1 < nTiles)
        step(j + 1, pa0, pa1);
    }
    const int last = nTiles - 1, sl = last % kStages;
    pin(o);
    pin(pa0);
    pin(pa1);
    g90::wgmmaFence();
    if (last & 1)
      issuePV(o, pa1, dV(sl));
    else
      issuePV(o, pa0, dV(sl));
    g90::wgmmaCommit();
    g90::wgmmaWait<0>();
    pin(o);
    release(sl);
  }
  // The rows' sums over their 4 lanes; out = O / l, lse, out's amax.
  float amax = 0.0f;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    l[hh] += __shfl_xor_sync(kern::kFullMask, l[hh], 1);
    l[hh] += __shfl_xor_sync(kern::kFullMask, l[hh], 2);
    const int row = q0 + rowIn + 8 * hh;
    if (row >= p.tq)
      continue;
    const float inv = l[hh] > 0.0f ? 1.0f / l[hh] : 0.0f;
    bf16 *orow = p.out + b * p.os.batch + h * p.os.head + static_cast<int64_t>(row) * p.os.row;
#pragma unroll
    for (int jj = 0; jj < 8; ++jj) {
      const float a0 = o[4 * jj + 2 * hh] * inv, a1 = o[4 * jj + 2 * hh + 1] * inv;
      *reinterpret_cast<__nv_bfloat162 *>(orow + 8 * jj + 2 * t4) = __floats2bfloat162_rn(a0, a1);
      amax = fmaxf(amax, fmaxf(fabsf(a0), fabsf(a1)));
    }
    if (p.lse && t4 == 0)
      p.lse[static_cast<int64_t>(bh) * p.tq + row] =
          l[hh] > 0.0f ? m[hh] * kLn2 + logf(l[hh]) : -INFINITY;
  }
  kern::warpAmax<bf16>(p.amax, amax);
}

//===----------------------------------------------------------------------===//
// The backward: dQ (and D) over key tiles, then dK / dV over query tiles
//===----------------------------------------------------------------------===//

/// S^T-shaped m64n64k16 from shared memory (A and B K-major, 128-byte
/// swizzle): the dK/dV kernel's K Q^T and V dO^T.
__device__ __forceinline__ void wgmma64(float (&d)[32], uint64_t descA, uint64_t descB,
                                        int scaleD) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
               "{" TC_R32 "}, "
               "%32, %33, p, 1, 1, 0, 0;\n}\n"
               : TC_F32
               : "l"(descA), "l"(descB), "r"(scaleD));
}

__device__ __forceinline__ void tmaLoad1d(void *dst, const CUtensorMap *map, uint64_t *bar,
                                          int c0) {
  asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3}], [%2];\n" ::"r"(g90::smemAddr(dst)),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(g90::smemAddr(bar)), "r"(c0)
               : "memory");
}

/// The two consumer warpgroups (threads 128..383) meet.
__device__ __forceinline__ void consumersSync() { g90::namedBarrier(1, 256); }

/// Stores a warpgroup's 64 x 64 accumulator (m64n64 layout: rows rowIn and
/// rowIn + 8, columns 8 jj + 2 t4 (+1)) times scale as bf16 rows of g (row
/// stride rs), rows[h] false left out; their |max| into amax.
__device__ __forceinline__ void storeTile(bf16 *g, int64_t rs, int rowIn, const bool (&rows)[2],
                                          const float (&acc)[32], float scale, int t4,
                                          float &amax) {
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    if (!rows[hh])
      continue;
    bf16 *row = g + static_cast<int64_t>(rowIn + 8 * hh) * rs + 2 * t4;
#pragma unroll
    for (int jj = 0; jj < 8; ++jj) {
      const float a0 = acc[4 * jj + 2 * hh] * scale, a1 = acc[4 * jj + 2 * hh + 1] * scale;
      *reinterpret_cast<uint32_t *>(row + 8 * jj) = pack2<bf16>(a0, a1);
      amax = fmaxf(amax, fmaxf(fabsf(a0), fabsf(a1)));
    }
  }
}

/// The column sums (AttentionGradSums' partial) of the block's stored rows:
/// both consumer warpgroups' accumulators (as storeTile's), rows[h] false
/// left out, f32 before the bf16 rounding, times scale once a warp. Each
/// thread adds its two rows, a warp's 8 row groups by a fixed butterfly, the
/// 8 warps in order: out[0, 64). smem: 8 x 64 floats. Every consumer thread
/// calls it (two barriers of the consumers).
__device__ __forceinline__ void columnSums(const float (&acc)[32], const bool (&rows)[2],
                                           float scale, float *smem, float *out) {
  const int tid = threadIdx.x - 128, warp = tid / 32, lane = tid % 32, t4 = lane % 4;
  float cs[16];
#pragma unroll
  for (int jj = 0; jj < 8; ++jj)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float a = rows[0] ? acc[4 * jj + e] : 0.0f, b = rows[1] ? acc[4 * jj + 2 + e] : 0.0f;
      cs[2 * jj + e] = a + b;
    }
#pragma unroll
  for (int i = 0; i < 16; ++i) {
#pragma unroll
    for (int x = 4; x < 32; x *= 2)
      cs[i] += __shfl_xor_sync(kern::kFullMask, cs[i], x);
    cs[i] *= scale;
  }
  consumersSync(); // smem's earlier readers are done
  if (lane < 4)
#pragma unroll
    for (int jj = 0; jj < 8; ++jj) {
      smem[warp * kD + 8 * jj + 2 * t4] = cs[2 * jj];
      smem[warp * kD + 8 * jj + 2 * t4 + 1] = cs[2 * jj + 1];
    }
  consumersSync();
  if (tid < kD) {
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < 8; ++w)
      sum += smem[w * kD + tid];
    out[tid] = sum;
  }
}

/// A consumer warpgroup's loop over its block's tiles (tile j in stage j %
/// Stages of the ring `full`): the first products (first(s): S and dP,
/// committed), their elementwise step (mid(j, s): P / dS as A fragments),
/// the second products (second(s), committed, reading those fragments);
/// release(s) once a stage's products are done. In turn: each product
/// waited for. Chained: tile j's second products and tile j + 1's first
/// issued back to back, one wait a tile. The pins keep the compiler's
/// register reads and writes on their side of each fence and wait:
/// pinFirst the first products' accumulators, pinAcc the second's,
/// pinFrags the fragments (never while a second product reads them).
template <bool Chained, int Stages, class First, class Mid, class Second, class PinFirst,
          class PinAcc, class PinFrags, class Release>
__device__ __forceinline__ void tileLoop(int nTiles, uint64_t *full, First first, Mid mid,
                                         Second second, PinFirst pinFirst, PinAcc pinAcc,
                                         PinFrags pinFrags, Release release) {
  if constexpr (!Chained) {
    for (int j = 0, s = 0, ph = 0; j < nTiles; ++j) {
      g90::mbarWait(&full[s], ph);
      g90::wgmmaFence();
      first(s);
      g90::wgmmaWait<0>();
      pinFirst();
      mid(j, s);
      pinAcc();
      pinFrags();
      g90::wgmmaFence();
      second(s);
      g90::wgmmaWait<0>();
      pinAcc();
      release(s);
      if (++s == Stages)
        s = 0, ph ^= 1;
    }
  } else if (nTiles > 0) {
    g90::mbarWait(&full[0], 0);
    pinAcc(); // zeroed before the pipeline starts (ptxas serializes otherwise)
    g90::wgmmaFence();
    first(0);
#pragma unroll 1
    for (int j = 0; j < nTiles; ++j) {
      const int s = j % Stages;
      g90::wgmmaWait<0>(); // tile j's first products; tile j - 1's second
      pinFirst();
      pinAcc();
      if (j > 0)
        release((j - 1) % Stages);
      mid(j, s);
      pinAcc();
      pinFrags();
      g90::wgmmaFence();
      second(s);
      if (j + 1 < nTiles) {
        const int sn = (j + 1) % Stages;
        g90::mbarWait(&full[sn], ((j + 1) / Stages) & 1);
        pinFirst();
        g90::wgmmaFence();
        first(sn);
      }
    }
    g90::wgmmaWait<0>();
    pinAcc();
    release((nTiles - 1) % Stages);
  }
}

/// The dQ kernel's shared memory: Q and dO (128 rows each), the stages' K
/// and V tiles, the column sums' 8 x 64 floats, the barriers.
struct DqLayout {
  static constexpr int kStages = 3;
  static constexpr int q = 0, dO = kTile, k = 2 * kTile, v = k + kStages * kTile,
                       sums = v + kStages * kTile, bars = sums + 8 * kD * 4,
                       bytes = bars + 64 + 1024;
};

/// dQ (bf16, p.dq) and D = rowsum(dO out) (f32, p.dd, which the dK/dV
/// kernel reads): a block owns 128 queries of one (batch, head), two
/// consumer warpgroups of 64; Q and dO loaded once, K / V tiles of 128 keys
/// (the head's kv head's) in three stages. Per tile S = Q K^T and dP = dO V^T
/// (m64n128k16 from shared memory), P = exp(S scale - lse) (0 past tk and,
/// causal, where key > query), dS = P (dP - D), dQ += dS K (dS's bf16 A
/// fragments in registers, K as the transposed B). dQ = scale dQ stored with
/// its amax (p.amaxOf's kAmaxOfDq) and, with p.csQ, the column sums of the
/// block's rows at p.csQ + (b ceil(tq / 128) + query block) csRowQ + h 64.
/// Grid: ceil(tq / 128) * batch * heads blocks of 384 threads, one an SM
/// (causal: the last query blocks, the most key tiles, first). Chained:
/// tile j's dQ product and tile j + 1's S and dP issued back to back; else
/// each product waited for.
template <bool Chained>
__global__ void __launch_bounds__(384, 1)
    tmaDqKernel(const __grid_constant__ CUtensorMap mapQ, const __grid_constant__ CUtensorMap mapK,
                const __grid_constant__ CUtensorMap mapV, const __grid_constant__ CUtensorMap mapDO,
                const FastParams<bf16> p) {
  using L = DqLayout;
  constexpr int kStages = L::kStages;
  extern __shared__ unsigned char smemRaw[];
  unsigned char *base = g90::alignedSmem(smemRaw);
  uint64_t *bars = reinterpret_cast<uint64_t *>(base + L::bars);
  uint64_t *qFull = bars, *full = bars + 1, *empty = bars + 1 + kStages;
  const QueryBlock128 qbk(p);
  const int nQ = qbk.nQ, qb = qbk.qb, bh = qbk.bh, b = qbk.b, h = qbk.h, q0 = qbk.q0;
  const int nTiles = qbk.nTiles;
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  initBarriers(qFull, full, empty, kStages);
  if (wg == 0) {
    g90::setMaxRegsDec<24>();
    if (tid == 0) {
      g90::mbarExpectTx(qFull, 2 * kTile);
      tmaLoad4d(base + L::q, &mapQ, qFull, 0, q0, h, b);
      tmaLoad4d(base + L::dO, &mapDO, qFull, 0, q0, h, b);
      loadKeyTiles<kStages>(base + L::k, base + L::v, &mapK, &mapV, full, empty, qbk);
    }
    return;
  }
  g90::setMaxRegsInc<240>();
  const int g = wg - 1, warp = tid / 32, lane = tid % 32, t4 = lane % 4;
  const int rowIn = 64 * g + 16 * warp + lane / 4; // this thread's first row in the block (+8)
  bool rows[2];
  float l2[2], ddr[2]; // the rows' lse (log2 domain) and D
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    // D of the row from out and dO as stored: 16 columns a lane, 4 lanes a row.
    const int row = q0 + rowIn + 8 * hh;
    rows[hh] = row < p.tq;
    float dot = 0.0f;
    if (rows[hh]) {
      const bf16 *o = p.o + b * p.os.batch + h * p.os.head + static_cast<int64_t>(row) * p.os.row,
                 *d = p.dout + b * p.dos.batch + h * p.dos.head +
                      static_cast<int64_t>(row) * p.dos.row;
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const uint4 ov = *reinterpret_cast<const uint4 *>(o + 16 * t4 + 8 * c),
                    dv = *reinterpret_cast<const uint4 *>(d + 16 * t4 + 8 * c);
        const uint32_t ow[4] = {ov.x, ov.y, ov.z, ov.w}, dw[4] = {dv.x, dv.y, dv.z, dv.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 of = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&ow[e])),
                       df = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&dw[e]));
          dot = fmaf(of.x, df.x, dot);
          dot = fmaf(of.y, df.y, dot);
        }
      }
    }
    dot += __shfl_xor_sync(kern::kFullMask, dot, 1);
    dot += __shfl_xor_sync(kern::kFullMask, dot, 2);
    ddr[hh] = dot;
    l2[hh] = rows[hh] ? p.lseIn[static_cast<int64_t>(bh) * p.tq + row] * kLog2e : 0.0f;
    if (rows[hh] && t4 == 0)
      p.dd[static_cast<int64_t>(bh) * p.tq + row] = dot;
  }
  const uint64_t dQd = g90::descSw128(base + L::q + g * 64 * kD * 2),
                 dOd = g90::descSw128(base + L::dO + g * 64 * kD * 2);
  float acc[32];
#pragma unroll
  for (int i = 0; i < 32; ++i)
    acc[i] = 0.0f;
  auto dK = [&](int s) { return g90::descSw128(base + L::k + s * kTile); };
  auto dV = [&](int s) { return g90::descSw128(base + L::v + s * kTile); };
  auto release = [&](int s) {
    if (tid == 0)
      g90::mbarArrive(&empty[s]);
  };
  float sc[64], dp[64];
  // S and dP of the tile in stage s, committed (the caller fences).
  auto issueSdP = [&](int s) {
    issueScores(sc, dQd, dK(s));
    issueScores(dp, dOd, dV(s));
    g90::wgmmaCommit();
  };
  // dS of tile j from its finished S and dP, as bf16 A fragments of 8
  // k-steps of 16 keys.
  auto dsOf = [&](int j, uint32_t(&da)[8][4]) {
    // A row's columns from lim[h] on are masked (past tk, or key > query).
    const int kLim = p.tk - j * kBN, kRel = j * kBN - q0;
    int lim[2];
#pragma unroll
    for (int hh = 0; hh < 2; ++hh)
      lim[hh] = p.causal ? min(kLim, rowIn + 8 * hh - kRel + 1) : kLim;
#pragma unroll
    for (int jj = 0; jj < 16; ++jj) {
      float ds[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 4 * jj + e, col = 8 * jj + 2 * t4 + (e % 2);
        const float pr =
            col >= lim[e / 2] ? 0.0f : kern::exp2Ftz(sc[i] * p.scaleLog2 - l2[e / 2]);
        ds[e] = pr * (dp[i] - ddr[e / 2]);
      }
      da[jj / 2][2 * (jj % 2)] = pack2<bf16>(ds[0], ds[1]);
      da[jj / 2][2 * (jj % 2) + 1] = pack2<bf16>(ds[2], ds[3]);
    }
  };
  auto dqOf = [&](int s, uint32_t(&da)[8][4]) { // dQ += dS K, committed
    issuePV(acc, da, g90::descSw128N(base + L::k + s * kTile));
    g90::wgmmaCommit();
  };
  g90::mbarWait(qFull, 0);
  uint32_t da[8][4];
  tileLoop<Chained, kStages>(
      nTiles, full, issueSdP, [&](int j, int) { dsOf(j, da); }, [&](int s) { dqOf(s, da); },
      [&] {
        pin(sc);
        pin(dp);
      },
      [&] { pin(acc); }, [&] { pin(da); }, release);
  float amax = 0.0f;
  storeTile(p.dq + b * p.dqs.batch + h * p.dqs.head + static_cast<int64_t>(q0) * p.dqs.row,
            p.dqs.row, rowIn, rows, acc, p.scale, t4, amax);
  kern::warpAmax<bf16>(gradAmax(p, kAmaxOfDq), amax);
  if (p.csQ) {
    const int64_t chunk = static_cast<int64_t>(b) * nQ + qb;
    columnSums(acc, rows, p.scale, reinterpret_cast<float *>(base + L::sums),
               p.csQ + chunk * p.csRowQ + static_cast<int64_t>(h) * kD);
  }
}

/// The dK/dV kernel's shared memory: K and V (128 rows each), the stages'
/// Q and dO tiles of 64 rows and their 64 lse and D values, the column
/// sums' 8 x 64 floats, the barriers.
struct DkDvLayout {
  static constexpr int kStages = 3, kRows = 64, kQTile = kRows * kD * 2;
  static constexpr int k = 0, v = kTile, q = 2 * kTile, dO = q + kStages * kQTile,
                       lse = dO + kStages * kQTile, dd = lse + kStages * kRows * 4,
                       sums = dd + kStages * kRows * 4, bars = sums + 8 * kD * 4,
                       bytes = bars + 64 + 1024;
};

/// dK and dV (bf16): a block owns 128 keys of one (batch, kv head), two
/// consumer warpgroups of 64; K and V loaded once; query tiles of 64 rows of
/// each query head of the kv head's group in turn (Q, dO, and their lse and
/// D rows: mapL / mapD, 1-D maps over [batch heads tq] f32) in three stages.
/// Per tile S^T = K Q^T and dP^T = V dO^T (m64n64k16 from shared memory),
/// P^T = exp(S^T scale - lse) (0 for queries past tq and, causal, where key
/// > query), dS^T = P^T (dP^T - D), then dV += P^T dO and dK += dS^T Q (P^T
/// and dS^T as bf16 A fragments in registers, dO and Q as the transposed B).
/// dK = scale dK and dV stored with their amax (p.amaxOf's bits) and, with
/// p.csK, the column sums at p.csK / p.csV + (b ceil(tk / 128) + key block)
/// csRowKV + kvh 64. Grid: ceil(tk / 128) * batch * kvHeads blocks of 384
/// threads (causal: the first keys, the most query tiles, first). Chained
/// as tmaDqKernel's.
template <bool Chained>
__global__ void __launch_bounds__(384, 1)
    tmaDkDvKernel(const __grid_constant__ CUtensorMap mapQ, const __grid_constant__ CUtensorMap mapK,
                  const __grid_constant__ CUtensorMap mapV,
                  const __grid_constant__ CUtensorMap mapDO,
                  const __grid_constant__ CUtensorMap mapL,
                  const __grid_constant__ CUtensorMap mapD, const FastParams<bf16> p) {
  using L = DkDvLayout;
  constexpr int kStages = L::kStages, R = L::kRows;
  extern __shared__ unsigned char smemRaw[];
  unsigned char *base = g90::alignedSmem(smemRaw);
  uint64_t *bars = reinterpret_cast<uint64_t *>(base + L::bars);
  uint64_t *kvFull = bars, *full = bars + 1, *empty = bars + 1 + kStages;
  const float *sL = reinterpret_cast<const float *>(base + L::lse),
              *sD = reinterpret_cast<const float *>(base + L::dd);
  const int BKV = p.batch * p.kvHeads;
  const int kb = static_cast<int>(blockIdx.x) / BKV, bkv = static_cast<int>(blockIdx.x) % BKV;
  const int b = bkv / p.kvHeads, kvh = bkv % p.kvHeads, k0 = kb * kBN;
  const int nQt = (p.tq + R - 1) / R, qt0 = p.causal ? min(k0 / R, nQt) : 0; // causal: q >= key
  const int per = nQt - qt0, nTiles = per * p.group;
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  initBarriers(kvFull, full, empty, kStages);
  if (wg == 0) {
    g90::setMaxRegsDec<24>();
    if (tid == 0) {
      g90::mbarExpectTx(kvFull, 2 * kTile);
      tmaLoad4d(base + L::k, &mapK, kvFull, 0, k0, kvh, b);
      tmaLoad4d(base + L::v, &mapV, kvFull, 0, k0, kvh, b);
      for (int i = 0, s = 0, ph = 0; i < nTiles; ++i) {
        const int hq = kvh * p.group + i / per, q0 = (qt0 + i % per) * R;
        const int row = (b * p.heads + hq) * p.tq + q0; // of lse and D
        g90::mbarWait(&empty[s], ph ^ 1);
        g90::mbarExpectTx(&full[s], 2 * L::kQTile + 2 * R * 4);
        tmaLoad4d(base + L::q + s * L::kQTile, &mapQ, &full[s], 0, q0, hq, b);
        tmaLoad4d(base + L::dO + s * L::kQTile, &mapDO, &full[s], 0, q0, hq, b);
        tmaLoad1d(base + L::lse + s * R * 4, &mapL, &full[s], row);
        tmaLoad1d(base + L::dd + s * R * 4, &mapD, &full[s], row);
        if (++s == kStages)
          s = 0, ph ^= 1;
      }
    }
    return;
  }
  g90::setMaxRegsInc<240>();
  const int g = wg - 1, warp = tid / 32, lane = tid % 32, t4 = lane % 4;
  const int keyIn = 64 * g + 16 * warp + lane / 4; // this thread's first key in the block (+8)
  const uint64_t dKd = g90::descSw128(base + L::k + g * 64 * kD * 2),
                 dVd = g90::descSw128(base + L::v + g * 64 * kD * 2);
  float adk[32], adv[32];
#pragma unroll
  for (int i = 0; i < 32; ++i)
    adk[i] = adv[i] = 0.0f;
  auto release = [&](int s) {
    if (tid == 0)
      g90::mbarArrive(&empty[s]);
  };
  float st[32], dpt[32];
  // S^T and dP^T of the tile in stage s, committed (the caller fences).
  auto issueSdP = [&](int s) {
    const uint64_t dQs = g90::descSw128(base + L::q + s * L::kQTile),
                   dOs = g90::descSw128(base + L::dO + s * L::kQTile);
#pragma unroll
    for (int k = 0; k < kD / 16; ++k)
      wgmma64(st, dKd + 2 * k, dQs + 2 * k, k > 0 ? 1 : 0);
#pragma unroll
    for (int k = 0; k < kD / 16; ++k)
      wgmma64(dpt, dVd + 2 * k, dOs + 2 * k, k > 0 ? 1 : 0);
    g90::wgmmaCommit();
  };
  // P^T and dS^T of tile i (stage s) from its finished S^T and dP^T, as
  // bf16 A fragments of 4 k-steps of 16 queries.
  auto pdsOf = [&](int i, int s, uint32_t(&pa)[4][4], uint32_t(&da)[4][4]) {
    const int q0 = (qt0 + i % per) * R;
    // Column c (query q0 + c) of key row r is kept when lo[r] <= c < hi:
    // queries before tq and, causal, at or after the key.
    const int hi = p.tq - q0;
    int lo[2];
#pragma unroll
    for (int hh = 0; hh < 2; ++hh)
      lo[hh] = p.causal ? k0 + keyIn + 8 * hh - q0 : -R;
    const float *lT = sL + s * R, *dT = sD + s * R;
#pragma unroll
    for (int jj = 0; jj < 8; ++jj) {
      float pv[4], ds[4];
      const int c = 8 * jj + 2 * t4;
      const float2 lv = *reinterpret_cast<const float2 *>(lT + c);
      const float2 dv2 = *reinterpret_cast<const float2 *>(dT + c);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int idx = 4 * jj + e, col = c + (e % 2);
        const float l2 = (e % 2 ? lv.y : lv.x) * kLog2e, dcol = e % 2 ? dv2.y : dv2.x;
        const bool keep = col >= lo[e / 2] && col < hi;
        const float pr = keep ? kern::exp2Ftz(st[idx] * p.scaleLog2 - l2) : 0.0f;
        pv[e] = pr;
        ds[e] = pr * (dpt[idx] - dcol);
      }
      pa[jj / 2][2 * (jj % 2)] = pack2<bf16>(pv[0], pv[1]);
      pa[jj / 2][2 * (jj % 2) + 1] = pack2<bf16>(pv[2], pv[3]);
      da[jj / 2][2 * (jj % 2)] = pack2<bf16>(ds[0], ds[1]);
      da[jj / 2][2 * (jj % 2) + 1] = pack2<bf16>(ds[2], ds[3]);
    }
  };
  // dV += P^T dO and dK += dS^T Q, committed.
  auto dkdvOf = [&](int s, uint32_t(&pa)[4][4], uint32_t(&da)[4][4]) {
    issuePV(adv, pa, g90::descSw128N(base + L::dO + s * L::kQTile));
    issuePV(adk, da, g90::descSw128N(base + L::q + s * L::kQTile));
    g90::wgmmaCommit();
  };
  g90::mbarWait(kvFull, 0); // also when there is no tile: the loads land before the block ends
  uint32_t pa[4][4], da[4][4];
  tileLoop<Chained, kStages>(
      nTiles, full, issueSdP, [&](int i, int s) { pdsOf(i, s, pa, da); },
      [&](int s) { dkdvOf(s, pa, da); },
      [&] {
        pin(st);
        pin(dpt);
      },
      [&] {
        pin(adv);
        pin(adk);
      },
      [&] {
        pin(pa);
        pin(da);
      },
      release);
  bool rows[2];
#pragma unroll
  for (int hh = 0; hh < 2; ++hh)
    rows[hh] = k0 + keyIn + 8 * hh < p.tk;
  float amaxK = 0.0f, amaxV = 0.0f;
  storeTile(p.dk + b * p.dks.batch + kvh * p.dks.head + static_cast<int64_t>(k0) * p.dks.row,
            p.dks.row, keyIn, rows, adk, p.scale, t4, amaxK);
  storeTile(p.dv + b * p.dvs.batch + kvh * p.dvs.head + static_cast<int64_t>(k0) * p.dvs.row,
            p.dvs.row, keyIn, rows, adv, 1.0f, t4, amaxV);
  const float amax = fmaxf(p.amaxOf & kAmaxOfDk ? amaxK : 0.0f, p.amaxOf & kAmaxOfDv ? amaxV : 0.0f);
  kern::warpAmax<bf16>(gradAmax(p, kAmaxOfDk | kAmaxOfDv), amax);
  if (p.csK) {
    const int64_t chunk = static_cast<int64_t>(b) * ((p.tk + kBN - 1) / kBN) + kb;
    float *sums = reinterpret_cast<float *>(base + L::sums);
    columnSums(adk, rows, p.scale, sums, p.csK + chunk * p.csRowKV + static_cast<int64_t>(kvh) * kD);
    columnSums(adv, rows, 1.0f, sums, p.csV + chunk * p.csRowKV + static_cast<int64_t>(kvh) * kD);
  }
}

} // namespace tc::rt::cuda::attn::tma

#endif // TC_BENCH_ATTENTION_TMA_CUH
