//===- TcTraits.h - the op classes of the tc dialect ------------*- C++ -*-===//
//
// Marker traits for what passes ask of an op (TcOps.td: TC_Elementwise,
// TC_Reduction, TC_DataMovement), so that the lowering, the code generator
// and the precision pass query `op->hasTrait<...>()` instead of keeping
// their own lists of op names.
//
//===----------------------------------------------------------------------===//
#ifndef TC_DIALECT_TC_IR_TCTRAITS_H
#define TC_DIALECT_TC_IR_TCTRAITS_H

#include "mlir/IR/OpDefinition.h"

namespace tc::traits {

/// One result element from the operand elements at the same (numpy-
/// broadcast) index.
template <typename ConcreteType>
class Elementwise : public mlir::OpTrait::TraitBase<ConcreteType, Elementwise> {};

/// A reduction over `axes` (reduce_sum/mean/max/min/prod).
template <typename ConcreteType>
class Reduction : public mlir::OpTrait::TraitBase<ConcreteType, Reduction> {};

/// Moves or selects elements without arithmetic.
template <typename ConcreteType>
class DataMovement : public mlir::OpTrait::TraitBase<ConcreteType, DataMovement> {};

} // namespace tc::traits

#endif // TC_DIALECT_TC_IR_TCTRAITS_H
