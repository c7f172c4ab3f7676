//===- dtype_test.cpp - dtype names and exact float format conversions ----===//
#include <cmath>
#include <cstring>
#include <limits>

#include <gtest/gtest.h>

#include "runtime/src/base/dtype.h"
#include "runtime/src/base/float_format.h"
#include "runtime/src/base/host_tensor.h"

namespace tc::rt {
namespace {

const double kInf = std::numeric_limits<double>::infinity();

TEST(DType, NamesRoundTrip) {
  const char *names[] = {"f32", "f64", "f16", "bf16", "f8E4M3FN", "f8E5M2",
                         "f4E2M1FN", "f8E8M0FNU", "i1", "i8", "i16", "i32",
                         "i64", "ui8", "ui16", "ui32", "ui64"};
  for (int i = 0; i < 17; ++i) {
    DType t = static_cast<DType>(i);
    EXPECT_STREQ(dtypeName(t), names[i]);
    ASSERT_TRUE(dtypeFromName(names[i]).has_value());
    EXPECT_EQ(*dtypeFromName(names[i]), t);
    EXPECT_TRUE(dtypeIsValid(static_cast<uint8_t>(i)));
  }
  EXPECT_FALSE(dtypeFromName("f128").has_value());
  EXPECT_FALSE(dtypeIsValid(17));
  EXPECT_EQ(dtypeStorageBytes(DType::BF16), 2);
  EXPECT_EQ(dtypeStorageBytes(DType::F4E2M1FN), 1);
  EXPECT_EQ(dtypeStorageBytes(DType::I1), 1);
  EXPECT_TRUE(dtypeIsFloat(DType::F8E8M0FNU));
  EXPECT_TRUE(dtypeIsInteger(DType::I1));
  EXPECT_EQ(dtypeIntegerBits(DType::U16), 16);
}

/// Every bit pattern of a narrow format decodes to a value that encodes back
/// to the same bits (NaNs to a NaN).
void exhaustiveRoundTrip(DType t, int bits) {
  for (uint64_t b = 0; b < (uint64_t{1} << bits); ++b) {
    double v = decodeFloat(b, t);
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(decodeFloat(encodeFloat(v, t), t))) << dtypeName(t) << " " << b;
      continue;
    }
    EXPECT_EQ(roundToFloatDType(v, t), v) << dtypeName(t) << " bits " << b;
    uint64_t back = encodeFloat(v, t);
    // -0 and +0 are distinct bit patterns and must stay so.
    EXPECT_EQ(back, b) << dtypeName(t) << " value " << v;
  }
}

TEST(FloatFormat, ExhaustiveRoundTrips) {
  exhaustiveRoundTrip(DType::BF16, 16);
  exhaustiveRoundTrip(DType::F16, 16);
  exhaustiveRoundTrip(DType::F8E4M3FN, 8);
  exhaustiveRoundTrip(DType::F8E5M2, 8);
  exhaustiveRoundTrip(DType::F4E2M1FN, 4);
  exhaustiveRoundTrip(DType::F8E8M0FNU, 8);
}

TEST(FloatFormat, KnownEncodings) {
  EXPECT_EQ(encodeFloat(1.0, DType::BF16), 0x3F80u);
  EXPECT_EQ(encodeFloat(-2.0, DType::BF16), 0xC000u);
  EXPECT_EQ(encodeFloat(1.0, DType::F16), 0x3C00u);
  EXPECT_EQ(encodeFloat(65504.0, DType::F16), 0x7BFFu);
  EXPECT_EQ(encodeFloat(1.0, DType::F8E4M3FN), 0x38u);
  EXPECT_EQ(encodeFloat(-2.0, DType::F8E4M3FN), 0xC0u);
  EXPECT_EQ(encodeFloat(448.0, DType::F8E4M3FN), 0x7Eu);
  EXPECT_EQ(encodeFloat(1.0, DType::F8E5M2), 0x3Cu);
  EXPECT_EQ(encodeFloat(57344.0, DType::F8E5M2), 0x7Bu);
  EXPECT_EQ(encodeFloat(1.0, DType::F4E2M1FN), 0x2u);
  EXPECT_EQ(encodeFloat(-6.0, DType::F4E2M1FN), 0xFu);
  EXPECT_EQ(encodeFloat(1.0, DType::F8E8M0FNU), 0x7Fu);
  EXPECT_EQ(encodeFloat(0.5, DType::F8E8M0FNU), 0x7Eu);
  EXPECT_EQ(decodeFloat(0x00, DType::F8E8M0FNU), std::ldexp(1.0, -127));
  EXPECT_EQ(decodeFloat(0xFE, DType::F8E8M0FNU), std::ldexp(1.0, 127));
  EXPECT_EQ(decodeFloat(0x01, DType::F8E4M3FN), std::ldexp(1.0, -9)); // subnormal
  EXPECT_EQ(decodeFloat(0x0001, DType::F16), std::ldexp(1.0, -24));
  EXPECT_EQ(maxFiniteValue(DType::F8E4M3FN), 448.0);
  EXPECT_EQ(maxFiniteValue(DType::F8E5M2), 57344.0);
  EXPECT_EQ(maxFiniteValue(DType::F4E2M1FN), 6.0);
}

