//===- Sequence.cpp - ONNX sequence ops as compile-time lists -------------===//
//
// tc has no sequence type: a sequence is a list of tensor values the importer
// tracks while importing (OnnxValue::elements). Positions and split sizes
// must therefore be known at import time.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Importer.h"

using namespace mlir;

namespace tc::onnx_import {
namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

FailureOr<const OnnxValue *> sequenceInput(NodeContext &nc, size_t i) {
  const OnnxValue *s = nc.inputEntry(i);
  if (!s || !s->isSequence)
    return nc.fail("input #" + Twine(i) + " must be a sequence"), failure();
  return s;
}

/// A position input (scalar) normalised against `size` (inclusive allows
/// `size` itself, for insertion).
FailureOr<int64_t> position(NodeContext &nc, size_t i, int64_t size, int64_t dflt,
                            bool inclusive) {
  if (!nc.hasInput(i))
    return dflt;
  auto p = nc.constantInts(i);
  if (failed(p))
    return failure();
  if (p->size() != 1)
    return nc.fail("position must be a scalar"), failure();
  int64_t pos = (*p)[0];
  int64_t hi = inclusive ? size : size - 1;
  if (pos < -size || pos > hi)
    return nc.fail("position " + Twine(pos) + " is out of range for a sequence of " +
                   Twine(size)),
           failure();
  return pos < 0 ? pos + size : pos;
}

LogicalResult splitToSequence(NodeContext &nc) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  auto t = typeOf(*x);
  auto axis = nc.normalizeAxis(nc.attrInt("axis", 0), t.getRank());
  if (failed(axis))
    return failure();
  int64_t d = t.getDimSize(*axis);
  SmallVector<int64_t> sizes;
  bool squeeze = false;
  if (nc.hasInput(1)) {
    auto s = nc.constantInts(1);
    if (failed(s))
      return failure();
    if (nc.inputType(1).getRank() == 0) {
      int64_t chunk = (*s)[0];
      if (chunk <= 0)
        return nc.fail("split size must be positive");
      for (int64_t off = 0; off < d; off += chunk)
        sizes.push_back(std::min(chunk, d - off));
    } else {
      sizes = *s;
    }
  } else {
    sizes.assign(d, 1);
    squeeze = nc.attrInt("keepdims", 1) == 0;
  }
  SmallVector<Value> elems;
  int64_t off = 0;
  for (int64_t s : sizes) {
    if (s < 0 || off + s > d)
      return nc.fail("split sizes exceed the axis");
    auto piece = nc.sliceAxis(*x, *axis, off, s);
    if (failed(piece))
      return failure();
    Value v = *piece;
    if (squeeze) {
      SmallVector<int64_t> shape(t.getShape());
      shape.erase(shape.begin() + *axis);
      auto r = nc.reshape(v, shape);
      if (failed(r))
        return failure();
      v = *r;
    }
    elems.push_back(v);
    off += s;
  }
  if (off != d)
    return nc.fail("split sizes do not add up to the axis size");
  return nc.setOutputSequence(0, elems, t.getElementType());
}

LogicalResult sequenceConstruct(NodeContext &nc) {
  SmallVector<Value> elems;
  for (size_t i = 0; i < nc.numInputs(); ++i) {
    auto v = nc.requiredInput(i);
    if (failed(v))
      return failure();
    elems.push_back(*v);
  }
  Type elt = elems.empty() ? Type() : typeOf(elems[0]).getElementType();
  return nc.setOutputSequence(0, elems, elt);
}

LogicalResult sequenceEmpty(NodeContext &nc) {
  Type elt = elementTypeFromOnnx(nc.context(), (int32_t)nc.attrInt("dtype", 1));
  if (!elt)
    return nc.failAttr("dtype", "unsupported element type");
  return nc.setOutputSequence(0, {}, elt);
}

LogicalResult sequenceAt(NodeContext &nc) {
  auto s = sequenceInput(nc, 0);
  if (failed(s))
    return failure();
  if (!nc.hasInput(1))
    return nc.fail("position is required");
  auto p = position(nc, 1, (*s)->elements.size(), 0, false);
  if (failed(p))
    return failure();
  return nc.setOutput(0, (*s)->elements[*p]);
}

LogicalResult sequenceLength(NodeContext &nc) {
  auto s = sequenceInput(nc, 0);
  if (failed(s))
    return failure();
  return nc.setOutput(0, nc.splat((double)(*s)->elements.size(), nc.builder().getI64Type()));
}

LogicalResult sequenceInsert(NodeContext &nc) {
  auto s = sequenceInput(nc, 0);
  auto v = nc.requiredInput(1);
  if (failed(s) || failed(v))
    return failure();
  int64_t n = (*s)->elements.size();
  auto p = position(nc, 2, n, n, true);
  if (failed(p))
    return failure();
  SmallVector<Value> elems((*s)->elements);
  elems.insert(elems.begin() + *p, *v);
  return nc.setOutputSequence(0, elems, typeOf(*v).getElementType());
}

LogicalResult sequenceErase(NodeContext &nc) {
  auto s = sequenceInput(nc, 0);
  if (failed(s))
    return failure();
  int64_t n = (*s)->elements.size();
  if (n == 0)
    return nc.fail("cannot erase from an empty sequence");
  auto p = position(nc, 1, n, n - 1, false);
  if (failed(p))
    return failure();
  SmallVector<Value> elems((*s)->elements);
  elems.erase(elems.begin() + *p);
  return nc.setOutputSequence(0, elems, (*s)->sequenceElementType);
}

LogicalResult concatFromSequence(NodeContext &nc) {
  auto s = sequenceInput(nc, 0);
  if (failed(s))
    return failure();
  const auto &elems = (*s)->elements;
  if (elems.empty())
    return nc.fail("cannot concatenate an empty sequence");
  if (!nc.hasAttr("axis"))
    return nc.fail("attribute 'axis' is required");
  bool newAxis = nc.attrInt("new_axis", 0) != 0;
  int64_t rank = typeOf(elems[0]).getRank();
  auto axis = nc.normalizeAxis(nc.attrInt("axis", 0), rank, "axis", newAxis);
  if (failed(axis))
    return failure();
  SmallVector<Value> parts;
  for (Value e : elems) {
    if (newAxis) {
      SmallVector<int64_t> shape(typeOf(e).getShape());
      shape.insert(shape.begin() + *axis, 1);
      auto r = nc.reshape(e, shape);
      if (failed(r))
        return failure();
      e = *r;
    }
    parts.push_back(e);
  }
  if (parts.size() == 1)
    return nc.setOutput(0, parts[0]);
  auto r = nc.make<tc::ConcatOp>(parts, {nc.namedI64("axis", *axis)});
  if (failed(r))
    return failure();
  return nc.setOutput(0, *r);
}

} // namespace

void registerSequenceHandlers(std::vector<HandlerEntry> &t) {
  const int64_t M = kMaxOnnxOpset;
  addHandler(t, "SplitToSequence", 11, M, splitToSequence);
  addHandler(t, "SequenceConstruct", 11, M, sequenceConstruct);
  addHandler(t, "SequenceEmpty", 11, M, sequenceEmpty);
  addHandler(t, "SequenceAt", 11, M, sequenceAt);
  addHandler(t, "SequenceLength", 11, M, sequenceLength);
  addHandler(t, "SequenceInsert", 11, M, sequenceInsert);
  addHandler(t, "SequenceErase", 11, M, sequenceErase);
  addHandler(t, "ConcatFromSequence", 11, M, concatFromSequence);
}

} // namespace tc::onnx_import
