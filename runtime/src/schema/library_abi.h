//===- library_abi.h - the library-call ABI, written once -------*- C++ -*-===//
//
// Every runtime library kernel a `tcx.library` op (and so a device op of kind
// "library") may call: its callee name, its operands and results (optional
// pointers are given by has_* attributes or are trailing groups), the
// attributes it requires and accepts, and the bytes of scratch memory its
// launcher needs. The tcx.library verifier, the lowering (through
// tcx::libraryScratchBytes) and the CUDA executor's binder
// (runtime/src/cuda/library_calls.cpp) all read this one table, and the CUDA
// launchers (runtime/src/cuda/kernels) size their scratch with the functions
// and constants below. Plain C++: no MLIR, no CUDA.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_SCHEMA_LIBRARY_ABI_H
#define TC_RUNTIME_SCHEMA_LIBRARY_ABI_H

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tc::rt {

//===----------------------------------------------------------------------===//
// Scratch sizes of the launchers (runtime/src/cuda/kernels/kernels.h)
//===----------------------------------------------------------------------===//

/// The cuBLASLt workspace the CUDA runtime preallocates for a step with
/// matmuls (runtime/src/cuda/cublaslt.h); the compiler's memory plan counts it.
inline constexpr int64_t kCublasLtWorkspaceBytes = int64_t(32) << 20;

/// Rows per chunk of the norm backward's deterministic column sums, by the
/// row's width (the shape alone, never the GPU: the sums' order is the
/// chunking's): 64 for rows of at most 768 columns, whose fused kernel holds
/// a row in one warp and runs two 8-warp blocks an SM; 32 for wider rows,
/// which it spreads over 2 or 4 warps of at most 512 columns each (two blocks
/// an SM as well: at 8192 rows, 256 chunks fill an H100's or H200's 132 SMs
/// twice, where 64-row chunks would leave half of each SM's slots idle).
constexpr int64_t normBackwardChunkRows(int64_t cols) { return cols <= 768 ? 64 : 32; }
/// Tokens per histogram (a block of as many threads) of the embedding
/// backward's counting sort.
inline constexpr int64_t kEmbeddingChunk = 512;
/// Blocks (and partial sums) of sumSquares' first pass.
inline constexpr int64_t kMaxNormBlocks = 1024;

/// layerNormBackward / rmsNormBackward: 2 * ceil(rows /
/// normBackwardChunkRows(cols)) * cols floats, 3 * ... with dx's column sums
/// (has_col_sum).
size_t normBackwardScratchBytes(int64_t rows, int64_t cols, bool colSum = false);
/// crossEntropyForwardBackward: a count and the per-row losses (64 + rows floats).
size_t crossEntropyScratchBytes(int64_t rows);
/// embeddingBackward: the per-chunk histograms, two vocabulary scans and the
/// token slots (int32, each part 64-element aligned).
size_t embeddingBackwardScratchBytes(int64_t count, int64_t vocab);
/// attentionBackward: batch * heads * tq floats (D = rowsum(dout * out)) in
/// 256-byte granules; never 0.
size_t attentionBackwardScratchBytes(int64_t batch, int64_t heads, int64_t tq);
/// The rows of one partial of attentionBackward's column sums (has_col_sum):
/// the kernels sum their gradient rows in chunks of a multiple of this.
inline constexpr int64_t kAttentionColumnSumRows = 64;
/// attentionBackward with the gradients' column sums (has_col_sum): the
/// above, then the f32 partial sums of every chunk of kAttentionColumnSumRows
/// rows (at most): [batch][ceil(tq / 64)][heads * d] of dq, then
/// [batch][ceil(tk / 64)][kvHeads * d] of dk and [...][kvHeads * dv] of dv.
/// Then, where attentionLibraryWorkspaceBytes is not 0, the workspace of
/// cuDNN's deterministic backward (its kernels run the call where cuDNN is
/// installed: planned, so the whole batch runs in one call and the memory
/// plan holds every byte; unused without cuDNN).
size_t attentionBackwardScratchBytes(int64_t batch, int64_t heads, int64_t kvHeads, int64_t tq,
                                     int64_t tk, int64_t d, int64_t dv, bool colSums,
                                     bool keyMask = false, bool causal = false);
/// The most attentionLibraryWorkspaceBytes plans: a larger workspace would
/// grow the step's memory for a little speed (the batch then runs in chunks
/// of 128 MiB of the plugin's own, where one batch element fits).
inline constexpr int64_t kMaxPlannedAttentionWorkspaceBytes = int64_t(512) << 20;
/// Whether the runtime sends an attention backward to cuDNN where the plugin
/// is loaded: head dim 128 (dv == d), no key mask, causal only with tq == tk
/// (at 64 tc's kernels are as fast: bench/RESULTS.md, stop 42).
bool attentionBackwardOnLibrary(int64_t tq, int64_t tk, int64_t d, int64_t dv, bool keyMask,
                                bool causal);
/// The bytes the scratch reserves for cuDNN's attention backward where
/// attentionBackwardOnLibrary: [batch, heads, tq, tk] bf16 and 16 MiB, what
/// its deterministic plans ask (cuDNN 9.x on sm_90), where that is at most
/// kMaxPlannedAttentionWorkspaceBytes; else 0.
int64_t attentionLibraryWorkspaceBytes(int64_t batch, int64_t heads, int64_t tq, int64_t tk,
                                       int64_t d, int64_t dv, bool keyMask, bool causal);
/// Where attentionBackward's parts lie in its scratch (byte offsets; 0 for
/// those the call does not have) and its size.
struct AttentionScratchLayout {
  size_t colSums = 0, libraryWorkspace = 0, total = 0;
};
AttentionScratchLayout attentionBackwardScratchLayout(int64_t batch, int64_t heads, int64_t kvHeads,
                                                      int64_t tq, int64_t tk, int64_t d, int64_t dv,
                                                      bool colSums, bool keyMask, bool causal);
/// sumSquares: kMaxNormBlocks partial sums.
size_t sumSquaresScratchBytes();
/// amaxFp8 / quantizeFp8 ("quantize_fp8"): the f32 amaxes, one per scale
/// (1, the rows or the columns), in 256-byte granules.
size_t fp8QuantizeScratchBytes(int64_t scales);
/// quantizeFp8's column sums (has_col_sum): the f32 partial sums of each
/// row tile of the quantize kernel (32 or 64 rows), at most
/// [ceil(rows / kFp8ColumnSumRows)][cols], after the amaxes (in 256-byte
/// granules).
inline constexpr int64_t kFp8ColumnSumRows = 32;
size_t fp8ColumnSumScratchBytes(int64_t rows, int64_t cols);
/// quantize_fp8_block (--fp8-scaling block128) of x [rows, cols] in `blocks`
/// (0: 1x128 along cols, 1: 128x1 along rows, 2: 128x128): the f32 scales
/// of scale_gemm (transposed false) or scale_gemm_t (true) in cuBLASLt's
/// layouts, zero padded: 0 -> [ceil(cols / 128)][roundup(rows, 4)], 1 ->
/// [ceil(rows / 128)][roundup(cols, 4)], 2 -> [ceil(rows / 128)][roundup(
/// ceil(cols / 128), 4)] (transposed: rows and cols swapped); 0 for a
/// layout the blocks have not.
int64_t fp8BlockGemmScaleFloats(int64_t rows, int64_t cols, int64_t blocks, bool transposed);
/// quantize_mx (--fp8-scaling mxfp8) of x [rows, cols]: the E8M0 bytes of
/// scale_gemm, cuBLASLt's VEC32_UE8M0 layout (block_scale_layout.h) of the
/// operand read with K contiguous: q [rows, K = cols] (1x32 blocks along the
/// columns) or, alongRows, q_t [cols, K = rows].
int64_t mxfp8GemmScaleBytes(int64_t rows, int64_t cols, bool alongRows);

/// quantize_fp4 (packed E2M1 for a block-scaled GEMM): the bytes of one
/// row of len elements, zero padded to whole blocks (16 nvfp4, 32 mxfp4):
/// roundup(len, block) / 2.
int64_t fp4PackedRowBytes(int64_t len, bool mxfp4);
/// quantize_fp4: the bytes of the block scales of [rows, len] in cuBLASLt's
/// 128x4 tile layout (runtime/src/schema/block_scale_layout.h):
/// roundup(rows, 128) * roundup(ceil(len / block), 4).
int64_t fp4ScaleLayoutBytes(int64_t rows, int64_t len, bool mxfp4);

//===----------------------------------------------------------------------===//
// Attribute values
//===----------------------------------------------------------------------===//

/// attention_bwd's amax_of (attentionBackward's amaxOf): the mask of the
/// gradients whose stored values its amax covers.
inline constexpr int kAmaxOfDq = 1, kAmaxOfDk = 2, kAmaxOfDv = 4;
inline constexpr int kAmaxOfAll = kAmaxOfDq | kAmaxOfDk | kAmaxOfDv;
/// Whether amax_of names at least one gradient and nothing else.
inline constexpr bool validAmaxOf(int64_t amaxOf) { return amaxOf >= 1 && amaxOf <= kAmaxOfAll; }

/// attention_fwd / attention_bwd's mask_fill (with has_key_mask): -inf or a
/// finite fill at most this. The kernels give a hidden key beside a visible
/// one exactly 0 weight, which the definition (score + fill, then the
/// softmax) also gives in f64 once exp(fill + score - max) underflows: for
/// any fill this low and scores less than ~9000 apart. HF's finfo.min, the
/// classic -10000 and -1e9 all qualify.
inline constexpr double kAttentionMaxFiniteFill = -1e4;
/// Whether `fill` is a mask_fill the attention kernels take (-inf, or finite
/// and at most kAttentionMaxFiniteFill; NaN is not).
inline bool validAttentionMaskFill(double fill) {
  return fill == -std::numeric_limits<double>::infinity() ||
         (fill == fill && fill <= kAttentionMaxFiniteFill);
}

//===----------------------------------------------------------------------===//
// The callee table
//===----------------------------------------------------------------------===//

/// The kind of a library-call attribute. In the artifact Bool is an Int
/// (0 or 1), so an Int satisfies Bool; a Float accepts an Int too.
enum class LibraryAttrKind : uint8_t { Int, Bool, Float, Ints };

/// "integer", "bool", "float", "integer array".
const char *libraryAttrKindName(LibraryAttrKind k);

/// Whether an attribute given as `given` satisfies a spec of kind `want`.
bool libraryAttrKindAccepts(LibraryAttrKind want, LibraryAttrKind given);

/// One attribute a callee reads. Required Int attributes are sizes (>= 0).
struct LibraryAttrSpec {
  const char *name;
  LibraryAttrKind kind;
  bool required;
};

/// One pointer operand (input or output) of a callee, in call order.
struct LibraryOperandSpec {
  const char *name;
  /// nullptr: given by position. Else the Bool attribute that says whether
  /// the operand is given ("has_weight"; absent attribute: not given).
  const char *presentIf = nullptr;
  /// 0: always given (unless presentIf says otherwise). k > 0: a trailing
  /// optional group, given whole or not at all; group k + 1 only with k.
  uint8_t optionalGroup = 0;
};

/// The Int and Bool attributes of one call, by name (what operand layouts
/// and scratch sizes read; absent names read as 0).
using LibraryInts = std::map<std::string, int64_t>;

/// One runtime library kernel.
struct LibraryCallee {
  const char *name;
  std::vector<LibraryOperandSpec> inputs;
  /// The results; a launcher with scratch takes it as the last output
  /// ("scratch"), sized by `scratchBytes`.
  std::vector<LibraryOperandSpec> outputs;
  std::vector<LibraryAttrSpec> attrs;
  /// Bytes of scratch for the call's attributes; nullptr: no scratch.
  size_t (*scratchBytes)(const LibraryInts &) = nullptr;

  const LibraryAttrSpec *findAttr(const std::string &attr) const;
};

/// Every callee, in a fixed order.
const std::vector<LibraryCallee> &libraryCallees();
/// The callee `name`, or nullptr.
const LibraryCallee *findLibraryCallee(const std::string &name);
/// "softmax_fwd, layer_norm_fwd, ..." for error messages.
std::string libraryCalleeNames();

/// Where the operands of one call sit: inputs[i] / outputs[i] is the
/// position of callee.inputs[i] / outputs[i] among the call's pointers, or
/// -1 when the call does not give it.
struct LibraryLayout {
  std::vector<int> inputs, outputs;
};

/// Lays out a call of `c` with `numInputs` and `numOutputs` pointers and the
/// attributes `ints`. Returns "" or what is wrong, without the callee's name:
/// "takes 1 outputs, got 2", "takes 3 inputs (has_weight, has_bias), got 2".
std::string layoutLibraryCall(const LibraryCallee &c, const LibraryInts &ints, size_t numInputs,
                              size_t numOutputs, LibraryLayout *out);

/// One attribute as a call gives it: name, kind, and the value of an Int (0
/// for the other kinds).
struct LibraryAttrValue {
  std::string name;
  LibraryAttrKind kind;
  int64_t value;
};

/// Checks a call's attributes against `c`: every required one present, each
/// of the right kind, sizes >= 0, and (with `rejectUnknown`) no attribute `c`
/// does not take. Returns "" or what is wrong, without the callee's name:
/// "needs the integer attribute 'cols'", "attribute 'eps' is integer array,
/// wants float".
std::string checkLibraryAttrs(const LibraryCallee &c, const std::vector<LibraryAttrValue> &given,
                              bool rejectUnknown);

} // namespace tc::rt

#endif // TC_RUNTIME_SCHEMA_LIBRARY_ABI_H
