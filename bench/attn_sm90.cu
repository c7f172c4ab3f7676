// bench/attn_sm90.cu - a causal attention forward on sm_90a in the
// FlashAttention-3 style (TMA loads with 128-byte swizzle, a producer
// warpgroup, two consumer warpgroups of 64 query rows each, S = Q K^T by
// wgmma from shared memory, O += P V by wgmma with P from registers),
// checked against a naive GPU reference and timed: the measurement that
// decides whether tc's attention forward (mma.sync, FlashAttention-2's
// algorithm: 116-128 us at GPT-2's shape on an H100, bench/RESULTS.md stop
// 34-37) should move to a kernel of this form.
//
//   nvcc -O3 -std=c++17 -I. -gencode arch=compute_90a,code=sm_90a bench/attn_sm90.cu \
//     -lcuda -o attn_sm90
//   attn_sm90 [B H T]...   (default: GPT-2's 16 12 1024; d = 64, bf16, causal)
//
// q, k, v, out: [B, H, T, 64] bf16, contiguous (rows b h T + t); lse: [B H
// T] f32, the natural log of each row's sum of exp(scale q.k). The forward
// is the runtime's kernel (tmaFwdKernel, attention_tma.cuh: what
// TC_ATTN_TMA=1|2 runs), launched as attention_tma.cu launches it: a block
// owns 128 queries of one (b, h); its key tiles are 128 keys, the diagonal
// one masked; the blocks of the last query tiles (the most key tiles) run
// first. Two forms: in turn (a warpgroup waits for each product) and
// overlapped (FlashAttention-3's intra-warpgroup pipelining). The
// backward, deterministic as tc's (no atomics): attnDq (128 queries a
// block, over key tiles) and attnDkDv (128 keys a block, over query tiles
// of 64), both from the forward's out and lse and a random dO.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "cuda_check.h"
#include "runtime/src/cuda/kernels/attention_tma.cuh"

namespace {

using namespace tc::rt::cuda::sm90gemm;

using namespace tc::rt::cuda::attn::tma; // the runtime's pieces: tiles, products, softmax
using tc::rt::cuda::attn::pack2;
using tc::rt::cuda::kern::exp2Ftz;
using tc::rt::cuda::kern::kLog2e;

constexpr int D = kD;             // head dim: one 128-byte swizzle row
constexpr int BQ = kBQ, BN = kBN; // queries a block, keys a tile

/// The reference: one block of 128 threads per query row, f32 throughout.
__global__ void attnRef(const bf16 *q, const bf16 *k, const bf16 *v, float *out, float *lse, int T,
                        float scale) {
  __shared__ float sq[D], sp[1024], red[128];
  const long row = blockIdx.x; // bh T + t
  const int t = row % T;
  const long head = row - t;
  if (threadIdx.x < D)
    sq[threadIdx.x] = __bfloat162float(q[row * D + threadIdx.x]);
  __syncthreads();
  float mx = -INFINITY;
  for (int key = threadIdx.x; key <= t; key += blockDim.x) {
    float acc = 0.0f;
    for (int c = 0; c < D; ++c)
      acc += sq[c] * __bfloat162float(k[(head + key) * D + c]);
    sp[key] = acc * scale;
    mx = fmaxf(mx, acc * scale);
  }
  red[threadIdx.x] = mx;
  __syncthreads();
  for (int w = 64; w > 0; w /= 2) {
    if (threadIdx.x < w)
      red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + w]);
    __syncthreads();
  }
  mx = red[0];
  __syncthreads();
  float sum = 0.0f;
  for (int key = threadIdx.x; key <= t; key += blockDim.x) {
    sp[key] = expf(sp[key] - mx);
    sum += sp[key];
  }
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int w = 64; w > 0; w /= 2) {
    if (threadIdx.x < w)
      red[threadIdx.x] += red[threadIdx.x + w];
    __syncthreads();
  }
  sum = red[0];
  if (threadIdx.x < D) {
    float acc = 0.0f;
    for (int key = 0; key <= t; ++key)
      acc += sp[key] * __bfloat162float(v[(head + key) * D + threadIdx.x]);
    out[row * D + threadIdx.x] = acc / sum;
  }
  if (threadIdx.x == 0)
    lse[row] = mx + logf(sum);
}

