//===- Elementwise.cpp - elementwise ONNX ops -----------------------------===//
//
// Unary math, binary arithmetic / comparison / logic with numpy broadcasting,
// the activation functions (decomposed where tc has no op), Where, Clip,
// Cast/CastLike, Identity, Constant and Dropout (inference).
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Importer.h"

#include <cmath>

using namespace mlir;

namespace tc::onnx_import {
namespace {

Type elementTypeOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

/// A rank-0 constant of v's element type.
Value scalarLike(NodeContext &nc, Value v, double x) {
  return nc.splat(x, elementTypeOf(v));
}

template <typename OpTy>
LogicalResult unary(NodeContext &nc) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  auto r = nc.make<OpTy>({*x}, {}, x->getType());
  if (failed(r))
    return failure();
  return nc.setOutput(0, *r);
}

template <typename OpTy>
LogicalResult binary(NodeContext &nc) {
  auto a = nc.requiredInput(0), b = nc.requiredInput(1);
  if (failed(a) || failed(b))
    return failure();
  Value rhs = *b;
  // Opset < 7: `broadcast`/`axis` align B with A starting at `axis`.
  if (nc.opset() < 7 && nc.attrInt("broadcast", 0) && nc.hasAttr("axis")) {
    auto at = cast<RankedTensorType>(a->getType());
    auto bt = cast<RankedTensorType>(rhs.getType());
    auto axis = nc.normalizeAxis(nc.attrInt("axis", 0), at.getRank());
    if (failed(axis))
      return failure();
    SmallVector<int64_t> shape(bt.getShape());
    while ((int64_t)shape.size() + *axis < at.getRank())
      shape.push_back(1);
    auto r = nc.reshape(rhs, shape);
    if (failed(r))
      return failure();
    rhs = *r;
  }
  auto r = nc.make<OpTy>({*a, rhs});
  if (failed(r))
    return failure();
  return nc.setOutput(0, *r);
}

/// Max/Min/Sum/Mean over 1..N inputs.
template <typename OpTy>
LogicalResult variadic(NodeContext &nc, bool mean = false) {
  if (nc.numInputs() == 0)
    return nc.fail("needs at least one input");
  auto acc = nc.requiredInput(0);
  if (failed(acc))
    return failure();
  Value v = *acc;
  for (size_t i = 1; i < nc.numInputs(); ++i) {
    auto x = nc.requiredInput(i);
    if (failed(x))
      return failure();
    auto r = nc.make<OpTy>({v, *x});
    if (failed(r))
      return failure();
    v = *r;
  }
  if (nc.numInputs() == 1) {
    // A single input still broadcasts to nothing: the result is the input.
  }
  if (mean) {
    auto r = nc.make<tc::DivOp>({v, scalarLike(nc, v, (double)nc.numInputs())});
    if (failed(r))
      return failure();
    v = *r;
  }
  return nc.setOutput(0, v);
}

LogicalResult pow(NodeContext &nc) {
  auto a = nc.requiredInput(0), b = nc.requiredInput(1);
  if (failed(a) || failed(b))
    return failure();
  auto e = nc.cast(*b, elementTypeOf(*a));
  if (failed(e))
    return failure();
  auto r = nc.make<tc::PowOp>({*a, *e});
  if (failed(r))
    return failure();
  return nc.setOutput(0, *r);
}

LogicalResult mod(NodeContext &nc) {
  auto a = nc.requiredInput(0), b = nc.requiredInput(1);
  if (failed(a) || failed(b))
    return failure();
  bool fmod = nc.attrInt("fmod", 0) != 0;
  if (!fmod && isa<FloatType>(elementTypeOf(*a)))
    return nc.failAttr("fmod", "fmod = 0 is only defined for integers");
  auto r = nc.make<tc::RemOp>({*a, *b}, {nc.namedBool("fmod", fmod)});
  if (failed(r))
    return failure();
  return nc.setOutput(0, *r);
}

LogicalResult whereOp(NodeContext &nc) {
  auto c = nc.requiredInput(0), x = nc.requiredInput(1), y = nc.requiredInput(2);
  if (failed(c) || failed(x) || failed(y))
    return failure();
  auto r = nc.make<tc::SelectOp>({*c, *x, *y});
  if (failed(r))
    return failure();
  return nc.setOutput(0, *r);
}

LogicalResult clip(NodeContext &nc) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  Value v = *x, lo, hi;
  if (nc.opset() < 11) {
    if (nc.hasAttr("min"))
      lo = scalarLike(nc, v, nc.attrFloat("min", 0));
    if (nc.hasAttr("max"))
      hi = scalarLike(nc, v, nc.attrFloat("max", 0));
  } else {
    lo = nc.input(1);
    hi = nc.input(2);
  }
  if (lo) {
    auto r = nc.make<tc::MaxOp>({v, lo});
    if (failed(r))
      return failure();
    v = *r;
  }
  if (hi) {
    auto r = nc.make<tc::MinOp>({v, hi});
    if (failed(r))
      return failure();
    v = *r;
  }
  return nc.setOutput(0, v);
}

