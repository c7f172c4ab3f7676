// bench/gemm_sm90.cu - a warp-specialised sm_90a GEMM (TMA loads and
// stores, wgmma, mbarrier rings, persistent tiles) with fused epilogues,
// checked against cuBLASLt's output and timed beside it on the same shapes:
// the measurement that decides whether tc's Linear layers should leave
// cuBLASLt's epilogues (GELU_AUX_BIAS and DGELU at GPT-2's c_fc cost 40-50
// us over the plain product) for a kernel of tc's own.
//
//   nvcc -O3 -std=c++17 -I. -gencode arch=compute_90a,code=sm_90a bench/gemm_sm90.cu \
//     -lcublasLt -lcuda -o gemm_sm90
//   gemm_sm90 [--only=FORM,...] [M N K]...   (default: GPT-2's four Linear shapes at 16 x 1024
//     tokens; forms: coop, deferred (with l2: the 4-stage form through L2), pingpong, trace;
//     default all)
//
// out[M, N] = a[M, K] b[N, K]^T (+ bias[N]) with a and b row-major bf16 (both
// K-major: tc's `rhs^T` forward form; or b [K, N], N-major, as nn.Linear's
// weight is read by the dgrad), fp32 accumulation, bf16 out; the
// epilogues: none, bias, bias + GELU (tanh form) with the pre-activation
// written beside (cuBLASLt's GELU_AUX_BIAS, what tc-fuse-epilogues asks of
// the first MLP matmul), and DGELU (the product times gelu'(aux): the
// backward's dgrad of the second MLP matmul). M % 128, N % 256, K % 64.
//
// The forms (bench/RESULTS.md, stops 36-38, has their H100 numbers):
//   - gemmCoop (runtime/src/cuda/kernels/gemm_sm90.cuh, which the runtime's
//     ownGemm launches in its resident form): both consumer warpgroups on
//     one 128x256 tile, 3 or 4 stages; with Defer, the GELU / DGELU
//     arithmetic moved under the next tile's products, through L2 (4
//     stages) or with the tile kept in shared memory (3 stages, resident).
//   - gemmPingpong (here): a 128x128 tile for each consumer warpgroup, their
//     products taking turns, one's epilogue under the other's products.
//   - trace: gemmCoop's clock64 stamps, cycles a tile by phase.
// Forms measured slower and removed (in git at 9ecfd11): direct stores from
// the fragments, store threads, clusters of two with b multicast, 64x256
// ping-pong tiles.
#include <cublasLt.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cuda_check.h"
#include "runtime/src/cuda/kernels/gemm_sm90.cuh"

