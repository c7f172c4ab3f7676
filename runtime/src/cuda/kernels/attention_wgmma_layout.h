//===- attention_wgmma_layout.h - the wgmma kernels' shared-memory layout -===//
//
// Internal to runtime/src/cuda/kernels (attention_wgmma.cu), plain C++ so
// that a host test checks it against the canonical layouts: where element
// (r, c) of a [*][D] operand tile lies (8x8 "core matrices" of 128
// contiguous bytes, rows 16 bytes apart, block (r / 8, c / 8) at index
// (r / 8) (D / 8) + c / 8, no swizzle), and the byte offset, leading byte
// offset (between core matrices along K) and stride byte offset (between
// core matrices along M or N) of the shared-memory matrix descriptor that
// hands a piece of such a tile to one wgmma (m64nNk16, 16-bit elements).
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_CUDA_KERNELS_ATTENTION_WGMMA_LAYOUT_H
#define TC_RUNTIME_CUDA_KERNELS_ATTENTION_WGMMA_LAYOUT_H

#include <cstdint>

#if defined(__CUDACC__)
#define TC_WG_HD __host__ __device__ __forceinline__
#else
#define TC_WG_HD inline
#endif

namespace tc::rt::cuda::attn {

/// Element offset of (r, c) in a core-matrix [*][D] tile.
template <int D> TC_WG_HD constexpr int coreOffset(int r, int c) {
  return ((r >> 3) * (D / 8) + (c >> 3)) * 64 + (r & 7) * 8 + (c & 7);
}

/// The (row, column) of the 16-byte chunk `ch` of a core tile in storage
/// order (coreOffset<D>(row, column) == 8 ch): a block of 8 rows, then the
/// next block along the columns, then along the rows.
template <int D> TC_WG_HD constexpr void coreChunk(int ch, int &row, int &col) {
  const int blk = ch >> 3;
  row = (blk / (D / 8)) * 8 + (ch & 7);
  col = (blk % (D / 8)) * 8;
}

/// A descriptor's fields for a tile of 16-bit elements: the operand's first
/// element at byte `start` of the tile, `lbo` / `sbo` bytes between core
/// matrices along K / along M or N.
struct WgDescFields {
  uint32_t start, lbo, sbo;
};

/// Rows [r0, r0 + 64 or N) of a core tile [*][D] as a K-major operand (A,
/// or B stored [n][k]), its columns [16 kk, 16 kk + 16) the k-step: K
/// neighbours 128 bytes apart, M/N neighbours a row of blocks (16 D bytes).
template <int D> TC_WG_HD constexpr WgDescFields kMajorFields(int r0, int kk) {
  return {static_cast<uint32_t>(coreOffset<D>(r0, 16 * kk) * 2), 128u, 16u * D};
}
/// Rows [16 kk, 16 kk + 16) of a core tile [*][D] as the K rows of an
/// MN-major B operand (stored [k][n], transposed in the instruction) whose
/// N is the tile's D columns: K neighbours a row of blocks apart, N
/// neighbours 128 bytes apart.
template <int D> TC_WG_HD constexpr WgDescFields mnMajorFields(int kk) {
  return {static_cast<uint32_t>(coreOffset<D>(16 * kk, 0) * 2), 16u * D, 128u};
}

} // namespace tc::rt::cuda::attn

#undef TC_WG_HD

#endif // TC_RUNTIME_CUDA_KERNELS_ATTENTION_WGMMA_LAYOUT_H
