//===- gemm_sm90.cuh - tc's own sm_90a GEMM with fused epilogues -*- CUDA -*-===//
//
// A warp-specialised GEMM for H100/H200 (sm_90a): TMA loads and stores with
// 128-byte swizzle, wgmma.mma_async, mbarrier rings, persistent 128x256
// tiles, one block an SM, written from the PTX ISA. One kernel template,
// gemmCoop, in the forms bench/gemm_sm90.cu measures beside cuBLASLt
// (bench/RESULTS.md, stops 36-38); gemm_sm90.cu launches the one the
// runtime takes (the resident deferred GELU + aux and DGELU epilogues).
//
// out[M, N] = a[M, K] b[N, K]^T (+ bias[N]) with a and b row-major bf16 (both
// K-major: tc's `rhs^T` forward form; or b [K, N], N-major, as nn.Linear's
// weight is read by the dgrad), fp32 accumulation, bf16 out; the
// epilogues: none, bias, bias + GELU (tanh form) with the pre-activation
// written beside (cuBLASLt's GELU_AUX_BIAS), and DGELU (the product times
// gelu'(aux)). M % 128, N % 256, K % 64; bias may be null.
//
// Header-only (device code and its constants), included by the runtime's
// gemm_sm90.cu and by the bench.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_CUDA_KERNELS_GEMM_SM90_CUH
#define TC_RUNTIME_CUDA_KERNELS_GEMM_SM90_CUH

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/src/cuda/kernels/gelu.cuh"

namespace tc::rt::cuda::sm90gemm {

using bf16 = __nv_bfloat16;

constexpr int BK = 64;        // k-block: 64 bf16, one 128-byte swizzle row
constexpr int kConsumers = 2; // consumer warpgroups a block
constexpr int kThreads = 128 * (kConsumers + 1);

/// The driver's cuTensorMapEncodeTiled (CUDA 12.0's ABI) through
/// cudaGetDriverEntryPointByVersion (the runtime does not link libcuda),
/// null when absent. Defined in gemm_sm90.cu; the runtime's TMA kernels
/// (ownGemm, the TMA attention) encode their tensor maps with it.
using EncodeTiled = CUresult (*)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                 const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                 const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
EncodeTiled encodeTiled();

__device__ __forceinline__ uint32_t smemAddr(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
/// The first 1024-byte aligned byte of dynamic shared memory (what TMA's
/// 128-byte swizzle needs), reached by pointer arithmetic from `smem` so that
/// the compiler keeps it in the shared address space: every access through
/// it (and the pointers made from it) is an LDS / STS, not a generic LD / ST
/// with 64-bit addresses (as an integer round trip of the address gave).
__device__ __forceinline__ unsigned char *alignedSmem(unsigned char *smem) {
  return smem + ((1024u - (smemAddr(smem) & 1023u)) & 1023u);
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
// The accumulator operands of one wgmma: d[0, 64) or d[0, 128) as "+f"
// operands and their %0.. register lists (the PTX ISA names each register).
#define TC_F8(i)                                                                                   \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]),      \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define TC_F32 TC_F8(0), TC_F8(8), TC_F8(16), TC_F8(24)
#define TC_F64 TC_F32, TC_F8(32), TC_F8(40), TC_F8(48), TC_F8(56)
#define TC_R32                                                                                     \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "     \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define TC_F128                                                                                    \
  TC_F64, TC_F8(64), TC_F8(72), TC_F8(80), TC_F8(88), TC_F8(96), TC_F8(104), TC_F8(112), TC_F8(120)
#define TC_R64                                                                                     \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "     \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "     \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "     \
  "%56, %57, %58, %59, %60, %61, %62, %63"
#define TC_R128                                                                                    \
  TC_R64 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, " \
         "%81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, "   \
         "%98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "      \
         "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, "    \
         "%126, %127"

/// d (+)= A B for one m64n128k16 bf16 wgmma (B N-major with TransB).
template <int TransB>
__device__ __forceinline__ void wgmma128(float (&d)[64], uint64_t descA, uint64_t descB,
                                         int scaleD) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" TC_R64
               "}, %64, %65, p, 1, 1, 0, %67;\n}\n"
               : TC_F64
               : "l"(descA), "l"(descB), "r"(scaleD), "n"(TransB));
}

/// The descriptor of an N-major b tile [64 K rows][N] stored as TMA boxes of
/// [64 K rows, 64 N] (8 KB each, 128-byte swizzled): leading offset = the
/// 64-element N chunks, 8192 bytes apart; stride offset = the 8-row K groups,
/// 1024 apart (the other reading of the MN-major offsets gives wrong
/// products: stop 36's second call).
__device__ __forceinline__ uint64_t descSw128N(const void *p) {
  uint64_t d = (smemAddr(p) >> 4) & 0x3FFF;
  d |= uint64_t(8192 >> 4) << 16;
  d |= uint64_t(1024 >> 4) << 32;
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
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" TC_R128
               "}, %128, %129, p, 1, 1, 0, %131;\n}\n"
               : TC_F128
               : "l"(descA), "l"(descB), "r"(scaleD), "n"(TransB));
}

