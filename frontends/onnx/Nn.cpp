//===- Nn.cpp - contractions, softmax and normalisation ONNX ops ----------===//
//
// MatMul (numpy 1-D rules), Gemm, Softmax / LogSoftmax / Hardmax (opset < 13
// flattens at `axis`, >= 13 works on one axis), LayerNormalization (with the
// optional Mean / InvStdDev outputs), RMSNormalization, and the inference
// forms of BatchNormalization, InstanceNormalization, LpNormalization and
// MeanVarianceNormalization.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Importer.h"

using namespace mlir;

namespace tc::onnx_import {
namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Chains FailureOr results: the first failure sticks, later steps are
/// skipped.
struct Chain {
  NodeContext &nc;
  bool ok = true;
  Value operator()(FailureOr<Value> v) {
    if (!ok || failed(v)) {
      ok = false;
      return {};
    }
    return *v;
  }
  template <typename OpTy> Value bin(Value a, Value b) {
    if (!ok) return {};
    return (*this)(nc.make<OpTy>({a, b}));
  }
  template <typename OpTy> Value un(Value a) {
    if (!ok) return {};
    return (*this)(nc.make<OpTy>({a}, {}, a.getType()));
  }
  Value c(Value like, double x) {
    if (!ok) return {};
    return nc.splat(x, typeOf(like).getElementType());
  }
  LogicalResult out(size_t i, Value v) {
    if (!ok)
      return failure();
    return nc.setOutput(i, v);
  }
};

LogicalResult matmul(NodeContext &nc) {
  auto a = nc.requiredInput(0), b = nc.requiredInput(1);
  if (failed(a) || failed(b))
    return failure();
  Chain ch{nc};
  Value lhs = *a, rhs = *b;
  auto at = typeOf(lhs), bt = typeOf(rhs);
  if (at.getRank() == 0 || bt.getRank() == 0)
    return nc.fail("operands must have rank >= 1");
  bool lhsVec = at.getRank() == 1, rhsVec = bt.getRank() == 1;
  if (lhsVec)
    lhs = ch(nc.reshape(lhs, {1, at.getDimSize(0)}));
  if (rhsVec)
    rhs = ch(nc.reshape(rhs, {bt.getDimSize(0), 1}));
  Value r = ch.ok ? ch(nc.make<tc::MatmulOp>({lhs, rhs})) : Value();
  if (!ch.ok)
    return failure();
  if (lhsVec || rhsVec) {
    SmallVector<int64_t> shape(typeOf(r).getShape());
    if (rhsVec)
      shape.pop_back();
    if (lhsVec)
      shape.erase(shape.end() - (rhsVec ? 1 : 2));
    r = ch(nc.reshape(r, shape));
  }
  return ch.out(0, r);
}

LogicalResult gemm(NodeContext &nc) {
  auto a = nc.requiredInput(0), b = nc.requiredInput(1);
  if (failed(a) || failed(b))
    return failure();
  if (typeOf(*a).getRank() != 2 || typeOf(*b).getRank() != 2)
    return nc.fail("A and B must be matrices");
  Chain ch{nc};
  double alpha = nc.attrFloat("alpha", 1.0f), beta = nc.attrFloat("beta", 1.0f);
  Value y = ch(nc.make<tc::MatmulOp>({*a, *b}, {nc.namedBool("transpose_lhs", nc.attrInt("transA", 0) != 0),
                                                nc.namedBool("transpose_rhs", nc.attrInt("transB", 0) != 0)}));
  if (ch.ok && alpha != 1.0)
    y = ch.bin<tc::MulOp>(y, ch.c(y, alpha));
  if (Value c = nc.input(2); c && ch.ok) {
    if (beta != 1.0)
      c = ch.bin<tc::MulOp>(c, ch.c(c, beta));
    y = ch.bin<tc::AddOp>(y, c);
  }
  return ch.out(0, y);
}

/// Softmax / LogSoftmax / Hardmax.
LogicalResult softmaxLike(NodeContext &nc, StringRef kind) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  auto t = typeOf(*x);
  Chain ch{nc};
  bool legacy = nc.opset() < 13;
  auto axisR = nc.normalizeAxis(nc.attrInt("axis", legacy ? 1 : -1), t.getRank());
  if (failed(axisR))
    return failure();
  int64_t axis = *axisR;
  Value v = *x;
  if (legacy) {
    // Opset < 13: the input is coerced to 2-D [prod(:axis), prod(axis:)].
    // An empty input's other dims can be anything the model says: the two
    // products are bounded (kMaxTensorElements), not trusted.
    int64_t outer = boundedNumElements(t.getShape().take_front(axis));
    int64_t inner = boundedNumElements(t.getShape().drop_front(axis));
    if (outer < 0 || inner < 0)
      return nc.fail("input of shape " + shapeStr(t.getShape()) + " coerced to 2-D at axis " +
                     Twine(axis) + " has a side of more than 2^40 elements");
    v = ch(nc.reshape(v, {outer, inner}));
    axis = 1;
  }
  Value r;
  if (kind == "Softmax")
    r = ch.ok ? ch(nc.make<tc::SoftmaxOp>({v}, {nc.namedI64("axis", axis)}, v.getType())) : Value();
  else if (kind == "LogSoftmax")
    r = ch.ok ? ch(nc.make<tc::LogSoftmaxOp>({v}, {nc.namedI64("axis", axis)}, v.getType())) : Value();
  else if (ch.ok) {
    // Hardmax: one-hot of the first maximum along the axis.
    auto vt = typeOf(v);
    Value am = ch(nc.make<tc::ArgMaxOp>({v}, {nc.namedI64("axis", axis), nc.namedBool("keepdims", true)}));
    SmallVector<int64_t> iotaShape(vt.getRank(), 1), iota;
    iotaShape[axis] = vt.getDimSize(axis);
    if (iotaShape[axis] > kMaxFoldElements) // the iota below is built at import
      return nc.fail("Hardmax axis of " + Twine(iotaShape[axis]) + " elements is too large (at most " +
                     Twine(kMaxFoldElements) + ")");
    for (int64_t i = 0; i < vt.getDimSize(axis); ++i)
      iota.push_back(i);
    Value io = nc.constant(denseFromInts(RankedTensorType::get(iotaShape, nc.builder().getI64Type()), iota));
    Value eq = ch.bin<tc::EqOp>(am, io);
    r = ch.ok ? ch(nc.cast(eq, vt.getElementType())) : Value();
    if (ch.ok)
      r = ch(nc.broadcastTo(r, vt.getShape()));
  }
  if (legacy && ch.ok)
    r = ch(nc.reshape(r, t.getShape()));
  return ch.out(0, r);
}

