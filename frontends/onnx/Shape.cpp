//===- Shape.cpp - shape, layout and indexing ONNX ops --------------------===//
//
// Reshape, Flatten, (Un)Squeeze, Transpose, Expand, Tile, Slice, Concat,
// Split, Pad, Shape, Size, ConstantOfShape, Range, Gather(Elements/ND),
// Trilu, EyeLike, OneHot. Shapes are static, so every shape operand must be
// known at import time (a constant, possibly folded from a shape sub-graph).
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Importer.h"

#include "llvm/Support/FormatVariadic.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <climits>
#include <cmath>

using namespace mlir;

namespace tc::onnx_import {
namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Sets output 0 from a FailureOr.
LogicalResult out0(NodeContext &nc, FailureOr<Value> v) {
  if (failed(v))
    return failure();
  return nc.setOutput(0, *v);
}

LogicalResult reshapeOp(NodeContext &nc) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  SmallVector<int64_t> spec;
  if (nc.opset() < 5) {
    auto s = nc.attrInts("shape");
    if (!s)
      return nc.fail("attribute 'shape' is required");
    spec = *s;
  } else {
    auto s = nc.constantInts(1);
    if (failed(s))
      return failure();
    spec = *s;
  }
  auto in = typeOf(*x);
  bool allowZero = nc.opset() >= 14 && nc.attrInt("allowzero", 0) != 0;
  SmallVector<int64_t> shape;
  int64_t inferAt = -1, known = 1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t d = spec[i];
    if (d == 0 && !allowZero) {
      if ((int64_t)i >= in.getRank())
        return nc.fail("shape entry " + Twine(i) + " is 0 (copy) but the input has rank " +
                       Twine(in.getRank()));
      d = in.getDimSize(i);
    }
    if (d == -1) {
      if (inferAt >= 0)
        return nc.fail("shape " + shapeStr(spec) + " has more than one -1");
      inferAt = i;
      shape.push_back(1);
      continue;
    }
    if (d < 0)
      return nc.fail("shape " + shapeStr(spec) + " has a negative entry");
    if (__builtin_mul_overflow(known, d, &known) || known > kMaxTensorElements)
      return nc.fail("shape " + shapeStr(spec) + " has more than 2^40 elements");
    shape.push_back(d);
  }
  if (inferAt >= 0) {
    if (known == 0 || in.getNumElements() % known != 0)
      return nc.fail("cannot reshape " + shapeStr(in.getShape()) + " to " + shapeStr(spec));
    shape[inferAt] = in.getNumElements() / known;
  }
  return out0(nc, nc.reshape(*x, shape));
}

LogicalResult flatten(NodeContext &nc) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  auto in = typeOf(*x);
  // Flatten's axis lies in [-r, r] (r itself puts everything in the rows).
  int64_t axis = nc.attrInt("axis", 1), rank = in.getRank();
  if (axis < -rank || axis > rank)
    return nc.fail("axis " + Twine(axis) + " is out of range for rank " + Twine(rank));
  if (axis < 0)
    axis += rank;
  int64_t a = 1, b = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < axis ? a : b) *= in.getDimSize(d);
  return out0(nc, nc.reshape(*x, {a, b}));
}

FailureOr<SmallVector<int64_t>> axesOf(NodeContext &nc, int64_t inputSince, bool required) {
  if (nc.opset() < inputSince) {
    auto a = nc.attrInts("axes");
    if (!a) {
      if (required)
        return nc.fail("attribute 'axes' is required"), failure();
      return SmallVector<int64_t>();
    }
    return *a;
  }
  if (!nc.hasInput(1)) {
    if (required)
      return nc.fail("input 'axes' is required"), failure();
    return SmallVector<int64_t>();
  }
  return nc.constantInts(1);
}

LogicalResult squeeze(NodeContext &nc) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  auto axes = axesOf(nc, 13, false);
  if (failed(axes))
    return failure();
  auto in = typeOf(*x);
  SmallVector<bool> drop(in.getRank(), false);
  if (axes->empty()) {
    for (int64_t d = 0; d < in.getRank(); ++d)
      drop[d] = in.getDimSize(d) == 1;
  }
  for (int64_t a : *axes) {
    auto n = nc.normalizeAxis(a, in.getRank(), "axes entry");
    if (failed(n))
      return failure();
    if (in.getDimSize(*n) != 1)
      return nc.fail("cannot squeeze axis " + Twine(*n) + " of size " + Twine(in.getDimSize(*n)));
    drop[*n] = true;
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < in.getRank(); ++d)
    if (!drop[d])
      shape.push_back(in.getDimSize(d));
  return out0(nc, nc.reshape(*x, shape));
}

