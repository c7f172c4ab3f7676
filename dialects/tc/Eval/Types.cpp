//===- Types.cpp - tc types and constants <-> runtime types ---------------===//
//
// MLIR's dense storage is byte-for-byte the runtime's storage format for
// whole-byte element types, so those constants are copied raw; i1 and the
// sub-byte floats (one storage byte per element) go element by element.
//
//===----------------------------------------------------------------------===//

#include "dialects/tc/Eval/Types.h"

#include <cstring>

using namespace mlir;

namespace tc {

std::optional<rt::DType> toDType(Type t) {
  if (t.isF32())
    return rt::DType::F32;
  if (t.isF64())
    return rt::DType::F64;
  if (t.isF16())
    return rt::DType::F16;
  if (t.isBF16())
    return rt::DType::BF16;
  if (llvm::isa<Float8E4M3FNType>(t))
    return rt::DType::F8E4M3FN;
  if (llvm::isa<Float8E5M2Type>(t))
    return rt::DType::F8E5M2;
  if (llvm::isa<Float4E2M1FNType>(t))
    return rt::DType::F4E2M1FN;
  if (llvm::isa<Float8E8M0FNUType>(t))
    return rt::DType::F8E8M0FNU;
  if (auto it = llvm::dyn_cast<IntegerType>(t)) {
    bool u = it.isUnsigned();
    switch (it.getWidth()) {
    case 1:
      return rt::DType::I1;
    case 8:
      return u ? rt::DType::U8 : rt::DType::I8;
    case 16:
      return u ? rt::DType::U16 : rt::DType::I16;
    case 32:
      return u ? rt::DType::U32 : rt::DType::I32;
    case 64:
      return u ? rt::DType::U64 : rt::DType::I64;
    default:
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::optional<rt::TensorType> toTensorType(Type type) {
  auto t = llvm::dyn_cast<RankedTensorType>(type);
  if (!t || !t.hasStaticShape())
    return std::nullopt;
  auto d = toDType(t.getElementType());
  if (!d)
    return std::nullopt;
  rt::TensorType out;
  out.dtype = *d;
  out.shape.assign(t.getShape().begin(), t.getShape().end());
  return out;
}

namespace {
/// Element types whose MLIR dense storage is byte-for-byte the runtime's.
bool rawCompatible(Type elt) {
  if (auto it = llvm::dyn_cast<IntegerType>(elt))
    return it.getWidth() % 8 == 0;
  if (auto ft = llvm::dyn_cast<FloatType>(elt))
    return ft.getWidth() % 8 == 0;
  return false;
}
} // namespace

FailureOr<rt::HostTensor> toHostTensor(ElementsAttr attr, std::string *error) {
  auto tt = toTensorType(attr.getType());
  if (!tt)
    return failure();
  rt::HostTensor out;
  out.type = *tt;
  int64_t n = out.type.numElements(); // saturates at INT64_MAX
  int bytes = rt::dtypeStorageBytes(tt->dtype);
  if (n > kMaxConstantBytes / bytes) {
    if (error)
      *error = "a constant of " + std::to_string(n) + " elements (more than the 4 GiB an "
               "artifact carries per constant)";
    return failure();
  }
  out.data.resize(n * bytes);
  auto dense = llvm::dyn_cast<DenseElementsAttr>(attr);
  if (!dense)
    return failure(); // resource blobs are not produced by tc's importers
  Type elt = dense.getElementType();
  if (rawCompatible(elt)) {
    ArrayRef<char> raw = dense.getRawData();
    if (dense.isSplat()) {
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(out.data.data() + i * bytes, raw.data(), bytes);
    } else {
      if ((int64_t)raw.size() != n * bytes)
        return failure();
      if (!raw.empty()) // an empty tensor's data pointer may be null
        std::memcpy(out.data.data(), raw.data(), raw.size());
    }
    return out;
  }
  // i1 and sub-byte floats: one storage byte per element.
  if (llvm::isa<FloatType>(elt)) {
    int64_t i = 0;
    for (APFloat v : dense.getValues<APFloat>())
      out.data[i++] = (uint8_t)v.bitcastToAPInt().getZExtValue();
  } else {
    int64_t i = 0;
    for (APInt v : dense.getValues<APInt>())
      out.data[i++] = (uint8_t)v.getZExtValue();
  }
  return out;
}

DenseElementsAttr fromHostTensor(RankedTensorType type, const rt::HostTensor &t) {
  Type elt = type.getElementType();
  if (type.getNumElements() == 0)
    return DenseElementsAttr::get(type, ArrayRef<Attribute>());
  if (rawCompatible(elt)) {
    ArrayRef<char> raw(reinterpret_cast<const char *>(t.data.data()), t.data.size());
    return DenseElementsAttr::getFromRawBuffer(type, raw);
  }
  if (elt.isInteger(1)) {
    SmallVector<bool> values(t.data.begin(), t.data.end());
    return DenseElementsAttr::get(type, values);
  }
  if (auto ft = llvm::dyn_cast<FloatType>(elt)) {
    SmallVector<APFloat> values;
    values.reserve(t.data.size());
    for (uint8_t b : t.data)
      values.emplace_back(ft.getFloatSemantics(), APInt(ft.getWidth(), b));
    return DenseElementsAttr::get(type, values);
  }
  auto it = llvm::cast<IntegerType>(elt);
  SmallVector<APInt> values;
  for (uint8_t b : t.data)
    values.emplace_back(it.getWidth(), b);
  return DenseElementsAttr::get(type, values);
}

LogicalResult convertAttr(Attribute a, rt::Attr *out, std::string *error,
                          StringRef attrName) {
  if (auto b = llvm::dyn_cast<BoolAttr>(a)) {
    out->kind = rt::Attr::Kind::Int;
    out->i = b.getValue();
  } else if (auto i = llvm::dyn_cast<IntegerAttr>(a)) {
    out->kind = rt::Attr::Kind::Int;
    out->i = i.getValue().getSExtValue();
  } else if (auto f = llvm::dyn_cast<FloatAttr>(a)) {
    out->kind = rt::Attr::Kind::Float;
    out->f = f.getValueAsDouble();
  } else if (auto s = llvm::dyn_cast<StringAttr>(a)) {
    out->kind = rt::Attr::Kind::String;
    out->s = s.getValue().str();
  } else if (auto arr = llvm::dyn_cast<DenseI64ArrayAttr>(a)) {
    out->kind = rt::Attr::Kind::Ints;
    out->ints.assign(arr.asArrayRef().begin(), arr.asArrayRef().end());
  } else if (auto arr = llvm::dyn_cast<DenseI32ArrayAttr>(a)) {
    out->kind = rt::Attr::Kind::Ints;
    out->ints.assign(arr.asArrayRef().begin(), arr.asArrayRef().end());
  } else if (auto e = llvm::dyn_cast<ElementsAttr>(a)) {
    std::string why;
    auto t = toHostTensor(e, &why);
    if (failed(t)) {
      *error = ("attribute '" + attrName + "' holds " +
                (why.empty() ? std::string("an unsupported constant") : why)).str();
      return failure();
    }
    out->kind = rt::Attr::Kind::Tensor;
    out->tensor = std::move(*t);
  } else if (llvm::isa<UnitAttr>(a)) {
    out->kind = rt::Attr::Kind::Int;
    out->i = 1;
  } else {
    *error = ("attribute '" + attrName + "' has a kind the runtime cannot carry").str();
    return failure();
  }
  return success();
}

} // namespace tc