/// Builds `select(cond, a, b)` and friends in one place for activations.
struct Ew {
  NodeContext &nc;
  bool ok = true;
  Value chk(FailureOr<Value> v) {
    if (failed(v)) {
      ok = false;
      return {};
    }
    return *v;
  }
  Value c(Value like, double x) { return scalarLike(nc, like, x); }
  template <typename OpTy> Value bin(Value a, Value b) {
    if (!ok) return {};
    return chk(nc.make<OpTy>({a, b}));
  }
  template <typename OpTy> Value un(Value a) {
    if (!ok) return {};
    return chk(nc.make<OpTy>({a}, {}, a.getType()));
  }
  Value select(Value cnd, Value a, Value b) {
    if (!ok) return {};
    return chk(nc.make<tc::SelectOp>({cnd, a, b}));
  }
  LogicalResult done(Value v) {
    if (!ok)
      return failure();
    return nc.setOutput(0, v);
  }
};

LogicalResult activation(NodeContext &nc, StringRef kind) {
  auto xr = nc.requiredInput(0);
  if (failed(xr))
    return failure();
  Value x = *xr;
  Ew e{nc};
  if (kind == "LeakyRelu") {
    double alpha = nc.attrFloat("alpha", 0.01f);
    return e.done(e.select(e.bin<tc::LtOp>(x, e.c(x, 0)), e.bin<tc::MulOp>(x, e.c(x, alpha)), x));
  }
  if (kind == "Elu") {
    double alpha = nc.attrFloat("alpha", 1.0f);
    Value em1 = e.bin<tc::SubOp>(e.un<tc::ExpOp>(x), e.c(x, 1));
    return e.done(e.select(e.bin<tc::LtOp>(x, e.c(x, 0)), e.bin<tc::MulOp>(em1, e.c(x, alpha)), x));
  }
  if (kind == "Selu") {
    double alpha = nc.attrFloat("alpha", 1.67326319217681884765625f);
    double gamma = nc.attrFloat("gamma", 1.05070102214813232421875f);
    Value neg = e.bin<tc::SubOp>(e.bin<tc::MulOp>(e.un<tc::ExpOp>(x), e.c(x, alpha)), e.c(x, alpha));
    Value s = e.select(e.bin<tc::LeOp>(x, e.c(x, 0)), neg, x);
    return e.done(e.bin<tc::MulOp>(s, e.c(x, gamma)));
  }
  if (kind == "Celu") {
    double alpha = nc.attrFloat("alpha", 1.0f);
    Value em1 = e.bin<tc::SubOp>(e.un<tc::ExpOp>(e.bin<tc::DivOp>(x, e.c(x, alpha))), e.c(x, 1));
    Value neg = e.bin<tc::MinOp>(e.c(x, 0), e.bin<tc::MulOp>(em1, e.c(x, alpha)));
    return e.done(e.bin<tc::AddOp>(e.bin<tc::MaxOp>(x, e.c(x, 0)), neg));
  }
  if (kind == "HardSigmoid" || kind == "HardSwish") {
    double alpha = kind == "HardSwish" ? 1.0 / 6 : nc.attrFloat("alpha", 0.2f);
    double beta = kind == "HardSwish" ? 0.5 : nc.attrFloat("beta", 0.5f);
    Value lin = e.bin<tc::AddOp>(e.bin<tc::MulOp>(x, e.c(x, alpha)), e.c(x, beta));
    Value hs = e.bin<tc::MaxOp>(e.bin<tc::MinOp>(lin, e.c(x, 1)), e.c(x, 0));
    return e.done(kind == "HardSwish" ? e.bin<tc::MulOp>(x, hs) : hs);
  }
  if (kind == "Softplus")
    return e.done(e.un<tc::LogOp>(e.bin<tc::AddOp>(e.un<tc::ExpOp>(x), e.c(x, 1))));
  if (kind == "Softsign")
    return e.done(e.bin<tc::DivOp>(x, e.bin<tc::AddOp>(e.un<tc::AbsOp>(x), e.c(x, 1))));
  if (kind == "Mish") {
    Value sp = e.un<tc::LogOp>(e.bin<tc::AddOp>(e.un<tc::ExpOp>(x), e.c(x, 1)));
    return e.done(e.bin<tc::MulOp>(x, e.un<tc::TanhOp>(sp)));
  }
  if (kind == "ThresholdedRelu") {
    double alpha = nc.attrFloat("alpha", 1.0f);
    return e.done(e.select(e.bin<tc::GtOp>(x, e.c(x, alpha)), x, e.c(x, 0)));
  }
  if (kind == "Shrink") {
    double lambd = nc.attrFloat("lambd", 0.5f), bias = nc.attrFloat("bias", 0.0f);
    Value lo = e.select(e.bin<tc::LtOp>(x, e.c(x, -lambd)), e.bin<tc::AddOp>(x, e.c(x, bias)), e.c(x, 0));
    return e.done(e.select(e.bin<tc::GtOp>(x, e.c(x, lambd)), e.bin<tc::SubOp>(x, e.c(x, bias)), lo));
  }
  if (kind == "PRelu") {
    auto slope = nc.requiredInput(1);
    if (failed(slope))
      return failure();
    return e.done(e.select(e.bin<tc::LtOp>(x, e.c(x, 0)), e.bin<tc::MulOp>(x, *slope), x));
  }
  if (kind == "Gelu") {
    std::string approx = nc.attrString("approximate", "none");
    if (approx != "none" && approx != "tanh")
      return nc.failAttr("approximate", "must be \"none\" or \"tanh\", got \"" + approx + "\"");
    auto r = nc.make<tc::GeluOp>({x}, {nc.namedStr("approximate", approx)}, x.getType());
    if (failed(r))
      return failure();
    return nc.setOutput(0, *r);
  }
  return nc.fail("internal: unknown activation");
}