/// The backward's dQ (bf16, [B, H, T, 64]) in the same form: a block owns
/// 128 queries (two consumer warpgroups of 64), Q and dO loaded once, K/V
/// tiles of 128 keys in two stages; per tile S = Q K^T and dP = dO V^T (both
/// m64n128k16 from shared memory), P = exp(S - lse) (the diagonal masked),
/// dS = P (dP - D), dQ += dS K (m64n64k16, dS's bf16 A fragments in
/// registers, K as the transposed B). lse: natural log; dd = rowsum(dO O).
__global__ void __launch_bounds__(384, 1)
    attnDq(const __grid_constant__ CUtensorMap mapQ, const __grid_constant__ CUtensorMap mapK,
           const __grid_constant__ CUtensorMap mapV, const __grid_constant__ CUtensorMap mapDO,
           const float *__restrict__ lse, const float *__restrict__ dd, bf16 *__restrict__ dq,
           int T, int BH, float scale) {
  constexpr int kStages = 2;
  // Q, dO, then the stages' K and V tiles, then the barriers.
  constexpr int oQ = 0, oDO = BQ * D * 2, oK = 2 * BQ * D * 2, oV = oK + kStages * kTile,
                oBars = oV + kStages * kTile;
  extern __shared__ unsigned char smemRaw[];
  unsigned char *base = alignedSmem(smemRaw);
  uint64_t *bars = reinterpret_cast<uint64_t *>(base + oBars);
  uint64_t *qFull = bars, *full = bars + 1, *empty = bars + 1 + kStages;
  const int nQ = T / BQ;
  const int qb = nQ - 1 - static_cast<int>(blockIdx.x) / BH, bh = blockIdx.x % BH;
  const int q0 = qb * BQ, nTiles = qb + 1;
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  initBarriers(qFull, full, empty, kStages);
  if (wg == 0) {
    setMaxRegsDec<24>();
    if (tid == 0) {
      mbarExpectTx(qFull, 2 * BQ * D * 2);
      tmaLoad2d(base + oQ, &mapQ, qFull, 0, bh * T + q0);
      tmaLoad2d(base + oDO, &mapDO, qFull, 0, bh * T + q0);
      for (int j = 0, s = 0, ph = 0; j < nTiles; ++j) {
        mbarWait(&empty[s], ph ^ 1);
        mbarExpectTx(&full[s], 2 * kTile);
        tmaLoad2d(base + oK + s * kTile, &mapK, &full[s], 0, bh * T + j * BN);
        tmaLoad2d(base + oV + s * kTile, &mapV, &full[s], 0, bh * T + j * BN);
        if (++s == kStages)
          s = 0, ph ^= 1;
      }
    }
    return;
  }
  setMaxRegsInc<240>();
  const int g = wg - 1, warp = tid / 32, lane = tid % 32, t4 = lane % 4;
  const int rowIn = 64 * g + 16 * warp + lane / 4;
  const uint64_t dQd = descSw128(base + oQ + g * 64 * D * 2),
                 dOd = descSw128(base + oDO + g * 64 * D * 2);
  const float scaleLog2 = scale * kLog2e;
  float l2[2], ddr[2]; // the rows' lse (log2 domain) and D
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const long row = static_cast<long>(bh) * T + q0 + rowIn + 8 * h;
    l2[h] = lse[row] * kLog2e;
    ddr[h] = dd[row];
  }
  float acc[32];