LogicalResult unsqueeze(NodeContext &nc) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  auto axes = axesOf(nc, 13, true);
  if (failed(axes))
    return failure();
  auto in = typeOf(*x);
  int64_t outRank = in.getRank() + axes->size();
  SmallVector<bool> isNew(outRank, false);
  for (int64_t a : *axes) {
    auto n = nc.normalizeAxis(a, outRank, "axes entry");
    if (failed(n))
      return failure();
    if (isNew[*n])
      return nc.fail("axes has a repeated entry");
    isNew[*n] = true;
  }
  SmallVector<int64_t> shape;
  int64_t k = 0;
  for (int64_t d = 0; d < outRank; ++d)
    shape.push_back(isNew[d] ? 1 : in.getDimSize(k++));
  return out0(nc, nc.reshape(*x, shape));
}

LogicalResult transposeOp(NodeContext &nc) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  int64_t rank = typeOf(*x).getRank();
  SmallVector<int64_t> perm;
  if (auto p = nc.attrInts("perm")) {
    for (int64_t a : *p) {
      auto n = nc.normalizeAxis(a, rank, "perm entry");
      if (failed(n))
        return failure();
      perm.push_back(*n);
    }
  } else {
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  }
  return out0(nc, nc.transpose(*x, perm));
}

LogicalResult expand(NodeContext &nc) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  auto s = nc.constantInts(1);
  if (failed(s))
    return failure();
  auto shape = tc::broadcastShapes(typeOf(*x).getShape(), *s);
  if (failed(shape))
    return nc.fail("cannot expand " + shapeStr(typeOf(*x).getShape()) + " to " + shapeStr(*s));
  return out0(nc, nc.broadcastTo(*x, *shape));
}

LogicalResult tile(NodeContext &nc) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  auto reps = nc.constantInts(1);
  if (failed(reps))
    return failure();
  auto in = typeOf(*x);
  if ((int64_t)reps->size() != in.getRank())
    return nc.fail("repeats has " + Twine(reps->size()) + " entries for rank " + Twine(in.getRank()));
  // [d0, d1] -> [1, d0, 1, d1] -> broadcast [r0, d0, r1, d1] -> [r0*d0, r1*d1].
  SmallVector<int64_t> inter, bcast, out;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    if ((*reps)[d] < 0)
      return nc.fail("repeats must be non-negative");
    inter.append({1, in.getDimSize(d)});
    bcast.append({(*reps)[d], in.getDimSize(d)});
    out.push_back((*reps)[d] * in.getDimSize(d));
  }
  auto r = nc.reshape(*x, inter);
  if (failed(r))
    return failure();
  r = nc.broadcastTo(*r, bcast);
  if (failed(r))
    return failure();
  return out0(nc, nc.reshape(*r, out));
}

LogicalResult sliceOp(NodeContext &nc) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  auto in = typeOf(*x);
  int64_t rank = in.getRank();
  SmallVector<int64_t> starts, ends, axes, steps;
  if (nc.opset() < 10) {
    auto s = nc.attrInts("starts"), e = nc.attrInts("ends");
    if (!s || !e)
      return nc.fail("attributes 'starts' and 'ends' are required");
    starts = *s;
    ends = *e;
    if (auto a = nc.attrInts("axes"))
      axes = *a;
  } else {
    auto s = nc.constantInts(1);
    if (failed(s))
      return failure();
    auto e = nc.constantInts(2);
    if (failed(e))
      return failure();
    starts = *s;
    ends = *e;
    if (nc.hasInput(3)) {
      auto a = nc.constantInts(3);
      if (failed(a))
        return failure();
      axes = *a;
    }
    if (nc.hasInput(4)) {
      auto st = nc.constantInts(4);
      if (failed(st))
        return failure();
      steps = *st;
    }
  }
  if (starts.size() != ends.size())
    return nc.fail("starts and ends differ in length");
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size())
    return nc.fail("starts, ends, axes and steps differ in length");

  SmallVector<int64_t> rStarts(rank, 0), rSteps(rank, 1), rSizes(in.getShape());
  SmallVector<bool> seen(rank, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    auto axis = nc.normalizeAxis(axes[i], rank, "axes entry");
    if (failed(axis))
      return failure();
    if (seen[*axis])
      return nc.fail("axis " + Twine(*axis) + " is sliced twice");
    seen[*axis] = true;
    int64_t d = in.getDimSize(*axis), step = steps[i];
    if (step == 0)
      return nc.fail("step 0 on axis " + Twine(*axis));
    // A step longer than the axis takes at most one element: clamping it to
    // d + 1 keeps the arithmetic below in range (INT64_MIN cannot be negated).
    step = std::clamp<int64_t>(step, -(d + 1), d + 1);
    // ONNX clamping: negative values count from the end; then starts/ends
    // are clamped to [0, d] (positive step) or [-1, d-1] (negative step).
    auto norm = [&](int64_t v) { return v < 0 ? (v < INT64_MIN + d ? INT64_MIN : v + d) : v; };
    int64_t s = norm(starts[i]), e = norm(ends[i]);
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
    } else {
      s = std::clamp<int64_t>(s, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
    }
    int64_t n = step > 0 ? (e - s + step - 1) / step : (s - e + (-step) - 1) / (-step);
    if (n < 0)
      n = 0;
    rStarts[*axis] = n > 0 ? s : 0;
    rSteps[*axis] = step;
    rSizes[*axis] = n;
  }
  return out0(nc, nc.slice(*x, rStarts, rSteps, rSizes));
}

