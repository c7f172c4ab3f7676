//===- block_scale_layout.h - cuBLASLt's 1D block-scale layout --*- C++ -*-===//
//
// Where cuBLASLt's block-scaled GEMMs read the scale of each block of an
// operand stored with K contiguous (A or B of the TN form, [outer, K]): the
// VEC32_UE8M0 scales of MXFP8 (one E8M0 byte per 1x32 block along K) and the
// VEC16_UE4M3 scales of NVFP4 (one E4M3 byte per 1x16 block) share it. The
// scale matrix [outer, kBlocks] (kBlocks = ceil(K / block)) is stored in
// tiles of 128 rows x 4 scale columns, each tile 512 contiguous bytes, the
// tiles of one 128-row band one after another along K; rows are padded to
// 128 and scale columns to 4. cuBLAS documentation, "1D Block Scaling
// Factors Layout" (cuBLAS 12.8+), the offset of scale (r, c):
//
//   offset = (r / 128) * (roundup(kBlocks, 4) / 4) * 512 + (c / 4) * 512
//          + (r % 32) * 16 + ((r % 128) / 32) * 4 + (c % 4)
//
// i.e. inside a tile, row r sits in the 16-byte line r % 32, at the 4-byte
// group (r % 128) / 32, and the 4 scales of its columns are contiguous.
// (The same layout is TensorRT-LLM's get_sf_out_offset_128x4 and CUTLASS's
// Sm1xxBlockScaledConfig.) The padding must read as a harmless scale: tc's
// quantize kernels zero it (E8M0 0 is 2^-127, E4M3 0 is 0; both multiply
// only the zero padding of the operand, which cuBLASLt does not read past
// M / N / K).
//
// Shared by the host (the compiler's buffer sizes, the tests) and the CUDA
// kernels that write the scales; no dependencies.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_SCHEMA_BLOCK_SCALE_LAYOUT_H
#define TC_RUNTIME_SCHEMA_BLOCK_SCALE_LAYOUT_H

#include <cstdint>

#if defined(__CUDACC__)
#define TC_BSL_HD __host__ __device__
#else
#define TC_BSL_HD
#endif

namespace tc::rt {

/// Rows and scale columns of one tile of the layout.
inline constexpr int64_t kBlockScaleTileRows = 128, kBlockScaleTileCols = 4;

/// Bytes of the layout of a scale matrix [outer, kBlocks] (one byte per
/// scale): roundup(outer, 128) * roundup(kBlocks, 4).
TC_BSL_HD inline int64_t blockScaleLayoutBytes(int64_t outer, int64_t kBlocks) {
  return (outer + 127) / 128 * 128 * ((kBlocks + 3) / 4 * 4);
}

/// The byte offset of scale (r, c) of a scale matrix with kBlocks columns
/// (the formula of the file comment).
TC_BSL_HD inline int64_t blockScaleOffset(int64_t r, int64_t c, int64_t kBlocks) {
  int64_t kTiles = (kBlocks + 3) / 4;
  return (r / 128) * kTiles * 512 + (c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}

} // namespace tc::rt

#undef TC_BSL_HD

#endif // TC_RUNTIME_SCHEMA_BLOCK_SCALE_LAYOUT_H
