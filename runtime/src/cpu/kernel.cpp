//===- kernel.cpp - helpers shared by the CPU reference kernels -----------===//
#include "runtime/src/cpu/kernel.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace tc::rt::cpu {

Buffer makeBuffer(const TensorType &type) {
  Buffer b;
  b.type = type;
  b.isFloat = dtypeIsFloat(type.dtype);
  int64_t n = type.numElements();
  if (b.isFloat)
    b.f.assign(n, 0.0);
  else
    b.i.assign(n, 0);
  return b;
}

void KernelContext::expectOperands(size_t lo, size_t hi) const {
  size_t n = in.size();
  if (n < lo || n > hi)
    fail("expects " +
         (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)) +
         " operands, got " + std::to_string(n));
}

void KernelContext::expectResults(size_t n) const {
  if (out.size() != n)
    fail("expects " + std::to_string(n) + " results, got " + std::to_string(out.size()));
}

const Attr *KernelContext::findAttr(const char *name) const {
  auto it = op.attrs.find(name);
  return it == op.attrs.end() ? nullptr : &it->second;
}

int64_t KernelContext::intAttr(const char *name) const {
  const Attr *a = findAttr(name);
  if (!a)
    fail(std::string("missing attribute '") + name + "'");
  if (a->kind != Attr::Kind::Int)
    fail(std::string("attribute '") + name + "' must be an integer");
  return a->i;
}

int64_t KernelContext::intAttr(const char *name, int64_t dflt) const {
  return findAttr(name) ? intAttr(name) : dflt;
}

double KernelContext::floatAttr(const char *name) const {
  const Attr *a = findAttr(name);
  if (!a)
    fail(std::string("missing attribute '") + name + "'");
  if (a->kind == Attr::Kind::Float)
    return a->f;
  if (a->kind == Attr::Kind::Int)
    return static_cast<double>(a->i);
  fail(std::string("attribute '") + name + "' must be a float");
}

double KernelContext::floatAttr(const char *name, double dflt) const {
  return findAttr(name) ? floatAttr(name) : dflt;
}

std::string KernelContext::strAttr(const char *name, const std::string &dflt) const {
  const Attr *a = findAttr(name);
  if (!a)
    return dflt;
  if (a->kind != Attr::Kind::String)
    fail(std::string("attribute '") + name + "' must be a string");
  return a->s;
}

const std::vector<int64_t> &KernelContext::intsAttr(const char *name) const {
  const Attr *a = findAttr(name);
  if (!a)
    fail(std::string("missing attribute '") + name + "'");
  if (a->kind != Attr::Kind::Ints)
    fail(std::string("attribute '") + name + "' must be an array of integers");
  return a->ints;
}

std::vector<const Buffer *> KernelContext::optionalOperands(size_t odsCount) const {
  std::vector<const Buffer *> result(odsCount, nullptr);
  const Attr *a = findAttr("operand_present");
  if (!a) {
    // Without the attribute, operands fill the ODS slots in order.
    if (in.size() > odsCount)
      fail("expects at most " + std::to_string(odsCount) + " operands, got " +
           std::to_string(in.size()));
    for (size_t k = 0; k < in.size(); ++k)
      result[k] = in[k];
    return result;
  }
  if (a->kind != Attr::Kind::Ints || a->ints.size() != odsCount)
    fail("attribute 'operand_present' must list " + std::to_string(odsCount) +
         " flags");
  size_t next = 0;
  for (size_t k = 0; k < odsCount; ++k) {
    if (!a->ints[k])
      continue;
    if (next >= in.size())
      fail("'operand_present' announces more operands than the op has (" +
           std::to_string(in.size()) + ")");
    result[k] = in[next++];
  }
  if (next != in.size())
    fail("'operand_present' announces " + std::to_string(next) +
         " operands, the op has " + std::to_string(in.size()));
  return result;
}

int64_t KernelContext::axisAttr(const char *name, int64_t rank) const {
  int64_t axis = intAttr(name);
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    fail(std::string(name) + " " + std::to_string(axis) + " is out of range for rank " +
         std::to_string(rank));
  return a;
}

void KernelContext::expectFloat(const Buffer &b, const char *what) const {
  if (!b.isFloat)
    fail(std::string(what) + " must be a float tensor, got " + typeToString(b.type));
}

void KernelContext::expectInteger(const Buffer &b, const char *what) const {
  if (b.isFloat)
    fail(std::string(what) + " must be an integer tensor, got " + typeToString(b.type));
}

void KernelContext::expectSameDType(const Buffer &a, const Buffer &b,
                                    const char *what) const {
  if (a.dtype() != b.dtype())
    fail(std::string(what) + ": element types differ: " + dtypeName(a.dtype()) +
         " vs " + dtypeName(b.dtype()));
}

void KernelContext::expectShape(const Buffer &b, const std::vector<int64_t> &shape,
                                const char *what) const {
  if (b.shape() != shape)
    fail(std::string(what) + " has shape " + shapeToString(b.shape()) + ", expected " +
         shapeToString(shape));
}

std::string KernelContext::resultName(size_t k) const {
  return k < op.results.size() ? "%" + std::to_string(op.results[k]) : "%?";
}

std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    s[d - 1] = s[d] * shape[d];
  return s;
}