LogicalResult concat(NodeContext &nc) {
  SmallVector<Value> ins;
  for (size_t i = 0; i < nc.numInputs(); ++i) {
    auto x = nc.requiredInput(i);
    if (failed(x))
      return failure();
    ins.push_back(*x);
  }
  if (ins.empty())
    return nc.fail("needs at least one input");
  if (!nc.hasAttr("axis") && nc.opset() >= 4)
    return nc.fail("attribute 'axis' is required");
  auto axis = nc.normalizeAxis(nc.attrInt("axis", 1), typeOf(ins[0]).getRank());
  if (failed(axis))
    return failure();
  if (ins.size() == 1)
    return nc.setOutput(0, ins[0]);
  return out0(nc, nc.make<tc::ConcatOp>(ins, {nc.namedI64("axis", *axis)}));
}

/// Splits `x` along `axis` into pieces of `sizes`.
FailureOr<SmallVector<Value>> splitInto(NodeContext &nc, Value x, int64_t axis,
                                        ArrayRef<int64_t> sizes) {
  auto in = typeOf(x);
  int64_t total = 0;
  SmallVector<Type> types;
  for (int64_t s : sizes) {
    if (s < 0)
      return nc.fail("split sizes must be non-negative"), failure();
    total += s;
    SmallVector<int64_t> shape(in.getShape());
    shape[axis] = s;
    types.push_back(RankedTensorType::get(shape, in.getElementType()));
  }
  if (total != in.getDimSize(axis))
    return nc.fail("split sizes " + shapeStr(sizes) + " do not add up to " +
                   Twine(in.getDimSize(axis)) + " (axis " + Twine(axis) + ")"),
           failure();
  if (sizes.size() == 1)
    return SmallVector<Value>{x};
  return nc.makeOp<tc::SplitOp>({x}, {nc.namedI64("axis", axis)}, types, sizes.size());
}

LogicalResult split(NodeContext &nc) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  auto in = typeOf(*x);
  auto axis = nc.normalizeAxis(nc.attrInt("axis", 0), in.getRank());
  if (failed(axis))
    return failure();
  int64_t d = in.getDimSize(*axis);
  SmallVector<int64_t> sizes;
  if (nc.opset() < 13) {
    if (auto s = nc.attrInts("split"))
      sizes = *s;
    else if (nc.opset() < 2 && nc.hasInput(1)) {
      auto c = nc.constantInts(1);
      if (failed(c))
        return failure();
      sizes = *c;
    }
  } else if (nc.hasInput(1)) {
    auto c = nc.constantInts(1);
    if (failed(c))
      return failure();
    sizes = *c;
  }
  int64_t n = nc.numOutputs();
  if (sizes.empty()) {
    if (nc.opset() >= 18 && nc.hasAttr("num_outputs")) {
      n = nc.attrInt("num_outputs", 0);
      if (n <= 0 || n != (int64_t)nc.numOutputs())
        return nc.failAttr("num_outputs", "must equal the number of outputs");
      int64_t chunk = (d + n - 1) / n;
      for (int64_t i = 0; i < n; ++i)
        sizes.push_back(std::max<int64_t>(0, std::min(chunk, d - i * chunk)));
    } else {
      if (n <= 0 || d % n != 0)
        return nc.fail("axis " + Twine(*axis) + " of size " + Twine(d) +
                       " does not split evenly into " + Twine(n) + " outputs");
      sizes.assign(n, d / n);
    }
  }
  if ((int64_t)sizes.size() != (int64_t)nc.numOutputs())
    return nc.fail("split has " + Twine(sizes.size()) + " sizes for " + Twine(nc.numOutputs()) +
                   " outputs");
  auto parts = splitInto(nc, *x, *axis, sizes);
  if (failed(parts))
    return failure();
  for (size_t i = 0; i < parts->size(); ++i)
    if (failed(nc.setOutput(i, (*parts)[i])))
      return failure();
  return success();
}

