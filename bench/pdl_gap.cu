// bench/pdl_gap.cu - what a kernel boundary costs inside a CUDA graph, and
// how much of it programmatic dependent launch (PDL) takes back: the
// measurement that decides whether tc's runtime launches its kernels with
// cudaLaunchAttributeProgrammaticStreamSerialization (each kernel then
// waits for its predecessor with griddepcontrol.wait before touching
// memory, and lets its successor launch early with
// griddepcontrol.launch_dependents).
//
//   nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 bench/pdl_gap.cu -lcublasLt \
//     -o pdl_gap
//   pdl_gap
//
// For each kernel size (bytes copied a launch) a graph of kLaunches copies
// (in -> out -> in ...) is timed in four forms: plain launches; PDL with
// the wait at the top and no trigger; PDL with the wait and the trigger at
// the top; and one launch doing all the copies in a loop (no boundaries).
// Then a chain of cuBLASLt GEMMs with a copy after each (GPT-2's Linear
// shapes, the copy plain or PDL): whether a PDL kernel after a library
// kernel that never triggers gains anything.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "cuda_check.h"

namespace {

constexpr int kLaunches = 200;
constexpr int kThreads = 256;

enum Form { kPlain = 0, kWait = 1, kWaitTrigger = 2 };

__device__ __forceinline__ void pdlWait() {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
}
__device__ __forceinline__ void pdlTrigger() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

/// out = in * 1.0001 + 1 over n float4s, `reps` times (reps > 1: the
/// boundary-free reference), grid-stride.
template <int F>
__global__ void __launch_bounds__(kThreads) copyKernel(const float4 *in, float4 *out, size_t n,
                                                       int reps) {
  if (F != kPlain)
    pdlWait();
  if (F == kWaitTrigger)
    pdlTrigger();
  for (int r = 0; r < reps; ++r) {
    const float4 *src = (r & 1) ? out : in;
    float4 *dst = (r & 1) ? const_cast<float4 *>(in) : out;
    for (size_t i = blockIdx.x * size_t(kThreads) + threadIdx.x; i < n;
         i += size_t(gridDim.x) * kThreads) {
      float4 v = src[i];
      dst[i] = make_float4(v.x * 1.0001f + 1, v.y * 1.0001f + 1, v.z * 1.0001f + 1,
                           v.w * 1.0001f + 1);
    }
    if (reps > 1)
      __syncthreads(); // not a grid barrier: the reference only counts bytes
  }
}

void launchCopy(int form, const float4 *in, float4 *out, size_t n, int reps, int blocks,
                cudaStream_t s) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(kThreads);
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = form == kPlain ? 0 : 1;
  if (form == kPlain)
    CK(cudaLaunchKernelEx(&cfg, copyKernel<kPlain>, in, out, n, reps));
  else if (form == kWait)
    CK(cudaLaunchKernelEx(&cfg, copyKernel<kWait>, in, out, n, reps));
  else
    CK(cudaLaunchKernelEx(&cfg, copyKernel<kWaitTrigger>, in, out, n, reps));
}

/// Captures fn(stream) into a graph, then times `reps` replays after one:
/// microseconds a replay.
template <class F> float graphUs(cudaStream_t s, int reps, F &&fn) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  fn(s);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  float us = timeUs(s, reps, [&] { CK(cudaGraphLaunch(ge, s)); });
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  return us;
}