/// tanh(sqrt(2 / pi) (h + 0.044715 h^3)), the tanh of GELU's tanh form, with
/// the MUFU tanh (tanh.approx.f32: relative error ~2^-11, below bf16's 2^-8).
__device__ __forceinline__ float geluInnerTanh(float h) {
  float u = 0.7978845608028654f * (h + 0.044715f * h * h * h), t;
  asm("tanh.approx.f32 %0, %1;\n" : "=f"(t) : "f"(u));
  return t;
}
__device__ __forceinline__ float geluTanh(float h) { return 0.5f * h * (1.0f + geluInnerTanh(h)); }
/// d gelu(h) / dh of the tanh form.
__device__ __forceinline__ float geluTanhGrad(float h) {
  float t = geluInnerTanh(h);
  return 0.5f * (1.0f + t) +
         0.5f * h * (1.0f - t * t) * 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * h * h);
}

/// GELU and its derivative: the exact form with Erf (gelu.cuh's, as the
/// elementwise kernels compute it), else the tanh form above.
template <bool Erf> __device__ __forceinline__ float gelu(float h) {
  if constexpr (Erf)
    return ::tc::rt::cuda::gelu::value<true>(h);
  else
    return geluTanh(h);
}
template <bool Erf> __device__ __forceinline__ float geluGrad(float h) {
  if constexpr (Erf)
    return ::tc::rt::cuda::gelu::grad<true>(h);
  else
    return geluTanhGrad(h);
}

enum Epilogue { kPlain = 0, kBias = 1, kBiasGeluAux = 2, kDgelu = 3 };

/// Byte address of element (r, c) of a tile kept as 128-byte-swizzled boxes
/// of [rows, 64] bf16, boxBytes apart: box c / 64, row r at r 128, its
/// 16-byte chunk XOR r % 8 (the layout TMA reads and writes with
/// CU_TENSOR_MAP_SWIZZLE_128B; boxes 1024-byte aligned).
__device__ __forceinline__ unsigned char *swizzled(unsigned char *tile, int boxBytes, int r,
                                                   int c) {
  int cb = (c % 64) * 2;
  return tile + (c / 64) * boxBytes + r * 128 + (((cb >> 4) ^ (r & 7)) << 4) + (cb & 15);
}

/// Writes bf16x2 f(j, h, at) for the accumulator pairs j in [J0, J1) of one
/// warpgroup's m64nNk16 fragments (pair (j, h): row rowBase + 16 warp +
/// lane / 4 + 8 h, columns 8 j + 2 (lane % 4) + {0, 1} - colBase) at their
/// place `at` in the swizzled boxes at tile (which f may read first).
template <int J0, int J1, class F>
__device__ __forceinline__ void putFragments(unsigned char *tile, int boxBytes, int rowBase,
                                             int colBase, F &&f) {
  const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
#pragma unroll
  for (int j = J0; j < J1; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      unsigned char *at = swizzled(tile, boxBytes, rowBase + 16 * warp + lane / 4 + 8 * h,
                                   8 * j + 2 * (lane % 4) - colBase);
      *reinterpret_cast<__nv_bfloat162 *>(at) = f(j, h, at);
    }
}