std::vector<int64_t> broadcastShape(const KernelContext &ctx,
                                    const std::vector<std::vector<int64_t>> &shapes) {
  size_t r = 0;
  for (const auto &s : shapes)
    r = std::max(r, s.size());
  std::vector<int64_t> out(r, 1);
  for (const auto &s : shapes) {
    for (size_t d = 0; d < s.size(); ++d) {
      size_t od = d + (r - s.size());
      if (s[d] == out[od] || s[d] == 1)
        continue;
      if (out[od] == 1) {
        out[od] = s[d];
        continue;
      }
      std::string all;
      for (const auto &x : shapes)
        all += (all.empty() ? "" : " vs ") + shapeToString(x);
      ctx.fail("operand shapes do not broadcast: " + all);
    }
  }
  return out;
}

int64_t wrapInt(int64_t v, DType t) {
  switch (t) {
  case DType::I1: return v & 1;
  case DType::I8: return static_cast<int8_t>(v);
  case DType::I16: return static_cast<int16_t>(v);
  case DType::I32: return static_cast<int32_t>(v);
  case DType::U8: return static_cast<uint8_t>(v);
  case DType::U16: return static_cast<uint16_t>(v);
  case DType::U32: return static_cast<uint32_t>(v);
  default: return v;
  }
}

int64_t floatToIntOf(double v, DType t) {
  if (std::isnan(v))
    return 0;
  v = std::trunc(v);
  if (t == DType::U64) {
    if (v <= 0)
      return v <= -9223372036854775808.0 ? INT64_MIN : static_cast<int64_t>(v);
    if (v >= 18446744073709551616.0)
      return -1; // UINT64_MAX
    return static_cast<int64_t>(static_cast<uint64_t>(v));
  }
  int64_t i;
  if (v >= 9223372036854775807.0)
    i = INT64_MAX;
  else if (v <= -9223372036854775808.0)
    i = INT64_MIN;
  else
    i = static_cast<int64_t>(v);
  return wrapInt(i, t);
}

int64_t intTypeMin(DType t) {
  switch (t) {
  case DType::I8: return INT8_MIN;
  case DType::I16: return INT16_MIN;
  case DType::I32: return INT32_MIN;
  case DType::I64: return INT64_MIN;
  default: return 0; // i1 and unsigned
  }
}

int64_t intTypeMax(DType t) {
  switch (t) {
  case DType::I1: return 1;
  case DType::I8: return INT8_MAX;
  case DType::I16: return INT16_MAX;
  case DType::I32: return INT32_MAX;
  case DType::I64: return INT64_MAX;
  case DType::U8: return UINT8_MAX;
  case DType::U16: return UINT16_MAX;
  case DType::U32: return UINT32_MAX;
  case DType::U64: return -1;
  default: return 0;
  }
}

std::vector<int64_t> normalizeIndices(const KernelContext &c, const Buffer &indices,
                                      int64_t axis, int64_t len) {
  int64_t count = indices.size();
  std::vector<int64_t> idx(count);
  for (int64_t j = 0; j < count; ++j) {
    int64_t v = indices.i[j];
    bool u = indices.dtype() == DType::U64 && v < 0;
    int64_t w = v < 0 ? v + len : v;
    if (u || w < 0 || w >= len)
      c.fail("index " +
                 (u ? std::to_string(static_cast<uint64_t>(v)) : std::to_string(v)) +
                 " (indices element " + std::to_string(j) + ") is out of range for axis " +
                 std::to_string(axis) + " of size " + std::to_string(len),
             StatusCode::OutOfRange);
    idx[j] = w;
  }
  return idx;
}

} // namespace tc::rt::cpu

namespace tc::rt::cpu {

Buffer decodeBuffer(const TensorType &type, const uint8_t *data) {
  Buffer b = makeBuffer(type);
  int64_t n = type.numElements();
  if (b.isFloat) {
    if (type.dtype == DType::F32) {
      const float *p = reinterpret_cast<const float *>(data);
      for (int64_t k = 0; k < n; ++k) {
        float v;
        std::memcpy(&v, p + k, 4);
        b.f[k] = v;
      }
    } else {
      for (int64_t k = 0; k < n; ++k)
        b.f[k] = loadAsDouble(data, type.dtype, k);
    }
  } else {
    for (int64_t k = 0; k < n; ++k)
      b.i[k] = loadAsInt(data, type.dtype, k);
  }
  return b;
}

HostTensor encodeBuffer(const Buffer &b) {
  HostTensor t;
  t.type = b.type;
  int64_t n = b.size();
  t.data.assign(static_cast<size_t>(n) * dtypeStorageBytes(b.type.dtype), 0);
  uint8_t *p = t.data.data();
  if (b.isFloat) {
    if (b.type.dtype == DType::F32) {
      for (int64_t k = 0; k < n; ++k) {
        float v = static_cast<float>(b.f[k]);
        std::memcpy(p + 4 * k, &v, 4);
      }
    } else {
      for (int64_t k = 0; k < n; ++k)
        storeDouble(p, b.type.dtype, k, b.f[k]);
    }
  } else {
    for (int64_t k = 0; k < n; ++k)
      storeInt(p, b.type.dtype, k, b.i[k]);
  }
  return t;
}

} // namespace tc::rt::cpu
