//===- Program.h - tc dialect <-> runtime program ---------------*- C++ -*-===//
//
// Lowers a func.func of tc ops into the runtime's op-level program (the
// contract in runtime/src/schema/program.h), converts constants between MLIR
// attributes and host tensors, and evaluates ops whose operands are all
// constants with the CPU reference executor (the importer's and the
// constant folder's one source of truth for op semantics).
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_PROGRAM_H
#define TC_COMPILER_PROGRAM_H

#include "runtime/src/schema/program.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace tc {

/// The runtime dtype of an MLIR element type, or nullopt if it has none.
std::optional<rt::DType> toDType(mlir::Type elementType);
/// The MLIR element type of a runtime dtype.
mlir::Type fromDType(mlir::MLIRContext *ctx, rt::DType dtype);
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

/// Lowers `fn` (tc ops + func.return only) to a runtime function called
/// `name`. Argument and result names come from the `tc.name` argument and
/// result attributes (falling back to "arg<i>" / "out<i>").
mlir::FailureOr<rt::Function> lowerToProgram(mlir::func::FuncOp fn,
                                             llvm::StringRef name,
                                             std::string *error);

/// Evaluates a tc op whose operands are all produced by tc.constant (or are
/// given in `operandValues`, one per operand) on the reference executor.
/// Returns one attribute per result, or failure with a message in `error`.
mlir::FailureOr<llvm::SmallVector<mlir::DenseElementsAttr>>
evaluateOp(mlir::Operation *op, llvm::ArrayRef<mlir::ElementsAttr> operandValues,
           std::string *error);

} // namespace tc

#endif // TC_COMPILER_PROGRAM_H