namespace {

using namespace tc::rt::cuda::sm90gemm;

//===----------------------------------------------------------------------===//
// The ping-pong form: each consumer warpgroup a 128x128 tile of its own
//===----------------------------------------------------------------------===//

constexpr int PM = 128, PN = 128;
template <int ST> struct PP {
  static constexpr int stageA = PM * BK * 2, stageB = PN * BK * 2, tileC = PM * PN * 2;
  static constexpr int smem = ST * (stageA + stageB) + 2 * tileC + 1024 + (2 * ST + 2) * 8;
};

/// Ping-pong trace (TR): per block and consumer warpgroup, kTraceFields
/// sums of clock64 intervals over its tiles (see gemmPingpong), then the
/// tile count.
constexpr int kTraceFields = 6;

/// out = a b^T (+ epilogue) over 128x128 tiles: tile i of the block (tiles
/// blockIdx.x + i gridDim.x) goes to consumer warpgroup i % 2, whose
/// products take turns with the other's (named barriers 3 and 4: a
/// warpgroup's turn begins once the other has issued its tile's last
/// products), so that one's epilogue (through its own 32 KB and TMA stores)
/// runs under the other's products; the turns also keep a warpgroup from
/// waiting on a stage more than one lap ahead of the ring, whose parity
/// would be an earlier lap's. Each stage is given back by the warpgroup that
/// read it. mapOut / mapAux boxes are [128 rows, 64 columns]; DGELU's aux
/// tile is loaded into the warpgroup's 32 KB while its products run.
template <int EPI, int BL = 0, int ST = 5, bool TR = false>
__global__ void __launch_bounds__(kThreads, 1)
    gemmPingpong(const __grid_constant__ CUtensorMap mapA, const __grid_constant__ CUtensorMap mapB,
                 const __grid_constant__ CUtensorMap mapOut,
                 const __grid_constant__ CUtensorMap mapAux, const bf16 *__restrict__ bias, int M,
                 int N, int K, long long *trace) {
  using P = PP<ST>;
  constexpr int kBox = PM * 128;
  extern __shared__ unsigned char smemRaw[];
  unsigned char *base = alignedSmem(smemRaw);
  bf16 *sA = reinterpret_cast<bf16 *>(base);
  bf16 *sB = reinterpret_cast<bf16 *>(base + ST * P::stageA);
  unsigned char *sC = base + ST * (P::stageA + P::stageB);
  uint64_t *full = reinterpret_cast<uint64_t *>(sC + 2 * P::tileC);
  uint64_t *empty = full + ST;
  uint64_t *auxFull = empty + ST;
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  const int tilesN = N / PN, tiles = (M / PM) * tilesN, kBlocks = K / BK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < ST; ++s) {
      mbarInit(&full[s], 1);
      mbarInit(&empty[s], 1);
    }
    mbarInit(&auxFull[0], 1);
    mbarInit(&auxFull[1], 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (wg == 0) {
    setMaxRegsDec<40>();
    if (tid == 0)
      loadTiles<PM, PN, ST, BL>(&mapA, &mapB, sA, sB, full, empty, tiles, tilesN, kBlocks);
    return;
  }
  setMaxRegsInc<232>();
  const int g = wg - 1;
  const int cl = 2 * (tid % 4);
  unsigned char *myC = sC + g * P::tileC; // 2 boxes of [128 rows, 128 bytes]
  float acc0[64], acc1[64];               // rows 0-63 and 64-127 of the tile
  long long tr[kTraceFields] = {}, trTiles = 0;
  int auxPhase = 0;
  int i = g; // the block's tile index this warpgroup takes
  for (int tile = blockIdx.x + g * gridDim.x; tile < tiles; tile += 2 * gridDim.x, i += 2) {
    const int tm = tile / tilesN, tn = tile % tilesN;
    if (EPI == kDgelu && tid == 0) {
      tmaStoreWaitRead();
      mbarExpectTx(&auxFull[g], P::tileC);
#pragma unroll
      for (int box = 0; box < PN / 64; ++box)
        tmaLoad2d(myC + box * kBox, &mapAux, &auxFull[g], tn * PN + box * 64, tm * PM);
    }
    long long t0 = TR ? clock64() : 0, t1 = 0, t1b = 0, t2 = 0, t3 = 0;
    if (i > 0)
      namedBarrier(3 + g, 256);
    if (TR)
      t1 = clock64();
    long pos = long(i) * kBlocks; // this tile's first k-block in the ring
    int prev = -1;
    for (int kb = 0; kb < kBlocks; ++kb, ++pos) {
      int stage = int(pos % ST), phase = int((pos / ST) & 1);
      mbarWait(&full[stage], phase);
      if (TR && kb == 0)
        t1b = clock64();
      uint64_t dA = descSw128(sA + stage * (PM * BK));
      uint64_t dB = descB<BL>(sB + stage * (PN * BK));
      wgmmaFence();
#pragma unroll
      for (int k = 0; k < BK / 16; ++k) {
        uint64_t b = dB + kStepB<BL> * k;
        wgmma128<BL != 0>(acc0, dA + 2 * k, b, (kb > 0 || k > 0) ? 1 : 0);
        wgmma128<BL != 0>(acc1, dA + (8192 >> 4) + 2 * k, b, (kb > 0 || k > 0) ? 1 : 0);
      }
      wgmmaCommit();
      if (prev >= 0) {
        wgmmaWait<1>();
        if (tid == 0)
          mbarArrive(&empty[prev]);
      }
      prev = stage;
    }
    if (TR)
      t2 = clock64();
    if (tile + gridDim.x < tiles) // the other warpgroup's next turn
      namedBarrierArrive(3 + (1 - g), 256);
    wgmmaWait<0>();
    if (TR)
      t3 = clock64();
    if (tid == 0)
      mbarArrive(&empty[prev]);
    // pass 0: acc + bias (GELU: as aux, acc becomes it as stored; DGELU:
    // acc gelu'(aux) read from the aux tile in place); pass 1 (GELU): gelu(acc).
    for (int pass = 0; pass < (EPI == kBiasGeluAux ? 2 : 1); ++pass) {
      if (EPI == kDgelu) {
        mbarWait(&auxFull[g], auxPhase); // (its load waited for the stores' reads)
        auxPhase ^= 1;
      } else {
        tileFree(g);
      }
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float(&acc)[64] = half ? acc1 : acc0;
        putFragments<0, PN / 8>(myC, kBox, 64 * half, 0, [&](int j, int h, unsigned char *at) {
          float &a0 = acc[4 * j + 2 * h], &a1 = acc[4 * j + 2 * h + 1];
          if (EPI == kDgelu) {
            __nv_bfloat162 hx = *reinterpret_cast<const __nv_bfloat162 *>(at);
            return __floats2bfloat162_rn(a0 * geluTanhGrad(__bfloat162float(hx.x)),
                                         a1 * geluTanhGrad(__bfloat162float(hx.y)));
          }
          if (pass == 1)
            return __floats2bfloat162_rn(geluTanh(a0), geluTanh(a1));
          float b0 = 0.0f, b1 = 0.0f;
          if (EPI == kBias || EPI == kBiasGeluAux) {
            __nv_bfloat162 bb =
                *reinterpret_cast<const __nv_bfloat162 *>(bias + tn * PN + 8 * j + cl);
            b0 = __bfloat162float(bb.x);
            b1 = __bfloat162float(bb.y);
          }
          __nv_bfloat162 st = __floats2bfloat162_rn(a0 + b0, a1 + b1);
          if (EPI == kBiasGeluAux) {
            a0 = __bfloat162float(st.x);
            a1 = __bfloat162float(st.y);
          }
          return st;
        });
      }
      const CUtensorMap *map = EPI == kBiasGeluAux && pass == 0 ? &mapAux : &mapOut;
      storeBoxes(map, myC, PN / 64, kBox, tn * PN, tm * PM, g);
    }
    if (TR) {
      long long t4 = clock64();
      // waiting for the turn, for the first stage, the products' issue (the
      // first stage's wait included), their drain, the epilogue, the whole tile
      long long spans[kTraceFields] = {t1 - t0, t1b - t1, t2 - t1, t3 - t2, t4 - t3, t4 - t0};
      for (int f = 0; f < kTraceFields; ++f)
        tr[f] += spans[f];
      trTiles += 1;
    }
  }
  if (TR && tid == 0 && trace) {
    long long *o = trace + (long(blockIdx.x) * 2 + g) * (kTraceFields + 1);
    for (int f = 0; f < kTraceFields; ++f)
      o[f] = tr[f];
    o[kTraceFields] = trTiles;
  }
  if (tid == 0)
    tmaStoreWaitAll();
}

