//===- TcOps.h - the tc dialect and its ops ---------------------*- C++ -*-===//
#ifndef TC_DIALECT_TC_IR_TCOPS_H
#define TC_DIALECT_TC_IR_TCOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/tc/IR/TcOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/tc/IR/TcOps.h.inc"

namespace tc {
/// Numpy broadcast of two static shapes; failure when a pair of dimensions
/// is neither equal nor 1.
mlir::FailureOr<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);
/// Registers the tc dialect with a registry.
void registerTcDialect(mlir::DialectRegistry &registry);
} // namespace tc

#endif // TC_DIALECT_TC_IR_TCOPS_H
