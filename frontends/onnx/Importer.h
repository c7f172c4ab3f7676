//===- Importer.h - internals shared by the ONNX op handlers ----*- C++ -*-===//
//
// The importer walks the graph's nodes in order and calls one handler per
// node, chosen from a table keyed by (domain, op_type) and the opset range
// the handler understands (the onnx-mlir / torch-mlir pattern). A handler
// reads its inputs and attributes from a NodeContext, builds tc ops with
// NodeContext::make (which checks types first and folds ops on constants to
// tc.constant) and binds the node's outputs.
//
// Every ONNX value is an mlir::Value; a value known at import time is one
// produced by tc.constant, whose attribute holds it (NodeContext::constant*).
//
//===----------------------------------------------------------------------===//
#ifndef TC_FRONTENDS_ONNX_IMPORTER_H
#define TC_FRONTENDS_ONNX_IMPORTER_H

#include "dialects/tc/IR/TcOps.h"
#include "frontends/onnx/Import.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include "onnx/onnx_pb.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tc::onnx_import {

/// Largest element count an op may produce and still be folded to a
/// constant during import (larger results stay ops: folding them would bloat
/// the module with attributes nobody needs at compile time).
constexpr int64_t kMaxFoldElements = 16 * 1024 * 1024;
/// Most work (elements computed, times a matmul's inner dimension) an op
/// may cost and still be folded during import: a matmul of constants stays
/// an op past 2^24 multiply-adds (~1 s on the reference), so that an
/// import never spends long evaluating one.
constexpr int64_t kMaxFoldWork = kMaxFoldElements;

/// Most elements any tensor of an imported model may have (2^40, as for
/// initializer data): the element counts and byte sizes of every type the
/// importer builds then stay far from int64 overflow, in tc's code and in
/// MLIR's (RankedTensorType::getNumElements multiplies unchecked).
constexpr int64_t kMaxTensorElements = int64_t(1) << 40;

/// The element count of `shape`, or -1 if a dimension is negative or the
/// count exceeds kMaxTensorElements (computed without overflowing).
int64_t boundedNumElements(llvm::ArrayRef<int64_t> shape);

/// "[2, 3, 4]": a shape in diagnostics.
std::string shapeStr(llvm::ArrayRef<int64_t> shape);

/// What an ONNX value name stands for.
struct OnnxValue {
  mlir::Value value; ///< a tensor (null for sequences)
  bool isSequence = false;
  /// Sequences are compile-time lists of tensors.
  llvm::SmallVector<mlir::Value> elements;
  /// Element type of a sequence's tensors (for empty sequences; may be null).
  mlir::Type sequenceElementType;
};

class Importer;

/// What the fail helpers return: converts to failure() of LogicalResult and
/// of any FailureOr<T>, so a handler can `return nc.fail("...")` anywhere.
struct Failure {
  operator mlir::LogicalResult() const { return mlir::failure(); }
  template <typename T>
  operator mlir::FailureOr<T>() const { return mlir::failure(); }
};

/// Collects the diagnostics MLIR emits while it is alive (verifier and
/// shape-inference messages) so they can become the importer's error text.
class DiagnosticCapture {
public:
  explicit DiagnosticCapture(mlir::MLIRContext *ctx);
  /// All messages so far, "; "-separated.
  const std::string &messages() const { return messages_; }

private:
  std::string messages_;
  mlir::ScopedDiagnosticHandler handler_;
};

/// One node being imported: its inputs, attributes and outputs, plus the
/// op-building helpers every handler uses. All helpers return failure after
/// recording an error that names the node; handlers just propagate it.
class NodeContext {
public:
  NodeContext(Importer &importer, const onnx::NodeProto &node, int64_t opset,
              mlir::Location loc, std::vector<const OnnxValue *> inputs);

  const onnx::NodeProto &node() const { return node_; }
  /// The opset version of the node's domain imported by the model.
  int64_t opset() const { return opset_; }
  mlir::Location loc() const { return loc_; }
  mlir::OpBuilder &builder();
  mlir::MLIRContext *context();
  /// "node 'NAME' (OpType)" for messages.
  std::string describe() const;