/// Scale/bias of a norm broadcast to the normalised shape, in x's type.
FailureOr<Value> normOperand(NodeContext &nc, Value v, RankedTensorType xt, int64_t axis) {
  SmallVector<int64_t> shape(xt.getShape().drop_front(axis));
  auto c = nc.cast(v, xt.getElementType());
  if (failed(c))
    return failure();
  auto vt = typeOf(*c);
  // Drop leading 1s beyond the normalised rank, then broadcast.
  if (vt.getRank() > (int64_t)shape.size()) {
    SmallVector<int64_t> trimmed(vt.getShape().take_back(shape.size()));
    for (int64_t d : vt.getShape().drop_back(shape.size()))
      if (d != 1)
        return nc.fail("scale/bias shape does not broadcast to the normalised shape"), failure();
    c = nc.reshape(*c, trimmed);
    if (failed(c))
      return failure();
  }
  return nc.broadcastTo(*c, shape);
}

LogicalResult layerNorm(NodeContext &nc, bool rms) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  auto xt = typeOf(*x);
  auto axis = nc.normalizeAxis(nc.attrInt("axis", -1), xt.getRank());
  if (failed(axis))
    return failure();
  double eps = nc.attrFloat("epsilon", rms ? 1e-5f : 1e-5f);
  SmallVector<Value> operands{*x};
  int32_t hasScale = 0, hasBias = 0;
  if (Value s = nc.input(1)) {
    auto v = normOperand(nc, s, xt, *axis);
    if (failed(v))
      return failure();
    operands.push_back(*v);
    hasScale = 1;
  }
  if (!rms) {
    if (Value b = nc.input(2)) {
      auto v = normOperand(nc, b, xt, *axis);
      if (failed(v))
        return failure();
      operands.push_back(*v);
      hasBias = 1;
    }
  }
  SmallVector<NamedAttribute> attrs{nc.namedI64("axis", *axis), nc.namedF64("epsilon", eps)};
  FailureOr<Value> y;
  if (rms) {
    y = nc.make<tc::RmsNormOp>(operands, attrs, xt);
  } else {
    attrs.push_back(nc.builder().getNamedAttr(
        "operandSegmentSizes", nc.builder().getDenseI32ArrayAttr({1, hasScale, hasBias})));
    y = nc.make<tc::LayerNormOp>(operands, attrs, xt);
  }
  if (failed(y) || failed(nc.setOutput(0, *y)))
    return failure();
  if (rms || (!nc.outputUsed(1) && !nc.outputUsed(2)))
    return success();
  // Optional outputs: Mean and InvStdDev over the normalised axes (keepdims),
  // computed with primitive ops (stash_type = float, the input's type here).
  Chain ch{nc};
  SmallVector<int64_t> axes;
  for (int64_t d = *axis; d < xt.getRank(); ++d)
    axes.push_back(d);
  Value mean = ch(nc.reduce("reduce_mean", *x, axes, true));
  Value diff = ch.bin<tc::SubOp>(*x, mean);
  Value var = ch.ok ? ch(nc.reduce("reduce_mean", ch.bin<tc::MulOp>(diff, diff), axes, true)) : Value();
  Value inv = ch.un<tc::RsqrtOp>(ch.bin<tc::AddOp>(var, ch.c(var, eps)));
  if (!ch.ok || failed(nc.setOutput(1, mean)))
    return failure();
  return ch.out(2, inv);
}

