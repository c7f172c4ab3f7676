//===- attention_tma.cuh - the TMA/wgmma attention's device pieces -------===//
//
// The forward kernel attention_tma.cu launches (bench/attn_sm90.cu times the
// same kernel) and the device pieces the bench's backward kernels (dQ, dK/dV)
// share with it: the tile sizes and shared-memory layout, the m64n64k16
// product with its A operand in registers, the register pins around wgmma
// fences and waits, the score and PV issues, one tile's online softmax.
// sm_90a only (wgmma).
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_CUDA_KERNELS_ATTENTION_TMA_CUH
#define TC_RUNTIME_CUDA_KERNELS_ATTENTION_TMA_CUH

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
  const int BH = p.batch * p.heads, nQ = (p.tq + kBQ - 1) / kBQ, nK = (p.tk + kBN - 1) / kBN;
  const int qi = static_cast<int>(blockIdx.x) / BH, bh = static_cast<int>(blockIdx.x) % BH;
  const int qb = p.causal ? nQ - 1 - qi : qi, b = bh / p.heads, h = bh % p.heads;
  const int kvh = h / p.group, q0 = qb * kBQ;
  const int nTiles = p.causal ? min(nK, qb + 1) : nK; // causal: keys <= queries
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  initBarriers(qFull, full, empty, kStages);
  if (wg == 0) {
    g90::setMaxRegsDec<24>();
    if (tid == 0) {
      g90::mbarExpectTx(qFull, kTile);
      tmaLoad4d(base + L::q, &mapQ, qFull, 0, q0, h, b);
      for (int j = 0, s = 0, ph = 0; j < nTiles; ++j) {
        g90::mbarWait(&empty[s], ph ^ 1);
        g90::mbarExpectTx(&full[s], 2 * kTile);
        tmaLoad4d(base + L::k + s * kTile, &mapK, &full[s], 0, j * kBN, kvh, b);
        tmaLoad4d(base + L::v + s * kTile, &mapV, &full[s], 0, j * kBN, kvh, b);
        if (++s == kStages)
          s = 0, ph ^= 1;
      }
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

} // namespace tc::rt::cuda::attn::tma

#endif // TC_RUNTIME_CUDA_KERNELS_ATTENTION_TMA_CUH
