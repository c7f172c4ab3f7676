//===- norm.cpp - softmax, log_softmax, layer_norm, rms_norm --------------===//
//
// All statistics accumulate in double; softmax subtracts the row maximum.
//
//===----------------------------------------------------------------------===//
#include <cmath>
#include <limits>
#include <utility>

#include "runtime/src/cpu/kernel.h"

namespace tc::rt::cpu {

namespace {

template <bool Log> void softmaxKernel(KernelContext &c) {
  c.expectOperands(1);
  c.expectResults(1);
  const Buffer &x = *c.in[0];
  Buffer &y = *c.out[0];
  c.expectFloat(x, "input");
  c.expectSameDType(x, y, "result");
  c.expectShape(y, x.shape(), "result");
  int64_t axis = c.axisAttr("axis", x.rank());
  int64_t outer = 1, len = x.shape()[axis], inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.shape()[d];
  for (int64_t d = axis + 1; d < x.rank(); ++d)
    inner *= x.shape()[d];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      int64_t base = o * len * inner + in;
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < len; ++j) {
        double v = x.f[base + j * inner];
        if (v > m || std::isnan(v))
          m = std::isnan(m) ? m : v;
      }
      double sum = 0;
      for (int64_t j = 0; j < len; ++j)
        sum += std::exp(x.f[base + j * inner] - m);
      double logSum = std::log(sum);
      for (int64_t j = 0; j < len; ++j) {
        int64_t k = base + j * inner;
        y.f[k] = Log ? x.f[k] - m - logSum : std::exp(x.f[k] - m) / sum;
      }
    }
}

/// Checks an optional scale/bias operand against the normalised shape.
void checkAffine(KernelContext &c, const Buffer *p, const Buffer &x, int64_t axis,
                 const char *what) {
  if (!p)
    return;
  // The parameters may be stored wider than x (bf16 rows, f32 weights).
  c.expectFloat(*p, what);
  std::vector<int64_t> want(x.shape().begin() + axis, x.shape().end());
  c.expectShape(*p, want, what);
}

/// A row's mean (0 for rms_norm) and sqrt(mean((x - mean)^2) + eps), in
/// double: what the norms and their gradients divide by.
std::pair<double, double> rowStats(const double *px, int64_t n, double eps, bool rms) {
  double mean = 0, ss = 0;
  if (!rms) {
    for (int64_t j = 0; j < n; ++j)
      mean += px[j];
    mean /= static_cast<double>(n);
  }
  for (int64_t j = 0; j < n; ++j)
    ss += (px[j] - mean) * (px[j] - mean);
  return {mean, std::sqrt(ss / static_cast<double>(n) + eps)};
}

template <bool Rms> void normKernel(KernelContext &c) {
  c.expectResults(1);
  std::vector<const Buffer *> ops = c.optionalOperands(Rms ? 2 : 3);
  if (!ops[0])
    c.fail("needs an input operand");
  const Buffer &x = *ops[0];
  const Buffer *scale = ops[1];
  const Buffer *bias = Rms ? nullptr : ops[2];
  Buffer &y = *c.out[0];
  c.expectFloat(x, "input");
  c.expectSameDType(x, y, "result");
  c.expectShape(y, x.shape(), "result");
  int64_t axis = c.axisAttr("axis", x.rank());
  double eps = c.floatAttr("epsilon");
  checkAffine(c, scale, x, axis, "scale");
  checkAffine(c, bias, x, axis, "bias");
  int64_t rows = 1, n = 1;
  for (int64_t d = 0; d < x.rank(); ++d)
    (d < axis ? rows : n) *= x.shape()[d];
  for (int64_t r = 0; r < rows; ++r) {
    const double *px = x.f.data() + r * n;
    double *py = y.f.data() + r * n;
    auto [mean, denom] = rowStats(px, n, eps, Rms);
    for (int64_t j = 0; j < n; ++j) {
      double v = (px[j] - mean) / denom;
      if (scale)
        v *= scale->f[j];
      if (bias)
        v += bias->f[j];
      py[j] = v;
    }
  }
}

/// tc.layer_norm_grad / tc.rms_norm_grad: per row (statistics recomputed
/// in double) xhat, gs = grad * scale, dx = rstd * (gs - mean(gs) -
/// xhat * mean(gs * xhat)) (rms: no mean(gs) term, xhat = x * rstd);
/// dscale = sum over rows of grad * xhat, dbias = sum of grad.
template <bool Rms> void normGradKernel(KernelContext &c) {
  c.expectResults(Rms ? 2 : 3);
  std::vector<const Buffer *> ops = c.optionalOperands(3);
  if (!ops[0] || !ops[1])
    c.fail("needs input and grad operands");
  const Buffer &x = *ops[0], &g = *ops[1];
  const Buffer *scale = ops[2];
  c.expectFloat(x, "input");
  c.expectSameDType(x, g, "grad");
  c.expectShape(g, x.shape(), "grad");
  int64_t axis = c.axisAttr("axis", x.rank());
  double eps = c.floatAttr("epsilon");
  checkAffine(c, scale, x, axis, "scale");
  Buffer &dx = *c.out[0], &dscale = *c.out[1];
  Buffer *dbias = Rms ? nullptr : c.out[2];
  c.expectShape(dx, x.shape(), "dinput");
  int64_t rows = 1, n = 1;
  for (int64_t d = 0; d < x.rank(); ++d)
    (d < axis ? rows : n) *= x.shape()[d];
  std::fill(dscale.f.begin(), dscale.f.end(), 0.0);
  if (dbias)
    std::fill(dbias->f.begin(), dbias->f.end(), 0.0);
  std::vector<double> xhat(static_cast<size_t>(n)), gs(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    const double *px = x.f.data() + r * n, *pg = g.f.data() + r * n;
    auto [mean, denom] = rowStats(px, n, eps, Rms);
    double rstd = 1.0 / denom;
    double m1 = 0, m2 = 0;
    for (int64_t j = 0; j < n; ++j) {
      xhat[j] = (px[j] - mean) * rstd;
      gs[j] = scale ? pg[j] * scale->f[j] : pg[j];
      m1 += gs[j];
      m2 += gs[j] * xhat[j];
      dscale.f[j] += pg[j] * xhat[j];
      if (dbias)
        dbias->f[j] += pg[j];
    }
    m1 /= static_cast<double>(n);
    m2 /= static_cast<double>(n);
    double *pdx = dx.f.data() + r * n;
    for (int64_t j = 0; j < n; ++j)
      pdx[j] = rstd * (gs[j] - (Rms ? 0.0 : m1) - xhat[j] * m2);
  }
}

} // namespace

void registerNormKernels(KernelTable &t) {
  t["tc.layer_norm_grad"] = normGradKernel<false>;
  t["tc.rms_norm_grad"] = normGradKernel<true>;
  t["tc.softmax"] = softmaxKernel<false>;
  t["tc.log_softmax"] = softmaxKernel<true>;
  t["tc.layer_norm"] = normKernel<false>;
  t["tc.rms_norm"] = normKernel<true>;
}

} // namespace tc::rt::cpu
