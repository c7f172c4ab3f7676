//===- Program.h - tc functions and ops on the reference executor -*- C++ -*-===//
//
// Lowers a func.func of tc ops into the runtime's op-level program (the
// contract in runtime/src/schema/program.h), and evaluates ops whose operands
// are all constants on the CPU reference (runtime/include/tc/reference.h):
// the importer's and the constant folder's one source of truth for op
// semantics. Both convert ops the same way: every tc op becomes one rt::Op
// named like the MLIR op, carrying all its attributes (defaults filled in).
//
//===----------------------------------------------------------------------===//
#ifndef TC_DIALECT_TC_EVAL_PROGRAM_H
#define TC_DIALECT_TC_EVAL_PROGRAM_H

#include "dialects/tc/Eval/Types.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace tc {

/// Lowers `fn` (tc ops + func.return only) to a runtime function called
/// `name`. Argument and result names come from the `tc.name` argument and
/// result attributes (falling back to "arg<i>" / "out<i>").
mlir::FailureOr<rt::Function> lowerToProgram(mlir::func::FuncOp fn,
                                             llvm::StringRef name,
                                             std::string *error);

/// The attribute tagReferenceValues sets: "tc.ref", [id, n].
inline constexpr llvm::StringLiteral kReferenceValueAttr = "tc.ref";

/// Sets kReferenceValueAttr on every op of `fn` with results: [id, n], id
/// the id, in the program lowerToProgram makes of `fn`, of the op's first
/// result (result i is id + i; arguments come first) and n its number of
/// results then. The GPU half tags its copy of the module with it, so that
/// a device buffer can name the reference value it holds (tc-run --check
/// compares the two).
void tagReferenceValues(mlir::func::FuncOp fn);

/// The reference value id of `op`'s result `index` by its
/// kReferenceValueAttr tag, or nullopt: when `op` has none, or when the
/// result is not one of the n it had when tagged (a pass added it since, as
/// tc-fuse-fp8-amax adds an amax: not a value of the reference program).
/// An op a pass made of several tagged ops carries the list form
/// setReferenceValueIds writes.
std::optional<int64_t> referenceValueId(mlir::Operation *op, unsigned index);

/// Tags `op` with one reference value id per result (nullopt: none), the
/// list form [-1, id0, id1, ...] of kReferenceValueAttr (-1 for none): the
/// results of an op that replaces several (tc-fuse-fp8-delayed).
void setReferenceValueIds(mlir::Operation *op, llvm::ArrayRef<std::optional<int64_t>> ids);

/// Whether `attr` is `count` repetitions of its first 1/count, compared as
/// bytes (a splat is; i1, packed 8 to a byte, only in whole-byte blocks):
/// a constant broadcast over leading axes, which evaluateOp evaluates on
/// one block.
bool repeatsBlocks(mlir::DenseElementsAttr attr, int64_t count);

/// Evaluates a tc op whose operands are all produced by tc.constant (or are
/// given in `operandValues`, one per operand) on the reference executor.
/// Returns one attribute per result, or failure with a message in `error`.
mlir::FailureOr<llvm::SmallVector<mlir::DenseElementsAttr>>
evaluateOp(mlir::Operation *op, llvm::ArrayRef<mlir::ElementsAttr> operandValues,
           std::string *error);

} // namespace tc

#endif // TC_DIALECT_TC_EVAL_PROGRAM_H
