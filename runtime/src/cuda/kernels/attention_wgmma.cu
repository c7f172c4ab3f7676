//===- attention_wgmma.cu - attention on sm_90a warpgroup tensor cores ----===//
//
// The H100/H200 path of attention.cu: the FlashAttention-2 algorithm of
// attention_flash.cu (the same tiles, online softmax, masks, two-kernel
// deterministic backward and results to rounding) with its matrix products
// on wgmma.mma_async, the warpgroup instructions of sm_90a, instead of
// mma.sync, which on Hopper reaches about two thirds of the tensor cores'
// rate. Compiled for sm_90a only (its own object; the launchers refuse
// other GPUs), bf16 or f16, d == dv in {64, 128}.
//
// A block is one warpgroup (4 warps, 128 threads) owning 64 rows (warp w
// rows 16w..16w+15: queries in the forward and dQ, keys in dK/dV), so the
// m64 accumulators of wgmma are the C fragments the mma.sync kernels keep
// and attention_tiles.cuh's softmax, masks, P/dS arithmetic and stores serve
// both paths. Operand tiles live in shared memory in the no-swizzle
// ("interleave") core-matrix layout: 8x8 blocks of 128 contiguous bytes
// (8 rows 16 B apart), block (r / 8, c / 8) of an [R][D] tile at index
// (r / 8) (D / 8) + c / 8. One tile serves as a K-major operand (rows are M
// or N, columns K: q, k, dout, v in S = Q K^T, dP = dO V^T, S^T = K Q^T,
// dP^T = V dO^T) and as a transposed, MN-major B operand (rows are K:
// v in O += P V, k in dQ += dS K, dout and q in dV += P^T dO, dK += dS^T Q);
// P and dS go from the accumulators to A fragments in registers (the RS
// form), never through shared memory. cp.async fills the tiles (double
// buffered), each thread then fences its writes to the async proxy that
// wgmma reads through (fence.proxy.async) before the block's barrier.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <type_traits>

#include "runtime/src/cuda/kernels/attention_tiles.cuh"
#include "runtime/src/cuda/kernels/attention_wgmma_layout.h"

namespace tc::rt::cuda::attn {
namespace {

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TC_NO_WGMMA 1 // a device pass for another architecture: stubs
#endif

//===----------------------------------------------------------------------===//
// wgmma wrappers
//===----------------------------------------------------------------------===//

__device__ __forceinline__ void wgFence() {
#ifndef TC_NO_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgCommit() {
#ifndef TC_NO_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgWaitAll() {
#ifndef TC_NO_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
}
/// Waits until at most the last committed group is pending.
__device__ __forceinline__ void wgWaitAllButOne() {
#ifndef TC_NO_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
#endif
}
/// Orders this thread's generic-proxy writes to shared memory (cp.async)
/// before later async-proxy reads (wgmma operands).
__device__ __forceinline__ void fenceProxyAsync() {
#ifndef TC_NO_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
/// Keeps the compiler from moving reads or writes of accumulator or
/// fragment registers across the asynchronous wgmma issue / wait.
template <int N> __device__ __forceinline__ void fenceRegs(float (&c)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      asm volatile("" : "+f"(c[i][e])::"memory");
}
template <int N> __device__ __forceinline__ void fenceRegs(uint32_t (&a)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      asm volatile("" : "+r"(a[i][e])::"memory");
}

/// c[64 x N] (+)= A B, m64nNk16, fp32 accumulate, scaleD == 0 overwriting c.
/// wgmmaSS: A and B from shared memory (descriptors), both K-major. wgmmaRS:
/// A from registers (four m16k16 A fragments, one per warp, the mma.sync
/// layout), B MN-major (transposed) in shared memory. c is the mma.sync C
/// fragments of the warp's 16 rows, N / 8 of them.
#define TC_ACC(i) "+f"(c[i][0]), "+f"(c[i][1]), "+f"(c[i][2]), "+f"(c[i][3])
#define TC_ACC4 TC_ACC(0), TC_ACC(1), TC_ACC(2), TC_ACC(3)
#define TC_ACC8 TC_ACC4, TC_ACC(4), TC_ACC(5), TC_ACC(6), TC_ACC(7)
#define TC_ACC16 \
  TC_ACC8, TC_ACC(8), TC_ACC(9), TC_ACC(10), TC_ACC(11), TC_ACC(12), TC_ACC(13), \
      TC_ACC(14), TC_ACC(15)
#define TC_D32 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define TC_D64 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, " \
  "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define TC_D128 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, " \
  "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, " \
  "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, " \
  "%53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
// One wgmma: m64nNk16, TY (f16 or bf16) in, f32 accumulate; the scale-d
// predicate from operand IS (0: c = A B, else c += A B).
#define TC_WGMMA_SS(N, TY, IA, IB, IS, ACC)                                                  \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #IS ", 0;\n"                              \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." #TY "." #TY " " TC_D##N      \
               ", %" #IA ", %" #IB ", p, 1, 1, 0, 0;\n}\n"                                    \
               : ACC                                                                          \
               : "l"(da), "l"(db), "r"(scaleD))
#define TC_WGMMA_RS(N, TY, A0, A1, A2, A3, IB, IS, ACC)                                      \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #IS ", 0;\n"                              \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." #TY "." #TY " " TC_D##N      \
               ", {%" #A0 ", %" #A1 ", %" #A2 ", %" #A3 "}, %" #IB ", p, 1, 1, 1;\n}\n"       \
               : ACC                                                                          \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scaleD))

