//===- loss.cpp - cross_entropy and nll_loss ------------------------------===//
//
// input [..., C] (class axis last; the dialect uses [N, C]), labels of the
// input's shape without the class axis, weight [C] (optional). A row whose
// label equals ignore_index adds nothing (and is 0 with reduction "none"); a
// label outside [0, C) that is not ignore_index is an error. "mean" is
// sum(w[y] * l) / sum(w[y]) over the rows not ignored: NaN when none is left,
// as in torch.
//
//===----------------------------------------------------------------------===//
#include <cmath>
#include <limits>

#include "runtime/src/cpu/kernel.h"

namespace tc::rt::cpu {

LossArgs checkLossArgs(KernelContext &c, const Buffer &x, const Buffer &labels,
                       const Buffer *weight) {
  c.expectFloat(x, "input");
  c.expectInteger(labels, "labels");
  if (x.rank() < 1)
    c.fail("input must have a class axis, got " + typeToString(x.type));
  LossArgs a;
  a.classes = x.shape().back();
  a.rowShape.assign(x.shape().begin(), x.shape().end() - 1);
  c.expectShape(labels, a.rowShape, "labels");
  if (weight) {
    c.expectSameDType(*weight, x, "weight");
    c.expectShape(*weight, {a.classes}, "weight");
  }
  a.ignore = c.intAttr("ignore_index", -100);
  std::string reduction = c.strAttr("reduction", "mean");
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    c.fail("reduction must be \"mean\", \"sum\" or \"none\", got \"" + reduction + "\"");
  a.none = reduction == "none";
  a.mean = reduction == "mean";
  return a;
}

namespace {
template <bool Softmax> void lossKernel(KernelContext &c) {
  c.expectResults(1);
  std::vector<const Buffer *> ops = c.optionalOperands(3);
  if (!ops[0] || !ops[1])
    c.fail("needs input and labels operands");
  const Buffer &x = *ops[0], &labels = *ops[1];
  const Buffer *weight = ops[2];
  Buffer &y = *c.out[0];
  c.expectSameDType(x, y, "result");
  LossArgs args = checkLossArgs(c, x, labels, weight);
  int64_t classes = args.classes, ignore = args.ignore;
  const std::vector<int64_t> &rowShape = args.rowShape;
  bool none = args.none;
  c.expectShape(y, none ? rowShape : std::vector<int64_t>{}, "result");
  int64_t rows = labels.size();
  double total = 0, weightSum = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t label = labels.i[r];
    if (label == ignore) {
      if (none)
        y.f[r] = 0;
      continue;
    }
    if (label < 0 || label >= classes)
      c.fail("label " + std::to_string(label) + " of row " + std::to_string(r) +
                 " is outside [0, " + std::to_string(classes) + ") and is not ignore_index (" +
                 std::to_string(ignore) + ")",
             StatusCode::OutOfRange);
    const double *row = x.f.data() + r * classes;
    double l;
    if (Softmax) {
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < classes; ++j)
        if (row[j] > m || std::isnan(row[j]))
          m = std::isnan(m) ? m : row[j];
      double sum = 0;
      for (int64_t j = 0; j < classes; ++j)
        sum += std::exp(row[j] - m);
      l = m + std::log(sum) - row[label];
    } else {
      l = -row[label];
    }
    double w = weight ? weight->f[label] : 1.0;
    if (none)
      y.f[r] = w * l;
    total += w * l;
    weightSum += w;
  }
  if (args.mean)
    y.f[0] = total / weightSum; // 0 / 0 = NaN when every row is ignored
  else if (!none)               // sum
    y.f[0] = total;
}

} // namespace

void registerLossKernels(KernelTable &t) {
  t["tc.cross_entropy"] = lossKernel<true>;
  t["tc.nll_loss"] = lossKernel<false>;
}

} // namespace tc::rt::cpu