/// x reshaped-broadcast helper: [C] -> [1, C, 1, ...] for NCHW ops.
FailureOr<Value> channelVector(NodeContext &nc, Value v, int64_t rank) {
  auto t = typeOf(v);
  SmallVector<int64_t> shape(rank, 1);
  if (rank < 2)
    return nc.fail("input must have rank >= 2"), failure();
  shape[1] = t.getNumElements();
  return nc.reshape(v, shape);
}

LogicalResult batchNorm(NodeContext &nc) {
  if (nc.attrInt("training_mode", 0) != 0)
    return nc.failAttr("training_mode", "only inference (training_mode = 0) is supported");
  if (nc.outputUsed(1) || nc.outputUsed(2) || nc.outputUsed(3) || nc.outputUsed(4))
    return nc.fail("the running statistics outputs (training) are unsupported");
  SmallVector<Value> in;
  for (int i = 0; i < 5; ++i) {
    auto v = nc.requiredInput(i);
    if (failed(v))
      return failure();
    in.push_back(*v);
  }
  int64_t rank = typeOf(in[0]).getRank();
  double eps = nc.attrFloat("epsilon", 1e-5f);
  Chain ch{nc};
  Value scale = ch(channelVector(nc, in[1], rank)), bias = ch(channelVector(nc, in[2], rank));
  Value mean = ch(channelVector(nc, in[3], rank)), var = ch(channelVector(nc, in[4], rank));
  if (!ch.ok)
    return failure();
  Value inv = ch.un<tc::RsqrtOp>(ch.bin<tc::AddOp>(var, ch.c(var, eps)));
  Value y = ch.bin<tc::MulOp>(ch.bin<tc::SubOp>(in[0], mean), ch.bin<tc::MulOp>(inv, scale));
  return ch.out(0, ch.bin<tc::AddOp>(y, bias));
}

