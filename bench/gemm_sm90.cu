// bench/gemm_sm90.cu - a warp-specialised sm_90a GEMM (TMA loads, wgmma,
// mbarrier pipeline, persistent tiles) with fused epilogues, timed beside
// cuBLASLt on the same shapes: the measurement that decides whether tc's
// Linear layers should leave cuBLASLt's epilogues (GELU_AUX_BIAS at GPT-2's
// c_fc costs ~45 us over the plain product on the H200) for its own kernel.
//
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a bench/gemm_sm90.cu \
//     -lcublasLt -lcuda -o gemm_sm90
//   gemm_sm90 [--only=FORM,...] [M N K]...   (default: GPT-2's four Linear shapes at 16 x 1024
//     tokens; forms: basic (direct and TMA stores, cuBLASLt's times), pingpong, hc, deferred,
//     cluster, pp64, coopstore; default all)
//
// out[M, N] = a[M, K] b[N, K]^T (+ bias[N]) with a and b row-major bf16 (both
// K-major: tc's `rhs^T` forward form), fp32 accumulation, bf16 out; the
// epilogues: none, bias, bias + GELU (tanh form) with the pre-activation
// written beside (cuBLASLt's GELU_AUX_BIAS, what tc-fuse-epilogues asks of
// the first MLP matmul), and DGELU (the product times gelu'(aux): the
// backward's dgrad of the second MLP matmul). Each with direct stores from
// registers or through shared memory and TMA stores. M % 128, N % 256 and
// K % 64 must be 0.

//
// The forms (each checked against cuBLASLt's output, then timed; bench/
// RESULTS.md, stop 36, has the H100 numbers and what they settle):
//   - gemmKernel: 3 warpgroups a block, one block an SM over 128x256 output
//     tiles (N fastest). Warpgroup 0 (one thread) loads 128x64 tiles of a
//     and 256x64 of b by TMA (128-byte swizzle) into a ring of stages, each
//     stage's `full` mbarrier counting its bytes; warpgroups 1 and 2 each
//     compute 64 rows of the tile with m64n256k16 wgmmas, keep one stage's
//     group in flight and give a stage back (`empty`) once it has completed.
//     Epilogue: direct stores from the fragments (4 stages), or through
//     shared memory and TMA stores (3 stages; HC: 4 stages and the tile in
//     two rounds); CL 2: clusters of two blocks on adjacent row tiles
//     sharing b (each loads half and multicasts it); BL 1: b N-major.
//   - gemmPingpong: a 128x128 (or 64x256) tile for each consumer
//     warpgroup, their products taking turns, one's epilogue under the
//     other's products.
//   - gemmCoopStore: gemmKernel's tiles with the epilogue's bulk copies
//     handed to store threads of the loading warpgroup.
//   - gemmDeferred: gemmKernel's 4-stage form whose GELU runs on the stored
//     pre-activation (DGELU: on the stored product and the aux), box by box,
//     between the next tile's k-blocks.
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
#include <string>
#include <vector>

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));      \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)
#define CB(x)                                                                                      \
  do {                                                                                             \
    cublasStatus_t s_ = (x);                                                                       \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                             \
      std::fprintf(stderr, "%s: status %d\n", #x, (int)s_);                                        \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

using bf16 = __nv_bfloat16;

namespace {

constexpr int BM = 128, BN = 256, BK = 64;
constexpr int kConsumers = 2;
constexpr int kThreads = 128 * (kConsumers + 1);
constexpr int kStageBytesA = BM * BK * 2, kStageBytesB = BN * BK * 2;
/// Direct stores: 4 stages. TMA stores: 3 stages and the output tile (64 KB,
/// each consumer warpgroup's 64 rows as 4 swizzled [64, 64] boxes).
__host__ __device__ constexpr int stagesFor(bool tmaStore) { return tmaStore ? 3 : 4; }
constexpr int kTileBytesC = BM * BN * 2;
constexpr int smemBytesFor(bool tmaStore) {
  return stagesFor(tmaStore) * (kStageBytesA + kStageBytesB) + (tmaStore ? kTileBytesC : 0) +
         1024 /* alignment */ + (2 * 4 + 2) * 8;
}
constexpr int smemBytesHC() {
  return 4 * (kStageBytesA + kStageBytesB) + kTileBytesC / 2 + 1024 + (2 * 4 + 2) * 8;
}

enum Epilogue { kPlain = 0, kBias = 1, kBiasGeluAux = 2, kDgelu = 3 };

__device__ __forceinline__ uint32_t smemAddr(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbarInit(uint64_t *bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smemAddr(bar)), "r"(count));
}
__device__ __forceinline__ void mbarExpectTx(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smemAddr(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbarArrive(uint64_t *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smemAddr(bar)) : "memory");
}
__device__ __forceinline__ void mbarWait(uint64_t *bar, int parity) {
  asm volatile("{\n.reg .pred p;\nWAIT_%=:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
               "@!p bra WAIT_%=;\n}\n" ::"r"(smemAddr(bar)),
               "r"(parity)
               : "memory");
}
/// mbarWait with cluster-scope acquire: for barriers the peer block arrives
/// on remotely (release.cluster).
__device__ __forceinline__ void mbarWaitCluster(uint64_t *bar, int parity) {
  asm volatile("{\n.reg .pred p;\nWAITC_%=:\n"
               "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1;\n"
               "@!p bra WAITC_%=;\n}\n" ::"r"(smemAddr(bar)),
               "r"(parity)
               : "memory");
}
__device__ __forceinline__ void tmaLoad2d(void *dst, const CUtensorMap *map, uint64_t *bar, int c0,
                                          int c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(smemAddr(dst)),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(smemAddr(bar)), "r"(c0), "r"(c1)
               : "memory");
}
__device__ __forceinline__ void tmaStore2d(const CUtensorMap *map, const void *src, int c0,
                                           int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(smemAddr(src)), "r"(c0), "r"(c1)
      : "memory");
}
__device__ __forceinline__ void tmaStoreCommit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
/// Until this thread's bulk stores have read their shared memory.
__device__ __forceinline__ void tmaStoreWaitRead() {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
__device__ __forceinline__ void tmaStoreWaitAll() {
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}
/// Generic-proxy writes to shared memory made visible to the async proxy (TMA).
__device__ __forceinline__ void fenceProxyAsync() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
/// A barrier of the `count` threads that name `id` (1..15; 0 is __syncthreads).
__device__ __forceinline__ void namedBarrier(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

/// Arrives at named barrier `id` without waiting (its `count` includes the
/// threads that bar.sync on it).
__device__ __forceinline__ void namedBarrierArrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

/// Both blocks of the cluster past this point (every thread of each).
__device__ __forceinline__ void clusterSync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::
                   : "memory");
}
/// A TMA load multicast to the cluster's blocks in ctaMask: the same
/// shared-memory offset and mbarrier offset in each.
__device__ __forceinline__ void tmaLoad2dMulticast(void *dst, const CUtensorMap *map, uint64_t *bar,
                                                   int c0, int c1, uint16_t ctaMask) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(smemAddr(dst)),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(smemAddr(bar)), "r"(c0), "r"(c1),
               "h"(ctaMask)
               : "memory");
}
/// A stage given back: to this block's loader and, in a cluster of two, to
/// the peer's (whose multicast writes this block's stage too).
template <int CL> __device__ __forceinline__ void releaseStage(uint64_t *bar, int rank) {
  mbarArrive(bar);
  if (CL == 2) {
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
                 : "=r"(remote)
                 : "r"(smemAddr(bar)), "r"(rank ^ 1));
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote)
                 : "memory");
  }
}

/// The shared-memory matrix descriptor of a K-major tile of 64 bf16 (128
/// bytes) a row, 128-byte swizzled, 8-row groups 1024 bytes apart, the tile
/// 1024-byte aligned: start address >> 4, leading offset 1 (unused when
/// swizzled), stride offset 1024 >> 4, swizzle mode 1 (128 bytes).
__device__ __forceinline__ uint64_t descSw128(const void *p) {
  uint64_t d = (smemAddr(p) >> 4) & 0x3FFF;
  d |= uint64_t(1) << 16;
  d |= uint64_t(1024 >> 4) << 32;
  d |= uint64_t(1) << 62;
  return d;
}
/// d (+)= A B for one m64n128k16 bf16 wgmma (B N-major with TransB).
template <int TransB>
__device__ __forceinline__ void wgmma128(float (&d)[64], uint64_t descA, uint64_t descB,
                                         int scaleD) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
      "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "
      "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "
      "%56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, %67;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "l"(descA), "l"(descB), "r"(scaleD), "n"(TransB));
}

/// The descriptor of an N-major B tile [64 K rows][256 N] stored as 4 TMA
/// boxes of [64 K rows, 64 N] (8 KB each, 128-byte swizzled): 8-row K groups
/// 1024 bytes apart, 64-element N chunks 8192 apart. Which of the leading /
/// stride offsets is which for MN-major layouts is what BL 1 and 2 try
/// (1: leading = the N chunks, stride = the K groups; 2: swapped).
template <int BL> __device__ __forceinline__ uint64_t descSw128N(const void *p) {
  uint64_t d = (smemAddr(p) >> 4) & 0x3FFF;
  uint64_t lead = BL == 1 ? 8192 : 1024, stride = BL == 1 ? 1024 : 8192;
  d |= uint64_t(lead >> 4) << 16;
  d |= uint64_t(stride >> 4) << 32;
  d |= uint64_t(1) << 62;
  return d;
}
__device__ __forceinline__ void wgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void wgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
template <int R> __device__ __forceinline__ void setMaxRegsInc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R> __device__ __forceinline__ void setMaxRegsDec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}

/// d (+)= A B for one m64n256k16 bf16 wgmma: A and B K-major in shared
/// memory through their descriptors (B N-major with TransB); scaleD 0
/// overwrites d.
template <int TransB>
__device__ __forceinline__ void wgmma256(float (&d)[128], uint64_t descA, uint64_t descB,
                                         int scaleD) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
      "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "
      "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "
      "%56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, "
      "%74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, "
      "%92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, "
      "%108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, "
      "%123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, %131;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
        "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
        "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
        "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
        "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]),
        "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
        "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
        "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),
        "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(descA), "l"(descB), "r"(scaleD), "n"(TransB));
}