  //===--- Inputs ----------------------------------------------------------===//
  /// Number of inputs listed (including empty names of skipped optionals).
  size_t numInputs() const { return inputs_.size(); }
  /// Whether optional input `i` is given (listed with a non-empty name).
  bool hasInput(size_t i) const { return i < inputs_.size() && inputs_[i]; }
  /// Tensor input `i` (null when absent or a sequence).
  mlir::Value input(size_t i) const;
  /// Tensor input `i` that must be present: fails with a message otherwise.
  mlir::FailureOr<mlir::Value> requiredInput(size_t i);
  /// Raw entry (for sequence inputs); null when absent.
  const OnnxValue *inputEntry(size_t i) const {
    return hasInput(i) ? inputs_[i] : nullptr;
  }
  mlir::RankedTensorType inputType(size_t i) const;

  //===--- Constant inputs -------------------------------------------------===//
  /// The value of input `i`, which must be known at import time. If it is
  /// (computed from) a graph input, fails with the "needs-constant-input:"
  /// error (see Import.h).
  mlir::FailureOr<mlir::DenseElementsAttr> constantInput(size_t i);
  /// The same, as integers (any integer or bool element type).
  mlir::FailureOr<llvm::SmallVector<int64_t>> constantInts(size_t i);
  /// The same, as doubles (any element type).
  mlir::FailureOr<llvm::SmallVector<double>> constantDoubles(size_t i);

  //===--- Attributes ------------------------------------------------------===//
  const onnx::AttributeProto *attr(llvm::StringRef name) const;
  bool hasAttr(llvm::StringRef name) const { return attr(name) != nullptr; }
  int64_t attrInt(llvm::StringRef name, int64_t dflt) const;
  float attrFloat(llvm::StringRef name, float dflt) const;
  std::string attrString(llvm::StringRef name, llvm::StringRef dflt) const;
  std::optional<llvm::SmallVector<int64_t>> attrInts(llvm::StringRef name) const;
  std::optional<llvm::SmallVector<float>> attrFloats(llvm::StringRef name) const;
  /// A TENSOR attribute as a dense attribute.
  mlir::FailureOr<mlir::DenseElementsAttr> attrTensor(llvm::StringRef name);
  /// The first attribute read with a type other than the one it is stored
  /// with (an INT read from a FLOAT attribute would silently be 0): the
  /// accessors return the default then, and the importer fails the node with
  /// this message after its handler ran. Empty when none.
  const std::string &attrTypeError() const { return attrError_; }

  //===--- Outputs ---------------------------------------------------------===//
  size_t numOutputs() const { return node_.output_size(); }
  /// Whether output `i` is listed with a non-empty name (i.e. wanted).
  bool outputUsed(size_t i) const {
    return (int)i < node_.output_size() && !node_.output(i).empty();
  }
  /// Binds output `i` (ignored when the output is not wanted).
  mlir::LogicalResult setOutput(size_t i, mlir::Value v);
  mlir::LogicalResult setOutputSequence(size_t i, llvm::ArrayRef<mlir::Value> elems,
                                        mlir::Type elementType);

  //===--- Errors ----------------------------------------------------------===//
  /// Records "<describe()>: msg" and returns failure.
  Failure fail(const llvm::Twine &msg);
  /// Records an "unsupported attribute" error naming `name`.
  Failure failAttr(llvm::StringRef name, const llvm::Twine &msg);

  //===--- Building ops ----------------------------------------------------===//
  /// Builds tc op OpTy on `operands` with `attrs`. Result types are inferred
  /// (ops with InferTypeOpInterface) or given in `resultTypes`. Inference and
  /// the verifier run before the op is kept, so bad input gives an error, not
  /// a crash. If every operand is a constant the op is folded to tc.constant.
  template <typename OpTy>
  mlir::FailureOr<llvm::SmallVector<mlir::Value>>
  makeOp(mlir::ValueRange operands, llvm::ArrayRef<mlir::NamedAttribute> attrs,
         mlir::TypeRange resultTypes, unsigned numResults = 1) {
    mlir::OperationState state(loc_, OpTy::getOperationName());
    llvm::SmallVector<mlir::Type> types(resultTypes.begin(), resultTypes.end());
    bool infer = types.empty();
    if (infer) {
      if (operands.empty())
        return failMsg("internal: cannot infer the type of an op without operands");
      types.assign(numResults, operands.front().getType());
    }
    OpTy::build(builder(), state, types, operands, attrs);
    mlir::Operation *op = builder().create(state);
    if (infer) {
      if constexpr (OpTy::template hasTrait<mlir::InferTypeOpInterface::Trait>()) {
        DiagnosticCapture diag(context());
        llvm::SmallVector<mlir::Type> inferred;
        if (mlir::failed(OpTy::inferReturnTypes(
                context(), loc_, op->getOperands(), op->getRawDictionaryAttrs(),
                op->getPropertiesStorage(), op->getRegions(), inferred)) ||
            inferred.size() != op->getNumResults()) {
          op->erase();
          return failMsg(diag.messages().empty() ? std::string("type inference failed")
                                                 : diag.messages());
        }
        for (auto [r, t] : llvm::zip(op->getResults(), inferred))
          r.setType(t);
      }
    }
    return finishOp(op);
  }

