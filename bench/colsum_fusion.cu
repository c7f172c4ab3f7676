// bench/colsum_fusion.cu - what summing a bias gradient inside the generated
// elementwise kernel that writes dY costs, in the kernel forms that could do
// it (the measurement behind --experimental=fusion-col-sums; stop 46).
//
//   nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 bench/colsum_fusion.cu -o colsum_fusion
//   colsum_fusion [rows cols]     (default 16384 3072: Pythia-160m's c_fc, batch 16 x 1024)
//
// Every form computes Pythia's erf-GELU backward dY = g * gelu'(x) (bf16 in
// and out, f32 math: the expression tc generates) over [rows, cols]; all but
// the first also the column sums of the stored dY (the c_fc bias gradient):
//   plain      tc's elementwise kernel: grid-stride, 8 bf16 a thread and step,
//              256-thread blocks, up to 8192 of them (no sums: the baseline)
//   tiles      tc's fusion-col-sums kernel (stop 46): 12 column tiles of 256
//              x 55 row chunks (660 blocks, __launch_bounds__(256, 5)), 8 sums
//              a lane in registers, the warps combined in shared memory, a
//              partial a block, the tile's last block adding them in order
//   tiles-smem the same with each thread's 8 sums in shared memory (and
//              __launch_bounds__(256, 8)); both also with 1056 blocks (R 88)
//   stride     plain's grid-stride loop (__launch_bounds__(256, 6)) on 660,
//              1056 or 2112 blocks (blocks * 2048 % cols == 0: every
//              thread meets the same 8 columns in every row it
//              visits), 8 sums a thread in registers, written as partials
//              [1056 * 2048 / cols, cols] f32, then a second kernel adding the
//              partials of each column in order
//   stride-smem the same with the sums in shared memory (and
//              __launch_bounds__(256, 8): 32 registers, eight blocks an SM)
// Each form's dY must equal plain's to the bit and its sums a double-precision
// sum of plain's dY to ~1e-3 relative (f32 partial sums in fixed orders);
// the time is the mean of 50 runs after one, in microseconds (both kernels
// for the stride forms), with the bytes moved per microsecond.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda_check.h"

namespace {

template <typename T, int V> struct alignas(sizeof(T) * V) Vec { T v[V]; };
using Bf8 = Vec<unsigned short, 8>;

__device__ __forceinline__ float bf2f(unsigned short h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ unsigned short f2bf(float f) {
  unsigned short r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
}

/// The erf-GELU backward as tc generates it for Pythia (bf16 constants).
__device__ __forceinline__ float geluBwd(float x, float g) {
  const float v3 = x * 0x1.6a13cep-1f;
  const float v6 = (erff(v3) + 1.0f) * 0.5f;
  const float v9 = g * x * 0.5f;
  const float v13 = expf(-(v3 * v3)) * 0x1.2p+0f;
  return g * v6 + v9 * v13 * 0x1.6a13cep-1f;
}

/// dY at 8 adjacent elements (16-byte loads of x and g), stored at out.
__device__ __forceinline__ Bf8 geluBwd8(unsigned short *__restrict__ out,
                                       const unsigned short *__restrict__ x,
                                       const unsigned short *__restrict__ g) {
  const Bf8 a = *reinterpret_cast<const Bf8 *>(x), c = *reinterpret_cast<const Bf8 *>(g);
  Bf8 o;
#pragma unroll
  for (int k = 0; k < 8; ++k)
    o.v[k] = f2bf(geluBwd(bf2f(a.v[k]), bf2f(c.v[k])));
  *reinterpret_cast<Bf8 *>(out) = o;
  return o;
}

/// Adds the stored values o to a thread's 8 sums: its slots of shared
/// memory `part` (SMEM) or registers `cs`.
template <bool SMEM>
__device__ __forceinline__ void addSums(const Bf8 &o, float *part, float (&cs)[8]) {
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    if (SMEM)
      part[threadIdx.x * 8 + k] += bf2f(o.v[k]);
    else
      cs[k] += bf2f(o.v[k]);
  }
}

__global__ void __launch_bounds__(256) plainKernel(unsigned short *__restrict__ out,
                                                   const unsigned short *__restrict__ x,
                                                   const unsigned short *__restrict__ g, long long n) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long b = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 8; b < n; b += stride * 8)
    geluBwd8(out + b, x + b, g + b);
}

constexpr int kMaxParts = 1 << 23;
__device__ float gPart[kMaxParts];
__device__ unsigned gDone[4096];