/// Where the traced kernels (TR) write: set around a trace's launches.
long long *gTrace = nullptr;

/// Launches kernel over min(tiles, SMs) blocks with `smem` bytes of dynamic
/// shared memory (the opt-in raised on its first launch).
template <class Kernel>
void launchPersistent(Kernel kernel, int smem, int tiles, int sms, cudaStream_t s,
                      const CUtensorMap &ma, const CUtensorMap &mb, const CUtensorMap &mo,
                      const CUtensorMap &mx, const bf16 *bias, int M, int N, int K) {
  static std::set<const void *> raised;
  if (raised.insert(reinterpret_cast<const void *>(kernel)).second)
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  kernel<<<std::min(tiles, sms), kThreads, smem, s>>>(ma, mb, mo, mx, bias, M, N, K, gTrace);
}

/// Runs `launch` once with gTrace pointing at zeroed space for
/// names.size() sums and a tile count per block and consumer warpgroup (the
/// traced kernels' layout), then prints each sum's mean a tile (clock64
/// cycles).
template <class Launch>
void traceMeans(const char *what, int sms, const std::vector<const char *> &names,
                Launch launch) {
  const size_t fields = names.size(), n = size_t(sms) * 2 * (fields + 1);
  long long *d;
  CK(cudaMalloc(&d, n * sizeof(long long)));
  CK(cudaMemset(d, 0, n * sizeof(long long)));
  gTrace = d;
  launch();
  CK(cudaDeviceSynchronize());
  gTrace = nullptr;
  std::vector<long long> h(n);
  CK(cudaMemcpy(h.data(), d, n * sizeof(long long), cudaMemcpyDeviceToHost));
  CK(cudaFree(d));
  std::vector<double> sum(fields, 0.0);
  double tiles = 0;
  for (size_t w = 0; w < n / (fields + 1); ++w) {
    for (size_t f = 0; f < fields; ++f)
      sum[f] += double(h[w * (fields + 1) + f]);
    tiles += double(h[w * (fields + 1) + fields]);
  }
  std::printf("  trace %-14s cycles a tile:", what);
  for (size_t f = 0; f < fields; ++f)
    std::printf("  %s %.0f", names[f], tiles > 0 ? sum[f] / tiles : 0.0);
  std::printf("  (%.0f tiles)\n", tiles);
}

