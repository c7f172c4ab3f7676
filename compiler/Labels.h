//===- Labels.h - which labels a causal LM's loss expects -------*- C++ -*-===//
//
// A token stream feeds a language model as input_ids = tokens[o, o+T) and
// labels that are either the next tokens, tokens[o+1, o+T+1) (nanoGPT,
// llm.c: the model compares logits[t] with labels[t]), or the same tokens,
// tokens[o, o+T) (HuggingFace *ForCausalLM(labels=...): the model shifts
// them itself, comparing logits[t] with labels[t+1]). Feeding next-token
// labels to a model that shifts trains it to predict two tokens ahead, so
// tc-compile finds out which one the loss expects and records it in the
// artifact (reports["labels"]); tc-run --data follows it.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_LABELS_H
#define TC_COMPILER_LABELS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>

namespace tc {

struct LabelConvention {
  /// "next" (labels are the next tokens), "same" (the model shifts them) or
  /// "" (no loss over a [batch, seq] labels input was found).
  std::string convention;
  std::string input;  ///< the labels input's name
  int64_t ignoreIndex = -100;
  std::string reason; ///< one line, for the report and tc-run's message
};

/// Looks at the cross-entropy / NLL losses of `fn` (the imported forward):
/// labels that reach the loss from a [batch, seq] integer argument only
/// through reshapes and casts are "next"; labels taken from position 1 on
/// along the sequence axis (HF: labels[..., 1:], or pad(labels, (0, 1),
/// ignore_index)[..., 1:] in transformers >= 4.46) are "same".
LabelConvention detectLabelConvention(mlir::func::FuncOp fn);

/// The report: {"convention": ..., "input": ..., "ignore_index": ..., "reason": ...}.
std::string labelConventionJson(const LabelConvention &c);

/// reports["input_ranges"]: the values integer inputs of `fn` may hold, so
/// that the runtime refuses a bad token before running (ONNX's Gather would
/// wrap a negative id to the end of the table, an id past it is a run-time
/// error deep inside the step): an input read (through reshapes and casts)
/// as the indices of an axis-0 gather of a parameter (an embedding) holds
/// ids in [0, rows); one read as a loss's labels holds classes in [0, C) or
/// the loss's ignore_index. {"input_ids": {"min": 0, "max": 255, "what":
/// "..."}, "labels": {..., "ignore_index": -100}}; "{}" when none.
std::string inputRangesJson(mlir::func::FuncOp fn);

} // namespace tc

#endif // TC_COMPILER_LABELS_H