/// putFragments for an f that does not read its place (f(j, h, nullptr)),
/// by stmatrix: one m8n8.x4 a pair of j stores the warp's 16 rows of both
/// (the four 8x8 matrices (j, h 0), (j, h 1), (j + 1, h 0), (j + 1, h 1),
/// whose rows lanes 8 i .. 8 i + 7 address; each thread's register i is its
/// fragment of matrix i, the accumulator's own layout): a quarter of the
/// instructions of the 4-byte stores (the same bytes through the same
/// shared-memory ports). J1 - J0 even. TC_GEMM_STS (a bench build) keeps the
/// 4-byte stores.
template <int J0, int J1, class F>
__device__ __forceinline__ void storeFragments(unsigned char *tile, int boxBytes, int rowBase,
                                               int colBase, F &&f) {
#ifdef TC_GEMM_STS
  putFragments<J0, J1>(tile, boxBytes, rowBase, colBase, f);
#else
  static_assert((J1 - J0) % 2 == 0, "pairs of j");
  const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
  const int i = lane / 8, row = rowBase + 16 * warp + lane % 8 + 8 * (i % 2);
  auto bits = [](__nv_bfloat162 v) { return *reinterpret_cast<uint32_t *>(&v); };
#pragma unroll
  for (int j = J0; j < J1; j += 2) {
    uint32_t r0 = bits(f(j, 0, nullptr)), r1 = bits(f(j, 1, nullptr));
    uint32_t r2 = bits(f(j + 1, 0, nullptr)), r3 = bits(f(j + 1, 1, nullptr));
    unsigned char *at = swizzled(tile, boxBytes, row, 8 * (j + i / 2) - colBase);
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(
                     smemAddr(at)),
                 "r"(r0), "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
  }
#endif
}

/// Stores `boxes` boxes of [rows, 64] at tile (boxBytes apart) by TMA to the
/// columns from col0 and the rows from row0 of map's matrix, once every
/// thread of warpgroup g has written them; by its thread 0, which commits
/// them as one bulk group.
__device__ __forceinline__ void storeBoxes(const CUtensorMap *map, unsigned char *tile, int boxes,
                                           int boxBytes, int col0, int row0, int g) {
  fenceProxyAsync();
  namedBarrier(1 + g, 128);
  if (threadIdx.x % 128 == 0) {
    for (int b = 0; b < boxes; ++b)
      tmaStore2d(map, tile + b * boxBytes, col0 + 64 * b, row0);
    tmaStoreCommit();
  }
}

/// Before warpgroup g writes its output tile again: the bulk stores of its
/// thread 0 have read it.
__device__ __forceinline__ void tileFree(int g) {
  if (threadIdx.x % 128 == 0)
    tmaStoreWaitRead();
  namedBarrier(1 + g, 128);
}

/// The loading thread: every tile's k-blocks of a ([TM, K] of a, [TN, K] of
/// b) into the ring of STAGES stages in order, tiles blockIdx.x + i
/// gridDim.x (N fastest), each stage's `full` barrier counting its bytes, a
/// stage refilled once `empty` says its readers are done. BL 1: b is [K, N]
/// (N-major), loaded as TN / 64 boxes of [64 K rows, 64 N].
template <int TM, int TN, int STAGES, int BL>
__device__ __forceinline__ void loadTiles(const CUtensorMap *mapA, const CUtensorMap *mapB,
                                          bf16 *sA, bf16 *sB, uint64_t *full, uint64_t *empty,
                                          int tiles, int tilesN, int kBlocks) {
  int stage = 0, phase = 0;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    int tm = tile / tilesN, tn = tile % tilesN;
    for (int kb = 0; kb < kBlocks; ++kb) {
      mbarWait(&empty[stage], phase ^ 1);
      mbarExpectTx(&full[stage], (TM + TN) * BK * 2);
      tmaLoad2d(sA + stage * (TM * BK), mapA, &full[stage], kb * BK, tm * TM);
      if (BL == 0) {
        tmaLoad2d(sB + stage * (TN * BK), mapB, &full[stage], kb * BK, tn * TN);
      } else {
#pragma unroll
        for (int box = 0; box < TN / 64; ++box)
          tmaLoad2d(sB + stage * (TN * BK) + box * (64 * 64), mapB, &full[stage],
                    tn * TN + box * 64, kb * BK);
      }
      if (++stage == STAGES) {
        stage = 0;
        phase ^= 1;
      }
    }
  }
}

/// The stage's b descriptor and its step along K for one k16 (K-major: 32
/// bytes along the row; N-major: 16 rows of 128 bytes), in descriptor units.
template <int BL> __device__ __forceinline__ uint64_t descB(const bf16 *stageB) {
  return BL == 0 ? descSw128(stageB) : descSw128N(stageB);
}
template <int BL> constexpr int kStepB = BL == 0 ? 2 : 128;