/// A 2-D tensor map of a row-major [rows, cols] bf16 matrix, boxes of
/// [boxRows, 64] (128 bytes a row), 128-byte swizzled.
CUtensorMap tensorMap(const bf16 *p, int rows, int cols, int boxRows) {
  CUtensorMap map;
  cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
  cuuint64_t strides[1] = {cuuint64_t(cols) * 2};
  cuuint32_t box[2] = {64, cuuint32_t(boxRows)};
  cuuint32_t elem[2] = {1, 1};
  CUresult r = cuTensorMapEncodeTiled(
      &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<bf16 *>(p), dims, strides, box, elem,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled: %d\n", int(r));
    std::exit(1);
  }
  return map;
}

/// cuBLASLt's out[M, N] = a b^T (+ epilogue) in column-major terms: out^T
/// [N, M] = (b as [K, N])^T (a as [K, M]); the fastest of its heuristic's
/// first 8 candidates (as tc's runtime tunes), in microseconds. The output
/// is any candidate's: all compute the same product.
struct Lt {
  cublasLtHandle_t h;
  void *ws;
  size_t wsBytes = 32 << 20;
  Lt() {
    CB(cublasLtCreate(&h));
    CK(cudaMalloc(&ws, wsBytes));
  }
  float run(const bf16 *a, const bf16 *b, bf16 *out, bf16 *aux, const bf16 *bias, int M, int N,
            int K, cublasLtEpilogue_t epi, cudaStream_t s, int reps) {
    cublasLtMatmulDesc_t op;
    CB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t tA = CUBLAS_OP_T, tB = CUBLAS_OP_N;
    CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tA, sizeof tA));
    CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tB, sizeof tB));
    CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (bias)
      CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    if (aux) {
      int64_t ld = N;
      CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                                        sizeof aux));
      CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
    }
    cublasLtMatrixLayout_t la, lb, lc;
    CB(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, K, N, K)); // b as [K, N]
    CB(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, K, M, K)); // a as [K, M]
    CB(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, N, M, N));
    cublasLtMatmulPreference_t pref;
    CB(cublasLtMatmulPreferenceCreate(&pref));
    CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                            &wsBytes, sizeof wsBytes));
    cublasLtMatmulHeuristicResult_t res[8];
    int n = 0;
    CB(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 8, res, &n));
    float alpha = 1.0f, beta = 0.0f, best = 1e30f;
    for (int i = 0; i < n; ++i) {
      auto call = [&] {
        return cublasLtMatmul(h, op, &alpha, b, la, a, lb, &beta, out, lc, out, lc, &res[i].algo,
                              ws, wsBytes, s);
      };
      if (call() != CUBLAS_STATUS_SUCCESS)
        continue;
      best = std::min(best, timeUs(s, reps, [&] { call(); }));
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(op);
    return best;
  }
};

std::vector<float> toHost(const bf16 *d, size_t n) {
  std::vector<bf16> h(n);
  CK(cudaMemcpy(h.data(), d, n * 2, cudaMemcpyDeviceToHost));
  std::vector<float> f(n);
  for (size_t i = 0; i < n; ++i)
    f[i] = __bfloat162float(h[i]);
  return f;
}

/// Whether x matches y: the largest |x - y| / (|y| + 1) below 2e-2 (bf16's
/// rounding and the MUFU tanh against cuBLASLt's GELU); printed with where.
bool matches(const char *what, const std::vector<float> &x, const std::vector<float> &y) {
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double d = std::fabs(double(x[i]) - double(y[i])) / (std::fabs(double(y[i])) + 1.0);
    if (!(d <= worst)) {
      worst = d;
      at = i;
    }
  }
  bool good = worst < 2e-2;
  if (!good)
    std::printf("  %-36s MISMATCH: max rel err %.3g at %zu (%g vs %g)\n", what, worst, at, x[at],
                y[at]);
  return good;
}

