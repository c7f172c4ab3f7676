//===- attention.cu - fused scaled-dot-product attention (flash) ----------===//
//
// out = softmax(scale * q k^T + causal mask) v without materialising the
// [tq, tk] scores, and its backward, in two implementations:
//
// Fast path (attention_flash.cu): bf16 or f16 with d == dv in {32, 64,
// 128}, 16-byte aligned base pointers, every stride a multiple of 8
// elements, a positive scale (forward), on sm_80+: FlashAttention-2 on mma.sync (bf16 or f16 in, fp32
// accumulate). Generic path (attention_generic.cu): everything else, f32
// storage (fp32 FMA math, never TF32) and bf16/f16 with other head dims or
// layouts; one warp per row, correct, not fast. This file checks the
// arguments and picks the path.
//
// Both keep lse = log(sum(exp(scale * s - max))) + max per query row (natural
// log) and the backward recomputes P = exp(scale * s - lse) from it. A key
// (padding) mask (AttentionMask; its rows with no visible key in
// attention.cuh) runs on both, never on the wgmma kernels.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "runtime/src/cuda/cudnn/loader.h"
#include "runtime/src/cuda/kernels/attention.cuh"

namespace tc::rt::cuda {

using namespace attn;

namespace {

using namespace kern;

/// Sizes and pointers every launcher checks first. `empty` is set when there
/// is nothing to compute (batch or heads 0).
Status checkShape(const char *what, const AttentionShape &s, bool *empty) {
  TC_RETURN_IF_ERROR(requireGpu());
  auto bad = [&](const std::string &msg) {
    return invalidArgument(std::string(what) + ": " + msg);
  };
  if (s.batch < 0 || s.heads < 0 || s.kvHeads < 0 || s.tq < 0 || s.tk < 0 || s.d < 0 || s.dv < 0)
    return bad("negative size");
  if (s.d > kMaxHeadDim || s.dv > kMaxHeadDim)
    return bad("head dims d = " + std::to_string(s.d) + ", dv = " + std::to_string(s.dv) +
               " must be at most " + std::to_string(kMaxHeadDim));
  if (s.heads > 0 && (s.kvHeads <= 0 || s.heads % s.kvHeads != 0))
    return bad("heads = " + std::to_string(s.heads) + " is not a multiple of kvHeads = " +
               std::to_string(s.kvHeads));
  if (s.tq > INT32_MAX / 2 || s.tk > INT32_MAX / 2 || s.batch * s.heads > INT32_MAX / 64 ||
      s.batch * s.heads * s.tq > INT32_MAX || s.batch * s.kvHeads * s.tk > INT32_MAX)
    return bad("too large (more than 2^31 rows)");
  *empty = s.batch == 0 || s.heads == 0;
  return Status::ok();
}

bool aligned16Strides(const void *p, AttentionStrides st) {
  return aligned16(p) && st.batch % 8 == 0 && st.head % 8 == 0 && st.row % 8 == 0;
}

/// True when the current GPU has bf16 and f16 mma.sync.m16n8k16 (sm_80+).
bool hasMma16() {
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
    return false;
  return major >= 8;
}

bool fastHeadDim(const AttentionShape &s) {
  return s.d == s.dv && (s.d == 32 || s.d == 64 || s.d == 128);
}

/// True when `kernels` asks for the sm_90a kernels and they run here (an
/// H100/H200, d in {64, 128}, no key mask); the flash path's other checks
/// hold already.
bool useWgmma(AttentionKernels kernels, const AttentionShape &s, const AttentionMask &mask) {
  return kernels == AttentionKernels::Wgmma && (s.d == 64 || s.d == 128) && !mask.keys &&
         wgmmaAttentionAvailable();
}

/// Whether the forward goes to cuDNN first (AttentionKernels::Cudnn's cases;
/// the caller has checked the fast path's dtype, alignment and scale).
bool useCudnn(AttentionKernels kernels, const AttentionShape &s, const AttentionMask &mask,
              bool causal) {
  return kernels == AttentionKernels::Cudnn && (s.d == 64 || s.d == 128) && s.dv == s.d &&
         !mask.keys && (!causal || s.tq == s.tk);
}

/// cuDNN's deterministic backward needs a [batch, heads, tq, tk] bf16
/// workspace: the scratch's (rt::attentionLibraryWorkspaceBytes, planned)
/// for the whole batch where it holds what the plan asks; else the plugin's
/// own, outside the memory plan, the batch in chunks whose workspace stays
/// under this.
constexpr int64_t kCudnnBackwardWorkspaceBytes = int64_t(128) << 20;

/// The batches a chunk of the backward on cuDNN takes without the scratch's
/// workspace (their [heads, tq, tk] bf16 workspaces and 16 MiB besides under
/// the cap; at least 1, which the plugin refuses where one passes it), or 0
/// where the backward does not go to cuDNN: head dim 128 only (at 64 tc's
/// kernels are as fast: bench/RESULTS.md, stop 42), no key mask, causal only
/// with tq == tk (rt::attentionBackwardOnLibrary, the cases
/// rt::attentionLibraryWorkspaceBytes plans). (An amax of the gradients is
/// taken after it, storedAmax.)
int64_t cudnnBackwardChunk(AttentionKernels kernels, const AttentionShape &s,
                           const AttentionMask &mask, bool causal) {
  if (kernels != AttentionKernels::Cudnn ||
      !rt::attentionBackwardOnLibrary(s.tq, s.tk, s.d, s.dv, mask.keys != nullptr, causal))
    return 0;
  return std::max<int64_t>(
      1, (kCudnnBackwardWorkspaceBytes - (int64_t(16) << 20)) / (s.heads * s.tq * s.tk * 2));
}

/// tc's [batch, head, row] strides as the plugin's arrays.
void cudnnStrides(const AttentionStrides &st, int64_t *to) {
  to[0] = st.batch, to[1] = st.head, to[2] = st.row;
}

TcCudnnAttentionForward cudnnForwardArgs(int dtype, const AttentionShape &s, const void *q,
                                         AttentionStrides qs, const void *k, AttentionStrides ks,
                                         const void *v, AttentionStrides vs, void *out,
                                         AttentionStrides os, float *lse, float scale,
                                         bool causal) {
  TcCudnnAttentionForward a{};
  a.dtype = dtype, a.causal = causal ? 1 : 0;
  a.batch = s.batch, a.heads = s.heads, a.kvHeads = s.kvHeads, a.tq = s.tq, a.tk = s.tk;
  a.d = s.d, a.scale = scale;
  cudnnStrides(qs, a.qStride), cudnnStrides(ks, a.kStride);
  cudnnStrides(vs, a.vStride), cudnnStrides(os, a.oStride);
  a.q = q, a.k = k, a.v = v, a.out = out, a.lse = lse;
  return a;
}

/// The key mask's fill: -inf or finite and at most kAttentionMaxFiniteFill.
Status checkMask(const char *what, const AttentionMask &mask) {
  if (validAttentionMaskFill(mask.fill))
    return Status::ok();
  return invalidArgument(std::string(what) + ": the key mask's fill must be -inf or at most " +
                         std::to_string(kAttentionMaxFiniteFill) + ", got " +
                         std::to_string(mask.fill));
}

template <class T>
GenericParams<T> genericParams(const AttentionShape &s, float scale, bool causal,
                               const AttentionMask &mask) {
  GenericParams<T> g{};
  g.batch = s.batch, g.heads = s.heads, g.kvHeads = s.kvHeads, g.group = s.heads / s.kvHeads;
  g.tq = s.tq, g.tk = s.tk, g.d = s.d, g.dv_ = s.dv;
  g.scale = scale;
  g.causal = causal;
  g.keys = mask.keys, g.fill = mask.fill;
  return g;
}

template <class T>
FastParams<T> fastParams(const AttentionShape &s, float scale, bool causal,
                         const AttentionMask &mask) {
  FastParams<T> f{};
  f.batch = static_cast<int>(s.batch), f.heads = static_cast<int>(s.heads);
  f.kvHeads = static_cast<int>(s.kvHeads), f.group = static_cast<int>(s.heads / s.kvHeads);
  f.tq = static_cast<int>(s.tq), f.tk = static_cast<int>(s.tk);
  f.scale = scale, f.scaleLog2 = scale * kLog2e;
  f.invScale = scale != 0.0f ? 1.0f / scale : 0.0f;
  f.causal = causal;
  f.keys = mask.keys, f.fill = mask.fill;
  return f;
}

/// AttentionGradSums' interleaved heads (headStride): heads == kvHeads,
/// tq == tk (the partials of dq, dk and dv in one matrix) and the three
/// gradients' columns of a head tiling [0, headStride) from the least offset.
Status checkInterleavedSums(const AttentionShape &s, const AttentionGradSums &sums) {
  const int64_t widths[3] = {s.d, s.d, s.dv};
  const int64_t base = std::min({sums.offsets[0], sums.offsets[1], sums.offsets[2]});
  int order[3] = {0, 1, 2};
  std::sort(order, order + 3, [&](int a, int b) { return sums.offsets[a] < sums.offsets[b]; });
  int64_t end = base;
  for (int j : order) {
    if (sums.offsets[j] != end)
      break;
    end += widths[j];
  }
  if (s.heads != s.kvHeads || s.tq != s.tk || end - base != sums.headStride)
    return invalidArgument(
        "attentionBackward: column sums with interleaved heads (head stride " +
        std::to_string(sums.headStride) + ") need heads == kvHeads (" + std::to_string(s.heads) +
        ", " + std::to_string(s.kvHeads) + "), tq == tk (" + std::to_string(s.tq) + ", " +
        std::to_string(s.tk) + ") and dq, dk, dv's columns (offsets " +
        std::to_string(sums.offsets[0]) + ", " + std::to_string(sums.offsets[1]) + ", " +
        std::to_string(sums.offsets[2]) + "; widths " + std::to_string(s.d) + ", " +
        std::to_string(s.d) + ", " + std::to_string(s.dv) + ") to tile the head stride");
  return Status::ok();
}

} // namespace

AttentionStrides contiguousAttentionStrides(int64_t heads, int64_t t, int64_t d) {
  return {heads * t * d, t * d, d};
}

Status attentionForward(DType dt, const AttentionShape &s, const void *q, AttentionStrides qs,
                        const void *k, AttentionStrides ks, const void *v, AttentionStrides vs,
                        void *out, AttentionStrides os, float *lse, float scale, bool causal,
                        cudaStream_t stream, float *amax, AttentionKernels kernels,
                        const AttentionMask &mask) {
  bool empty = false;
  TC_RETURN_IF_ERROR(checkShape("attentionForward", s, &empty));
  TC_RETURN_IF_ERROR(checkMask("attentionForward", mask));
  TC_RETURN_IF_ERROR(zeroAmax(amax, stream)); // the kernels' atomicMax combines into it
  auto *amaxBits = reinterpret_cast<unsigned *>(amax);
  if (empty || s.tq == 0)
    return Status::ok();
  if ((s.d > 0 && (!q || (s.tk > 0 && !k))) || (s.dv > 0 && (!out || (s.tk > 0 && !v))))
    return invalidArgument("attentionForward: null pointer");
  const AttentionMask m = s.tk > 0 ? mask : AttentionMask{}; // no keys: nothing to hide
  return dispatchFloat16(dt, "attentionForward", [&](auto tag) -> Status {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, float>) {
      // The fast forward's softmax takes the max of the raw scores: scale > 0.
      if (s.tk > 0 && fastHeadDim(s) && scale > 0.0f && aligned16Strides(q, qs) &&
          aligned16Strides(k, ks) && aligned16Strides(v, vs) && aligned16Strides(out, os) &&
          hasMma16()) {
        if (useCudnn(kernels, s, m, causal)) {
          bool taken = false;
          TC_RETURN_IF_ERROR(cudnnAttentionForward(
              cudnnForwardArgs(std::is_same_v<T, bf16> ? 0 : 1, s, q, qs, k, ks, v, vs, out, os,
                               lse, scale, causal),
              stream, &taken));
          // cuDNN computes no amax: one asked for is taken over the stored
          // out afterwards, the same bits as tc's kernels take.
          if (taken)
            return amax ? storedAmax(static_cast<const T *>(out), os, s.batch, s.heads, s.tq,
                                     s.dv, amax, stream)
                        : Status::ok();
        }
        FastParams<T> p = fastParams<T>(s, scale, causal, m);
        p.q = static_cast<const T *>(q), p.k = static_cast<const T *>(k);
        p.v = static_cast<const T *>(v), p.out = static_cast<T *>(out), p.lse = lse;
        p.qs = qs, p.ks = ks, p.vs = vs, p.os = os;
        p.amax = amaxBits;
        return useWgmma(kernels, s, m) ? wgmmaForward(p, s.d, stream)
                                       : flashForward(p, s.d, stream);
      }
    }
    GenericParams<T> p = genericParams<T>(s, scale, causal, m);
    p.q = static_cast<const T *>(q), p.k = static_cast<const T *>(k);
    p.v = static_cast<const T *>(v), p.out = static_cast<T *>(out), p.lse = lse;
    p.qs = qs, p.ks = ks, p.vs = vs, p.os = os;
    p.amax = amaxBits;
    return genericForward(p, stream);
  });
}

