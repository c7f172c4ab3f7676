//===- library_abi.cpp - the library-call ABI, written once ---------------===//
#include "runtime/src/schema/library_abi.h"
#include "runtime/src/schema/block_scale_layout.h"

#include "runtime/src/schema/block_scale_layout.h"

#include <algorithm>

namespace tc::rt {

namespace {
int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t align64(int64_t n) { return ceilDiv(n, 64) * 64; }
int64_t intOf(const LibraryInts &ints, const char *name) {
  auto it = ints.find(name);
  return it == ints.end() ? 0 : it->second;
}
} // namespace

size_t normBackwardScratchBytes(int64_t rows, int64_t cols, bool colSum) {
  if (rows <= 0 || cols <= 0)
    return 0;
  return static_cast<size_t>((colSum ? 3 : 2) * ceilDiv(rows, normBackwardChunkRows(cols)) * cols) *
         sizeof(float);
}

size_t crossEntropyScratchBytes(int64_t rows) {
  // [0]: count of rows not ignored; [64...]: per-row losses when the caller
  // does not want them (keeps the losses 256-byte aligned).
  return static_cast<size_t>(64 + (rows > 0 ? rows : 0)) * sizeof(float);
}

size_t embeddingBackwardScratchBytes(int64_t count, int64_t vocab) {
  if (count <= 0 || vocab <= 0)
    return 0;
  int64_t chunks = ceilDiv(count, kEmbeddingChunk);
  return static_cast<size_t>(align64(chunks * vocab) + 2 * align64(vocab) + align64(count)) *
         sizeof(int32_t);
}

size_t attentionBackwardScratchBytes(int64_t batch, int64_t heads, int64_t tq) {
  int64_t rows = std::max<int64_t>(1, batch * heads * tq);
  return static_cast<size_t>(ceilDiv(rows * 4, 256) * 256);
}

bool attentionBackwardOnLibrary(int64_t tq, int64_t tk, int64_t d, int64_t dv, bool keyMask,
                                bool causal) {
  return d == 128 && dv == 128 && !keyMask && (!causal || tq == tk);
}

int64_t attentionLibraryWorkspaceBytes(int64_t batch, int64_t heads, int64_t tq, int64_t tk,
                                       int64_t d, int64_t dv, bool keyMask, bool causal) {
  if (!attentionBackwardOnLibrary(tq, tk, d, dv, keyMask, causal) || batch <= 0 || heads <= 0 ||
      tq <= 0 || tk <= 0)
    return 0;
  const int64_t bytes = batch * heads * tq * tk * 2 + (int64_t(16) << 20);
  return bytes <= kMaxPlannedAttentionWorkspaceBytes ? bytes : 0;
}

AttentionScratchLayout attentionBackwardScratchLayout(int64_t batch, int64_t heads, int64_t kvHeads,
                                                      int64_t tq, int64_t tk, int64_t d, int64_t dv,
                                                      bool colSums, bool keyMask, bool causal) {
  auto nonneg = [](int64_t v) { return std::max<int64_t>(0, v); };
  auto granules = [](int64_t bytes) { return static_cast<size_t>(ceilDiv(bytes, 256) * 256); };
  AttentionScratchLayout l;
  l.total = attentionBackwardScratchBytes(batch, heads, tq);
  if (colSums) {
    int64_t parts =
        nonneg(batch) *
        (ceilDiv(nonneg(tq), kAttentionColumnSumRows) * nonneg(heads) * nonneg(d) +
         ceilDiv(nonneg(tk), kAttentionColumnSumRows) * nonneg(kvHeads) * (nonneg(d) + nonneg(dv)));
    l.colSums = l.total;
    l.total += granules(parts * 4);
  }
  if (int64_t ws = attentionLibraryWorkspaceBytes(batch, heads, tq, tk, d, dv, keyMask, causal)) {
    l.libraryWorkspace = l.total;
    l.total += granules(ws);
  }
  return l;
}

size_t attentionBackwardScratchBytes(int64_t batch, int64_t heads, int64_t kvHeads, int64_t tq,
                                     int64_t tk, int64_t d, int64_t dv, bool colSums, bool keyMask,
                                     bool causal) {
  return attentionBackwardScratchLayout(batch, heads, kvHeads, tq, tk, d, dv, colSums, keyMask,
                                        causal)
      .total;
}

size_t sumSquaresScratchBytes() { return kMaxNormBlocks * sizeof(float); }

int64_t fp8BlockGemmScaleFloats(int64_t rows, int64_t cols, int64_t blocks, bool transposed) {
  auto blocks128 = [](int64_t v) { return (v + 127) / 128; };
  auto up4 = [](int64_t v) { return (v + 3) / 4 * 4; };
  switch (blocks) {
  case 0:
    return transposed ? 0 : blocks128(cols) * up4(rows);
  case 1:
    return transposed ? 0 : blocks128(rows) * up4(cols);
  case 2:
    return transposed ? blocks128(cols) * up4(blocks128(rows))
                      : blocks128(rows) * up4(blocks128(cols));
  default:
    return 0;
  }
}

int64_t mxfp8GemmScaleBytes(int64_t rows, int64_t cols, bool alongRows) {
  return blockScaleLayoutBytes(alongRows ? cols : rows, ceilDiv(alongRows ? rows : cols, 32));
}

int64_t fp4PackedRowBytes(int64_t len, bool mxfp4) {
  int64_t block = mxfp4 ? 32 : 16;
  return (len + block - 1) / block * block / 2;
}

int64_t fp4ScaleLayoutBytes(int64_t rows, int64_t len, bool mxfp4) {
  int64_t block = mxfp4 ? 32 : 16;
  return blockScaleLayoutBytes(rows, (len + block - 1) / block);
}

size_t fp8QuantizeScratchBytes(int64_t scales) {
  return static_cast<size_t>(ceilDiv(std::max<int64_t>(1, scales) * 4, 256) * 256);
}
size_t fp8ColumnSumScratchBytes(int64_t rows, int64_t cols) {
  return static_cast<size_t>(ceilDiv(ceilDiv(rows, kFp8ColumnSumRows) * cols * 4, 256) * 256);
}

const char *libraryAttrKindName(LibraryAttrKind k) {
  switch (k) {
  case LibraryAttrKind::Int:
    return "integer";
  case LibraryAttrKind::Bool:
    return "bool";
  case LibraryAttrKind::Float:
    return "float";
  case LibraryAttrKind::Ints:
    return "integer array";
  }
  return "?";
}

bool libraryAttrKindAccepts(LibraryAttrKind want, LibraryAttrKind given) {
  if (want == given)
    return true;
  return given == LibraryAttrKind::Int &&
         (want == LibraryAttrKind::Bool || want == LibraryAttrKind::Float);
}

const LibraryAttrSpec *LibraryCallee::findAttr(const std::string &attr) const {
  for (const LibraryAttrSpec &a : attrs)
    if (attr == a.name)
      return &a;
  return nullptr;
}

namespace {
using K = LibraryAttrKind;

template <class T> std::vector<T> cat(std::vector<T> a, const std::vector<T> &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

size_t normBackwardScratch(const LibraryInts &a) {
  return normBackwardScratchBytes(intOf(a, "rows"), intOf(a, "cols"), intOf(a, "has_col_sum"));
}
size_t crossEntropyScratch(const LibraryInts &a) {
  return crossEntropyScratchBytes(intOf(a, "rows"));
}
size_t embeddingScratch(const LibraryInts &a) {
  return embeddingBackwardScratchBytes(intOf(a, "count"), intOf(a, "vocab"));
}
size_t attentionScratch(const LibraryInts &a) {
  return attentionBackwardScratchBytes(intOf(a, "batch"), intOf(a, "heads"), intOf(a, "kv_heads"),
                                       intOf(a, "tq"), intOf(a, "tk"), intOf(a, "d"),
                                       intOf(a, "dv"), intOf(a, "has_col_sum"),
                                       intOf(a, "has_key_mask"), intOf(a, "causal"));
}
size_t sumSquaresScratch(const LibraryInts &) { return sumSquaresScratchBytes(); }
size_t fp8QuantizeScratch(const LibraryInts &a) {
  size_t amax = fp8QuantizeScratchBytes(intOf(a, "row_scaling")   ? intOf(a, "rows")
                                        : intOf(a, "col_scaling") ? intOf(a, "cols")
                                                                  : 1);
  return amax + (intOf(a, "has_col_sum") ? fp8ColumnSumScratchBytes(intOf(a, "rows"),
                                                                    intOf(a, "cols"))
                                         : 0);
}
size_t fakeQuantizeScratch(const LibraryInts &) { return fp8QuantizeScratchBytes(1); }
size_t nvfp4GemmScratch(const LibraryInts &) { return 256; } // f32 alpha, beta

} // namespace

const std::vector<LibraryCallee> &libraryCallees() {
  // Built on first use (no static initialisation order to depend on).
  static const LibraryAttrSpec kRows{"rows", K::Int, true}, kCols{"cols", K::Int, true};
  static const LibraryAttrSpec kEps{"eps", K::Float, false};
  static const LibraryAttrSpec kHasWeight{"has_weight", K::Bool, false};
  static const LibraryAttrSpec kHasBias{"has_bias", K::Bool, false};
  static const LibraryAttrSpec kHasAmax{"has_amax", K::Bool, false};
  static const LibraryAttrSpec kHasDResidual{"has_dresidual", K::Bool, false};
  static const LibraryAttrSpec kHasColSum{"has_col_sum", K::Bool, false};
  static const LibraryAttrSpec kIgnoreIndex{"ignore_index", K::Int, false};
  static const LibraryAttrSpec kGradScale{"grad_scale", K::Float, false};
  static const LibraryAttrSpec kElements{"elements", K::Int, true};
  static const std::vector<LibraryAttrSpec> kEmbeddingAttrs = {
      {"count", K::Int, true}, {"vocab", K::Int, true}, {"dim", K::Int, true}};
  // q [batch, heads, tq, d], k [batch, kv_heads, tk, d], v [batch, kv_heads, tk, dv];
  // per operand [batch, head, row] element strides (contiguous when absent).
  static const std::vector<LibraryAttrSpec> kAttentionAttrs = {
      {"batch", K::Int, true},        {"heads", K::Int, true},       {"kv_heads", K::Int, true},
      {"tq", K::Int, true},           {"tk", K::Int, true},          {"d", K::Int, true},
      {"dv", K::Int, true},           {"scale", K::Float, false},    {"causal", K::Bool, false},
      {"q_strides", K::Ints, false},  {"k_strides", K::Ints, false}, {"v_strides", K::Ints, false},
      {"o_strides", K::Ints, false},
      // The sm_90a kernels (wgmma) where the GPU has them (AttentionKernels::Wgmma).
      {"wgmma", K::Bool, false},
      // A key (padding) mask operand [batch, tk] i1 (AttentionMask) and the
      // fill of hidden scores (-inf when absent; else finite, at most
      // kAttentionMaxFiniteFill).
      {"has_key_mask", K::Bool, false},
      {"mask_fill", K::Float, false}};
  static const std::vector<LibraryAttrSpec> kAttentionGradStrides = {
      {"do_strides", K::Ints, false},
      {"dq_strides", K::Ints, false},
      {"dk_strides", K::Ints, false},
      {"dv_strides", K::Ints, false}};
  static const LibraryAttrSpec kGemmM{"m", K::Int, true}, kGemmN{"n", K::Int, true},
      kGemmK{"k", K::Int, true};
  // x [outer, len, inner] with the blocks along len (fake_quantize, quantize_fp4).
  static const std::vector<LibraryAttrSpec> kFp4Attrs = {
      {"outer", K::Int, true},       {"len", K::Int, true},         {"inner", K::Int, true},
      {"mxfp4", K::Bool, false},     {"blocks2d", K::Bool, false},  {"stochastic", K::Bool, false},
      {"seed", K::Int, false},       {"rng_stream", K::Int, false}};

  // The rms rows take has_bias too (always false: the lowering writes it for
  // both norms); no operand depends on it.
  static const std::vector<LibraryCallee> callees = {
      {"softmax_fwd", {{"x"}}, {{"y"}}, {kRows, kCols, {"log", K::Bool, false}}},
      // amax (has_amax): f32 [1], max |y| with NaN ignored, of the stored
      // values (tc-fuse-fp8-amax: read by the quantize_fp8 of y).
      {"layer_norm_fwd",
       {{"x"}, {"weight", "has_weight"}, {"bias", "has_bias"}},
       {{"y"}, {"mean", nullptr, 1}, {"rstd", nullptr, 1}, {"amax", "has_amax"}},
       {kRows, kCols, kEps, kHasWeight, kHasBias, kHasAmax}},
      // dresidual (has_dresidual): rows of dx's type added to dx (the
      // residual stream's gradient; tc.grad_addend). col_sum (has_col_sum):
      // [cols] of dx's type, the column sums of dx as written (the bias
      // gradient of the Linear layer dx flows into; tc-fuse-bias-grad).
      {"layer_norm_bwd",
       {{"dy"},
        {"x"},
        {"weight", "has_weight"},
        {"mean"},
        {"rstd"},
        {"dresidual", "has_dresidual"}},
       {{"dx"},
        {"dweight", "has_weight"},
        {"dbias", "has_bias"},
        {"col_sum", "has_col_sum"},
        {"scratch"}},
       {kRows, kCols, kHasWeight, kHasBias, kHasDResidual, kHasColSum},
       normBackwardScratch},
      {"rms_norm_fwd",
       {{"x"}, {"weight", "has_weight"}},
       {{"y"}, {"rstd", nullptr, 1}, {"amax", "has_amax"}},
       {kRows, kCols, kEps, kHasWeight, kHasBias, kHasAmax}},
      {"rms_norm_bwd",
       {{"dy"}, {"x"}, {"weight", "has_weight"}, {"rstd"}, {"dresidual", "has_dresidual"}},
       {{"dx"}, {"dweight", "has_weight"}, {"col_sum", "has_col_sum"}, {"scratch"}},
       {kRows, kCols, kHasWeight, kHasBias, kHasDResidual, kHasColSum},
       normBackwardScratch},
      // loss: the f32 mean over the rows not ignored.
      {"cross_entropy_fwd",
       {{"logits"}, {"labels"}},
       {{"loss"}, {"scratch"}},
       {kRows, kCols, kIgnoreIndex},
       crossEntropyScratch},
      // grad: the incoming scalar loss gradient (a runtime value).
      {"cross_entropy_bwd",
       {{"logits"}, {"labels"}, {"grad", nullptr, 1}},
       {{"dlogits"}, {"scratch"}},
       {kRows, kCols, kIgnoreIndex, kGradScale},
       crossEntropyScratch},
      {"cross_entropy_fwd_bwd",
       {{"logits"}, {"labels"}, {"grad", nullptr, 1}},
       {{"loss"}, {"dlogits"}, {"scratch"}},
       {kRows, kCols, kIgnoreIndex, kGradScale},
       crossEntropyScratch},
      {"embedding_fwd", {{"table"}, {"ids"}}, {{"out"}}, kEmbeddingAttrs},
      {"embedding_bwd",
       {{"dout"}, {"ids"}},
       {{"dtable"}, {"scratch"}},
       cat(kEmbeddingAttrs, {{"accumulate", K::Bool, false}}),
       embeddingScratch},
      // lse [batch, heads, tq] f32; amax (has_amax) as the norms', of out,
      // or of the gradients amax_of names (bits 1 dq, 2 dk, 4 dv).
      {"attention_fwd",
       {{"q"}, {"k"}, {"v"}, {"key_mask", "has_key_mask"}},
       {{"out"}, {"lse"}, {"amax", "has_amax"}},
       cat(kAttentionAttrs, {kHasAmax})},
      // col_sum (has_col_sum): the column sums over (batch, t) of the
      // gradients as stored, of their type, dq's column (h, d) at
      // col_sum_offsets[0] + h d + d, dk's at [1] + kvh d + d, dv's at [2] +
      // kvh dv + d: the bias gradient of the fused qkv projection whose
      // gradient dq / dk / dv form (tc-fuse-bias-grad's tc.col_sum); with
      // col_sum_head_stride s (GPT-NeoX's heads interleaved: [heads][q k v]
      // a token) head h's columns at + h s instead (AttentionGradSums).
      {"attention_bwd",
       // rot_cos / rot_sin (has_rotary): the backward's rotary tables [batch,
       // t, R/2] of the gradients' type; the call stores the gradients
       // rotary_of names (1 dq, 2 dk) rotated by them (attentionBackward's
       // AttentionGradRotary).
       {{"q"},
        {"k"},
        {"v"},
        {"out"},
        {"lse"},
        {"dout"},
        {"key_mask", "has_key_mask"},
        {"rot_cos", "has_rotary"},
        {"rot_sin", "has_rotary"}},
       {{"dq"}, {"dk"}, {"dv"}, {"amax", "has_amax"}, {"col_sum", "has_col_sum"}, {"scratch"}},
       cat(kAttentionAttrs, cat(kAttentionGradStrides, {kHasAmax,
                                                        {"amax_of", K::Int, false},
                                                        kHasColSum,
                                                        {"col_sum_offsets", K::Ints, false},
                                                        {"col_sum_head_stride", K::Int, false},
                                                        {"has_rotary", K::Bool, false},
                                                        {"rotary_of", K::Int, false}})),
       attentionScratch},
      {"gelu_fwd", {{"x"}}, {{"y"}}, {kElements}},
      {"gelu_bwd", {{"x"}, {"dy"}}, {{"dx"}}, {kElements}},
      {"cast", {{"x"}}, {{"y"}}, {kElements}},
      {"adamw",
       {{"params"}, {"grads"}, {"exp_avg"}, {"exp_avg_sq"}, {"grad_norm_sq", nullptr, 1}},
       {{"params"}, {"exp_avg"}, {"exp_avg_sq"}},
       {kElements}},
      {"sgd",
       {{"params"}, {"grads"}, {"momentum", nullptr, 1}, {"grad_norm_sq", nullptr, 2}},
       {{"params"}, {"momentum", nullptr, 1}},
       {kElements}},
      // sum: an f32 scalar.
      {"sum_squares", {{"x"}}, {{"sum"}, {"scratch"}}, {kElements}, sumSquaresScratch},
      // tc.quantize into FP8 with f32 scales: x [rows, cols] (f32/bf16), q
      // [rows, cols], scale_inv [1], [rows] (row_scaling) or [cols]
      // (col_scaling), q_t [cols, rows] the transposed copy (has_transpose;
      // per-tensor or per-column scaling), col_sum [cols] the sums of x's
      // columns in x's type (has_col_sum, per-tensor scaling: a bias
      // gradient); amax (has_amax, per-tensor scaling): x's amax (f32 [1],
      // max |x| with NaN ignored) taken by the kernel that wrote x, read
      // instead of an amax pass; the scratch holds the amaxes and the
      // column sums' partials.
      {"quantize_fp8",
       {{"x"}, {"amax", "has_amax"}},
       {{"q"}, {"scale_inv"}, {"q_t", "has_transpose"}, {"col_sum", "has_col_sum"}, {"scratch"}},
       {kRows,
        kCols,
        {"row_scaling", K::Bool, false},
        {"col_scaling", K::Bool, false},
        {"has_transpose", K::Bool, false},
        kHasColSum,
        kHasAmax},
       fp8QuantizeScratch},
      // --fp8-scaling delayed (tc-fuse-fp8-delayed): x [rows, cols]
      // (f32/bf16) quantized by the given scale (f32 [1], the training
      // state) in one pass: q, amax (f32 [1], max |x|, NaN kept), saturated
      // (f32 [1], the count of |x scale| past the format's largest finite
      // value), q_t [cols, rows] the transposed copy (has_transpose).
      {"quantize_fp8_delayed",
       {{"x"}, {"scale"}},
       {{"q"}, {"amax"}, {"saturated"}, {"q_t", "has_transpose"}},
       {kRows, kCols, {"has_transpose", K::Bool, false}}},
      // --fp8-scaling delayed's bookkeeping of one tensor
      // (tc-fuse-fp8-delayed): amax, scale (f32 [1]) and the stored amaxes
      // (history, f32 [N - 1], has_history) -> next_scale (fmax / the max of
      // [amax] ++ history, or of amax alone with most_recent; scale kept
      // when that is 0, inf or NaN; the largest f32 on overflow), scale_inv
      // (1 / scale) and next_history ([amax] ++ history[0 : N - 2]); may
      // write next_scale / next_history over scale / history in place.
      {"fp8_scale_update",
       {{"amax"}, {"scale"}, {"history", "has_history"}},
       {{"next_scale"}, {"scale_inv"}, {"next_history", "has_history"}},
       {{"fmax", K::Float, true},
        {"most_recent", K::Bool, false},
        {"has_history", K::Bool, false}}},
      // --fp8-scaling block128: x [rows, cols] in blocks (blocks 0: 1x128
      // along the columns, 1: 128x1 along the rows, 2: 128x128), q, scale_inv
      // (tc's grid), q_t [cols, rows] (has_transpose), the scales in the
      // layout cuBLASLt's block-scaled GEMM reads for the K-contiguous
      // operand (scale_gemm) and for q_t of 128x128 blocks (scale_gemm_t,
      // has_gemm_t); pow2: power-of-two scales.
      {"quantize_fp8_block",
       {{"x"}},
       {{"q"},
        {"scale_inv"},
        {"q_t", "has_transpose"},
        {"scale_gemm"},
        {"scale_gemm_t", "has_gemm_t"}},
       {kRows,
        kCols,
        {"blocks", K::Int, true},
        {"pow2", K::Bool, false},
        {"has_transpose", K::Bool, false},
        {"has_gemm_t", K::Bool, false}}},
      // --fp8-scaling mxfp8 (sm_120a): x [rows, cols] in 1x32 blocks along
      // the columns or (along_rows) 32x1 blocks along the rows, q, scale_inv
      // (f8E8M0FNU, tc's grid), q_t [cols, rows] (has_transpose; along_rows
      // only), and the scales in cuBLASLt's VEC32_UE8M0 layout for the
      // K-contiguous operand, q or q_t (scale_gemm, mxfp8GemmScaleBytes).
      {"quantize_mx",
       {{"x"}},
       {{"q"}, {"scale_inv"}, {"q_t", "has_transpose"}, {"scale_gemm"}},
       {kRows, kCols, {"along_rows", K::Bool, false}, {"has_transpose", K::Bool, false}}},
      // tc.fake_quantize: x [outer, len, inner] (f32/bf16) with the blocks
      // along len, y of x's type; nvfp4 unless mxfp4; step (f32 [1], the
      // training step) with stochastic rounding; the scratch holds nvfp4's
      // tensor amax. unscaled (nvfp4): y = code x block scale, tensor_scale
      // (f32 [1]) the tensor's decode scale.
      {"fake_quantize",
       {{"x"}, {"step", "stochastic"}},
       {{"y"}, {"tensor_scale", "unscaled"}, {"scratch"}},
       cat(kFp4Attrs, {{"unscaled", K::Bool, false}}),
       fakeQuantizeScratch},
      // tc.fake_quantize's values packed for a block-scaled GEMM
      // (runtime/src/cuda/kernels/fp4_pack.cu): x [outer, len, inner] as the
      // matrix [outer * inner, len], q its E2M1 codes (two per byte, rows of
      // fp4PackedRowBytes), scales the block scales in cuBLASLt's 128x4 layout
      // (fp4ScaleLayoutBytes), tensor_scale nvfp4's f32 decode scale
      // (has_tensor_scale); the attributes and the scratch are fake_quantize's.
      {"quantize_fp4",
       {{"x"}, {"step", "stochastic"}},
       {{"q"}, {"scales"}, {"tensor_scale", "has_tensor_scale"}, {"scratch"}},
       cat(kFp4Attrs, {{"has_tensor_scale", K::Bool, false}}),
       fakeQuantizeScratch},
      // tc's sm_120a block-scaled MXFP4 GEMM (runtime/src/cuda/kernels/
      // fp4_gemm.cu): d [m, n] (bf16) = alpha * a [m, k] b [n, k]^T, a and b
      // quantize_fp4's packed codes with their E8M0 scales (nvfp4: its nvfp4
      // codes and E4M3 scales), alpha f32 [1] (has_alpha; 1 without).
      {"fp4_mma_gemm",
       {{"a"}, {"a_scales"}, {"b"}, {"b_scales"}, {"alpha", "has_alpha"}},
       {{"d"}},
       {kGemmM, kGemmN, kGemmK, {"has_alpha", K::Bool, false}, {"nvfp4", K::Bool, false}}},
      // cuBLASLt's NVFP4 GEMM (Matmul::runNvfp4, sm_120a): d [m, n] (bf16) =
      // a_tensor_scale * b_tensor_scale * a [m, k] b [n, k]^T of quantize_fp4's
      // nvfp4 codes and E4M3 scales; the scratch holds cuBLASLt's device
      // alpha and beta. The CUDA executor binds it (it owns the cuBLASLt
      // handle), not a kernel launcher.
      {"nvfp4_gemm",
       {{"a"}, {"a_scales"}, {"a_tensor_scale"}, {"b"}, {"b_scales"}, {"b_tensor_scale"}},
       {{"d"}, {"scratch"}},
       {kGemmM, kGemmN, kGemmK},
       nvfp4GemmScratch},
  };
  return callees;
}

const LibraryCallee *findLibraryCallee(const std::string &name) {
  for (const LibraryCallee &c : libraryCallees())
    if (name == c.name)
      return &c;
  return nullptr;
}

std::string libraryCalleeNames() {
  std::string names;
  for (const LibraryCallee &c : libraryCallees())
    names += (names.empty() ? "" : ", ") + std::string(c.name);
  return names;
}

namespace {
/// Lays out one operand list; "" or the error.
std::string layoutList(const std::vector<LibraryOperandSpec> &specs, const LibraryInts &ints,
                       size_t given, const char *what, std::vector<int> *out) {
  size_t fixed = 0;
  std::vector<size_t> groups; // groups[k - 1]: operands of optional group k
  std::string conditions;
  for (const LibraryOperandSpec &s : specs) {
    if (s.optionalGroup > 0) {
      groups.resize(std::max<size_t>(groups.size(), s.optionalGroup), 0);
      ++groups[s.optionalGroup - 1];
      continue;
    }
    if (s.presentIf) {
      bool on = intOf(ints, s.presentIf) != 0;
      std::string c = std::string(s.presentIf) + (on ? " = 1" : " = 0");
      if (conditions.find(c) == std::string::npos)
        conditions += (conditions.empty() ? "" : ", ") + c;
      if (!on)
        continue;
    }
    ++fixed;
  }
  // The counts a call may give: the fixed ones plus the first k groups.
  std::vector<size_t> allowed{fixed};
  for (size_t g : groups)
    allowed.push_back(allowed.back() + g);
  auto k = std::find(allowed.begin(), allowed.end(), given);
  if (k == allowed.end()) {
    std::string counts = std::to_string(allowed.front());
    if (allowed.size() == 2)
      counts += " or " + std::to_string(allowed.back());
    else if (allowed.size() > 2)
      counts += " to " + std::to_string(allowed.back());
    return "takes " + counts + " " + what + (conditions.empty() ? "" : " (" + conditions + ")") +
           ", got " + std::to_string(given);
  }
  size_t groupsGiven = static_cast<size_t>(k - allowed.begin());
  out->clear();
  int pos = 0;
  for (const LibraryOperandSpec &s : specs) {
    bool present = s.optionalGroup > 0 ? s.optionalGroup <= groupsGiven
                                       : !s.presentIf || intOf(ints, s.presentIf) != 0;
    out->push_back(present ? pos++ : -1);
  }
  return "";
}
} // namespace

std::string layoutLibraryCall(const LibraryCallee &c, const LibraryInts &ints, size_t numInputs,
                              size_t numOutputs, LibraryLayout *out) {
  std::string e = layoutList(c.inputs, ints, numInputs, "inputs", &out->inputs);
  if (e.empty())
    e = layoutList(c.outputs, ints, numOutputs, "outputs", &out->outputs);
  return e;
}

std::string checkLibraryAttrs(const LibraryCallee &c, const std::vector<LibraryAttrValue> &given,
                              bool rejectUnknown) {
  auto find = [&](const char *name) -> const LibraryAttrValue * {
    for (const LibraryAttrValue &g : given)
      if (g.name == name)
        return &g;
    return nullptr;
  };
  for (const LibraryAttrSpec &s : c.attrs) {
    const LibraryAttrValue *g = find(s.name);
    if (!g) {
      if (s.required)
        return std::string("needs the ") + libraryAttrKindName(s.kind) + " attribute '" + s.name +
               "'";
      continue;
    }
    if (!libraryAttrKindAccepts(s.kind, g->kind))
      return std::string("attribute '") + s.name + "' is " + libraryAttrKindName(g->kind) +
             ", wants " + libraryAttrKindName(s.kind);
    if (s.required && s.kind == LibraryAttrKind::Int && g->value < 0)
      return std::string("attribute '") + s.name + "' is negative (" + std::to_string(g->value) +
             ")";
  }
  if (rejectUnknown)
    for (const LibraryAttrValue &g : given)
      if (!c.findAttr(g.name)) {
        std::string names;
        for (const LibraryAttrSpec &s : c.attrs)
          names += (names.empty() ? "" : ", ") + std::string(s.name);
        return "has no attribute '" + g.name + "' (it takes " + names + ")";
      }
  return "";
}

} // namespace tc::rt
