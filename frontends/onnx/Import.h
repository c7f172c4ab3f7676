//===- Import.h - ONNX model -> tc dialect ----------------------*- C++ -*-===//
//
// The public entry of the ONNX frontend. A model (binary .onnx or ONNX's
// textual syntax, .onnxtxt) becomes one `func.func @infer` of tc ops with
// static shapes:
//
//   func.func @infer(%a: tensor<2x16xi64> {tc.name = "input_ids"}, ...)
//       -> (tensor<f32> {tc.name = "loss"}, ...)
//
// Floating-point initializers become `tc.parameter` (their bytes are returned
// in ImportResult::weights), everything computable at import time (shape
// sub-graphs, integer initializers) becomes `tc.constant`.
//
//===----------------------------------------------------------------------===//
#ifndef TC_FRONTENDS_ONNX_IMPORT_H
#define TC_FRONTENDS_ONNX_IMPORT_H

#include "runtime/src/schema/program.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tc::onnx_import {

/// Prefix of the error text when a node needs the value of a graph input
/// that is not bound to a constant (Reshape's shape, ReduceSum's axes, ...
/// given as graph inputs, as ONNX's node tests do). The full text is
///   "needs-constant-input: NAME: input 'NAME' of node 'N' (Reshape) must be a constant"
/// A caller that knows NAME's value (the conformance runner) binds it in
/// ImportOptions::constantInputs and imports again; that may repeat once per
/// such input.
inline constexpr const char kNeedsConstantInputPrefix[] = "needs-constant-input: ";

/// How to import a model.
struct ImportOptions {
  /// --input NAME=2x16: the full shape of graph input NAME. It fixes dynamic
  /// dims and must agree with the static ones; naming no graph input is an
  /// error.
  std::map<std::string, std::vector<int64_t>> inputShapes;
  /// --dim NAME=N: every dynamic input axis the exporter named NAME (ONNX
  /// dim_param, e.g. torch's dynamic_shapes={"input_ids": {0: "batch"}})
  /// becomes N. --input wins for the inputs it names (and must agree); a
  /// NAME no input axis carries is an error listing the names there are.
  std::map<std::string, int64_t> dimParams;
  /// Graph inputs bound to known values: they become tc.constant instead of
  /// function arguments (their type must match the declared one).
  std::map<std::string, rt::HostTensor> constantInputs;
  /// false (tc-compile --no-weights): tc.parameter ops get their types only
  /// and ImportedWeight::tensor has empty data (no tensor data, internal or
  /// external, is read for them: their external data files may be absent).
  /// Constant initializers (integer tables, scalars) are still read; one
  /// whose data is missing is an error naming it.
  bool loadWeights = true;
  /// A 2-D float initializer that holds exactly the transpose of an earlier
  /// one (how exporters store a tied input embedding / output head after
  /// constant folding) becomes tc.transpose of that parameter instead of a
  /// second parameter, so training keeps the tie; each case is reported in
  /// ImportResult::notes. Needs loadWeights.
  bool tieTransposedCopies = true;
  /// Parameters an exporter merged because their values were equal
  /// (TorchScript's Identity aliases, the dynamo optimizer's deduplicated
  /// initializers; see MergedParameters.h) become parameters of their own
  /// again, named as in torch, each reported in ImportResult::notes. false
  /// (tc-compile --keep-merged): they stay one shared tensor.
  bool restoreMerged = true;
};

/// The value of one tc.parameter (storage format of rt::HostTensor).
struct ImportedWeight {
  std::string name;
  rt::HostTensor tensor; ///< data empty when !ImportOptions::loadWeights
};

/// What a successful import gives.
struct ImportResult {
  /// One func.func @infer, verified.
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// One entry per tc.parameter in the function, in order of appearance,
  /// with the same names.
  std::vector<ImportedWeight> weights;
  /// Always empty after a successful import. A failed one that needs a graph
  /// input's value reports it in the error text instead (see
  /// kNeedsConstantInputPrefix); kept so callers can share one struct.
  std::vector<std::string> needConstantInputs;
  /// Things the user should know about the import (not errors), one line each.
  std::vector<std::string> notes;
  /// Parameters of the torch module (graph signature) whose consumers the
  /// exporter folded away (a zero bias dropped with its Add): the model
  /// computes the same, but they cannot be trained. compile() refuses to
  /// train such a model, naming them.
  std::vector<std::string> droppedParameters;
  /// What tc-run's --export-onnx needs (docs/export.md): the model as
  /// imported (merged parameters restored, nodes topologically sorted) with
  /// the initializers that are tc parameters removed (from the initializers
  /// and the graph inputs), as a serialized ModelProto...
  std::string exportModel;
  /// ...and, per removed initializer, the parameter it is (transposed: the
  /// initializer holds the parameter's transpose), in graph order.
  struct ExportInit {
    std::string initializer, param;
    bool transposed = false;
  };
  std::vector<ExportInit> exportInits;
};

/// Reads and imports `path`: binary ModelProto (any extension but .onnxtxt)
/// or ONNX's textual syntax (.onnxtxt, read with onnx::OnnxParser; `#` starts
/// a comment). Loads the tc and func dialects into `ctx`. On failure returns
/// failure and a message in `*error` (naming the node, tensor or file
/// involved); never aborts on bad input.
mlir::FailureOr<ImportResult> importOnnxFile(mlir::MLIRContext &ctx,
                                             const std::string &path,
                                             const ImportOptions &opts,
                                             std::string *error);

/// Receives one piece of what an import reads: a tag naming it and its bytes.
using InputFeed = std::function<void(const std::string &tag, llvm::StringRef bytes)>;

/// Everything an import of `path` with `opts` reads, for a cache key
/// (compiler/Cache.h), without importing: the model file's bytes, then the
/// data of every external tensor the import reads, in graph order: all of
/// them with weights, and without weights (--no-weights) only those it still
/// reads (constants, buffers, folded tensors), so that changed weights do not
/// change the key there. False with `*error` set when the model cannot be
/// read at all.
bool feedModelInputs(const std::string &path, const ImportOptions &opts, const InputFeed &feed,
                     std::string *error);

} // namespace tc::onnx_import

#endif // TC_FRONTENDS_ONNX_IMPORT_H