#pragma unroll
  for (int i = 0; i < 32; ++i)
    acc[i] = 0.0f;
  mbarWait(qFull, 0);
  for (int j = 0, s = 0, ph = 0; j < nTiles; ++j) {
    mbarWait(&full[s], ph);
    const uint64_t dK = descSw128(base + oK + s * kTile), dV = descSw128(base + oV + s * kTile);
    float sc[64], dp[64];
    wgmmaFence();
#pragma unroll
    for (int k = 0; k < D / 16; ++k)
      wgmma128<0>(sc, dQd + 2 * k, dK + 2 * k, k > 0 ? 1 : 0);
#pragma unroll
    for (int k = 0; k < D / 16; ++k)
      wgmma128<0>(dp, dOd + 2 * k, dV + 2 * k, k > 0 ? 1 : 0);
    wgmmaCommit();
    wgmmaWait<0>();
    pin(sc);
    pin(dp);
    const bool diag = j == qb;
    uint32_t da[8][4]; // dS as the A fragments of 8 k-steps of 16 keys
#pragma unroll
    for (int jj = 0; jj < 16; ++jj) {
      float ds[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 4 * jj + e, row = rowIn + 8 * (e / 2), col = 8 * jj + 2 * t4 + (e % 2);
        const float p = diag && col > row ? 0.0f : exp2Ftz(sc[i] * scaleLog2 - l2[e / 2]);
        ds[e] = p * (dp[i] - ddr[e / 2]);
      }
      da[jj / 2][2 * (jj % 2)] = pack2<bf16>(ds[0], ds[1]);
      da[jj / 2][2 * (jj % 2) + 1] = pack2<bf16>(ds[2], ds[3]);
    }
    pin(acc);
    pin(da);
    wgmmaFence();
    issuePV(acc, da, descSw128N(base + oK + s * kTile)); // dQ += dS K
    wgmmaCommit();
    wgmmaWait<0>();
    pin(acc);
    if (tid == 0)
      mbarArrive(&empty[s]);
    if (++s == kStages)
      s = 0, ph ^= 1;
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    bf16 *drow = dq + (static_cast<long>(bh) * T + q0 + rowIn + 8 * h) * D;
#pragma unroll
    for (int jj = 0; jj < 8; ++jj)
      *reinterpret_cast<__nv_bfloat162 *>(drow + 8 * jj + 2 * t4) =
          __floats2bfloat162_rn(acc[4 * jj + 2 * h] * scale, acc[4 * jj + 2 * h + 1] * scale);
  }
}
constexpr int kDqSmem = 2 * BQ * D * 2 + 4 * kTile + 64 + 1024;

/// D = rowsum(dO O) in f32, a warp a row.
__global__ void rowDots(const bf16 *a, const bf16 *b, float *out, long rows) {
  const long row = (static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows)
    return;
  float acc = 0.0f;
  for (int c = lane; c < D; c += 32)
    acc += __bfloat162float(a[row * D + c]) * __bfloat162float(b[row * D + c]);
  for (int o = 16; o > 0; o /= 2)
    acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane == 0)
    out[row] = acc;
}

/// dQ's reference: a block of 128 threads per query row, f32 throughout.
__global__ void dqRef(const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *dout,
                      const float *lse, const float *dd, float *dq, int T, float scale) {
  __shared__ float sq[D], sdo[D], sds[1024];
  const long row = blockIdx.x;
  const int t = row % T;
  const long head = row - t;
  if (threadIdx.x < D) {
    sq[threadIdx.x] = __bfloat162float(q[row * D + threadIdx.x]);
    sdo[threadIdx.x] = __bfloat162float(dout[row * D + threadIdx.x]);
  }
  __syncthreads();
  for (int key = threadIdx.x; key <= t; key += blockDim.x) {
    float s = 0.0f, dp = 0.0f;
    for (int c = 0; c < D; ++c) {
      s += sq[c] * __bfloat162float(k[(head + key) * D + c]);
      dp += sdo[c] * __bfloat162float(v[(head + key) * D + c]);
    }
    const float p = expf(s * scale - lse[row]);
    sds[key] = p * (dp - dd[row]);
  }
  __syncthreads();
  if (threadIdx.x < D) {
    float acc = 0.0f;
    for (int key = 0; key <= t; ++key)
      acc += sds[key] * __bfloat162float(k[(head + key) * D + threadIdx.x]);
    dq[row * D + threadIdx.x] = acc * scale;
  }
}

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

__device__ __forceinline__ void bulkLoad(void *dst, const void *src, uint32_t bytes,
                                         uint64_t *bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
               "[%3];\n" ::"r"(smemAddr(dst)),
               "l"(src), "r"(bytes), "r"(smemAddr(bar))
               : "memory");
}