/// (x - mean) / sqrt(var + eps) over `axes` (keepdims).
Value normalizeOver(Chain &ch, NodeContext &nc, Value x, ArrayRef<int64_t> axes, double eps) {
  Value mean = ch(nc.reduce("reduce_mean", x, axes, true));
  Value diff = ch.bin<tc::SubOp>(x, mean);
  Value var = ch.ok ? ch(nc.reduce("reduce_mean", ch.bin<tc::MulOp>(diff, diff), axes, true)) : Value();
  if (eps != 0)
    var = ch.bin<tc::AddOp>(var, ch.c(var, eps));
  return ch.bin<tc::MulOp>(diff, ch.un<tc::RsqrtOp>(var));
}

LogicalResult instanceNorm(NodeContext &nc) {
  auto x = nc.requiredInput(0), s = nc.requiredInput(1), b = nc.requiredInput(2);
  if (failed(x) || failed(s) || failed(b))
    return failure();
  int64_t rank = typeOf(*x).getRank();
  SmallVector<int64_t> axes;
  for (int64_t d = 2; d < rank; ++d)
    axes.push_back(d);
  Chain ch{nc};
  Value n = normalizeOver(ch, nc, *x, axes, nc.attrFloat("epsilon", 1e-5f));
  Value scale = ch(channelVector(nc, *s, rank)), bias = ch(channelVector(nc, *b, rank));
  return ch.out(0, ch.bin<tc::AddOp>(ch.bin<tc::MulOp>(n, scale), bias));
}

LogicalResult meanVarianceNorm(NodeContext &nc) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  int64_t rank = typeOf(*x).getRank();
  SmallVector<int64_t> axes;
  for (int64_t a : nc.attrInts("axes").value_or(SmallVector<int64_t>{0, 2, 3})) {
    auto n = nc.normalizeAxis(a, rank, "axes entry");
    if (failed(n))
      return failure();
    axes.push_back(*n);
  }
  llvm::sort(axes);
  Chain ch{nc};
  // ONNX's function body: (X - E[X]) / sqrt(E[X^2] - E[X]^2), no epsilon.
  return ch.out(0, normalizeOver(ch, nc, *x, axes, 0));
}

LogicalResult lpNorm(NodeContext &nc) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  int64_t p = nc.attrInt("p", 2);
  if (p != 1 && p != 2)
    return nc.failAttr("p", "must be 1 or 2");
  auto axis = nc.normalizeAxis(nc.attrInt("axis", -1), typeOf(*x).getRank());
  if (failed(axis))
    return failure();
  Chain ch{nc};
  Value v = p == 1 ? ch.un<tc::AbsOp>(*x) : ch.bin<tc::MulOp>(*x, *x);
  Value s = ch.ok ? ch(nc.reduce("reduce_sum", v, {*axis}, true)) : Value();
  if (p == 2)
    s = ch.un<tc::SqrtOp>(s);
  // A zero norm gives 0, not 0 / 0 (the specification's reference).
  Value zero = ch.c(*x, 0.0);
  Value isZero = ch.bin<tc::EqOp>(s, zero);
  Value q = ch.bin<tc::DivOp>(*x, s);
  if (!ch.ok)
    return failure();
  return ch.out(0, ch(nc.make<tc::SelectOp>({isZero, zero, q}, {}, q.getType())));
}

