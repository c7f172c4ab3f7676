//===- Quantize.cpp - QuantizeLinear and DequantizeLinear -----------------===//
//
// Linear (de)quantisation decomposed into tc arithmetic, per tensor or per
// axis (a 1-D scale along `axis`). DequantizeLinear also takes blocks
// (block_size, opset 21: a scale of x's rank with ceil(d / block_size) on
// `axis`; tc's own export writes them, docs/export.md) and output_dtype
// (opset 21); blocked QuantizeLinear is not supported yet.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Importer.h"

#include <cmath>

using namespace mlir;

namespace tc::onnx_import {
namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// A scale / zero point broadcast against x: scalars stay, 1-D ones become
/// [1, .., C, .., 1] with C on `axis`.
FailureOr<Value> alongAxis(NodeContext &nc, Value v, RankedTensorType xt) {
  auto t = typeOf(v);
  if (t.getRank() == 0 || (t.getRank() == 1 && t.getDimSize(0) == 1 && xt.getRank() == 0))
    return nc.reshape(v, {});
  if (t.getRank() != 1)
    return nc.fail("blocked quantisation (scale of rank > 1) is unsupported"), failure();
  auto axis = nc.normalizeAxis(nc.attrInt("axis", 1), xt.getRank());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> shape(xt.getRank(), 1);
  shape[*axis] = t.getDimSize(0);
  return nc.reshape(v, shape);
}

LogicalResult quantize(NodeContext &nc) {
  auto x = nc.requiredInput(0), scale = nc.requiredInput(1);
  if (failed(x) || failed(scale))
    return failure();
  if (nc.attrInt("block_size", 0) != 0)
    return nc.failAttr("block_size", "blocked quantisation is unsupported");
  auto xt = typeOf(*x);
  Type outElt = nc.builder().getIntegerType(8, /*isSigned=*/false);
  Value zp = nc.input(2);
  if (zp)
    outElt = typeOf(zp).getElementType();
  else if (nc.hasAttr("output_dtype") && nc.attrInt("output_dtype", 0) != 0)
    outElt = elementTypeFromOnnx(nc.context(), (int32_t)nc.attrInt("output_dtype", 0));
  if (!outElt)
    return nc.failAttr("output_dtype", "unsupported element type");
  auto s = alongAxis(nc, *scale, xt);
  if (failed(s))
    return failure();
  auto sc = nc.cast(*s, xt.getElementType());
  if (failed(sc))
    return failure();
  auto q = nc.make<tc::DivOp>({*x, *sc});
  if (failed(q))
    return failure();
  auto outType = RankedTensorType::get(xt.getShape(), outElt);
  if (isa<FloatType>(outElt)) {
    SmallVector<NamedAttribute> attrs;
    if (nc.attrInt("saturate", 1) == 0)
      attrs.push_back(nc.namedBool("saturate", false));
    auto r = nc.make<tc::CastOp>({*q}, attrs, outType);
    return failed(r) ? failure() : nc.setOutput(0, *r);
  }
  auto it = cast<IntegerType>(outElt);
  if (it.getWidth() > 32)
    return nc.fail("quantising to " + Twine(it.getWidth()) + "-bit integers is unsupported");
  Value v = *q;
  auto rounded = nc.make<tc::RoundOp>({v}, {}, v.getType());
  if (failed(rounded))
    return failure();
  v = *rounded;
  if (zp) {
    auto z = alongAxis(nc, zp, xt);
    if (failed(z))
      return failure();
    auto zf = nc.cast(*z, xt.getElementType());
    if (failed(zf))
      return failure();
    auto a = nc.make<tc::AddOp>({v, *zf});
    if (failed(a))
      return failure();
    v = *a;
  }
  double lo = it.isUnsigned() ? 0 : -std::ldexp(1.0, it.getWidth() - 1);
  double hi = it.isUnsigned() ? std::ldexp(1.0, it.getWidth()) - 1 : std::ldexp(1.0, it.getWidth() - 1) - 1;
  auto c1 = nc.make<tc::MaxOp>({v, nc.splat(lo, xt.getElementType())});
  if (failed(c1))
    return failure();
  auto c2 = nc.make<tc::MinOp>({*c1, nc.splat(hi, xt.getElementType())});
  if (failed(c2))
    return failure();
  auto r = nc.make<tc::CastOp>({*c2}, {}, outType);
  return failed(r) ? failure() : nc.setOutput(0, *r);
}

/// Blocked DequantizeLinear: x viewed as [.., G, B, ..] along `axis`, the
/// scale as [.., G, 1, ..], multiplied and viewed back.
LogicalResult dequantizeBlocked(NodeContext &nc, Value x, Value scale, int64_t block) {
  auto xt = typeOf(x), st = typeOf(scale);
  if (nc.input(2))
    return nc.fail("blocked DequantizeLinear with a zero point is unsupported");
  auto axis = nc.normalizeAxis(nc.attrInt("axis", 1), xt.getRank());
  if (failed(axis))
    return failure();
  if (block < 1)
    return nc.failAttr("block_size", "must be positive");
  int64_t d = xt.getDimSize(*axis);
  if (st.getRank() != xt.getRank())
    return nc.fail("blocked DequantizeLinear: the scale has rank " + Twine(st.getRank()) +
                   ", x rank " + Twine(xt.getRank()));
  for (int64_t i = 0; i < xt.getRank(); ++i)
    if (st.getDimSize(i) != (i == *axis ? (d + block - 1) / block : xt.getDimSize(i)))
      return nc.fail("blocked DequantizeLinear: the scale's dim " + Twine(i) + " is " +
                     Twine(st.getDimSize(i)) + " for x dim " + Twine(xt.getDimSize(i)) +
                     " and block_size " + Twine(block));
  if (d % block)
    return nc.failAttr("block_size", "a block_size that does not divide axis " + Twine(*axis) +
                                         " (" + Twine(d) + ") is unsupported");
  Type f = nc.hasAttr("output_dtype") && nc.attrInt("output_dtype", 0) != 0
               ? elementTypeFromOnnx(nc.context(), (int32_t)nc.attrInt("output_dtype", 0))
               : st.getElementType();
  if (!f || !isa<FloatType>(f))
    return nc.failAttr("output_dtype", "unsupported element type");
  SmallVector<int64_t> xs(xt.getShape()), ss(xt.getShape());
  xs[*axis] = d / block;
  xs.insert(xs.begin() + *axis + 1, block);
  ss[*axis] = d / block;
  ss.insert(ss.begin() + *axis + 1, 1);
  auto xf = nc.cast(x, f);
  if (failed(xf))
    return failure();
  auto sf = nc.cast(scale, f);
  if (failed(sf))
    return failure();
  auto xv = nc.reshape(*xf, xs);
  if (failed(xv))
    return failure();
  auto sv = nc.reshape(*sf, ss);
  if (failed(sv))
    return failure();
  auto m = nc.make<tc::MulOp>({*xv, *sv});
  if (failed(m))
    return failure();
  auto r = nc.reshape(*m, xt.getShape());
  return failed(r) ? failure() : nc.setOutput(0, *r);
}

LogicalResult dequantize(NodeContext &nc) {
  auto x = nc.requiredInput(0), scale = nc.requiredInput(1);
  if (failed(x) || failed(scale))
    return failure();
  if (int64_t block = nc.attrInt("block_size", 0))
    return dequantizeBlocked(nc, *x, *scale, block);
  auto xt = typeOf(*x);
  Type f = typeOf(*scale).getElementType();
  auto s = alongAxis(nc, *scale, xt);
  if (failed(s))
    return failure();
  auto xf = nc.cast(*x, f);
  if (failed(xf))
    return failure();
  Value v = *xf;
  if (Value zp = nc.input(2)) {
    auto z = alongAxis(nc, zp, xt);
    if (failed(z))
      return failure();
    auto zf = nc.cast(*z, f);
    if (failed(zf))
      return failure();
    auto d = nc.make<tc::SubOp>({v, *zf});
    if (failed(d))
      return failure();
    v = *d;
  }
  auto r = nc.make<tc::MulOp>({v, *s});
  return failed(r) ? failure() : nc.setOutput(0, *r);
}

} // namespace

void registerQuantizeHandlers(std::vector<HandlerEntry> &t) {
  addHandler(t, "QuantizeLinear", 10, kMaxOnnxOpset, quantize);
  addHandler(t, "DequantizeLinear", 10, kMaxOnnxOpset, dequantize);
}

} // namespace tc::onnx_import
