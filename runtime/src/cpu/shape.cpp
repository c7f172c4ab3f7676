//===- shape.cpp - reshape, transpose, broadcast, slice, concat, split, pad,
//                 gather ---------------------------------------------------===//
//
// Data movement only: every kernel works on doubles or int64 alike, and
// checks the declared result shapes so that a bad program cannot index out
// of bounds.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cstdint>

#include "runtime/src/cpu/kernel.h"

namespace tc::rt::cpu {

namespace {

/// Calls f(src, dst) with the element vectors of `x` and `y` (same kind).
template <typename F> void withElements(const Buffer &x, Buffer &y, F f) {
  if (x.isFloat)
    f(x.f, y.f);
  else
    f(x.i, y.i);
}

/// out[o] = in[base + sum_d idx[d] * strides[d]] over outShape, row-major.
template <typename T>
void stridedGather(const std::vector<int64_t> &outShape,
                   const std::vector<int64_t> &strides, int64_t base,
                   const std::vector<T> &in, std::vector<T> &out) {
  int64_t total = 1;
  for (int64_t d : outShape)
    total *= d;
  if (total == 0)
    return;
  size_t r = outShape.size();
  if (r == 0) {
    out[0] = in[base];
    return;
  }
  std::vector<int64_t> idx(r, 0);
  int64_t inner = outShape[r - 1], innerStride = strides[r - 1];
  int64_t off = base;
  for (int64_t o = 0; o < total; o += inner) {
    int64_t p = off;
    for (int64_t j = 0; j < inner; ++j, p += innerStride)
      out[o + j] = in[p];
    for (size_t d = r - 1; d-- > 0;) {
      ++idx[d];
      off += strides[d];
      if (idx[d] < outShape[d])
        break;
      off -= strides[d] * outShape[d];
      idx[d] = 0;
    }
  }
}

void expectSameElementType(KernelContext &c, const Buffer &x, const Buffer &y) {
  c.expectSameDType(x, y, "result");
}

void reshapeKernel(KernelContext &c) {
  c.expectOperands(1);
  c.expectResults(1);
  const Buffer &x = *c.in[0];
  Buffer &y = *c.out[0];
  expectSameElementType(c, x, y);
  if (x.size() != y.size())
    c.fail("input " + shapeToString(x.shape()) + " has " + std::to_string(x.size()) +
           " elements, result " + shapeToString(y.shape()) + " has " +
           std::to_string(y.size()));
  withElements(x, y, [](const auto &src, auto &dst) { dst = src; });
}

void transposeKernel(KernelContext &c) {
  c.expectOperands(1);
  c.expectResults(1);
  const Buffer &x = *c.in[0];
  Buffer &y = *c.out[0];
  expectSameElementType(c, x, y);
  const std::vector<int64_t> &perm = c.intsAttr("permutation");
  int64_t r = x.rank();
  if ((int64_t)perm.size() != r)
    c.fail("permutation has " + std::to_string(perm.size()) + " entries for rank " +
           std::to_string(r));
  std::vector<bool> seen(r, false);
  std::vector<int64_t> outShape, strides;
  std::vector<int64_t> inStrides = rowMajorStrides(x.shape());
  for (int64_t p : perm) {
    if (p < 0 || p >= r || seen[p])
      c.fail("permutation is not a permutation of [0, rank)");
    seen[p] = true;
    outShape.push_back(x.shape()[p]);
    strides.push_back(inStrides[p]);
  }
  c.expectShape(y, outShape, "result");
  withElements(x, y, [&](const auto &src, auto &dst) {
    stridedGather(outShape, strides, 0, src, dst);
  });
}

void broadcastKernel(KernelContext &c) {
  c.expectOperands(1);
  c.expectResults(1);
  const Buffer &x = *c.in[0];
  Buffer &y = *c.out[0];
  expectSameElementType(c, x, y);
  if (x.rank() > y.rank() || broadcastShape(c, {x.shape(), y.shape()}) != y.shape())
    c.fail("cannot broadcast " + shapeToString(x.shape()) + " to " +
           shapeToString(y.shape()));
  std::vector<int64_t> strides(y.rank(), 0);
  std::vector<int64_t> inStrides = rowMajorStrides(x.shape());
  for (int64_t d = 0; d < x.rank(); ++d) {
    int64_t od = d + (y.rank() - x.rank());
    strides[od] = x.shape()[d] == 1 ? 0 : inStrides[d];
  }
  withElements(x, y, [&](const auto &src, auto &dst) {
    stridedGather(y.shape(), strides, 0, src, dst);
  });
}

void sliceKernel(KernelContext &c) {
  c.expectOperands(1);
  c.expectResults(1);
  const Buffer &x = *c.in[0];
  Buffer &y = *c.out[0];
  expectSameElementType(c, x, y);
  const std::vector<int64_t> &starts = c.intsAttr("starts");
  const std::vector<int64_t> &steps = c.intsAttr("strides");
  int64_t r = x.rank();
  if (y.rank() != r || (int64_t)starts.size() != r || (int64_t)steps.size() != r)
    c.fail("input rank " + std::to_string(r) + ", result rank " + std::to_string(y.rank()) +
           ", " + std::to_string(starts.size()) + " starts and " +
           std::to_string(steps.size()) + " strides must all agree");
  std::vector<int64_t> inStrides = rowMajorStrides(x.shape());
  std::vector<int64_t> strides(r);
  int64_t base = 0;
  bool empty = y.size() == 0;
  for (int64_t d = 0; d < r; ++d) {
    int64_t s = starts[d], st = steps[d], n = y.shape()[d], dim = x.shape()[d];
    if (st == 0)
      c.fail("stride of dimension " + std::to_string(d) + " is 0");
    if (!empty) {
      // Overflow-safe check of the last index touched.
      bool ok = s >= 0 && s < dim;
      if (ok && n > 1) {
        __int128 last = (__int128)s + (__int128)(n - 1) * st;
        ok = last >= 0 && last < dim;
      }
      if (!ok)
        c.fail("dimension " + std::to_string(d) + ": start " + std::to_string(s) +
               ", stride " + std::to_string(st) + ", size " + std::to_string(n) +
               " leave the input extent " + std::to_string(dim));
      base += s * inStrides[d];
    }
    strides[d] = st * inStrides[d];
  }
  if (empty)
    return;
  withElements(x, y, [&](const auto &src, auto &dst) {
    stridedGather(y.shape(), strides, base, src, dst);
  });
}

/// [outer, axis extent, inner] views for concat, split and gather. A shape
/// with no elements has 0 of both (nothing to copy; its other extents may be
/// as large as int64 goes, and their product would overflow); otherwise the
/// products are at most the element count.
int64_t outerOf(const std::vector<int64_t> &s, int64_t axis) {
  if (std::find(s.begin(), s.end(), 0) != s.end())
    return 0;
  int64_t o = 1;
  for (int64_t d = 0; d < axis; ++d)
    o *= s[d];
  return o;
}
int64_t innerOf(const std::vector<int64_t> &s, int64_t axis) {
  if (std::find(s.begin(), s.end(), 0) != s.end())
    return 0;
  int64_t o = 1;
  for (int64_t d = axis + 1; d < (int64_t)s.size(); ++d)
    o *= s[d];
  return o;
}

/// The sum of the parts' extents along `axis`; a failure naming `what` when
/// it leaves int64.
int64_t sumAlongAxis(KernelContext &c, const std::vector<const Buffer *> &parts, int64_t axis,
                     const char *what) {
  int64_t total = 0;
  for (const Buffer *b : parts)
    if (__builtin_add_overflow(total, b->shape()[axis], &total))
      c.fail(std::string(what) + " extents along axis " + std::to_string(axis) +
             " add up to more than int64 holds");
  return total;
}

/// Checks that `part` equals `whole` outside `axis`.
void expectSameOutsideAxis(KernelContext &c, const Buffer &part, const Buffer &whole,
                           int64_t axis, const std::string &what) {
  c.expectSameDType(part, whole, what.c_str());
  bool ok = part.rank() == whole.rank();
  for (int64_t d = 0; ok && d < part.rank(); ++d)
    ok = d == axis || part.shape()[d] == whole.shape()[d];
  if (!ok)
    c.fail(what + " shape " + shapeToString(part.shape()) + " differs from " +
           shapeToString(whole.shape()) + " outside axis " + std::to_string(axis));
}

void concatKernel(KernelContext &c) {
  c.expectOperands(1, SIZE_MAX);
  c.expectResults(1);
  Buffer &y = *c.out[0];
  int64_t axis = c.axisAttr("axis", y.rank());
  for (size_t k = 0; k < c.in.size(); ++k)
    expectSameOutsideAxis(c, *c.in[k], y, axis, "input #" + std::to_string(k));
  int64_t total = sumAlongAxis(c, {c.in.begin(), c.in.end()}, axis, "the inputs'");
  if (total != y.shape()[axis])
    c.fail("inputs add up to " + std::to_string(total) + " along axis " +
           std::to_string(axis) + ", result has " + std::to_string(y.shape()[axis]));
  int64_t outer = outerOf(y.shape(), axis), inner = innerOf(y.shape(), axis);
  int64_t rowOut = y.shape()[axis] * inner, at = 0;
  for (const Buffer *x : c.in) {
    int64_t row = x->shape()[axis] * inner;
    withElements(*x, y, [&](const auto &src, auto &dst) {
      for (int64_t o = 0; o < outer; ++o)
        std::copy(src.begin() + o * row, src.begin() + (o + 1) * row,
                  dst.begin() + o * rowOut + at);
    });
    at += row;
  }
}

void splitKernel(KernelContext &c) {
  c.expectOperands(1);
  if (c.out.empty())
    c.fail("needs at least one result");
  const Buffer &x = *c.in[0];
  int64_t axis = c.axisAttr("axis", x.rank());
  for (size_t k = 0; k < c.out.size(); ++k)
    expectSameOutsideAxis(c, *c.out[k], x, axis, "result #" + std::to_string(k));
  int64_t total = sumAlongAxis(c, {c.out.begin(), c.out.end()}, axis, "the results'");
  if (total != x.shape()[axis])
    c.fail("result sizes along axis " + std::to_string(axis) + " add up to " +
           std::to_string(total) + ", input has " + std::to_string(x.shape()[axis]));
  int64_t outer = outerOf(x.shape(), axis), inner = innerOf(x.shape(), axis);
  int64_t rowIn = x.shape()[axis] * inner, at = 0;
  for (Buffer *y : c.out) {
    int64_t row = y->shape()[axis] * inner;
    withElements(x, *y, [&](const auto &src, auto &dst) {
      for (int64_t o = 0; o < outer; ++o)
        std::copy(src.begin() + o * rowIn + at, src.begin() + o * rowIn + at + row,
                  dst.begin() + o * row);
    });
    at += row;
  }
}

void padKernel(KernelContext &c) {
  c.expectOperands(1);
  c.expectResults(1);
  const Buffer &x = *c.in[0];
  Buffer &y = *c.out[0];
  expectSameElementType(c, x, y);
  const std::vector<int64_t> &low = c.intsAttr("low");
  const std::vector<int64_t> &high = c.intsAttr("high");
  std::string mode = c.strAttr("mode", "constant");
  double value = c.floatAttr("value", 0.0);
  int64_t r = x.rank();
  if ((int64_t)low.size() != r || (int64_t)high.size() != r)
    c.fail("needs one low and one high pad per dimension");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    c.fail("mode must be constant, reflect or edge, got \"" + mode + "\"");
  std::vector<int64_t> outShape;
  for (int64_t d = 0; d < r; ++d) {
    if (low[d] < 0 || high[d] < 0)
      c.fail("pads must be non-negative");
    if (mode != "constant" && x.shape()[d] == 0 && (low[d] || high[d]))
      c.fail(mode + " pad of an empty dimension");
    outShape.push_back(x.shape()[d] + low[d] + high[d]);
  }
  c.expectShape(y, outShape, "result");
  // Per dimension: output index -> input index, or -1 for the constant.
  std::vector<std::vector<int64_t>> map(r);
  for (int64_t d = 0; d < r; ++d) {
    int64_t n = x.shape()[d];
    map[d].resize(outShape[d]);
    for (int64_t o = 0; o < outShape[d]; ++o) {
      int64_t i = o - low[d];
      if (i < 0 || i >= n) {
        if (mode == "constant") {
          i = -1;
        } else if (mode == "edge") {
          i = i < 0 ? 0 : n - 1;
        } else if (n == 1) {
          i = 0;
        } else {
          int64_t period = 2 * (n - 1); // reflect without repeating the edge
          i = ((i % period) + period) % period;
          if (i >= n)
            i = period - i;
        }
      }
      map[d][o] = i;
    }
  }
  std::vector<int64_t> inStrides = rowMajorStrides(x.shape());
  std::vector<int64_t> idx(r, 0);
  int64_t fillInt = floatToIntOf(value, y.dtype());
  for (int64_t o = 0, total = y.size(); o < total; ++o) {
    int64_t off = 0;
    bool inside = true;
    for (int64_t d = 0; d < r; ++d) {
      int64_t i = map[d][idx[d]];
      if (i < 0) {
        inside = false;
        break;
      }
      off += i * inStrides[d];
    }
    if (y.isFloat)
      y.f[o] = inside ? x.f[off] : value;
    else
      y.i[o] = inside ? x.i[off] : fillInt;
    for (int64_t d = r - 1; d >= 0; --d) {
      if (++idx[d] < outShape[d])
        break;
      idx[d] = 0;
    }
  }
}

void gatherKernel(KernelContext &c) {
  c.expectOperands(2);
  c.expectResults(1);
  const Buffer &data = *c.in[0], &indices = *c.in[1];
  Buffer &y = *c.out[0];
  expectSameElementType(c, data, y);
  c.expectInteger(indices, "indices");
  int64_t axis = c.axisAttr("axis", data.rank());
  std::vector<int64_t> outShape(data.shape().begin(), data.shape().begin() + axis);
  outShape.insert(outShape.end(), indices.shape().begin(), indices.shape().end());
  outShape.insert(outShape.end(), data.shape().begin() + axis + 1, data.shape().end());
  c.expectShape(y, outShape, "result");
  int64_t outer = outerOf(data.shape(), axis), inner = innerOf(data.shape(), axis);
  int64_t len = data.shape()[axis], count = indices.size();
  std::vector<int64_t> idx = normalizeIndices(c, indices, axis, len);
  withElements(data, y, [&](const auto &src, auto &dst) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < count; ++j)
        std::copy(src.begin() + (o * len + idx[j]) * inner,
                  src.begin() + (o * len + idx[j] + 1) * inner,
                  dst.begin() + (o * count + j) * inner);
  });
}

} // namespace

void registerShapeKernels(KernelTable &t) {
  t["tc.reshape"] = reshapeKernel;
  t["tc.transpose"] = transposeKernel;
  t["tc.broadcast"] = broadcastKernel;
  t["tc.slice"] = sliceKernel;
  t["tc.concat"] = concatKernel;
  t["tc.split"] = splitKernel;
  t["tc.pad"] = padKernel;
  t["tc.gather"] = gatherKernel;
}

} // namespace tc::rt::cpu