template <class T, int N8>
__device__ __forceinline__ void wgmmaSS(float (&c)[N8][4], uint64_t da, uint64_t db, int scaleD) {
#ifndef TC_NO_WGMMA
  constexpr bool kF16 = std::is_same_v<T, f16>;
  static_assert(N8 == 4 || N8 == 8 || N8 == 16, "wgmma N is 32, 64 or 128 here");
  if constexpr (N8 == 4 && kF16)
    TC_WGMMA_SS(32, f16, 16, 17, 18, TC_ACC4);
  else if constexpr (N8 == 4)
    TC_WGMMA_SS(32, bf16, 16, 17, 18, TC_ACC4);
  else if constexpr (N8 == 8 && kF16)
    TC_WGMMA_SS(64, f16, 32, 33, 34, TC_ACC8);
  else if constexpr (N8 == 8)
    TC_WGMMA_SS(64, bf16, 32, 33, 34, TC_ACC8);
  else if constexpr (kF16)
    TC_WGMMA_SS(128, f16, 64, 65, 66, TC_ACC16);
  else
    TC_WGMMA_SS(128, bf16, 64, 65, 66, TC_ACC16);
#else
  __trap();
#endif
}
template <class T, int N8>
__device__ __forceinline__ void wgmmaRS(float (&c)[N8][4], const uint32_t (&a)[4], uint64_t db,
                                        int scaleD) {
#ifndef TC_NO_WGMMA
  constexpr bool kF16 = std::is_same_v<T, f16>;
  static_assert(N8 == 4 || N8 == 8 || N8 == 16, "wgmma N is 32, 64 or 128 here");
  if constexpr (N8 == 4 && kF16)
    TC_WGMMA_RS(32, f16, 16, 17, 18, 19, 20, 21, TC_ACC4);
  else if constexpr (N8 == 4)
    TC_WGMMA_RS(32, bf16, 16, 17, 18, 19, 20, 21, TC_ACC4);
  else if constexpr (N8 == 8 && kF16)
    TC_WGMMA_RS(64, f16, 32, 33, 34, 35, 36, 37, TC_ACC8);
  else if constexpr (N8 == 8)
    TC_WGMMA_RS(64, bf16, 32, 33, 34, 35, 36, 37, TC_ACC8);
  else if constexpr (kF16)
    TC_WGMMA_RS(128, f16, 64, 65, 66, 67, 68, 69, TC_ACC16);
  else
    TC_WGMMA_RS(128, bf16, 64, 65, 66, 67, 68, 69, TC_ACC16);
#else
  __trap();
#endif
}
#undef TC_WGMMA_SS
#undef TC_WGMMA_RS
#undef TC_D32
#undef TC_D64
#undef TC_D128
#undef TC_ACC16
#undef TC_ACC8
#undef TC_ACC4
#undef TC_ACC

