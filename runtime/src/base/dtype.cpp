//===- dtype.cpp - element types of tc tensors ----------------------------===//
#include "runtime/src/base/dtype.h"

namespace tc::rt {

namespace {
struct DTypeInfo {
  DType type;
  const char *name;
  int bytes;
  bool isFloat;
};

// Indexed by the enum value; the order must follow dtype.h.
constexpr DTypeInfo kInfos[] = {
    {DType::F32, "f32", 4, true},
    {DType::F64, "f64", 8, true},
    {DType::F16, "f16", 2, true},
    {DType::BF16, "bf16", 2, true},
    {DType::F8E4M3FN, "f8E4M3FN", 1, true},
    {DType::F8E5M2, "f8E5M2", 1, true},
    {DType::F4E2M1FN, "f4E2M1FN", 1, true},
    {DType::F8E8M0FNU, "f8E8M0FNU", 1, true},
    {DType::I1, "i1", 1, false},
    {DType::I8, "i8", 1, false},
    {DType::I16, "i16", 2, false},
    {DType::I32, "i32", 4, false},
    {DType::I64, "i64", 8, false},
    {DType::U8, "ui8", 1, false},
    {DType::U16, "ui16", 2, false},
    {DType::U32, "ui32", 4, false},
    {DType::U64, "ui64", 8, false},
};
constexpr int kNumTypes = sizeof(kInfos) / sizeof(kInfos[0]);

const DTypeInfo *info(DType t) {
  int i = static_cast<int>(t);
  if (i < 0 || i >= kNumTypes)
    return nullptr;
  return &kInfos[i];
}
} // namespace

int dtypeStorageBytes(DType t) {
  const DTypeInfo *i = info(t);
  return i ? i->bytes : 0;
}

bool dtypeIsFloat(DType t) {
  const DTypeInfo *i = info(t);
  return i && i->isFloat;
}

bool dtypeIsInteger(DType t) {
  const DTypeInfo *i = info(t);
  return i && !i->isFloat;
}

const char *dtypeName(DType t) {
  const DTypeInfo *i = info(t);
  return i ? i->name : "<invalid dtype>";
}

std::optional<DType> dtypeFromName(const std::string &name) {
  for (const DTypeInfo &i : kInfos)
    if (name == i.name)
      return i.type;
  return std::nullopt;
}

bool dtypeIsValid(uint8_t raw) { return raw < kNumTypes; }

bool dtypeIsUnsigned(DType t) {
  return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64;
}

int dtypeIntegerBits(DType t) {
  if (t == DType::I1)
    return 1;
  return dtypeIsInteger(t) ? 8 * dtypeStorageBytes(t) : 0;
}

} // namespace tc::rt
