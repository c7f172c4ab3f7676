//===- kernels.h - launchers of tc's hand-written CUDA kernels ---*- C++ -*-===//
//
// One launcher per kernel (the kernels live in kernels/*.cu, one op family
// per file). Every launcher
//   - takes device pointers, sizes and an explicit cudaStream_t, and enqueues
//     asynchronously (nothing synchronises the host),
//   - returns a Status: "no CUDA GPU available: ..." without a GPU,
//     InvalidArgument for a bad dtype/size/null pointer, and the launch error
//     naming the kernel otherwise (cudaGetLastError right after the launch),
//   - takes storage dtype F32 or BF16 (bf16 storage, fp32 math), and
//   - is deterministic: the same inputs give the same bits run to run (no
//     float atomics; reductions have an order fixed by the sizes only).
// Scratch buffers (fp32 or int32 device memory, e.g. arena slices) are sized
// by the matching *ScratchBytes function and may be reused between calls;
// those functions and the chunk constants are the library-call ABI's
// (runtime/src/schema/library_abi.h), which the compiler sizes buffers with.
// Shapes are written next to the pointers; "rows" is the product of the
// leading dims, the op's axis is the last one.
//
// Thread-safety: launchers are thread-safe (they keep no state).
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_CUDA_KERNELS_KERNELS_H
#define TC_RUNTIME_CUDA_KERNELS_KERNELS_H

#include <cmath>
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "runtime/src/base/dtype.h"
#include "runtime/src/schema/library_abi.h"
#include "runtime/src/schema/program.h"
#include "runtime/src/base/status.h"