//===----------------------------------------------------------------------===//
// Core-matrix tiles
//===----------------------------------------------------------------------===//

/// Copies rows [r0, r0 + Rows) of a [rows, D] operand (row stride rs
/// elements) into a core-matrix tile; rows past `rows` are zero. Thread i
/// copies the 16-byte rows i, i + 128, ... of the tile in storage order, so
/// a warp's writes are 512 contiguous bytes and its reads 64 contiguous
/// bytes of each of 8 rows.
template <int Rows, int D, class T>
__device__ __forceinline__ void loadCoreTile(T *sm, const T *g, int64_t rs, int r0, int rows) {
  constexpr int kChunks = Rows * D / 8, kStep = kThreads * 8 / D; // rows a round of the block
  static_assert(kChunks % kThreads == 0, "tile not a multiple of the block");
  int r = 0, c = 0;
  coreChunk<D>(threadIdx.x, r, c); // chunk threadIdx.x + k 128 is row r + k kStep, column c
  const T *src = g + static_cast<int64_t>(r0 + r) * rs + c;
  const int64_t step = static_cast<int64_t>(kStep) * rs;
#pragma unroll
  for (int it = 0; it < kChunks / kThreads; ++it) {
    const bool valid = r0 + r + it * kStep < rows;
    cpAsync16(smemAddr(sm + (threadIdx.x + it * kThreads) * 8), valid ? src : g, valid);
    src += step;
    asm("" : "+l"(src)); // one add a chunk (flash's loadTile)
  }
}

/// A shared-memory matrix descriptor, no swizzle: start address, leading
/// (K direction) and stride (M/N direction) byte offsets between core
/// matrices, each in 16-byte units.
__device__ __forceinline__ uint64_t smemDesc(const void *p, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((smemAddr(p) & 0x3FFFF) >> 4) |
         (static_cast<uint64_t>(lbo >> 4) << 16) | (static_cast<uint64_t>(sbo >> 4) << 32);
}
/// The descriptor of `f` (attention_wgmma_layout.h) in the tile at `tile`.
template <class T> __device__ __forceinline__ uint64_t descOf(const T *tile, WgDescFields f) {
  return smemDesc(reinterpret_cast<const unsigned char *>(tile) + f.start, f.lbo, f.sbo);
}
template <int D, class T> __device__ __forceinline__ uint64_t kMajor(const T *tile, int r0, int kk) {
  return descOf(tile, kMajorFields<D>(r0, kk));
}
template <int D, class T> __device__ __forceinline__ uint64_t mnMajor(const T *tile, int kk) {
  return descOf(tile, mnMajorFields<D>(kk));
}

/// c += a b over all of a's K columns: a rows [0, 64) and b rows [0, N)
/// K-major in core tiles [*][D] (K = D).
template <int D, int N, class T>
__device__ __forceinline__ void gemmSS(float (&c)[N / 8][4], const T *a, const T *b) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    wgmmaSS<T>(c, kMajor<D>(a, 0, kk), kMajor<D>(b, 0, kk), 1);
}
/// The A fragments (rounded to T) of x, 64 x K accumulators (C fragments).
template <int K, class T>
__device__ __forceinline__ void toA(uint32_t (&a)[K / 16][4], const float (&x)[K / 8][4]) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk)
    cToA<T>(a[kk], x[2 * kk], x[2 * kk + 1]);
}
/// c[64 x D] += a b: a (64 x K) as A fragments, b the K rows of a core tile
/// [K][D] (MN-major).
template <int K, int D, class T>
__device__ __forceinline__ void gemmRS(float (&c)[D / 8][4], const uint32_t (&a)[K / 16][4],
                                       const T *b) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk)
    wgmmaRS<T>(c, a[kk], mnMajor<D>(b, kk), 1);
}

