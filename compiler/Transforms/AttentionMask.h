//===- AttentionMask.h - what an attention mask hides, from its construction -*- C++ -*-===//
//
// tc-recognize-attention needs to know which (query i, key j) entries an
// exported mask hides. A small mask is folded to a constant at import and
// read as it is; a large one ([B, 1, T, T] at B*T^2 > the fold limit: HF's
// mask at 17x1024 or 1x8192) stays the computation that builds it:
//
//   le(kv_idx [.., 1, Tk], q_idx [.., Tq, 1])   -> true where j <= i
//   and(splat true, ...), eq(zeros, zeros)       -> true everywhere
//   select(mask, 0, -3.4e38)                     -> additive mask
//
// maskedEntries() evaluates such a construction symbolically: index vectors
// along the query or the key axis (aranges, shifted or scaled by scalars),
// their comparisons, boolean and/or/not, splats, selects between 0 and a
// very negative fill, additive masks, and shape ops that keep the last two
// axes. Nothing is materialised, so the answer does not depend on the batch
// size or the sequence length. A padding mask, attention_mask[b, j] from a
// graph input gathered or reshaped to [B, 1, 1, Tk] and and-ed in, is
// returned as the [B, Tk] value it reads. Anything else that depends on a
// graph input is not understood: the reason says which.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_TRANSFORMS_ATTENTIONMASK_H
#define TC_COMPILER_TRANSFORMS_ATTENTIONMASK_H

#include "mlir/IR/Value.h"

#include <cstdint>
#include <optional>
#include <string>

namespace tc {

/// A set of entries (i, j) of the last two axes, the same for every leading
/// index: all, none, the entries with j - i > t (After), or the others
/// (NotAfter).
struct EntrySet {
  enum Kind { All, None, After, NotAfter } kind = None;
  int64_t t = 0;
  bool operator==(const EntrySet &o) const {
    return kind == o.kind && ((kind != After && kind != NotAfter) || t == o.t);
  }
};

/// What a mask hides: the entries `masked` (the same for every batch and
/// head) and, for a padding mask built from a graph input (HF:
/// attention_mask[b, j] gathered to [B, 1, 1, Tk] and and-ed with the causal
/// mask), every key j of batch b where `keys` [B, Tk] (bool or integer, non-
/// zero = visible) is false.
struct MaskInfo {
  EntrySet masked;
  mlir::Value keys;
  /// An additive mask's fill (the value of its hidden entries) when it is one
  /// value; NaN otherwise.
  double fill = 0;
};

/// The entries a mask hides: for a boolean `mask`, those where it equals
/// `maskedWhen`; for a float (additive) one, those <= -1e4 (the rest must be
/// exactly 0). Shapes are [..., tq or 1, tk or 1] (a padding mask:
/// [batch, .., 1, tk]). On failure `*why` says what is not understood.
std::optional<MaskInfo> maskedEntries(mlir::Value mask, bool isBool, bool maskedWhen,
                                      int64_t batch, int64_t tq, int64_t tk, std::string *why);

} // namespace tc

#endif // TC_COMPILER_TRANSFORMS_ATTENTIONMASK_H
