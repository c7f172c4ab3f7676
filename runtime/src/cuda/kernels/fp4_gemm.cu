//===- fp4_gemm.cu - tc's block-scaled FP4 GEMMs for sm_120a (mma.sync) -----===//
//
// d [m, n] (bf16) = alpha * (a . sa) [m, k] (b . sb) [n, k]^T with fp32
// accumulation: a, b quantize_fp4's packed E2M1 rows (fp4_pack.cu, K
// contiguous: the TN form), sa, sb their E8M0 1x32 block scales in
// cuBLASLt's 128x4 layout (block_scale_layout.h), alpha f32 [1] on the
// device. cuBLASLt 13.1 has no MXFP4 kernel; this is tc's own, on sm_120a's
// block-scaled tensor cores:
//   mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X
//       .f32.e2m1.e2m1.f32.ue8m0
// (SASS OMMA.SF.16864.F32.E2M1.E2M1.E8; test/codegen/cuobjdump-fp4-mma.test),
// and for NVFP4 operands (E4M3 1x16 scales, the tensor scales' product as
// alpha; for layouts cuBLASLt's NVFP4 GEMM lacks -- tc lowers its NVFP4
// products to cuBLASLt) kind::mxf4nvf4.block_scale.scale_vec::4X ... .ue4m3.
// Correct before fast: each warp owns one 16 x 8 tile of d and walks K in
// steps of 128, its fragments loaded straight from global memory as the PTX
// ISA lays them out (runtime/src/base/fp4_mma_layout.h: one 32-bit load per
// register, 8 consecutive K elements), one 32-bit scale load per row /
// column per step (4 consecutive E8M0 scales: 128 K elements) whose byte
// pairs the two MMAs of the step select with byte-id 0 and 2.
//
// The tile loop is a template over the MMA step, so that it can be tested
// where sm_120a is not: Sm120Mma issues the instruction (compiled into the
// sm_120a part of the fatbin only; on other targets the launcher refuses),
// EmulatedMma computes the same step from the same registers on any GPU
// (each lane's codes and scales decoded through the fragment functions into
// shared memory, then fp32 FMAs in K order: its sums are in another order
// than the tensor cores', so it matches a CPU GEMM within fp32 rounding,
// not bit for bit). test/cuda/fp4_sm120_test.cpp runs the emulation on the
// H200; the sm_120a instantiation is compiled and disassembled here, never
// run.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/base/fp4_mma_layout.h"
#include "runtime/src/cuda/kernels/common.cuh"
#include "runtime/src/cuda/kernels/kernels.h"
#include "runtime/src/schema/block_scale_layout.h"
#include "runtime/src/schema/library_abi.h"