/// ONNX Attention (opset 23+), written out as the chain exporters produce, so
/// that tc-recognize-attention makes it one tc.attention when the mask is
/// causal, empty or a padding mask (and leaves it unfused with a note when it
/// is not, e.g. a run-time attn_mask of any shape, or with softcap):
///   q, k, v as [B, H, S, D] (3-D inputs split by q_num_heads / kv_num_heads),
///   k / v repeated per query head (GQA), scores = scale * q @ k^T,
///   softcap * tanh(s / softcap),
///   + the mask (a boolean attn_mask as 0 / -inf, padded to the keys; the
///   causal mask, top-left), softmax (in softmax_precision), a row that sees
///   no key gives 0 (where(isnan(p), 0, p)), @ v, back to 3-D when given so.
/// past_key / past_value, nonpad_kv_seqlen, the qk_matmul_output output and
/// sliding windows (left/right_window_size) are refused by name.
LogicalResult attention(NodeContext &nc) {
  auto qIn = nc.requiredInput(0), kIn = nc.requiredInput(1), vIn = nc.requiredInput(2);
  if (failed(qIn) || failed(kIn) || failed(vIn))
    return failure();
  if (nc.input(4) || nc.input(5))
    return nc.fail("past_key / past_value (a KV cache) are unsupported");
  if (nc.input(6))
    return nc.fail("nonpad_kv_seqlen is unsupported");
  for (size_t i = 1; i < nc.numOutputs(); ++i)
    if (nc.outputUsed(i))
      return nc.fail(i == 3 ? "the qk_matmul_output output (qk_matmul_output_mode) is unsupported"
                            : "present_key / present_value (a KV cache) are unsupported");
  if (nc.attrInt("left_window_size", -1) != -1 || nc.attrInt("right_window_size", -1) != -1)
    return nc.failAttr("left_window_size", "sliding-window attention is unsupported");
  Chain ch{nc};
  Value q = *qIn, k = *kIn, v = *vIn;
  auto qt = typeOf(q);
  Type elt = qt.getElementType();
  int64_t rank = qt.getRank();
  if (rank != 3 && rank != 4)
    return nc.fail("Q, K and V must be 3-D [batch, seq, hidden] or 4-D [batch, heads, seq, dim]");
  if (typeOf(k).getRank() != rank || typeOf(v).getRank() != rank)
    return nc.fail("Q, K and V must have the same rank");
  if (rank == 3) {
    int64_t hq = nc.attrInt("q_num_heads", 0), hkv = nc.attrInt("kv_num_heads", 0);
    if (hq <= 0 || hkv <= 0)
      return nc.fail("3-D inputs need q_num_heads and kv_num_heads");
    auto split = [&](Value x, int64_t heads) -> Value {
      auto t = typeOf(x);
      if (t.getDimSize(2) % heads) {
        (void)nc.fail("hidden size " + Twine(t.getDimSize(2)) + " is not a multiple of " +
                      Twine(heads) + " heads");
        ch.ok = false;
        return Value();
      }
      Value r = ch(nc.reshape(x, {t.getDimSize(0), t.getDimSize(1), heads, t.getDimSize(2) / heads}));
      return ch.ok ? ch(nc.transpose(r, {0, 2, 1, 3})) : Value();
    };
    q = split(q, hq);
    k = split(k, hkv);
    v = split(v, hkv);
    if (!ch.ok)
      return failure();
  }
  auto q4 = typeOf(q), k4 = typeOf(k), v4 = typeOf(v);
  int64_t b = q4.getDimSize(0), h = q4.getDimSize(1), tq = q4.getDimSize(2), d = q4.getDimSize(3);
  int64_t hkv = k4.getDimSize(1), tk = k4.getDimSize(2);
  if (k4.getDimSize(0) != b || v4.getDimSize(0) != b || v4.getDimSize(1) != hkv ||
      v4.getDimSize(2) != tk || k4.getDimSize(3) != d)
    return nc.fail("Q, K and V shapes do not match");
  if (hkv != h) {
    if (hkv == 0 || h % hkv)
      return nc.fail("query heads (" + Twine(h) + ") must be a multiple of the key/value heads (" +
                     Twine(hkv) + ")");
    auto repeat = [&](Value x) -> Value { // repeat_kv: [B, Hkv, S, D] -> [B, H, S, D]
      auto t = typeOf(x);
      Value r = ch(nc.reshape(x, {b, hkv, 1, t.getDimSize(2), t.getDimSize(3)}));
      r = ch.ok ? ch(nc.broadcastTo(r, {b, hkv, h / hkv, t.getDimSize(2), t.getDimSize(3)})) : Value();
      return ch.ok ? ch(nc.reshape(r, {b, h, t.getDimSize(2), t.getDimSize(3)})) : Value();
    };
    k = repeat(k);
    v = repeat(v);
  }
  double scale = nc.hasAttr("scale") ? nc.attrFloat("scale", 1.0f) : 1.0 / std::sqrt((double)d);
  if (!(scale > 0) || !std::isfinite(scale))
    return nc.failAttr("scale", "must be positive and finite");
  // One scale on the scores (the reference scales q and k by sqrt(scale)
  // each: the same up to rounding), so that the recogniser sees k^T of the
  // repeated keys.
  Value kt = ch(nc.transpose(k, {0, 1, 3, 2}));
  Value scores = ch.ok ? ch(nc.make<tc::MatmulOp>({q, kt})) : Value();
  scores = ch.bin<tc::MulOp>(scores, nc.splat(scale, elt));
  float softcap = nc.attrFloat("softcap", 0.0f);
  if (softcap < 0)
    return nc.failAttr("softcap", "must be >= 0");
  if (softcap > 0) {
    Value c = nc.splat(softcap, elt);
    scores = ch.bin<tc::MulOp>(ch.un<tc::TanhOp>(ch.bin<tc::DivOp>(scores, c)), c);
  }
  if (!ch.ok)
    return failure();
  // The bias: attn_mask (bool -> 0 / -inf, padded with hidden keys to Tk),
  // then the causal mask.
  double ninf = -std::numeric_limits<double>::infinity();
  Value bias;
  if (Value m = nc.input(3)) {
    auto mt = typeOf(m);
    if (mt.getRank() < 1)
      return nc.fail("attn_mask must have rank >= 1");
    bool isBool = mt.getElementType().isInteger(1);
    if (!isBool && mt.getElementType() != elt)
      return nc.fail("a float attn_mask must have Q's element type");
    int64_t last = mt.getDimSize(mt.getRank() - 1);
    if (last > tk)
      return nc.fail("attn_mask has " + Twine(last) + " keys, more than the " + Twine(tk) + " of K");
    if (last < tk) {
      SmallVector<int64_t> low(mt.getRank(), 0), high(mt.getRank(), 0);
      high.back() = tk - last;
      SmallVector<int64_t> shape(mt.getShape());
      shape.back() = tk;
      m = ch(nc.make<tc::PadOp>({m},
                                {nc.namedI64Array("low", low), nc.namedI64Array("high", high),
                                 nc.namedF64("value", isBool ? 0.0 : ninf)},
                                RankedTensorType::get(shape, mt.getElementType())));
    }
    if (isBool && ch.ok)
      m = ch(nc.make<tc::SelectOp>({m, nc.splat(0.0, elt), nc.splat(ninf, elt)}, {},
                                   RankedTensorType::get(typeOf(m).getShape(), elt)));
    bias = m;
  }
  if (nc.attrInt("is_causal", 0) != 0) {
    SmallVector<double> c(static_cast<size_t>(tq * tk));
    for (int64_t i = 0; i < tq; ++i)
      for (int64_t j = 0; j < tk; ++j)
        c[static_cast<size_t>(i * tk + j)] = j > i ? ninf : 0.0;
    Value causal = nc.constant(denseFromDoubles(RankedTensorType::get({tq, tk}, elt), c));
    bias = bias ? ch.bin<tc::AddOp>(bias, causal) : causal;
  }
  if (bias)
    scores = ch.bin<tc::AddOp>(scores, bias);
  if (!ch.ok)
    return failure();
  // softmax_precision: the softmax runs in that type.
  Type smElt = elt;
  if (nc.hasAttr("softmax_precision")) {
    smElt = elementTypeFromOnnx(nc.context(), (int32_t)nc.attrInt("softmax_precision", 1));
    if (!smElt || !isa<FloatType>(smElt))
      return nc.failAttr("softmax_precision", "must be a floating-point type");
  }
  Value x = smElt != elt ? ch(nc.cast(scores, smElt)) : scores;
  Value p = ch.ok ? ch(nc.make<tc::SoftmaxOp>({x}, {nc.namedI64("axis", 3)})) : Value();
  if (ch.ok && smElt != elt)
    p = ch(nc.cast(p, elt));
  if (!ch.ok)
    return failure();
  if (bias) { // a row that sees no key is 0, not 0 / 0
    Value nan = ch(nc.make<tc::IsNanOp>({p}, {}, RankedTensorType::get(typeOf(p).getShape(),
                                                                      nc.builder().getI1Type())));
    p = ch.ok ? ch(nc.make<tc::SelectOp>({nan, nc.splat(0.0, elt), p}, {}, p.getType())) : Value();
  }
  Value y = ch.ok ? ch(nc.make<tc::MatmulOp>({p, v})) : Value();
  if (ch.ok && rank == 3) {
    y = ch(nc.transpose(y, {0, 2, 1, 3}));
    if (ch.ok)
      y = ch(nc.reshape(y, {b, tq, h * typeOf(y).getDimSize(3)}));
  }
  return ch.out(0, y);
}

