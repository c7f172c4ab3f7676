//===- fp4_mma_layout.h - E2M1 packing and sm_120a block-scaled MMA fragments -*- C++ -*-===//
//
// What tc's FP4 GEMM path (runtime/src/cuda/kernels/fp4_pack.cu,
// fp4_gemm.cu) and its CPU tests share, written once for host and device:
//
// - E2M1 codes: a nibble s eee m as ONNX's FLOAT4E2M1, ml_dtypes'
//   float4_e2m1fn and cuBLASLt's CUDA_R_4F_E2M1 store it (sign in bit 3,
//   magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6), two per byte with element 0
//   in the low nibble.
// - E4M3 / E8M0 scale bytes (NVFP4's and MXFP4's block scales).
// - The operand, accumulator and scale fragments of PTX's
//   `mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X
//   .f32.e2m1.e2m1.f32.ue8m0` (PTX ISA, "Matrix Fragments for
//   mma.m16n8k64" and "Block Scaling for mma.sync"), as functions of the
//   lane and the element index, so that the kernel's loads and the CPU test
//   against the ISA's tables read the same code. With groupID = lane >> 2
//   and threadID_in_group = lane % 4 the ISA gives:
//     A (16 x 64, four .b32 of eight e2m1 each, a0..a31):
//       row = groupID for ai with i < 8 or 16 <= i < 24, groupID + 8 otherwise;
//       col = threadID_in_group * 8 + (i & 7) (+ 32 for i >= 16);
//     B (64 x 8, two .b32, b0..b15):
//       row = threadID_in_group * 8 + (i & 7) (+ 32 for i >= 8); col = groupID;
//     C / D (16 x 8, four f32): row = groupID (+ 8 for i >= 2),
//       col = threadID_in_group * 2 + (i & 1).
//   scale_A is 16 x 2 and scale_B 2 x 8 with scale_vec::2X (one scale per 32
//   K elements). thread-id-a picks the thread pair of each quad that
//   supplies SF_A (0: lanes with lane % 4 in {0, 1}, 1: {2, 3}); of the pair
//   the first supplies row groupID, the second row groupID + 8 (the ISA's
//   Figure 43). thread-id-b picks the one lane of each quad (lane % 4 ==
//   thread-id-b) that supplies SF_B of column groupID. byte-id (0 or 2) picks
//   the byte pair of the 32-bit scale data: byte byte-id + j scales the K
//   elements [32 j, 32 j + 32) (Figure 45). With kind::mxf4nvf4
//   scale_vec::4X (NVFP4: E4M3 scales of 16 K elements) all 4 bytes are
//   used, byte j for [16 j, 16 j + 16), byte-id 0.
//
// No dependencies: <cmath> only.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_BASE_FP4_MMA_LAYOUT_H
#define TC_RUNTIME_BASE_FP4_MMA_LAYOUT_H

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define TC_FP4L_HD __host__ __device__
#else
#define TC_FP4L_HD
#endif

namespace tc::rt::fp4 {

/// The E2M1 code of `q`, a value of E2M1's grid (roundE2M1's result; -0
/// keeps its sign).
TC_FP4L_HD inline uint8_t e2m1Code(double q) {
  double a = fabs(q);
  int m = a < 2.0 ? static_cast<int>(a * 2.0) : a < 4.0 ? static_cast<int>(a) + 2 : a < 6.0 ? 6 : 7;
  return static_cast<uint8_t>((copysign(1.0, q) < 0 ? 8 : 0) | m);
}

/// The value of an E2M1 code (its low 4 bits).
TC_FP4L_HD inline double e2m1Value(uint8_t code) {
  const double mag[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  double v = mag[code & 7];
  return code & 8 ? -v : v;
}

/// The value of an E8M0 scale byte: 2^(b - 127), NaN for 0xff.
TC_FP4L_HD inline double e8m0Value(uint8_t b) {
  return b == 0xff ? static_cast<double>(NAN) : ldexp(1.0, static_cast<int>(b) - 127);
}

/// The E8M0 byte of an MX scale (a power of two in [2^-127, 2^127], or NaN).
TC_FP4L_HD inline uint8_t e8m0Code(double scale) {
  if (scale != scale)
    return 0xff;
  int e;
  frexp(scale, &e); // scale = 0.5 * 2^e
  return static_cast<uint8_t>(e - 1 + 127);
}

/// The value of an E4M3 (OCP, "fn": no infinities, 0x7f / 0xff NaN) byte.
TC_FP4L_HD inline double e4m3Value(uint8_t b) {
  int e = (b >> 3) & 15, m = b & 7;
  double v = (b & 0x7f) == 0x7f ? static_cast<double>(NAN)
             : e == 0           ? ldexp(m / 8.0, -6)
                                : ldexp(1.0 + m / 8.0, e - 7);
  return b & 0x80 ? -v : v;
}

/// A (row, column) position inside one MMA's tile.
struct MmaPos {
  int row, col;
};

/// The m16n8k64 shape of the block-scaled FP4 MMA and its scale block.
constexpr int kMmaM = 16, kMmaN = 8, kMmaK = 64, kMxBlock = 32;

/// Element a_i (i in [0, 32): register i / 8, nibble i % 8) of `lane`'s A
/// fragment: its (row, k) in the 16 x 64 A tile.
TC_FP4L_HD inline MmaPos mmaAPos(int lane, int i) {
  int g = lane >> 2, t = lane & 3;
  bool low = i < 8 || (i >= 16 && i < 24);
  return {low ? g : g + 8, t * 8 + (i & 7) + (i >= 16 ? 32 : 0)};
}

/// Element b_i (i in [0, 16)) of `lane`'s B fragment: its (k, n) in the 64
/// x 8 B tile.
TC_FP4L_HD inline MmaPos mmaBPos(int lane, int i) {
  return {(lane & 3) * 8 + (i & 7) + (i >= 8 ? 32 : 0), lane >> 2};
}

/// Element c_i (i in [0, 4)) of `lane`'s accumulator: its (row, n).
TC_FP4L_HD inline MmaPos mmaCPos(int lane, int i) {
  return {(lane >> 2) + (i >= 2 ? 8 : 0), (lane & 3) * 2 + (i & 1)};
}

/// The row of scale_A whose scales `lane`'s scale-a-data supplies with
/// thread-id-a `threadId` (0 or 1), or -1 when the lane supplies none.
TC_FP4L_HD inline int mmaScaleARow(int lane, int threadId) {
  int t = lane & 3;
  return (t >> 1) == threadId ? (lane >> 2) + 8 * (t & 1) : -1;
}

/// The column of scale_B whose scales `lane`'s scale-b-data supplies with
/// thread-id-b `threadId` (0 to 3), or -1.
TC_FP4L_HD inline int mmaScaleBCol(int lane, int threadId) {
  return (lane & 3) == threadId ? lane >> 2 : -1;
}

/// The byte of the 32-bit scale data that scales K chunk `chunk`:
/// scale_vec::2X (E8M0, 32 K each: chunk 0 or 1) with byte-id `byteId` (0
/// or 2); scale_vec::4X (NVFP4's E4M3, 16 K each: chunk 0 to 3) with byte-id 0.
TC_FP4L_HD inline int mmaScaleByte(int byteId, int chunk) { return byteId + chunk; }

} // namespace tc::rt::fp4

#undef TC_FP4L_HD

#endif // TC_RUNTIME_BASE_FP4_MMA_LAYOUT_H