struct Gemm {
  cublasLtHandle_t lt;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulAlgo_t algo;
  void *ws;
  size_t wsBytes = 32 << 20;
  const void *a, *b;
  void *c;
  // c[M, N] = a[M, K] b[N, K]^T, row-major bf16 (column-major: c^T = b a^T).
  Gemm(cublasLtHandle_t h, int M, int N, int K, const void *a_, const void *b_, void *c_)
      : lt(h), a(a_), b(b_), c(c_) {
    CB(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t tA = CUBLAS_OP_T, tB = CUBLAS_OP_N;
    CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &tA, sizeof(tA)));
    CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tB, sizeof(tB)));
    CB(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, K, N, K));
    CB(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, K, M, K));
    CB(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, N, M, N));
    cublasLtMatmulPreference_t pref;
    CB(cublasLtMatmulPreferenceCreate(&pref));
    CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                            &wsBytes, sizeof(wsBytes)));
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    CB(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &res, &found));
    if (!found) {
      std::fprintf(stderr, "no cuBLASLt algorithm\n");
      std::exit(1);
    }
    algo = res.algo;
    CK(cudaMalloc(&ws, wsBytes));
  }
  void run(cudaStream_t s) {
    float alpha = 1, beta = 0;
    CB(cublasLtMatmul(lt, desc, &alpha, b, la, a, lb, &beta, c, lc, c, lc, &algo, ws, wsBytes, s));
  }
};

} // namespace

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs; %d launches a graph\n", prop.name, sms, kLaunches);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const size_t maxBytes = size_t(64) << 20;
  float4 *x, *y;
  CK(cudaMalloc(&x, maxBytes));
  CK(cudaMalloc(&y, maxBytes));
  CK(cudaMemset(x, 0, maxBytes));
  CK(cudaMemset(y, 0, maxBytes));

  std::printf("copy of B bytes a launch (in + out = 2B moved), us a launch:\n");
  std::printf("  %10s %8s %8s %8s %8s  %s\n", "bytes", "plain", "wait", "wait+trig", "one",
              "gap plain / wait+trig (us a boundary)");
  for (size_t bytes : {size_t(256) << 10, size_t(2) << 20, size_t(8) << 20, size_t(32) << 20}) {
    size_t n = bytes / 16;
    int blocks = static_cast<int>((n + kThreads * 4 - 1) / (kThreads * 4)); // 4 float4 a thread
    float t[3];
    for (int f = 0; f < 3; ++f)
      t[f] = graphUs(s, 10, [&](cudaStream_t st) {
               for (int i = 0; i < kLaunches; ++i)
                 launchCopy(f, (i & 1) ? y : x, (i & 1) ? x : y, n, 1, blocks, st);
             }) /
             kLaunches;
    float one = graphUs(s, 10, [&](cudaStream_t st) {
                  launchCopy(kPlain, x, y, n, kLaunches, blocks, st);
                }) /
                kLaunches;
    std::printf("  %10zu %8.2f %8.2f %8.2f %8.2f  %.2f / %.2f\n", bytes, t[0], t[1], t[2], one,
                t[0] - one, t[2] - one);
  }

  // GEMM -> copy chains at GPT-2's shapes (16 x 1024 tokens).
  cublasLtHandle_t lt;
  CB(cublasLtCreate(&lt));
  const int M = 16384;
  struct Shape {
    int n, k;
  } shapes[] = {{2304, 768}, {768, 768}, {3072, 768}, {768, 3072}};
  __nv_bfloat16 *a, *b, *c;
  CK(cudaMalloc(&a, size_t(M) * 3072 * 2));
  CK(cudaMalloc(&b, size_t(3072) * 3072 * 2));
  CK(cudaMalloc(&c, size_t(M) * 3072 * 2));
  CK(cudaMemset(a, 0, size_t(M) * 3072 * 2));
  CK(cudaMemset(b, 0, size_t(3072) * 3072 * 2));
  std::vector<Gemm> gemms;
  for (const Shape &sh : shapes)
    gemms.emplace_back(lt, M, sh.n, sh.k, a, b, c);
  const size_t copyN = (size_t(M) * 768 * 2) / 16; // a [16384, 768] bf16 activation
  const int copyBlocks = static_cast<int>((copyN + kThreads * 4 - 1) / (kThreads * 4));
  std::printf("GEMM then copy of 25 MB, %d pairs (GPT-2's four Linear shapes in turn), us a pair:\n",
              kLaunches / 2);
  float tg = graphUs(s, 10, [&](cudaStream_t st) {
               for (int i = 0; i < kLaunches / 2; ++i)
                 gemms[i % 4].run(st);
             }) /
             (kLaunches / 2);
  float tp[3];
  for (int f = 0; f < 3; ++f)
    tp[f] = graphUs(s, 10, [&](cudaStream_t st) {
              for (int i = 0; i < kLaunches / 2; ++i) {
                gemms[i % 4].run(st);
                launchCopy(f, x, y, copyN, 1, copyBlocks, st);
              }
            }) /
            (kLaunches / 2);
  std::printf("  GEMMs alone %.2f; with the copy: plain %.2f, wait %.2f, wait+trigger %.2f\n", tg,
              tp[0], tp[1], tp[2]);
  std::printf("done\n");
  return 0;
}