namespace tc::rt::cuda {

//===----------------------------------------------------------------------===//
// softmax.cu
//===----------------------------------------------------------------------===//

/// y[rows, cols] = softmax(x[rows, cols]) along the last axis (log_softmax
/// with `log`). Max-subtracted, fp32 math. y may alias x.
Status softmaxForward(DType dt, const void *x, void *y, int64_t rows, int64_t cols, bool log,
                      cudaStream_t stream);

//===----------------------------------------------------------------------===//
// norm.cu: layer_norm and rms_norm over the last axis
//===----------------------------------------------------------------------===//

/// Storage types: `dt` of the rows (x, y, dy, dx), `pt` of the parameters
/// (weight, bias, dweight, dbias): f32/f32, bf16/bf16 or bf16 rows with f32
/// parameters (the forms without `pt` use dt for both); math in fp32.
///
/// y[rows, cols] = (x - mean) * rstd * weight[cols] + bias[cols], with
/// rstd = 1 / sqrt(var + eps) (biased variance, as torch). weight and bias
/// (dtype dt) may be null. mean[rows] and rstd[rows] (fp32) are written when
/// non-null, for the backward. amax[1] (when non-null; f32) gets max |y|
/// over the stored values, NaN ignored, as amaxFp8 takes it (the same bits),
/// for the quantize_fp8 of y (tc-fuse-fp8-amax).
Status layerNormForward(DType dt, DType pt, const void *x, const void *weight, const void *bias,
                        void *y, float *mean, float *rstd, int64_t rows, int64_t cols, float eps,
                        cudaStream_t stream, float *amax = nullptr);
inline Status layerNormForward(DType dt, const void *x, const void *weight, const void *bias,
                               void *y, float *mean, float *rstd, int64_t rows, int64_t cols,
                               float eps, cudaStream_t stream) {
  return layerNormForward(dt, dt, x, weight, bias, y, mean, rstd, rows, cols, eps, stream);
}

/// Backward of layerNormForward from its saved mean/rstd:
///   dx[rows, cols], dweight[cols] (when weight and dweight are non-null),
///   dbias[cols] (when non-null). With `accumulate` the results are added to
///   what dx/dweight/dbias hold (gradient accumulation, a residual's second
///   use); otherwise they are overwritten. dx may be null (parameter grads
///   only). dweight/dbias are summed over rows in fixed chunks of
///   normBackwardChunkRows(cols) rows (deterministic), through `scratch`
///   (normBackwardScratchBytes(rows, cols, colSum != nullptr) bytes).
///   `dresidual` (rows of dx's type, with a dx and without accumulate): dx =
///   its rows + the norm's gradient (the residual stream's gradient summed
///   in, tc.grad_addend). `colSum` ([cols] of dx's type, with a dx and
///   without accumulate): the column sums of dx as stored (the bias gradient
///   of the Linear layer dx flows into), in a fixed order.
Status layerNormBackward(DType dt, DType pt, const void *dy, const void *x, const void *weight,
                         const float *mean, const float *rstd, void *dx, void *dweight, void *dbias,
                         void *scratch, int64_t rows, int64_t cols, bool accumulate,
                         cudaStream_t stream, const void *dresidual = nullptr,
                         void *colSum = nullptr);
inline Status layerNormBackward(DType dt, const void *dy, const void *x, const void *weight,
                                const float *mean, const float *rstd, void *dx, void *dweight,
                                void *dbias, void *scratch, int64_t rows, int64_t cols,
                                bool accumulate, cudaStream_t stream) {
  return layerNormBackward(dt, dt, dy, x, weight, mean, rstd, dx, dweight, dbias, scratch, rows,
                           cols, accumulate, stream);
}

/// y = x * rstd * weight[cols], rstd = 1 / sqrt(mean(x^2) + eps); weight may
/// be null; rstd[rows] (fp32) written when non-null; amax as for
/// layerNormForward.
Status rmsNormForward(DType dt, DType pt, const void *x, const void *weight, void *y, float *rstd,
                      int64_t rows, int64_t cols, float eps, cudaStream_t stream,
                      float *amax = nullptr);
inline Status rmsNormForward(DType dt, const void *x, const void *weight, void *y, float *rstd,
                             int64_t rows, int64_t cols, float eps, cudaStream_t stream) {
  return rmsNormForward(dt, dt, x, weight, y, rstd, rows, cols, eps, stream);
}

/// Backward of rmsNormForward: dx, dweight (when weight and dweight are
/// non-null); `accumulate`, `scratch`, `dresidual` and `colSum` as for
/// layerNormBackward.
Status rmsNormBackward(DType dt, DType pt, const void *dy, const void *x, const void *weight,
                       const float *rstd, void *dx, void *dweight, void *scratch, int64_t rows,
                       int64_t cols, bool accumulate, cudaStream_t stream,
                       const void *dresidual = nullptr, void *colSum = nullptr);
inline Status rmsNormBackward(DType dt, const void *dy, const void *x, const void *weight,
                              const float *rstd, void *dx, void *dweight, void *scratch,
                              int64_t rows, int64_t cols, bool accumulate, cudaStream_t stream) {
  return rmsNormBackward(dt, dt, dy, x, weight, rstd, dx, dweight, scratch, rows, cols,
                         accumulate, stream);
}


//===----------------------------------------------------------------------===//
// cross_entropy.cu: softmax cross-entropy over the last axis, fused backward
//===----------------------------------------------------------------------===//

/// For logits[rows, cols] and labels[rows] (labelType I32 or I64):
///   losses[r] = logsumexp(logits[r]) - logits[r, labels[r]], 0 for rows whose
///               label is ignoreIndex (fp32, written when non-null);
///   *lossMean = sum(losses) / count(rows not ignored) (fp32 scalar, NaN when
///               every row is ignored, as torch; written when non-null);
///   dlogits[rows, cols] (dtype dt, when non-null) = d(lossMean)/d(logits) *
///               gradScale = (softmax - onehot) * gradScale / count, 0 on
///               ignored rows. dlogits may alias logits (in place).
/// A label outside [0, cols) that is not ignoreIndex gives a NaN loss (and
/// NaN gradient row). `scratch`: crossEntropyScratchBytes(rows) bytes. The
/// sum over rows has a fixed order (deterministic). rows < 2^24.
Status crossEntropyForwardBackward(DType dt, const void *logits, DType labelType,
                                   const void *labels, float *losses, float *lossMean,
                                   void *dlogits, void *scratch, int64_t rows, int64_t cols,
                                   int64_t ignoreIndex, float gradScale, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// embedding.cu: gather of table rows and its deterministic scatter-add
//===----------------------------------------------------------------------===//

/// out[count, dim] = table[ids[count], dim] (idType I32 or I64; a negative id
/// counts from the end as in tc.gather). An id outside [-vocab, vocab) gives
/// a row of NaN (the reference executor reports an error instead).
Status embeddingForward(DType dt, const void *table, DType idType, const void *ids, void *out,
                        int64_t count, int64_t vocab, int64_t dim, cudaStream_t stream);

/// dtable[vocab, dim] (+)= sum over n with ids[n] == v of dout[n, :].
/// Deterministic without float atomics: a stable counting sort of the token
/// indices by id (a block per chunk of kEmbeddingChunk tokens builds the
/// per-chunk histograms, a column scan and a scan over the vocabulary give
/// every token its slot, with its rank among its chunk's equal ids), then each vocabulary row is
/// owned by one block that sums its tokens in increasing token order. Rows no
/// token hits are zeroed (or left alone with `accumulate`). Ids outside
/// [-vocab, vocab) are skipped. `scratch`: embeddingBackwardScratchBytes.
Status embeddingBackward(DType dt, const void *dout, DType idType, const void *ids, void *dtable,
                         void *scratch, int64_t count, int64_t vocab, int64_t dim, bool accumulate,
                         cudaStream_t stream);

//===----------------------------------------------------------------------===//
// elementwise.cu: GELU and casts over flat buffers
//===----------------------------------------------------------------------===//

enum class GeluApprox : uint8_t {
  None, // 0.5 x (1 + erf(x / sqrt 2))   (tc.gelu approximate = "none")
  Tanh, // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   ("tanh")
};

/// y[n] = gelu(x[n]); y may alias x. F32, BF16 or F16.
Status geluForward(DType dt, GeluApprox approx, const void *x, void *y, int64_t n,
                   cudaStream_t stream);
/// dx[n] = dy[n] * gelu'(x[n]); dx may alias dy.
Status geluBackward(DType dt, GeluApprox approx, const void *x, const void *dy, void *dx, int64_t n,
                    cudaStream_t stream);

/// y[n] = x[n] converted from `from` to `to` (F32, BF16, F16; round to
/// nearest even; the same dtype copies).
Status castBuffer(DType from, const void *x, DType to, void *y, int64_t n, cudaStream_t stream);

/// y[i] = the element whose bytes are the low `elementBytes` (1, 2, 4 or 8)
/// bytes of `pattern`, for i in [0, n) (tcx.fill of any dtype).
Status fillBuffer(void *y, int elementBytes, uint64_t pattern, int64_t n, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// column_sum.cu
//===----------------------------------------------------------------------===//

/// colSum[cols] (in dt: f32, bf16 or f16) = the sums of x[rows, cols]'s
/// columns (row-major; a Linear layer's bias gradient): f32 sums of row parts
/// into `partial` (partialBytes; columnSumScratchBytes(rows, cols) takes the
/// most parts, fewer bytes take fewer), then the parts added in order --
/// deterministic, in another order than the CPU's reduce_sum.
Status columnSums(DType dt, const void *x, int64_t rows, int64_t cols, void *colSum,
                  float *partial, size_t partialBytes, cudaStream_t stream);
size_t columnSumScratchBytes(int64_t rows, int64_t cols);

/// colSum[cols] (in dt) = the sum over p of partial[p][cols] (f32), the
/// parts added in an order fixed by `parts`: the second pass of columnSums
/// and of quantizeFp8's column sums.
Status sumColumnPartials(DType dt, const float *partial, int64_t parts, int64_t cols, void *colSum,
                         cudaStream_t stream);

//===----------------------------------------------------------------------===//
// quantize.cu: FP8 quantization by amax (tc.quantize, f32 scales)
//===----------------------------------------------------------------------===//

/// Scaling granularity of x[rows, cols]: one scale for the tensor, one per
/// row or one per column (tc.quantize's block = shape, [1, cols] or
/// [rows, 1]: the operand an outer-vector-scaled GEMM reads transposed).
enum class Fp8Scaling : uint8_t { Tensor, Row, Column };

/// amax[1] (Tensor), amax[rows] (Row) or amax[cols] (Column), f32 = max |x|
/// over x[rows, cols] (dt F32 or BF16), NaN elements ignored (as fmaxf).
/// Exact and deterministic: a max of the float bits of |x| as integers
/// (across blocks by atomicMax on them for Tensor and Column, one block per
/// row for Row). `amax` is the library call's scratch
/// (rt::fp8QuantizeScratchBytes).
Status amaxFp8(DType dt, const void *x, float *amax, int64_t rows, int64_t cols,
               Fp8Scaling scaling, cudaStream_t stream);

/// Transformer Engine's current scaling from amaxFp8's `amax` (read on the
/// device), bit for bit tc.quantize's CPU reference: s = fmax / amax (f32;
/// 1 for amax 0 or inf, the largest f32 when it overflows), q[rows, cols]
/// (qt F8E4M3FN or F8E5M2) = satfinite(x * s) with the product rounded to
/// f32, scaleInv[1, rows or cols] (f32) = 1 / s. qT[cols, rows] (may be
/// null; Tensor and Column scaling, whose copy has a scale per row) gets
/// the transposed copy in the same pass. colSum[cols] (may be null; Tensor
/// scaling, in dt) gets the sums of x's columns from the same pass (a bias
/// gradient): f32 sums of each tile's rows into `partial`
/// (rt::fp8ColumnSumScratchBytes), then a pass adding the tiles' sums in
/// order -- deterministic, in another order than the CPU's reduce_sum.
Status quantizeFp8(DType dt, const void *x, const float *amax, DType qt, void *q, void *qT,
                   float *scaleInv, int64_t rows, int64_t cols, Fp8Scaling scaling,
                   cudaStream_t stream, void *colSum = nullptr, float *partial = nullptr);

/// `--fp8-scaling delayed` (Transformer Engine's DelayedScaling) in one pass
/// over x[rows, cols] (dt F32 or BF16), bit for bit the reference's ops
/// (tc-quantize-fp8's quantizedDelayed): q (qt F8E4M3FN or F8E5M2) =
/// satfinite(x * scale[0]) with the product rounded to f32, qT[cols, rows]
/// (may be null) its transposed copy, scaleInv[1] (may be null: the step
/// computes it beside) = 1 / scale[0]; amax[1] =
/// max |x| (NaN when x holds one, as tc.reduce_max) and saturated[1] = the
/// number of elements whose |x * scale| exceeds the format's largest finite
/// value, in f32, both zeroed by the call and combined across blocks by
/// atomics: the max on the f32 bits is exact; the count's f32 additions of
/// whole block counts are exact, so independent of order, while it stays
/// below 2^24 (the reference's sum of ones stops growing there).
Status quantizeFp8Delayed(DType dt, const void *x, const float *scale, DType qt, void *q, void *qT,
                          float *scaleInv, float *amax, float *saturated, int64_t rows,
                          int64_t cols, cudaStream_t stream);

/// Delayed scaling's bookkeeping of one tensor (the "fp8_scale_update"
/// call; what tc-quantize-fp8's ops compute, bit for bit): with the window
/// w = [amax] ++ history[0 : len] (len 0: no history), used = amax
/// (mostRecent) or max(w) (NaN when w holds one); nextScale = fmax / used
/// (__fdiv_rn; FLT_MAX when it overflows) when used is positive and finite,
/// else *scale; scaleInv = 1 / *scale; nextHistory[0 : len] = w[0 : len].
/// One block; nextScale and nextHistory may be scale and history (every
/// element is read before it is written).
Status fp8ScaleUpdate(const float *amax, const float *scale, const float *history, int64_t len,
                      float fmax, bool mostRecent, float *nextScale, float *scaleInv,
                      float *nextHistory, cudaStream_t stream);

/// The blocks of quantizeFp8Blocks over x[rows, cols]: 1x128 along the
/// columns (an activation or gradient read with K = cols), 128x1 along the
/// rows (the same read transposed, K = rows: its own quantization, as
/// DeepSeek-V3 and Transformer Engine take it) or 128x128 (a weight).
enum class Fp8Blocks : uint8_t { Cols128, Rows128, Square128 };

/// `--fp8-scaling block128`: tc.quantize with 128-blocks (an edge block is
/// partial: its amax is over the elements present), bit for bit the CPU
/// reference: per block s = fmax / amax as quantizeFp8's, with `pow2` its
/// mantissa cleared (Transformer Engine's Float8BlockScaling default), q =
/// satfinite(x * s), scaleInv (f32, tc's layout: the grid [ceil(rows / br),
/// ceil(cols / bc)] row-major) = 1 / s. qT[cols, rows] (may be null; not for
/// Cols128) is the transposed copy. The same scales are also written, zero
/// padded, in the layout cuBLASLt's block-scaled FP8 GEMMs read for the
/// operand stored with K contiguous (Transformer Engine's GEMM_READY):
/// gemmScale for q (Cols128: [ceil(cols / 128)][roundup(rows, 4)];
/// Square128: [ceil(rows / 128)][roundup(ceil(cols / 128), 4)]) or for qT
/// (Rows128: [ceil(rows / 128)][roundup(cols, 4)]), gemmScaleT (may be null;
/// Square128 with qT) for qT ([ceil(cols / 128)][roundup(ceil(rows / 128),
/// 4)]). rt::fp8BlockGemmScaleFloats (schema/library_abi.h) gives their sizes.
Status quantizeFp8Blocks(DType dt, const void *x, DType qt, void *q, void *qT, float *scaleInv,
                         float *gemmScale, float *gemmScaleT, int64_t rows, int64_t cols,
                         Fp8Blocks blocks, bool pow2, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// quantize_mx.cu: MXFP8 quantization (tc.quantize, f8E8M0FNU scales)
//===----------------------------------------------------------------------===//

/// `--fp8-scaling mxfp8` (OCP MX, sm_120a's block-scaled GEMMs): x[rows,
/// cols] (dt F32 or BF16) in 1x32 blocks along the columns (alongRows false)
/// or 32x1 blocks along the rows (an edge block is partial: its amax is over
/// the elements present), bit for bit tc.quantize's CPU reference: per block
/// scale_inv = 2^(floor(log2 amax) - emax) clamped to 2^[-127, 127] (emax 8
/// for E4M3, 15 for E5M2; 2^-127 for amax 0; NaN for an inf amax),
/// q[rows, cols] (qt F8E4M3FN or F8E5M2) = satfinite(x / scale_inv).
/// scaleInv: E8M0 bytes in tc's grid ([rows, ceil(cols / 32)] or
/// [ceil(rows / 32), cols], row-major). qT[cols, rows] (may be null; only
/// with alongRows) is the transposed copy, whose blocks run along its own
/// rows. gemmScale: the same bytes in cuBLASLt's VEC32_UE8M0 layout
/// (block_scale_layout.h) for the operand read with K contiguous, q
/// [rows, K = cols] or qT [cols, K = rows], zero padded
/// (rt::blockScaleLayoutBytes(outer, ceil(K / 32)) bytes).
Status quantizeMx(DType dt, const void *x, DType qt, void *q, void *qT, uint8_t *scaleInv,
                  uint8_t *gemmScale, int64_t rows, int64_t cols, bool alongRows,
                  cudaStream_t stream);

//===----------------------------------------------------------------------===//
// fake_quantize.cu: NVFP4 / MXFP4 fake quantisation (tc.fake_quantize)
//===----------------------------------------------------------------------===//

/// tc.fake_quantize's formats.
enum class Fp4Format : uint8_t { Nvfp4, Mxfp4 };

/// Stochastic rounding's key: element k of x draws init_rng.h's
/// uniform01(seed, mix64(stream + step * kGamma), k), `step` (f32 [1], a
/// whole number) read on the device.
struct Fp4Stochastic {
  uint64_t seed = 0, stream = 0;
  const float *step = nullptr;
};

/// y = deq(quant(x)) of x viewed as [outer, len, inner] (dt F32 or BF16, y
/// of the same type), the blocks along len: nvfp4 1x16 (or 16x16 of the
/// [outer * inner, len] matrix with `blocks2d`) with E4M3 block scales and
/// an f32 tensor scale, mxfp4 1x32 with E8M0 scales; nearest even, or
/// stochastic rounding with `sr` (may be null). Bit for bit the CPU
/// reference's tc.fake_quantize. `amax` (f32 [1], nvfp4 only) is the
/// library call's scratch (rt::fp8QuantizeScratchBytes(1)). `tensorScale`
/// (f32 [1], nvfp4 only; may be null): tc.fake_quantize's unscaled form, y
/// = code x block scale (exact) and the tensor's decode scale written there.
Status fakeQuantizeFp4(DType dt, const void *x, void *y, float *amax, int64_t outer, int64_t len,
                       int64_t inner, Fp4Format format, bool blocks2d, const Fp4Stochastic *sr,
                       cudaStream_t stream, float *tensorScale = nullptr);

//===----------------------------------------------------------------------===//
// fp4_pack.cu, fp4_gemm.cu: FP4 operands of block-scaled GEMMs (sm_120a)
//===----------------------------------------------------------------------===//

/// fakeQuantizeFp4's quantisation of x [outer, len, inner] (the same
/// arguments, the same bits) written packed for a block-scaled GEMM, as the
/// matrix [outer * inner, len] with len contiguous (along axis 0 of a
/// rank-2 x: its transpose): q [outer * inner, rt::fp4PackedRowBytes(len)]
/// E2M1 codes, element 0 of a byte in its low nibble, rows zero padded to
/// whole blocks; scales (rt::fp4ScaleLayoutBytes) the E4M3 (nvfp4; a 16x16
/// block's for each of its rows) or E8M0 (mxfp4) block scales in cuBLASLt's
/// 128x4 layout (schema/block_scale_layout.h), zero padded; tensorScale
/// (f32 [1], nvfp4 only) the tensor's decode scale 1 / S_enc, so that code
/// x block scale x tensorScale (exact in double, rounded once) is
/// fakeQuantizeFp4's y. amax: nvfp4's scratch (rt::fp8QuantizeScratchBytes(1)).
Status quantizeFp4Packed(DType dt, const void *x, uint8_t *q, uint8_t *scales, float *tensorScale,
                         float *amax, int64_t outer, int64_t len, int64_t inner, Fp4Format format,
                         bool blocks2d, const Fp4Stochastic *sr, cudaStream_t stream);

/// scalars[0] = *lhsTensorScale * *rhsTensorScale, scalars[1] = 0 (one
/// thread): the device alpha and beta of an NVFP4 cuBLASLt GEMM
/// (Matmul::runNvfp4).
Status nvfp4GemmScalars(const float *lhsTensorScale, const float *rhsTensorScale, float *scalars,
                        cudaStream_t stream);

/// d [m, n] (bf16, row-major) = alpha[0] (1 when null) * A B^T of quantizeFp4Packed's
/// mxfp4 operands a [m, k] and b [n, k] (K a multiple of 32) with their E8M0
/// scales, or with `nvfp4` its nvfp4 operands (K a multiple of 16) with
/// their E4M3 scales (alpha then the tensor scales' product:
/// nvfp4GemmScalars), fp32 accumulation: the block-scaled mma.sync of sm_120a. On any
/// other GPU it is Unimplemented unless `emulate`, which runs the same tile
/// loop with each MMA step decoded and summed in fp32 on any GPU (a test
/// of the loads and the fragment layouts, not a fast path).
Status fp4MmaGemm(const uint8_t *a, const uint8_t *aScales, const uint8_t *b,
                  const uint8_t *bScales, const float *alpha, void *d, int64_t m, int64_t n,
                  int64_t k, bool nvfp4, bool emulate, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// optimizer.cu: fused updates over a flat buffer, global gradient norm
//===----------------------------------------------------------------------===//

/// torch.optim.AdamW (decoupled weight decay), fp32 master weights.
struct AdamWConfig {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weightDecay = 0.01f;
  /// 1 for the first update; bias corrections use 1 - beta^step.
  int64_t step = 1;
  /// > 0: scale gradients by min(1, maxGradNorm / (sqrt(*gradNormSq) + 1e-6))
  /// (torch.nn.utils.clip_grad_norm_); needs gradNormSq.
  float maxGradNorm = 0;
};

/// In place over n elements: params (fp32), expAvg, expAvgSq (fp32),
/// grads (gradType F32 or BF16):
///   p *= 1 - lr * wd; m += (1 - b1) (g - m); v = b2 v + (1 - b2) g^2;
///   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
/// gradNormSq: device fp32 scalar (sumSquares of all gradients) or null.
/// paramsCopy (copyType F32/BF16, or null): the updated params written again
/// in the model's dtype (bf16 weights next to fp32 master weights).
Status adamwUpdate(float *params, DType gradType, const void *grads, float *expAvg, float *expAvgSq,
                   int64_t n, const AdamWConfig &cfg, const float *gradNormSq, DType copyType,
                   void *paramsCopy, cudaStream_t stream);

/// torch.optim.SGD.
struct SgdConfig {
  float lr = 1e-2f;
  float momentum = 0;
  float dampening = 0;
  float weightDecay = 0;
  bool nesterov = false;
  /// 1 for the first update (the momentum buffer starts as the gradient).
  int64_t step = 1;
  float maxGradNorm = 0; // as AdamWConfig
};

/// In place: g += wd p; buf = step == 1 ? g : momentum buf + (1 - dampening) g;
/// g = nesterov ? g + momentum buf : buf; p -= lr g. momentumBuf (fp32) may be
/// null when momentum == 0. gradNormSq, copyType/paramsCopy as adamwUpdate.
Status sgdUpdate(float *params, DType gradType, const void *grads, float *momentumBuf, int64_t n,
                 const SgdConfig &cfg, const float *gradNormSq, DType copyType, void *paramsCopy,
                 cudaStream_t stream);

/// *out = sum(x[n]^2) (fp32 scalar on the device), or *out += ... with
/// `accumulate` (call once per gradient tensor, accumulate after the first,
/// then sqrt on the host or in the optimizer). Deterministic: the grid and
/// the summation order depend on n only. `scratch`: sumSquaresScratchBytes().
Status sumSquares(DType dt, const void *x, int64_t n, float *out, void *scratch, bool accumulate,
                  cudaStream_t stream);

//===----------------------------------------------------------------------===//
// init.cu: parameter initialisers on the device
//===----------------------------------------------------------------------===//

/// dst[p.type.numElements()] (p.type.dtype: F32, BF16 or F16) = the first
/// value of parameter-table entry `p` for `seed`: zeros, ones, normal or
/// uniform drawn with init_rng.h exactly as the host's initParameter
/// (runtime/src/base/init.h) does, element i from (seed, FNV-1a 64 of
/// p.name, i). Equal to the host fill to 1 ulp of the dtype (normal; the
/// others bit-identical). Other dtypes: Unimplemented; init Data:
/// FailedPrecondition (its bytes come from the artifact).
Status initParameterDevice(const Parameter &p, uint64_t seed, void *dst, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// attention.cu: fused scaled-dot-product attention (flash), forward/backward
//===----------------------------------------------------------------------===//

/// Sizes of one attention call: q [batch, heads, tq, d], k [batch, kvHeads, tk, d],
/// v [batch, kvHeads, tk, dv], out [batch, heads, tq, dv]. heads % kvHeads == 0
/// (grouped-query attention: query head h reads kv head h / (heads / kvHeads)).
/// d, dv <= 256. batch == 0 or heads == 0 is a no-op.
struct AttentionShape {
  int64_t batch = 0, heads = 0, kvHeads = 0, tq = 0, tk = 0, d = 0, dv = 0;
};
/// Element strides of a [batch, heads, t, d] operand; the last dim is contiguous
/// (stride 1). Lets q/k/v be read straight out of a fused qkv projection.
struct AttentionStrides {
  int64_t batch = 0, head = 0, row = 0;
};
/// Row-major (contiguous) strides of a [batch, heads, t, d] tensor.
AttentionStrides contiguousAttentionStrides(int64_t heads, int64_t t, int64_t d);
/// The tensor-core kernels attentionForward / attentionBackward run for bf16
/// and f16: Mma, FlashAttention-2 on mma.sync (sm_80+), or Wgmma, the same
/// algorithm, tiles and results to rounding on sm_90a's warpgroup MMA, taken
/// where the GPU is an H100/H200 and d == dv is 64 or 128 (Mma otherwise), or
/// Cudnn: the forward through cuDNN's fused flash attention (the optional
/// plugin, cudnn/loader.h) where it is installed and takes the case (bf16 or
/// f16, d == dv in {64, 128}, no key mask, causal only with tq == tk; its lse
/// is the same natural-log statistic) and the backward through cuDNN's
/// deterministic algorithm at head dim 128 (no key mask; batches in chunks of
/// a bounded workspace), an FP8 amax of either taken after it over the stored
/// values; Mma for everything else.
enum class AttentionKernels { Mma, Wgmma, Cudnn };
/// True when the current GPU runs the Wgmma kernels (compute capability 9.0:
/// H100, H200).
bool wgmmaAttentionAvailable();

/// A padding (key) mask, as tc.attention's key_mask and mask_fill: keys
/// [batch, tk] bytes (non-zero = visible; null: no mask) hide key j from
/// every query of batch b where keys[b * tk + j] is 0, besides the causal
/// mask. `fill` says what a hidden score counts for: -inf, nothing (a row
/// with no visible key gives out = 0, lse = -inf); a finite fill (an
/// exported additive mask: HF's finfo.min; at most kAttentionMaxFiniteFill,
/// so that beside a visible key a hidden one weighs exactly 0), score + fill:
/// a row with no visible key then attends to all tk keys with the softmax of
/// (scale * s + fill) - fill (uniform when the fill absorbs the scores, as
/// finfo.min does in f32), and its lse is that softmax's log-sum-exp (the
/// row's lse less the fill). Keys with a mask take the mma.sync kernels
/// (never wgmma) or the generic ones.
struct AttentionMask {
  const uint8_t *keys = nullptr;
  float fill = -INFINITY;
};

/// out = softmax(scale * q k^T + mask) v, with mask = -inf where key j > query i
/// when `causal` (top-left aligned, torch's is_causal / tril), else 0, and
/// hidden where `mask` (AttentionMask) hides key j.
/// lse [batch, heads, tq] fp32 contiguous (may be null): the row's
/// log(sum(exp(scale * s - max))) + max, saved for the backward.
/// dt F32, BF16 or F16 for q, k, v, out; fp32 math (bf16/f16: tensor cores, fp32
/// accumulate). The tensor-core path (FlashAttention-2 on mma.sync, sm_80+) takes
/// bf16 or f16 with d == dv in {32, 64, 128}, 16-byte aligned pointers and strides
/// that are multiples of 8 elements; everything else (all f32, which never uses TF32)
/// runs a simple fp32-FMA kernel. tk == 0 (with tq > 0) gives out = 0 and
/// lse = -inf; tq == 0 is a no-op. amax[1] (when non-null; f32) gets max |out| over
/// the stored values, NaN ignored, as amaxFp8 takes it (the same bits).
Status attentionForward(DType dt, const AttentionShape &s, const void *q, AttentionStrides qs,
                        const void *k, AttentionStrides ks, const void *v, AttentionStrides vs,
                        void *out, AttentionStrides os, float *lse, float scale, bool causal,
                        cudaStream_t stream, float *amax = nullptr,
                        AttentionKernels kernels = AttentionKernels::Mma,
                        const AttentionMask &mask = {});

/// Bytes of scratch attentionBackward needs (at least batch*heads*tq floats for
/// D = rowsum(dout * out); rt::attentionBackwardScratchLayout); never 0.
/// Without keyMask, as for a call without a key mask, causal or not (the
/// most such a call needs).
using rt::attentionBackwardScratchBytes;
inline size_t attentionBackwardScratchBytes(const AttentionShape &s, bool colSums = false,
                                            bool keyMask = false) {
  return rt::attentionBackwardScratchBytes(s.batch, s.heads, s.kvHeads, s.tq, s.tk, s.d, s.dv,
                                           colSums, keyMask, /*causal=*/false);
}

/// The column sums over (batch, t) of attentionBackward's gradients (the
/// bias gradient of a fused qkv projection whose gradient dq, dk and dv
/// form): into `out` (null: none), of the gradients' type, dq's column (h, c)
/// at out[offsets[0] + h d + c], dk's (kvh, c) at offsets[1] + kvh d + c,
/// dv's at offsets[2] + kvh dv + c. f32 sums in a fixed order
/// (deterministic): the flash kernels sum the rows they write (the f32
/// values before their rounding to the stored type), in chunks of their
/// blocks; the other paths (and calls with an amax or a key mask) sum the
/// stored gradients in chunks of kAttentionColumnSumRows rows after them;
/// then each column's chunks in order. Either is within the gradients'
/// rounding of the stored values' sums. Needs attentionBackwardScratchBytes(s,
/// true) bytes of scratch.
///
/// headStride 0: each gradient's heads are adjacent (GPT-2's [q | k | v]).
/// Else the heads interleave (GPT-NeoX's qkv, [heads][q k v] per token):
/// gradient j's column (h, c) at offsets[j] + h headStride + c, which needs
/// heads == kvHeads, tq == tk and the three column ranges [offsets[j],
/// offsets[j] + width) (widths d, d, dv) to tile [0, headStride) exactly.
/// With a rotary (AttentionGradRotary) the sums are of the rotated values,
/// as stored.
struct AttentionGradSums {
  void *out = nullptr;
  int64_t offsets[3] = {0, 0, 0};
  int64_t headStride = 0;
};

/// The backward's rotary (RoPE, rotate_half layout) of the gradients
/// attentionBackward stores: the gradient `of` names (1 dq, 2 dk) leaves the
/// call rotated, per row (b, h, t) the pairs (x[k], x[k + half]), k < half,
/// becoming (cos x1 - sin x2, sin x1 + cos x2) with cos / sin [batch, t,
/// half] (the tables' row of the gradient's token; t = tq for dq, tk for
/// dk) of the gradients' type, features from 2 half on as they are: what
/// tc.rotary of the stored gradient gives (the compiler passes the backward's
/// tables, -sin). The flash kernels rotate their f32 accumulators before
/// rounding where half is a multiple of 8 (the pairs in one thread's
/// fragments); the other paths rotate the stored gradients after them (and
/// sum them after that). Not with an amax. of == 0: none.
struct AttentionGradRotary {
  const void *cos = nullptr, *sin = nullptr;
  int64_t half = 0;
  int of = 0;
};

/// Gradients of attentionForward given dout (strides dos) and the forward's out and lse:
/// dq [batch, heads, tq, d], dk [batch, kvHeads, tk, d], dv [batch, kvHeads, tk, dv]
/// (overwritten, not accumulated; with GQA dk/dv sum over the query heads of the group).
/// Deterministic: no float atomics (one kernel for dq iterating over key
/// blocks, which on the fast path also writes D = rowsum(dout * out) to
/// scratch, then one for dk/dv iterating over query blocks).
/// Same paths as the forward (the fast one also needs out/dout/dq/dk/dv aligned).
/// tq == 0 gives dk = dv = 0; tk == 0 gives dq = 0. lse and scratch may be
/// null only then. amax[1] (when non-null; f32) gets max |x| over the stored values
/// of the gradients `amaxOf` names (bits 1 dq, 2 dk, 4 dv), NaN ignored.
Status attentionBackward(DType dt, const AttentionShape &s, const void *q, AttentionStrides qs,
                         const void *k, AttentionStrides ks, const void *v, AttentionStrides vs,
                         const void *out, AttentionStrides os, const void *dout,
                         AttentionStrides dos, const float *lse, void *dq, AttentionStrides dqs,
                         void *dk, AttentionStrides dks, void *dv, AttentionStrides dvs,
                         void *scratch, float scale, bool causal, cudaStream_t stream,
                         float *amax = nullptr, int amaxOf = 0,
                         AttentionKernels kernels = AttentionKernels::Mma,
                         const AttentionMask &mask = {}, const AttentionGradSums &sums = {},
                         const AttentionGradRotary &rotary = {});

//===----------------------------------------------------------------------===//
// gemm_sm90.cu: tc's own sm_90a GEMM with the GELU epilogues
//===----------------------------------------------------------------------===//

/// What ownGemm computes after the product acc = a b^T (fp32):
///   GeluAux: aux = bf16(acc + bias) (bias [n], or none when null), out =
///            gelu(aux) (cuBLASLt's GELU_AUX_BIAS / GELU_AUX; the GELU
///            of the stored bf16 pre-activation; the tanh form's tanh by
///            the MUFU's tanh.approx, relative error ~2^-11);
///   DGelu:   out = bf16(acc) * gelu'(aux) (aux read; the product
///            rounded to bf16 first, as a bf16 GEMM followed by the GELU
///            backward kernel has it).
/// gelu is the tanh form, or with `exact` 0.5 x (1 + erf(x / sqrt 2)).
enum class OwnGemmEpilogue { GeluAux, DGelu };

/// One ownGemm problem: a [m, k] row-major (K contiguous), b [n, k] when
/// bKMajor (a Linear weight read as rhs^T) else [k, n], out and aux [m, n],
/// all bf16; bias bf16 [n] or null (GeluAux only).
struct OwnGemmArgs {
  OwnGemmEpilogue epilogue = OwnGemmEpilogue::GeluAux;
  const void *a = nullptr, *b = nullptr;
  bool bKMajor = true;
  bool exact = false; // the exact (erf) GELU, else the tanh form
  const void *bias = nullptr;
  void *aux = nullptr; // GeluAux: written; DGelu: read
  void *out = nullptr;
  int64_t m = 0, n = 0, k = 0;
};

/// True when the current GPU runs ownGemm (compute capability 9.0: H100,
/// H200) and the driver has cuTensorMapEncodeTiled.
bool ownGemmAvailable();
/// True when ownGemm takes the sizes: m % 128, n % 256, k % 64 (its
/// 128x256x64 tiles, no edge handling), all positive and below 2^31.
bool ownGemmShapeFits(int64_t m, int64_t n, int64_t k);
/// out (and GeluAux's aux) of `g` on `stream`: a persistent warp-specialised
/// kernel (TMA, wgmma, one block an SM over 128x256 tiles) that keeps each
/// tile in shared memory and does the epilogue's GELU / DGELU during the
/// next tile's products (gemm_sm90.cuh's resident form). InvalidArgument
/// for sizes ownGemmShapeFits refuses or pointers not 16-byte aligned,
/// Unimplemented where ownGemmAvailable() is false. Deterministic. out and
/// aux may be the same buffer for DGelu (each box of aux is read before
/// that box of out is written), not for GeluAux.
Status ownGemm(const OwnGemmArgs &g, cudaStream_t stream);

} // namespace tc::rt::cuda

#endif // TC_RUNTIME_CUDA_KERNELS_KERNELS_H
