//===- Loss.cpp - SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss ---===//
//
// tc's loss ops take [N, C] inputs and [N] labels; ONNX's [N, C, d1..dk]
// form is transposed to [N, d1..dk, C] and flattened to [N*D, C] (labels to
// [N*D]), and a "none" reduction is reshaped back to [N, d1..dk].
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Importer.h"

#include <climits>

using namespace mlir;

namespace tc::onnx_import {
namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

LogicalResult loss(NodeContext &nc, bool softmax) {
  auto x = nc.requiredInput(0), y = nc.requiredInput(1);
  if (failed(x) || failed(y))
    return failure();
  auto xt = typeOf(*x), yt = typeOf(*y);
  if (xt.getRank() < 2)
    return nc.fail("input must be [N, C] or [N, C, d1, ..., dk]");
  if (yt.getRank() != xt.getRank() - 1 || yt.getDimSize(0) != xt.getDimSize(0))
    return nc.fail("labels must be [N] or [N, d1, ..., dk] matching the input");
  for (int64_t d = 1; d < yt.getRank(); ++d)
    if (yt.getDimSize(d) != xt.getDimSize(d + 1))
      return nc.fail("labels shape does not match the input's spatial dims");
  std::string reduction = nc.attrString("reduction", "mean");
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    return nc.failAttr("reduction", "'" + reduction + "' (mean, sum or none)");
  // Without ignore_index every label counts: use a value no label can have.
  int64_t ignore = nc.hasAttr("ignore_index") ? nc.attrInt("ignore_index", -100) : INT64_MIN;

  int64_t n = xt.getDimSize(0), c = xt.getDimSize(1), rest = 1;
  for (int64_t d = 2; d < xt.getRank(); ++d)
    rest *= xt.getDimSize(d);
  Value scores = *x, labels = *y;
  if (xt.getRank() > 2) {
    SmallVector<int64_t> perm{0};
    for (int64_t d = 2; d < xt.getRank(); ++d)
      perm.push_back(d);
    perm.push_back(1);
    auto t = nc.transpose(scores, perm);
    if (failed(t))
      return failure();
    auto r = nc.reshape(*t, {n * rest, c});
    if (failed(r))
      return failure();
    scores = *r;
    auto l = nc.reshape(labels, {n * rest});
    if (failed(l))
      return failure();
    labels = *l;
  }
  SmallVector<Value> operands{scores, labels};
  if (Value w = nc.input(2))
    operands.push_back(w);
  SmallVector<NamedAttribute> attrs{nc.namedI64("ignore_index", ignore),
                                    nc.namedStr("reduction", reduction)};
  auto l = softmax ? nc.make<tc::CrossEntropyOp>(operands, attrs)
                   : nc.make<tc::NllLossOp>(operands, attrs);
  if (failed(l))
    return failure();
  Value result = *l;
  if (reduction == "none" && xt.getRank() > 2) {
    auto r = nc.reshape(result, yt.getShape());
    if (failed(r))
      return failure();
    result = *r;
  }
  if (failed(nc.setOutput(0, result)))
    return failure();
  if (softmax && nc.outputUsed(1)) {
    auto lp = nc.make<tc::LogSoftmaxOp>({*x}, {nc.namedI64("axis", 1)}, xt);
    if (failed(lp))
      return failure();
    return nc.setOutput(1, *lp);
  }
  return success();
}

} // namespace

void registerLossHandlers(std::vector<HandlerEntry> &t) {
  addHandler(t, "SoftmaxCrossEntropyLoss", 12, kMaxOnnxOpset,
             [](NodeContext &nc) { return loss(nc, true); });
  addHandler(t, "NegativeLogLikelihoodLoss", 12, kMaxOnnxOpset,
             [](NodeContext &nc) { return loss(nc, false); });
}

} // namespace tc::onnx_import