//===----------------------------------------------------------------------===//
// The cooperative form: both consumer warpgroups on one 128x256 tile
//===----------------------------------------------------------------------===//

constexpr int BM = 128, BN = 256;

/// Traces (TR): per block and consumer warpgroup, sums of clock64 intervals
/// over its tiles, then the tile count. gemmCoop's kCoopFields: the first
/// stage's wait, the other stages' waits, the deferred work, the group
/// waits, the drain (with the last boxes), the epilogue, the whole tile.
constexpr int kCoopFields = 7;

/// Shared memory of gemmCoop: STAGES stages of 48 KB, then the output tile
/// (3 stages: the whole 64 KB, each warpgroup's 64x256 part as 4 boxes; 4
/// stages: 32 KB, each part in two rounds of two boxes), then the barriers.
template <int STAGES, bool Res = false> struct Coop {
  static constexpr int stageA = BM * BK * 2, stageB = BN * BK * 2;
  static constexpr int tileC = STAGES == 4 ? BM * BN : BM * BN * 2, rounds = STAGES == 4 ? 2 : 1;
  static constexpr int slots = Res ? 2 * 8192 : 0; // the resident DGELU's aux box a warpgroup
  static constexpr int smem =
      STAGES * (stageA + stageB) + tileC + slots + 1024 + (2 * STAGES + 4) * 8;
};

/// out = a b^T (+ bias) (GELU with aux = the pre-activation, or DGELU), one
/// block an SM over 128x256 tiles. Warpgroup 0 (one thread) loads
/// (loadTiles); warpgroups 1 and 2 each compute 64 rows of the tile with
/// m64n256k16 wgmmas, keep one stage's group in flight and give a stage back
/// once its group has completed; then write their part into shared memory
/// and store it by TMA (storeBoxes).
///
/// Defer (4 stages; GELU+aux or DGELU): the epilogue's arithmetic leaves the
/// critical path. At a tile's end a warpgroup stores only the pre-activation
/// (aux = bf16(acc + bias); DGELU: the product, into out); during the next
/// tile's k-blocks it reads that back from L2 in four [64, 64] boxes (DGELU:
/// with their aux boxes), transforms each in place between two k-blocks'
/// wgmma issues (where the warps otherwise wait on their groups) and stores
/// it as out; the last tile's boxes after its loop. DGELU then multiplies a
/// bf16-rounded product, as PyTorch's unfused path (a bf16 GEMM output, then
/// the elementwise DGELU) does. Without Defer, DGELU is not built.
///
/// Defer with 3 stages, the resident form: the tile stays in shared memory
/// (the 64 KB output tile beside 3 stages) instead of going through L2. At a
/// tile's end a warpgroup writes its bf16 part there (GELU: acc + bias, stored
/// at once as aux; DGELU: the product, not stored) and during the next tile's
/// k-blocks transforms its four [64, 64] boxes in place, half a box at a time
/// (DGELU: each half with its aux, loaded by TMA into the warpgroup's 8 KB
/// slot two halves ahead; mapAux then has boxes of [32, 64]), and stores each
/// box as out: no reload, no wait for stores to reach memory.
template <int EPI, int STAGES, int BL = 0, bool Defer = false, bool TR = false, bool Erf = false,
          bool Early = false, int Probe = 0>
