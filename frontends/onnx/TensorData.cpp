//===- TensorData.cpp - ONNX TensorProto -> tc types and bytes ------------===//
//
// Reads the element type, shape and data of TensorProtos: raw_data, the typed
// repeated fields, and external data files. Every size is checked against
// the dims before anything is copied, and external data must stay inside the
// model's folder: a model file is untrusted input.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Importer.h"

#include "dialects/tc/Eval/Types.h"

#include "llvm/ADT/StringExtras.h"

#include <cstring>
#include <filesystem>
#include <set>
#include <fstream>

using namespace mlir;

namespace tc::onnx_import {

namespace {
// TensorProto::DataType numbers (the enum of libonnx 1.12 lacks the newest).
enum OnnxDType : int32_t {
  kFloat = 1, kUint8 = 2, kInt8 = 3, kUint16 = 4, kInt16 = 5, kInt32 = 6,
  kInt64 = 7, kString = 8, kBool = 9, kFloat16 = 10, kDouble = 11,
  kUint32 = 12, kUint64 = 13, kComplex64 = 14, kComplex128 = 15,
  kBfloat16 = 16, kFloat8E4M3FN = 17, kFloat8E4M3FNUZ = 18, kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20, kUint4 = 21, kInt4 = 22, kFloat4E2M1 = 23,
  kFloat8E8M0 = 24,
};
} // namespace

std::string onnxTypeName(int32_t t) {
  static const char *names[] = {
      "UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32",
      "INT64", "STRING", "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64",
      "COMPLEX64", "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ",
      "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4", "FLOAT4E2M1",
      "FLOAT8E8M0"};
  if (t >= 0 && t < (int32_t)(sizeof(names) / sizeof(names[0])))
    return names[t];
  return "data type " + std::to_string(t);
}

Type elementTypeFromOnnx(MLIRContext *ctx, int32_t t) {
  Builder b(ctx);
  switch (t) {
  case kFloat: return b.getF32Type();
  case kDouble: return b.getF64Type();
  case kFloat16: return b.getF16Type();
  case kBfloat16: return b.getBF16Type();
  case kFloat8E4M3FN: return Float8E4M3FNType::get(ctx);
  case kFloat8E5M2: return Float8E5M2Type::get(ctx);
  case kFloat4E2M1: return Float4E2M1FNType::get(ctx);
  case kFloat8E8M0: return Float8E8M0FNUType::get(ctx);
  case kBool: return b.getI1Type();
  case kInt8: return b.getIntegerType(8);
  case kInt16: return b.getIntegerType(16);
  case kInt32: return b.getIntegerType(32);
  case kInt64: return b.getIntegerType(64);
  case kUint8: return b.getIntegerType(8, /*isSigned=*/false);
  case kUint16: return b.getIntegerType(16, false);
  case kUint32: return b.getIntegerType(32, false);
  case kUint64: return b.getIntegerType(64, false);
  default: return {};
  }
}

namespace {
std::string tensorLabel(const onnx::TensorProto &t) {
  return "tensor '" + t.name() + "'";
}
} // namespace

FailureOr<RankedTensorType> tensorProtoType(MLIRContext *ctx,
                                            const onnx::TensorProto &t,
                                            std::string *error) {
  Type elt = elementTypeFromOnnx(ctx, t.data_type());
  if (!elt) {
    *error = tensorLabel(t) + " has unsupported element type " +
             onnxTypeName(t.data_type());
    return failure();
  }
  SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
  for (int64_t d : shape)
    if (d < 0) {
      *error = tensorLabel(t) + " has a negative dimension " + std::to_string(d);
      return failure();
    }
  if (boundedNumElements(shape) < 0) {
    *error = tensorLabel(t) + " is too large";
    return failure();
  }
  return RankedTensorType::get(shape, elt);
}

namespace {
/// Resolves an external data location against the model folder and checks
/// that it stays inside it (no absolute paths, no `..` escapes, no symlinks
/// leading out).
FailureOr<std::string> resolveExternalPath(const onnx::TensorProto &t,
                                           const std::string &location,
                                           const std::string &modelDir,
                                           std::string *error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (location.empty()) {
    *error = tensorLabel(t) + ": external data has an empty location";
    return failure();
  }
  fs::path loc(location);
  if (loc.is_absolute()) {
    *error = tensorLabel(t) + ": external data location '" + location +
             "' is an absolute path; it must be relative to the model's folder";
    return failure();
  }
  fs::path dir = fs::canonical(modelDir.empty() ? fs::path(".") : fs::path(modelDir), ec);
  if (ec) {
    *error = tensorLabel(t) + ": cannot resolve the model folder '" + modelDir + "'";
    return failure();
  }
  fs::path full = fs::weakly_canonical(dir / loc, ec);
  if (ec) {
    *error = tensorLabel(t) + ": cannot resolve external data path '" + location + "'";
    return failure();
  }
  // Compare path components: `full` must have `dir` as a strict prefix.
  auto di = dir.begin(), fi = full.begin();
  for (; di != dir.end(); ++di, ++fi)
    if (fi == full.end() || *di != *fi)
      break;
  if (di != dir.end() || fi == full.end()) {
    *error = tensorLabel(t) + ": external data path '" + location +
             "' resolves to '" + full.string() + "', outside the model's folder '" +
             dir.string() + "'";
    return failure();
  }
  return full.string();
}

LogicalResult readExternal(const onnx::TensorProto &t, const std::string &modelDir,
                           int64_t expectedBytes, std::vector<uint8_t> &out,
                           std::string *error) {
  std::string location;
  int64_t offset = 0, length = -1;
  std::set<std::string> keys;
  for (const auto &kv : t.external_data()) {
    if (!keys.insert(kv.key()).second) {
      *error = tensorLabel(t) + ": external data key '" + kv.key() + "' is given twice";
      return failure();
    }
    if (kv.key() == "location") {
      if (kv.value().find('\0') != std::string::npos) {
        *error = tensorLabel(t) + ": external data location contains a NUL byte";
        return failure();
      }
      location = kv.value();
    } else if (kv.key() == "offset" || kv.key() == "length") {
      long long v = 0;
      if (!llvm::to_integer(kv.value(), v, 10) || v < 0) {
        *error = tensorLabel(t) + ": bad external data " + kv.key() + " '" +
                 kv.value() + "'";
        return failure();
      }
      (kv.key() == "offset" ? offset : length) = v;
    }
  }
  auto path = resolveExternalPath(t, location, modelDir, error);
  if (failed(path))
    return failure();
  std::error_code ec;
  uintmax_t fileSize = std::filesystem::file_size(*path, ec);
  if (ec || !std::filesystem::is_regular_file(*path, ec)) {
    *error = tensorLabel(t) + ": cannot read external data file '" + *path + "'";
    return failure();
  }
  if (length < 0)
    length = expectedBytes;
  if (length != expectedBytes) {
    *error = tensorLabel(t) + ": external data length " + std::to_string(length) +
             " in '" + *path + "' but its dims need " + std::to_string(expectedBytes) +
             " bytes";
    return failure();
  }
  if ((uintmax_t)offset > fileSize || (uintmax_t)length > fileSize - offset) {
    *error = tensorLabel(t) + ": external data [" + std::to_string(offset) + ", " +
             std::to_string(offset + length) + ") lies outside '" + *path +
             "' of " + std::to_string(fileSize) + " bytes";
    return failure();
  }
  std::ifstream in(*path, std::ios::binary);
  out.resize(length);
  in.seekg(offset);
  if (length > 0)
    in.read(reinterpret_cast<char *>(out.data()), length);
  if (!in) {
    *error = tensorLabel(t) + ": reading external data from '" + *path + "' failed";
    return failure();
  }
  return success();
}

template <typename T>
void storeLE(uint8_t *dst, T v) {
  std::memcpy(dst, &v, sizeof(T)); // x86/arm64 hosts are little-endian
}
} // namespace

FailureOr<rt::HostTensor> readTensorProto(MLIRContext *ctx, const onnx::TensorProto &t,
                                          const std::string &modelDir,
                                          std::string *error) {
  if (t.data_type() == kString) {
    *error = tensorLabel(t) + " has unsupported element type STRING";
    return failure();
  }
  auto type = tensorProtoType(ctx, t, error);
  if (failed(type))
    return failure();
  Type elt = type->getElementType();
  auto dtype = tc::toDType(elt);
  if (!dtype) {
    *error = tensorLabel(t) + " has unsupported element type " + onnxTypeName(t.data_type());
    return failure();
  }
  rt::HostTensor host;
  host.type.dtype = *dtype;
  host.type.shape.assign(type->getShape().begin(), type->getShape().end());
  int64_t n = type->getNumElements();
  int64_t eb = rt::dtypeStorageBytes(*dtype);
  // FLOAT4E2M1 is stored two to a byte, element 0 in the low nibble; tc
  // keeps one per byte.
  bool packed = t.data_type() == kFloat4E2M1;
  int64_t bytes = packed ? (n + 1) / 2 : n * eb;
  auto sizeError = [&](int64_t have, const char *field) {
    *error = tensorLabel(t) + " has " + std::to_string(have) + " " + field +
             " but its dims " + "[" +
             llvm::join(llvm::map_range(type->getShape(),
                                        [](int64_t d) { return std::to_string(d); }),
                        ", ") +
             "] need " + std::to_string(field[0] == 'b' ? bytes : n);
    return failure();
  };

  if (t.has_data_location() && t.data_location() == onnx::TensorProto::EXTERNAL) {
    if (failed(readExternal(t, modelDir, bytes, host.data, error)))
      return failure();
  } else if (t.has_raw_data()) {
    const std::string &raw = t.raw_data();
    if ((int64_t)raw.size() != bytes)
      return sizeError(raw.size(), "bytes of raw_data");
    host.data.assign(raw.begin(), raw.end());
  } else if (packed) {
    // int32_data holds the packed bytes, one per element of the field.
    if (t.int32_data_size() != bytes)
      return sizeError(t.int32_data_size(), "bytes in int32_data");
    for (int32_t b : t.int32_data())
      host.data.push_back(static_cast<uint8_t>(b));
  } else {
    // The typed field must hold the n values before their bytes are
    // allocated: dims alone (up to 2^40 elements) must not allocate.
    int32_t dt = t.data_type();
    int64_t have;
    const char *field;
    switch (dt) {
    case kFloat:
      have = t.float_data_size(), field = "elements in float_data";
      break;
    case kDouble:
      have = t.double_data_size(), field = "elements in double_data";
      break;
    case kInt64:
      have = t.int64_data_size(), field = "elements in int64_data";
      break;
    case kUint32:
    case kUint64:
      have = t.uint64_data_size(), field = "elements in uint64_data";
      break;
    default:
      // INT32, INT16, INT8, UINT16, UINT8, BOOL, FLOAT16, BFLOAT16 and the
      // float8 types keep their values (or bit patterns) in int32_data.
      have = t.int32_data_size(), field = "elements in int32_data";
      break;
    }
    if (have != n)
      return sizeError(have, field);
    host.data.assign(bytes, 0);
    uint8_t *dst = host.data.data();
    switch (dt) {
    case kFloat:
      for (int64_t i = 0; i < n; ++i)
        storeLE<float>(dst + 4 * i, t.float_data(i));
      break;
    case kDouble:
      for (int64_t i = 0; i < n; ++i)
        storeLE<double>(dst + 8 * i, t.double_data(i));
      break;
    case kInt64:
      for (int64_t i = 0; i < n; ++i)
        storeLE<int64_t>(dst + 8 * i, t.int64_data(i));
      break;
    case kUint32:
    case kUint64:
      for (int64_t i = 0; i < n; ++i) {
        uint64_t v = t.uint64_data(i);
        if (dt == kUint32)
          storeLE<uint32_t>(dst + 4 * i, (uint32_t)v);
        else
          storeLE<uint64_t>(dst + 8 * i, v);
      }
      break;
    default:
      for (int64_t i = 0; i < n; ++i) {
        uint32_t v = (uint32_t)t.int32_data(i);
        if (dt == kBool)
          v = v != 0;
        std::memcpy(dst + eb * i, &v, eb);
      }
      break;
    }
  }
  if (elt.isInteger(1))
    for (auto &byte : host.data)
      byte = byte != 0;
  if (packed) {
    std::vector<uint8_t> nibbles(n);
    for (int64_t i = 0; i < n; ++i)
      nibbles[i] = (host.data[i / 2] >> (i % 2 ? 4 : 0)) & 0xf;
    host.data = std::move(nibbles);
  }
  return host;
}

} // namespace tc::onnx_import