LogicalResult pad(NodeContext &nc) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  auto in = typeOf(*x);
  int64_t rank = in.getRank();
  std::string mode = nc.attrString("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    return nc.failAttr("mode", "'" + mode + "' is unsupported (constant, reflect, edge)");
  SmallVector<int64_t> pads;
  double value = 0;
  SmallVector<int64_t> axes;
  if (nc.opset() < 11) {
    auto p = nc.attrInts(nc.opset() < 2 ? "paddings" : "pads");
    if (!p)
      return nc.fail("attribute 'pads' is required");
    pads = *p;
    value = nc.attrFloat("value", 0);
  } else {
    auto p = nc.constantInts(1);
    if (failed(p))
      return failure();
    pads = *p;
    if (nc.hasInput(2)) {
      auto v = nc.constantDoubles(2);
      if (failed(v))
        return failure();
      if (!v->empty())
        value = (*v)[0];
    }
    if (nc.hasInput(3)) {
      auto a = nc.constantInts(3);
      if (failed(a))
        return failure();
      axes = *a;
    }
  }
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  if ((int64_t)pads.size() != 2 * (int64_t)axes.size())
    return nc.fail("pads has " + Twine(pads.size()) + " entries, expected " +
                   Twine(2 * axes.size()));
  SmallVector<int64_t> low(rank, 0), high(rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    auto a = nc.normalizeAxis(axes[i], rank, "axes entry");
    if (failed(a))
      return failure();
    low[*a] = pads[i];
    high[*a] = pads[i + axes.size()];
  }
  // Negative pads crop: slice first, then pad with the positive part.
  SmallVector<int64_t> starts(rank, 0), strides(rank, 1), sizes(in.getShape());
  bool crop = false;
  for (int64_t d = 0; d < rank; ++d) {
    if (low[d] < 0) {
      starts[d] = -low[d];
      sizes[d] += low[d];
      low[d] = 0;
      crop = true;
    }
    if (high[d] < 0) {
      sizes[d] += high[d];
      high[d] = 0;
      crop = true;
    }
    if (sizes[d] < 0)
      return nc.fail("negative pads remove more than axis " + Twine(d) + " holds");
  }
  Value v = *x;
  if (crop) {
    auto s = nc.slice(v, starts, strides, sizes);
    if (failed(s))
      return failure();
    v = *s;
  }
  if (llvm::all_of(low, [](int64_t p) { return p == 0; }) &&
      llvm::all_of(high, [](int64_t p) { return p == 0; }))
    return nc.setOutput(0, v);
  return out0(nc, nc.make<tc::PadOp>({v}, {nc.namedI64Array("low", low),
                                           nc.namedI64Array("high", high),
                                           nc.namedF64("value", value),
                                           nc.namedStr("mode", mode)}));
}

LogicalResult shapeOp(NodeContext &nc) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  auto shape = typeOf(*x).getShape();
  int64_t rank = shape.size();
  int64_t start = nc.attrInt("start", 0), end = nc.attrInt("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  SmallVector<int64_t> dims;
  for (int64_t d = start; d < end; ++d)
    dims.push_back(shape[d]);
  return nc.setOutput(0, nc.constI64(dims));
}

LogicalResult sizeOp(NodeContext &nc) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  return nc.setOutput(0, nc.splat((double)typeOf(*x).getNumElements(), nc.builder().getI64Type()));
}

LogicalResult constantOfShape(NodeContext &nc) {
  auto s = nc.constantInts(0);
  if (failed(s))
    return failure();
  for (int64_t d : *s)
    if (d < 0)
      return nc.fail("shape " + shapeStr(*s) + " has a negative entry");
  DenseElementsAttr value;
  if (nc.hasAttr("value")) {
    auto t = nc.attrTensor("value");
    if (failed(t))
      return failure();
    if (t->getNumElements() != 1)
      return nc.failAttr("value", "must hold exactly one element");
    value = *t;
  } else {
    value = denseFromDoubles(RankedTensorType::get({1}, nc.builder().getF32Type()), {0.0});
  }
  auto type = RankedTensorType::get(*s, value.getElementType());
  if (type.getNumElements() > kMaxFoldElements)
    return nc.fail("result of " + Twine(type.getNumElements()) + " elements is too large");
  auto elt = value.getElementType();
  if (isa<FloatType>(elt))
    return nc.setOutput(0, nc.constant(DenseElementsAttr::get(type, value.getValues<APFloat>()[0])));
  if (elt.isInteger(1))
    return nc.setOutput(0, nc.constant(DenseElementsAttr::get(type, value.getValues<bool>()[0])));
  return nc.setOutput(0, nc.constant(DenseElementsAttr::get(type, value.getValues<APInt>()[0])));
}