  /// makeOp for single-result ops.
  template <typename OpTy>
  mlir::FailureOr<mlir::Value> make(mlir::ValueRange operands,
                                    llvm::ArrayRef<mlir::NamedAttribute> attrs = {},
                                    mlir::Type resultType = {}) {
    auto r = resultType ? makeOp<OpTy>(operands, attrs, mlir::TypeRange(resultType))
                        : makeOp<OpTy>(operands, attrs, mlir::TypeRange());
    if (mlir::failed(r))
      return mlir::failure();
    return (*r)[0];
  }

  /// tc.constant of `value`.
  mlir::Value constant(mlir::DenseElementsAttr value);
  /// Rank-0 (or `shape`) constant of element type `elementType` filled with `v`.
  mlir::Value splat(double v, mlir::Type elementType, llvm::ArrayRef<int64_t> shape = {});
  /// 1-D i64 constant.
  mlir::Value constI64(llvm::ArrayRef<int64_t> values);

  /// Shape helpers with the checks tc's explicit-type ops need.
  mlir::FailureOr<mlir::Value> cast(mlir::Value v, mlir::Type elementType);
  mlir::FailureOr<mlir::Value> reshape(mlir::Value v, llvm::ArrayRef<int64_t> shape);
  mlir::FailureOr<mlir::Value> broadcastTo(mlir::Value v, llvm::ArrayRef<int64_t> shape);
  mlir::FailureOr<mlir::Value> transpose(mlir::Value v, llvm::ArrayRef<int64_t> perm);
  /// Strided slice along every axis; `sizes` is the result shape.
  mlir::FailureOr<mlir::Value> slice(mlir::Value v, llvm::ArrayRef<int64_t> starts,
                                     llvm::ArrayRef<int64_t> strides,
                                     llvm::ArrayRef<int64_t> sizes);
  /// Slice [start, start+size) of one axis.
  mlir::FailureOr<mlir::Value> sliceAxis(mlir::Value v, int64_t axis, int64_t start,
                                         int64_t size);
  /// Reduction op by tc mnemonic ("reduce_sum", ...) over sorted axes.
  mlir::FailureOr<mlir::Value> reduce(llvm::StringRef kind, mlir::Value v,
                                      llvm::ArrayRef<int64_t> axes, bool keepdims);
  /// Normalises an axis in [-rank, rank) (or [-rank-1, rank] with
  /// `inclusive`); fails naming `what` otherwise.
  mlir::FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank,
                                         llvm::StringRef what = "axis",
                                         bool inclusive = false);

  //===--- Attribute builders ----------------------------------------------===//
  mlir::NamedAttribute namedI64(llvm::StringRef name, int64_t v);
  mlir::NamedAttribute namedBool(llvm::StringRef name, bool v);
  mlir::NamedAttribute namedF64(llvm::StringRef name, double v);
  mlir::NamedAttribute namedStr(llvm::StringRef name, llvm::StringRef v);
  mlir::NamedAttribute namedI64Array(llvm::StringRef name, llvm::ArrayRef<int64_t> v);

  Importer &importer() { return importer_; }

private:
  mlir::FailureOr<llvm::SmallVector<mlir::Value>> finishOp(mlir::Operation *op);
  Failure failMsg(const std::string &msg) { return fail(msg); }

  Importer &importer_;
  const onnx::NodeProto &node_;
  int64_t opset_;
  mlir::Location loc_;
  std::vector<const OnnxValue *> inputs_;
  mutable std::string attrError_;
  /// `name` when stored with `type` (or without a type, as IR < 3 writes),
  /// else null, recording the mismatch.
  const onnx::AttributeProto *typedAttr(llvm::StringRef name,
                                        onnx::AttributeProto::AttributeType type) const;
};

