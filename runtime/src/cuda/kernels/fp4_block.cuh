//===- fp4_block.cuh - one NVFP4 / MXFP4 block of tc.fake_quantize, for every kernel that writes one -===//
//
// fake_quantize.cu writes a block dequantised (y = deq(quant(x))),
// fp4_pack.cu writes it packed for a block-scaled GEMM (E2M1 nibbles, the
// block's scale byte): both quantize a block with this one function, so
// their values are the same bits (and the CPU reference's: both call
// runtime/src/base/fp4_math.h). x is viewed as [rows, len] with rows =
// outer * inner, element (i, j) at (i / inner * len + j) * inner + i %
// inner, the blocks along len: 1x16 / 1x32, or 16x16 (rank-2 weights).
// With stochastic rounding element k (its index in x) draws init_rng.h's
// uniform01(seed, mix64(stream + step * kGamma), k), the step read on the
// device.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_CUDA_KERNELS_FP4_BLOCK_CUH
#define TC_RUNTIME_CUDA_KERNELS_FP4_BLOCK_CUH

#include <cuda_fp8.h>

#include "runtime/src/base/fp4_math.h"
#include "runtime/src/base/init_rng.h"
#include "runtime/src/cuda/kernels/common.cuh"

namespace tc::rt::cuda::kern {

/// x's [rows, len] view and its grid of blocks.
struct Fp4View {
  int64_t rows, len, inner; // rows = outer * inner of the [rows, len] view
  int64_t gridRows, gridCols;
  int blockRows, blockCols;
  bool rowsFastest; // consecutive threads on consecutive rows (inner > 1: coalesced)
};

/// The view of x [outer, len, inner] in `nv` (1x16, 16x16 with blocks2d)
/// or mx (1x32) blocks.
inline Fp4View fp4View(int64_t outer, int64_t len, int64_t inner, bool nv, bool blocks2d) {
  Fp4View v;
  v.rows = outer * inner;
  v.len = len;
  v.inner = inner;
  v.blockRows = blocks2d ? 16 : 1;
  v.blockCols = nv ? 16 : 32;
  v.gridRows = ceilDiv(v.rows, v.blockRows);
  v.gridCols = ceilDiv(len, v.blockCols);
  v.rowsFastest = inner > 1;
  return v;
}

/// NVFP4's E4M3 rounding of a block's decode scale (saturating, as the
/// CPU's saturatingRound), as its byte.
__device__ __forceinline__ uint8_t e4m3Byte(float s) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(s, __NV_SATFINITE, __NV_E4M3));
}
__device__ __forceinline__ float e4m3Float(uint8_t b) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(b, __NV_E4M3)));
}

/// The scales of one block: nvfp4's E4M3 block scale (and its byte) and
/// the tensor's decode scale, or mxfp4's E8M0 scale 2^x (NaN when the
/// block's amax is not finite).
struct Fp4BlockScales {
  float blockScale = 0.f, dec = 1.f;
  uint8_t blockScaleByte = 0;
  double scaleInv = 1.0;
};

/// Quantizes block `b` of the grid (row-block fastest when v.rowsFastest):
/// sink.block(rb, cb, i0, i1, j0, j1, scales) once, then sink.element(i,
/// j, k, q) for each element in row-major order of the block, q its E2M1
/// value (nearest even, or stochastic when `Stochastic`).
template <class T, bool Nv, bool Stochastic, class Sink>
__device__ __forceinline__ void fp4QuantizeBlock(const T *x, const float *amax, const Fp4View &v,
                                                 int64_t b, uint64_t seed, uint64_t stream,
                                                 const float *step, Sink &sink) {
  int64_t rb = v.rowsFastest ? b % v.gridRows : b / v.gridCols;
  int64_t cb = v.rowsFastest ? b / v.gridRows : b % v.gridCols;
  int64_t i0 = rb * v.blockRows, i1 = min(i0 + v.blockRows, v.rows);
  int64_t j0 = cb * v.blockCols, j1 = min(j0 + v.blockCols, v.len);
  auto at = [&](int64_t i, int64_t j) {
    return (i / v.inner * v.len + j) * v.inner + i % v.inner;
  };
  float blockAmax = 0.f;
  for (int64_t i = i0; i < i1; ++i)
    for (int64_t j = j0; j < j1; ++j)
      blockAmax = fmaxf(blockAmax, fabsf(toF(x[at(i, j)])));
  uint64_t key = 0;
  if (Stochastic)
    key = initrng::mix64(stream + static_cast<uint64_t>(*step) * initrng::kGamma);
  Fp4BlockScales s;
  float encode = 0.f;
  if (Nv) {
    float enc = fp4::nvfp4TensorEncode(amax[0]);
    s.dec = 1.0f / enc;
    s.blockScaleByte = e4m3Byte(fp4::nvfp4BlockScaleUnrounded(blockAmax, enc));
    s.blockScale = e4m3Float(s.blockScaleByte);
    encode = fp4::nvfp4ElementEncode(s.blockScale, s.dec);
  } else {
    s.scaleInv = fp4::mxScaleInv(blockAmax, fp4::kE2M1Emax);
  }
  sink.block(rb, cb, i0, i1, j0, j1, s);
  for (int64_t i = i0; i < i1; ++i)
    for (int64_t j = j0; j < j1; ++j) {
      int64_t k = at(i, j);
      double u = Stochastic ? initrng::uniform01(seed, key, static_cast<uint64_t>(k)) : -1.0;
      float xv = toF(x[k]);
      sink.element(i, j, k, Nv ? fp4::roundE2M1(xv * encode, u) : fp4::roundE2M1(xv / s.scaleInv, u));
    }
}

} // namespace tc::rt::cuda::kern

#endif // TC_RUNTIME_CUDA_KERNELS_FP4_BLOCK_CUH
