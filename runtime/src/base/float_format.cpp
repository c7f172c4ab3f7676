//===- float_format.cpp - exact emulation of narrow float formats ---------===//
#include "runtime/src/base/float_format.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace tc::rt {

namespace {

enum class NanStyle {
  Ieee,       // exponent all ones, mantissa != 0; exponent all ones + 0 = inf
  AllOnes,    // only the all-ones pattern (S.1111.111) is NaN; no inf
  None,       // no NaN, no inf
  UnsignedFF, // f8E8M0FNU: 0xFF
};

struct Format {
  int expBits;
  int mantBits;
  int bias;
  NanStyle nan;
  bool hasSign;
  bool hasSubnormals;
  double maxFinite;
  bool isFloat8; // `saturate` applies
};

const Format kF16{5, 10, 15, NanStyle::Ieee, true, true, 65504.0, false};
const Format kBF16{8, 7, 127, NanStyle::Ieee, true, true,
                   3.38953138925153547590470800371487866880e38, false};
const Format kE4M3FN{4, 3, 7, NanStyle::AllOnes, true, true, 448.0, true};
const Format kE5M2{5, 2, 15, NanStyle::Ieee, true, true, 57344.0, true};
const Format kE2M1FN{2, 1, 1, NanStyle::None, true, true, 6.0, false};
const Format kE8M0FNU{8, 0, 127, NanStyle::UnsignedFF, false, false,
                      1.70141183460469231731687303715884105728e38, true};

const Format *formatOf(DType t) {
  switch (t) {
  case DType::F16: return &kF16;
  case DType::BF16: return &kBF16;
  case DType::F8E4M3FN: return &kE4M3FN;
  case DType::F8E5M2: return &kE5M2;
  case DType::F4E2M1FN: return &kE2M1FN;
  case DType::F8E8M0FNU: return &kE8M0FNU;
  default: return nullptr;
  }
}

/// Smallest unbiased exponent of a normal number.
int minExponent(const Format &f) { return f.hasSubnormals ? 1 - f.bias : -f.bias; }

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

double roundGeneric(double x, const Format &f, bool saturate) {
  bool sat = saturate && f.isFloat8;
  if (std::isnan(x))
    return f.nan == NanStyle::None ? f.maxFinite : kNaN;
  if (!f.hasSign) {
    // f8E8M0FNU: powers of two only.
    if (std::signbit(x) && x != 0)
      return kNaN;
    if (std::isinf(x))
      return sat ? f.maxFinite : kNaN;
  }
  if (std::isinf(x)) {
    if (f.nan == NanStyle::Ieee && !sat)
      return x;
    if (f.nan == NanStyle::AllOnes && !sat)
      return kNaN;
    return std::copysign(f.maxFinite, x);
  }
  double a = std::fabs(x);
  double r = 0;
  if (a != 0) {
    int e = 0;
    std::frexp(a, &e); // a = m * 2^e, m in [0.5, 1)
    int exponent = e - 1;
    int quantum = std::max(exponent, minExponent(f)) - f.mantBits;
    // Exact scaling by a power of two, then RNE to an integer (the default
    // floating-point environment rounds to nearest even).
    r = std::ldexp(std::nearbyint(std::ldexp(a, -quantum)), quantum);
  }
  if (r > f.maxFinite) {
    if (sat || f.nan == NanStyle::None)
      r = f.maxFinite;
    else if (f.nan == NanStyle::Ieee)
      r = kInf;
    else
      return kNaN;
  }
  if (r == 0 && !f.hasSign)
    return std::ldexp(1.0, minExponent(f)); // no zero: the smallest value
  return std::copysign(r, f.hasSign ? x : 1.0);
}

uint64_t encodeGeneric(double r, const Format &f) {
  // `r` is already a value of the format (or NaN/inf where it has them).
  uint64_t expAllOnes = (uint64_t{1} << f.expBits) - 1;
  uint64_t sign = 0;
  if (f.hasSign && std::signbit(r))
    sign = uint64_t{1} << (f.expBits + f.mantBits);
  if (std::isnan(r)) {
    switch (f.nan) {
    case NanStyle::Ieee:
      return (expAllOnes << f.mantBits) | (uint64_t{1} << (f.mantBits - 1));
    case NanStyle::AllOnes:
      return (expAllOnes << f.mantBits) | ((uint64_t{1} << f.mantBits) - 1);
    case NanStyle::UnsignedFF:
      return 0xFF;
    case NanStyle::None:
      return 0; // unreachable: rounding never yields NaN here
    }
  }
  if (std::isinf(r))
    return sign | (expAllOnes << f.mantBits);
  double a = std::fabs(r);
  if (a == 0)
    return sign;
  int e = 0;
  std::frexp(a, &e);
  int exponent = e - 1;
  int emin = minExponent(f);
  if (exponent < emin) {
    // Subnormal: the field is 0 and the value is mant * 2^(emin - mantBits).
    uint64_t mant = static_cast<uint64_t>(std::ldexp(a, f.mantBits - emin));
    return sign | mant;
  }
  uint64_t field = static_cast<uint64_t>(exponent + f.bias);
  uint64_t mant = static_cast<uint64_t>(
      std::ldexp(std::ldexp(a, -exponent) - 1.0, f.mantBits));
  return sign | (field << f.mantBits) | mant;
}

double decodeGeneric(uint64_t bits, const Format &f) {
  uint64_t mantMask = (uint64_t{1} << f.mantBits) - 1;
  uint64_t expAllOnes = (uint64_t{1} << f.expBits) - 1;
  uint64_t mant = bits & mantMask;
  uint64_t field = (bits >> f.mantBits) & expAllOnes;
  bool negative = f.hasSign && ((bits >> (f.expBits + f.mantBits)) & 1);
  double v;
  if (f.nan == NanStyle::Ieee && field == expAllOnes)
    v = mant ? kNaN : kInf;
  else if (f.nan == NanStyle::AllOnes && field == expAllOnes && mant == mantMask)
    v = kNaN;
  else if (f.nan == NanStyle::UnsignedFF && field == expAllOnes)
    v = kNaN;
  else if (field == 0 && f.hasSubnormals)
    v = std::ldexp(static_cast<double>(mant), minExponent(f) - f.mantBits);
  else
    v = std::ldexp(1.0 + std::ldexp(static_cast<double>(mant), -f.mantBits),
                   static_cast<int>(field) - f.bias);
  return negative ? -v : v;
}

} // namespace