__global__ void __launch_bounds__(kThreads, 1)
    gemmCoop(const __grid_constant__ CUtensorMap mapA, const __grid_constant__ CUtensorMap mapB,
             const __grid_constant__ CUtensorMap mapOut, const __grid_constant__ CUtensorMap mapAux,
             const bf16 *__restrict__ bias, int M, int N, int K, long long *trace) {
  constexpr bool Res = Defer && STAGES == 3; // the resident form
  using C = Coop<STAGES, Res>;
  static_assert(STAGES == 3 || STAGES == 4, "3 or 4 stages");
  static_assert(Defer ? (EPI == kBiasGeluAux || EPI == kDgelu) : EPI != kDgelu,
                "deferred: GELU+aux or DGELU; DGELU only deferred");
  static_assert(!Early || Res, "Early: the resident form's");
  // Probe (bench/gemm_sm90.cu's timing-only rows, wrong outputs): the
  // resident transform's shared-memory traffic alone (1: the boxes read and
  // written back unchanged) or its arithmetic alone (2: the GELU of values
  // made in registers, no box read or written).
  static_assert(Probe == 0 || Res, "Probe: the resident form's");
  constexpr int kBox = 8192, kRoundJ = BN / 8 / C::rounds, kRoundBoxes = 4 / C::rounds;
  extern __shared__ unsigned char smemRaw[];
  unsigned char *base = alignedSmem(smemRaw);
  bf16 *sA = reinterpret_cast<bf16 *>(base);
  bf16 *sB = reinterpret_cast<bf16 *>(base + STAGES * C::stageA);
  unsigned char *sC = base + STAGES * (C::stageA + C::stageB);
  uint64_t *full = reinterpret_cast<uint64_t *>(sC + C::tileC + C::slots);
  uint64_t *empty = full + STAGES;
  uint64_t *boxFull = empty + STAGES; // Defer: [warpgroup][slot]
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  const int tilesN = N / BN, tiles = (M / BM) * tilesN, kBlocks = K / BK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbarInit(&full[s], 1);
      mbarInit(&empty[s], kConsumers);
    }
    for (int i = 0; i < 4; ++i)
      mbarInit(&boxFull[i], 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (wg == 0) {
    setMaxRegsDec<40>();
    if (tid == 0)
      loadTiles<BM, BN, STAGES, BL>(&mapA, &mapB, sA, sB, full, empty, tiles, tilesN, kBlocks);
    return;
  }
  setMaxRegsInc<232>();
  const int g = wg - 1; // rows 64 g .. 64 g + 63 of the tile
  const int cl = 2 * (tid % 4);
  unsigned char *myC = sC + g * (C::tileC / 2); // its boxes (Defer: slots 0 and 1)
  float acc[128];
  int stage = 0, phase = 0;

  // Defer: the boxes of the previous tile (pending): loads issued, boxes done.
  uint64_t *myFull = boxFull + 2 * g;
  unsigned slotPhases = 0; // bit s: the parity of slot s's next load
  bool pending = false;
  int ptm = 0, ptn = 0, loads = 0, done = 0;
  const int D = max(0, min(2, kBlocks / 4 - 1)); // k-blocks from a box's load to its use
  // Box q's load at k-block 1 + q (kBlocks - 1 - D) / 4: not at k-block 0,
  // where the first load's wait for the previous tile's stores to complete
  // (thread 0, which the warpgroup's next wgmma waits for) would stall the
  // products (stop 37: the deferred GELU + aux 155 us where the plain
  // product takes 113.5).
  // GELU (DGELU: times gelu' of the aux box xBox) of one [64, 64] box (or
  // its first `pieces` / 4) in place, elementwise (the swizzle, the same in
  // both boxes, does not matter): each thread `pieces` 16-byte pieces.
  auto transformInPlace = [&](unsigned char *box, const unsigned char *xBox, int pieces = 4) {
    int4 *v = reinterpret_cast<int4 *>(box);
    const int4 *x = reinterpret_cast<const int4 *>(xBox);
    if constexpr (Probe == 2) { // arithmetic alone: the same GELUs on register values
      float sink = 0.0f;
      const int salt = static_cast<int>(reinterpret_cast<uintptr_t>(box)) >> 4; // per half
#pragma unroll 1
      for (int i = 0; i < pieces; ++i)
#pragma unroll
        for (int e = 0; e < 8; ++e) { // independent elements, as the real transform's
          float a = __int_as_float(((salt + tid + 128 * i + 7 * e) & 0x7fffff) | 0x3f000000);
          sink += EPI == kDgelu ? a * geluGrad<Erf>(a) : gelu<Erf>(a);
        }
      if (__float_as_uint(sink) == 0x7fc00001u) // never: keeps the arithmetic
        v[tid] = make_int4(1, 1, 1, 1);
      return;
    }
#pragma unroll 1
    for (int i = 0; i < pieces; ++i) {
      int4 p = v[tid + 128 * i];
      if constexpr (Probe == 1) {        // shared-memory traffic alone
        p.x ^= static_cast<int>(M == 0); // (0: a store the compiler cannot drop)
        if (EPI == kDgelu) {
          int4 xa = x[tid + 128 * i];
          p.x ^= (xa.x ^ xa.y ^ xa.z ^ xa.w) & static_cast<int>(M == 0); // as DGELU reads it
        }
        v[tid + 128 * i] = p;
        continue;
      }
      __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&p);
      if (EPI == kDgelu) {
        int4 xa = x[tid + 128 * i];
        const __nv_bfloat162 *a = reinterpret_cast<const __nv_bfloat162 *>(&xa);
#pragma unroll
        for (int e = 0; e < 4; ++e)
          h[e] = __floats2bfloat162_rn(
              __bfloat162float(h[e].x) * geluGrad<Erf>(__bfloat162float(a[e].x)),
              __bfloat162float(h[e].y) * geluGrad<Erf>(__bfloat162float(a[e].y)));
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          h[e] = __floats2bfloat162_rn(gelu<Erf>(__bfloat162float(h[e].x)),
                                       gelu<Erf>(__bfloat162float(h[e].y)));
      }
      v[tid + 128 * i] = p;
    }
  };
  auto loadAt = [&](int q) { return 1 + q * (kBlocks - 1 - D) / 4; };
  auto loadBox = [&](int q) { // by thread 0
    const int col = ptn * BN + 64 * q, row = ptm * BM + g * 64;
    if (EPI == kDgelu) { // the product box (slot 0) and its aux box (slot 1)
      if (q == 0)
        tmaStoreWaitAll(); // the product is in global memory
      else
        tmaStoreWaitRead(); // box q - 1 has left slot 0
      mbarExpectTx(&myFull[0], 2 * kBox);
      tmaLoad2d(myC, &mapOut, &myFull[0], col, row);
      tmaLoad2d(myC + kBox, &mapAux, &myFull[0], col, row);
      return;
    }
    if (q == 0)
      tmaStoreWaitAll(); // the pre-activation is in global memory, both slots free
    else if (q >= 2)
      asm volatile("cp.async.bulk.wait_group.read 1;\n" ::: "memory"); // box q - 2 left its slot
    mbarExpectTx(&myFull[q & 1], kBox);
    tmaLoad2d(myC + (q & 1) * kBox, &mapAux, &myFull[q & 1], col, row);
  };
  auto transformBox = [&](int q) { // every thread of the warpgroup
    const int slot = EPI == kDgelu ? 0 : q & 1;
    mbarWait(&myFull[slot], int((slotPhases >> slot) & 1u));
    slotPhases ^= 1u << slot;
    transformInPlace(myC + slot * kBox, myC + kBox); // DGELU: the aux box in slot 1
    storeBoxes(&mapOut, myC + slot * kBox, 1, kBox, ptn * BN + 64 * q, ptm * BM + g * 64, g);
  };
  // Res: the tile's 4 boxes in 8 halves of [32, 64] (half p: rows 32 (p % 2)
  // of box p / 2), half p transformed at k-block 2 + p (kBlocks - 3) / 8, so
  // that no k-block carries more than ~half a box of arithmetic (a whole
  // DGELU box outlasts a k-block's products); box q stored after its second
  // half. DGELU: each half's aux [32, 64] (mapAux's boxes are 32 rows) loaded
  // by TMA into its half of the warpgroup's 8 KB slot two halves ahead (the
  // first two at the tile's end), so each load has ~2 k-blocks to arrive.
  unsigned char *mySlot = sC + C::tileC + g * kBox;
  constexpr int kHalf = kBox / 2;
  auto resLoad = [&](int p) { // by thread 0: half p's aux into slot half p % 2
    const int h = p & 1;
    mbarExpectTx(&myFull[h], kHalf);
    tmaLoad2d(mySlot + h * kHalf, &mapAux, &myFull[h], ptn * BN + 64 * (p / 2),
              ptm * BM + g * 64 + 32 * h);
  };
  auto resTransform = [&](int p) { // every thread of the warpgroup
    const int q = p / 2, h = p & 1;
    unsigned char *box = myC + q * kBox;
    if (EPI == kDgelu) {
      mbarWait(&myFull[h], int((slotPhases >> h) & 1u));
      slotPhases ^= 1u << h;
    } else if (p == 0) { // the aux store has read the tile
      if (tid == 0)
        tmaStoreWaitRead();
      namedBarrier(1 + g, 128);
    }
    // Rows 32 h.. of a 128-byte-swizzled box lie at 4096 h with the same
    // swizzle as a box of 32 rows (the pattern repeats every 8 rows).
    transformInPlace(box + h * kHalf, mySlot + h * kHalf, 2);
    if (h == 1) // (its barrier also says every thread has read the slot half)
      storeBoxes(&mapOut, box, 1, kBox, ptn * BN + 64 * q, ptm * BM + g * 64, g);
    else if (EPI == kDgelu)
      namedBarrier(1 + g, 128); // every thread has read the slot half
    if (EPI == kDgelu && p + 2 < 8 && tid == 0)
      resLoad(p + 2);
  };
  auto deferred = [&](int kb) { // the deferred work due at k-block kb
    if constexpr (Res) {
      if (pending && done < 8 && kb == 2 + done * (kBlocks - 3) / 8) {
        resTransform(done);
        ++done;
      }
    } else if constexpr (Defer) {
      if (!pending)
        return;
      if (loads < 4 && kb == loadAt(loads)) {
        if (tid == 0)
          loadBox(loads);
        ++loads;
      }
      if (done < loads && kb == loadAt(done) + D) {
        transformBox(done);
        ++done;
      }
    }
  };
  auto flush = [&] { // the boxes still due (K too short to spread them; the last tile's)
    if constexpr (Res) {
      for (; pending && done < 8; ++done)
        resTransform(done);
    } else if constexpr (Defer) {
      for (; pending && done < 4; ++done) {
        if (loads == done) {
          if (tid == 0)
            loadBox(loads);
          ++loads;
        }
        transformBox(done);
      }
    }
  };

  // Res: the tile's bf16 part, acc (+ bias: GELU's pre-activation), and
  // its store into shared memory (GELU: stored as aux at once; DGELU: the
  // first two aux halves loaded), which makes it the pending tile.
  auto partValue = [&](int j, int h, int ptnv) {
    const float a0 = acc[4 * j + 2 * h], a1 = acc[4 * j + 2 * h + 1];
    float b0 = 0.0f, b1 = 0.0f;
    if (EPI == kBiasGeluAux && bias) {
      __nv_bfloat162 bb = *reinterpret_cast<const __nv_bfloat162 *>(bias + ptnv * BN + 8 * j + cl);
      b0 = __bfloat162float(bb.x);
      b1 = __bfloat162float(bb.y);
    }
    return __floats2bfloat162_rn(a0 + b0, a1 + b1);
  };
  auto storePart = [&](int ptmv, int ptnv, auto value) {
    tileFree(g);
    storeFragments<0, BN / 8>(myC, kBox, 0, 0, value);
    if (EPI == kBiasGeluAux)
      storeBoxes(&mapAux, myC, 4, kBox, ptnv * BN, ptmv * BM + g * 64, g);
    else
      namedBarrier(1 + g, 128); // every thread's part written before any transform
    pending = true;
    ptm = ptmv;
    ptn = ptnv;
    done = 0;
    if (EPI == kDgelu && tid == 0) {
      resLoad(0);
      resLoad(1);
    }
  };
  // Early: the part packed into 64 registers at the tile's end and stored
  // after the next tile's first k-block's products are issued, so that its
  // stores run under them rather than before them (the tensor cores idle).
  uint32_t packed[Early ? 64 : 1];
  bool packPending = false;
  int packTm = 0, packTn = 0;
  auto storePacked = [&] {
    if constexpr (Early) {
      if (!packPending)
        return;
      storePart(packTm, packTn, [&](int j, int h, unsigned char *) {
        return *reinterpret_cast<const __nv_bfloat162 *>(&packed[2 * j + h]);
      });
      packPending = false;
    }
  };

  long long tr[kCoopFields] = {}, trTiles = 0;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int tm = tile / tilesN, tn = tile % tilesN;
    int prev = -1;
    long long t0 = TR ? clock64() : 0;
    for (int kb = 0; kb < kBlocks; ++kb) {
      long long w0 = TR ? clock64() : 0;
      mbarWait(&full[stage], phase);
      if (TR)
        tr[kb == 0 ? 0 : 1] += clock64() - w0;
      uint64_t dA = descSw128(sA + stage * (BM * BK) + g * 64 * BK);
      uint64_t dB = descB<BL>(sB + stage * (BN * BK));
      wgmmaFence();
#pragma unroll
      for (int k = 0; k < BK / 16; ++k) // 32 bytes further along K a step
        wgmma256<BL != 0>(acc, dA + 2 * k, dB + kStepB<BL> * k, (kb > 0 || k > 0) ? 1 : 0);
      wgmmaCommit();
      long long w1 = TR ? clock64() : 0;
      if (Early && kb == 0)
        storePacked(); // the previous tile's part, under the group just issued
      deferred(kb);  // under the group just issued
      long long w2 = TR ? clock64() : 0;
      if (prev >= 0) {
        wgmmaWait<1>(); // the previous stage's group is done with its tiles
        if (tid == 0)
          mbarArrive(&empty[prev]);
      }
      if (TR) {
        tr[2] += w2 - w1;
        tr[3] += clock64() - w2;
      }
      prev = stage;
      if (++stage == STAGES) {
        stage = 0;
        phase ^= 1;
      }
    }
    long long t2 = TR ? clock64() : 0;
    wgmmaWait<0>();
    if (tid == 0)
      mbarArrive(&empty[prev]);
    flush();
    long long t3 = TR ? clock64() : 0;
    if constexpr (Early) {
#pragma unroll
      for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          __nv_bfloat162 v = partValue(j, h, tn);
          packed[2 * j + h] = *reinterpret_cast<uint32_t *>(&v);
        }
      packPending = true;
      packTm = tm;
      packTn = tn;
    } else if constexpr (Res) {
      storePart(tm, tn, [&](int j, int h, unsigned char *) { return partValue(j, h, tn); });
    }
    // pass 0: acc + bias (GELU: stored as aux, acc becomes it as stored;
    // deferred DGELU: the product, into out); pass 1 (GELU, not deferred):
    // gelu(acc) as out.
    constexpr int passes = Res ? 0 : EPI == kBiasGeluAux && !Defer ? 2 : 1;
