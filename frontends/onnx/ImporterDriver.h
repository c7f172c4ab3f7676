//===- ImporterDriver.h - the state of one ONNX import ----------*- C++ -*-===//
//
// Internal to frontends/onnx: the Importer class, which walks one model's
// graph (Importer.cpp), and the few things NodeContext (NodeContext.cpp)
// reaches into it for: the first error, the builder, the model folder, the
// value scope and the graph inputs a value depends on.
//
//===----------------------------------------------------------------------===//
#ifndef TC_FRONTENDS_ONNX_IMPORTERDRIVER_H
#define TC_FRONTENDS_ONNX_IMPORTERDRIVER_H

#include "frontends/onnx/Import.h"
#include "frontends/onnx/Importer.h"
#include "frontends/onnx/MergedParameters.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace tc::onnx_import {

/// "2x3x4" (for error messages).
std::string joinShape(llvm::ArrayRef<int64_t> shape);
/// The error for a shape beyond kMaxTensorElements.
std::string tooLarge(llvm::ArrayRef<int64_t> shape);

/// Imports one model. Lives for one importOnnxFile call.
class Importer {
public:
  Importer(mlir::MLIRContext &ctx, const std::string &path, const ImportOptions &opts)
      : ctx_(ctx), builder_(&ctx), path_(path), opts_(opts) {
    std::filesystem::path p(path);
    modelDir_ = p.has_parent_path() ? p.parent_path().string() : ".";
  }

  mlir::FailureOr<ImportResult> run();
  /// feedModelInputs (Import.h).
  mlir::LogicalResult feedInputs(const InputFeed &feed);

  /// Records the first error (later ones are consequences).
  Failure fail(const llvm::Twine &msg) {
    if (error_.empty())
      error_ = msg.str();
    return Failure();
  }
  const std::string &error() const { return error_; }
  mlir::OpBuilder &builder() { return builder_; }
  mlir::MLIRContext &context() { return ctx_; }
  const std::string &modelDir() const { return modelDir_; }

  /// Binds `name` in the current scope.
  void bind(const std::string &name, OnnxValue v) { (*scope_)[name] = std::move(v); }

  /// Import-time folds by (op name, attributes, operand constants, result
  /// types), all uniqued (NodeContext::finishOp).
  using FoldMemo =
      std::map<std::vector<const void *>, mlir::FailureOr<llvm::SmallVector<mlir::DenseElementsAttr>>>;
  FoldMemo &foldMemo() { return foldMemo_; }

  /// Graph inputs that `v` is computed from (for needs-constant errors).
  std::vector<std::string> graphInputsOf(mlir::Value v);

private:
  using Scope = std::map<std::string, OnnxValue>;
  using OpsetMap = std::map<std::string, int64_t>;

  /// Fails, saying why, unless the model path is an existing regular file.
  mlir::LogicalResult checkModelFile();
  mlir::LogicalResult readModel(onnx::ModelProto &model);
  mlir::LogicalResult checkOpsets(const onnx::ModelProto &model);
  mlir::LogicalResult checkAndSortGraph(onnx::GraphProto &graph);
  void classifyInitializers(const onnx::GraphProto &graph);
  /// A float initializer of rank >= 1 with elements: a model weight, unless
  /// classifyInitializers found it is a buffer or a folded constant.
  static bool isParam(mlir::RankedTensorType type);
  /// Whether the import reads `init`'s data (after classifyInitializers).
  bool readsData(const onnx::TensorProto &init, mlir::RankedTensorType type) const;
  /// ImportResult::exportModel of `model` (a copy: the import goes on).
  std::string exportModel(onnx::ModelProto model) const;
  mlir::LogicalResult readInitializers(const onnx::GraphProto &graph);
  mlir::LogicalResult createFunction(const onnx::GraphProto &graph);
  mlir::LogicalResult importNode(const onnx::NodeProto &node, const OpsetMap &opsets,
                                 const std::string &namePrefix);
  mlir::LogicalResult inlineFunction(const onnx::NodeProto &node,
                                     const onnx::FunctionProto &fn,
                                     std::vector<const OnnxValue *> inputs,
                                     const std::string &namePrefix);
  mlir::LogicalResult finishFunction(const onnx::GraphProto &graph);
  void reportMergedParameters(const MergedParameters &merged);
  mlir::FailureOr<mlir::RankedTensorType> graphInputType(const onnx::ValueInfoProto &vi);
  /// Whether 2-D initializer `b` holds exactly (bitwise) the transpose of 2-D
  /// initializer `a`, and `a` is neither symmetric nor constant-filled. Both
  /// exporters store a tied embedding / lm_head pair this way: TorchScript's
  /// constant folding turns MatMul(x, Transpose(W)) into a new initializer
  /// W^T, and onnxscript's optimizer (dynamo, optimize=True) does the same.
  bool transposedCopyOf(const std::string &b, const std::string &a) const;

  mlir::MLIRContext &ctx_;
  mlir::OpBuilder builder_;
  std::string path_;
  std::string modelDir_;
  const ImportOptions &opts_;
  std::string error_;

  mlir::OwningOpRef<mlir::ModuleOp> module_;
  mlir::func::FuncOp func_;
  Scope mainScope_;
  Scope *scope_ = &mainScope_;
  OpsetMap modelOpsets_;
  std::map<std::pair<std::string, std::string>, const onnx::FunctionProto *> functions_;
  /// Initializer name -> its data (absent for parameters when !loadWeights).
  std::map<std::string, rt::HostTensor> initData_;
  std::map<std::string, mlir::RankedTensorType> initTypes_;
  std::vector<std::string> argNames_;
  /// Graph inputs whose shape the user set (--input, --dim) where the model
  /// left an axis dynamic: name -> "4x16 (axis 0 'batch' from --dim batch=4)".
  /// A node that then fails is reported at these inputs.
  std::map<std::string, std::string> boundInputs_;
  /// Initializers that are no torch weights (classifyInitializers): module
  /// buffers of the graph signature, constants folded from no parameter,
  /// and buffers registered with persistent=False.
  std::set<std::string> buffers_, folded_, nonPersistent_;
  /// --dim names some input axis carried.
  std::set<std::string> usedDimParams_;
  /// Every dim_param of the graph inputs (for the error of an unused --dim).
  std::set<std::string> dimParamNames_;
  std::vector<std::string> notes_;
  /// Folded W^T initializer -> W (MergedParameters::transposed): imported as
  /// tc.transpose of parameter W.
  std::map<std::string, std::string> transposedParams_;
  /// The initializers that became parameters (ImportResult::exportInits).
  std::vector<ImportResult::ExportInit> exportInits_;
  int inlineDepth_ = 0;
  FoldMemo foldMemo_;
};

} // namespace tc::onnx_import

#endif // TC_FRONTENDS_ONNX_IMPORTERDRIVER_H
