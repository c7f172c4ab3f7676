//===- host_tensor.cpp - element access to HostTensors ---------------------===//
#include "runtime/src/base/host_tensor.h"

#include <cmath>
#include <cstring>

#include "runtime/src/base/float_format.h"

namespace tc::rt {

namespace {
template <typename T> T loadRaw(const uint8_t *data, int64_t i) {
  T v;
  std::memcpy(&v, data + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}
template <typename T> void storeRaw(uint8_t *data, int64_t i, T v) {
  std::memcpy(data + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

int64_t floatToInt(double v) {
  if (std::isnan(v))
    return 0;
  v = std::trunc(v);
  if (v >= 9223372036854775807.0)
    return INT64_MAX;
  if (v <= -9223372036854775808.0)
    return INT64_MIN;
  return static_cast<int64_t>(v);
}
} // namespace

double loadAsDouble(const uint8_t *data, DType t, int64_t i) {
  switch (t) {
  case DType::F32: return loadRaw<float>(data, i);
  case DType::F64: return loadRaw<double>(data, i);
  case DType::F16:
  case DType::BF16: return decodeFloat(loadRaw<uint16_t>(data, i), t);
  case DType::F8E4M3FN:
  case DType::F8E5M2:
  case DType::F4E2M1FN:
  case DType::F8E8M0FNU: return decodeFloat(data[i], t);
  case DType::U64: return static_cast<double>(loadRaw<uint64_t>(data, i));
  default: return static_cast<double>(loadAsInt(data, t, i));
  }
}

int64_t loadAsInt(const uint8_t *data, DType t, int64_t i) {
  switch (t) {
  case DType::I1: return data[i] != 0;
  case DType::I8: return loadRaw<int8_t>(data, i);
  case DType::I16: return loadRaw<int16_t>(data, i);
  case DType::I32: return loadRaw<int32_t>(data, i);
  case DType::I64: return loadRaw<int64_t>(data, i);
  case DType::U8: return data[i];
  case DType::U16: return loadRaw<uint16_t>(data, i);
  case DType::U32: return loadRaw<uint32_t>(data, i);
  case DType::U64: return static_cast<int64_t>(loadRaw<uint64_t>(data, i));
  default: return floatToInt(loadAsDouble(data, t, i));
  }
}

void storeDouble(uint8_t *data, DType t, int64_t i, double v, bool saturate) {
  switch (t) {
  case DType::F32: storeRaw<float>(data, i, static_cast<float>(v)); return;
  case DType::F64: storeRaw<double>(data, i, v); return;
  case DType::F16:
  case DType::BF16:
    storeRaw<uint16_t>(data, i, static_cast<uint16_t>(encodeFloat(v, t, saturate)));
    return;
  case DType::F8E4M3FN:
  case DType::F8E5M2:
  case DType::F4E2M1FN:
  case DType::F8E8M0FNU:
    data[i] = static_cast<uint8_t>(encodeFloat(v, t, saturate));
    return;
  case DType::I1: data[i] = v != 0; return;
  case DType::U64:
    if (v >= 9223372036854775808.0 && v < 18446744073709551616.0) {
      storeRaw<uint64_t>(data, i, static_cast<uint64_t>(v));
      return;
    }
    storeInt(data, t, i, floatToInt(v));
    return;
  default: storeInt(data, t, i, floatToInt(v)); return;
  }
}

void storeInt(uint8_t *data, DType t, int64_t i, int64_t v) {
  switch (t) {
  case DType::I1: data[i] = v != 0; return;
  case DType::I8:
  case DType::U8: data[i] = static_cast<uint8_t>(v); return;
  case DType::I16:
  case DType::U16: storeRaw<uint16_t>(data, i, static_cast<uint16_t>(v)); return;
  case DType::I32:
  case DType::U32: storeRaw<uint32_t>(data, i, static_cast<uint32_t>(v)); return;
  case DType::I64:
  case DType::U64: storeRaw<uint64_t>(data, i, static_cast<uint64_t>(v)); return;
  default: storeDouble(data, t, i, static_cast<double>(v)); return;
  }
}

HostTensor makeHostTensor(const TensorType &type, const std::vector<double> &values) {
  HostTensor t;
  t.type = type;
  t.data.assign(values.size() * dtypeStorageBytes(type.dtype), 0);
  for (size_t i = 0; i < values.size(); ++i)
    storeDouble(t.data.data(), type.dtype, static_cast<int64_t>(i), values[i]);
  return t;
}

HostTensor makeHostTensorInts(const TensorType &type, const std::vector<int64_t> &values) {
  HostTensor t;
  t.type = type;
  t.data.assign(values.size() * dtypeStorageBytes(type.dtype), 0);
  for (size_t i = 0; i < values.size(); ++i)
    storeInt(t.data.data(), type.dtype, static_cast<int64_t>(i), values[i]);
  return t;
}

std::vector<double> hostTensorToDoubles(const HostTensor &t) {
  int64_t bytes = dtypeStorageBytes(t.type.dtype);
  int64_t n = bytes ? static_cast<int64_t>(t.data.size()) / bytes : 0;
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i)
    out[i] = loadAsDouble(t.data.data(), t.type.dtype, i);
  return out;
}

std::vector<int64_t> hostTensorToInts(const HostTensor &t) {
  int64_t bytes = dtypeStorageBytes(t.type.dtype);
  int64_t n = bytes ? static_cast<int64_t>(t.data.size()) / bytes : 0;
  std::vector<int64_t> out(n);
  for (int64_t i = 0; i < n; ++i)
    out[i] = loadAsInt(t.data.data(), t.type.dtype, i);
  return out;
}

} // namespace tc::rt