TEST(FloatFormat, RoundToNearestEvenTies) {
  // bf16: ulp at 1 is 2^-7.
  EXPECT_EQ(roundToFloatDType(1 + std::ldexp(1, -8), DType::BF16), 1.0);
  EXPECT_EQ(roundToFloatDType(1 + 3 * std::ldexp(1, -8), DType::BF16), 1 + std::ldexp(1, -6));
  // Directly from double: rounding through float first would tie to 1.0.
  EXPECT_EQ(roundToFloatDType(1 + std::ldexp(1, -8) + std::ldexp(1, -40), DType::BF16),
            1 + std::ldexp(1, -7));
  // f16: ulp at 2048 is 2.
  EXPECT_EQ(roundToFloatDType(2049, DType::F16), 2048);
  EXPECT_EQ(roundToFloatDType(2051, DType::F16), 2052);
  EXPECT_EQ(roundToFloatDType(std::ldexp(1, -25), DType::F16), 0.0); // tie to even 0
  EXPECT_EQ(roundToFloatDType(3 * std::ldexp(1, -26), DType::F16), std::ldexp(1, -24));
  // E4M3FN: ulp at 1 is 1/8.
  EXPECT_EQ(roundToFloatDType(1.0625, DType::F8E4M3FN), 1.0);
  EXPECT_EQ(roundToFloatDType(1.1875, DType::F8E4M3FN), 1.25);
  EXPECT_EQ(roundToFloatDType(464, DType::F8E4M3FN), 448); // tie between 448 and (480)
  // E5M2: ulp at 1 is 1/4.
  EXPECT_EQ(roundToFloatDType(1.125, DType::F8E5M2), 1.0);
  EXPECT_EQ(roundToFloatDType(1.375, DType::F8E5M2), 1.5);
  // E2M1: 0, 0.5, 1, 1.5, 2, 3, 4, 6.
  EXPECT_EQ(roundToFloatDType(0.25, DType::F4E2M1FN), 0.0);
  EXPECT_EQ(roundToFloatDType(0.75, DType::F4E2M1FN), 1.0);
  EXPECT_EQ(roundToFloatDType(1.25, DType::F4E2M1FN), 1.0);
  EXPECT_EQ(roundToFloatDType(1.75, DType::F4E2M1FN), 2.0);
  EXPECT_EQ(roundToFloatDType(2.5, DType::F4E2M1FN), 2.0);
  EXPECT_EQ(roundToFloatDType(3.5, DType::F4E2M1FN), 4.0);
  EXPECT_EQ(roundToFloatDType(5.0, DType::F4E2M1FN), 4.0);
  EXPECT_EQ(roundToFloatDType(5.01, DType::F4E2M1FN), 6.0);
  EXPECT_EQ(roundToFloatDType(-0.3, DType::F4E2M1FN), -0.5);
  // E8M0: powers of two; 1.5 * 2^k rounds up (APFloat semantics).
  EXPECT_EQ(roundToFloatDType(3, DType::F8E8M0FNU), 4);
  EXPECT_EQ(roundToFloatDType(5, DType::F8E8M0FNU), 4);
  EXPECT_EQ(roundToFloatDType(6, DType::F8E8M0FNU), 8);
  EXPECT_EQ(roundToFloatDType(0.75, DType::F8E8M0FNU), 1);
  EXPECT_EQ(roundToFloatDType(0.7, DType::F8E8M0FNU), 0.5);
}