/// GELU's tanh form with the MUFU tanh (tanh.approx.f32: relative error
/// ~2^-11, below bf16's 2^-8 rounding of the result).
__device__ __forceinline__ float geluTanh(float h) {
  float u = 0.7978845608028654f * (h + 0.044715f * h * h * h), t;
  asm("tanh.approx.f32 %0, %1;\n" : "=f"(t) : "f"(u));
  return 0.5f * h * (1.0f + t);
}
/// d gelu(h) / dh of the tanh form.
__device__ __forceinline__ float geluTanhGrad(float h) {
  float u = 0.7978845608028654f * (h + 0.044715f * h * h * h), t;
  asm("tanh.approx.f32 %0, %1;\n" : "=f"(t) : "f"(u));
  return 0.5f * (1.0f + t) +
         0.5f * h * (1.0f - t * t) * 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * h * h);
}

/// out = a b^T (+ bias) (GELU, aux = the pre-activation), tiles of 128x256.
/// TmaStore: each consumer warpgroup writes its 64x256 part of the tile into
/// shared memory (swizzled as the [64, 64] boxes of mapOut / mapAux are) and
/// one of its threads stores it by TMA, asynchronously: the warpgroup goes on
/// to the next tile's products while the copy drains (it waits for the copy
/// to have read the shared memory only before writing it again).
template <int EPI, bool TmaStore, int BL = 0, int CL = 1, int HC = 0>
__global__ void __launch_bounds__(kThreads, 1)
    gemmKernel(const __grid_constant__ CUtensorMap mapA, const __grid_constant__ CUtensorMap mapB,
               const __grid_constant__ CUtensorMap mapOut,
               const __grid_constant__ CUtensorMap mapAux, bf16 *__restrict__ out,
               bf16 *__restrict__ aux, const bf16 *__restrict__ bias, int M, int N, int K) {
  // HC 1: 4 stages and half the output tile (each warpgroup stores its
  // 64x256 part in two rounds of 64x128), as cuBLASLt's 128x256 kernel has 4.
  static_assert(!HC || (TmaStore && EPI != kDgelu), "HC: TMA stores, no DGELU");
  constexpr int STAGES = HC ? 4 : stagesFor(TmaStore);
  constexpr int kC = HC ? kTileBytesC / 2 : kTileBytesC; // the output tile's shared memory
  constexpr int kRounds = HC ? 2 : 1, kBoxes = 4 / kRounds;
  extern __shared__ unsigned char smemRaw[];
  unsigned char *base = reinterpret_cast<unsigned char *>(
      (reinterpret_cast<uintptr_t>(smemRaw) + 1023) & ~uintptr_t(1023));
  bf16 *sA = reinterpret_cast<bf16 *>(base);
  bf16 *sB = reinterpret_cast<bf16 *>(base + STAGES * kStageBytesA);
  unsigned char *sC = base + STAGES * (kStageBytesA + kStageBytesB);
  uint64_t *full = reinterpret_cast<uint64_t *>(sC + (TmaStore ? kC : 0));
  uint64_t *empty = full + STAGES;
  uint64_t *auxFull = empty + STAGES; // kDgelu with TMA: the aux tile of each consumer warpgroup
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  const int tilesN = N / BN, tiles = (M / BM) * tilesN, kBlocks = K / BK;
  // CL 2: clusters of two blocks take pairs of tiles (rows tm, tm + 1 of the
  // same columns tn) and share the b tile: each block loads one half of it
  // and multicasts it to both.
  const int rank = CL == 2 ? int(blockIdx.x % 2) : 0;
  const int first = CL == 2 ? int(blockIdx.x / 2) : int(blockIdx.x);
  const int stride = CL == 2 ? int(gridDim.x / 2) : int(gridDim.x);
  const int count = CL == 2 ? tiles / 2 : tiles;
  auto tileOf = [&](int t, int &tm, int &tn) {
    tm = CL == 2 ? 2 * (t / tilesN) + rank : t / tilesN;
    tn = t % tilesN;
  };
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbarInit(&full[s], 1);
      mbarInit(&empty[s], kConsumers * CL);
    }
    mbarInit(&auxFull[0], 1);
    mbarInit(&auxFull[1], 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if (CL == 2)
    clusterSync(); // the peer's barriers exist before anything reaches them
  else
    __syncthreads();
  if (wg == 0) { // the loads
    setMaxRegsDec<40>();
    if (tid == 0) {
      int stage = 0, phase = 0;
      for (int t = first; t < count; t += stride) {
        int tm, tn;
        tileOf(t, tm, tn);
        for (int kb = 0; kb < kBlocks; ++kb) {
          if (CL == 2)
            mbarWaitCluster(&empty[stage], phase ^ 1);
          else
            mbarWait(&empty[stage], phase ^ 1);
          mbarExpectTx(&full[stage], kStageBytesA + kStageBytesB);
          tmaLoad2d(sA + stage * (BM * BK), &mapA, &full[stage], kb * BK, tm * BM);
          if (CL == 2) { // this block's half of b, into both blocks
            tmaLoad2dMulticast(sB + stage * (BN * BK) + rank * (BN / 2 * BK), &mapB, &full[stage],
                               kb * BK, tn * BN + rank * (BN / 2), 0x3);
          } else if (BL == 0) {
            tmaLoad2d(sB + stage * (BN * BK), &mapB, &full[stage], kb * BK, tn * BN);
          } else { // b [K, N]: 4 boxes of [64 K rows, 64 N]
#pragma unroll
            for (int box = 0; box < 4; ++box)
              tmaLoad2d(sB + stage * (BN * BK) + box * (64 * 64), &mapB, &full[stage],
                        tn * BN + box * 64, kb * BK);
          }
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
    }
    if (CL == 2)
      clusterSync(); // no block leaves while its peer may still copy into it or arrive on it
    return;
  }
  setMaxRegsInc<232>();
  const int g = wg - 1; // rows 64 g .. 64 g + 63 of the tile
  float acc[128];
  int stage = 0, phase = 0;
  const int warp = tid / 32, lane = tid % 32;
  unsigned char *myC = sC + g * (kC / 2); // 4 (HC: 2) boxes of [64 rows, 128 bytes]
  int auxPhase = 0;
  for (int t = first; t < count; t += stride) {
    int tm, tn;
    tileOf(t, tm, tn);
    if (EPI == kDgelu && TmaStore && tid == 0) {
      // This tile's aux part into myC, once the previous tile's stores have
      // read it: it lands while the products run.
      tmaStoreWaitRead();
      mbarExpectTx(&auxFull[g], kTileBytesC / 2);
#pragma unroll
      for (int box = 0; box < 4; ++box)
        tmaLoad2d(myC + box * 8192, &mapAux, &auxFull[g], tn * BN + box * 64, tm * BM + g * 64);
    }
    int prev = -1;
    for (int kb = 0; kb < kBlocks; ++kb) {
      mbarWait(&full[stage], phase);
      uint64_t dA = descSw128(sA + stage * (BM * BK) + g * 64 * BK);
      uint64_t dB =
          BL == 0 ? descSw128(sB + stage * (BN * BK)) : descSw128N<BL>(sB + stage * (BN * BK));
      wgmmaFence();
#pragma unroll
      for (int k = 0; k < BK / 16; ++k) // 32 bytes further along K a step (N-major B: 16 rows)
        wgmma256<BL != 0>(acc, dA + 2 * k, dB + (BL == 0 ? 2 : 128) * k, (kb > 0 || k > 0) ? 1 : 0);
      wgmmaCommit();
      if (prev >= 0) {
        wgmmaWait<1>(); // the previous stage's group is done with its tiles
        if (tid == 0)
          releaseStage<CL>(&empty[prev], rank);
      }
      prev = stage;
      if (++stage == STAGES) {
        stage = 0;
        phase ^= 1;
      }
    }
    wgmmaWait<0>();
    if (tid == 0)
      releaseStage<CL>(&empty[prev], rank);
    // acc[4 j + {0, 1}]: row rl, columns 8 j + 2 (lane % 4) + {0, 1} of the
    // tile; acc[4 j + {2, 3}]: row rl + 8 (rows of this warpgroup's 64).
    const int rl = warp * 16 + lane / 4;
    const int r0 = tm * BM + g * 64 + rl;
    const int cl = 2 * (lane % 4);
    // v = acc + bias, then (GELU variant) aux = v and out = gelu(v as stored).
    auto value = [&](int j, int h, float &v0, float &v1, __nv_bfloat162 &pre) {
      float b0 = 0.0f, b1 = 0.0f;
      if (EPI == kBias || EPI == kBiasGeluAux) {
        __nv_bfloat162 bb = *reinterpret_cast<const __nv_bfloat162 *>(bias + tn * BN + 8 * j + cl);
        b0 = __bfloat162float(bb.x);
        b1 = __bfloat162float(bb.y);
      }
      v0 = acc[4 * j + 2 * h] + b0;
      v1 = acc[4 * j + 2 * h + 1] + b1;
      if (EPI == kDgelu) {
        __nv_bfloat162 hx = *reinterpret_cast<const __nv_bfloat162 *>(aux + size_t(r0 + 8 * h) * N +
                                                                      tn * BN + 8 * j + cl);
        v0 *= geluTanhGrad(__bfloat162float(hx.x));
        v1 *= geluTanhGrad(__bfloat162float(hx.y));
      }
      pre = __floats2bfloat162_rn(v0, v1);
      if (EPI == kBiasGeluAux) {
        v0 = geluTanh(__bfloat162float(pre.x));
        v1 = geluTanh(__bfloat162float(pre.y));
      }
    };
    if constexpr (!TmaStore) {
#pragma unroll
      for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float v0, v1;
          __nv_bfloat162 pre;
          value(j, h, v0, v1, pre);
          size_t at = size_t(r0 + 8 * h) * N + tn * BN + 8 * j + cl;
          if (EPI == kBiasGeluAux)
            *reinterpret_cast<__nv_bfloat162 *>(aux + at) = pre;
          *reinterpret_cast<__nv_bfloat162 *>(out + at) = __floats2bfloat162_rn(v0, v1);
        }
    } else {
      // Element (r, c) of this warpgroup's part lives in box c / 64 at byte
      // r 128 + ((c % 64) 2 / 16 ^ r % 8) 16 + (c % 64) 2 % 16 (the 128-byte
      // swizzle TMA applies).
      // pass 0: v = acc + bias, stored (GELU: as aux, and acc becomes v as
      // stored); pass 1 (GELU only): gelu(acc) stored as out.
      auto put = [&](int pass, int round) {
        if (EPI == kDgelu) {
          mbarWait(&auxFull[g], auxPhase); // (the load waited for the stores' reads)
          auxPhase ^= 1;
        } else {
          if (tid == 0)
            tmaStoreWaitRead(); // the previous stores have read myC
          namedBarrier(1 + g, 128);
        }
#pragma unroll
        for (int jj = 0; jj < BN / 8 / kRounds; ++jj) {
          const int j = round * (BN / 8 / kRounds) + jj;
          float b0 = 0.0f, b1 = 0.0f;
          if ((EPI == kBias || EPI == kBiasGeluAux) && pass == 0) {
            __nv_bfloat162 bb =
                *reinterpret_cast<const __nv_bfloat162 *>(bias + tn * BN + 8 * j + cl);
            b0 = __bfloat162float(bb.x);
            b1 = __bfloat162float(bb.y);
          }
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            float &a0 = acc[4 * j + 2 * h], &a1 = acc[4 * j + 2 * h + 1];
            __nv_bfloat162 st;
            int r = rl + 8 * h, c = 8 * j + cl;
            int box = c / 64 - round * kBoxes, cb = (c % 64) * 2;
            unsigned char *at =
                myC + box * 8192 + r * 128 + (((cb >> 4) ^ (r & 7)) << 4) + (cb & 15);
            if (EPI == kDgelu) {
              __nv_bfloat162 hx = *reinterpret_cast<const __nv_bfloat162 *>(at);
              st = __floats2bfloat162_rn(a0 * geluTanhGrad(__bfloat162float(hx.x)),
                                         a1 * geluTanhGrad(__bfloat162float(hx.y)));
            } else if (pass == 0) {
              st = __floats2bfloat162_rn(a0 + b0, a1 + b1);
              if (EPI == kBiasGeluAux) {
                a0 = __bfloat162float(st.x);
                a1 = __bfloat162float(st.y);
              }
            } else {
              st = __floats2bfloat162_rn(geluTanh(a0), geluTanh(a1));
            }
            *reinterpret_cast<__nv_bfloat162 *>(at) = st;
          }
        }
        fenceProxyAsync();
        namedBarrier(1 + g, 128);
        if (tid == 0) {
          const CUtensorMap *map = (EPI == kBiasGeluAux && pass == 0) ? &mapAux : &mapOut;
#pragma unroll
          for (int box = 0; box < kBoxes; ++box)
            tmaStore2d(map, myC + box * 8192, tn * BN + (round * kBoxes + box) * 64,
                       tm * BM + g * 64);
          tmaStoreCommit();
        }
      };
#pragma unroll
      for (int round = 0; round < kRounds; ++round)
        put(0, round);
      if (EPI == kBiasGeluAux)
#pragma unroll
        for (int round = 0; round < kRounds; ++round)
          put(1, round);
    }
  }
  if constexpr (TmaStore)
    if (tid == 0)
      tmaStoreWaitAll();
  if (CL == 2)
    clusterSync();
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

/// gemmKernel (TMA stores) in clusters of two blocks sharing b tiles.
template <int EPI>
void launchCluster(const CUtensorMap &ma, const CUtensorMap &mbHalf, const CUtensorMap &mo,
                   const CUtensorMap &mx, bf16 *out, bf16 *aux, const bf16 *bias, int M, int N,
                   int K, int sms, cudaStream_t s) {
  static bool once = [] {
    CK(cudaFuncSetAttribute(gemmKernel<EPI, true, 0, 2>,
                            cudaFuncAttributeMaxDynamicSharedMemorySize, smemBytesFor(true)));
    return true;
  }();
  (void)once;
  int pairs = (M / BM) * (N / BN) / 2;
  cudaLaunchConfig_t cfg = {};
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smemBytesFor(true);
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 2;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  // A persistent grid of clusters must fit at once: pairs of SMs within one
  // GPC, fewer than half the SMs where a GPC has an odd count. Clusters past
  // that would start only when a whole resident cluster has finished all of
  // its tiles.
  static int active = [&] {
    cudaLaunchConfig_t probe = cfg;
    probe.gridDim = dim3(2 * (sms / 2));
    int n = 0;
    CK(cudaOccupancyMaxActiveClusters(&n, gemmKernel<EPI, true, 0, 2>, &probe));
    std::printf("  (clusters of 2 resident at once: %d)\n", n);
    return n;
  }();
  cfg.gridDim = dim3(2 * std::min(pairs, std::max(active, 1)));
  CK(cudaLaunchKernelEx(&cfg, gemmKernel<EPI, true, 0, 2>, ma, mbHalf, mo, mx, out, aux, bias, M, N,
                        K));
}

template <int EPI, bool TmaStore, int BL = 0, int HC = 0>
void launch(const CUtensorMap &ma, const CUtensorMap &mb, const CUtensorMap &mo,
            const CUtensorMap &mx, bf16 *out, bf16 *aux, const bf16 *bias, int M, int N, int K,
            int sms, cudaStream_t s) {
  static bool once = [] {
    CK(cudaFuncSetAttribute(gemmKernel<EPI, TmaStore, BL, 1, HC>,
                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (HC ? smemBytesHC() : smemBytesFor(TmaStore))));
    return true;
  }();
  (void)once;
  int tiles = (M / BM) * (N / BN);
  gemmKernel<EPI, TmaStore, BL, 1, HC>
      <<<std::min(tiles, sms), kThreads, (HC ? smemBytesHC() : smemBytesFor(TmaStore)), s>>>(
          ma, mb, mo, mx, out, aux, bias, M, N, K);
}

//===----------------------------------------------------------------------===//
// The ping-pong form: each consumer warpgroup a 128x128 tile of its own
//===----------------------------------------------------------------------===//

/// Ping-pong trace (TR): per block and consumer warpgroup, 8 sums of clock64
/// intervals over its tiles (see gemmPingpong), then the tile count.
constexpr int kTraceFields = 8;
__device__ long long *gTrace;

/// Ping-pong tiles a warpgroup: TM 128 (128x128, two m64n128k16 a k-step)
/// or 64 (64x256, one m64n256k16); 5 or 4 stages of 32 or 40 KB, and 32 KB
/// of output tile a warpgroup.
template <int TM, int ST = (TM == 128 ? 5 : 4)> struct PP {
  static constexpr int M = TM, N = TM == 128 ? 128 : 256, STAGES = ST;
  static constexpr int stageA = M * BK * 2, stageB = N * BK * 2, tileC = M * N * 2;
  static constexpr int smem = STAGES * (stageA + stageB) + 2 * tileC + 1024 + (2 * STAGES + 2) * 8;
};

/// out = a b^T (+ epilogue) over 128x128 tiles: tile i of the block (tiles
/// blockIdx.x + i gridDim.x, N fastest) goes to consumer warpgroup i % 2.
/// The loading thread fills one ring with the tiles' k-blocks in tile order,
/// so each warpgroup's products follow the other's: one warpgroup's epilogue
/// (through its own 32 KB of shared memory and TMA stores) runs under the
/// other's products. Each stage is given back by the one warpgroup that
/// read it. mapOut / mapAux boxes are [128 rows, 64 columns].
template <int EPI, int BL, int TM, int ST = (TM == 128 ? 5 : 4), bool TR = false>
__global__ void __launch_bounds__(kThreads, 1)
    gemmPingpong(const __grid_constant__ CUtensorMap mapA, const __grid_constant__ CUtensorMap mapB,
                 const __grid_constant__ CUtensorMap mapOut,
                 const __grid_constant__ CUtensorMap mapAux, const bf16 *__restrict__ bias, int M,
                 int N, int K) {
  using P = PP<TM, ST>;
  constexpr int PM = P::M, PN = P::N, PSTAGES = P::STAGES;
  constexpr int kPStageA = P::stageA, kPStageB = P::stageB, kPTileC = P::tileC;
  extern __shared__ unsigned char smemRaw[];
  unsigned char *base = reinterpret_cast<unsigned char *>(
      (reinterpret_cast<uintptr_t>(smemRaw) + 1023) & ~uintptr_t(1023));
  bf16 *sA = reinterpret_cast<bf16 *>(base);
  bf16 *sB = reinterpret_cast<bf16 *>(base + PSTAGES * kPStageA);
  unsigned char *sC = base + PSTAGES * (kPStageA + kPStageB);
  uint64_t *full = reinterpret_cast<uint64_t *>(sC + 2 * kPTileC);
  uint64_t *empty = full + PSTAGES;
  uint64_t *auxFull = empty + PSTAGES;
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  const int tilesN = N / PN, tiles = (M / PM) * tilesN, kBlocks = K / BK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < PSTAGES; ++s) {
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
    if (tid == 0) {
      int stage = 0, phase = 0;
      for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int tm = tile / tilesN, tn = tile % tilesN;
        for (int kb = 0; kb < kBlocks; ++kb) {
          mbarWait(&empty[stage], phase ^ 1);
          mbarExpectTx(&full[stage], kPStageA + kPStageB);
          tmaLoad2d(sA + stage * (PM * BK), &mapA, &full[stage], kb * BK, tm * PM);
          if (BL == 0) {
            tmaLoad2d(sB + stage * (PN * BK), &mapB, &full[stage], kb * BK, tn * PN);
          } else {
#pragma unroll
            for (int box = 0; box < PN / 64; ++box)
              tmaLoad2d(sB + stage * (PN * BK) + box * (64 * 64), &mapB, &full[stage],
                        tn * PN + box * 64, kb * BK);
          }
          if (++stage == PSTAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
    }
    return;
  }
  setMaxRegsInc<232>();
  const int g = wg - 1;
  unsigned char *myC = sC + g * kPTileC; // 2 boxes of [128 rows, 128 bytes]
  const int warp = tid / 32, lane = tid % 32;
  float acc0[64], acc1[64]; // TM 128: rows 0-63 and 64-127; TM 64: columns 0-127 and 128-255
  float acc[128];           // TM 64
  long long tr[kTraceFields] = {};
  long long trTiles = 0;
  int auxPhase = 0;
  int i = g; // the block's tile index this warpgroup takes
  for (int tile = blockIdx.x + g * gridDim.x; tile < tiles; tile += 2 * gridDim.x, i += 2) {
    int tm = tile / tilesN, tn = tile % tilesN;
    if (EPI == kDgelu && tid == 0) {
      tmaStoreWaitRead();
      mbarExpectTx(&auxFull[g], kPTileC);
#pragma unroll
      for (int box = 0; box < PN / 64; ++box)
        tmaLoad2d(myC + box * (PM * 128), &mapAux, &auxFull[g], tn * PN + box * 64, tm * PM);
    }
    // The products take turns (named barriers 3 and 4: this warpgroup's turn
    // begins once the other has issued its tile's last products): besides
    // keeping one epilogue under the other's products, a warpgroup waiting
    // on a stage more than one lap ahead of the ring would read the parity
    // of an earlier lap.
    long long t0 = TR ? clock64() : 0, t1 = 0, t1b = 0, t2 = 0, t3 = 0;
    if (i > 0)
      namedBarrier(3 + g, 256);
    if (TR)
      t1 = clock64();
    long pos = long(i) * kBlocks; // this tile's first k-block in the ring
    int prev = -1;
    for (int kb = 0; kb < kBlocks; ++kb, ++pos) {
      int stage = int(pos % PSTAGES), phase = int((pos / PSTAGES) & 1);
      mbarWait(&full[stage], phase);
      if (TR && kb == 0)
        t1b = clock64();
      uint64_t dA = descSw128(sA + stage * (PM * BK));
      uint64_t dB =
          BL == 0 ? descSw128(sB + stage * (PN * BK)) : descSw128N<BL>(sB + stage * (PN * BK));
      wgmmaFence();
#pragma unroll
      for (int k = 0; k < BK / 16; ++k) {
        uint64_t b = dB + (BL == 0 ? 2 : 128) * k;
        if constexpr (TM == 128) {
          wgmma128<BL != 0>(acc0, dA + 2 * k, b, (kb > 0 || k > 0) ? 1 : 0);
          wgmma128<BL != 0>(acc1, dA + (8192 >> 4) + 2 * k, b, (kb > 0 || k > 0) ? 1 : 0);
        } else {
          wgmma256<BL != 0>(acc, dA + 2 * k, b, (kb > 0 || k > 0) ? 1 : 0);
        }
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
    // accX[4 j + {0, 1}]: row 64 X + 16 warp + lane / 4, columns 8 j + 2 (lane % 4) + {0, 1};
    // accX[4 j + {2, 3}]: 8 rows further.
    const int cl = 2 * (lane % 4);
    auto put = [&](int pass) {
      if (EPI == kDgelu) {
        mbarWait(&auxFull[g], auxPhase);
        auxPhase ^= 1;
      } else {
        if (tid == 0)
          tmaStoreWaitRead();
        namedBarrier(1 + g, 128);
      }
#pragma unroll
      for (int half = 0; half < (TM == 128 ? 2 : 1); ++half) {
#pragma unroll
        for (int j = 0; j < (TM == 128 ? PN / 8 : PN / 8); ++j) {
          // the j-th n8 block's 4 accumulators
          auto A = [&](int q) -> float & {
            if constexpr (TM == 128)
              return half ? acc1[4 * j + q] : acc0[4 * j + q];
            else
              return acc[4 * j + q];
          };
          float b0 = 0.0f, b1 = 0.0f;
          if ((EPI == kBias || EPI == kBiasGeluAux) && pass == 0) {
            __nv_bfloat162 bb =
                *reinterpret_cast<const __nv_bfloat162 *>(bias + tn * PN + 8 * j + cl);
            b0 = __bfloat162float(bb.x);
            b1 = __bfloat162float(bb.y);
          }
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            float &a0 = A(2 * h), &a1 = A(2 * h + 1);
            int r = 64 * half + 16 * warp + lane / 4 + 8 * h, c = 8 * j + cl;
            int box = c / 64, cb = (c % 64) * 2;
            unsigned char *at =
                myC + box * (PM * 128) + r * 128 + (((cb >> 4) ^ (r & 7)) << 4) + (cb & 15);
            __nv_bfloat162 st;
            if (EPI == kDgelu) {
              __nv_bfloat162 hx = *reinterpret_cast<const __nv_bfloat162 *>(at);
              st = __floats2bfloat162_rn(a0 * geluTanhGrad(__bfloat162float(hx.x)),
                                         a1 * geluTanhGrad(__bfloat162float(hx.y)));
            } else if (pass == 0) {
              st = __floats2bfloat162_rn(a0 + b0, a1 + b1);
              if (EPI == kBiasGeluAux) {
                a0 = __bfloat162float(st.x);
                a1 = __bfloat162float(st.y);
              }
            } else {
              st = __floats2bfloat162_rn(geluTanh(a0), geluTanh(a1));
            }
            *reinterpret_cast<__nv_bfloat162 *>(at) = st;
          }
        }
      }
      fenceProxyAsync();
      namedBarrier(1 + g, 128);
      if (tid == 0) {
        const CUtensorMap *map = (EPI == kBiasGeluAux && pass == 0) ? &mapAux : &mapOut;
#pragma unroll
        for (int box = 0; box < PN / 64; ++box)
          tmaStore2d(map, myC + box * (PM * 128), tn * PN + box * 64, tm * PM);
        tmaStoreCommit();
      }
    };
    put(0);
    if (EPI == kBiasGeluAux)
      put(1);
    if (TR) {
      long long t4 = clock64();
      // waiting for the turn, for the first stage, the products' issue, their
      // drain, the epilogue, the whole tile; (6, 7: unused)
      tr[0] += t1 - t0;
      tr[1] += t1b - t1;
      tr[2] += t2 - t1;
      tr[3] += t3 - t2;
      tr[4] += t4 - t3;
      tr[5] += t4 - t0;
      trTiles += 1;
    }
  }
  if (TR && tid == 0 && gTrace) {
    long long *o = gTrace + (long(blockIdx.x) * 2 + g) * (kTraceFields + 1);
    for (int f = 0; f < kTraceFields; ++f)
      o[f] = tr[f];
    o[kTraceFields] = trTiles;
  }
  if (tid == 0)
    tmaStoreWaitAll();
}

template <int EPI, int BL = 0, int TM = 128, int ST = (TM == 128 ? 5 : 4), bool TR = false>
void launchPingpong(const CUtensorMap &ma, const CUtensorMap &mb, const CUtensorMap &mo,
                    const CUtensorMap &mx, const bf16 *bias, int M, int N, int K, int sms,
                    cudaStream_t s) {
  static bool once = [] {
    CK(cudaFuncSetAttribute(gemmPingpong<EPI, BL, TM, ST, TR>,
                            cudaFuncAttributeMaxDynamicSharedMemorySize, PP<TM, ST>::smem));
    return true;
  }();
  (void)once;
  int tiles = (M / PP<TM, ST>::M) * (N / PP<TM, ST>::N);
  gemmPingpong<EPI, BL, TM, ST, TR>
      <<<std::min(tiles, sms), kThreads, PP<TM, ST>::smem, s>>>(ma, mb, mo, mx, bias, M, N, K);
}

//===----------------------------------------------------------------------===//
// The cooperative form with store threads
//===----------------------------------------------------------------------===//

/// gemmKernel's cooperative 128x256 tiles (3 stages, 64 KB of output tile),
/// with the epilogue's bulk copies handed to store threads: thread 0 of warp
/// 1 + g of the loading warpgroup serves consumer warpgroup g. The
/// consumers write their 64x256 part into shared memory (cReady: 128
/// arrivals, each after its proxy fence) and go on to the next tile's
/// products; the store thread stores it by TMA, waits for the copy to have
/// read the shared memory and gives it back (cFree), and for DGELU loads the
/// next tile's aux part into it (auxFull). GELU+aux takes two rounds a tile
/// (aux, then out).
template <int EPI, int BL>
__global__ void __launch_bounds__(kThreads, 1)
    gemmCoopStore(const __grid_constant__ CUtensorMap mapA,
                  const __grid_constant__ CUtensorMap mapB,
                  const __grid_constant__ CUtensorMap mapOut,
                  const __grid_constant__ CUtensorMap mapAux, const bf16 *__restrict__ bias, int M,
                  int N, int K) {
  constexpr int STAGES = 3;
  extern __shared__ unsigned char smemRaw[];
  unsigned char *base = reinterpret_cast<unsigned char *>(
      (reinterpret_cast<uintptr_t>(smemRaw) + 1023) & ~uintptr_t(1023));
  bf16 *sA = reinterpret_cast<bf16 *>(base);
  bf16 *sB = reinterpret_cast<bf16 *>(base + STAGES * kStageBytesA);
  unsigned char *sC = base + STAGES * (kStageBytesA + kStageBytesB);
  uint64_t *full = reinterpret_cast<uint64_t *>(sC + kTileBytesC);
  uint64_t *empty = full + STAGES;
  uint64_t *cReady = empty + STAGES, *cFree = cReady + 2, *auxFull = cFree + 2;
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  const int tilesN = N / BN, tiles = (M / BM) * tilesN, kBlocks = K / BK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbarInit(&full[s], 1);
      mbarInit(&empty[s], kConsumers);
    }
    for (int g = 0; g < 2; ++g) {
      mbarInit(&cReady[g], 128);
      mbarInit(&cFree[g], 1);
      mbarInit(&auxFull[g], 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (wg == 0) {
    setMaxRegsDec<40>();
    const int warp = tid / 32;
    if (tid == 0) { // the loads
      int stage = 0, phase = 0;
      for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int tm = tile / tilesN, tn = tile % tilesN;
        for (int kb = 0; kb < kBlocks; ++kb) {
          mbarWait(&empty[stage], phase ^ 1);
          mbarExpectTx(&full[stage], kStageBytesA + kStageBytesB);
          tmaLoad2d(sA + stage * (BM * BK), &mapA, &full[stage], kb * BK, tm * BM);
          if (BL == 0) {
            tmaLoad2d(sB + stage * (BN * BK), &mapB, &full[stage], kb * BK, tn * BN);
          } else {
#pragma unroll
            for (int box = 0; box < 4; ++box)
              tmaLoad2d(sB + stage * (BN * BK) + box * (64 * 64), &mapB, &full[stage],
                        tn * BN + box * 64, kb * BK);
          }
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
    } else if ((warp == 1 || warp == 2) && tid % 32 == 0) { // the stores of warpgroup g
      const int g = warp - 1;
      unsigned char *myC = sC + g * (kTileBytesC / 2);
      int readyPhase = 0;
      auto loadAux = [&](int tile) {
        int tm = tile / tilesN, tn = tile % tilesN;
        mbarExpectTx(&auxFull[g], kTileBytesC / 2);
#pragma unroll
        for (int box = 0; box < 4; ++box)
          tmaLoad2d(myC + box * 8192, &mapAux, &auxFull[g], tn * BN + box * 64, tm * BM + g * 64);
      };
      if (EPI == kDgelu && blockIdx.x < tiles)
        loadAux(blockIdx.x);
      for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int tm = tile / tilesN, tn = tile % tilesN;
        for (int round = 0; round < (EPI == kBiasGeluAux ? 2 : 1); ++round) {
          mbarWait(&cReady[g], readyPhase);
          readyPhase ^= 1;
          const CUtensorMap *map = (EPI == kBiasGeluAux && round == 0) ? &mapAux : &mapOut;
#pragma unroll
          for (int box = 0; box < 4; ++box)
            tmaStore2d(map, myC + box * 8192, tn * BN + box * 64, tm * BM + g * 64);
          tmaStoreCommit();
          tmaStoreWaitRead();
          if (EPI == kDgelu) {
            if (tile + gridDim.x < tiles)
              loadAux(tile + gridDim.x);
          } else {
            mbarArrive(&cFree[g]);
          }
        }
      }
      tmaStoreWaitAll();
    }
    return;
  }
  setMaxRegsInc<232>();
  const int g = wg - 1;
  float acc[128];
  int stage = 0, phase = 0, freePhase = 1, auxPhase = 0;
  const int warp = tid / 32, lane = tid % 32;
  unsigned char *myC = sC + g * (kTileBytesC / 2);
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    int tm = tile / tilesN, tn = tile % tilesN;
    (void)tm;
    int prev = -1;
    for (int kb = 0; kb < kBlocks; ++kb) {
      mbarWait(&full[stage], phase);
      uint64_t dA = descSw128(sA + stage * (BM * BK) + g * 64 * BK);
      uint64_t dB =
          BL == 0 ? descSw128(sB + stage * (BN * BK)) : descSw128N<BL>(sB + stage * (BN * BK));
      wgmmaFence();
#pragma unroll
      for (int k = 0; k < BK / 16; ++k)
        wgmma256<BL != 0>(acc, dA + 2 * k, dB + (BL == 0 ? 2 : 128) * k, (kb > 0 || k > 0) ? 1 : 0);
      wgmmaCommit();
      if (prev >= 0) {
        wgmmaWait<1>();
        if (tid == 0)
          mbarArrive(&empty[prev]);
      }
      prev = stage;
      if (++stage == STAGES) {
        stage = 0;
        phase ^= 1;
      }
    }
    wgmmaWait<0>();
    if (tid == 0)
      mbarArrive(&empty[prev]);
    const int rl = warp * 16 + lane / 4, cl = 2 * (lane % 4);
    auto put = [&](int pass) {
      if (EPI == kDgelu) {
        mbarWait(&auxFull[g], auxPhase);
        auxPhase ^= 1;
      } else {
        mbarWait(&cFree[g], freePhase);
        freePhase ^= 1;
      }
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        float b0 = 0.0f, b1 = 0.0f;
        if ((EPI == kBias || EPI == kBiasGeluAux) && pass == 0) {
          __nv_bfloat162 bb =
              *reinterpret_cast<const __nv_bfloat162 *>(bias + tn * BN + 8 * j + cl);
          b0 = __bfloat162float(bb.x);
          b1 = __bfloat162float(bb.y);
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float &a0 = acc[4 * j + 2 * h], &a1 = acc[4 * j + 2 * h + 1];
          int r = rl + 8 * h, c = 8 * j + cl;
          int box = c / 64, cb = (c % 64) * 2;
          unsigned char *at = myC + box * 8192 + r * 128 + (((cb >> 4) ^ (r & 7)) << 4) + (cb & 15);
          __nv_bfloat162 st;
          if (EPI == kDgelu) {
            __nv_bfloat162 hx = *reinterpret_cast<const __nv_bfloat162 *>(at);
            st = __floats2bfloat162_rn(a0 * geluTanhGrad(__bfloat162float(hx.x)),
                                       a1 * geluTanhGrad(__bfloat162float(hx.y)));
          } else if (pass == 0) {
            st = __floats2bfloat162_rn(a0 + b0, a1 + b1);
            if (EPI == kBiasGeluAux) {
              a0 = __bfloat162float(st.x);
              a1 = __bfloat162float(st.y);
            }
          } else {
            st = __floats2bfloat162_rn(geluTanh(a0), geluTanh(a1));
          }
          *reinterpret_cast<__nv_bfloat162 *>(at) = st;
        }
      }
      fenceProxyAsync();
      mbarArrive(&cReady[g]);
    };
    put(0);
    if (EPI == kBiasGeluAux)
      put(1);
  }
}

template <int EPI, int BL = 0>
void launchCoopStore(const CUtensorMap &ma, const CUtensorMap &mb, const CUtensorMap &mo,
                     const CUtensorMap &mx, const bf16 *bias, int M, int N, int K, int sms,
                     cudaStream_t s) {
  static bool once = [] {
    CK(cudaFuncSetAttribute(gemmCoopStore<EPI, BL>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            smemBytesFor(true) + 64));
    return true;
  }();
  (void)once;
  int tiles = (M / BM) * (N / BN);
  gemmCoopStore<EPI, BL><<<std::min(tiles, sms), kThreads, smemBytesFor(true) + 64, s>>>(
      ma, mb, mo, mx, bias, M, N, K);
}

//===----------------------------------------------------------------------===//
// The cooperative form with GELU deferred under the next tile's products
//===----------------------------------------------------------------------===//

/// gemmKernel<kBiasGeluAux, true, 0, 1, 1> (4 stages, 128x256 tiles, the
/// tile's 32 KB of shared memory as two 8 KB slots a warpgroup) with the
/// GELU moved off the critical path: at a tile's end each consumer
/// warpgroup stores only the pre-activation (aux = bf16(acc + bias), two
/// rounds); during the next tile's products it reads its 64x256 part of that
/// aux back (L2) in four [64, 64] boxes, GELUs each in place in a slot between
/// two k-blocks' wgmma issues (where the warps otherwise wait on their
/// groups) and stores it as out. Box q is loaded at k-block L(q) = q K/256
/// and computed D k-blocks later; the last tile's boxes are done after its
/// loop. GELU of the stored bf16 pre-activation, as the other forms.
template <int EPI, int BL = 0>
__global__ void __launch_bounds__(kThreads, 1)
    gemmDeferred(const __grid_constant__ CUtensorMap mapA, const __grid_constant__ CUtensorMap mapB,
                 const __grid_constant__ CUtensorMap mapOut,
                 const __grid_constant__ CUtensorMap mapAux, const bf16 *__restrict__ bias, int M,
                 int N, int K) {
  constexpr int STAGES = 4, kC = kTileBytesC / 2, kSlot = 8192;
  extern __shared__ unsigned char smemRaw[];
  unsigned char *base = reinterpret_cast<unsigned char *>(
      (reinterpret_cast<uintptr_t>(smemRaw) + 1023) & ~uintptr_t(1023));
  bf16 *sA = reinterpret_cast<bf16 *>(base);
  bf16 *sB = reinterpret_cast<bf16 *>(base + STAGES * kStageBytesA);
  unsigned char *sC = base + STAGES * (kStageBytesA + kStageBytesB);
  uint64_t *full = reinterpret_cast<uint64_t *>(sC + kC);
  uint64_t *empty = full + STAGES;
  uint64_t *dFull = empty + STAGES; // [warpgroup][slot]
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  const int tilesN = N / BN, tiles = (M / BM) * tilesN, kBlocks = K / BK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbarInit(&full[s], 1);
      mbarInit(&empty[s], kConsumers);
    }
    for (int i = 0; i < 4; ++i)
      mbarInit(&dFull[i], 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (wg == 0) {
    setMaxRegsDec<40>();
    if (tid == 0) {
      int stage = 0, phase = 0;
      for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int tm = tile / tilesN, tn = tile % tilesN;
        for (int kb = 0; kb < kBlocks; ++kb) {
          mbarWait(&empty[stage], phase ^ 1);
          mbarExpectTx(&full[stage], kStageBytesA + kStageBytesB);
          tmaLoad2d(sA + stage * (BM * BK), &mapA, &full[stage], kb * BK, tm * BM);
          if (BL == 0) {
            tmaLoad2d(sB + stage * (BN * BK), &mapB, &full[stage], kb * BK, tn * BN);
          } else { // b [K, N]: 4 boxes of [64 K rows, 64 N]
#pragma unroll
            for (int box = 0; box < 4; ++box)
              tmaLoad2d(sB + stage * (BN * BK) + box * (64 * 64), &mapB, &full[stage],
                        tn * BN + box * 64, kb * BK);
          }
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
    }
    return;
  }
  setMaxRegsInc<232>();
  const int g = wg - 1;
  float acc[128];
  int stage = 0, phase = 0;
  const int warp = tid / 32, lane = tid % 32;
  unsigned char *myC = sC + g * (kC / 2); // slots 0 and 1
  uint64_t *myFull = dFull + 2 * g;
  unsigned slotPhases = 0; // bit s: the parity of slot s's next load
  // The deferred boxes of the previous tile (pending): loads issued, boxes done.
  bool pending = false;
  int ptm = 0, ptn = 0, loads = 0, done = 0;
  const int D = max(0, min(2, kBlocks / 4 - 1));
  auto loadAt = [&](int q) { return q * kBlocks / 4; };
  static_assert(EPI == kBiasGeluAux || EPI == kDgelu, "GELU+aux or DGELU");
  auto loadBox = [&](int q) { // by tid 0
    const int col = ptn * BN + 64 * q, row = ptm * BM + g * 64;
    if (EPI == kDgelu) { // the product box (slot 0) and the aux box (slot 1)
      if (q == 0)
        tmaStoreWaitAll(); // the product is in global memory
      else
        tmaStoreWaitRead(); // box q - 1 has left slot 0
      mbarExpectTx(&myFull[0], 2 * kSlot);
      tmaLoad2d(myC, &mapOut, &myFull[0], col, row);
      tmaLoad2d(myC + kSlot, &mapAux, &myFull[0], col, row);
      return;
    }
    if (q == 0)
      tmaStoreWaitAll(); // the pre-activation is in global memory, and both slots are free
    else if (q >= 2)
      asm volatile("cp.async.bulk.wait_group.read 1;\n" ::
                       : "memory"); // box q - 2 has left the slot
    int slot = q & 1;
    mbarExpectTx(&myFull[slot], kSlot);
    tmaLoad2d(myC + slot * kSlot, &mapAux, &myFull[slot], col, row);
  };
  auto geluBox = [&](int q) { // every thread of the warpgroup
    int slot = EPI == kDgelu ? 0 : q & 1;
    mbarWait(&myFull[slot], int((slotPhases >> slot) & 1u));
    slotPhases ^= 1u << slot;
    int4 *v = reinterpret_cast<int4 *>(myC + slot * kSlot);
    const int4 *x = reinterpret_cast<const int4 *>(myC + kSlot); // DGELU: the aux box
#pragma unroll 1
    for (int i = 0; i < 4; ++i) { // elementwise: the swizzle does not matter
      int4 p = v[tid + 128 * i];
      __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&p);
      if (EPI == kDgelu) {
        int4 xa = x[tid + 128 * i];
        const __nv_bfloat162 *a = reinterpret_cast<const __nv_bfloat162 *>(&xa);
#pragma unroll
        for (int e = 0; e < 4; ++e)
          h[e] = __floats2bfloat162_rn(
              __bfloat162float(h[e].x) * geluTanhGrad(__bfloat162float(a[e].x)),
              __bfloat162float(h[e].y) * geluTanhGrad(__bfloat162float(a[e].y)));
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          h[e] = __floats2bfloat162_rn(geluTanh(__bfloat162float(h[e].x)),
                                       geluTanh(__bfloat162float(h[e].y)));
      }
      v[tid + 128 * i] = p;
    }
    fenceProxyAsync();
    namedBarrier(1 + g, 128);
    if (tid == 0) {
      tmaStore2d(&mapOut, myC + slot * kSlot, ptn * BN + 64 * q, ptm * BM + g * 64);
      tmaStoreCommit();
    }
  };
  auto step = [&](int kb) { // the deferred work due at k-block kb
    if (!pending)
      return;
    if (loads < 4 && kb == loadAt(loads)) {
      if (tid == 0)
        loadBox(loads);
      ++loads;
    }
    if (done < loads && kb == loadAt(done) + D) {
      geluBox(done);
      ++done;
    }
  };
  auto flush = [&] {
    while (done < 4) {
      if (loads == done) {
        if (tid == 0)
          loadBox(loads);
        ++loads;
      }
      geluBox(done);
      ++done;
    }
  };
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    int tm = tile / tilesN, tn = tile % tilesN;
    int prev = -1;
    for (int kb = 0; kb < kBlocks; ++kb) {
      mbarWait(&full[stage], phase);
      uint64_t dA = descSw128(sA + stage * (BM * BK) + g * 64 * BK);
      uint64_t dB =
          BL == 0 ? descSw128(sB + stage * (BN * BK)) : descSw128N<BL>(sB + stage * (BN * BK));
      wgmmaFence();
#pragma unroll
      for (int k = 0; k < BK / 16; ++k)
        wgmma256<BL != 0>(acc, dA + 2 * k, dB + (BL == 0 ? 2 : 128) * k, (kb > 0 || k > 0) ? 1 : 0);
      wgmmaCommit();
      step(kb); // under the group just issued
      if (prev >= 0) {
        wgmmaWait<1>();
        if (tid == 0)
          mbarArrive(&empty[prev]);
      }
      prev = stage;
      if (++stage == STAGES) {
        stage = 0;
        phase ^= 1;
      }
    }
    wgmmaWait<0>();
    if (tid == 0)
      mbarArrive(&empty[prev]);
    if (pending)
      flush(); // (K too short to spread the boxes)
    // This tile's pre-activation (DGELU: its product, into out), two rounds
    // of 64x128 through the slots.
    const int rl = warp * 16 + lane / 4, cl = 2 * (lane % 4);
#pragma unroll
    for (int round = 0; round < 2; ++round) {
      if (tid == 0)
        tmaStoreWaitRead();
      namedBarrier(1 + g, 128);
#pragma unroll
      for (int jj = 0; jj < BN / 16; ++jj) {
        const int j = round * (BN / 16) + jj;
        float b0 = 0.0f, b1 = 0.0f;
        if (EPI == kBiasGeluAux) {
          __nv_bfloat162 bb =
              *reinterpret_cast<const __nv_bfloat162 *>(bias + tn * BN + 8 * j + cl);
          b0 = __bfloat162float(bb.x);
          b1 = __bfloat162float(bb.y);
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          int r = rl + 8 * h, c = 8 * j + cl;
          int box = c / 64 - round * 2, cb = (c % 64) * 2;
          unsigned char *at =
              myC + box * kSlot + r * 128 + (((cb >> 4) ^ (r & 7)) << 4) + (cb & 15);
          *reinterpret_cast<__nv_bfloat162 *>(at) =
              __floats2bfloat162_rn(acc[4 * j + 2 * h] + b0, acc[4 * j + 2 * h + 1] + b1);
        }
      }
      fenceProxyAsync();
      namedBarrier(1 + g, 128);
      if (tid == 0) {
#pragma unroll
        for (int box = 0; box < 2; ++box)
          tmaStore2d(EPI == kDgelu ? &mapOut : &mapAux, myC + box * kSlot,
                     tn * BN + (round * 2 + box) * 64, tm * BM + g * 64);
        tmaStoreCommit();
      }
    }
    pending = true;
    ptm = tm;
    ptn = tn;
    loads = done = 0;
  }
  if (pending)
    flush();
  if (tid == 0)
    tmaStoreWaitAll();
}

template <int EPI, int BL = 0>
void launchDeferred(const CUtensorMap &ma, const CUtensorMap &mb, const CUtensorMap &mo,
                    const CUtensorMap &mx, const bf16 *bias, int M, int N, int K, int sms,
                    cudaStream_t s) {
  constexpr int bytes = 4 * (kStageBytesA + kStageBytesB) + kTileBytesC / 2 + 1024 + 12 * 8;
  static bool once = [] {
    CK(cudaFuncSetAttribute(gemmDeferred<EPI, BL>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            bytes));
    return true;
  }();
  (void)once;
  int tiles = (M / BM) * (N / BN);
  gemmDeferred<EPI, BL>
      <<<std::min(tiles, sms), kThreads, bytes, s>>>(ma, mb, mo, mx, bias, M, N, K);
}

/// cuBLASLt's out[M, N] = a b^T (+ epilogue) in column-major terms: out^T
/// [N, M] = (b as [K, N])^T (a as [K, M]); the fastest of its heuristic's
/// first 8 candidates (as tc's runtime tunes), in microseconds.
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
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < n; ++i) {
      auto call = [&] {
        return cublasLtMatmul(h, op, &alpha, b, la, a, lb, &beta, out, lc, out, lc, &res[i].algo,
                              ws, wsBytes, s);
      };
      if (call() != CUBLAS_STATUS_SUCCESS)
        continue;
      call();
      CK(cudaEventRecord(e0, s));
      for (int r = 0; r < reps; ++r)
        call();
      CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      best = std::min(best, ms * 1000 / reps);
    }
    // Leave the output of the fastest... any candidate: all compute the same product.
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