/// tc's column-tile kernel (fusion-col-sums, stop 46), SMEM: the sums in
/// shared memory instead of registers.
template <bool SMEM, int MINB>
__global__ void __launch_bounds__(256, MINB)
    tileKernel(unsigned short *__restrict__ out, unsigned short *__restrict__ sums,
               const unsigned short *__restrict__ x, const unsigned short *__restrict__ g, int rows,
               int cols, int tiles, int R) {
  __shared__ float part_[256 * 8];
  __shared__ bool last_;
  const int lane = threadIdx.x % 32, grp = threadIdx.x / 32;
  const long long tile_ = blockIdx.x % tiles, rpart_ = blockIdx.x / tiles;
  const long long c0_ = (tile_ * 32 + lane) * 8;
  const long long chunk_ = (rows + R - 1) / R, r0_ = rpart_ * chunk_;
  const long long r1_ = rows < r0_ + chunk_ ? rows : r0_ + chunk_;
  float cs_[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    cs_[k] = 0;
    part_[threadIdx.x * 8 + k] = 0;
  }
  if (c0_ < cols) {
    for (long long r = r0_ + grp; r < r1_; r += 8) {
      const long long b = r * cols + c0_;
      addSums<SMEM>(geluBwd8(out + b, x + b, g + b), part_, cs_);
    }
  }
  if (!SMEM) {
#pragma unroll
    for (int k = 0; k < 8; ++k)
      part_[threadIdx.x * 8 + k] = cs_[k];
  }
  __syncthreads();
  if (grp == 0 && c0_ < cols) {
#pragma unroll
    for (int k = 0; k < 8; ++k)
      cs_[k] = part_[threadIdx.x * 8 + k];
    for (int g_ = 1; g_ < 8; ++g_)
#pragma unroll
      for (int k = 0; k < 8; ++k)
        cs_[k] += part_[(g_ * 32 + lane) * 8 + k];
#pragma unroll
    for (int k = 0; k < 8; ++k)
      gPart[rpart_ * cols + c0_ + k] = cs_[k];
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0)
    last_ = atomicAdd(&gDone[tile_], 1u) == (unsigned)R - 1;
  __syncthreads();
  if (!last_)
    return;
  __threadfence();
  for (long long c_ = threadIdx.x; c_ < 256; c_ += 256) {
    const long long col_ = tile_ * 256 + c_;
    if (col_ >= cols)
      break;
    float a_ = 0;
#pragma unroll 16
    for (int p_ = 0; p_ < R; ++p_)
      a_ += __ldcg(&gPart[p_ * cols + col_]);
    sums[col_] = f2bf(a_);
  }
  if (threadIdx.x == 0)
    gDone[tile_] = 0;
}

/// plain's loop on a grid whose step (blocks * 2048 elements) is a multiple
/// of cols: each thread's 8 columns are fixed; its sums go to partial row
/// (its first element / cols), columns (its first element % cols).
template <bool SMEM, int MINB>
__global__ void __launch_bounds__(256, MINB) strideKernel(unsigned short *__restrict__ out,
                                                    const unsigned short *__restrict__ x,
                                                    const unsigned short *__restrict__ g,
                                                    long long n) {
  __shared__ float part_[SMEM ? 256 * 8 : 1];
  const long long stride = (long long)gridDim.x * blockDim.x;
  const long long b0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 8;
  float cs_[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    cs_[k] = 0;
    if (SMEM)
      part_[threadIdx.x * 8 + k] = 0;
  }
  for (long long b = b0; b < n; b += stride * 8)
    addSums<SMEM>(geluBwd8(out + b, x + b, g + b), part_, cs_);
#pragma unroll
  for (int k = 0; k < 8; ++k)
    gPart[b0 + k] = SMEM ? part_[threadIdx.x * 8 + k] : cs_[k];
}

/// The partials [P, cols] summed over P in order: 32 columns a block, its 8
/// warps down the rows, combined in warp order.
__global__ void __launch_bounds__(256) partsKernel(unsigned short *__restrict__ sums, int P,
                                                   int cols) {
  __shared__ float s_[8][32];
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  const int col = blockIdx.x * 32 + lane;
  float a = 0;
  if (col < cols)
    for (int p = w; p < P; p += 8)
      a += gPart[(long long)p * cols + col];
  s_[w][lane] = a;
  __syncthreads();
  if (w == 0 && col < cols) {
    for (int j = 1; j < 8; ++j)
      a += s_[j][lane];
    sums[col] = f2bf(a);
  }
}

float hbf(unsigned short h) {
  unsigned u = (unsigned)h << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

} // namespace

