//===- Reduce.cpp - reductions, arg-reductions and scans ------------------===//
//
// ReduceSum/Mean/Max/Min/Prod map to tc reductions; L1, L2, LogSum,
// LogSumExp and SumSquare are decomposed. The axes moved from an attribute
// to an input in opset 13 (ReduceSum) and 18 (all others).
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Importer.h"

#include <algorithm>

using namespace mlir;

namespace tc::onnx_import {
namespace {

Type elementTypeOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

/// The axes to reduce: sorted, distinct, non-negative. `noop` is set when
/// the node asks for no reduction at all (noop_with_empty_axes and no axes).
LogicalResult reduceAxes(NodeContext &nc, int64_t rank, int64_t inputSince,
                         SmallVector<int64_t> &axes, bool &noop) {
  noop = false;
  std::optional<SmallVector<int64_t>> given;
  if (nc.opset() < inputSince) {
    given = nc.attrInts("axes");
  } else if (nc.hasInput(1)) {
    auto a = nc.constantInts(1);
    if (failed(a))
      return failure();
    given = *a;
  }
  if (!given || given->empty()) {
    if (nc.opset() >= inputSince && nc.attrInt("noop_with_empty_axes", 0)) {
      noop = true;
      return success();
    }
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
    return success();
  }
  for (int64_t a : *given) {
    auto n = nc.normalizeAxis(a, rank, "axes entry");
    if (failed(n))
      return failure();
    axes.push_back(*n);
  }
  llvm::sort(axes);
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return success();
}

LogicalResult reduceOp(NodeContext &nc, StringRef kind, int64_t inputSince) {
  auto xr = nc.requiredInput(0);
  if (failed(xr))
    return failure();
  Value x = *xr;
  auto type = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> axes;
  bool noop;
  if (failed(reduceAxes(nc, type.getRank(), inputSince, axes, noop)))
    return failure();
  bool keep = nc.attrInt("keepdims", 1) != 0;

  auto chk = [&](FailureOr<Value> v, Value &out) {
    if (failed(v))
      return false;
    out = *v;
    return true;
  };
  Value v = x;
  // Elementwise part before the reduction.
  if (kind == "ReduceL1") {
    if (!chk(nc.make<tc::AbsOp>({v}, {}, v.getType()), v)) return failure();
  } else if (kind == "ReduceL2" || kind == "ReduceSumSquare") {
    if (!chk(nc.make<tc::MulOp>({v, v}), v)) return failure();
  }
  if (kind == "ReduceLogSumExp") {
    if (noop) {
      Value e;
      if (!chk(nc.make<tc::ExpOp>({v}, {}, v.getType()), e) ||
          !chk(nc.make<tc::LogOp>({e}, {}, e.getType()), v))
        return failure();
      return nc.setOutput(0, v);
    }
    // log(sum(exp(x - m))) + m with m the max, so large inputs do not
    // overflow; a row of -inf keeps m finite (0) to avoid inf - inf.
    Value m, mf, d, e, s, l;
    if (!chk(nc.reduce("reduce_max", v, axes, true), m))
      return failure();
    Value zero = nc.splat(0, elementTypeOf(v));
    Value finite;
    if (!chk(nc.make<tc::IsInfOp>({m}), finite) || !chk(nc.make<tc::SelectOp>({finite, zero, m}), mf))
      return failure();
    if (!chk(nc.make<tc::SubOp>({v, mf}), d) || !chk(nc.make<tc::ExpOp>({d}, {}, d.getType()), e) ||
        !chk(nc.reduce("reduce_sum", e, axes, true), s) ||
        !chk(nc.make<tc::LogOp>({s}, {}, s.getType()), l) || !chk(nc.make<tc::AddOp>({l, mf}), v))
      return failure();
    if (!keep) {
      SmallVector<int64_t> shape;
      for (int64_t dd = 0; dd < type.getRank(); ++dd)
        if (!llvm::is_contained(axes, dd))
          shape.push_back(type.getDimSize(dd));
      if (!chk(nc.reshape(v, shape), v))
        return failure();
    }
    return nc.setOutput(0, v);
  }
  if (!noop) {
    StringRef tcKind = kind == "ReduceMean"  ? "reduce_mean"
                       : kind == "ReduceMax" ? "reduce_max"
                       : kind == "ReduceMin" ? "reduce_min"
                       : kind == "ReduceProd" ? "reduce_prod"
                                              : "reduce_sum";
    if (!chk(nc.reduce(tcKind, v, axes, keep), v))
      return failure();
  }
  if (kind == "ReduceL2") {
    if (!chk(nc.make<tc::SqrtOp>({v}, {}, v.getType()), v)) return failure();
  } else if (kind == "ReduceLogSum") {
    if (!chk(nc.make<tc::LogOp>({v}, {}, v.getType()), v)) return failure();
  }
  return nc.setOutput(0, v);
}

template <typename OpTy>
LogicalResult argReduce(NodeContext &nc) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  auto axis = nc.normalizeAxis(nc.attrInt("axis", 0), nc.inputType(0).getRank());
  if (failed(axis))
    return failure();
  auto r = nc.make<OpTy>({*x}, {nc.namedI64("axis", *axis),
                                nc.namedBool("keepdims", nc.attrInt("keepdims", 1) != 0),
                                nc.namedBool("select_last_index",
                                             nc.attrInt("select_last_index", 0) != 0)});
  if (failed(r))
    return failure();
  return nc.setOutput(0, *r);
}

LogicalResult cumsum(NodeContext &nc) {
  auto x = nc.requiredInput(0);
  if (failed(x))
    return failure();
  auto axisV = nc.constantInts(1);
  if (failed(axisV))
    return failure();
  if (axisV->size() != 1)
    return nc.fail("axis must hold one value");
  auto axis = nc.normalizeAxis((*axisV)[0], nc.inputType(0).getRank());
  if (failed(axis))
    return failure();
  auto r = nc.make<tc::CumSumOp>(
      {*x},
      {nc.namedI64("axis", *axis), nc.namedBool("exclusive", nc.attrInt("exclusive", 0) != 0),
       nc.namedBool("reverse", nc.attrInt("reverse", 0) != 0)},
      x->getType());
  if (failed(r))
    return failure();
  return nc.setOutput(0, *r);
}

} // namespace

void registerReduceHandlers(std::vector<HandlerEntry> &t) {
  const int64_t M = kMaxOnnxOpset;
  addHandler(t, "ReduceSum", 1, M, [](NodeContext &nc) { return reduceOp(nc, "ReduceSum", 13); });
  for (const char *k : {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                        "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"})
    addHandler(t, k, 1, M, [k](NodeContext &nc) { return reduceOp(nc, k, 18); });
  addHandler(t, "ArgMax", 1, M, argReduce<tc::ArgMaxOp>);
  addHandler(t, "ArgMin", 1, M, argReduce<tc::ArgMinOp>);
  addHandler(t, "CumSum", 11, M, cumsum);
}

} // namespace tc::onnx_import