/// The backward's dK and dV in the same form: a block owns 128 keys (two
/// consumer warpgroups of 64), K and V loaded once; query tiles of 64 (Q,
/// dO, and their lse and D rows) in three stages. Per tile S^T = K Q^T and
/// dP^T = V dO^T (m64n64k16 from shared memory), P^T = exp(S^T - lse)
/// (key > query masked), dS^T = P^T (dP^T - D), then dV += P^T dO and dK +=
/// dS^T Q (m64n64k16 with P^T / dS^T as bf16 A fragments in registers, dO and
/// Q as the transposed B). The blocks of the first keys (the most query
/// tiles) run first.
__global__ void __launch_bounds__(384, 1)
    attnDkDv(const __grid_constant__ CUtensorMap mapQ64, const __grid_constant__ CUtensorMap mapK,
             const __grid_constant__ CUtensorMap mapV, const __grid_constant__ CUtensorMap mapDO64,
             const float *__restrict__ lse, const float *__restrict__ dd, bf16 *__restrict__ dk,
             bf16 *__restrict__ dv, int T, int BH, float scale) {
  constexpr int kStages = 3, BQ2 = 64, kQTile = BQ2 * D * 2;
  constexpr int oK = 0, oV = kTile, oQ = 2 * kTile, oDO = oQ + kStages * kQTile,
                oL = oDO + kStages * kQTile, oD = oL + kStages * BQ2 * 4,
                oBars = oD + kStages * BQ2 * 4;
  extern __shared__ unsigned char smemRaw[];
  unsigned char *base = alignedSmem(smemRaw);
  uint64_t *bars = reinterpret_cast<uint64_t *>(base + oBars);
  uint64_t *kvFull = bars, *full = bars + 1, *empty = bars + 1 + kStages;
  const float *sL = reinterpret_cast<const float *>(base + oL),
              *sD = reinterpret_cast<const float *>(base + oD);
  const int kb = static_cast<int>(blockIdx.x) / BH, bh = blockIdx.x % BH;
  const int k0 = kb * BN, qt0 = k0 / BQ2, nTiles = T / BQ2 - qt0; // causal: queries >= keys
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  initBarriers(kvFull, full, empty, kStages);
  if (wg == 0) {
    setMaxRegsDec<24>();
    if (tid == 0) {
      mbarExpectTx(kvFull, 2 * kTile);
      tmaLoad2d(base + oK, &mapK, kvFull, 0, bh * T + k0);
      tmaLoad2d(base + oV, &mapV, kvFull, 0, bh * T + k0);
      for (int i = 0, s = 0, ph = 0; i < nTiles; ++i) {
        const int q0 = (qt0 + i) * BQ2;
        mbarWait(&empty[s], ph ^ 1);
        mbarExpectTx(&full[s], 2 * kQTile + 2 * BQ2 * 4);
        tmaLoad2d(base + oQ + s * kQTile, &mapQ64, &full[s], 0, bh * T + q0);
        tmaLoad2d(base + oDO + s * kQTile, &mapDO64, &full[s], 0, bh * T + q0);
        bulkLoad(base + oL + s * BQ2 * 4, lse + static_cast<long>(bh) * T + q0, BQ2 * 4, &full[s]);
        bulkLoad(base + oD + s * BQ2 * 4, dd + static_cast<long>(bh) * T + q0, BQ2 * 4, &full[s]);
        if (++s == kStages)
          s = 0, ph ^= 1;
      }
    }
    return;
  }
  setMaxRegsInc<240>();
  const int g = wg - 1, warp = tid / 32, lane = tid % 32, t4 = lane % 4;
  const int keyIn = 64 * g + 16 * warp + lane / 4; // this thread's first key in the block (+8)
  const uint64_t dKd = descSw128(base + oK + g * 64 * D * 2),
                 dVd = descSw128(base + oV + g * 64 * D * 2);
  const float scaleLog2 = scale * kLog2e;
  float adk[32], adv[32];
#pragma unroll
  for (int i = 0; i < 32; ++i)
    adk[i] = adv[i] = 0.0f;
  mbarWait(kvFull, 0);
  for (int i = 0, s = 0, ph = 0; i < nTiles; ++i) {
    mbarWait(&full[s], ph);
    const int qIn0 = (qt0 + i) * BQ2 - k0; // the tile's first query less k0
    const uint64_t dQs = descSw128(base + oQ + s * kQTile),
                   dOs = descSw128(base + oDO + s * kQTile);
    float st[32], dpt[32];
    wgmmaFence();
#pragma unroll
    for (int k = 0; k < D / 16; ++k)
      wgmma64(st, dKd + 2 * k, dQs + 2 * k, k > 0 ? 1 : 0);
#pragma unroll
    for (int k = 0; k < D / 16; ++k)
      wgmma64(dpt, dVd + 2 * k, dOs + 2 * k, k > 0 ? 1 : 0);
    wgmmaCommit();
    wgmmaWait<0>();
    pin(st);
    pin(dpt);
    const float *lT = sL + s * BQ2, *dT = sD + s * BQ2;
    const bool edge = qIn0 < 128; // a tile that can hold key > query
    uint32_t pa[4][4], da[4][4];
#pragma unroll
    for (int jj = 0; jj < 8; ++jj) {
      float pv[4], ds[4];
      const int c = 8 * jj + 2 * t4;
      const float2 lv = *reinterpret_cast<const float2 *>(lT + c);
      const float2 dv2 = *reinterpret_cast<const float2 *>(dT + c);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int idx = 4 * jj + e, key = keyIn + 8 * (e / 2), col = c + (e % 2);
        const float l2 = (e % 2 ? lv.y : lv.x) * kLog2e, dcol = e % 2 ? dv2.y : dv2.x;
        const float p = edge && key > qIn0 + col ? 0.0f : exp2Ftz(st[idx] * scaleLog2 - l2);
        pv[e] = p;
        ds[e] = p * (dpt[idx] - dcol);
      }
      pa[jj / 2][2 * (jj % 2)] = pack2<bf16>(pv[0], pv[1]);
      pa[jj / 2][2 * (jj % 2) + 1] = pack2<bf16>(pv[2], pv[3]);
      da[jj / 2][2 * (jj % 2)] = pack2<bf16>(ds[0], ds[1]);
      da[jj / 2][2 * (jj % 2) + 1] = pack2<bf16>(ds[2], ds[3]);
    }
    pin(adv);
    pin(adk);
    pin(pa);
    pin(da);
    wgmmaFence();
    issuePV(adv, pa, descSw128N(base + oDO + s * kQTile)); // dV += P^T dO
    issuePV(adk, da, descSw128N(base + oQ + s * kQTile));  // dK += dS^T Q
    wgmmaCommit();
    wgmmaWait<0>();
    pin(adv);
    pin(adk);
    if (tid == 0)
      mbarArrive(&empty[s]);
    if (++s == kStages)
      s = 0, ph ^= 1;
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const long row = static_cast<long>(bh) * T + k0 + keyIn + 8 * h;
#pragma unroll
    for (int jj = 0; jj < 8; ++jj) {
      *reinterpret_cast<__nv_bfloat162 *>(dk + row * D + 8 * jj + 2 * t4) =
          __floats2bfloat162_rn(adk[4 * jj + 2 * h] * scale, adk[4 * jj + 2 * h + 1] * scale);
      *reinterpret_cast<__nv_bfloat162 *>(dv + row * D + 8 * jj + 2 * t4) =
          __floats2bfloat162_rn(adv[4 * jj + 2 * h], adv[4 * jj + 2 * h + 1]);
    }
  }
}
constexpr int kDkDvSmem = 2 * kTile + 3 * 2 * 64 * D * 2 + 3 * 2 * 64 * 4 + 64 + 1024;