TEST(FloatFormat, OverflowAndSaturation) {
  // E4M3FN has no inf: overflow is NaN unless saturating.
  EXPECT_TRUE(std::isnan(roundToFloatDType(500, DType::F8E4M3FN)));
  EXPECT_TRUE(std::isnan(roundToFloatDType(465, DType::F8E4M3FN)));
  EXPECT_EQ(roundToFloatDType(500, DType::F8E4M3FN, true), 448);
  EXPECT_EQ(roundToFloatDType(-1e9, DType::F8E4M3FN, true), -448);
  EXPECT_EQ(roundToFloatDType(kInf, DType::F8E4M3FN, true), 448);
  EXPECT_TRUE(std::isnan(roundToFloatDType(kInf, DType::F8E4M3FN)));
  EXPECT_EQ(encodeFloat(1e9, DType::F8E4M3FN), 0x7Fu);
  EXPECT_EQ(encodeFloat(-1e9, DType::F8E4M3FN, true), 0xFEu);
  // E5M2 overflows to inf; 61440 ties to the even 65536, which overflows.
  EXPECT_EQ(roundToFloatDType(61440, DType::F8E5M2), kInf);
  EXPECT_EQ(roundToFloatDType(61439, DType::F8E5M2), 57344);
  EXPECT_EQ(roundToFloatDType(1e6, DType::F8E5M2, true), 57344);
  EXPECT_EQ(roundToFloatDType(-kInf, DType::F8E5M2), -kInf);
  EXPECT_EQ(roundToFloatDType(-kInf, DType::F8E5M2, true), -57344);
  EXPECT_EQ(encodeFloat(kInf, DType::F8E5M2), 0x7Cu);
  // f16/bf16 overflow to inf whatever `saturate` says.
  EXPECT_EQ(roundToFloatDType(65520, DType::F16), kInf);
  EXPECT_EQ(roundToFloatDType(65519, DType::F16), 65504);
  EXPECT_EQ(roundToFloatDType(1e39, DType::BF16, true), kInf);
  // E2M1 always saturates; NaN becomes +6.
  EXPECT_EQ(roundToFloatDType(100, DType::F4E2M1FN), 6);
  EXPECT_EQ(roundToFloatDType(-kInf, DType::F4E2M1FN), -6);
  EXPECT_EQ(roundToFloatDType(NAN, DType::F4E2M1FN), 6);
  // E8M0: no sign, no zero.
  EXPECT_TRUE(std::isnan(roundToFloatDType(-1, DType::F8E8M0FNU)));
  EXPECT_EQ(roundToFloatDType(0, DType::F8E8M0FNU), std::ldexp(1, -127));
  EXPECT_EQ(roundToFloatDType(1e-300, DType::F8E8M0FNU), std::ldexp(1, -127));
  EXPECT_TRUE(std::isnan(roundToFloatDType(std::ldexp(1, 128), DType::F8E8M0FNU)));
  EXPECT_EQ(roundToFloatDType(std::ldexp(1, 128), DType::F8E8M0FNU, true), std::ldexp(1, 127));
  EXPECT_EQ(encodeFloat(NAN, DType::F8E8M0FNU), 0xFFu);
}

TEST(FloatFormat, NaNAndInf) {
  for (DType t : {DType::F16, DType::BF16, DType::F8E5M2}) {
    EXPECT_TRUE(std::isnan(decodeFloat(encodeFloat(NAN, t), t))) << dtypeName(t);
    EXPECT_EQ(decodeFloat(encodeFloat(kInf, t), t), kInf) << dtypeName(t);
    EXPECT_EQ(decodeFloat(encodeFloat(-kInf, t), t), -kInf) << dtypeName(t);
  }
  EXPECT_EQ(encodeFloat(kInf, DType::F16), 0x7C00u);
  EXPECT_EQ(encodeFloat(-kInf, DType::BF16), 0xFF80u);
  EXPECT_TRUE(std::isnan(decodeFloat(0x7F, DType::F8E4M3FN)));
  EXPECT_TRUE(std::isnan(decodeFloat(0xFF, DType::F8E4M3FN)));
  EXPECT_FALSE(std::isnan(decodeFloat(0x7E, DType::F8E4M3FN)));
  EXPECT_TRUE(std::isnan(decodeFloat(0xFF, DType::F8E8M0FNU)));
  EXPECT_EQ(encodeFloat(-0.0, DType::BF16), 0x8000u);
  EXPECT_EQ(encodeFloat(-0.0, DType::F8E4M3FN), 0x80u);
}

TEST(FloatFormat, F32AndF64) {
  EXPECT_EQ(roundToFloatDType(0.1, DType::F32), static_cast<double>(0.1f));
  EXPECT_EQ(roundToFloatDType(0.1, DType::F64), 0.1);
  EXPECT_EQ(decodeFloat(encodeFloat(0.1, DType::F64), DType::F64), 0.1);
  EXPECT_EQ(decodeFloat(encodeFloat(0.1, DType::F32), DType::F32), static_cast<double>(0.1f));
}

TEST(HostTensor, StoreAndLoadEveryDType) {
  for (int i = 0; i < 17; ++i) {
    DType t = static_cast<DType>(i);
    HostTensor h = makeHostTensor({t, {3}}, {1, 0, 2});
    EXPECT_EQ(h.data.size(), 3u * dtypeStorageBytes(t));
    std::vector<double> back = hostTensorToDoubles(h);
    double two = t == DType::I1 ? 1 : 2;
    double zero = t == DType::F8E8M0FNU ? std::ldexp(1.0, -127) : 0; // E8M0 has no zero
    EXPECT_EQ(back, (std::vector<double>{1, zero, two})) << dtypeName(t);
  }
  HostTensor w = makeHostTensorInts({DType::I8, {2}}, {300, -129});
  EXPECT_EQ(hostTensorToInts(w), (std::vector<int64_t>{44, 127}));
  EXPECT_EQ(typeToString({DType::F32, {2, 16}}), "f32 2x16");
  EXPECT_EQ(typeToString({DType::I64, {}}), "i64 scalar");
  int64_t n;
  EXPECT_FALSE(checkedNumElements({-1, 2}, &n).isOk());
  EXPECT_FALSE(checkedNumElements({int64_t{1} << 40, int64_t{1} << 40}, &n).isOk());
  EXPECT_TRUE(checkedNumElements({0, int64_t{1} << 62, 5}, &n).isOk());
  EXPECT_EQ(n, 0);
}

} // namespace
} // namespace tc::rt