/// Waits for this thread's cp.async copies, fences them to the async proxy
/// and then the block: the tiles are readable by wgmma.
__device__ __forceinline__ void tilesLanded() {
  cpAsyncWaitAll();
  fenceProxyAsync();
  __syncthreads();
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

constexpr int kRows = 64; // rows of a block: one warpgroup's m64

template <int D, int BK> constexpr int wgFwdSmemBytes() { return (kRows + 4 * BK) * D * 2; }

/// Grid: batch * heads * ceil(tq / 64) blocks, the last query blocks first.
/// Shared: sQ[64][D], sK[2][BK][D], sV[2][BK][D] (core tiles).
/// The products overlap the softmax (FlashAttention-3's intra-warpgroup
/// pipelining): tile j's S = Q K_j^T and the previous tile's O += P V_{j-1}
/// are issued together; once S has landed its softmax runs while the tensor
/// cores finish P V, and O is rescaled after that (softmaxTile's Defer). The
/// copies of K_{j+1} and V_j are issued at the start of iteration j, into
/// the buffers S_{j-1} and P V_{j-2} were done with in iteration j - 1.
template <class T, int D, int BK, bool Amax>
__global__ void __launch_bounds__(kThreads) wgFwdKernel(FastParams<T> p) {
  constexpr int BQ = kRows;
  extern __shared__ __align__(128) unsigned char smRaw[];
  T *sQ = reinterpret_cast<T *>(smRaw); // [BQ][D]
  T *sK = sQ + BQ * D;                  // [2][BK][D]
  T *sV = sK + 2 * BK * D;              // [2][BK][D]

  const QueryBlock blk(p, BQ);
  const int bh = blk.bh, b = blk.b, h = blk.h, q0 = blk.q0;
  const T *q = blk.q(p), *k = blk.k(p), *v = blk.v(p);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int qw = q0 + warp * 16, row0 = qw + g;

  const int nKT = blk.keyTiles(p, BQ, BK);

  float o[D / 8][4];
  zero(o);
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}; // rows row0, row0 + 8
  float s[BK / 8][4];
  uint32_t pa[BK / 16][4]; // P of the previous tile as A fragments
  // Issues S = Q K_kt^T (asynchronous, committed).
  auto issueS = [&](int kt) {
    zero(s);
    fenceRegs(s);
    wgFence();
    gemmSS<D, BK>(s, sQ, sK + (kt & 1) * BK * D);
    wgCommit();
  };
  // Issues O += pa V_kt (asynchronous, committed).
  auto issuePV = [&](int kt) {
    fenceRegs(pa);
    fenceRegs(o);
    wgFence();
    gemmRS<BK, D>(o, pa, sV + (kt & 1) * BK * D);
    wgCommit();
  };

  if (nKT > 0) {
    loadCoreTile<BQ, D>(sQ, q, p.qs.row, q0, p.tq);
    loadCoreTile<BK, D>(sK, k, p.ks.row, 0, p.tk);
    cpAsyncCommit();
    tilesLanded(); // q, K_0
    if (nKT > 1)
      loadCoreTile<BK, D>(sK + BK * D, k, p.ks.row, BK, p.tk);
    loadCoreTile<BK, D>(sV, v, p.vs.row, 0, p.tk);
    cpAsyncCommit();
    issueS(0);
    wgWaitAll();
    fenceRegs(s);
    softmaxTile<BK, D>(s, o, m, l, p, 0, qw, row0, t);
    toA<BK, T>(pa, s);
  }
  for (int kt = 1; kt < nKT; ++kt) {
    tilesLanded(); // K_kt, V_{kt-1}; everyone is done with S_{kt-1} and P V_{kt-2}
    if (kt + 1 < nKT)
      loadCoreTile<BK, D>(sK + ((kt + 1) & 1) * BK * D, k, p.ks.row, (kt + 1) * BK, p.tk);
    loadCoreTile<BK, D>(sV + (kt & 1) * BK * D, v, p.vs.row, kt * BK, p.tk);
    cpAsyncCommit();
    issueS(kt);
    issuePV(kt - 1);
    wgWaitAllButOne(); // S landed
    fenceRegs(s);
    // Rows whose keys are all masked (warps left of a causal tile) get
    // P = 0 and keep their max and sum.
    float corr[2];
    softmaxTile<BK, D, false, true>(s, o, m, l, p, kt * BK, qw, row0, t, {}, corr);
    fenceRegs(s); // P computed here, while P V runs (not sunk past the wait)
    wgWaitAll();  // P V_{kt-1} landed: o and the registers of pa are free
    fenceRegs(o);
    fenceRegs(s); // the new pa is made after the wait
    rescaleRows<D>(o, corr);
    toA<BK, T>(pa, s);
  }
  if (nKT > 0) {
    tilesLanded(); // V_{nKT-1}
    issuePV(nKT - 1);
    wgWaitAll();
    fenceRegs(o);
  }
  cpAsyncWaitAll();
  finishForward<D, Amax>(p, o, m, l, b, h, bh, row0, t);
}

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

