//===- Fold.cpp - constant folding during import --------------------------===//
//
// tc's design has static shapes only, so the shape sub-graphs exporters emit
// (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, ...) must be computed
// while importing. NodeContext::make folds every op whose operands are all
// constants through evaluateConstantOp, i.e. tc::evaluateOp: the runtime's
// CPU reference executor, the one source of truth for op semantics. Also the
// int64 / double views of dense attributes the handlers use.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Importer.h"

#include "dialects/tc/Eval/Program.h"

#include "llvm/ADT/APFloat.h"

#include <cmath>

using namespace mlir;

namespace tc::onnx_import {

SmallVector<int64_t> denseToInts(DenseElementsAttr attr) {
  SmallVector<int64_t> out;
  Type elt = attr.getElementType();
  if (auto it = dyn_cast<IntegerType>(elt)) {
    bool zext = it.isUnsigned() || it.getWidth() == 1;
    for (const APInt &v : attr.getValues<APInt>())
      out.push_back(zext ? (int64_t)v.getZExtValue() : v.getSExtValue());
  } else if (isa<FloatType>(elt)) {
    for (const APFloat &v : attr.getValues<APFloat>()) {
      APFloat d = v;
      bool lost;
      d.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
      double x = d.convertToDouble();
      // Saturating, never undefined: NaN reads as 0, +-inf and values past
      // int64's range as its bounds (callers range-check what they get).
      out.push_back(std::isnan(x) ? 0
                    : x >= 9223372036854775807.0 ? INT64_MAX
                    : x <= -9223372036854775808.0 ? INT64_MIN
                                                  : (int64_t)x);
    }
  }
  return out;
}

SmallVector<double> denseToDoubles(DenseElementsAttr attr) {
  SmallVector<double> out;
  Type elt = attr.getElementType();
  if (isa<IntegerType>(elt)) {
    for (int64_t v : denseToInts(attr))
      out.push_back((double)v);
  } else if (isa<FloatType>(elt)) {
    for (const APFloat &v : attr.getValues<APFloat>()) {
      APFloat d = v;
      bool lost;
      d.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
      out.push_back(d.convertToDouble());
    }
  }
  return out;
}

DenseElementsAttr denseFromDoubles(RankedTensorType type, ArrayRef<double> values) {
  Type elt = type.getElementType();
  if (auto ft = dyn_cast<FloatType>(elt)) {
    SmallVector<APFloat> vals;
    vals.reserve(values.size());
    for (double v : values) {
      APFloat f(v);
      bool lost;
      f.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      vals.push_back(f);
    }
    return DenseElementsAttr::get(type, vals);
  }
  SmallVector<int64_t> ints;
  for (double v : values) {
    if (elt.isInteger(1))
      ints.push_back(v != 0);
    else if (std::isnan(v))
      ints.push_back(0);
    else if (v >= 9.2e18)
      ints.push_back(INT64_MAX);
    else if (v <= -9.2e18)
      ints.push_back(INT64_MIN);
    else
      ints.push_back((int64_t)v); // truncation toward zero, as tc.cast
  }
  return denseFromInts(type, ints);
}

DenseElementsAttr denseFromInts(RankedTensorType type, ArrayRef<int64_t> values) {
  Type elt = type.getElementType();
  if (isa<FloatType>(elt)) {
    SmallVector<double> d(values.begin(), values.end());
    return denseFromDoubles(type, d);
  }
  if (elt.isInteger(1)) {
    SmallVector<bool> bits;
    for (int64_t v : values)
      bits.push_back(v != 0);
    return DenseElementsAttr::get(type, ArrayRef<bool>(bits));
  }
  unsigned width = elt.getIntOrFloatBitWidth();
  SmallVector<APInt> vals;
  vals.reserve(values.size());
  for (int64_t v : values)
    vals.push_back(APInt(width, (uint64_t)v, /*isSigned=*/true, /*implicitTrunc=*/true));
  return DenseElementsAttr::get(type, vals);
}

FailureOr<SmallVector<DenseElementsAttr>> evaluateConstantOp(Operation *op) {
  // An op the executor cannot evaluate simply stays an op: not an error.
  std::string error;
  return tc::evaluateOp(op, {}, &error);
}

} // namespace tc::onnx_import
