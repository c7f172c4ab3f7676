// bench/cutlass_gemm.cu - CUTLASS's sm_90a GEMMs with the epilogues a GELU
// MLP's training step needs, checked against a naive GPU reference and timed
// at GPT-2's and GPT-2 350M's MLP shapes: the measurement that decides
// whether tc's runtime should run these GEMMs through CUTLASS (its
// warp-specialized persistent kernels, TMA-store epilogues built from
// epilogue visitor trees) instead of cuBLASLt's GELU_AUX_BIAS / DGELU /
// BGRAD epilogues, which cost 40-55 us a call over the plain product at
// c_fc's shape (bench/RESULTS.md, stops 32-41).
//
//   scripts/fetch-cutlass.sh   (CUTLASS's headers from PyPI's nvidia-cutlass into build/cutlass)
//   nvcc -O3 -std=c++17 -I. -Ibuild/cutlass/include --expt-relaxed-constexpr \
//     -gencode arch=compute_90a,code=sm_90a bench/cutlass_gemm.cu -o cutlass_gemm
//   cutlass_gemm            (on an H100/H200)
//
// The three forms, bf16 in and out, f32 accumulation:
//   plain    D = X W^T                         (X [M, K], W [N, K]: nn.Linear)
//   gelu     aux = X W^T + b, D = gelu_tanh(aux)  (c_fc forward; b per column)
//   dgelu    D = (dY W2) * gelu_tanh'(aux), dbias = column sums of D
//            (the MLP's backward: dY [M, K], W2 [K, N]; run as the transposed
//            problem D^T = W2^T dY^T, M = N's features, so the bias gradient
//            is CUTLASS's per-row reduction, deterministic: no atomics)
// each with the cooperative schedule (128x256 tiles, two consumer
// warpgroups on a tile) and the ping-pong one (128x128 tiles, one
// warpgroup's epilogue under the other's products).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));             \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

namespace cutlass_bench {

using namespace cute;
using bf16 = cutlass::bfloat16_t;
using RowMajor = cutlass::layout::RowMajor;
using ColMajor = cutlass::layout::ColumnMajor;

/// A kernel schedule: CTA tile, cluster, mainloop and epilogue schedules.
template <class TileT, class ClusterT, class KernelT, class EpiT> struct Schedule {
  using Tile = TileT;
  using Cluster = ClusterT;
  using Kernel = KernelT;
  using Epi = EpiT;
};
using CoopK = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using CoopE = cutlass::epilogue::TmaWarpSpecializedCooperative;
struct Coop : Schedule<Shape<_128, _256, _64>, Shape<_1, _2, _1>, CoopK, CoopE> {
  static constexpr const char *name = "cooperative 128x256";
};
struct Coop21 : Schedule<Shape<_128, _256, _64>, Shape<_2, _1, _1>, CoopK, CoopE> {
  static constexpr const char *name = "coop 128x256 c2x1";
};
struct Coop256 : Schedule<Shape<_256, _128, _64>, Shape<_1, _2, _1>, CoopK, CoopE> {
  static constexpr const char *name = "coop 256x128 c1x2";
};
struct Ping : Schedule<Shape<_128, _128, _64>, Shape<_1, _2, _1>,
                       cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                       cutlass::epilogue::TmaWarpSpecialized> {
  static constexpr const char *name = "ping-pong 128x128";
};

template <class S, class LayoutA, class LayoutB, class LayoutD, class Fusion> struct Gemm {
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, typename S::Tile, typename S::Cluster,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD, 8, bf16,
      LayoutD, 8, typename S::Epi, Fusion>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, bf16, LayoutA, 8, bf16, LayoutB, 8,
      float, typename S::Tile, typename S::Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      typename S::Kernel>::CollectiveOp;
  using Kernel =
      cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue>;
  using Op = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

using PlainFusion = cutlass::epilogue::fusion::LinearCombination<bf16, float>;
using GeluFusion =
    cutlass::epilogue::fusion::LinCombPerColBiasEltActAux<RowMajor,
                                                         cutlass::epilogue::thread::GELU_taylor,
                                                         bf16, float, bf16, bf16>;
using DGeluFusion =
    cutlass::epilogue::fusion::LinCombDeEltActDePerRowBias<ColMajor, cutlass::epilogue::thread::dGELU,
                                                          bf16, float, bf16, float>;

int gSwizzle = 1; // the persistent scheduler's tile swizzle (L2 locality)

/// The arguments of `m x n x k` with packed operands a, b and out (alpha 1,
/// beta 0, no source); the fusion's own arguments are set by the caller.
template <class G>
typename G::Arguments packedArgs(int m, int n, int k, const bf16 *a, const bf16 *b, bf16 *out) {
  using K = typename G::GemmKernel;
  auto sA = cutlass::make_cute_packed_stride(typename K::StrideA{}, make_shape(m, k, 1));
  auto sB = cutlass::make_cute_packed_stride(typename K::StrideB{}, make_shape(n, k, 1));
  auto sD = cutlass::make_cute_packed_stride(typename K::StrideD{}, make_shape(m, n, 1));
  typename G::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm, {m, n, k, 1}, {a, sA, b, sB}, {{}, nullptr, sD, out, sD}};
  args.epilogue.thread.alpha = 1.f;
  args.epilogue.thread.beta = 0.f;
  return args;
}

/// Runs `args` once (checked), then times `iters` runs; returns microseconds.
template <class Op> double run(typename Op::Arguments args, int iters, bool *ok) {
  args.scheduler.max_swizzle_size = gSwizzle;
  Op op;
  *ok = op.can_implement(args) == cutlass::Status::kSuccess;
  if (!*ok)
    return 0;
  void *ws = nullptr;
  size_t bytes = Op::get_workspace_size(args);
  if (bytes)
    CK(cudaMalloc(&ws, bytes));
  *ok = op.initialize(args, ws) == cutlass::Status::kSuccess && op.run() == cutlass::Status::kSuccess;
  CK(cudaDeviceSynchronize());
  double us = 0;
  if (*ok && iters > 0) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 3; ++i)
      op.run();
    CK(cudaEventRecord(a));
    for (int i = 0; i < iters; ++i)
      op.run();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    us = 1000.0 * ms / iters;
  }
  if (ws)
    CK(cudaFree(ws));
  return us;
}