namespace tc::rt::cuda {
namespace {

using namespace kern;

constexpr int kWarps = 4; // a block: 16 rows x (4 x 8) columns of d

/// One MMA's operands as the PTX ISA distributes them over a warp.
struct MmaFragments {
  uint32_t a[4], b[2];
  uint32_t scaleA, scaleB; // 4 E8M0 scales each (128 K elements)
};

/// The sm_120a instruction. byte-id selects the scales of this MMA's 64 K
/// elements from the 4 loaded; thread-id 0: lanes 0/1 of each quad supply
/// scale_A, lane 0 scale_B (the loads below give every lane its own).
struct Sm120Mma {
  template <int ByteId>
  __device__ __forceinline__ static void mma(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2], uint32_t sa, uint32_t sb) {
#if defined(__CUDA_ARCH_FEAT_SM120_ALL)
    asm volatile("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X"
                 ".f32.e2m1.e2m1.f32.ue8m0 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3}, %10, {%11, %12}, %13, {%14, %15};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(sa),
                   "n"(ByteId), "n"(0), "r"(sb), "n"(ByteId), "n"(0));
#else
    __trap(); // unreachable: the launcher runs this on sm_120a only
#endif
  }
  /// NVFP4: kind::mxf4nvf4 with 4 E4M3 scales per row / column (1x16
  /// blocks): all 4 bytes of the data, byte-id 0.
  __device__ __forceinline__ static void mmaNv(float (&d)[4], const uint32_t (&a)[4],
                                               const uint32_t (&b)[2], uint32_t sa, uint32_t sb) {
#if defined(__CUDA_ARCH_FEAT_SM120_ALL)
    asm volatile("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X"
                 ".f32.e2m1.e2m1.f32.ue4m3 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3}, %10, {%11, %12}, %13, {%14, %15};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(sa),
                   "n"(0), "n"(0), "r"(sb), "n"(0), "n"(0));
#else
    __trap();
#endif
  }
};

/// The same step computed by any GPU: every lane decodes its fragments per
/// fp4_mma_layout.h into the warp's tile of shared memory (the scales from
/// the lanes the selectors name), then computes its 4 accumulators. One
/// function for every byte-id and both scale kinds (nv: 4 E4M3 scales of
/// 16 K elements, else 2 E8M0 of 32), so that its shared tiles exist once.
__device__ __noinline__ void emulatedMmaStep(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2], uint32_t sa, uint32_t sb,
                                             int byteId, bool nv) {
  __shared__ float tileA[kWarps][fp4::kMmaM][fp4::kMmaK];
  __shared__ float tileB[kWarps][fp4::kMmaK][fp4::kMmaN];
  __shared__ float scA[kWarps][fp4::kMmaM][4], scB[kWarps][fp4::kMmaN][4];
  int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  int chunks = nv ? 4 : 2, chunkK = fp4::kMmaK / chunks;
  auto scaleOf = [&](uint32_t data, int chunk) {
    auto byte = static_cast<uint8_t>(data >> (8 * fp4::mmaScaleByte(byteId, chunk)));
    return static_cast<float>(nv ? fp4::e4m3Value(byte) : fp4::e8m0Value(byte));
  };
  if (int r = fp4::mmaScaleARow(lane, 0); r >= 0)
    for (int c = 0; c < chunks; ++c)
      scA[w][r][c] = scaleOf(sa, c);
  if (int n = fp4::mmaScaleBCol(lane, 0); n >= 0)
    for (int c = 0; c < chunks; ++c)
      scB[w][n][c] = scaleOf(sb, c);
  __syncwarp();
  for (int i = 0; i < 32; ++i) {
    fp4::MmaPos p = fp4::mmaAPos(lane, i);
    auto code = static_cast<uint8_t>(a[i / 8] >> (4 * (i % 8)));
    tileA[w][p.row][p.col] =
        static_cast<float>(fp4::e2m1Value(code)) * scA[w][p.row][p.col / chunkK];
  }
  for (int i = 0; i < 16; ++i) {
    fp4::MmaPos p = fp4::mmaBPos(lane, i);
    auto code = static_cast<uint8_t>(b[i / 8] >> (4 * (i % 8)));
    tileB[w][p.row][p.col] =
        static_cast<float>(fp4::e2m1Value(code)) * scB[w][p.col][p.row / chunkK];
  }
  __syncwarp();
  for (int i = 0; i < 4; ++i) {
    fp4::MmaPos p = fp4::mmaCPos(lane, i);
    float acc = d[i];
    for (int k = 0; k < fp4::kMmaK; ++k)
      acc = fmaf(tileA[w][p.row][k], tileB[w][k][p.col], acc);
    d[i] = acc;
  }
  __syncwarp(); // the tiles are rewritten by the next step
}

struct EmulatedMma {
  template <int ByteId>
  __device__ __forceinline__ static void mma(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2], uint32_t sa, uint32_t sb) {
    emulatedMmaStep(d, a, b, sa, sb, ByteId, false);
  }
  __device__ __forceinline__ static void mmaNv(float (&d)[4], const uint32_t (&a)[4],
                                               const uint32_t (&b)[2], uint32_t sa, uint32_t sb) {
    emulatedMmaStep(d, a, b, sa, sb, 0, true);
  }
};

/// The 32-bit word of 8 codes at (row, k) of a packed operand [rows,
/// rowBytes] (k a multiple of 8: 4-byte aligned, rowBytes being a multiple
/// of 16); 0 outside it.
__device__ __forceinline__ uint32_t codes8(const uint8_t *p, int64_t rows, int64_t rowBytes,
                                           int64_t row, int64_t k) {
  if (row >= rows || k / 2 >= rowBytes)
    return 0;
  return *reinterpret_cast<const uint32_t *>(p + row * rowBytes + k / 2);
}

/// The 4 E8M0 scales of (row, kb .. kb + 3) (kb a multiple of 4: one
/// aligned word of the 128x4 layout); 0 past the rows.
__device__ __forceinline__ uint32_t scales4(const uint8_t *s, int64_t rows, int64_t kBlocks,
                                            int64_t row, int64_t kb) {
  if (row >= rows)
    return 0;
  return *reinterpret_cast<const uint32_t *>(s + blockScaleOffset(row, kb, kBlocks));
}