/// ONNX RotaryEmbedding (opset 23): tc.rotary on [B, H, S, D] (a 3-D
/// [B, S, H*D] input is split by num_heads and joined back), with cos/sin
/// gathered at position_ids when given ([max_pos, R/2] caches), else used as
/// [B, S, R/2]; rotary_embedding_dim R (0: all of D) and interleaved.
LogicalResult rotaryEmbedding(NodeContext &nc) {
  auto xIn = nc.requiredInput(0), cIn = nc.requiredInput(1), sIn = nc.requiredInput(2);
  if (failed(xIn) || failed(cIn) || failed(sIn))
    return failure();
  Chain ch{nc};
  Value x = *xIn, cs = *cIn, sn = *sIn;
  auto xt = typeOf(x);
  int64_t rank = xt.getRank();
  if (rank != 3 && rank != 4)
    return nc.fail("input must be 3-D [batch, seq, hidden] or 4-D [batch, heads, seq, dim]");
  int64_t heads = nc.attrInt("num_heads", 0);
  if (rank == 3) {
    if (heads <= 0 || xt.getDimSize(2) % heads)
      return nc.failAttr("num_heads", "a 3-D input needs num_heads dividing its hidden size");
    x = ch(nc.reshape(x, {xt.getDimSize(0), xt.getDimSize(1), heads, xt.getDimSize(2) / heads}));
    x = ch.ok ? ch(nc.transpose(x, {0, 2, 1, 3})) : Value();
    if (!ch.ok)
      return failure();
  }
  auto x4 = typeOf(x);
  int64_t b = x4.getDimSize(0), s = x4.getDimSize(2), d = x4.getDimSize(3);
  int64_t r = nc.attrInt("rotary_embedding_dim", 0);
  if (r == 0)
    r = d;
  if (r < 2 || r > d || r % 2)
    return nc.failAttr("rotary_embedding_dim", Twine(r) + " must be even and in [2, " + Twine(d) + "]");
  if (Value pos = nc.input(3)) {
    auto pt = typeOf(pos);
    if (pt.getRank() != 2 || pt.getDimSize(0) != b || pt.getDimSize(1) != s)
      return nc.fail("position_ids must be [batch, seq] = [" + Twine(b) + ", " + Twine(s) + "]");
    if (typeOf(cs).getRank() != 2 || typeOf(sn).getRank() != 2)
      return nc.fail("with position_ids, cos_cache and sin_cache must be [max_position, R/2]");
    auto gathered = [&](Value table) -> Value {
      auto tt = typeOf(table);
      return ch(nc.make<tc::GatherOp>(
          {table, pos}, {nc.namedI64("axis", 0)},
          RankedTensorType::get({b, s, tt.getDimSize(1)}, tt.getElementType())));
    };
    cs = gathered(cs);
    sn = gathered(sn);
    if (!ch.ok)
      return failure();
  }
  // Caches shared by the batch ([1, S, R/2], as torch's exporter writes them).
  if (typeOf(cs).getRank() == 3 && typeOf(cs).getDimSize(0) == 1 && b != 1 && typeOf(sn) == typeOf(cs)) {
    SmallVector<int64_t> full = {b, s, typeOf(cs).getDimSize(2)};
    cs = ch(nc.broadcastTo(cs, full));
    sn = ch.ok ? ch(nc.broadcastTo(sn, full)) : Value();
    if (!ch.ok)
      return failure();
  }
  auto ct = typeOf(cs);
  if (ct.getRank() != 3 || ct.getDimSize(0) != b || ct.getDimSize(1) != s ||
      ct.getDimSize(2) != r / 2 || typeOf(sn) != ct)
    return nc.fail("cos_cache / sin_cache must be [batch, seq, rotary_dim / 2] = [" + Twine(b) +
                   ", " + Twine(s) + ", " + Twine(r / 2) + "]");
  Value y = ch(nc.make<tc::RotaryOp>({x, cs, sn},
                                     {nc.namedBool("interleaved", nc.attrInt("interleaved", 0) != 0)},
                                     x.getType()));
  if (ch.ok && rank == 3) {
    y = ch(nc.transpose(y, {0, 2, 1, 3}));
    y = ch.ok ? ch(nc.reshape(y, xt.getShape())) : Value();
  }
  return ch.out(0, y);
}