/// dK and dV's reference: a block of 128 threads per key row, f32.
__global__ void dkdvRef(const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *dout,
                        const float *lse, const float *dd, float *dk, float *dv, int T,
                        float scale) {
  __shared__ float sk[D], sv[D], sp[1024], sds[1024];
  const long row = blockIdx.x;
  const int key = row % T;
  const long head = row - key;
  if (threadIdx.x < D) {
    sk[threadIdx.x] = __bfloat162float(k[row * D + threadIdx.x]);
    sv[threadIdx.x] = __bfloat162float(v[row * D + threadIdx.x]);
  }
  __syncthreads();
  for (int qq = key + threadIdx.x; qq < T; qq += blockDim.x) {
    float s = 0.0f, dp = 0.0f;
    for (int c = 0; c < D; ++c) {
      s += sk[c] * __bfloat162float(q[(head + qq) * D + c]);
      dp += sv[c] * __bfloat162float(dout[(head + qq) * D + c]);
    }
    const float p = expf(s * scale - lse[head + qq]);
    sp[qq] = p;
    sds[qq] = p * (dp - dd[head + qq]);
  }
  __syncthreads();
  if (threadIdx.x < D) {
    float ak = 0.0f, av = 0.0f;
    for (int qq = key; qq < T; ++qq) {
      ak += sds[qq] * __bfloat162float(q[(head + qq) * D + threadIdx.x]);
      av += sp[qq] * __bfloat162float(dout[(head + qq) * D + threadIdx.x]);
    }
    dk[row * D + threadIdx.x] = ak * scale;
    dv[row * D + threadIdx.x] = av;
  }
}