/// Shared bytes of the dQ kernel: sQ, sO [64][D], sK, sV [2][BK][D], sDD [64].
template <int D, int BK> constexpr int wgDqSmemBytes() {
  return (2 * kRows + 4 * BK) * D * 2 + kRows * 4;
}

/// Grid: ceil(tq / 64) * batch * heads blocks, the last query blocks first.
/// The block computes D = rowsum(dout * out) of its 64 queries (for itself
/// and, through p.dd, the dK/dV kernel launched after it), then loops over
/// BK-key tiles: S = Q K^T and dP = dO V^T, P and dS = P (dP - D) as the
/// mma.sync kernel computes them, dQ += dS K.
template <class T, int D, int BK, bool Amax>
__global__ void __launch_bounds__(kThreads) wgDqKernel(FastParams<T> p) {
  constexpr int BQ = kRows;
  extern __shared__ __align__(128) unsigned char smRaw[];
  T *sQ = reinterpret_cast<T *>(smRaw);                   // [BQ][D]
  T *sO = sQ + BQ * D;                                    // [BQ][D] (dout)
  T *sK = sO + BQ * D;                                    // [2][BK][D]
  T *sV = sK + 2 * BK * D;                                // [2][BK][D]
  float *sDD = reinterpret_cast<float *>(sV + 2 * BK * D); // [BQ]

  const QueryBlock blk(p, BQ);
  const int bh = blk.bh, b = blk.b, h = blk.h, q0 = blk.q0;
  const T *k = blk.k(p), *v = blk.v(p);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int qw = q0 + warp * 16;

  loadCoreTile<BQ, D>(sQ, p.q + b * p.qs.batch + h * p.qs.head, p.qs.row, q0, p.tq);
  loadCoreTile<BQ, D>(sO, p.dout + b * p.dos.batch + h * p.dos.head, p.dos.row, q0, p.tq);
  cpAsyncCommit();
  float lse2[1][2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    int row = qw + g + r * 8;
    lse2[0][r] = row < p.tq ? p.lseIn[static_cast<int64_t>(bh) * p.tq + row] * kLog2e : 0.0f;
  }
  RowsumDoutOut<D, BQ, T> rowsum; // D = rowsum(dout * out); out read now
  rowsum.load(p, b, h, q0);
  tilesLanded();
  rowsum.store(p, bh, q0, sDD, [&](int r, int c) { return sO + coreOffset<D>(r, c); });

  const int nKT = blk.keyTiles(p, BQ, BK);
  loadCoreTile<BK, D>(sK, k, p.ks.row, 0, p.tk);
  loadCoreTile<BK, D>(sV, v, p.vs.row, 0, p.tk);
  cpAsyncCommit();
  __syncthreads(); // sDD written
  float dd[1][2];
#pragma unroll
  for (int r = 0; r < 2; ++r)
    dd[0][r] = sDD[warp * 16 + g + r * 8];

  float dq[D / 8][4];
  zero(dq);
  for (int kt = 0; kt < nKT; ++kt) {
    const int buf = kt & 1;
    tilesLanded();
    if (kt + 1 < nKT) {
      loadCoreTile<BK, D>(sK + (buf ^ 1) * BK * D, k, p.ks.row, (kt + 1) * BK, p.tk);
      loadCoreTile<BK, D>(sV + (buf ^ 1) * BK * D, v, p.vs.row, (kt + 1) * BK, p.tk);
    }
    cpAsyncCommit();
    const T *kT = sK + buf * BK * D, *vT = sV + buf * BK * D;
    const int k0 = kt * BK;
    float s[1][BK / 8][4], dp[1][BK / 8][4];
    zero(s[0]);
    zero(dp[0]);
    fenceRegs(s[0]);
    fenceRegs(dp[0]);
    wgFence();
    gemmSS<D, BK>(s[0], sQ, kT);  // S = Q K^T
    gemmSS<D, BK>(dp[0], sO, vT); // dP = dO V^T
    wgCommit();
    wgWaitAll();
    fenceRegs(s[0]);
    fenceRegs(dp[0]);
    // P (0 past tk and where key > query), then dS; only edge tiles of a
    // warp need the mask.
    const bool mask = k0 + BK > p.tk || (p.causal && k0 + BK - 1 > qw);
    maskAndExp<1, BK, false>(s, lse2, p, mask, qw, k0, g, t);
    dsFromP<1, BK, false>(dp, s, dd);
    uint32_t da[BK / 16][4];
    toA<BK, T>(da, dp[0]);
    fenceRegs(da);
    fenceRegs(dq);
    wgFence();
    gemmRS<BK, D>(dq, da, kT); // dQ += dS K
    wgCommit();
    wgWaitAll();
    fenceRegs(dq);
  }
  cpAsyncWaitAll();
  float amax = 0.0f;
  storeRows<D>(p.dq + b * p.dqs.batch + h * p.dqs.head, p.dqs.row, qw + g, p.tq, dq, p.scale,
               p.scale, Amax ? &amax : nullptr);
  if constexpr (Amax)
    blockAmax<T>(gradAmax(p, kAmaxOfDq), amax);
}