LogicalResult range(NodeContext &nc) {
  auto s = nc.constantDoubles(0), l = nc.constantDoubles(1), d = nc.constantDoubles(2);
  if (failed(s) || failed(l) || failed(d))
    return failure();
  if (s->size() != 1 || l->size() != 1 || d->size() != 1)
    return nc.fail("start, limit and delta must be scalars");
  double start = (*s)[0], limit = (*l)[0], delta = (*d)[0];
  if (delta == 0)
    return nc.fail("delta is 0");
  double count = std::ceil((limit - start) / delta);
  if (!(count >= 0))
    count = 0;
  if (count > kMaxFoldElements)
    return nc.fail("range of " + llvm::formatv("{0:e2}", count).str() +
                   " elements is too large (at most " + Twine(kMaxFoldElements) + ")");
  int64_t n = (int64_t)count;
  Type elt = nc.inputType(0).getElementType();
  auto type = RankedTensorType::get({n}, elt);
  if (isa<IntegerType>(elt)) {
    auto si = nc.constantInts(0), di = nc.constantInts(2);
    SmallVector<int64_t> vals;
    for (int64_t i = 0; i < n; ++i)
      vals.push_back((*si)[0] + i * (*di)[0]);
    return nc.setOutput(0, nc.constant(denseFromInts(type, vals)));
  }
  // ONNX computes start + i * delta in the element type; accumulate in
  // double and round once, which matches for f32 within an ulp.
  SmallVector<double> vals;
  for (int64_t i = 0; i < n; ++i)
    vals.push_back(start + i * delta);
  return nc.setOutput(0, nc.constant(denseFromDoubles(type, vals)));
}

LogicalResult gather(NodeContext &nc) {
  auto x = nc.requiredInput(0), idx = nc.requiredInput(1);
  if (failed(x) || failed(idx))
    return failure();
  auto axis = nc.normalizeAxis(nc.attrInt("axis", 0), typeOf(*x).getRank());
  if (failed(axis))
    return failure();
  // Indices known now (positions from a folded Range, e.g. a learned position
  // embedding): an out-of-range one is the model's or --input's fault, so say
  // so here instead of failing every run (sequence longer than the table).
  int64_t dim = typeOf(*x).getDimSize(*axis);
  if (auto c = idx->getDefiningOp<tc::ConstantOp>())
    if (auto dense = dyn_cast<DenseElementsAttr>(c.getValue()))
      if (isa<IntegerType>(dense.getElementType()) && !ShapedType::isDynamic(dim)) {
        int64_t n = 0;
        for (const APInt &v : dense.getValues<APInt>()) {
          int64_t i = dense.getElementType().getIntOrFloatBitWidth() == 1 ||
                              dense.getElementType().isUnsignedInteger()
                          ? (int64_t)v.getZExtValue()
                          : v.getSExtValue();
          if (i < -dim || i >= dim)
            return nc.fail("index " + Twine(i) + " (element " + Twine(n) + " of indices '" +
                           nc.node().input(1) + "') is out of range for axis " + Twine(*axis) +
                           " of size " + Twine(dim) + " of '" + nc.node().input(0) +
                           "' (are the --input shapes larger than the model allows?)");
          ++n;
        }
      }
  return out0(nc, nc.make<tc::GatherOp>({*x, *idx}, {nc.namedI64("axis", *axis)}));
}

/// Indices normalised to [0, dim): idx < 0 ? idx + dim : idx, as i64.
FailureOr<Value> normalizeIndices(NodeContext &nc, Value idx, int64_t dim) {
  auto i64 = nc.cast(idx, nc.builder().getI64Type());
  if (failed(i64))
    return failure();
  Type t = nc.builder().getI64Type();
  auto neg = nc.make<tc::LtOp>({*i64, nc.splat(0, t)});
  if (failed(neg))
    return failure();
  auto wrapped = nc.make<tc::AddOp>({*i64, nc.splat((double)dim, t)});
  if (failed(wrapped))
    return failure();
  return nc.make<tc::SelectOp>({*neg, *wrapped, *i64});
}

/// Row-major strides of a shape.
SmallVector<int64_t> strides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (int64_t d = (int64_t)shape.size() - 2; d >= 0; --d)
    s[d] = s[d + 1] * shape[d + 1];
  return s;
}