/// A 128-byte-swizzled tensor map of a bf16 operand whose rows are 64 wide:
/// `rank` dims (innermost first, dims[0] = 64) and the byte strides of dims 1
/// and up, read in boxes of box[]. Exits on failure.
CUtensorMap encodeMap(const bf16 *p, int rank, const cuuint64_t *dims, const cuuint64_t *strides,
                      const cuuint32_t *box) {
  CUtensorMap map;
  const cuuint32_t elem[4] = {1, 1, 1, 1};
  CUresult r = cuTensorMapEncodeTiled(
      &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank, const_cast<bf16 *>(p), dims, strides, box, elem,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled (rank %d): %d\n", rank, int(r));
    std::exit(1);
  }
  return map;
}

/// [rows, 64] in boxes of boxRows rows (the backward kernels' operands).
CUtensorMap tileMap(const bf16 *p, long rows, int boxRows = 128) {
  const cuuint64_t dims[2] = {cuuint64_t(D), cuuint64_t(rows)}, strides[1] = {cuuint64_t(D) * 2};
  const cuuint32_t box[2] = {D, cuuint32_t(boxRows)};
  return encodeMap(p, 2, dims, strides, box);
}

/// A contiguous [B, H, T, 64] operand in boxes of 128 rows of one (b, h), as
/// attention_tma.cu encodes the runtime's operands (the forward's).
CUtensorMap map4d(const bf16 *p, int B, int H, int T) {
  const cuuint64_t dims[4] = {cuuint64_t(D), cuuint64_t(T), cuuint64_t(H), cuuint64_t(B)};
  const cuuint64_t strides[3] = {cuuint64_t(D) * 2, cuuint64_t(T) * D * 2,
                                 cuuint64_t(H) * T * D * 2};
  const cuuint32_t box[4] = {D, 128, 1, 1};
  return encodeMap(p, 4, dims, strides, box);
}

} // namespace

