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

namespace tcx {
/// On the tc.rotary in a generated "rotary" tcx.kernel (tc-lower-to-tcx
/// sets them, CUDA codegen reads them): the [batch, head, row] element
/// strides its input is read with / its result written with (the innermost
/// axis contiguous), when they are not the dense ones.
inline constexpr llvm::StringLiteral kRotaryInStridesAttr = "tc.in_strides";
inline constexpr llvm::StringLiteral kRotaryOutStridesAttr = "tc.out_strides";
/// On the tc.rotary of a "rotary" kernel: the kernel's output is its input
/// (the same buffer, the in strides): it rotates the first R features in
/// place, one thread per pair, and leaves the rest untouched.
inline constexpr llvm::StringLiteral kRotaryInPlaceKernelAttr = "tc.in_place";

/// What a `tcx.matmul` computes besides its buffers, by name (the op's
/// attributes, with their defaults): the builder's argument, so that a new
/// attribute (FP8 scales, say) is one field here and not one more positional
/// argument at every call.
struct MatmulParams {
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  /// Elements between batch matrices; -1: packed, 0: one matrix for all.
  int64_t strideLhs = -1, strideRhs = -1, strideOut = -1;
  bool transposeLhs = false, transposeRhs = false;
  llvm::StringRef computeType = "f32";
  llvm::StringRef epilogue = "none";
  float alpha = 1.0f, beta = 0.0f;
  /// Numpy-broadcast batch shapes (both or neither; empty: none).
  llvm::ArrayRef<int64_t> lhsBatch, rhsBatch;
  bool broadcast = false;
  /// computeType "fp8" only: cuBLASLt's fast accumulation (forward GEMMs).
  /// The scales are the third and fourth inputs.
  bool fastAccum = false;
  /// computeType "fp8" only: block scales (1 = 1x128, 2 = 128x128, 3 = 1x32
  /// E8M0 (MXFP8); 0 none).
  int64_t lhsBlocks = 0, rhsBlocks = 0;
  /// Not fp8: alpha read on the device from the last input (f32 [1]).
  bool deviceAlpha = false;
  /// Not fp8: the last input is added to the product (cuBLASLt's C).
  bool addend = false;
  /// "lhs" / "rhs": `biasGradOut` gets the sum over k of that operand
  /// (tcx.matmul's bias_grad); "none" otherwise.
  llvm::StringRef biasGrad = "none";
  mlir::Value biasGradOut;
  /// Epilogue "gelu_aux" / "bias_gelu_aux": where the GELU's input goes.
  mlir::Value auxOut;
};
} // namespace tcx

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