double roundToFloatDType(double x, DType t, bool saturate) {
  switch (t) {
  case DType::F64: return x;
  case DType::F32: return static_cast<double>(static_cast<float>(x));
  default: break;
  }
  const Format *f = formatOf(t);
  return f ? roundGeneric(x, *f, saturate) : x;
}

uint64_t encodeFloat(double x, DType t, bool saturate) {
  if (t == DType::F64) {
    uint64_t b;
    std::memcpy(&b, &x, 8);
    return b;
  }
  if (t == DType::F32) {
    float v = static_cast<float>(x);
    uint32_t b;
    std::memcpy(&b, &v, 4);
    return b;
  }
  const Format *f = formatOf(t);
  if (!f)
    return 0;
  return encodeGeneric(roundGeneric(x, *f, saturate), *f);
}

double decodeFloat(uint64_t bits, DType t) {
  if (t == DType::F64) {
    double v;
    std::memcpy(&v, &bits, 8);
    return v;
  }
  if (t == DType::F32) {
    uint32_t b = static_cast<uint32_t>(bits);
    float v;
    std::memcpy(&v, &b, 4);
    return v;
  }
  const Format *f = formatOf(t);
  return f ? decodeGeneric(bits, *f) : kNaN;
}

std::vector<uint8_t> packFloat4(const std::vector<uint8_t> &values) {
  std::vector<uint8_t> out((values.size() + 1) / 2, 0);
  for (size_t i = 0; i < values.size(); ++i)
    out[i / 2] |= static_cast<uint8_t>((values[i] & 0xf) << (i % 2 ? 4 : 0));
  return out;
}

std::vector<uint8_t> unpackFloat4(const uint8_t *packed, size_t count) {
  std::vector<uint8_t> out(count);
  for (size_t i = 0; i < count; ++i)
    out[i] = (packed[i / 2] >> (i % 2 ? 4 : 0)) & 0xf;
  return out;
}

double maxFiniteValue(DType t) {
  if (t == DType::F64)
    return std::numeric_limits<double>::max();
  if (t == DType::F32)
    return std::numeric_limits<float>::max();
  const Format *f = formatOf(t);
  return f ? f->maxFinite : kNaN;
}

} // namespace tc::rt