int main(int argc, char **argv) {
  const int rows = argc > 2 ? std::atoi(argv[1]) : 16384, cols = argc > 2 ? std::atoi(argv[2]) : 3072;
  const long long n = (long long)rows * cols;
  if (cols % 256 || rows % 64) {
    std::fprintf(stderr, "cols must divide by 256, rows by 64\n");
    return 2;
  }
  std::vector<unsigned short> hx(n), hg(n);
  uint32_t s = 12345;
  auto rnd = [&]() {
    s = s * 1664525u + 1013904223u;
    return ((s >> 8) & 0xffff) / 65536.0f * 6.0f - 3.0f;
  };
  for (long long i = 0; i < n; ++i) {
    float a = rnd(), b = rnd() * 0.01f;
    unsigned ua, ub;
    std::memcpy(&ua, &a, 4);
    std::memcpy(&ub, &b, 4);
    hx[i] = (unsigned short)(ua >> 16);
    hg[i] = (unsigned short)(ub >> 16);
  }
  unsigned short *x, *g, *ref, *out, *sums;
  CK(cudaMalloc(&x, n * 2));
  CK(cudaMalloc(&g, n * 2));
  CK(cudaMalloc(&ref, n * 2));
  CK(cudaMalloc(&out, n * 2));
  CK(cudaMalloc(&sums, cols * 2));
  CK(cudaMemcpy(x, hx.data(), n * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(g, hg.data(), n * 2, cudaMemcpyHostToDevice));
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  const int plainGrid = (int)std::min<long long>(8192, (n / 8 + 255) / 256);
  const double bytes = 3.0 * n * 2;
  float tPlain = timeUs(st, 50, [&] { plainKernel<<<plainGrid, 256, 0, st>>>(ref, x, g, n); });
  CK(cudaStreamSynchronize(st));
  std::vector<unsigned short> href(n);
  CK(cudaMemcpy(href.data(), ref, n * 2, cudaMemcpyDeviceToHost));
  std::vector<double> want(cols, 0.0);
  for (long long i = 0; i < n; ++i)
    want[i % cols] += hbf(href[i]);
  std::printf("[%d, %d] bf16 erf-GELU backward (%.0f MB moved), H2D reference: plain\n", rows, cols,
              bytes / 1e6);
  std::printf("%-26s %9.1f us %7.2f TB/s\n", "plain (no sums)", tPlain, bytes / tPlain / 1e6);
  auto check = [&](const char *name, float us) {
    CK(cudaStreamSynchronize(st));
    std::vector<unsigned short> ho(n), hs(cols);
    CK(cudaMemcpy(ho.data(), out, n * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hs.data(), sums, cols * 2, cudaMemcpyDeviceToHost));
    long long diff = 0;
    for (long long i = 0; i < n; ++i)
      diff += ho[i] != href[i];
    double worst = 0;
    for (int c = 0; c < cols; ++c)
      worst = std::max(worst, std::fabs(hbf(hs[c]) - want[c]) / (std::fabs(want[c]) + 1e-2));
    std::printf("%-26s %9.1f us %7.2f TB/s  (%+.1f us; dY %s, sums worst rel %.1e %s)\n", name, us,
                bytes / us / 1e6, us - tPlain, diff ? "DIFFERS" : "same bits", worst,
                worst < 1e-2 ? "ok" : "WRONG");
    CK(cudaMemset(out, 0, n * 2));
    CK(cudaMemset(sums, 0, cols * 2));
  };
  const int tiles = cols / 256;
  for (int blocksPerSm : {5, 8}) {
    const int R = std::max(1, std::min(std::min(132 * blocksPerSm / tiles, 128), rows / 64));
    char name[64];
    std::snprintf(name, sizeof name, "tiles (R %d)", R);
    float t = timeUs(st, 50, [&] {
      tileKernel<false, 5><<<tiles * R, 256, 0, st>>>(out, sums, x, g, rows, cols, tiles, R);
    });
    check(name, t);
    std::snprintf(name, sizeof name, "tiles-smem (R %d)", R);
    t = timeUs(st, 50, [&] {
      tileKernel<true, 8><<<tiles * R, 256, 0, st>>>(out, sums, x, g, rows, cols, tiles, R);
    });
    check(name, t);
  }
  for (int blocks : {660, 1056, 2112}) {
    if ((long long)blocks * 2048 % cols || (long long)blocks * 2048 > kMaxParts)
      continue;
    const int P = (int)((long long)blocks * 2048 / cols);
    char name[64];
    for (bool smem : {false, true}) {
      std::snprintf(name, sizeof name, "stride%s (%d, P %d)", smem ? "-smem" : "", blocks, P);
      float t = timeUs(st, 50, [&] {
        if (smem)
          strideKernel<true, 8><<<blocks, 256, 0, st>>>(out, x, g, n);
        else
          strideKernel<false, 6><<<blocks, 256, 0, st>>>(out, x, g, n);
        partsKernel<<<(cols + 31) / 32, 256, 0, st>>>(sums, P, cols);
      });
      check(name, t);
    }
  }
  return 0;
}
