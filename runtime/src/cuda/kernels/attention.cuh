//===- attention.cuh - the two attention paths attention.cu picks from ----===//
//
// Internal to runtime/src/cuda/kernels. attention.cu checks the arguments
// and chooses a path (the design of both is in its banner); the flash path
// (attention_flash.cu: bf16 or f16 mma.sync, d == dv in {32, 64, 128},
// 16-byte aligned operands) and the generic path (attention_generic.cu: f32,
// bf16 or f16, one warp per row) launch their kernels on the given stream and return
// checkLaunch's status. Shapes are [batch, heads, t, d] with the strides of
// AttentionStrides; lse and the D = rowsum(dout * out) scratch are fp32
// [batch, heads, tq].
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_CUDA_KERNELS_ATTENTION_CUH
#define TC_RUNTIME_CUDA_KERNELS_ATTENTION_CUH

#include "runtime/src/cuda/kernels/common.cuh"
#include "runtime/src/cuda/kernels/kernels.h"

namespace tc::rt::cuda::attn {

using kern::bf16;
using kern::f16;

using kern::kLog2e;
constexpr int kMaxHeadDim = 256;

/// The flash path's operands (T = bf16 or f16) and sizes (int: checkShape
/// bounds them).
template <class T> struct FastParams {
  const T *q, *k, *v, *o, *dout;
  T *out, *dq, *dk, *dv;
  const float *lseIn;
  float *lse, *dd;
  AttentionStrides qs, ks, vs, os, dos, dqs, dks, dvs;
  int batch, heads, kvHeads, group, tq, tk;
  float scale, scaleLog2; // scale and scale * log2(e)
  bool causal;
  /// When non-null (zeroed before the launch): atomicMax of the bits of |x|
  /// (absBits) over the stored out (forward) or the gradients amaxOf names
  /// (kAmaxOfDq, kAmaxOfDk, kAmaxOfDv).
  unsigned *amax;
  int amaxOf;
  /// The key mask (AttentionMask): [batch, tk] bytes or null, and the fill;
  /// 1 / scale (0 for scale 0), averagedRaw's.
  const uint8_t *keys;
  float fill, invScale;
  /// AttentionGradSums' partials (null: none): the flash backward kernels
  /// write the f32 column sums of the rows each block stores, the block of
  /// batch b, row chunk c (its rows) and head h at csQ (dq) or csK / csV (dk,
  /// dv) + (b chunks + c) csRow{Q,KV} + h csHead: rows of [heads][d] (dq) and
  /// [kvHeads][d] (dk, dv) in matrices of their own, or of one matrix
  /// [batch chunks][heads d + 2 kvHeads d] whose columns lie as the output's
  /// do (csHead d, or 3 d with the heads interleaved; gradSumParts lays them
  /// out).
  float *csQ, *csK, *csV;
  int csRowQ, csRowKV, csHead;
  /// AttentionGradRotary's, taken by the flash backward kernels (rotHalf a
  /// multiple of 8): the gradients rotOf names (kAmaxOfDq, kAmaxOfDk bits)
  /// rotated by rotCos / rotSin [batch, t, rotHalf] before they are stored.
  const T *rotCos, *rotSin;
  int rotHalf, rotOf;
};

/// The amax of the gradients of p.amaxOf's `bits` (any of them), or null.
/// Host side too: the flash launchers pick their kernels' Amax by it.
template <class P> __host__ __device__ __forceinline__ unsigned *gradAmax(const P &p, int bits) {
  return p.amaxOf & bits ? p.amax : nullptr;
}

/// out [tq, d] and lse of every (batch, head) with head dim p's d, which
/// must be 32, 64 or 128.
template <class T> Status flashForward(const FastParams<T> &p, int64_t d, cudaStream_t stream);
/// dq, dk, dv (and D into p.dd) for head dim d in {32, 64, 128}; needs
/// tq > 0 and tk > 0. With sums.out, p.csQ is the partials' scratch
/// (attentionBackwardScratchBytes' part after D) and the column sums are
/// written (finishGradSums).
template <class T>
Status flashBackward(const FastParams<T> &p, int64_t d, cudaStream_t stream,
                     const AttentionGradSums &sums = {});

/// The flash path's algorithm on sm_90a warpgroup MMA (attention_wgmma.cu):
/// head dim d in {64, 128}; the caller checks wgmmaAttentionAvailable().
template <class T> Status wgmmaForward(const FastParams<T> &p, int64_t d, cudaStream_t stream);
template <class T> Status wgmmaBackward(const FastParams<T> &p, int64_t d, cudaStream_t stream);

/// Where AttentionGradSums' f32 partials lie in the scratch: rows of
/// row chunks (chunksQ a batch for dq, chunksK for dk / dv) of dq's [heads d],
/// dk's [kvHeads d] and dv's [kvHeads dv] columns. Packed when the chunks
/// agree and the output's columns of the three gradients tile one range
/// (adjacent in the order dq, dk, dv, or heads interleaved, headStride): one
/// matrix whose rows hold all three as the output does from column `base`
/// (summed in one launch); else three matrices one after the other. Head h
/// of a gradient at + h head{Q,K,V}.
struct GradSumParts {
  float *q, *k, *v;
  int64_t rowQ, rowK, rowV; // row strides, floats
  int64_t headQ, headK, headV; // head strides, floats
  int64_t base;             // packed: the output column of a row's first
  int64_t chunksQ, chunksK;
  bool packed;
};
GradSumParts gradSumParts(const AttentionShape &s, float *part, int64_t chunksQ, int64_t chunksK,
                          const AttentionGradSums &sums);
/// The partials of the paths whose kernels do not sum (attention_sums.cu):
/// the column sums of every chunk of kAttentionColumnSumRows rows of x
/// [batch, heads, t, d] (strides st) as stored, chunk c of batch b's head h
/// at part + (b ceil(t / 64) + c) row + h head.
template <class T>
Status gradChunkSums(const T *x, AttentionStrides st, int64_t batch, int64_t heads, int64_t t,
                     int64_t d, float *part, int64_t row, int64_t head, cudaStream_t stream);
/// Folds the max |x| of x [batch, heads, t, d] (strides st) as stored into
/// *amax (zeroed before, combined by atomicMax on the bits, as the kernels'
/// own amaxes): for the paths that take none (cuDNN's out and gradients).
template <class T>
Status storedAmax(const T *x, AttentionStrides st, int64_t batch, int64_t heads, int64_t t,
                  int64_t d, float *amax, cudaStream_t stream);
/// AttentionGradSums' output from the partials `parts`: each column's chunks
/// added in a fixed order (sumColumnPartials), rounded to T; 0 for no rows.
/// Rotates the stored gradient x [batch, heads, t, d] (strides st) in place
/// as AttentionGradRotary says (the paths whose kernels do not rotate).
template <class T>
Status rotateStored(T *x, AttentionStrides st, int64_t batch, int64_t heads, int64_t t,
                    const T *cos, const T *sin, int64_t half, cudaStream_t stream);
template <class T>
Status finishGradSums(const AttentionShape &s, const GradSumParts &parts,
                      const AttentionGradSums &sums, cudaStream_t stream);

/// The generic path's operands (T = float, bf16 or f16) and sizes.
template <class T> struct GenericParams {
  const T *q, *k, *v, *o, *dout;
  T *out, *dq, *dk, *dv;
  const float *lseIn;
  float *lse, *dd;
  AttentionStrides qs, ks, vs, os, dos, dqs, dks, dvs;
  int64_t batch, heads, kvHeads, group, tq, tk, d, dv_;
  float scale;
  bool causal;
  unsigned *amax; ///< as FastParams'
  int amaxOf;
  const uint8_t *keys; ///< as FastParams'
  float fill;
};

//===----------------------------------------------------------------------===//
// Key (padding) masks, both paths
//===----------------------------------------------------------------------===//
//
// With a finite fill, a row that sees no visible key (all rows of a batch
// with none; with causal, the rows before the batch's first visible key:
// left padding) attends to every key with the scores (scale s + fill) - fill:
// the rows [0, averagedRows) of the batch. Every other row skips its hidden
// keys (a finite fill <= -1e4 weighs them exactly 0 beside a visible key),
// and with fill -inf no row averages: a row with no visible key is 0.

/// The rows [0, n) of a batch whose first visible key is `first` (tk: none)
/// that attend to every key (see above); 0 with fill -inf.
__host__ __device__ __forceinline__ int averagedRows(int first, int tq, int tk, bool causal,
                                                     float fill) {
  if (fill == -INFINITY)
    return 0;
  if (first >= tk)
    return tq;
  return causal ? (first < tq ? first : tq) : 0;
}

/// An averaged row's score (scale s + fill) - fill of the raw score s
/// (q . k), f32 as written: the generic kernels' scaled score.
__device__ __forceinline__ float averagedScaled(float s, float scale, float fill) {
  return __fadd_rn(__fmaf_rn(scale, s, fill), -fill);
}
/// The same in units of the raw score (the tensor-core kernels scale it
/// with the others): averagedScaled * invScale (FastParams::invScale: 1 /
/// scale, 0 for scale 0, whose scores are all 0 anyway); the forward and
/// the backward compute it alike.
__device__ __forceinline__ float averagedRaw(float s, float scale, float invScale, float fill) {
  return __fmul_rn(averagedScaled(s, scale, fill), invScale);
}

/// out and (if p.lse) lse, one warp per query row.
template <class T> Status genericForward(const GenericParams<T> &p, cudaStream_t stream);
/// D into p.dd, then dk, dv and dq, one warp per key or query row; tq == 0
/// or tk == 0 gives zero gradients.
template <class T> Status genericBackward(const GenericParams<T> &p, cudaStream_t stream);

} // namespace tc::rt::cuda::attn

#endif // TC_RUNTIME_CUDA_KERNELS_ATTENTION_CUH