LogicalResult globalPool(NodeContext &nc, StringRef kind) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  int64_t rank = typeOf(*x).getRank();
  if (rank < 2)
    return nc.fail("input must be [N, C, ...]");
  SmallVector<int64_t> axes;
  for (int64_t d = 2; d < rank; ++d)
    axes.push_back(d);
  if (axes.empty())
    return nc.setOutput(0, *x);
  auto r = nc.reduce(kind, *x, axes, true);
  if (failed(r))
    return failure();
  return nc.setOutput(0, *r);
}

} // namespace

void registerNnHandlers(std::vector<HandlerEntry> &t) {
  const int64_t M = kMaxOnnxOpset;
  addHandler(t, "MatMul", 1, M, matmul);
  addHandler(t, "Gemm", 1, M, gemm);
  addHandler(t, "Softmax", 1, M, [](NodeContext &nc) { return softmaxLike(nc, "Softmax"); });
  addHandler(t, "LogSoftmax", 1, M, [](NodeContext &nc) { return softmaxLike(nc, "LogSoftmax"); });
  addHandler(t, "Hardmax", 1, M, [](NodeContext &nc) { return softmaxLike(nc, "Hardmax"); });
  addHandler(t, "LayerNormalization", 17, M, [](NodeContext &nc) { return layerNorm(nc, false); });
  addHandler(t, "RMSNormalization", 23, M, [](NodeContext &nc) { return layerNorm(nc, true); });
  addHandler(t, "BatchNormalization", 6, M, batchNorm);
  addHandler(t, "InstanceNormalization", 1, M, instanceNorm);
  addHandler(t, "MeanVarianceNormalization", 9, M, meanVarianceNorm);
  addHandler(t, "LpNormalization", 1, M, lpNorm);
  addHandler(t, "Attention", 23, M, attention);
  addHandler(t, "RotaryEmbedding", 23, M, rotaryEmbedding);
  addHandler(t, "GlobalAveragePool", 1, M, [](NodeContext &nc) { return globalPool(nc, "reduce_mean"); });
  addHandler(t, "GlobalMaxPool", 1, M, [](NodeContext &nc) { return globalPool(nc, "reduce_max"); });
}

} // namespace tc::onnx_import