LogicalResult isInf(NodeContext &nc) {
  auto xr = nc.requiredInput(0);
  if (failed(xr))
    return failure();
  Value x = *xr;
  bool pos = nc.attrInt("detect_positive", 1) != 0, neg = nc.attrInt("detect_negative", 1) != 0;
  auto inf = nc.make<tc::IsInfOp>({x});
  if (failed(inf))
    return failure();
  if (pos && neg)
    return nc.setOutput(0, *inf);
  auto shape = cast<RankedTensorType>(x.getType()).getShape();
  if (!pos && !neg)
    return nc.setOutput(0, nc.splat(0, nc.builder().getI1Type(), shape));
  Ew e{nc};
  Value sign = pos ? e.bin<tc::GtOp>(x, e.c(x, 0)) : e.bin<tc::LtOp>(x, e.c(x, 0));
  return e.done(e.bin<tc::AndOp>(*inf, sign));
}

LogicalResult castOp(NodeContext &nc, bool like) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  Type to;
  if (like) {
    auto t = nc.requiredInput(1);
    if (failed(t))
      return failure();
    to = elementTypeOf(*t);
  } else {
    if (!nc.hasAttr("to"))
      return nc.fail("attribute 'to' is required");
    int64_t code = nc.attrInt("to", 0);
    to = elementTypeFromOnnx(nc.context(), (int32_t)code);
    if (!to)
      return nc.failAttr("to", "casting to " + onnxTypeName((int32_t)code) + " is unsupported");
  }
  // Opset 24 added float8e8m0 with its own rounding (round_mode up / down /
  // nearest), which tc's casts do not implement.
  if (llvm::isa<Float8E8M0FNUType>(to))
    return nc.failAttr("round_mode", "casting to FLOAT8E8M0 (its rounding modes) is unsupported");
  // tc's f4E2M1FN conversion is the GPU's (NaN to +6), not ONNX's.
  if (llvm::isa<Float4E2M1FNType>(to))
    return nc.failAttr("to", "casting to FLOAT4E2M1 is unsupported");
  bool saturate = nc.attrInt("saturate", 1) != 0;
  auto t = cast<RankedTensorType>(x->getType());
  if (t.getElementType() == to)
    return nc.setOutput(0, *x);
  SmallVector<NamedAttribute> attrs;
  if (!saturate)
    attrs.push_back(nc.namedBool("saturate", false));
  auto r = nc.make<tc::CastOp>({*x}, attrs, RankedTensorType::get(t.getShape(), to));
  if (failed(r))
    return failure();
  return nc.setOutput(0, *r);
}