#pragma unroll
    for (int pass = 0; pass < passes; ++pass)
#pragma unroll
      for (int round = 0; round < C::rounds; ++round) {
        tileFree(g);
        auto value = [&](int j, int h, unsigned char *) {
          float &a0 = acc[4 * j + 2 * h], &a1 = acc[4 * j + 2 * h + 1];
          if (pass == 1)
            return __floats2bfloat162_rn(gelu<Erf>(a0), gelu<Erf>(a1));
          float b0 = 0.0f, b1 = 0.0f;
          if ((EPI == kBias || EPI == kBiasGeluAux) && bias) {
            __nv_bfloat162 bb =
                *reinterpret_cast<const __nv_bfloat162 *>(bias + tn * BN + 8 * j + cl);
            b0 = __bfloat162float(bb.x);
            b1 = __bfloat162float(bb.y);
          }
          __nv_bfloat162 st = __floats2bfloat162_rn(a0 + b0, a1 + b1);
          if (EPI == kBiasGeluAux && !Defer) {
            a0 = __bfloat162float(st.x);
            a1 = __bfloat162float(st.y);
          }
          return st;
        };
        if (round == 0)
          storeFragments<0, kRoundJ>(myC, kBox, 0, 0, value);
        else
          storeFragments<kRoundJ, 2 * kRoundJ>(myC, kBox, 0, 128, value);
        const CUtensorMap *map = EPI == kBiasGeluAux && pass == 0 ? &mapAux : &mapOut;
        storeBoxes(map, myC, kRoundBoxes, kBox, tn * BN + round * 64 * kRoundBoxes,
                   tm * BM + g * 64, g);
      }
    if (Defer && !Res) {
      pending = true;
      ptm = tm;
      ptn = tn;
      loads = done = 0;
    }
    if (TR) {
      long long t4 = clock64();
      tr[4] += t3 - t2;
      tr[5] += t4 - t3;
      tr[6] += t4 - t0;
      trTiles += 1;
    }
  }
  storePacked(); // the last tile's part
  flush();
  if (tid == 0)
    tmaStoreWaitAll();
  if (TR && tid == 0 && trace) {
    long long *o = trace + (long(blockIdx.x) * 2 + g) * (kCoopFields + 1);
    for (int f = 0; f < kCoopFields; ++f)
      o[f] = tr[f];
    o[kCoopFields] = trTiles;
  }
}

} // namespace tc::rt::cuda::sm90gemm

#endif // TC_RUNTIME_CUDA_KERNELS_GEMM_SM90_CUH