/// max |x - y| / max |y| and the count of elements off by more than 2 bf16 ulps of max |y| / 64.
void compare(const char *what, const std::vector<float> &x, const std::vector<float> &y, bool *ok) {
  double worst = 0, scale = 0;
  size_t at = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    scale = std::max(scale, double(std::fabs(y[i])));
    double d = std::fabs(double(x[i]) - double(y[i])) / (std::fabs(double(y[i])) + 1.0);
    if (!(d <= worst)) {
      worst = d;
      at = i;
    }
  }
  bool good = worst < 2e-2;
  std::printf("  %-28s max rel err %.3g at %zu (%g vs %g) %s\n", what, worst, at, x[at], y[at],
              good ? "OK" : "MISMATCH");
  *ok = *ok && good;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<int> shapes;
  std::string only; // --only=basic,pingpong,hc,deferred,cluster,pp64,coopstore (default: all)
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
  for (size_t i = 0; i + 2 < shapes.size(); i += 3) {
    int M = shapes[i], N = shapes[i + 1], K = shapes[i + 2];
    if (M % BM || N % BN || K % BK) {
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
    bf16 *a = randomDev(size_t(M) * K, 1.0f), *b = randomDev(size_t(N) * K, 0.05f),
         *bias = randomDev(N, 0.5f);
    bf16 *out, *aux, *ref, *refAux;
    size_t outN = size_t(M) * N;
    CK(cudaMalloc(&out, outN * 2));
    CK(cudaMalloc(&aux, outN * 2));
    CK(cudaMalloc(&ref, outN * 2));
    CK(cudaMalloc(&refAux, outN * 2));
    CUtensorMap ma = tensorMap(a, M, K, BM), mb = tensorMap(b, N, K, BN);
    CUtensorMap mo = tensorMap(out, M, N, 64), mx = tensorMap(aux, M, N, 64);
    const int reps = 20;
    double flop = 2.0 * M * N * K;
    std::printf("%d x %d x %d (out = a[M,K] b[N,K]^T)\n", M, N, K);
    auto timeOurs = [&](auto fn) {
      fn();
      CK(cudaGetLastError());
      CK(cudaStreamSynchronize(s));
      cudaEvent_t e0, e1;
      CK(cudaEventCreate(&e0));
      CK(cudaEventCreate(&e1));
      fn();
      CK(cudaEventRecord(e0, s));
      for (int r = 0; r < reps; ++r)
        fn();
      CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      return ms * 1000 / reps;
    };
    auto clear = [&] {
      CK(cudaMemset(out, 0, outN * 2));
      CK(cudaMemset(aux, 0, outN * 2));
    };
    if (want("basic")) {
      // Plain.
      float ltPlain =
          lt.run(a, b, ref, nullptr, nullptr, M, N, K, CUBLASLT_EPILOGUE_DEFAULT, s, reps);
      std::vector<float> want = toHost(ref, outN);
      clear();
      float usPlain = timeOurs(
          [&] { launch<kPlain, false>(ma, mb, mo, mx, out, nullptr, nullptr, M, N, K, sms, s); });
      compare("plain (direct) vs cuBLASLt", toHost(out, outN), want, &allOk);
      clear();
      float usPlainT = timeOurs(
          [&] { launch<kPlain, true>(ma, mb, mo, mx, out, nullptr, nullptr, M, N, K, sms, s); });
      compare("plain (TMA) vs cuBLASLt", toHost(out, outN), want, &allOk);
      std::printf("  plain:          cuBLASLt %7.1f us (%4.0f TFLOP/s)  ours direct %7.1f (%4.0f)  "
                  "TMA store %7.1f (%4.0f)\n",
                  ltPlain, flop / ltPlain / 1e6, usPlain, flop / usPlain / 1e6, usPlainT,
                  flop / usPlainT / 1e6);
      // Bias.
      float ltBias = lt.run(a, b, ref, nullptr, bias, M, N, K, CUBLASLT_EPILOGUE_BIAS, s, reps);
      want = toHost(ref, outN);
      clear();
      float usBias = timeOurs(
          [&] { launch<kBias, false>(ma, mb, mo, mx, out, nullptr, bias, M, N, K, sms, s); });
      compare("bias (direct) vs cuBLASLt", toHost(out, outN), want, &allOk);
      clear();
      float usBiasT = timeOurs(
          [&] { launch<kBias, true>(ma, mb, mo, mx, out, nullptr, bias, M, N, K, sms, s); });
      compare("bias (TMA) vs cuBLASLt", toHost(out, outN), want, &allOk);
      std::printf("  +bias:          cuBLASLt %7.1f us                  ours direct %7.1f         "
                  "TMA store %7.1f\n",
                  ltBias, usBias, usBiasT);
      // Bias + GELU + aux.
      float ltGelu =
          lt.run(a, b, ref, refAux, bias, M, N, K, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, s, reps);
      want = toHost(ref, outN);
      std::vector<float> wantAux = toHost(refAux, outN);
      clear();
      float usGelu = timeOurs(
          [&] { launch<kBiasGeluAux, false>(ma, mb, mo, mx, out, aux, bias, M, N, K, sms, s); });
      compare("gelu aux (direct)", toHost(aux, outN), wantAux, &allOk);
      compare("gelu out (direct)", toHost(out, outN), want, &allOk);
      clear();
      float usGeluT = timeOurs(
          [&] { launch<kBiasGeluAux, true>(ma, mb, mo, mx, out, aux, bias, M, N, K, sms, s); });
      compare("gelu aux (TMA)", toHost(aux, outN), wantAux, &allOk);
      compare("gelu out (TMA)", toHost(out, outN), want, &allOk);
      std::printf("  +bias+gelu+aux: cuBLASLt %7.1f us                  ours direct %7.1f         "
                  "TMA store %7.1f\n",
                  ltGelu, usGelu, usGeluT);
      // DGELU: out = (a b^T) gelu'(aux), aux = the pre-activations just made.
      CUtensorMap mxIn = tensorMap(refAux, M, N, 64);
      float ltDgelu = lt.run(a, b, ref, refAux, nullptr, M, N, K, CUBLASLT_EPILOGUE_DGELU, s, reps);
      want = toHost(ref, outN);
      clear();
      float usDgelu = timeOurs(
          [&] { launch<kDgelu, false>(ma, mb, mo, mxIn, out, refAux, nullptr, M, N, K, sms, s); });
      compare("dgelu (direct)", toHost(out, outN), want, &allOk);
      clear();
      float usDgeluT = timeOurs(
          [&] { launch<kDgelu, true>(ma, mb, mo, mxIn, out, refAux, nullptr, M, N, K, sms, s); });
      compare("dgelu (TMA)", toHost(out, outN), want, &allOk);
      std::printf("  dgelu(aux):     cuBLASLt %7.1f us                  ours direct %7.1f         "
                  "TMA store %7.1f\n",
                  ltDgelu, usDgelu, usDgeluT);
      // The same with b stored N-major ([K, N], the second MLP matmul's
      // weight as nn.Linear keeps it): both descriptor readings.
      {
        std::vector<bf16> hb(size_t(N) * K), ht(size_t(N) * K);
        CK(cudaMemcpy(hb.data(), b, hb.size() * 2, cudaMemcpyDeviceToHost));
        for (int n = 0; n < N; ++n)
          for (int k = 0; k < K; ++k)
            ht[size_t(k) * N + n] = hb[size_t(n) * K + k];
        bf16 *bt;
        CK(cudaMalloc(&bt, ht.size() * 2));
        CK(cudaMemcpy(bt, ht.data(), ht.size() * 2, cudaMemcpyHostToDevice));
        CUtensorMap mbt = tensorMap(bt, K, N, 64);
        clear();
        float us1 = timeOurs([&] {
          launch<kDgelu, true, 1>(ma, mbt, mo, mxIn, out, refAux, nullptr, M, N, K, sms, s);
        });
        bool ok1 = true;
        compare("dgelu (TMA, b N-major, BL 1)", toHost(out, outN), want, &ok1);
        clear();
        float us2 = timeOurs([&] {
          launch<kDgelu, true, 2>(ma, mbt, mo, mxIn, out, refAux, nullptr, M, N, K, sms, s);
        });
        bool ok2 = true;
        compare("dgelu (TMA, b N-major, BL 2)", toHost(out, outN), want, &ok2);
        std::printf("  dgelu, b N-major: BL 1 %7.1f us %s, BL 2 %7.1f us %s\n", us1,
                    ok1 ? "ok" : "wrong", us2, ok2 ? "ok" : "wrong");
        allOk = allOk && (ok1 || ok2);
        CK(cudaFree(bt));
      }
    }
    // Ping-pong (128x128 a warpgroup).
    if (want("pingpong")) {
      CUtensorMap mbP = tensorMap(b, N, K, PP<128>::N), mo2 = tensorMap(out, M, N, PP<128>::M),
                  mx2 = tensorMap(aux, M, N, PP<128>::M);
      float lt0 = lt.run(a, b, ref, nullptr, nullptr, M, N, K, CUBLASLT_EPILOGUE_DEFAULT, s, 2);
      (void)lt0;
      std::vector<float> w0 = toHost(ref, outN);
      clear();
      float p0 =
          timeOurs([&] { launchPingpong<kPlain>(ma, mbP, mo2, mx2, nullptr, M, N, K, sms, s); });
      compare("ping-pong plain", toHost(out, outN), w0, &allOk);
      lt.run(a, b, ref, refAux, bias, M, N, K, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, s, 2);
      std::vector<float> w2 = toHost(ref, outN), w2a = toHost(refAux, outN);
      clear();
      float p2 =
          timeOurs([&] { launchPingpong<kBiasGeluAux>(ma, mbP, mo2, mx2, bias, M, N, K, sms, s); });
      compare("ping-pong gelu aux", toHost(aux, outN), w2a, &allOk);
      compare("ping-pong gelu out", toHost(out, outN), w2, &allOk);
      CUtensorMap mxIn2 = tensorMap(refAux, M, N, PP<128>::M);
      lt.run(a, b, ref, refAux, nullptr, M, N, K, CUBLASLT_EPILOGUE_DGELU, s, 2);
      std::vector<float> w3 = toHost(ref, outN);
      clear();
      float p3 =
          timeOurs([&] { launchPingpong<kDgelu>(ma, mbP, mo2, mxIn2, nullptr, M, N, K, sms, s); });
      compare("ping-pong dgelu", toHost(out, outN), w3, &allOk);
      std::vector<bf16> hb(size_t(N) * K), ht(size_t(N) * K);
      CK(cudaMemcpy(hb.data(), b, hb.size() * 2, cudaMemcpyDeviceToHost));
      for (int n = 0; n < N; ++n)
        for (int k = 0; k < K; ++k)
          ht[size_t(k) * N + n] = hb[size_t(n) * K + k];
      bf16 *bt;
      CK(cudaMalloc(&bt, ht.size() * 2));
      CK(cudaMemcpy(bt, ht.data(), ht.size() * 2, cudaMemcpyHostToDevice));
      CUtensorMap mbt = tensorMap(bt, K, N, 64);
      clear();
      float p3n = timeOurs(
          [&] { launchPingpong<kDgelu, 1>(ma, mbt, mo2, mxIn2, nullptr, M, N, K, sms, s); });
      compare("ping-pong dgelu, b N-major", toHost(out, outN), w3, &allOk);
      CK(cudaFree(bt));
      std::printf("  ping-pong:      plain %7.1f us (%4.0f TFLOP/s)  +bias+gelu+aux %7.1f  dgelu "
                  "%7.1f  dgelu b N-major %7.1f\n",
                  p0, flop / p0 / 1e6, p2, p3, p3n);
      // Stage depth: 3 and 4 stages beside the 5 above (plain, checked).
      clear();
      float s3 = timeOurs(
          [&] { launchPingpong<kPlain, 0, 128, 3>(ma, mbP, mo2, mx2, nullptr, M, N, K, sms, s); });
      compare("ping-pong plain, 3 stages", toHost(out, outN), w0, &allOk);
      clear();
      float s4 = timeOurs(
          [&] { launchPingpong<kPlain, 0, 128, 4>(ma, mbP, mo2, mx2, nullptr, M, N, K, sms, s); });
      compare("ping-pong plain, 4 stages", toHost(out, outN), w0, &allOk);
      std::printf("  ping-pong plain by stages: 3 %7.1f us  4 %7.1f us  5 %7.1f us\n", s3, s4, p0);
      // Where a ping-pong tile's time goes (clock64 cycles, the mean over
      // every warpgroup's tiles): plain and GELU+aux, traced.
      {
        long long *dTrace;
        size_t n = size_t(sms) * 2 * (kTraceFields + 1);
        CK(cudaMalloc(&dTrace, n * sizeof(long long)));
        CK(cudaMemcpyToSymbol(gTrace, &dTrace, sizeof dTrace));
        auto report = [&](const char *what) {
          std::vector<long long> h(n);
          CK(cudaMemcpy(h.data(), dTrace, n * sizeof(long long), cudaMemcpyDeviceToHost));
          double sum[kTraceFields] = {}, tiles = 0;
          for (size_t w = 0; w < n / (kTraceFields + 1); ++w) {
            for (int f = 0; f < kTraceFields; ++f)
              sum[f] += double(h[w * (kTraceFields + 1) + f]);
            tiles += double(h[w * (kTraceFields + 1) + kTraceFields]);
          }
          std::printf("  trace %-10s cycles a tile: turn %6.0f  first stage %6.0f  products %6.0f  "
                      "drain %6.0f  epilogue %6.0f  whole %6.0f  (%0.f tiles)\n",
                      what, sum[0] / tiles, sum[1] / tiles, sum[2] / tiles, sum[3] / tiles,
                      sum[4] / tiles, sum[5] / tiles, tiles);
        };
        CK(cudaMemset(dTrace, 0, n * sizeof(long long)));
        launchPingpong<kPlain, 0, 128, 5, true>(ma, mbP, mo2, mx2, nullptr, M, N, K, sms, s);
        CK(cudaDeviceSynchronize());
        report("plain");
        CK(cudaMemset(dTrace, 0, n * sizeof(long long)));
        launchPingpong<kBiasGeluAux, 0, 128, 5, true>(ma, mbP, mo2, mx2, bias, M, N, K, sms, s);
        CK(cudaDeviceSynchronize());
        report("gelu+aux");
        long long *none = nullptr;
        CK(cudaMemcpyToSymbol(gTrace, &none, sizeof none));
        CK(cudaFree(dTrace));
      }
    }
    // Cooperative, 4 stages, the output tile in two rounds.
    if (want("hc")) {
      lt.run(a, b, ref, nullptr, nullptr, M, N, K, CUBLASLT_EPILOGUE_DEFAULT, s, 2);
      std::vector<float> w0 = toHost(ref, outN);
      clear();
      float h0 = timeOurs([&] {
        launch<kPlain, true, 0, 1>(ma, mb, mo, mx, out, nullptr, nullptr, M, N, K, sms, s);
      });
      compare("4 stages plain", toHost(out, outN), w0, &allOk);
      lt.run(a, b, ref, refAux, bias, M, N, K, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, s, 2);
      std::vector<float> w2 = toHost(ref, outN), w2a = toHost(refAux, outN);
      clear();
      float h2 = timeOurs([&] {
        launch<kBiasGeluAux, true, 0, 1>(ma, mb, mo, mx, out, aux, bias, M, N, K, sms, s);
      });
      compare("4 stages gelu aux", toHost(aux, outN), w2a, &allOk);
      compare("4 stages gelu out", toHost(out, outN), w2, &allOk);
      std::printf("  coop 4 stages:  plain %7.1f us (%4.0f TFLOP/s)  +bias+gelu+aux %7.1f\n", h0,
                  flop / h0 / 1e6, h2);
    }
    // Cooperative, 4 stages, GELU deferred under the next tile's products.
    if (want("deferred")) {
      lt.run(a, b, ref, refAux, bias, M, N, K, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, s, 2);
      std::vector<float> w2 = toHost(ref, outN), w2a = toHost(refAux, outN);
      clear();
      float d2 =
          timeOurs([&] { launchDeferred<kBiasGeluAux>(ma, mb, mo, mx, bias, M, N, K, sms, s); });
      compare("deferred gelu aux", toHost(aux, outN), w2a, &allOk);
      compare("deferred gelu out", toHost(out, outN), w2, &allOk);
      // DGELU of the pre-activations just checked (refAux: cuBLASLt's).
      CUtensorMap mxIn = tensorMap(refAux, M, N, 64);
      lt.run(a, b, ref, refAux, nullptr, M, N, K, CUBLASLT_EPILOGUE_DGELU, s, 2);
      std::vector<float> w3 = toHost(ref, outN);
      clear();
      float d3 =
          timeOurs([&] { launchDeferred<kDgelu>(ma, mb, mo, mxIn, nullptr, M, N, K, sms, s); });
      compare("deferred dgelu", toHost(out, outN), w3, &allOk);
      // b N-major (nn.Linear's [out, in] weight as the DGELU matmul reads it).
      std::vector<bf16> hb(size_t(N) * K), ht(size_t(N) * K);
      CK(cudaMemcpy(hb.data(), b, hb.size() * 2, cudaMemcpyDeviceToHost));
      for (int n = 0; n < N; ++n)
        for (int k = 0; k < K; ++k)
          ht[size_t(k) * N + n] = hb[size_t(n) * K + k];
      bf16 *bt;
      CK(cudaMalloc(&bt, ht.size() * 2));
      CK(cudaMemcpy(bt, ht.data(), ht.size() * 2, cudaMemcpyHostToDevice));
      CUtensorMap mbt = tensorMap(bt, K, N, 64);
      clear();
      float d3n =
          timeOurs([&] { launchDeferred<kDgelu, 1>(ma, mbt, mo, mxIn, nullptr, M, N, K, sms, s); });
      compare("deferred dgelu, b N-major", toHost(out, outN), w3, &allOk);
      CK(cudaFree(bt));
      std::printf(
          "  coop deferred:  +bias+gelu+aux %7.1f us  dgelu %7.1f us  dgelu b N-major %7.1f us\n",
          d2, d3, d3n);
    }
    // Cooperative in clusters of two (b tiles multicast).
    if ((M / BM) % 2 == 0 && want("cluster")) {
      CUtensorMap mbH = tensorMap(b, N, K, BN / 2), mxIn1 = tensorMap(refAux, M, N, 64);
      lt.run(a, b, ref, nullptr, nullptr, M, N, K, CUBLASLT_EPILOGUE_DEFAULT, s, 2);
      std::vector<float> w0 = toHost(ref, outN);
      clear();
      float k0 = timeOurs(
          [&] { launchCluster<kPlain>(ma, mbH, mo, mx, out, nullptr, nullptr, M, N, K, sms, s); });
      compare("cluster plain", toHost(out, outN), w0, &allOk);
      lt.run(a, b, ref, refAux, bias, M, N, K, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, s, 2);
      std::vector<float> w2 = toHost(ref, outN), w2a = toHost(refAux, outN);
      clear();
      float k2 = timeOurs(
          [&] { launchCluster<kBiasGeluAux>(ma, mbH, mo, mx, out, aux, bias, M, N, K, sms, s); });
      compare("cluster gelu aux", toHost(aux, outN), w2a, &allOk);
      compare("cluster gelu out", toHost(out, outN), w2, &allOk);
      lt.run(a, b, ref, refAux, nullptr, M, N, K, CUBLASLT_EPILOGUE_DGELU, s, 2);
      std::vector<float> w3 = toHost(ref, outN);
      clear();
      float k3 = timeOurs([&] {
        launchCluster<kDgelu>(ma, mbH, mo, mxIn1, out, refAux, nullptr, M, N, K, sms, s);
      });
      compare("cluster dgelu", toHost(out, outN), w3, &allOk);
      std::printf("  cluster 2x1:    plain %7.1f us (%4.0f TFLOP/s)  +bias+gelu+aux %7.1f  dgelu "
                  "%7.1f\n",
                  k0, flop / k0 / 1e6, k2, k3);
    }
    // Ping-pong, 64x256 a warpgroup.
    if (want("pp64")) {
      CUtensorMap ma6 = tensorMap(a, M, K, 64), mb6 = tensorMap(b, N, K, 256),
                  mo6 = tensorMap(out, M, N, 64), mx6 = tensorMap(aux, M, N, 64),
                  mxIn6 = tensorMap(refAux, M, N, 64);
      lt.run(a, b, ref, nullptr, nullptr, M, N, K, CUBLASLT_EPILOGUE_DEFAULT, s, 2);
      std::vector<float> w0 = toHost(ref, outN);
      clear();
      float q0 = timeOurs(
          [&] { launchPingpong<kPlain, 0, 64>(ma6, mb6, mo6, mx6, nullptr, M, N, K, sms, s); });
      compare("ping-pong 64x256 plain", toHost(out, outN), w0, &allOk);
      lt.run(a, b, ref, refAux, bias, M, N, K, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, s, 2);
      std::vector<float> w2 = toHost(ref, outN), w2a = toHost(refAux, outN);
      clear();
      float q2 = timeOurs(
          [&] { launchPingpong<kBiasGeluAux, 0, 64>(ma6, mb6, mo6, mx6, bias, M, N, K, sms, s); });
      compare("ping-pong 64x256 gelu aux", toHost(aux, outN), w2a, &allOk);
      compare("ping-pong 64x256 gelu out", toHost(out, outN), w2, &allOk);
      lt.run(a, b, ref, refAux, nullptr, M, N, K, CUBLASLT_EPILOGUE_DGELU, s, 2);
      std::vector<float> w3 = toHost(ref, outN);
      clear();
      float q3 = timeOurs(
          [&] { launchPingpong<kDgelu, 0, 64>(ma6, mb6, mo6, mxIn6, nullptr, M, N, K, sms, s); });
      compare("ping-pong 64x256 dgelu", toHost(out, outN), w3, &allOk);
      std::printf("  ping-pong 64x256: plain %7.1f us (%4.0f TFLOP/s)  +bias+gelu+aux %7.1f  dgelu "
                  "%7.1f\n",
                  q0, flop / q0 / 1e6, q2, q3);
    }
    // Cooperative with store threads.
    if (want("coopstore")) {
      CUtensorMap mo1 = tensorMap(out, M, N, 64), mx1 = tensorMap(aux, M, N, 64),
                  mxIn1 = tensorMap(refAux, M, N, 64);
      lt.run(a, b, ref, nullptr, nullptr, M, N, K, CUBLASLT_EPILOGUE_DEFAULT, s, 2);
      std::vector<float> w0 = toHost(ref, outN);
      clear();
      float c0 =
          timeOurs([&] { launchCoopStore<kPlain>(ma, mb, mo1, mx1, nullptr, M, N, K, sms, s); });
      compare("coop-store plain", toHost(out, outN), w0, &allOk);
      lt.run(a, b, ref, nullptr, bias, M, N, K, CUBLASLT_EPILOGUE_BIAS, s, 2);
      std::vector<float> w1 = toHost(ref, outN);
      clear();
      float c1 = timeOurs([&] { launchCoopStore<kBias>(ma, mb, mo1, mx1, bias, M, N, K, sms, s); });
      compare("coop-store bias", toHost(out, outN), w1, &allOk);
      lt.run(a, b, ref, refAux, bias, M, N, K, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, s, 2);
      std::vector<float> w2 = toHost(ref, outN), w2a = toHost(refAux, outN);
      clear();
      float c2 =
          timeOurs([&] { launchCoopStore<kBiasGeluAux>(ma, mb, mo1, mx1, bias, M, N, K, sms, s); });
      compare("coop-store gelu aux", toHost(aux, outN), w2a, &allOk);
      compare("coop-store gelu out", toHost(out, outN), w2, &allOk);
      lt.run(a, b, ref, refAux, nullptr, M, N, K, CUBLASLT_EPILOGUE_DGELU, s, 2);
      std::vector<float> w3 = toHost(ref, outN);
      clear();
      float c3 =
          timeOurs([&] { launchCoopStore<kDgelu>(ma, mb, mo1, mxIn1, nullptr, M, N, K, sms, s); });
      compare("coop-store dgelu", toHost(out, outN), w3, &allOk);
      std::printf("  coop-store:     plain %7.1f us (%4.0f TFLOP/s)  +bias %7.1f  +bias+gelu+aux "
                  "%7.1f  dgelu %7.1f\n",
                  c0, flop / c0 / 1e6, c1, c2, c3);
    }
    for (bf16 *p : {a, b, bias, out, aux, ref, refAux})
      CK(cudaFree(p));
  }
  std::printf("%s\n", allOk ? "all outputs match cuBLASLt" : "MISMATCHES");
  return allOk ? 0 : 1;
}