__device__ float geluT(float z) {
  return 0.5f * z * (1.f + tanhf(0.7978845608028654f * z * (1.f + 0.044715f * z * z)));
}
__device__ float dgeluT(float z) {
  float t = tanhf(0.7978845608028654f * z * (1.f + 0.044715f * z * z));
  return 0.5f * z * ((1 - t * t) * (0.7978845608028654f + 0.1070322243f * z * z)) + 0.5f * (1 + t);
}

/// The forward reference: out[m][n] = sum_k x[m][k] w[n][k] (+ b, gelu).
__global__ void refForward(const bf16 *x, const bf16 *w, const bf16 *b, int M, int N, int K,
                           int form, float *pre, float *out) {
  int m = blockIdx.y, n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N)
    return;
  float s = 0;
  for (int k = 0; k < K; ++k)
    s += float(x[(size_t)m * K + k]) * float(w[(size_t)n * K + k]);
  if (form == 1) {
    s += float(b[n]);
    pre[(size_t)m * N + n] = s;
    s = geluT(s);
  }
  out[(size_t)m * N + n] = s;
}

/// The backward reference: dh[m][n] = (sum_k dy[m][k] w2[k][n]) * gelu'(aux[m][n]).
__global__ void refDgelu(const bf16 *dy, const bf16 *w2, const bf16 *aux, int M, int N, int K,
                         float *dh) {
  int m = blockIdx.y, n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N)
    return;
  float s = 0;
  for (int k = 0; k < K; ++k)
    s += float(dy[(size_t)m * K + k]) * float(w2[(size_t)k * N + n]);
  dh[(size_t)m * N + n] = s * dgeluT(float(aux[(size_t)m * N + n]));
}

