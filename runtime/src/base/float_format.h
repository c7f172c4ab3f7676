//===- float_format.h - exact emulation of narrow float formats -*- C++ -*-===//
//
// Rounding of doubles to every floating dtype of tc and the bit encodings of
// those formats. All rounding is to nearest, ties to even, straight from
// double (never through float, which would round twice).
//
// Special values per format:
//   f32, f64, f16, bf16, f8E5M2  IEEE-like: +-inf, NaN, subnormals.
//   f8E4M3FN   no inf; NaN is S.1111.111; max 448. Overflow -> NaN, or +-448
//              when saturating (inf too saturates, as ONNX Cast saturate=1).
//   f8E5M2     max 57344. Overflow -> +-inf, or +-57344 when saturating.
//   f4E2M1FN   no inf, no NaN; max 6. Always saturates: overflow and +-inf
//              give +-6, NaN gives +6 (as ONNX's reference Cast).
//   f8E8M0FNU  2^(e-127) for e in [0, 254], 0xFF is NaN; no sign, no zero,
//              no subnormals. NaN, negative values and +inf give NaN (inf
//              gives 2^127 when saturating); 0 and values below 2^-127 give
//              2^-127 (the nearest representable value); above 2^127 ->
//              NaN, or 2^127 when saturating. Ties (1.5 * 2^k) round up,
//              as LLVM's APFloat does (the only significand bit is odd).
// `saturate` only changes the float8 formats (f8E4M3FN, f8E5M2, f8E8M0FNU);
// f16 and bf16 overflow to inf as IEEE says.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_BASE_FLOAT_FORMAT_H
#define TC_RUNTIME_BASE_FLOAT_FORMAT_H

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/src/base/dtype.h"

namespace tc::rt {

/// Rounds `x` to the nearest value of the floating dtype `t` (RNE), handling
/// overflow, NaN and inf as described above. For F64 returns x; for F32 the
/// float value. `t` must be a floating dtype.
double roundToFloatDType(double x, DType t, bool saturate = false);

/// The storage bits of `x` in floating dtype `t` (rounding first). F64 gives
/// the 64 bits of the double; the others use the low 32/16/8/4 bits.
uint64_t encodeFloat(double x, DType t, bool saturate = false);

/// The value of storage bits `bits` of floating dtype `t` (high bits above
/// the format's width are ignored).
double decodeFloat(uint64_t bits, DType t);

/// Largest finite value of floating dtype `t`.
double maxFiniteValue(DType t);

/// f4E2M1FN values, one per byte (tc's storage), packed two to a byte with
/// element 0 in the low nibble (ONNX FLOAT4E2M1, safetensors F4), and back.
std::vector<uint8_t> packFloat4(const std::vector<uint8_t> &values);
std::vector<uint8_t> unpackFloat4(const uint8_t *packed, size_t count);

/// Shorthands for the common formats.
inline uint16_t doubleToBf16Bits(double x) {
  return static_cast<uint16_t>(encodeFloat(x, DType::BF16));
}
inline uint16_t doubleToF16Bits(double x) {
  return static_cast<uint16_t>(encodeFloat(x, DType::F16));
}

} // namespace tc::rt

#endif // TC_RUNTIME_BASE_FLOAT_FORMAT_H
