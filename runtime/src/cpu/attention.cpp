//===- attention.cpp - tc.attention and tc.attention_grad -----------------===//
//
// The reference for fused attention: per (batch, head, query row) the scaled
// scores, the causal mask (key j > query i masked, top-left aligned) and the
// padding mask (key_mask[b, j] false), a max-subtracted softmax and the
// weighted sum of values, all in double. A hidden score is -inf, or score +
// mask_fill with a finite mask_fill (an exported additive mask). A row
// whose every key is hidden then attends to all of them with the scores
// (scale * s + mask_fill) - mask_fill, and its lse is that softmax's (the
// row's lse less the fill, which f32 could not hold: finfo.min absorbs it).
// The backward recomputes the probabilities from the saved lse exactly as
// the GPU kernels do: P = exp(scale * s - lse).
//
//===----------------------------------------------------------------------===//
#include <cmath>
#include <limits>

#include "runtime/src/cpu/kernel.h"

namespace tc::rt::cpu {

namespace {

/// Sizes and attributes of one attention op.
struct Dims {
  int64_t b, h, hkv, tq, tk, d, dv;
  double scale;
  bool causal;
  const Buffer *keys = nullptr; ///< [b, tk] key_mask (non-zero = visible) or none
  double fill = -std::numeric_limits<double>::infinity();
};

/// Reads and checks q, k, v (operands 0..2), the key mask (operand
/// `maskOperand` when present) and the scale/causal/mask_fill attributes.
Dims attentionDims(KernelContext &c, size_t maskOperand) {
  const Buffer &q = *c.in[0], &k = *c.in[1], &v = *c.in[2];
  c.expectFloat(q, "query");
  c.expectSameDType(q, k, "key");
  c.expectSameDType(q, v, "value");
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4)
    c.fail("query, key and value must have rank 4 [batch, heads, tokens, dim]");
  Dims d{q.shape()[0], q.shape()[1], k.shape()[1], q.shape()[2],
         k.shape()[2], q.shape()[3], v.shape()[3], c.floatAttr("scale"),
         c.boolAttr("causal", false)};
  if (k.shape()[0] != d.b || v.shape()[0] != d.b || v.shape()[1] != d.hkv ||
      v.shape()[2] != d.tk || k.shape()[3] != d.d)
    c.fail("query, key and value shapes do not match");
  if (d.hkv == 0 || d.h % d.hkv != 0)
    c.fail("query heads must be a multiple of the key/value heads");
  if (c.in.size() > maskOperand) {
    d.keys = c.in[maskOperand];
    if (d.keys->isFloat)
      c.fail("key_mask must be boolean");
    c.expectShape(*d.keys, {d.b, d.tk}, "key_mask");
  }
  d.fill = c.floatAttr("mask_fill", -std::numeric_limits<double>::infinity());
  if (!(d.fill < 0))
    c.fail("mask_fill must be negative");
  return d;
}

/// Scaled, masked scores of query row (b, h, i) into s[tk]; hidden entries
/// are -inf, or score + fill with a finite fill; a row whose every key is
/// hidden (with a finite fill) holds (score + fill) - fill instead.
void scores(const Dims &d, const Buffer &q, const Buffer &k, int64_t b, int64_t h, int64_t i,
            std::vector<double> &s) {
  int64_t hk = h / (d.h / d.hkv);
  const double *qr = q.f.data() + ((b * d.h + h) * d.tq + i) * d.d;
  bool skip = std::isinf(d.fill), anyVisible = false;
  for (int64_t j = 0; j < d.tk; ++j) {
    bool hidden = (d.causal && j > i) || (d.keys && d.keys->i[b * d.tk + j] == 0);
    anyVisible |= !hidden;
    if (hidden && skip) {
      s[j] = -std::numeric_limits<double>::infinity();
      continue;
    }
    const double *kr = k.f.data() + ((b * d.hkv + hk) * d.tk + j) * d.d;
    double acc = 0;
    for (int64_t x = 0; x < d.d; ++x)
      acc += qr[x] * kr[x];
    s[j] = d.scale * acc + (hidden ? d.fill : 0.0);
  }
  if (!anyVisible && !skip)
    for (double &x : s)
      x -= d.fill;
}

void attentionKernel(KernelContext &c) {
  c.expectOperands(3, 4);
  c.expectResults(2);
  Dims d = attentionDims(c, 3);
  const Buffer &q = *c.in[0], &k = *c.in[1], &v = *c.in[2];
  Buffer &o = *c.out[0], &lse = *c.out[1];
  c.expectShape(o, {d.b, d.h, d.tq, d.dv}, "result");
  c.expectShape(lse, {d.b, d.h, d.tq}, "lse");
  std::vector<double> s(static_cast<size_t>(d.tk));
  for (int64_t b = 0; b < d.b; ++b)
    for (int64_t h = 0; h < d.h; ++h) {
      int64_t hk = h / (d.h / d.hkv);
      for (int64_t i = 0; i < d.tq; ++i) {
        scores(d, q, k, b, h, i, s);
        double m = -std::numeric_limits<double>::infinity();
        for (double x : s)
          m = std::max(m, x);
        double sum = 0;
        for (double &x : s) {
          x = std::isinf(m) ? 0.0 : std::exp(x - m);
          sum += x;
        }
        int64_t row = (b * d.h + h) * d.tq + i;
        lse.f[row] = sum > 0 ? m + std::log(sum) : -std::numeric_limits<double>::infinity();
        double *orow = o.f.data() + row * d.dv;
        for (int64_t x = 0; x < d.dv; ++x)
          orow[x] = 0;
        if (sum == 0)
          continue;
        for (int64_t j = 0; j < d.tk; ++j) {
          double p = s[j] / sum;
          if (p == 0)
            continue;
          const double *vr = v.f.data() + ((b * d.hkv + hk) * d.tk + j) * d.dv;
          for (int64_t x = 0; x < d.dv; ++x)
            orow[x] += p * vr[x];
        }
      }
    }
}

void attentionGradKernel(KernelContext &c) {
  c.expectOperands(6, 7);
  c.expectResults(3);
  Dims d = attentionDims(c, 6);
  const Buffer &q = *c.in[0], &k = *c.in[1], &v = *c.in[2];
  const Buffer &o = *c.in[3], &lse = *c.in[4], &g = *c.in[5];
  c.expectShape(o, {d.b, d.h, d.tq, d.dv}, "result operand");
  c.expectShape(lse, {d.b, d.h, d.tq}, "lse");
  c.expectShape(g, {d.b, d.h, d.tq, d.dv}, "grad");
  Buffer &dq = *c.out[0], &dk = *c.out[1], &dv = *c.out[2];
  c.expectShape(dq, q.shape(), "dquery");
  c.expectShape(dk, k.shape(), "dkey");
  c.expectShape(dv, v.shape(), "dvalue");
  std::fill(dq.f.begin(), dq.f.end(), 0.0);
  std::fill(dk.f.begin(), dk.f.end(), 0.0);
  std::fill(dv.f.begin(), dv.f.end(), 0.0);
  std::vector<double> s(static_cast<size_t>(d.tk));
  for (int64_t b = 0; b < d.b; ++b)
    for (int64_t h = 0; h < d.h; ++h) {
      int64_t hk = h / (d.h / d.hkv);
      for (int64_t i = 0; i < d.tq; ++i) {
        int64_t row = (b * d.h + h) * d.tq + i;
        double l = lse.f[row];
        if (std::isinf(l))
          continue; // every key masked: the row contributed nothing
        scores(d, q, k, b, h, i, s);
        const double *orow = o.f.data() + row * d.dv;
        const double *grow = g.f.data() + row * d.dv;
        const double *qrow = q.f.data() + row * d.d;
        double *dqrow = dq.f.data() + row * d.d;
        double rowDot = 0; // rowsum(grad * result)
        for (int64_t x = 0; x < d.dv; ++x)
          rowDot += grow[x] * orow[x];
        for (int64_t j = 0; j < d.tk; ++j) {
          if (std::isinf(s[j]))
            continue;
          double p = std::exp(s[j] - l);
          int64_t kvRow = (b * d.hkv + hk) * d.tk + j;
          const double *vr = v.f.data() + kvRow * d.dv;
          const double *kr = k.f.data() + kvRow * d.d;
          double *dvr = dv.f.data() + kvRow * d.dv;
          double *dkr = dk.f.data() + kvRow * d.d;
          double dp = 0;
          for (int64_t x = 0; x < d.dv; ++x) {
            dp += grow[x] * vr[x];
            dvr[x] += p * grow[x];
          }
          double ds = p * (dp - rowDot) * d.scale;
          for (int64_t x = 0; x < d.d; ++x) {
            dqrow[x] += ds * kr[x];
            dkr[x] += ds * qrow[x];
          }
        }
      }
    }
}

} // namespace

void registerAttentionKernels(KernelTable &t) {
  t["tc.attention"] = attentionKernel;
  t["tc.attention_grad"] = attentionGradKernel;
}

} // namespace tc::rt::cpu