template <class T> T *devRandom(size_t n, float scale, unsigned seed) {
  std::vector<T> h(n);
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  for (auto &v : h)
    v = T(u(g));
  T *d = nullptr;
  CK(cudaMalloc(&d, n * sizeof(T)));
  CK(cudaMemcpy(d, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}
template <class T> std::vector<float> down(const T *d, size_t n) {
  std::vector<T> h(n);
  CK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  std::vector<float> f(n);
  for (size_t i = 0; i < n; ++i)
    f[i] = float(h[i]);
  return f;
}
double maxRel(const std::vector<float> &got, const std::vector<float> &want) {
  double worst = 0, scale = 1e-3;
  for (float w : want)
    scale = std::max(scale, (double)std::fabs(w));
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::fabs((double)got[i] - want[i]) / scale);
  return worst;
}

/// One shape: the three forms with schedule S; `check` compares with the
/// naive references (small shapes), else times them.
template <class S> void shape(int M, int N, int K, bool check, bool fused = true) {
  const int iters = check ? 0 : 20;
  // Forward operands: x [M, K], w [N, K], b [N]; outputs d, aux [M, N].
  bf16 *x = devRandom<bf16>((size_t)M * K, 1.f, 1), *w = devRandom<bf16>((size_t)N * K, 0.05f, 2);
  bf16 *b = devRandom<bf16>(N, 0.5f, 3), *d = nullptr, *aux = nullptr;
  CK(cudaMalloc(&d, (size_t)M * N * sizeof(bf16)));
  CK(cudaMalloc(&aux, (size_t)M * N * sizeof(bf16)));
  // Backward operands: dy [M, K], w2 [K, N]; dh [M, N] and dbias [N] (f32).
  bf16 *dy = devRandom<bf16>((size_t)M * K, 1.f, 4), *w2 = devRandom<bf16>((size_t)K * N, 0.05f, 5);
  float *dbias = nullptr;
  CK(cudaMalloc(&dbias, N * sizeof(float)));
  double flops = 2.0 * M * N * K;
  auto report = [&](const char *form, double us, bool ok, double err) {
    if (check)
      std::printf("%-22s %-8s %5dx%5dx%5d  %s  max rel err %.2e\n", S::name, form, M, N, K,
                  ok ? "ran" : "REFUSED", err);
    else
      std::printf("%-22s %-8s %5dx%5dx%5d  %8.1f us  %6.1f TFLOP/s%s swizzle %d\n", S::name, form,
                  M, N, K, us, flops / us * 1e-6, ok ? "" : "  REFUSED", gSwizzle);
  };
  { // plain: D [M, N] row-major = x [M, K] (row-major) * w^T (w [N, K]: column-major K x N)
    using G = typename Gemm<S, RowMajor, ColMajor, RowMajor, PlainFusion>::Op;
    auto args = packedArgs<G>(M, N, K, x, w, d);
    bool ok = false;
    double us = run<G>(args, iters, &ok);
    double err = 0;
    if (check && ok) {
      float *ref = nullptr;
      CK(cudaMalloc(&ref, (size_t)M * N * 4));
      refForward<<<dim3((N + 127) / 128, M), 128>>>(x, w, b, M, N, K, 0, nullptr, ref);
      err = maxRel(down(d, (size_t)M * N), down(ref, (size_t)M * N));
      CK(cudaFree(ref));
    }
    report("plain", us, ok, err);
  }
  if (fused) { // gelu: aux = x w^T + b, D = gelu(aux)
    using G = typename Gemm<S, RowMajor, ColMajor, RowMajor, GeluFusion>::Op;
    auto args = packedArgs<G>(M, N, K, x, w, d);
    args.epilogue.thread.bias_ptr = b;
    args.epilogue.thread.aux_ptr = aux;
    args.epilogue.thread.dAux = args.epilogue.dD; // aux is laid out as D
    bool ok = false;
    double us = run<G>(args, iters, &ok);
    double err = 0;
    if (check && ok) {
      float *pre = nullptr, *ref = nullptr;
      CK(cudaMalloc(&pre, (size_t)M * N * 4));
      CK(cudaMalloc(&ref, (size_t)M * N * 4));
      refForward<<<dim3((N + 127) / 128, M), 128>>>(x, w, b, M, N, K, 1, pre, ref);
      err = std::max(maxRel(down(d, (size_t)M * N), down(ref, (size_t)M * N)),
                     maxRel(down(aux, (size_t)M * N), down(pre, (size_t)M * N)));
      CK(cudaFree(pre));
      CK(cudaFree(ref));
    }
    report("gelu+aux", us, ok, err);
  }
  if (fused) { // dgelu: the transposed problem D^T [N, M] = w2^T [N, K] * dy^T [K, M]:
    // A = w2^T (w2 [K, N] row-major: column-major N x K), B = dy^T (K x M,
    // k contiguous: column-major), D^T and aux^T column-major (= dh, aux
    // [M, N] row-major), dbias per row of D^T (N of them).
    using G = typename Gemm<S, ColMajor, ColMajor, ColMajor, DGeluFusion>::Op;
    auto args = packedArgs<G>(N, M, K, w2, dy, d);
    args.epilogue.thread.aux_ptr = aux; // the forward's pre-activation (random here)
    args.epilogue.thread.dAux = args.epilogue.dD;
    args.epilogue.thread.dbias_ptr = dbias;
    bool ok = false;
    double us = run<G>(args, iters, &ok);
    double err = 0;
    if (check && ok) {
      float *ref = nullptr;
      CK(cudaMalloc(&ref, (size_t)M * N * 4));
      refDgelu<<<dim3((N + 127) / 128, M), 128>>>(dy, w2, aux, M, N, K, ref);
      std::vector<float> want = down(ref, (size_t)M * N), got = down(d, (size_t)M * N);
      err = maxRel(got, want);
      std::vector<float> sums(N, 0.f), gotSums = down(dbias, N);
      for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n)
          sums[n] += want[(size_t)m * N + n];
      err = std::max(err, maxRel(gotSums, sums));
      // The same bits on a second run (no atomics in the reduction).
      std::vector<float> first = gotSums;
      bool again = false;
      run<G>(args, 0, &again);
      if (down(dbias, N) != first)
        std::printf("  dbias differs run to run\n");
      CK(cudaFree(ref));
    }
    report("dgelu+db", us, ok, err);
  }
  for (void *p : {(void *)x, (void *)w, (void *)b, (void *)d, (void *)aux, (void *)dy, (void *)w2,
                  (void *)dbias})
    CK(cudaFree(p));
}

} // namespace cutlass_bench
using namespace cutlass_bench;

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  shape<Coop>(512, 384, 256, true);
  shape<Ping>(512, 384, 256, true);
  shape<Coop>(1000, 3072, 768, true);
  const int shapes[][3] = {{16384, 3072, 768}, {8192, 4096, 1024}};
  for (auto &s : shapes) {
    for (int sw : {1, 2, 4, 8}) {
      gSwizzle = sw;
      shape<Coop>(s[0], s[1], s[2], false, sw != 2);
      shape<Coop21>(s[0], s[1], s[2], false, false);
      shape<Coop256>(s[0], s[1], s[2], false, false);
    }
    gSwizzle = 1;
    shape<Ping>(s[0], s[1], s[2], false);
  }
  return 0;
}