LogicalResult identity(NodeContext &nc) {
  const OnnxValue *in = nc.inputEntry(0);
  if (!in)
    return nc.fail("input #0 is required");
  if (in->isSequence)
    return nc.setOutputSequence(0, in->elements, in->sequenceElementType);
  return nc.setOutput(0, in->value);
}

LogicalResult constantOp(NodeContext &nc) {
  MLIRContext *ctx = nc.context();
  Builder b(ctx);
  if (nc.hasAttr("value")) {
    auto t = nc.attrTensor("value");
    if (failed(t))
      return failure();
    return nc.setOutput(0, nc.constant(*t));
  }
  if (nc.hasAttr("value_float"))
    return nc.setOutput(0, nc.splat(nc.attrFloat("value_float", 0), b.getF32Type()));
  if (nc.hasAttr("value_int"))
    return nc.setOutput(0, nc.splat((double)nc.attrInt("value_int", 0), b.getI64Type()));
  if (auto fs = nc.attrFloats("value_floats")) {
    SmallVector<double> d(fs->begin(), fs->end());
    auto type = RankedTensorType::get({(int64_t)d.size()}, b.getF32Type());
    return nc.setOutput(0, nc.constant(denseFromDoubles(type, d)));
  }
  if (auto is = nc.attrInts("value_ints"))
    return nc.setOutput(0, nc.constI64(*is));
  if (nc.hasAttr("sparse_value"))
    return nc.failAttr("sparse_value", "sparse constants are unsupported");
  if (nc.hasAttr("value_string") || nc.hasAttr("value_strings"))
    return nc.failAttr("value_string", "string constants are unsupported");
  return nc.fail("has no value attribute");
}

LogicalResult dropout(NodeContext &nc) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  if (nc.opset() >= 12 && nc.hasInput(2)) {
    auto training = nc.constantInts(2);
    if (failed(training))
      return failure();
    double ratio = 0.5;
    if (nc.hasInput(1)) {
      auto r = nc.constantDoubles(1);
      if (failed(r))
        return failure();
      ratio = r->empty() ? 0.5 : (*r)[0];
    }
    if (!training->empty() && (*training)[0] && ratio != 0)
      return nc.fail("training_mode = true is unsupported (tc imports the inference graph; "
                     "dropout in training is added by tc's training passes)");
  }
  if (nc.opset() < 7 && nc.attrInt("is_test", 0) == 0 && nc.attrFloat("ratio", 0.5f) != 0) {
    // Old Dropout: training behaviour unless is_test; treat as inference.
  }
  if (failed(nc.setOutput(0, *x)))
    return failure();
  if (nc.outputUsed(1)) {
    auto t = cast<RankedTensorType>(x->getType());
    Type maskType = nc.opset() >= 10 ? nc.builder().getI1Type() : t.getElementType();
    return nc.setOutput(1, nc.splat(1, maskType, t.getShape()));
  }
  return success();
}

LogicalResult bitShift(NodeContext &nc) {
  auto x = nc.requiredInput(0), y = nc.requiredInput(1);
  if (failed(x) || failed(y))
    return failure();
  auto it = dyn_cast<IntegerType>(elementTypeOf(*x));
  if (!it || !it.isUnsigned())
    return nc.fail("BitShift of " + std::string(it ? "signed integers (opset 28)" : "non-integers") +
                   " is unsupported (tc shifts unsigned integers)");
  std::string dir = nc.attrString("direction", "");
  if (dir != "LEFT" && dir != "RIGHT")
    return nc.failAttr("direction", "must be LEFT or RIGHT");
  // x << y == x * 2^y (wrapping), x >> y == x / 2^y for unsigned x.
  Ew e{nc};
  Value p = e.bin<tc::PowOp>(e.c(*x, 2), *y);
  return e.done(dir == "LEFT" ? e.bin<tc::MulOp>(*x, p) : e.bin<tc::DivOp>(*x, p));
}

} // namespace