Status attentionBackward(DType dt, const AttentionShape &s, const void *q, AttentionStrides qs,
                         const void *k, AttentionStrides ks, const void *v, AttentionStrides vs,
                         const void *out, AttentionStrides os, const void *dout,
                         AttentionStrides dos, const float *lse, void *dq, AttentionStrides dqs,
                         void *dk, AttentionStrides dks, void *dv, AttentionStrides dvs,
                         void *scratch, float scale, bool causal, cudaStream_t stream,
                         float *amax, int amaxOf, AttentionKernels kernels,
                         const AttentionMask &mask, const AttentionGradSums &sums,
                         const AttentionGradRotary &rotary) {
  bool empty = false;
  TC_RETURN_IF_ERROR(checkShape("attentionBackward", s, &empty));
  TC_RETURN_IF_ERROR(checkMask("attentionBackward", mask));
  if (rotary.of) {
    if (rotary.of & ~(kAmaxOfDq | kAmaxOfDk))
      return invalidArgument("attentionBackward: the rotary's gradients must be dq (1) and / or "
                             "dk (2), got " +
                             std::to_string(rotary.of));
    if (!rotary.cos || !rotary.sin || rotary.half <= 0 || 2 * rotary.half > s.d)
      return invalidArgument("attentionBackward: the rotary needs cos / sin tables and 0 < 2 "
                             "half <= d (half " +
                             std::to_string(rotary.half) + ", d " + std::to_string(s.d) + ")");
    if (amax)
      return invalidArgument("attentionBackward: a rotary of the gradients with an amax is not "
                             "supported");
  }
  if (amax && !rt::validAmaxOf(amaxOf))
    return invalidArgument("attentionBackward: amaxOf must name gradients (bits 1 dq, 2 dk, 4 "
                           "dv), got " +
                           std::to_string(amaxOf));
  if (sums.out && (sums.offsets[0] < 0 || sums.offsets[1] < 0 || sums.offsets[2] < 0))
    return invalidArgument("attentionBackward: negative column-sum offsets");
  if (sums.out && sums.headStride)
    TC_RETURN_IF_ERROR(checkInterleavedSums(s, sums));
  TC_RETURN_IF_ERROR(zeroAmax(amax, stream));
  bool rowsQ = s.tq > 0, rowsK = s.tk > 0;
  if (empty) { // the column sums of no rows: 0
    if (!sums.out)
      return Status::ok();
    return dispatchFloat16(dt, "attentionBackward", [&](auto tag) -> Status {
      AttentionShape none{0, s.heads, s.kvHeads, 0, 0, s.d, s.dv};
      return finishGradSums<decltype(tag)>(none, gradSumParts(none, nullptr, 0, 0, sums), sums,
                                           stream);
    });
  }
  if (sums.out && !scratch)
    return invalidArgument("attentionBackward: null scratch for the column sums");
  if ((rowsQ && s.d > 0 && (!q || !dq)) || (rowsK && s.d > 0 && (!k || !dk)) ||
      (rowsK && s.dv > 0 && (!v || !dv)) || (rowsQ && s.dv > 0 && (!out || !dout)) ||
      (rowsQ && rowsK && (!lse || !scratch)))
    return invalidArgument("attentionBackward: null pointer");
  float *dd = static_cast<float *>(scratch);
  // The column sums' partials follow D in the scratch.
  float *parts =
      sums.out ? reinterpret_cast<float *>(static_cast<char *>(scratch) +
                                           attentionBackwardScratchBytes(s.batch, s.heads, s.tq))
               : nullptr;
  const AttentionMask m = rowsK ? mask : AttentionMask{};
  return dispatchFloat16(dt, "attentionBackward", [&](auto tag) -> Status {
    using T = decltype(tag);
    // The paths whose kernels do not sum: the stored gradients summed after them.
    auto sumsAfter = [&](Status st) -> Status {
      TC_RETURN_IF_ERROR(st);
      if (!sums.out)
        return Status::ok();
      const int64_t rowsPart = rt::kAttentionColumnSumRows;
      const GradSumParts at =
          gradSumParts(s, parts, ceilDiv(s.tq, rowsPart), ceilDiv(s.tk, rowsPart), sums);
      TC_RETURN_IF_ERROR(gradChunkSums(static_cast<const T *>(dq), dqs, s.batch, s.heads, s.tq, s.d,
                                       at.q, at.rowQ, at.headQ, stream));
      TC_RETURN_IF_ERROR(gradChunkSums(static_cast<const T *>(dk), dks, s.batch, s.kvHeads, s.tk,
                                       s.d, at.k, at.rowK, at.headK, stream));
      TC_RETURN_IF_ERROR(gradChunkSums(static_cast<const T *>(dv), dvs, s.batch, s.kvHeads, s.tk,
                                       s.dv, at.v, at.rowV, at.headV, stream));
      return finishGradSums<T>(s, at, sums, stream);
    };
    // The paths whose kernels do not rotate: the stored gradients rotated
    // after them (and summed after that: sumsAfter(rotateAfter(...))).
    auto rotateAfter = [&](Status st) -> Status {
      TC_RETURN_IF_ERROR(st);
      const T *cs = static_cast<const T *>(rotary.cos), *sn = static_cast<const T *>(rotary.sin);
      if ((rotary.of & kAmaxOfDq) && rowsQ && rowsK)
        TC_RETURN_IF_ERROR(rotateStored(static_cast<T *>(dq), dqs, s.batch, s.heads, s.tq, cs, sn,
                                        rotary.half, stream));
      if ((rotary.of & kAmaxOfDk) && rowsQ && rowsK)
        TC_RETURN_IF_ERROR(rotateStored(static_cast<T *>(dk), dks, s.batch, s.kvHeads, s.tk, cs,
                                        sn, rotary.half, stream));
      return Status::ok();
    };
    GenericParams<T> g = genericParams<T>(s, scale, causal, m);
    g.q = static_cast<const T *>(q), g.k = static_cast<const T *>(k);
    g.v = static_cast<const T *>(v), g.o = static_cast<const T *>(out);
    g.dout = static_cast<const T *>(dout), g.lseIn = lse, g.dd = dd;
    g.dq = static_cast<T *>(dq), g.dk = static_cast<T *>(dk), g.dv = static_cast<T *>(dv);
    g.qs = qs, g.ks = ks, g.vs = vs, g.os = os, g.dos = dos, g.dqs = dqs, g.dks = dks, g.dvs = dvs;
    g.amax = reinterpret_cast<unsigned *>(amax), g.amaxOf = amax ? amaxOf : 0;
    if constexpr (!std::is_same_v<T, float>) {
      if (rowsQ && rowsK && fastHeadDim(s) && aligned16Strides(q, qs) &&
          aligned16Strides(k, ks) && aligned16Strides(v, vs) && aligned16Strides(out, os) &&
          aligned16Strides(dout, dos) && aligned16Strides(dq, dqs) &&
          aligned16Strides(dk, dks) && aligned16Strides(dv, dvs) && hasMma16()) {
        FastParams<T> p = fastParams<T>(s, scale, causal, m);
        p.q = g.q, p.k = g.k, p.v = g.v, p.o = g.o, p.dout = g.dout, p.lseIn = lse, p.dd = dd;
        p.dq = g.dq, p.dk = g.dk, p.dv = g.dv;
        p.qs = qs, p.ks = ks, p.vs = vs, p.os = os, p.dos = dos;
        p.dqs = dqs, p.dks = dks, p.dvs = dvs;
        p.amax = g.amax, p.amaxOf = g.amaxOf;
        if (const int64_t chunk = cudnnBackwardChunk(kernels, s, m, causal)) {
          // The whole batch with the scratch's workspace; else batches in
          // chunks (kCudnnBackwardWorkspaceBytes). Where cuDNN does not take
          // a chunk, tc's kernels below redo the whole call.
          TcCudnnAttentionBackward a{};
          a.dtype = std::is_same_v<T, bf16> ? 0 : 1, a.causal = causal ? 1 : 0;
          a.heads = s.heads, a.kvHeads = s.kvHeads;
          a.tq = s.tq, a.tk = s.tk, a.d = s.d, a.scale = scale;
          cudnnStrides(qs, a.qStride), cudnnStrides(ks, a.kStride);
          cudnnStrides(vs, a.vStride), cudnnStrides(os, a.oStride);
          cudnnStrides(dos, a.doStride), cudnnStrides(dqs, a.dqStride);
          cudnnStrides(dks, a.dkStride), cudnnStrides(dvs, a.dvStride);
          const rt::AttentionScratchLayout at = rt::attentionBackwardScratchLayout(
              s.batch, s.heads, s.kvHeads, s.tq, s.tk, s.d, s.dv, sums.out != nullptr,
              m.keys != nullptr, causal);
          if (at.libraryWorkspace) {
            a.workspace = static_cast<char *>(scratch) + at.libraryWorkspace;
            a.workspaceBytes = static_cast<int64_t>(at.total - at.libraryWorkspace);
          }
          bool all = false;
          for (const int64_t step : {at.libraryWorkspace ? s.batch : int64_t(0), chunk}) {
            if (all || step == 0)
              continue;
            all = true;
            for (int64_t b0 = 0; b0 < s.batch && all; b0 += step) {
              a.batch = std::min(step, s.batch - b0);
              a.q = g.q + b0 * qs.batch, a.k = g.k + b0 * ks.batch, a.v = g.v + b0 * vs.batch;
              a.out = g.o + b0 * os.batch, a.dout = g.dout + b0 * dos.batch;
              a.lse = lse + b0 * s.heads * s.tq;
              a.dq = g.dq + b0 * dqs.batch, a.dk = g.dk + b0 * dks.batch;
              a.dv = g.dv + b0 * dvs.batch;
              bool taken = false;
              TC_RETURN_IF_ERROR(
                  cudnnAttentionBackward(a, stream, kCudnnBackwardWorkspaceBytes, &taken));
              all = taken;
            }
          }
          if (all) {
            // cuDNN takes no amax: over the stored gradients amaxOf names,
            // the same bits as tc's kernels take as they store them.
            const struct {
              int bit;
              const T *x;
              AttentionStrides st;
              int64_t heads, t, d;
            } grads[] = {{kAmaxOfDq, g.dq, dqs, s.heads, s.tq, s.d},
                         {kAmaxOfDk, g.dk, dks, s.kvHeads, s.tk, s.d},
                         {kAmaxOfDv, g.dv, dvs, s.kvHeads, s.tk, s.dv}};
            for (const auto &gr : grads)
              if (amax && (amaxOf & gr.bit))
                TC_RETURN_IF_ERROR(storedAmax(gr.x, gr.st, s.batch, gr.heads, gr.t, gr.d, amax,
                                              stream));
            return sumsAfter(rotateAfter(Status::ok()));
          }
        }
        if (useWgmma(kernels, s, m))
          return sumsAfter(rotateAfter(wgmmaBackward(p, s.d, stream)));
        if (rotary.of) { // no amax (above)
          if (rotary.half % 8 != 0)
            return sumsAfter(rotateAfter(flashBackward(p, s.d, stream)));
          p.rotCos = static_cast<const T *>(rotary.cos), p.rotSin = static_cast<const T *>(rotary.sin);
          p.rotHalf = static_cast<int>(rotary.half), p.rotOf = rotary.of;
          // The kernels sum the rows they rotate and store, but for those
          // with a key mask (no such instance: summed after them).
          if (!sums.out || m.keys)
            return sumsAfter(flashBackward(p, s.d, stream));
          p.csQ = parts;
          return flashBackward(p, s.d, stream, sums);
        }
        // The flash kernels sum the rows they store, but for those with an
        // amax or a key mask (no such instance: summed after them).
        if (!sums.out || amax || m.keys)
          return sumsAfter(flashBackward(p, s.d, stream));
        p.csQ = parts;
        return flashBackward(p, s.d, stream, sums);
      }
    }
    return sumsAfter(rotateAfter(genericBackward(g, stream)));
  });
}

} // namespace tc::rt::cuda