/// Shared bytes of the dK/dV kernel: sK, sV [64][D], sQ, sO [2][BQ][D],
/// sL, sD [2][BQ] floats.
template <int D, int BQ> constexpr int wgDkDvSmemBytes() {
  return (2 * kRows + 4 * BQ) * D * 2 + 4 * BQ * 4;
}

/// Grid: ceil(tk / 64) * batch * kvHeads blocks, the first key blocks (the
/// most work when causal) first. The block's 64 keys loop over the group's
/// query heads and BQ-query tiles (double buffered with their lse and D):
/// S^T = K Q^T and dP^T = V dO^T, P^T and dS^T, dV += P^T dO, dK += dS^T Q.
template <class T, int D, int BQ, bool Amax>
__global__ void __launch_bounds__(kThreads) wgDkDvKernel(FastParams<T> p) {
  constexpr int BK = kRows;
  extern __shared__ __align__(128) unsigned char smRaw[];
  T *sK = reinterpret_cast<T *>(smRaw);                   // [BK][D]
  T *sV = sK + BK * D;                                    // [BK][D]
  T *sQ = sV + BK * D;                                    // [2][BQ][D]
  T *sO = sQ + 2 * BQ * D;                                // [2][BQ][D] (dout)
  float *sL = reinterpret_cast<float *>(sO + 2 * BQ * D); // [2][BQ]
  float *sD = sL + 2 * BQ;                                // [2][BQ]

  const KeyBlock blk(p);
  const int b = blk.b, kvh = blk.kvh, kb = blk.kb;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int k0 = kb * BK, kw = k0 + warp * 16;
  const int nQT = (p.tq + BQ - 1) / BQ, qtStart = p.causal ? min(k0 / BQ, nQT) : 0;
  const int perHead = nQT - qtStart, nIt = p.group * perHead;

  loadCoreTile<BK, D>(sK, p.k + b * p.ks.batch + kvh * p.ks.head, p.ks.row, k0, p.tk);
  loadCoreTile<BK, D>(sV, p.v + b * p.vs.batch + kvh * p.vs.head, p.vs.row, k0, p.tk);
  auto issue = [&](int it, int buf) {
    int h = kvh * p.group + it / perHead, q0 = (qtStart + it % perHead) * BQ;
    loadCoreTile<BQ, D>(sQ + buf * BQ * D, p.q + b * p.qs.batch + h * p.qs.head, p.qs.row, q0,
                        p.tq);
    loadCoreTile<BQ, D>(sO + buf * BQ * D, p.dout + b * p.dos.batch + h * p.dos.head, p.dos.row,
                        q0, p.tq);
    int64_t bh = static_cast<int64_t>(b) * p.heads + h;
    loadVec<BQ>(sL + buf * BQ, p.lseIn + bh * p.tq, q0, p.tq);
    loadVec<BQ>(sD + buf * BQ, p.dd + bh * p.tq, q0, p.tq);
  };
  if (nIt > 0)
    issue(0, 0);
  cpAsyncCommit();

  float dk[D / 8][4], dv[D / 8][4];
  zero(dk);
  zero(dv);
  for (int it = 0; it < nIt; ++it) {
    const int buf = it & 1;
    tilesLanded();
    if (it + 1 < nIt)
      issue(it + 1, buf ^ 1);
    cpAsyncCommit();
    const int q0 = (qtStart + it % perHead) * BQ;
    if (p.causal && k0 > q0 + BQ - 1)
      continue; // every key of the block is right of every query of the tile
    const T *qT = sQ + buf * BQ * D, *oT = sO + buf * BQ * D;
    const float *lseT = sL + buf * BQ, *ddT = sD + buf * BQ;
    float l2[BQ / 8][2], dd[BQ / 8][2]; // lse * log2(e) and D of this thread's columns
#pragma unroll
    for (int j = 0; j < BQ / 8; ++j) {
      int c = j * 8 + 2 * t;
      float2 lv = *reinterpret_cast<const float2 *>(lseT + c);
      float2 dvv = *reinterpret_cast<const float2 *>(ddT + c);
      l2[j][0] = lv.x * kLog2e, l2[j][1] = lv.y * kLog2e;
      dd[j][0] = dvv.x, dd[j][1] = dvv.y;
    }
    float s[1][BQ / 8][4], dp[1][BQ / 8][4]; // S^T, dP^T: the block's keys x the tile's queries
    zero(s[0]);
    zero(dp[0]);
    fenceRegs(s[0]);
    fenceRegs(dp[0]);
    wgFence();
    gemmSS<D, BQ>(s[0], sK, qT);  // S^T = K Q^T
    gemmSS<D, BQ>(dp[0], sV, oT); // dP^T = V dO^T
    wgCommit();
    wgWaitAll();
    fenceRegs(s[0]);
    fenceRegs(dp[0]);
    // P^T (0 past tq and where key > query), then dS^T; only edge tiles of
    // a warp need the mask.
    const bool mask = q0 + BQ > p.tq || (p.causal && q0 < kw + 15);
    maskAndExp<1, BQ, true>(s, l2, p, mask, kw, q0, g, t);
    dsFromP<1, BQ, true>(dp, s, dd);
    uint32_t pa[BQ / 16][4], da[BQ / 16][4];
    toA<BQ, T>(pa, s[0]);
    toA<BQ, T>(da, dp[0]);
    fenceRegs(pa);
    fenceRegs(da);
    fenceRegs(dv);
    fenceRegs(dk);
    wgFence();
    gemmRS<BQ, D>(dv, pa, oT); // dV += P^T dO
    gemmRS<BQ, D>(dk, da, qT); // dK += dS^T Q
    wgCommit();
    wgWaitAll();
    fenceRegs(dv);
    fenceRegs(dk);
  }
  cpAsyncWaitAll();
  float amax = 0.0f;
  const bool amaxK = Amax && gradAmax(p, kAmaxOfDk), amaxV = Amax && gradAmax(p, kAmaxOfDv);
  storeRows<D>(p.dk + b * p.dks.batch + kvh * p.dks.head, p.dks.row, kw + g, p.tk, dk, p.scale,
               p.scale, amaxK ? &amax : nullptr);
  storeRows<D>(p.dv + b * p.dvs.batch + kvh * p.dvs.head, p.dvs.row, kw + g, p.tk, dv, 1.0f, 1.0f,
               amaxV ? &amax : nullptr);
  if constexpr (Amax)
    blockAmax<T>(gradAmax(p, kAmaxOfDk | kAmaxOfDv), amax);
}

