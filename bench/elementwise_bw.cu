// bench/elementwise_bw.cu - what a bf16 elementwise kernel of the form tc's
// codegen emits (16-byte vectors, a grid-stride loop) reaches on this GPU at
// Pythia's [16384, 3072]: a copy, the erf GELU forward and its backward (two
// inputs, one output; with expf as the generated kernel has it, and with
// __expf), by the vectors each thread handles a loop step (U = 1, 2, 4) and
// the grid (8192: the codegen's cap; 8, 16, 32 blocks an SM; a thread a
// vector). It answers whether those kernels are bound by the memory or by
// the instructions they issue (~44 a bf16 element for the erf GELU backward:
// on an H100 the memory, 2.9-3.0 TB/s whatever U; the H200 has 43% more
// bandwidth at the same issue rate).
//
//   nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 bench/elementwise_bw.cu -o ew && ./ew
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e = (x);                                                                           \
    if (e != cudaSuccess) {                                                                        \
      std::printf("%s: %s\n", #x, cudaGetErrorString(e));                                          \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

struct alignas(16) V8 { __nv_bfloat16 v[8]; };

template <bool Fast> __device__ __forceinline__ float geluGrad(float dy, float x) {
  float cdf = 0.5f * (1.0f + erff(x * 0.70710678f));
  float pdf = 0.3989422804f * (Fast ? __expf(-0.5f * x * x) : expf(-0.5f * x * x));
  return dy * (cdf + x * pdf);
}
__device__ __forceinline__ float gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678f)); }

// Mode 0: copy (one input), 1: GELU forward (one input), 2: GELU backward (two inputs, expf),
// 3: the same with __expf.
template <int U, int Mode>
__global__ void __launch_bounds__(256) ew(const V8 *__restrict__ a, const V8 *__restrict__ b,
                                         V8 *__restrict__ o, long long n) {
  long long stride = (long long)gridDim.x * blockDim.x;
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    V8 va[U], vb[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      va[u] = a[i + u * stride];
      if (Mode >= 2)
        vb[u] = b[i + u * stride];
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      V8 r;
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        float x = __bfloat162float(va[u].v[k]);
        float y = Mode == 0 ? x : Mode == 1 ? gelu(x) : geluGrad<Mode == 3>(__bfloat162float(vb[u].v[k]), x);
        r.v[k] = __float2bfloat16_rn(y);
      }
      o[i + u * stride] = r;
    }
  }
  for (; i < n; i += stride) { // the rest, one at a time
    V8 va = a[i], vb = Mode >= 2 ? b[i] : va, r;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      float x = __bfloat162float(va.v[k]);
      float y = Mode == 0 ? x : Mode == 1 ? gelu(x) : geluGrad<Mode == 3>(__bfloat162float(vb.v[k]), x);
      r.v[k] = __float2bfloat16_rn(y);
    }
    o[i] = r;
  }
}

template <int U, int Mode> void run(const char *name, V8 *a, V8 *b, V8 *o, long long n, int grid) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 5; ++i)
    ew<U, Mode><<<grid, 256>>>(a, b, o, n);
  CK(cudaEventRecord(e0));
  const int iters = 100;
  for (int i = 0; i < iters; ++i)
    ew<U, Mode><<<grid, 256>>>(a, b, o, n);
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  float ms;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  double us = ms * 1000.0 / iters;
  double bytes = n * 16.0 * (Mode >= 2 ? 3 : 2);
  std::printf("%-9s U=%d grid %6d: %7.1f us  %.2f TB/s\n", name, U, grid, us, bytes / us / 1e6);
}

/// Every mode at U vectors a thread a step.
template <int U> void runModes(V8 *a, V8 *b, V8 *o, long long n, int grid) {
  run<U, 0>("copy", a, b, o, n, grid);
  run<U, 1>("gelu", a, b, o, n, grid);
  run<U, 2>("gelu-bwd", a, b, o, n, grid);
  run<U, 3>("gelubwd-f", a, b, o, n, grid);
}

int main() {
  long long n = 16384LL * 3072 / 8; // Pythia's [16384, 3072] bf16 in 16-byte vectors
  V8 *a, *b, *o;
  CK(cudaMalloc(&a, n * 16));
  CK(cudaMalloc(&b, n * 16));
  CK(cudaMalloc(&o, n * 16));
  CK(cudaMemset(a, 0x3c, n * 16));
  CK(cudaMemset(b, 0x3c, n * 16));
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int grids[] = {8192, sms * 8, sms * 16, sms * 32, (int)((n + 255) / 256)};
  for (int g : grids) {
    runModes<1>(a, b, o, n, g);
    runModes<2>(a, b, o, n, g);
    runModes<4>(a, b, o, n, g);
  }
}