/// A handler imports one node; it returns failure after NodeContext::fail.
using HandlerFn = std::function<mlir::LogicalResult(NodeContext &)>;

/// One row of the handler table: `fn` handles (domain, opType) for model
/// opsets in [minOpset, maxOpset] of that domain.
struct HandlerEntry {
  std::string domain; ///< "" (ai.onnx) or "ai.onnx.ml"
  std::string opType;
  int64_t minOpset;
  int64_t maxOpset;
  HandlerFn fn;
};

/// The newest ai.onnx opset the importer handles (ONNX 1.23's). Versions 24
/// to 28 of the ops tc imports only add element types, except where a
/// handler checks what changed (Cast's round_mode, SpaceToDepth's mode,
/// Attention's inputs and windows).
constexpr int64_t kMaxOnnxOpset = 28;
/// The newest ai.onnx.ml opset accepted in opset imports.
constexpr int64_t kMaxOnnxMlOpset = 5;

/// The handler table, built on first use from the register* functions below.
const std::vector<HandlerEntry> &handlerTable();

/// Each handler group file adds its rows.
void registerElementwiseHandlers(std::vector<HandlerEntry> &table);
void registerReduceHandlers(std::vector<HandlerEntry> &table);
void registerShapeHandlers(std::vector<HandlerEntry> &table);
void registerNnHandlers(std::vector<HandlerEntry> &table);
void registerLossHandlers(std::vector<HandlerEntry> &table);
void registerSequenceHandlers(std::vector<HandlerEntry> &table);
void registerQuantizeHandlers(std::vector<HandlerEntry> &table);

/// Convenience: one row per opset range.
inline void addHandler(std::vector<HandlerEntry> &table, llvm::StringRef opType,
                       int64_t minOpset, int64_t maxOpset, HandlerFn fn,
                       llvm::StringRef domain = "") {
  table.push_back({domain.str(), opType.str(), minOpset, maxOpset, std::move(fn)});
}

//===--- Tensor data (TensorData.cpp) --------------------------------------===//

/// The MLIR element type of an ONNX TensorProto::DataType, or null.
mlir::Type elementTypeFromOnnx(mlir::MLIRContext *ctx, int32_t dataType);
/// "FLOAT", "STRING", ... for messages.
std::string onnxTypeName(int32_t dataType);

/// Reads a TensorProto's shape and element type (no data).
mlir::FailureOr<mlir::RankedTensorType>
tensorProtoType(mlir::MLIRContext *ctx, const onnx::TensorProto &t, std::string *error);
/// Reads a TensorProto's data (raw_data, typed fields, or external data
/// relative to `modelDir`) into storage format.
mlir::FailureOr<rt::HostTensor> readTensorProto(mlir::MLIRContext *ctx,
                                                const onnx::TensorProto &t,
                                                const std::string &modelDir,
                                                std::string *error);
// Conversions between MLIR types/attributes and runtime dtypes/host tensors
// are dialects/tc/Eval/Types.h's (tc::toDType, tc::fromHostTensor, tc::toHostTensor).

//===--- Folding (Fold.cpp) ------------------------------------------------===//

/// Evaluates `op` (all operands produced by tc.constant) and returns one
/// attribute per result, or failure (the op then simply stays unfolded).
mlir::FailureOr<llvm::SmallVector<mlir::DenseElementsAttr>> evaluateConstantOp(mlir::Operation *op);

/// Integer/double views of a dense attribute.
llvm::SmallVector<int64_t> denseToInts(mlir::DenseElementsAttr attr);
llvm::SmallVector<double> denseToDoubles(mlir::DenseElementsAttr attr);
/// A dense attribute of `type` holding `values` (rounded / wrapped to the
/// element type).
mlir::DenseElementsAttr denseFromDoubles(mlir::RankedTensorType type,
                                         llvm::ArrayRef<double> values);
mlir::DenseElementsAttr denseFromInts(mlir::RankedTensorType type,
                                      llvm::ArrayRef<int64_t> values);

} // namespace tc::onnx_import

#endif // TC_FRONTENDS_ONNX_IMPORTER_H
