//===- grad.cpp - gradient-support ops: scatter_add, insert_slice,
//                cross_entropy_grad, nll_loss_grad ------------------------===//
//
// The ops tc-autodiff emits where the backward of a forward op is not a
// composition of forward ops: the transposes of gather and slice (zeros plus
// accumulated/placed values) and the fused loss derivatives (softmax minus
// one-hot, computed in double from the logits, never through log/exp of the
// forward's rounded outputs).
//
//===----------------------------------------------------------------------===//
#include <cmath>
#include <limits>

#include "runtime/src/cpu/kernel.h"

namespace tc::rt::cpu {

namespace {

/// updates [outer..., indices..., inner...] summed into zeros [outer, len, inner].
void scatterAddKernel(KernelContext &c) {
  c.expectOperands(2);
  c.expectResults(1);
  const Buffer &upd = *c.in[0], &indices = *c.in[1];
  Buffer &y = *c.out[0];
  c.expectSameDType(upd, y, "updates");
  c.expectInteger(indices, "indices");
  int64_t axis = c.axisAttr("axis", y.rank());
  std::vector<int64_t> updShape(y.shape().begin(), y.shape().begin() + axis);
  updShape.insert(updShape.end(), indices.shape().begin(), indices.shape().end());
  updShape.insert(updShape.end(), y.shape().begin() + axis + 1, y.shape().end());
  c.expectShape(upd, updShape, "updates");
  int64_t outer = 1, inner = 1, len = y.shape()[axis], count = indices.size();
  for (int64_t d = 0; d < axis; ++d)
    outer *= y.shape()[d];
  for (int64_t d = axis + 1; d < y.rank(); ++d)
    inner *= y.shape()[d];
  std::vector<int64_t> idx = normalizeIndices(c, indices, axis, len);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < count; ++j) {
      int64_t src = (o * count + j) * inner, dst = (o * len + idx[j]) * inner;
      if (y.isFloat)
        for (int64_t k = 0; k < inner; ++k)
          y.f[dst + k] += upd.f[src + k];
      else
        for (int64_t k = 0; k < inner; ++k)
          y.i[dst + k] = static_cast<int64_t>(static_cast<uint64_t>(y.i[dst + k]) +
                                              static_cast<uint64_t>(upd.i[src + k]));
    }
}

/// result = zeros; result[starts + i * strides] = source[i].
void insertSliceKernel(KernelContext &c) {
  c.expectOperands(1);
  c.expectResults(1);
  const Buffer &x = *c.in[0];
  Buffer &y = *c.out[0];
  c.expectSameDType(x, y, "result");
  const std::vector<int64_t> &starts = c.intsAttr("starts");
  const std::vector<int64_t> &steps = c.intsAttr("strides");
  int64_t r = y.rank();
  if (x.rank() != r || (int64_t)starts.size() != r || (int64_t)steps.size() != r)
    c.fail("source rank " + std::to_string(x.rank()) + ", result rank " +
           std::to_string(r) + ", " + std::to_string(starts.size()) + " starts and " +
           std::to_string(steps.size()) + " strides must all agree");
  if (x.size() == 0)
    return;
  std::vector<int64_t> outStrides = rowMajorStrides(y.shape());
  std::vector<int64_t> strides(r);
  int64_t base = 0;
  for (int64_t d = 0; d < r; ++d) {
    int64_t s = starts[d], st = steps[d], n = x.shape()[d], dim = y.shape()[d];
    if (st == 0)
      c.fail("stride of dimension " + std::to_string(d) + " is 0");
    bool ok = s >= 0 && s < dim;
    if (ok && n > 1) {
      __int128 last = (__int128)s + (__int128)(n - 1) * st;
      ok = last >= 0 && last < dim;
    }
    if (!ok)
      c.fail("dimension " + std::to_string(d) + ": start " + std::to_string(s) +
             ", stride " + std::to_string(st) + ", size " + std::to_string(n) +
             " leave the result extent " + std::to_string(dim));
    base += s * outStrides[d];
    strides[d] = st * outStrides[d];
  }
  std::vector<int64_t> idx(r, 0);
  for (int64_t k = 0, total = x.size(); k < total; ++k) {
    int64_t off = base;
    for (int64_t d = 0; d < r; ++d)
      off += idx[d] * strides[d];
    if (y.isFloat)
      y.f[off] = x.f[k];
    else
      y.i[off] = x.i[k];
    for (int64_t d = r - 1; d >= 0; --d) {
      if (++idx[d] < x.shape()[d])
        break;
      idx[d] = 0;
    }
  }
}

/// d(loss)/d(input) of cross_entropy (Softmax) or nll_loss, times `grad`.
template <bool Softmax> void lossGradKernel(KernelContext &c) {
  c.expectResults(1);
  std::vector<const Buffer *> ops = c.optionalOperands(4);
  if (!ops[0] || !ops[1] || !ops[2])
    c.fail("needs input, labels and grad operands");
  const Buffer &x = *ops[0], &labels = *ops[1], &g = *ops[2];
  const Buffer *weight = ops[3];
  Buffer &y = *c.out[0];
  LossArgs args = checkLossArgs(c, x, labels, weight);
  int64_t classes = args.classes, ignore = args.ignore;
  const std::vector<int64_t> &rowShape = args.rowShape;
  bool none = args.none;
  c.expectFloat(g, "grad");
  c.expectSameDType(x, y, "result");
  c.expectShape(y, x.shape(), "result");
  c.expectShape(g, none ? rowShape : std::vector<int64_t>{}, "grad");
  int64_t rows = labels.size();
  double weightSum = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t label = labels.i[r];
    if (label == ignore)
      continue;
    if (label < 0 || label >= classes)
      c.fail("label " + std::to_string(label) + " of row " + std::to_string(r) +
                 " is outside [0, " + std::to_string(classes) +
                 ") and is not ignore_index (" + std::to_string(ignore) + ")",
             StatusCode::OutOfRange);
    weightSum += weight ? weight->f[label] : 1.0;
  }
  for (int64_t r = 0; r < rows; ++r) {
    int64_t label = labels.i[r];
    double *dy = y.f.data() + r * classes; // already zero
    if (label == ignore)
      continue;
    double coef = (none ? g.f[r] : g.f[0]) * (weight ? weight->f[label] : 1.0);
    if (args.mean)
      coef /= weightSum;
    if (Softmax) {
      const double *row = x.f.data() + r * classes;
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < classes; ++j)
        if (row[j] > m || std::isnan(row[j]))
          m = std::isnan(m) ? m : row[j];
      double sum = 0;
      for (int64_t j = 0; j < classes; ++j)
        sum += std::exp(row[j] - m);
      for (int64_t j = 0; j < classes; ++j)
        dy[j] = coef * std::exp(row[j] - m) / sum;
    }
    dy[label] -= coef;
  }
}

} // namespace

void registerGradKernels(KernelTable &t) {
  t["tc.scatter_add"] = scatterAddKernel;
  t["tc.insert_slice"] = insertSliceKernel;
  t["tc.cross_entropy_grad"] = lossGradKernel<true>;
  t["tc.nll_loss_grad"] = lossGradKernel<false>;
}

} // namespace tc::rt::cpu