LogicalResult gatherElements(NodeContext &nc) {
  auto x = nc.requiredInput(0), idx = nc.requiredInput(1);
  if (failed(x) || failed(idx))
    return failure();
  auto dt = typeOf(*x), it = typeOf(*idx);
  int64_t rank = dt.getRank();
  if (it.getRank() != rank)
    return nc.fail("indices rank differs from data rank");
  auto axis = nc.normalizeAxis(nc.attrInt("axis", 0), rank);
  if (failed(axis))
    return failure();
  // out[c] = flat_data[idx[c] * stride[axis] + sum_{d != axis} c[d] * stride[d]]
  if (it.getNumElements() > kMaxFoldElements) // the offsets below are built at import
    return nc.fail("indices of " + Twine(it.getNumElements()) + " elements are too many (at most " +
                   Twine(kMaxFoldElements) + ")");
  SmallVector<int64_t> st = strides(dt.getShape());
  SmallVector<int64_t> base(it.getNumElements());
  SmallVector<int64_t> coord(rank, 0);
  for (int64_t k = 0; k < it.getNumElements(); ++k) {
    int64_t off = 0;
    for (int64_t d = 0; d < rank; ++d) {
      if (d != *axis && coord[d] >= dt.getDimSize(d))
        return nc.fail("indices shape exceeds data shape outside the axis");
      if (d != *axis)
        off += coord[d] * st[d];
    }
    base[k] = off;
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++coord[d] < it.getDimSize(d))
        break;
      coord[d] = 0;
    }
  }
  Type i64 = nc.builder().getI64Type();
  auto n = normalizeIndices(nc, *idx, dt.getDimSize(*axis));
  if (failed(n))
    return failure();
  auto scaled = nc.make<tc::MulOp>({*n, nc.splat((double)st[*axis], i64)});
  if (failed(scaled))
    return failure();
  auto flatIdx = nc.make<tc::AddOp>(
      {*scaled, nc.constant(denseFromInts(RankedTensorType::get(it.getShape(), i64), base))});
  if (failed(flatIdx))
    return failure();
  auto flat = nc.reshape(*x, {dt.getNumElements()});
  if (failed(flat))
    return failure();
  return out0(nc, nc.make<tc::GatherOp>({*flat, *flatIdx}, {nc.namedI64("axis", 0)}));
}

LogicalResult gatherND(NodeContext &nc) {
  auto x = nc.requiredInput(0), idx = nc.requiredInput(1);
  if (failed(x) || failed(idx))
    return failure();
  if (nc.attrInt("batch_dims", 0) != 0)
    return nc.failAttr("batch_dims", "only batch_dims = 0 is supported");
  auto dt = typeOf(*x), it = typeOf(*idx);
  if (it.getRank() < 1)
    return nc.fail("indices must have rank >= 1");
  int64_t q = it.getDimSize(it.getRank() - 1);
  if (q > dt.getRank())
    return nc.fail("indices' last dimension exceeds the data rank");
  SmallVector<int64_t> lead(it.getShape().drop_back());
  // flat = sum_j norm(idx[..., j]) * prod(data.shape[j+1 .. q-1])
  Type i64 = nc.builder().getI64Type();
  Value flat = nc.splat(0, i64, lead);
  int64_t stride = 1;
  SmallVector<int64_t> strideOf(q);
  for (int64_t j = q - 1; j >= 0; --j) {
    strideOf[j] = stride;
    stride *= dt.getDimSize(j);
  }
  for (int64_t j = 0; j < q; ++j) {
    auto col = nc.sliceAxis(*idx, it.getRank() - 1, j, 1);
    if (failed(col))
      return failure();
    auto colR = nc.reshape(*col, lead);
    if (failed(colR))
      return failure();
    auto n = normalizeIndices(nc, *colR, dt.getDimSize(j));
    if (failed(n))
      return failure();
    auto m = nc.make<tc::MulOp>({*n, nc.splat((double)strideOf[j], i64)});
    if (failed(m))
      return failure();
    auto a = nc.make<tc::AddOp>({flat, *m});
    if (failed(a))
      return failure();
    flat = *a;
  }
  SmallVector<int64_t> dataShape{stride};
  dataShape.append(dt.getShape().begin() + q, dt.getShape().end());
  auto data = nc.reshape(*x, dataShape);
  if (failed(data))
    return failure();
  return out0(nc, nc.make<tc::GatherOp>({*data, flat}, {nc.namedI64("axis", 0)}));
}

LogicalResult trilu(NodeContext &nc) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  auto t = typeOf(*x);
  if (t.getRank() < 2)
    return nc.fail("input must have rank >= 2");
  int64_t k = 0;
  if (nc.hasInput(1)) {
    auto kv = nc.constantInts(1);
    if (failed(kv))
      return failure();
    if (kv->size() != 1)
      return nc.fail("k must be a scalar");
    k = (*kv)[0];
  }
  bool upper = nc.attrInt("upper", 1) != 0;
  int64_t rows = t.getDimSize(t.getRank() - 2), cols = t.getDimSize(t.getRank() - 1);
  SmallVector<int64_t> mask;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      mask.push_back(upper ? j - i >= k : j - i <= k);
  Value m = nc.constant(denseFromInts(RankedTensorType::get({rows, cols}, nc.builder().getI1Type()), mask));
  return out0(nc, nc.make<tc::SelectOp>({m, *x, nc.splat(0, t.getElementType())}));
}