//===----------------------------------------------------------------------===//
// Launchers
//===----------------------------------------------------------------------===//

/// Tiles: the forward streams 128-key tiles at d = 64 (S and O fill 96
/// registers, three blocks of 72 KiB per SM) and 64-key tiles at d = 128;
/// the dQ kernel 64-key tiles; dK/dV 64-query tiles at d = 64 and 32-query
/// tiles at d = 128, whose dK and dV accumulators take 128 registers.
template <int D> struct WgTiles {
  static constexpr int kFwdBK = D == 64 ? 128 : 64, kDqBK = 64, kDkDvBQ = D == 64 ? 64 : 32;
};

template <int D, class T> Status wgForward(const FastParams<T> &p, cudaStream_t stream) {
  constexpr int BK = WgTiles<D>::kFwdBK;
  int64_t blocks = ceilDiv(p.tq, kRows) * p.batch * p.heads;
  auto kernel = p.amax ? wgFwdKernel<T, D, BK, true> : wgFwdKernel<T, D, BK, false>;
  return launchFast(kernel, "attention_forward_wgmma", blocks, wgFwdSmemBytes<D, BK>(), p, stream);
}

/// dQ (and D) first: the dK/dV kernel reads D from scratch.
template <int D, class T> Status wgBackward(const FastParams<T> &p, cudaStream_t stream) {
  constexpr int BK = WgTiles<D>::kDqBK, BQ = WgTiles<D>::kDkDvBQ;
  auto dq = gradAmax(p, kAmaxOfDq) ? wgDqKernel<T, D, BK, true> : wgDqKernel<T, D, BK, false>;
  TC_RETURN_IF_ERROR(launchFast(dq, "attention_backward_dq_wgmma",
                                ceilDiv(p.tq, kRows) * p.batch * p.heads, wgDqSmemBytes<D, BK>(),
                                p, stream));
  auto dkdv = gradAmax(p, kAmaxOfDk | kAmaxOfDv) ? wgDkDvKernel<T, D, BQ, true>
                                                 : wgDkDvKernel<T, D, BQ, false>;
  return launchFast(dkdv, "attention_backward_dkdv_wgmma",
                    ceilDiv(p.tk, kRows) * p.batch * p.kvHeads, wgDkDvSmemBytes<D, BQ>(), p,
                    stream);
}

} // namespace