int main(int argc, char **argv) {
  std::vector<int> shapes;
  for (int i = 1; i < argc; ++i)
    shapes.push_back(std::atoi(argv[i]));
  if (shapes.empty())
    shapes = {16, 12, 1024};
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  CK(cudaFuncSetAttribute(tmaFwdKernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          TmaLayout<2>::bytes));
  CK(cudaFuncSetAttribute(tmaFwdKernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          TmaLayout<3>::bytes));
  CK(cudaFuncSetAttribute(attnDq, cudaFuncAttributeMaxDynamicSharedMemorySize, kDqSmem));
  CK(cudaFuncSetAttribute(attnDkDv, cudaFuncAttributeMaxDynamicSharedMemorySize, kDkDvSmem));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  bool allOk = true;
  for (size_t i = 0; i + 2 < shapes.size(); i += 3) {
    const int B = shapes[i], H = shapes[i + 1], T = shapes[i + 2], BH = B * H;
    if (T % BQ || T > 1024) {
      std::printf("T %d: not a multiple of %d at most 1024, skipped\n", T, BQ);
      continue;
    }
    const long n = long(BH) * T * D;
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto randomDev = [&] {
      std::vector<bf16> h(n);
      for (auto &x : h)
        x = __float2bfloat16(nd(rng));
      bf16 *d;
      CK(cudaMalloc(&d, n * 2));
      CK(cudaMemcpy(d, h.data(), n * 2, cudaMemcpyHostToDevice));
      return d;
    };
    bf16 *q = randomDev(), *k = randomDev(), *v = randomDev(), *out;
    float *lse, *refOut, *refLse;
    CK(cudaMalloc(&out, n * 2));
    CK(cudaMalloc(&lse, long(BH) * T * 4));
    CK(cudaMalloc(&refOut, n * 4));
    CK(cudaMalloc(&refLse, long(BH) * T * 4));
    const float scale = 1.0f / std::sqrt(float(D));
    attnRef<<<BH * T, 128, 0, s>>>(q, k, v, refOut, refLse, T, scale);
    CK(cudaGetLastError());
    CUtensorMap mq = tileMap(q, long(BH) * T), mk = tileMap(k, long(BH) * T),
                mv = tileMap(v, long(BH) * T);
    // The runtime's forward kernel (attention_tma.cuh) on [B, H, T, 64]:
    // its parameters and 4-D tensor maps as attention_tma.cu makes them.
    tc::rt::cuda::attn::FastParams<bf16> fp{};
    fp.q = q, fp.k = k, fp.v = v, fp.out = out, fp.lse = lse;
    fp.qs = fp.ks = fp.vs = fp.os = {long(H) * T * D, long(T) * D, D};
    fp.batch = B, fp.heads = fp.kvHeads = H, fp.group = 1, fp.tq = fp.tk = T;
    fp.scale = scale, fp.scaleLog2 = scale * kLog2e, fp.causal = true;
    CUtensorMap m4q = map4d(q, B, H, T), m4k = map4d(k, B, H, T), m4v = map4d(v, B, H, T);
    for (bool overlap : {false, true}) {
      auto launch = [&] {
        if (overlap)
          tmaFwdKernel<true><<<(T / BQ) * BH, 384, TmaLayout<3>::bytes, s>>>(m4q, m4k, m4v, fp);
        else
          tmaFwdKernel<false><<<(T / BQ) * BH, 384, TmaLayout<2>::bytes, s>>>(m4q, m4k, m4v, fp);
      };
      CK(cudaMemset(out, 0, n * 2));
      launch();
      CK(cudaGetLastError());
      CK(cudaStreamSynchronize(s));
      std::vector<bf16> ho(n);
      std::vector<float> hr(n), hl(long(BH) * T), hrl(long(BH) * T);
      CK(cudaMemcpy(ho.data(), out, n * 2, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(hr.data(), refOut, n * 4, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(hl.data(), lse, hl.size() * 4, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(hrl.data(), refLse, hrl.size() * 4, cudaMemcpyDeviceToHost));
      double worst = 0.0, worstL = 0.0;
      long at = 0;
      for (long e = 0; e < n; ++e) {
        double d = std::fabs(double(__bfloat162float(ho[e])) - hr[e]) / (1.0 + std::fabs(hr[e]));
        if (!(d <= worst)) // NaN counts as worst
          worst = d, at = e;
      }
      for (size_t e = 0; e < hl.size(); ++e) {
        double d = std::fabs(double(hl[e]) - hrl[e]) / (1.0 + std::fabs(hrl[e]));
        if (!(d <= worstL))
          worstL = d;
      }
      const bool ok = worst < 2e-2 && worstL < 1e-3;
      allOk = allOk && ok;
      const float us = timeUs(s, 20, launch);
      const double flop = 4.0 * BH * double(T) * T * D / 2; // causal: half of QK^T and PV
      std::printf("%dx%dx%d d%d causal, %s: %s (out worst %.2e at %ld: %g vs %g; lse worst "
                  "%.2e)  %.1f us  %.0f TFLOP/s\n",
                  B, H, T, D, overlap ? "overlapped" : "in turn", ok ? "ok" : "MISMATCH", worst, at,
                  __bfloat162float(ho[at]), hr[at], worstL, us, flop / us / 1e6);
    }
    // The backward's dQ, from the forward's out and lse (the overlapped
    // form's, the last run above) and a random dO.
    {
      bf16 *dout = randomDev(), *dq;
      float *dd, *refDq;
      CK(cudaMalloc(&dq, n * 2));
      CK(cudaMalloc(&refDq, n * 4));
      CK(cudaMalloc(&dd, long(BH) * T * 4));
      rowDots<<<(long(BH) * T * 32 + 255) / 256, 256, 0, s>>>(dout, out, dd, long(BH) * T);
      dqRef<<<BH * T, 128, 0, s>>>(q, k, v, dout, lse, dd, refDq, T, scale);
      CK(cudaGetLastError());
      auto worstOf = [&](const bf16 *got, const float *want, const char *what) {
        std::vector<bf16> hg(n);
        std::vector<float> hw(n);
        CK(cudaMemcpy(hg.data(), got, n * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hw.data(), want, n * 4, cudaMemcpyDeviceToHost));
        double w = 0.0, mx = 0.0;
        long a = 0;
        for (long e = 0; e < n; ++e)
          mx = std::max(mx, double(std::fabs(hw[e])));
        for (long e = 0; e < n; ++e) {
          double d =
              std::fabs(double(__bfloat162float(hg[e])) - hw[e]) / (0.05 * mx + std::fabs(hw[e]));
          if (!(d <= w))
            w = d, a = e;
        }
        std::printf("  %s worst %.2e at %ld: %g vs %g\n", what, w, a, __bfloat162float(hg[a]),
                    hw[a]);
        return w < 5e-2;
      };
      CUtensorMap mdo = tileMap(dout, long(BH) * T);
      auto launch = [&] {
        attnDq<<<(T / BQ) * BH, 384, kDqSmem, s>>>(mq, mk, mv, mdo, lse, dd, dq, T, BH, scale);
      };
      CK(cudaMemset(dq, 0, n * 2));
      launch();
      CK(cudaGetLastError());
      CK(cudaStreamSynchronize(s));
      const bool ok = worstOf(dq, refDq, "dQ (of |ref| + 5% of the largest)");
      allOk = allOk && ok;
      const float us = timeUs(s, 20, launch);
      const double flop = 6.0 * BH * double(T) * T * D / 2; // S, dP, dQ; causal
      std::printf("%dx%dx%d d%d causal, backward dQ: %s  %.1f us  %.0f TFLOP/s\n", B, H, T, D,
                  ok ? "ok" : "MISMATCH", us, flop / us / 1e6);
      // dK and dV.
      bf16 *dk, *dv;
      float *refDk, *refDv;
      CK(cudaMalloc(&dk, n * 2));
      CK(cudaMalloc(&dv, n * 2));
      CK(cudaMalloc(&refDk, n * 4));
      CK(cudaMalloc(&refDv, n * 4));
      dkdvRef<<<BH * T, 128, 0, s>>>(q, k, v, dout, lse, dd, refDk, refDv, T, scale);
      CK(cudaGetLastError());
      CUtensorMap mq64 = tileMap(q, long(BH) * T, 64), mdo64 = tileMap(dout, long(BH) * T, 64);
      auto launchKV = [&] {
        attnDkDv<<<(T / 128) * BH, 384, kDkDvSmem, s>>>(mq64, mk, mv, mdo64, lse, dd, dk, dv, T, BH,
                                                        scale);
      };
      CK(cudaMemset(dk, 0, n * 2));
      CK(cudaMemset(dv, 0, n * 2));
      launchKV();
      CK(cudaGetLastError());
      CK(cudaStreamSynchronize(s));
      const bool okK = worstOf(dk, refDk, "dK"), okV = worstOf(dv, refDv, "dV");
      allOk = allOk && okK && okV;
      const float usKV = timeUs(s, 20, launchKV);
      const double flopKV = 8.0 * BH * double(T) * T * D / 2; // S^T, dP^T, dV, dK; causal
      std::printf("%dx%dx%d d%d causal, backward dK/dV: %s  %.1f us  %.0f TFLOP/s\n", B, H, T, D,
                  okK && okV ? "ok" : "MISMATCH", usKV, flopKV / usKV / 1e6);
      for (void *p : {(void *)dout, (void *)dq, (void *)dd, (void *)refDq, (void *)dk, (void *)dv,
                      (void *)refDk, (void *)refDv})
        CK(cudaFree(p));
    }
    for (void *p : {(void *)q, (void *)k, (void *)v, (void *)out, (void *)lse, (void *)refOut,
                    (void *)refLse})
      CK(cudaFree(p));
  }
  return allOk ? 0 : 1;
}
