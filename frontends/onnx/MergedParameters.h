//===- MergedParameters.h - undo exporters' merging of equal weights -*- C++ -*-===//
//
// A freshly initialised model has many equal-valued tensors (zero biases,
// unit norm scales), and both torch exporters merge them:
//   - TorchScript (torch.onnx.export(dynamo=False)) keeps one initializer and
//     turns every other equal one into `Identity(kept) -> other.name`;
//   - the dynamo exporter's optimizer (optimize=True, the default)
//     deduplicates equal initializers (consumers of the dropped ones read the
//     kept one) and removes no-op consumers such as Add(x, zeros) or a Gemm's
//     zero C, so those parameters vanish with their consumer.
// Trained as exported, one shared tensor would stand for several parameters
// that PyTorch trains separately. restoreMergedParameters rewrites the graph
// before import so that each parameter is an initializer of its own again,
// named as in the torch module, with a copy of the value it was merged with:
//   - an Identity of a floating-point initializer becomes an initializer
//     named by the Identity's output (tied weights never look like this:
//     TorchScript uses one initializer for a tensor shared in torch);
//   - a dynamo-deduplicated initializer is found through the node metadata:
//     each ONNX node names the FX node it comes from (pkg.torch.onnx.fx_node),
//     whose arguments name the graph-signature placeholders (p_...) of the
//     parameters it really uses. A consumer that reads initializer A where
//     its FX node used parameter B (B has no initializer) read A as B's
//     merged copy. Tied weights are not restored: torch.export already routes
//     every use of a tied tensor through one placeholder.
// A signature PARAMETER that an FX node uses but that no ONNX node reads in
// its place had its consumer folded away: it is reported in `dropped`.
//
// The dynamo optimizer also folds a Linear's Transpose(W) into a new
// initializer (val_N, value_info folded_from ['W']) and drops W. Such a
// constant, read as the B operand of the MatMul of an aten.linear FX node,
// is reported in `transposed`, so that the importer makes W the parameter
// again (with the transposed data) and val_N its tc.transpose: training is
// the same, and the checkpoint carries W under its torch name and layout.
//
//===----------------------------------------------------------------------===//
#ifndef TC_FRONTENDS_ONNX_MERGEDPARAMETERS_H
#define TC_FRONTENDS_ONNX_MERGEDPARAMETERS_H

#include "onnx/onnx_pb.h"

#include <string>
#include <vector>

namespace tc::onnx_import {

/// What restoreMergedParameters found and did.
struct MergedParameters {
  /// (restored parameter, the initializer it had been merged into), in graph
  /// order. With keepMerged nothing is rewritten and these stay merged.
  std::vector<std::pair<std::string, std::string>> merged;
  /// Which exporter's merging: "Identity aliases" or "deduplicated
  /// initializers" (for messages).
  std::vector<std::string> kinds;
  /// Merged parameters that could not be restored under their own name
  /// (the kept copy is a constant folded from another parameter, e.g. a
  /// transposed weight): they stay shared; one line each.
  std::vector<std::string> unrestorable;
  /// Signature PARAMETERs whose consumer the exporter removed (a zero bias
  /// dropped with its Add): no ONNX node reads them, so tc cannot train them.
  std::vector<std::string> dropped;
  /// (folded initializer, the parameter it is the transpose of).
  std::vector<std::pair<std::string, std::string>> transposed;
};

/// Finds (and unless `keepMerged`, undoes) merged parameters in `graph`,
/// which must have passed the importer's structural checks (unique names,
/// inputs defined). Never fails: what it cannot restore it reports.
MergedParameters restoreMergedParameters(onnx::GraphProto &graph, bool keepMerged);

} // namespace tc::onnx_import

#endif // TC_FRONTENDS_ONNX_MERGEDPARAMETERS_H