void registerElementwiseHandlers(std::vector<HandlerEntry> &t) {
  const int64_t M = kMaxOnnxOpset;
#define UNARY(NAME, OP) addHandler(t, NAME, 1, M, unary<tc::OP>)
  UNARY("Neg", NegOp);
  UNARY("Abs", AbsOp);
  UNARY("Sign", SignOp);
  UNARY("Relu", ReluOp);
  UNARY("Exp", ExpOp);
  UNARY("Log", LogOp);
  UNARY("Sqrt", SqrtOp);
  UNARY("Reciprocal", ReciprocalOp);
  UNARY("Tanh", TanhOp);
  UNARY("Sigmoid", SigmoidOp);
  UNARY("Erf", ErfOp);
  UNARY("Sin", SinOp);
  UNARY("Cos", CosOp);
  UNARY("Tan", TanOp);
  UNARY("Asin", AsinOp);
  UNARY("Acos", AcosOp);
  UNARY("Atan", AtanOp);
  UNARY("Sinh", SinhOp);
  UNARY("Cosh", CoshOp);
  UNARY("Asinh", AsinhOp);
  UNARY("Acosh", AcoshOp);
  UNARY("Atanh", AtanhOp);
  UNARY("Floor", FloorOp);
  UNARY("Ceil", CeilOp);
  UNARY("Round", RoundOp);
  UNARY("Not", NotOp);
#undef UNARY
  addHandler(t, "IsNaN", 1, M, [](NodeContext &nc) -> LogicalResult {
    auto x = nc.requiredInput(0);
    if (failed(x))
      return failure();
    auto r = nc.make<tc::IsNanOp>({*x});
    return failed(r) ? failure() : nc.setOutput(0, *r);
  });
  addHandler(t, "IsInf", 1, M, isInf);

#define BINARY(NAME, OP) addHandler(t, NAME, 1, M, binary<tc::OP>)
  BINARY("Add", AddOp);
  BINARY("Sub", SubOp);
  BINARY("Mul", MulOp);
  BINARY("Div", DivOp);
  BINARY("And", AndOp);
  BINARY("Or", OrOp);
  BINARY("Xor", XorOp);
  BINARY("Equal", EqOp);
  BINARY("Greater", GtOp);
  BINARY("GreaterOrEqual", GeOp);
  BINARY("Less", LtOp);
  BINARY("LessOrEqual", LeOp);
#undef BINARY
  addHandler(t, "Pow", 1, M, pow);
  addHandler(t, "Mod", 1, M, mod);
  addHandler(t, "Max", 1, M, [](NodeContext &nc) { return variadic<tc::MaxOp>(nc); });
  addHandler(t, "Min", 1, M, [](NodeContext &nc) { return variadic<tc::MinOp>(nc); });
  addHandler(t, "Sum", 1, M, [](NodeContext &nc) { return variadic<tc::AddOp>(nc); });
  addHandler(t, "Mean", 1, M, [](NodeContext &nc) { return variadic<tc::AddOp>(nc, true); });
  addHandler(t, "Where", 1, M, whereOp);
  addHandler(t, "BitShift", 11, M, bitShift);
  addHandler(t, "Clip", 1, M, clip);
  for (const char *a : {"LeakyRelu", "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish",
                        "Softplus", "Softsign", "Mish", "ThresholdedRelu", "Shrink", "PRelu"})
    addHandler(t, a, 1, M, [a](NodeContext &nc) { return activation(nc, a); });
  addHandler(t, "Gelu", 20, M, [](NodeContext &nc) { return activation(nc, "Gelu"); });
  addHandler(t, "Cast", 1, M, [](NodeContext &nc) { return castOp(nc, false); });
  addHandler(t, "CastLike", 15, M, [](NodeContext &nc) { return castOp(nc, true); });
  addHandler(t, "Identity", 1, M, identity);
  addHandler(t, "Constant", 1, M, constantOp);
  addHandler(t, "Dropout", 1, M, dropout);
}

} // namespace tc::onnx_import
