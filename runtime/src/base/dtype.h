//===- dtype.h - element types of tc tensors --------------------*- C++ -*-===//
#ifndef TC_RUNTIME_BASE_DTYPE_H
#define TC_RUNTIME_BASE_DTYPE_H

#include <cstdint>
#include <optional>
#include <string>

namespace tc::rt {

/// Element types. The numeric values are part of the artifact format: never
/// renumber, only append.
enum class DType : uint8_t {
  F32 = 0,
  F64 = 1,
  F16 = 2,
  BF16 = 3,
  F8E4M3FN = 4,
  F8E5M2 = 5,
  F4E2M1FN = 6,
  F8E8M0FNU = 7,
  I1 = 8, // bool
  I8 = 9,
  I16 = 10,
  I32 = 11,
  I64 = 12,
  U8 = 13,
  U16 = 14,
  U32 = 15,
  U64 = 16,
};

/// Bytes one element occupies in storage format (f4E2M1FN: 1).
int dtypeStorageBytes(DType t);
bool dtypeIsFloat(DType t);
bool dtypeIsInteger(DType t); // I1 counts as integer here too
/// MLIR spelling: "f32", "bf16", "f8E4M3FN", "i1", "i64", "ui8", ...
const char *dtypeName(DType t);
std::optional<DType> dtypeFromName(const std::string &name);

/// True when `raw` is the number of a DType (for readers of untrusted files).
bool dtypeIsValid(uint8_t raw);
/// True for ui8/ui16/ui32/ui64.
bool dtypeIsUnsigned(DType t);
/// Value bits of an integer type: i1 -> 1, i8/ui8 -> 8, ..., 0 for floats.
int dtypeIntegerBits(DType t);

} // namespace tc::rt

#endif // TC_RUNTIME_BASE_DTYPE_H
