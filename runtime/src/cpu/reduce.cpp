//===- reduce.cpp - reductions, arg-reductions and cumsum -----------------===//
//
// Reductions accumulate in double (floats) or wrapping int64 (integers).
// Reducing an empty axis gives the identity: sum 0, prod 1, max -inf / the
// type's minimum, min +inf / the type's maximum, mean NaN (0 for integers,
// which have no NaN). max and min propagate NaN.
//
//===----------------------------------------------------------------------===//
#include <cmath>
#include <limits>

#include "runtime/src/cpu/kernel.h"

namespace tc::rt::cpu {

namespace {

enum class Red { Sum, Mean, Max, Min, Prod };

inline int64_t flipSign(int64_t v) {
  return static_cast<int64_t>(static_cast<uint64_t>(v) ^ (uint64_t{1} << 63));
}

/// Split of a shape around one axis: [outer, len, inner].
struct AxisSplit {
  int64_t outer = 1, len = 1, inner = 1;
};
AxisSplit splitAt(const std::vector<int64_t> &shape, int64_t axis) {
  AxisSplit s;
  for (int64_t d = 0; d < (int64_t)shape.size(); ++d) {
    if (d < axis)
      s.outer *= shape[d];
    else if (d == axis)
      s.len = shape[d];
    else
      s.inner *= shape[d];
  }
  return s;
}

template <Red R> void reduceKernel(KernelContext &c) {
  c.expectOperands(1);
  c.expectResults(1);
  const Buffer &x = *c.in[0];
  Buffer &y = *c.out[0];
  c.expectSameDType(x, y, "result");
  int64_t rank = x.rank();
  std::vector<bool> reduced(rank, false);
  const std::vector<int64_t> &axes = c.intsAttr("axes");
  for (int64_t a : axes) {
    int64_t d = a < 0 ? a + rank : a;
    if (d < 0 || d >= rank)
      c.fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
    if (reduced[d])
      c.fail("axis " + std::to_string(a) + " appears twice");
    reduced[d] = true;
  }
  bool keepdims = c.boolAttr("keepdims", false);
  std::vector<int64_t> keptShape, outShape;
  int64_t count = 1;
  for (int64_t d = 0; d < rank; ++d) {
    keptShape.push_back(reduced[d] ? 1 : x.shape()[d]);
    if (reduced[d])
      count *= x.shape()[d];
    if (!reduced[d] || keepdims)
      outShape.push_back(keptShape.back());
  }
  c.expectShape(y, outShape, "result");
  std::array<const std::vector<int64_t> *, 1> shapes{&keptShape};
  DType t = x.dtype();
  if (x.isFloat) {
    double init = R == Red::Prod ? 1.0
                  : R == Red::Max ? -std::numeric_limits<double>::infinity()
                  : R == Red::Min ? std::numeric_limits<double>::infinity()
                                  : 0.0;
    std::fill(y.f.begin(), y.f.end(), init);
    double *acc = y.f.data();
    const double *px = x.f.data();
    broadcastLoop<1>(x.shape(), shapes, [&](int64_t k, const std::array<int64_t, 1> &off) {
      double v = px[k];
      double &a = acc[off[0]];
      if constexpr (R == Red::Sum || R == Red::Mean)
        a += v;
      else if constexpr (R == Red::Prod)
        a *= v;
      else if constexpr (R == Red::Max) {
        if (v > a || std::isnan(v))
          a = std::isnan(a) ? a : v;
      } else {
        if (v < a || std::isnan(v))
          a = std::isnan(a) ? a : v;
      }
    });
    if constexpr (R == Red::Mean)
      for (double &a : y.f)
        a /= static_cast<double>(count);
    return;
  }
  bool u = t == DType::U64;
  int64_t init = R == Red::Prod ? 1
                 : R == Red::Max ? intTypeMin(t)
                 : R == Red::Min ? intTypeMax(t)
                                 : 0;
  std::fill(y.i.begin(), y.i.end(), init);
  broadcastLoop<1>(x.shape(), shapes, [&](int64_t k, const std::array<int64_t, 1> &off) {
    int64_t v = x.i[k];
    int64_t &a = y.i[off[0]];
    if constexpr (R == Red::Sum || R == Red::Mean)
      a = static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(v));
    else if constexpr (R == Red::Prod)
      a = static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(v));
    else if constexpr (R == Red::Max) {
      if (u ? flipSign(v) > flipSign(a) : v > a)
        a = v;
    } else {
      if (u ? flipSign(v) < flipSign(a) : v < a)
        a = v;
    }
  });
  if constexpr (R == Red::Mean) {
    for (int64_t &a : y.i) {
      if (count == 0)
        a = 0;
      else if (u)
        a = static_cast<int64_t>(static_cast<uint64_t>(a) / static_cast<uint64_t>(count));
      else
        a = a / count;
    }
  }
}

