//===- fp4_pack.cu - NVFP4 / MXFP4 quantisation packed for block-scaled GEMMs -===//
//
// What a block-scaled FP4 GEMM (cuBLASLt's NVFP4 TN kernels, tc's sm_120a
// mma.sync kernel in fp4_gemm.cu) reads, from the same block arithmetic as
// tc.fake_quantize (fp4_block.cuh; so q * block scale * tensor scale
// dequantises to fake_quantize's output bit for bit):
//   q       [rows, rowBytes]: E2M1 codes, two per byte, element 0 in the low
//           nibble (ONNX's and CUDA_R_4F_E2M1's order), each row zero padded
//           to whole blocks (rowBytes = roundup(len, block) / 2,
//           rt::fp4PackedRowBytes);
//   scales  the block scales (nvfp4: E4M3 per 1x16 block, a 16x16 weight
//           block's scale repeated for its 16 rows; mxfp4: E8M0 per 1x32) of
//           the scale matrix [rows, ceil(len / block)] in cuBLASLt's 128x4
//           tile layout (runtime/src/schema/block_scale_layout.h quotes the
//           formula), the padding zero;
//   tensor  nvfp4's f32 tensor decode scale 1 / S_enc (the GEMM's alpha is
//           the product of its operands': nvfp4GemmScalars).
// x [outer, len, inner] is packed as the matrix [outer * inner, len] with
// len (the blocks' axis, the product's K) contiguous: x [M, K] along axis 1
// is itself, along axis 0 (outer 1, inner K) its transpose [K, M] -- the
// copy a TN read of the other product needs. One thread per block; a block
// is whole bytes (16 / 32 elements along len), so no two threads share one.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/base/fp4_mma_layout.h"
#include "runtime/src/cuda/kernels/fp4_block.cuh"
#include "runtime/src/cuda/kernels/kernels.h"
#include "runtime/src/schema/block_scale_layout.h"
#include "runtime/src/schema/library_abi.h"

namespace tc::rt::cuda {
namespace {

using namespace kern;

constexpr int kThreads = 128;

/// Writes a block's codes into q (a row's pair of nibbles once its odd
/// element is known; a row's last byte and its padding at len's end) and
/// its scale byte for each of its rows.
struct PackSink {
  uint8_t *q, *scales;
  float *tensor;
  int64_t len, rowBytes, kBlocks;
  bool nv;
  uint8_t low = 0;
  __device__ void block(int64_t rb, int64_t cb, int64_t i0, int64_t i1, int64_t, int64_t,
                        const Fp4BlockScales &s) {
    uint8_t byte = nv ? s.blockScaleByte : fp4::e8m0Code(s.scaleInv);
    for (int64_t i = i0; i < i1; ++i)
      scales[blockScaleOffset(i, cb, kBlocks)] = byte;
    if (nv && rb == 0 && cb == 0)
      tensor[0] = s.dec;
  }
  __device__ void element(int64_t i, int64_t j, int64_t, double qv) {
    uint8_t code = fp4::e2m1Code(qv);
    uint8_t *row = q + i * rowBytes;
    if (j & 1) {
      row[j / 2] = static_cast<uint8_t>(low | code << 4);
    } else if (j + 1 == len) {
      row[j / 2] = code;
    } else {
      low = code;
      return;
    }
    if (j + 1 == len) // the row's padding up to its last block's end
      for (int64_t p = j / 2 + 1; p < rowBytes; ++p)
        row[p] = 0;
  }
};

template <class T, bool Nv, bool Stochastic>
__global__ void __launch_bounds__(kThreads)
    quantizeFp4PackedKernel(const T *x, const float *amax, Fp4View v, PackSink sink,
                            uint64_t seed, uint64_t stream, const float *step) {
  int64_t b = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (b >= v.gridRows * v.gridCols)
    return;
  fp4QuantizeBlock<T, Nv, Stochastic>(x, amax, v, b, seed, stream, step, sink);
}

__global__ void nvfp4GemmScalarsKernel(const float *a, const float *b, float *scalars) {
  scalars[0] = a[0] * b[0];
  scalars[1] = 0.f;
}

} // namespace

Status nvfp4GemmScalars(const float *lhsTensorScale, const float *rhsTensorScale, float *scalars,
                        cudaStream_t stream) {
  if (!lhsTensorScale || !rhsTensorScale || !scalars)
    return invalidArgument("nvfp4GemmScalars: null pointer");
  nvfp4GemmScalarsKernel<<<1, 1, 0, stream>>>(lhsTensorScale, rhsTensorScale, scalars);
  return checkLaunch("nvfp4_gemm_scalars");
}

Status quantizeFp4Packed(DType dt, const void *x, uint8_t *q, uint8_t *scales, float *tensorScale,
                         float *amax, int64_t outer, int64_t len, int64_t inner, Fp4Format format,
                         bool blocks2d, const Fp4Stochastic *sr, cudaStream_t stream) {
  TC_RETURN_IF_ERROR(checkEntry("quantizeFp4Packed", outer * inner, len));
  bool nv = format == Fp4Format::Nvfp4;
  if (blocks2d && !nv)
    return invalidArgument("quantizeFp4Packed: 16x16 blocks are nvfp4's only");
  if (!x || !q || !scales || (nv && (!amax || !tensorScale)) || (sr && !sr->step))
    return invalidArgument("quantizeFp4Packed: null pointer");
  Fp4View v = fp4View(outer, len, inner, nv, blocks2d);
  if (v.rows == 0 || len == 0)
    return Status::ok();
  int64_t blocks = ceilDiv(v.gridRows * v.gridCols, kThreads);
  if (blocks > INT32_MAX)
    return invalidArgument("quantizeFp4Packed: more than 2^38 blocks");
  PackSink sink{q, scales, tensorScale, len, fp4PackedRowBytes(len, !nv), v.gridCols, nv};
  // The layout's padding rows and columns read as zero scales.
  TC_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(scales, 0, fp4ScaleLayoutBytes(v.rows, len, !nv), stream));
  if (nv)
    TC_RETURN_IF_ERROR(amaxFp8(dt, x, amax, 1, v.rows * len, Fp8Scaling::Tensor, stream));
  uint64_t seed = sr ? sr->seed : 0, rngStream = sr ? sr->stream : 0;
  const float *step = sr ? sr->step : nullptr;
  return dispatchFloat(dt, "quantizeFp4Packed", [&](auto tag) {
    using T = decltype(tag);
    auto *xs = static_cast<const T *>(x);
    auto launch = [&](auto kernel) {
      kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(xs, amax, v, sink, seed,
                                                                     rngStream, step);
      return checkLaunch("quantize_fp4");
    };
    if (nv)
      return sr ? launch(quantizeFp4PackedKernel<T, true, true>)
                : launch(quantizeFp4PackedKernel<T, true, false>);
    return sr ? launch(quantizeFp4PackedKernel<T, false, true>)
              : launch(quantizeFp4PackedKernel<T, false, false>);
  });
}

} // namespace tc::rt::cuda
