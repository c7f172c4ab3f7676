//===- TcxOps.h - the tcx dialect, its types and ops ------------*- C++ -*-===//
#ifndef TC_DIALECT_TCX_IR_TCXOPS_H
#define TC_DIALECT_TCX_IR_TCXOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/tcx/IR/TcxOpsDialect.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/tcx/IR/TcxTypes.h.inc"

#define GET_OP_CLASSES
#include "dialects/tcx/IR/TcxOps.h.inc"

namespace tcx {
/// Registers the tcx dialect with a registry.
void registerTcxDialect(mlir::DialectRegistry &registry);

/// Bytes of `n` elements of `elt` (sub-byte types packed, rounded up).
int64_t storageBytes(mlir::Type elt, int64_t n);

/// Bytes of scratch memory the runtime launcher `callee` needs for the sizes
/// in `attrs` (0: none, or an unknown callee): the library ABI's scratch
/// function (runtime/src/schema/library_abi.h), which the launchers use too.
int64_t libraryScratchBytes(llvm::StringRef callee, mlir::DictionaryAttr attrs);

} // namespace tcx

#endif // TC_DIALECT_TCX_IR_TCXOPS_H