template <bool IsMax> void argReduceKernel(KernelContext &c) {
  c.expectOperands(1);
  c.expectResults(1);
  const Buffer &x = *c.in[0];
  Buffer &y = *c.out[0];
  if (y.dtype() != DType::I64)
    c.fail("result must be i64, got " + typeToString(y.type));
  int64_t axis = c.axisAttr("axis", x.rank());
  bool keepdims = c.boolAttr("keepdims", false);
  bool last = c.boolAttr("select_last_index", false);
  std::vector<int64_t> outShape;
  for (int64_t d = 0; d < x.rank(); ++d)
    if (d != axis)
      outShape.push_back(x.shape()[d]);
    else if (keepdims)
      outShape.push_back(1);
  c.expectShape(y, outShape, "result");
  AxisSplit s = splitAt(x.shape(), axis);
  if (s.len == 0 && y.size() > 0)
    c.fail("cannot take the arg" + std::string(IsMax ? "max" : "min") +
           " of an empty axis");
  bool u = x.dtype() == DType::U64;
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t in = 0; in < s.inner; ++in) {
      int64_t base = o * s.len * s.inner + in, best = 0;
      for (int64_t j = 1; j < s.len; ++j) {
        int64_t k = base + j * s.inner, kb = base + best * s.inner;
        bool take;
        if (x.isFloat) {
          double v = x.f[k], b = x.f[kb];
          if (std::isnan(b))
            take = last && std::isnan(v);
          else if (std::isnan(v))
            take = true; // NaN wins, as in torch
          else
            take = (IsMax ? v > b : v < b) || (last && v == b);
        } else {
          int64_t v = u ? flipSign(x.i[k]) : x.i[k], b = u ? flipSign(x.i[kb]) : x.i[kb];
          take = (IsMax ? v > b : v < b) || (last && v == b);
        }
        if (take)
          best = j;
      }
      y.i[o * s.inner + in] = best;
    }
}

void cumsumKernel(KernelContext &c) {
  c.expectOperands(1);
  c.expectResults(1);
  const Buffer &x = *c.in[0];
  Buffer &y = *c.out[0];
  c.expectSameDType(x, y, "result");
  c.expectShape(y, x.shape(), "result");
  int64_t axis = c.axisAttr("axis", x.rank());
  bool exclusive = c.boolAttr("exclusive", false);
  bool reverse = c.boolAttr("reverse", false);
  AxisSplit s = splitAt(x.shape(), axis);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t in = 0; in < s.inner; ++in) {
      int64_t base = o * s.len * s.inner + in;
      double accF = 0;
      uint64_t accI = 0;
      for (int64_t step = 0; step < s.len; ++step) {
        int64_t j = reverse ? s.len - 1 - step : step;
        int64_t k = base + j * s.inner;
        if (x.isFloat) {
          if (exclusive) {
            y.f[k] = accF;
            accF += x.f[k];
          } else {
            accF += x.f[k];
            y.f[k] = accF;
          }
        } else {
          if (exclusive) {
            y.i[k] = static_cast<int64_t>(accI);
            accI += static_cast<uint64_t>(x.i[k]);
          } else {
            accI += static_cast<uint64_t>(x.i[k]);
            y.i[k] = static_cast<int64_t>(accI);
          }
        }
      }
    }
}

} // namespace

void registerReduceKernels(KernelTable &t) {
  t["tc.reduce_sum"] = reduceKernel<Red::Sum>;
  t["tc.reduce_mean"] = reduceKernel<Red::Mean>;
  t["tc.reduce_max"] = reduceKernel<Red::Max>;
  t["tc.reduce_min"] = reduceKernel<Red::Min>;
  t["tc.reduce_prod"] = reduceKernel<Red::Prod>;
  t["tc.argmax"] = argReduceKernel<true>;
  t["tc.argmin"] = argReduceKernel<false>;
  t["tc.cumsum"] = cumsumKernel;
}

} // namespace tc::rt::cpu