LogicalResult eyeLike(NodeContext &nc) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  auto t = typeOf(*x);
  if (t.getRank() != 2)
    return nc.fail("input must have rank 2");
  Type elt = t.getElementType();
  if (nc.hasAttr("dtype")) {
    elt = elementTypeFromOnnx(nc.context(), (int32_t)nc.attrInt("dtype", 1));
    if (!elt)
      return nc.failAttr("dtype", "unsupported element type");
  }
  int64_t k = nc.attrInt("k", 0);
  if (t.getNumElements() > kMaxFoldElements) // the matrix below is built at import
    return nc.fail("result of " + Twine(t.getNumElements()) + " elements is too large (at most " +
                   Twine(kMaxFoldElements) + ")");
  SmallVector<int64_t> vals;
  for (int64_t i = 0; i < t.getDimSize(0); ++i)
    for (int64_t j = 0; j < t.getDimSize(1); ++j)
      vals.push_back(j - i == k);
  return nc.setOutput(0, nc.constant(denseFromInts(RankedTensorType::get(t.getShape(), elt), vals)));
}

LogicalResult oneHot(NodeContext &nc) {
  auto idx = nc.requiredInput(0), values = nc.requiredInput(2);
  if (failed(idx) || failed(values))
    return failure();
  auto depthV = nc.constantDoubles(1);
  if (failed(depthV))
    return failure();
  if (depthV->size() != 1)
    return nc.fail("depth must hold one value");
  // The depth becomes a [depth] index constant: capped as ConstantOfShape
  // and Range are, and checked before converting (NaN / inf / huge floats).
  double depthD = (*depthV)[0];
  if (!std::isfinite(depthD) || depthD < 1)
    return nc.fail("depth must be a positive finite number, got " +
                   llvm::formatv("{0:e2}", depthD).str());
  if (depthD > (double)kMaxFoldElements)
    return nc.fail("depth " + llvm::formatv("{0:e2}", depthD).str() + " is too large (at most " +
                   Twine(kMaxFoldElements) + ")");
  int64_t depth = (int64_t)depthD;
  auto it = typeOf(*idx);
  int64_t outRank = it.getRank() + 1;
  auto axis = nc.normalizeAxis(nc.attrInt("axis", -1), outRank);
  if (failed(axis))
    return failure();
  auto vt = typeOf(*values);
  if (vt.getNumElements() != 2)
    return nc.fail("values must hold [off_value, on_value]");
  // Indices may be floats in ONNX; tc compares in i64.
  auto n = normalizeIndices(nc, *idx, depth);
  if (failed(n))
    return failure();
  SmallVector<int64_t> idxShape(it.getShape()), rangeShape(outRank, 1);
  idxShape.insert(idxShape.begin() + *axis, 1);
  rangeShape[*axis] = depth;
  auto ie = nc.reshape(*n, idxShape);
  if (failed(ie))
    return failure();
  SmallVector<int64_t> iota;
  for (int64_t i = 0; i < depth; ++i)
    iota.push_back(i);
  Value r = nc.constant(denseFromInts(RankedTensorType::get(rangeShape, nc.builder().getI64Type()), iota));
  auto eq = nc.make<tc::EqOp>({*ie, r});
  if (failed(eq))
    return failure();
  auto flatV = nc.reshape(*values, {2});
  if (failed(flatV))
    return failure();
  auto off = nc.sliceAxis(*flatV, 0, 0, 1), on = nc.sliceAxis(*flatV, 0, 1, 1);
  if (failed(off) || failed(on))
    return failure();
  auto offS = nc.reshape(*off, {}), onS = nc.reshape(*on, {});
  if (failed(offS) || failed(onS))
    return failure();
  return out0(nc, nc.make<tc::SelectOp>({*eq, *onS, *offS}));
}

/// reshape -> transpose -> reshape, the shape of DepthToSpace/SpaceToDepth.
LogicalResult shuffle(NodeContext &nc, Value x, ArrayRef<int64_t> inter,
                      ArrayRef<int64_t> perm, ArrayRef<int64_t> out) {
  auto r = nc.reshape(x, inter);
  if (failed(r))
    return failure();
  r = nc.transpose(*r, perm);
  if (failed(r))
    return failure();
  return out0(nc, nc.reshape(*r, out));
}

LogicalResult depthToSpace(NodeContext &nc, bool toSpace) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  auto t = typeOf(*x);
  int64_t b = nc.attrInt("blocksize", 0);
  if (t.getRank() != 4 || b <= 0)
    return nc.fail("needs a [N, C, H, W] input and a positive blocksize");
  int64_t n = t.getDimSize(0), c = t.getDimSize(1), h = t.getDimSize(2), w = t.getDimSize(3);
  if (toSpace) {
    if (c % (b * b))
      return nc.fail("channels are not divisible by blocksize^2");
    if (nc.attrString("mode", "DCR") == "CRD")
      return shuffle(nc, *x, {n, c / (b * b), b, b, h, w}, {0, 1, 4, 2, 5, 3},
                     {n, c / (b * b), h * b, w * b});
    return shuffle(nc, *x, {n, b, b, c / (b * b), h, w}, {0, 3, 4, 1, 5, 2},
                   {n, c / (b * b), h * b, w * b});
  }
  if (h % b || w % b)
    return nc.fail("height/width are not divisible by blocksize");
  // Opset 28 added SpaceToDepth's mode: CRD orders the output channels
  // (c, block row, block column), DCR (the default) (block row, block column, c).
  std::string mode = nc.attrString("mode", "DCR");
  if (mode != "DCR" && mode != "CRD")
    return nc.failAttr("mode", "'" + mode + "' is neither DCR nor CRD");
  if (mode == "CRD")
    return shuffle(nc, *x, {n, c, h / b, b, w / b, b}, {0, 1, 3, 5, 2, 4},
                   {n, c * b * b, h / b, w / b});
  return shuffle(nc, *x, {n, c, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4},
                 {n, c * b * b, h / b, w / b});
}