/// A device copy of the row-major [rows, cols] matrix p, transposed.
bf16 *transposed(const bf16 *p, int rows, int cols) {
  std::vector<bf16> h(size_t(rows) * cols), t(h.size());
  CK(cudaMemcpy(h.data(), p, h.size() * 2, cudaMemcpyDeviceToHost));
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      t[size_t(c) * rows + r] = h[size_t(r) * cols + c];
  bf16 *d;
  CK(cudaMalloc(&d, t.size() * 2));
  CK(cudaMemcpy(d, t.data(), t.size() * 2, cudaMemcpyHostToDevice));
  return d;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<int> shapes;
  std::string only; // --only=coop,deferred,pingpong (default: all)
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--only=", 7) == 0)
      only = "," + std::string(argv[i] + 7) + ",";
    else
      shapes.push_back(std::atoi(argv[i]));
  }
  auto want = [&](const char *form) {
    return only.empty() || only.find("," + std::string(form) + ",") != std::string::npos;
  };
  if (shapes.empty())
    shapes = {16384, 3072, 768, 16384, 768, 3072, 16384, 2304, 768, 16384, 768, 768};
  int dev = 0, sms = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  std::printf("%s, %d SMs\n", prop.name, sms);
  Lt lt;
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  bool allOk = true;
  const int reps = 20;
  for (size_t i = 0; i + 2 < shapes.size(); i += 3) {
    const int M = shapes[i], N = shapes[i + 1], K = shapes[i + 2];
    if (M % 128 || N % 256 || K % 64) {
      std::printf("%dx%dx%d: not a multiple of 128x256x64, skipped\n", M, N, K);
      continue;
    }
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1, 1);
    auto randomDev = [&](size_t n, float scale) {
      std::vector<bf16> h(n);
      for (auto &v : h)
        v = __float2bfloat16(u(rng) * scale);
      bf16 *d;
      CK(cudaMalloc(&d, n * 2));
      CK(cudaMemcpy(d, h.data(), n * 2, cudaMemcpyHostToDevice));
      return d;
    };
    const size_t outN = size_t(M) * N;
    bf16 *a = randomDev(size_t(M) * K, 1.0f), *b = randomDev(size_t(N) * K, 0.05f),
         *bias = randomDev(N, 0.5f), *bt = transposed(b, N, K); // b N-major: [K, N]
    bf16 *out, *aux, *ref, *refAux;
    for (bf16 **p : {&out, &aux, &ref, &refAux})
      CK(cudaMalloc(p, outN * 2));
    const double flop = 2.0 * M * N * K;
    std::printf("%d x %d x %d (out = a[M,K] b[N,K]^T), us:\n", M, N, K);

    // cuBLASLt: the times and the outputs every form is checked against
    // (refAux: GELU's pre-activation, then DGELU's aux input).
    float ltPlain =
        lt.run(a, b, ref, nullptr, nullptr, M, N, K, CUBLASLT_EPILOGUE_DEFAULT, s, reps);
    std::vector<float> wPlain = toHost(ref, outN);
    float ltBias = lt.run(a, b, ref, nullptr, bias, M, N, K, CUBLASLT_EPILOGUE_BIAS, s, reps);
    std::vector<float> wBias = toHost(ref, outN);
    float ltGelu =
        lt.run(a, b, ref, refAux, bias, M, N, K, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, s, reps);
    std::vector<float> wGelu = toHost(ref, outN), wGeluAux = toHost(refAux, outN);
    float ltDgelu = lt.run(a, b, ref, refAux, nullptr, M, N, K, CUBLASLT_EPILOGUE_DGELU, s, reps);
    std::vector<float> wDgelu = toHost(ref, outN);
    std::printf("  %-24s plain %7.1f (%4.0f TFLOP/s)  +bias %7.1f  +bias+gelu+aux %7.1f  dgelu "
                "%7.1f\n",
                "cuBLASLt", ltPlain, flop / ltPlain / 1e6, ltBias, ltGelu, ltDgelu);

    // One of ours: cleared outputs, timed, checked (out, and aux when given).
    auto ours = [&](const char *what, const std::vector<float> &wantOut,
                    const std::vector<float> *wantAux, auto launch) {
      CK(cudaMemset(out, 0, outN * 2));
      CK(cudaMemset(aux, 0, outN * 2));
      launch();
      CK(cudaGetLastError());
      CK(cudaStreamSynchronize(s));
      bool ok = matches(what, toHost(out, outN), wantOut);
      if (wantAux)
        ok = matches(what, toHost(aux, outN), *wantAux) && ok;
      allOk = allOk && ok;
      return timeUs(s, reps, launch);
    };
    auto row = [&](const char *form, float plain, float withBias, float gelu, float dgelu) {
      auto cell = [](float us) {
        char c[16];
        if (us < 0)
          std::snprintf(c, sizeof c, "%7s", "-");
        else
          std::snprintf(c, sizeof c, "%7.1f", us);
        return std::string(c);
      };
      std::printf("  %-24s plain %s                  +bias %s  +bias+gelu+aux %s  dgelu %s\n", form,
                  cell(plain).c_str(), cell(withBias).c_str(), cell(gelu).c_str(),
                  cell(dgelu).c_str());
    };

    if (want("coop")) {
      CUtensorMap ma = tensorMap(a, M, K, BM), mb = tensorMap(b, N, K, BN),
                  mo = tensorMap(out, M, N, 64), mx = tensorMap(aux, M, N, 64);
      int tiles = (M / BM) * (N / BN);
      auto coop = [&](auto kernel, int smem, const bf16 *bi) {
        return [=, &ma, &mb, &mo, &mx] {
          launchPersistent(kernel, smem, tiles, sms, s, ma, mb, mo, mx, bi, M, N, K);
        };
      };
      for (int stages : {3, 4}) {
        float p, bi, ge;
        if (stages == 3) {
          p = ours("coop 3 plain", wPlain, nullptr,
                   coop(gemmCoop<kPlain, 3>, Coop<3>::smem, nullptr));
          bi = ours("coop 3 bias", wBias, nullptr, coop(gemmCoop<kBias, 3>, Coop<3>::smem, bias));
          ge = ours("coop 3 gelu", wGelu, &wGeluAux,
                    coop(gemmCoop<kBiasGeluAux, 3>, Coop<3>::smem, bias));
        } else {
          p = ours("coop 4 plain", wPlain, nullptr,
                   coop(gemmCoop<kPlain, 4>, Coop<4>::smem, nullptr));
          bi = ours("coop 4 bias", wBias, nullptr, coop(gemmCoop<kBias, 4>, Coop<4>::smem, bias));
          ge = ours("coop 4 gelu", wGelu, &wGeluAux,
                    coop(gemmCoop<kBiasGeluAux, 4>, Coop<4>::smem, bias));
        }
        row(stages == 3 ? "cooperative, 3 stages" : "cooperative, 4 stages", p, bi, ge, -1);
      }
    }
    if (want("deferred")) {
      CUtensorMap ma = tensorMap(a, M, K, BM), mb = tensorMap(b, N, K, BN),
                  mbt = tensorMap(bt, K, N, 64), mo = tensorMap(out, M, N, 64),
                  mx = tensorMap(aux, M, N, 64), mxIn = tensorMap(refAux, M, N, 64),
                  mxIn32 = tensorMap(refAux, M, N, 32); // the resident DGELU's halves
      int tiles = (M / BM) * (N / BN), smem = Coop<4>::smem;
      float ge = !want("l2") ? -1.0f : ours("deferred gelu", wGelu, &wGeluAux, [&] {
        launchPersistent(gemmCoop<kBiasGeluAux, 4, 0, true>, smem, tiles, sms, s, ma, mb, mo, mx,
                         bias, M, N, K);
      });
      float dg = !want("l2") ? -1.0f : ours("deferred dgelu", wDgelu, nullptr, [&] {
        launchPersistent(gemmCoop<kDgelu, 4, 0, true>, smem, tiles, sms, s, ma, mb, mo, mxIn,
                         nullptr, M, N, K);
      });
      float dgn = !want("l2") ? -1.0f : ours("deferred dgelu, b N-major", wDgelu, nullptr, [&] {
        launchPersistent(gemmCoop<kDgelu, 4, 1, true>, smem, tiles, sms, s, ma, mbt, mo, mxIn,
                         nullptr, M, N, K);
      });
      row("deferred", -1, -1, ge, dg);
      row("deferred, b N-major", -1, -1, -1, dgn);
      const int rsmem = Coop<3, true>::smem;
      float rge = ours("resident gelu", wGelu, &wGeluAux, [&] {
        launchPersistent(gemmCoop<kBiasGeluAux, 3, 0, true>, rsmem, tiles, sms, s, ma, mb, mo, mx,
                         bias, M, N, K);
      });
      float rdg = ours("resident dgelu", wDgelu, nullptr, [&] {
        launchPersistent(gemmCoop<kDgelu, 3, 0, true>, rsmem, tiles, sms, s, ma, mb, mo, mxIn32,
                         nullptr, M, N, K);
      });
      float rdgn = ours("resident dgelu, b N-major", wDgelu, nullptr, [&] {
        launchPersistent(gemmCoop<kDgelu, 3, 1, true>, rsmem, tiles, sms, s, ma, mbt, mo, mxIn32,
                         nullptr, M, N, K);
      });
      float rgen = ours("resident gelu, b N-major", wGelu, &wGeluAux, [&] {
        launchPersistent(gemmCoop<kBiasGeluAux, 3, 1, true>, rsmem, tiles, sms, s, ma, mbt, mo,
                         mx, bias, M, N, K);
      });
      float ege = ours("resident early gelu", wGelu, &wGeluAux, [&] {
        launchPersistent(gemmCoop<kBiasGeluAux, 3, 0, true, false, false, true>, rsmem, tiles, sms,
                         s, ma, mb, mo, mx, bias, M, N, K);
      });
      float edg = ours("resident early dgelu", wDgelu, nullptr, [&] {
        launchPersistent(gemmCoop<kDgelu, 3, 0, true, false, false, true>, rsmem, tiles, sms, s, ma,
                         mb, mo, mxIn32, nullptr, M, N, K);
      });
      // Timing-only probes (wrong outputs, not checked): the resident
      // transform's shared-memory traffic alone, then its arithmetic alone.
      auto probe = [&](auto kernel, const CUtensorMap &mX, const bf16 *bi) {
        return timeUs(s, reps, [&] {
          launchPersistent(kernel, rsmem, tiles, sms, s, ma, mb, mo, mX, bi, M, N, K);
        });
      };
      float p1g = probe(gemmCoop<kBiasGeluAux, 3, 0, true, false, false, false, 1>, mx, bias);
      float p1d = probe(gemmCoop<kDgelu, 3, 0, true, false, false, false, 1>, mxIn32, nullptr);
      float p2g = probe(gemmCoop<kBiasGeluAux, 3, 0, true, false, false, false, 2>, mx, bias);
      float p2d = probe(gemmCoop<kDgelu, 3, 0, true, false, false, false, 2>, mxIn32, nullptr);
      row("resident (3 stages)", -1, -1, rge, rdg);
      row("resident, smem traffic only", -1, -1, p1g, p1d);
      row("resident, arithmetic only", -1, -1, p2g, p2d);
      row("resident, b N-major", -1, -1, rgen, rdgn);
      row("resident, early stores", -1, -1, ege, edg);
    }
    if (want("trace")) { // where a cooperative tile's time goes (clock64 cycles, means)
      CUtensorMap ma = tensorMap(a, M, K, BM), mb = tensorMap(b, N, K, BN),
                  mo = tensorMap(out, M, N, 64), mx = tensorMap(aux, M, N, 64),
                  mxIn = tensorMap(refAux, M, N, 64), mxIn32 = tensorMap(refAux, M, N, 32);
      int tiles = (M / BM) * (N / BN);
      auto trace = [&](const char *what, auto kernel, const CUtensorMap &mX, const bf16 *bi,
                       int smem = Coop<4>::smem) {
        traceMeans(what, sms,
                   {"first stage", "stages", "deferred", "group waits", "drain", "epilogue", "whole"},
                   [&] { launchPersistent(kernel, smem, tiles, sms, s, ma, mb, mo, mX, bi, M, N, K); });
      };
      trace("coop plain", gemmCoop<kPlain, 4, 0, false, true>, mx, nullptr);
      trace("coop gelu", gemmCoop<kBiasGeluAux, 4, 0, false, true>, mx, bias);
      if (want("l2")) { // the deferred form through L2 (4 stages)
        trace("deferred gelu", gemmCoop<kBiasGeluAux, 4, 0, true, true>, mx, bias);
        trace("deferred dgelu", gemmCoop<kDgelu, 4, 0, true, true>, mxIn, nullptr);
      }
      trace("coop 3 plain", gemmCoop<kPlain, 3, 0, false, true>, mx, nullptr, Coop<3>::smem);
      trace("resident gelu", gemmCoop<kBiasGeluAux, 3, 0, true, true>, mx, bias,
            Coop<3, true>::smem);
      trace("resident dgelu", gemmCoop<kDgelu, 3, 0, true, true>, mxIn32, nullptr,
            Coop<3, true>::smem);
      trace("early gelu", gemmCoop<kBiasGeluAux, 3, 0, true, true, false, true>, mx, bias,
            Coop<3, true>::smem);
      trace("early dgelu", gemmCoop<kDgelu, 3, 0, true, true, false, true>, mxIn32, nullptr,
            Coop<3, true>::smem);
    }
    if (want("pingpong")) {
      CUtensorMap ma = tensorMap(a, M, K, PM), mb = tensorMap(b, N, K, PN),
                  mbt = tensorMap(bt, K, N, 64), mo = tensorMap(out, M, N, PM),
                  mx = tensorMap(aux, M, N, PM), mxIn = tensorMap(refAux, M, N, PM);
      int tiles = (M / PM) * (N / PN);
      auto pp = [&](auto kernel, int smem, const CUtensorMap &mB, const CUtensorMap &mX,
                    const bf16 *bi) {
        return [=, &ma, &mo, &mB, &mX] {
          launchPersistent(kernel, smem, tiles, sms, s, ma, mB, mo, mX, bi, M, N, K);
        };
      };
      float p = ours("ping-pong plain", wPlain, nullptr,
                     pp(gemmPingpong<kPlain>, PP<5>::smem, mb, mx, nullptr));
      float bi = ours("ping-pong bias", wBias, nullptr,
                      pp(gemmPingpong<kBias>, PP<5>::smem, mb, mx, bias));
      float ge = ours("ping-pong gelu", wGelu, &wGeluAux,
                      pp(gemmPingpong<kBiasGeluAux>, PP<5>::smem, mb, mx, bias));
      float dg = ours("ping-pong dgelu", wDgelu, nullptr,
                      pp(gemmPingpong<kDgelu>, PP<5>::smem, mb, mxIn, nullptr));
      float dgn = ours("ping-pong dgelu, b N-major", wDgelu, nullptr,
                       pp(gemmPingpong<kDgelu, 1>, PP<5>::smem, mbt, mxIn, nullptr));
      row("ping-pong", p, bi, ge, dg);
      row("ping-pong, b N-major", -1, -1, -1, dgn);
      float s3 = ours("ping-pong plain, 3 stages", wPlain, nullptr,
                      pp(gemmPingpong<kPlain, 0, 3>, PP<3>::smem, mb, mx, nullptr));
      float s4 = ours("ping-pong plain, 4 stages", wPlain, nullptr,
                      pp(gemmPingpong<kPlain, 0, 4>, PP<4>::smem, mb, mx, nullptr));
      std::printf("  ping-pong plain by stages: 3 %7.1f  4 %7.1f  5 %7.1f\n", s3, s4, p);
      // Where a ping-pong tile's time goes (clock64 cycles, the mean over
      // every warpgroup's tiles).
      auto trace = [&](const char *what, auto launch) {
        traceMeans(what, sms,
                   {"turn", "first stage", "products", "drain", "epilogue", "whole"}, launch);
      };
      trace("plain", pp(gemmPingpong<kPlain, 0, 5, true>, PP<5>::smem, mb, mx, nullptr));
      trace("gelu+aux", pp(gemmPingpong<kBiasGeluAux, 0, 5, true>, PP<5>::smem, mb, mx, bias));
    }
    for (bf16 *p : {a, b, bt, bias, out, aux, ref, refAux})
      CK(cudaFree(p));
  }
  std::printf("%s\n", allOk ? "all outputs match cuBLASLt" : "MISMATCHES");
  return allOk ? 0 : 1;
}