template <class Step, bool Nv>
__global__ void __launch_bounds__(kWarps * 32)
    fp4MmaGemmKernel(const uint8_t *a, const uint8_t *sa, const uint8_t *b, const uint8_t *sb,
                     const float *alpha, bf16 *d, int64_t m, int64_t n, int64_t k,
                     int64_t rowBytes) {
  // One 32-bit scale word holds 4 block scales: 128 K elements (two MMAs,
  // byte-id 0 and 2) of E8M0 1x32 blocks, 64 (one MMA) of E4M3 1x16.
  constexpr int kBlock = Nv ? 16 : fp4::kMxBlock, kWordK = 4 * kBlock;
  int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  int64_t m0 = static_cast<int64_t>(blockIdx.y) * fp4::kMmaM;
  int64_t n0 = (static_cast<int64_t>(blockIdx.x) * kWarps + w) * fp4::kMmaN;
  int64_t kBlocks = k / kBlock;
  // The scale rows this lane supplies (thread-id 0; the other lanes' loads
  // are ignored by the instruction).
  int sRow = fp4::mmaScaleARow(lane, 0), sCol = fp4::mmaScaleBCol(lane, 0);
  int64_t aScaleRow = m0 + (sRow < 0 ? 0 : sRow), bScaleRow = n0 + (sCol < 0 ? 0 : sCol);
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int64_t k0 = 0; k0 < k; k0 += kWordK) {
    uint32_t scaleA = scales4(sa, m, kBlocks, aScaleRow, k0 / kBlock);
    uint32_t scaleB = scales4(sb, n, kBlocks, bScaleRow, k0 / kBlock);
    for (int step = 0; step < kWordK / fp4::kMmaK; ++step) {
      int64_t kk = k0 + step * fp4::kMmaK;
      MmaFragments f;
      for (int r = 0; r < 4; ++r) {
        fp4::MmaPos p = fp4::mmaAPos(lane, r * 8);
        f.a[r] = codes8(a, m, rowBytes, m0 + p.row, kk + p.col);
      }
      for (int r = 0; r < 2; ++r) {
        fp4::MmaPos p = fp4::mmaBPos(lane, r * 8);
        f.b[r] = codes8(b, n, rowBytes, n0 + p.col, kk + p.row);
      }
      if constexpr (Nv)
        Step::mmaNv(acc, f.a, f.b, scaleA, scaleB);
      else if (step == 0)
        Step::template mma<0>(acc, f.a, f.b, scaleA, scaleB);
      else
        Step::template mma<2>(acc, f.a, f.b, scaleA, scaleB);
    }
  }
  float s = alpha ? *alpha : 1.f;
  for (int i = 0; i < 4; ++i) {
    fp4::MmaPos p = fp4::mmaCPos(lane, i);
    int64_t row = m0 + p.row, col = n0 + p.col;
    if (row < m && col < n)
      d[row * n + col] = __float2bfloat16_rn(acc[i] * s);
  }
}

} // namespace

Status fp4MmaGemm(const uint8_t *a, const uint8_t *aScales, const uint8_t *b,
                  const uint8_t *bScales, const float *alpha, void *d, int64_t m, int64_t n,
                  int64_t k, bool nvfp4, bool emulate, cudaStream_t stream) {
  TC_RETURN_IF_ERROR(checkEntry("fp4MmaGemm", m * n, k));
  int64_t block = nvfp4 ? 16 : fp4::kMxBlock;
  if (k % block != 0)
    return invalidArgument("fp4MmaGemm: K " + std::to_string(k) + " is not a multiple of " +
                           std::to_string(block) + (nvfp4 ? " (NVFP4's blocks)" : " (MXFP4's blocks)"));
  if (!a || !aScales || !b || !bScales || !d)
    return invalidArgument("fp4MmaGemm: null pointer");
  if (!emulate) {
    int major = 0, minor = 0;
    TC_RETURN_IF_ERROR(currentComputeCapability(&major, &minor));
    if (major != 12)
      return unimplemented("fp4MmaGemm: the block-scaled FP4 mma.sync kernel is built for "
                           "sm_120a only; this GPU is sm_" +
                           std::to_string(major * 10 + minor) + " (the sm_90 path emulates "
                           "FP4 through bf16 GEMMs)");
  }
  if (m == 0 || n == 0)
    return Status::ok();
  dim3 grid(static_cast<unsigned>(ceilDiv(n, kWarps * fp4::kMmaN)),
            static_cast<unsigned>(ceilDiv(m, fp4::kMmaM)));
  if (grid.y > 65535)
    return invalidArgument("fp4MmaGemm: M " + std::to_string(m) + " needs more than 65535 row tiles");
  auto *out = static_cast<bf16 *>(d);
  int64_t rowBytes = fp4PackedRowBytes(k, !nvfp4);
  auto launch = [&](auto kernel) {
    kernel<<<grid, kWarps * 32, 0, stream>>>(a, aScales, b, bScales, alpha, out, m, n, k,
                                             rowBytes);
    return checkLaunch("fp4_mma_gemm");
  };
  if (emulate)
    return nvfp4 ? launch(fp4MmaGemmKernel<EmulatedMma, true>)
                 : launch(fp4MmaGemmKernel<EmulatedMma, false>);
  return nvfp4 ? launch(fp4MmaGemmKernel<Sm120Mma, true>)
               : launch(fp4MmaGemmKernel<Sm120Mma, false>);
}

} // namespace tc::rt::cuda