template <class T> Status wgmmaForward(const FastParams<T> &p, int64_t d, cudaStream_t stream) {
  if (d == 64)
    return wgForward<64>(p, stream);
  if (d == 128)
    return wgForward<128>(p, stream);
  return invalidArgument("attention (wgmma): head dim " + std::to_string(d) +
                         " is not 64 or 128");
}

template <class T> Status wgmmaBackward(const FastParams<T> &p, int64_t d, cudaStream_t stream) {
  if (d == 64)
    return wgBackward<64>(p, stream);
  if (d == 128)
    return wgBackward<128>(p, stream);
  return invalidArgument("attention (wgmma): head dim " + std::to_string(d) +
                         " is not 64 or 128");
}

template Status wgmmaForward(const FastParams<bf16> &, int64_t, cudaStream_t);
template Status wgmmaForward(const FastParams<f16> &, int64_t, cudaStream_t);
template Status wgmmaBackward(const FastParams<bf16> &, int64_t, cudaStream_t);
template Status wgmmaBackward(const FastParams<f16> &, int64_t, cudaStream_t);

} // namespace tc::rt::cuda::attn

namespace tc::rt::cuda {

bool wgmmaAttentionAvailable() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
    return false;
  return major == 9 && minor == 0;
}

} // namespace tc::rt::cuda
