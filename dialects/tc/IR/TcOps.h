//===- TcOps.h - the tc dialect and its ops ---------------------*- C++ -*-===//
#ifndef TC_DIALECT_TC_IR_TCOPS_H
#define TC_DIALECT_TC_IR_TCOPS_H

#include <optional>

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/tc/IR/TcTraits.h"

#include "dialects/tc/IR/TcOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/tc/IR/TcOps.h.inc"

namespace tc {
/// Numpy broadcast of two static shapes; failure when a pair of dimensions
/// is neither equal nor 1.
mlir::FailureOr<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);
/// Elementwise ops (the TC_Elementwise trait): what a tc.fusion body may hold
/// and CUDA codegen can emit.
inline bool isElementwise(mlir::Operation *op) { return op->hasTrait<traits::Elementwise>(); }
/// Reductions over `axes` (the TC_Reduction trait).
inline bool isReduction(mlir::Operation *op) { return op->hasTrait<traits::Reduction>(); }
/// Ops that only move or select elements (the TC_DataMovement trait).
inline bool isDataMovement(mlir::Operation *op) { return op->hasTrait<traits::DataMovement>(); }
/// reduce_sum / reduce_mean / reduce_max / reduce_min over the trailing axes
/// [rank-k, rank) of its input, k >= 1 (the reductions a fusion may end in).
bool isTrailingReduction(mlir::Operation *op);
/// reduce_sum over every axis but the last of an input of rank >= 2 (keepdims
/// or not): the column sums of the input seen as a [rows, cols] matrix, a
/// Linear layer's bias gradient. A fusion may end in one instead of a
/// trailing reduction (tc-fuse-bias-grad's fusion pairing).
bool isLeadingColumnSum(mlir::Operation *op);
/// softmax / log_softmax over the last axis (a fusion may end in one).
bool isLastAxisSoftmax(mlir::Operation *op);
/// The value of a tc.constant of float type whose elements are all equal
/// (splat or not; e.g. a scale, an epsilon, a mask fill), else nothing.
std::optional<double> splatFloatValue(mlir::Value v);
/// The operand of binary `op` that is not `v`; null when both are `v` or
/// neither is (the recognizers' walk along a written-out chain).
mlir::Value otherOperand(mlir::Operation *op, mlir::Value v);
/// Rebuilds `fusion` with one more result, of `type`: `make` builds, before
/// the body's yield (the builder's insertion point), the value yielded last
/// from the values the body yields. The old results' uses move to the new
/// fusion's and `fusion` is erased; returns the new fusion (its last result
/// the added one). tc-fuse-bias-grad (a column sum) and tc-fuse-fp8-amax (an
/// amax) grow fusions this way.
FusionOp growFusion(FusionOp fusion, mlir::Type type,
                    llvm::function_ref<mlir::Value(mlir::OpBuilder &, mlir::ValueRange)> make);
/// Registers the tc dialect with a registry.
void registerTcDialect(mlir::DialectRegistry &registry);
} // namespace tc

#endif // TC_DIALECT_TC_IR_TCOPS_H