LogicalResult compress(NodeContext &nc) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  auto cond = nc.constantInts(1);
  if (failed(cond))
    return failure();
  Value v = *x;
  int64_t axis = 0;
  if (nc.hasAttr("axis")) {
    auto a = nc.normalizeAxis(nc.attrInt("axis", 0), typeOf(v).getRank());
    if (failed(a))
      return failure();
    axis = *a;
  } else {
    auto f = nc.reshape(v, {typeOf(v).getNumElements()});
    if (failed(f))
      return failure();
    v = *f;
  }
  int64_t d = typeOf(v).getDimSize(axis);
  if ((int64_t)cond->size() > d)
    return nc.fail("condition is longer than the axis");
  SmallVector<int64_t> idx;
  for (size_t i = 0; i < cond->size(); ++i)
    if ((*cond)[i])
      idx.push_back(i);
  Value iv = nc.constI64(idx);
  return out0(nc, nc.make<tc::GatherOp>({v, iv}, {nc.namedI64("axis", axis)}));
}

LogicalResult window(NodeContext &nc, StringRef kind) {
  auto size = nc.constantInts(0);
  if (failed(size))
    return failure();
  if (size->size() != 1 || (*size)[0] < 0)
    return nc.fail("size must be a non-negative scalar");
  int64_t n = (*size)[0];
  Type elt = elementTypeFromOnnx(nc.context(), (int32_t)nc.attrInt("output_datatype", 1));
  if (!elt)
    return nc.failAttr("output_datatype", "unsupported element type");
  double denom = nc.attrInt("periodic", 1) ? n : n - 1;
  SmallVector<double> vals;
  for (int64_t i = 0; i < n; ++i) {
    double a = 2 * M_PI * i / denom;
    if (kind == "HannWindow")
      vals.push_back(0.5 - 0.5 * std::cos(a));
    else if (kind == "HammingWindow")
      vals.push_back(25.0 / 46 - (1 - 25.0 / 46) * std::cos(a));
    else
      vals.push_back(0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a));
  }
  return nc.setOutput(0, nc.constant(denseFromDoubles(RankedTensorType::get({n}, elt), vals)));
}

} // namespace

void registerShapeHandlers(std::vector<HandlerEntry> &t) {
  const int64_t M = kMaxOnnxOpset;
  addHandler(t, "Reshape", 1, M, reshapeOp);
  addHandler(t, "Flatten", 1, M, flatten);
  addHandler(t, "Squeeze", 1, M, squeeze);
  addHandler(t, "Unsqueeze", 1, M, unsqueeze);
  addHandler(t, "Transpose", 1, M, transposeOp);
  addHandler(t, "Expand", 8, M, expand);
  addHandler(t, "Tile", 6, M, tile);
  addHandler(t, "Slice", 1, M, sliceOp);
  addHandler(t, "Concat", 1, M, concat);
  addHandler(t, "Split", 1, M, split);
  addHandler(t, "Pad", 1, M, pad);
  addHandler(t, "Shape", 1, M, shapeOp);
  addHandler(t, "Size", 1, M, sizeOp);
  addHandler(t, "ConstantOfShape", 9, M, constantOfShape);
  addHandler(t, "Range", 11, M, range);
  addHandler(t, "Gather", 1, M, gather);
  addHandler(t, "GatherElements", 11, M, gatherElements);
  addHandler(t, "GatherND", 11, M, gatherND);
  addHandler(t, "Trilu", 14, M, trilu);
  addHandler(t, "EyeLike", 9, M, eyeLike);
  addHandler(t, "OneHot", 9, M, oneHot);
  addHandler(t, "DepthToSpace", 1, M, [](NodeContext &nc) { return depthToSpace(nc, true); });
  addHandler(t, "SpaceToDepth", 1, M, [](NodeContext &nc) { return depthToSpace(nc, false); });
  addHandler(t, "Compress", 9, M, compress);
  for (const char *w : {"HannWindow", "HammingWindow", "BlackmanWindow"})
    addHandler(t, w, 17, M, [w](NodeContext &nc) { return window(nc, w); });
}

} // namespace tc::onnx_import
