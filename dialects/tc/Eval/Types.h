//===- Types.h - tc types and constants <-> runtime types -------*- C++ -*-===//
//
// The bridge between MLIR's side of a tc program and the runtime's program
// contract (runtime/src/schema/program.h): element types <-> dtypes, static
// tensor types <-> rt::TensorType, constants <-> host tensors in storage
// format, op attributes <-> rt::Attr. The ONNX importer (initialisers,
// folded constants) and the compiler (the artifact's program and parameter
// table) both convert through here.
//
//===----------------------------------------------------------------------===//
#ifndef TC_DIALECT_TC_EVAL_TYPES_H
#define TC_DIALECT_TC_EVAL_TYPES_H

#include "runtime/src/schema/program.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace tc {

/// The runtime dtype of an MLIR element type, or nullopt if it has none.
std::optional<rt::DType> toDType(mlir::Type elementType);
/// The runtime type of a ranked, static tensor type (nullopt otherwise).
std::optional<rt::TensorType> toTensorType(mlir::Type type);

/// Most bytes a constant may take in an artifact (4 GiB). A splat attribute
/// of any shape costs nothing in MLIR but is stored expanded: a hostile model
/// (a 2^38-element mask) must get an error, not an allocation that aborts.
constexpr int64_t kMaxConstantBytes = int64_t(1) << 32;

/// Host copy of a constant (dense or resource elements) in storage format.
/// Fails for an unsupported element type or one of more than
/// kMaxConstantBytes (then with a message in `*error`, if given).
mlir::FailureOr<rt::HostTensor> toHostTensor(mlir::ElementsAttr attr,
                                             std::string *error = nullptr);
/// A dense attribute of `type` holding the host tensor's values.
mlir::DenseElementsAttr fromHostTensor(mlir::RankedTensorType type,
                                       const rt::HostTensor &tensor);

/// Converts an op attribute to the runtime's form (bools, integers and unit
/// attributes become Int, dense arrays Ints, constants Tensor). `attrName`
/// is for the error message.
mlir::LogicalResult convertAttr(mlir::Attribute a, rt::Attr *out, std::string *error,
                                llvm::StringRef attrName);

} // namespace tc

#endif // TC_DIALECT_TC_EVAL_TYPES_H
