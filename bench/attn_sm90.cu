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
// is tmaFwdKernel (bench/attention_tma.cuh; what the runtime's TC_ATTN_TMA=1|2
// ran in stop 40, removed in stop 41), launched as the runtime did: a block
// owns 128 queries of one (b, h); its key tiles are 128 keys, the diagonal
// one masked; the blocks of the last query tiles (the most key tiles) run
// first. Two forms: in turn (a warpgroup waits for each product) and
// overlapped (FlashAttention-3's intra-warpgroup pipelining). The
// backward, deterministic as tc's (no atomics): tmaDqKernel (128 queries a block, over key
// tiles; D = rowsum(dO out) as well) and tmaDkDvKernel (128 keys a block,
// over query tiles of 64), both from the forward's out and lse and a
// random dO.
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
#include "bench/attention_tma.cuh"

namespace {

using namespace tc::rt::cuda::sm90gemm;

using namespace tc::rt::cuda::attn::tma; // the runtime's pieces: tiles, products, softmax
using tc::rt::cuda::attn::pack2;
using tc::rt::cuda::kern::exp2Ftz;
using tc::rt::cuda::kern::kLog2e;

constexpr int D = kD;             // head dim: one 128-byte swizzle row
constexpr int BQ = kBQ; // queries a block

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

/// A contiguous [B, H, T, 64] operand in boxes of `rows` rows of one (b,
/// h), as the runtime encoded its operands in stop 40.
CUtensorMap map4d(const bf16 *p, int B, int H, int T, int rows = 128) {
  const cuuint64_t dims[4] = {cuuint64_t(D), cuuint64_t(T), cuuint64_t(H), cuuint64_t(B)};
  const cuuint64_t strides[3] = {cuuint64_t(D) * 2, cuuint64_t(T) * D * 2,
                                 cuuint64_t(H) * T * D * 2};
  const cuuint32_t box[4] = {D, cuuint32_t(rows), 1, 1};
  return encodeMap(p, 4, dims, strides, box);
}

/// n f32 values in boxes of the dK/dV kernel's query rows (its lse and D).
CUtensorMap map1d(const float *p, long n) {
  CUtensorMap map;
  const cuuint64_t dims[1] = {cuuint64_t(n)}, strides[1] = {0};
  const cuuint32_t box[1] = {DkDvLayout::kRows}, elem[1] = {1};
  CUresult r = cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 1,
                                      const_cast<float *>(p), dims, strides, box, elem,
                                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                      CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled (rank 1): %d\n", int(r));
    std::exit(1);
  }
  return map;
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
  for (auto k : {tmaDqKernel<false>, tmaDqKernel<true>})
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, DqLayout::bytes));
  for (auto k : {tmaDkDvKernel<false>, tmaDkDvKernel<true>})
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, DkDvLayout::bytes));
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
    // The runtime's forward kernel (attention_tma.cuh) on [B, H, T, 64]:
    // its parameters and 4-D tensor maps as the runtime made them in stop 40.
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
      // The runtime's backward kernels (attention_tma.cuh), launched as
      // tmaBackward launches them; the dQ kernel writes D (kdd) too.
      float *kdd;
      bf16 *dk, *dv;
      CK(cudaMalloc(&kdd, long(BH) * T * 4));
      CK(cudaMalloc(&dk, n * 2));
      CK(cudaMalloc(&dv, n * 2));
      tc::rt::cuda::attn::FastParams<bf16> bp = fp;
      bp.o = out, bp.dout = dout, bp.lseIn = lse, bp.dd = kdd, bp.dq = dq, bp.dk = dk, bp.dv = dv;
      bp.dos = bp.dqs = bp.dks = bp.dvs = fp.qs;
      bp.lse = nullptr, bp.out = nullptr;
      CUtensorMap mdo = map4d(dout, B, H, T);
      float *refDk, *refDv;
      CK(cudaMalloc(&refDk, n * 4));
      CK(cudaMalloc(&refDv, n * 4));
      dkdvRef<<<BH * T, 128, 0, s>>>(q, k, v, dout, lse, dd, refDk, refDv, T, scale);
      CK(cudaGetLastError());
      CUtensorMap mq64 = map4d(q, B, H, T, DkDvLayout::kRows),
                  mdo64 = map4d(dout, B, H, T, DkDvLayout::kRows),
                  ml = map1d(lse, long(BH) * T), md = map1d(kdd, long(BH) * T);
      // Both forms: each product waited for (TC_ATTN_TMA=1), and chained
      // (=2: a tile's last product and the next tile's first back to back).
      for (bool chained : {false, true}) {
        const char *form = chained ? "chained" : "in turn";
        auto launch = [&] {
          if (chained)
            tmaDqKernel<true><<<(T / BQ) * BH, 384, DqLayout::bytes, s>>>(m4q, m4k, m4v, mdo, bp);
          else
            tmaDqKernel<false><<<(T / BQ) * BH, 384, DqLayout::bytes, s>>>(m4q, m4k, m4v, mdo, bp);
        };
        CK(cudaMemset(dq, 0, n * 2));
        CK(cudaMemset(kdd, 0, long(BH) * T * 4));
        launch();
        CK(cudaGetLastError());
        CK(cudaStreamSynchronize(s));
        bool ok = worstOf(dq, refDq, "dQ (of |ref| + 5% of the largest)");
        {
          std::vector<float> a(long(BH) * T), w(long(BH) * T);
          CK(cudaMemcpy(a.data(), kdd, a.size() * 4, cudaMemcpyDeviceToHost));
          CK(cudaMemcpy(w.data(), dd, w.size() * 4, cudaMemcpyDeviceToHost));
          double worstD = 0.0;
          for (size_t e = 0; e < a.size(); ++e)
            worstD = std::max(worstD, std::fabs(double(a[e]) - w[e]) / (1.0 + std::fabs(w[e])));
          std::printf("  D worst %.2e\n", worstD);
          ok = ok && worstD < 1e-4;
        }
        allOk = allOk && ok;
        const float us = timeUs(s, 20, launch);
        const double flop = 6.0 * BH * double(T) * T * D / 2; // S, dP, dQ; causal
        std::printf("%dx%dx%d d%d causal, backward dQ, %s: %s  %.1f us  %.0f TFLOP/s\n", B, H, T,
                    D, form, ok ? "ok" : "MISMATCH", us, flop / us / 1e6);
        auto launchKV = [&] {
          if (chained)
            tmaDkDvKernel<true><<<(T / 128) * BH, 384, DkDvLayout::bytes, s>>>(
                mq64, m4k, m4v, mdo64, ml, md, bp);
          else
            tmaDkDvKernel<false><<<(T / 128) * BH, 384, DkDvLayout::bytes, s>>>(
                mq64, m4k, m4v, mdo64, ml, md, bp);
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
        std::printf("%dx%dx%d d%d causal, backward dK/dV, %s: %s  %.1f us  %.0f TFLOP/s\n", B, H,
                    T, D, form, okK && okV ? "ok" : "MISMATCH", usKV, flopKV / usKV / 1e6);
      }
      for (void *p : {(void *)dout, (void *)dq, (void *)dd, (void *)kdd, (void *)refDq, (void *)dk, (void *)dv,
                      (void *)refDk, (void *)refDv})
        CK(cudaFree(p));
    }
    for (void *p : {(void *)q, (void *)k, (void *)v, (void *)out, (void *)lse, (void *)refOut,
                    (void *)refLse})
      CK(cudaFree(p));
  }
  return allOk ? 0 : 1;
}
