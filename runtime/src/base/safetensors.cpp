//===- safetensors.cpp - read and write .safetensors files ----------------===//
#include "runtime/src/base/safetensors.h"

#include <algorithm>
#include <cstring>

#include "runtime/src/base/file_io.h"
#include "runtime/src/base/float_format.h"
#include "runtime/src/base/host_tensor.h"
#include "runtime/src/base/json.h"

namespace tc::rt {

namespace {
struct DTypeName {
  DType t;
  const char *name;
};
constexpr DTypeName kNames[] = {
    {DType::F64, "F64"},       {DType::F32, "F32"},         {DType::F16, "F16"},
    {DType::BF16, "BF16"},     {DType::F8E4M3FN, "F8_E4M3"}, {DType::F8E5M2, "F8_E5M2"},
    {DType::F8E8M0FNU, "F8_E8M0"}, {DType::F4E2M1FN, "F4"},  {DType::I1, "BOOL"},     {DType::I8, "I8"},
    {DType::I16, "I16"},       {DType::I32, "I32"},         {DType::I64, "I64"},
    {DType::U8, "U8"},         {DType::U16, "U16"},         {DType::U32, "U32"},
    {DType::U64, "U64"},
};
constexpr uint64_t kMaxHeader = 100u << 20; // the reference reader's limit

/// The bytes of `t` in the file: F4 two to a byte, element 0 in the low
/// nibble (as ONNX packs FLOAT4E2M1; torch reads it as float4_e2m1fn_x2).
std::vector<uint8_t> fileBytes(const HostTensor &t) {
  return t.type.dtype == DType::F4E2M1FN ? packFloat4(t.data) : t.data;
}
} // namespace

const char *safetensorsDType(DType t) {
  for (const DTypeName &n : kNames)
    if (n.t == t)
      return n.name;
  return nullptr;
}

Status serializeSafetensors(const SafetensorsFile &file, std::vector<uint8_t> *out) {
  std::vector<const std::pair<const std::string, HostTensor> *> order;
  for (const auto &kv : file.tensors) {
    if (kv.first == "__metadata__")
      return invalidArgument("a tensor cannot be named __metadata__");
    if (!safetensorsDType(kv.second.type.dtype))
      return invalidArgument("tensor '" + kv.first + "': dtype " +
                             dtypeName(kv.second.type.dtype) + " has no safetensors name");
    TC_RETURN_IF_ERROR(checkHostTensor(kv.second, "tensor '" + kv.first + "'"));
    order.push_back(&kv);
  }
  std::stable_sort(order.begin(), order.end(), [](auto *a, auto *b) {
    int sa = dtypeStorageBytes(a->second.type.dtype), sb = dtypeStorageBytes(b->second.type.dtype);
    return sa != sb ? sa > sb : a->first < b->first;
  });
  std::map<std::string, std::pair<uint64_t, uint64_t>> offsets;
  std::map<std::string, std::vector<uint8_t>> bytes;
  uint64_t at = 0;
  for (auto *kv : order) {
    std::vector<uint8_t> &b = bytes[kv->first] = fileBytes(kv->second);
    offsets[kv->first] = {at, at + b.size()};
    at += b.size();
  }
  std::string h = "{";
  bool first = true;
  if (!file.metadata.empty()) {
    h += "\"__metadata__\":{";
    bool f2 = true;
    for (const auto &[k, v] : file.metadata) {
      h += (f2 ? "" : ",") + jsonQuote(k) + ":" + jsonQuote(v);
      f2 = false;
    }
    h += "}";
    first = false;
  }
  for (const auto &[name, t] : file.tensors) { // sorted by name
    h += (first ? "" : ",") + jsonQuote(name) + ":{\"dtype\":\"" +
         safetensorsDType(t.type.dtype) + "\",\"shape\":[";
    for (size_t i = 0; i < t.type.shape.size(); ++i)
      h += (i ? "," : "") + std::to_string(t.type.shape[i]);
    auto [b, e] = offsets[name];
    h += "],\"data_offsets\":[" + std::to_string(b) + "," + std::to_string(e) + "]}";
    first = false;
  }
  h += "}";
  while ((8 + h.size()) % 8 != 0)
    h += ' ';
  out->clear();
  out->reserve(8 + h.size() + at);
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i)
    out->push_back(static_cast<uint8_t>(n >> (8 * i)));
  out->insert(out->end(), h.begin(), h.end());
  for (auto *kv : order)
    out->insert(out->end(), bytes[kv->first].begin(), bytes[kv->first].end());
  return Status::ok();
}

Status writeSafetensors(const std::string &path, const SafetensorsFile &file) {
  std::vector<uint8_t> bytes;
  TC_RETURN_IF_ERROR(serializeSafetensors(file, &bytes));
  return writeFileAtomic(path, bytes.data(), bytes.size());
}

Status parseSafetensors(const uint8_t *data, size_t size, SafetensorsFile *out,
                        const std::string &name) {
  auto err = [&](const std::string &m) { return dataLoss("safetensors '" + name + "': " + m); };
  *out = SafetensorsFile();
  if (size < 8)
    return err("file too short (" + std::to_string(size) + " bytes; truncated?)");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<uint64_t>(data[i]) << (8 * i);
  if (n > kMaxHeader || n > size - 8)
    return err("header length " + std::to_string(n) + " does not fit the " +
               std::to_string(size) + "-byte file (truncated or not safetensors)");
  std::string header(reinterpret_cast<const char *>(data + 8), n);
  JsonValue root;
  TC_RETURN_IF_ERROR(parseJson(header, &root, "safetensors '" + name + "' header"));
  if (!root.isObject())
    return err("header is not a JSON object");
  const uint8_t *base = data + 8 + n;
  uint64_t dataSize = size - 8 - n;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto &[key, v] : root.object) {
    if (key == "__metadata__") {
      if (!v.isObject())
        return err("__metadata__ is not an object");
      for (const auto &[mk, mv] : v.object) {
        if (!mv.isString())
          return err("__metadata__ value '" + mk + "' is not a string");
        out->metadata[mk] = mv.str;
      }
      continue;
    }
    std::string where = "tensor '" + key + "'";
    const JsonValue *dt = v.find("dtype"), *shape = v.find("shape"),
                    *offs = v.find("data_offsets");
    if (!v.isObject() || !dt || !dt->isString() || !shape || !shape->isArray() || !offs ||
        !offs->isArray() || offs->array.size() != 2)
      return err(where + " needs dtype, shape and data_offsets");
    HostTensor t;
    bool known = false;
    for (const DTypeName &d : kNames)
      if (dt->str == d.name) {
        t.type.dtype = d.t;
        known = true;
      }
    if (!known)
      return err(where + " has unsupported dtype '" + dt->str + "'");
    for (const JsonValue &d : shape->array) {
      // Range first: casting a double beyond int64's range is undefined.
      if (!d.isNumber() || !(d.num >= 0 && d.num < 9223372036854775808.0) ||
          d.num != static_cast<double>(static_cast<int64_t>(d.num)))
        return err(where + " has a bad shape");
      t.type.shape.push_back(static_cast<int64_t>(d.num));
    }
    int64_t count;
    TC_RETURN_IF_ERROR(checkedNumElements(t.type.shape, &count).withPrefix("safetensors '" + name + "' " + where));
    for (const JsonValue &o : offs->array)
      if (!o.isNumber() || o.num < 0 || o.num > 1.8e19)
        return err(where + " has bad data_offsets");
    uint64_t b = std::strtoull(offs->array[0].str.c_str(), nullptr, 10);
    uint64_t e = std::strtoull(offs->array[1].str.c_str(), nullptr, 10);
    bool f4 = t.type.dtype == DType::F4E2M1FN;
    uint64_t want = f4 ? (static_cast<uint64_t>(count) + 1) / 2
                       : static_cast<uint64_t>(count) * dtypeStorageBytes(t.type.dtype);
    if (e < b || e - b != want)
      return err(where + " (" + typeToString(t.type) + ") spans " + std::to_string(e - b) +
                 " bytes, needs " + std::to_string(want));
    if (e > dataSize)
      return err(where + " lies beyond the end of the file (truncated?)");
    if (f4)
      t.data = unpackFloat4(base + b, static_cast<size_t>(count));
    else
      t.data.assign(base + b, base + e);
    ranges.push_back({b, e});
    if (!out->tensors.emplace(key, std::move(t)).second)
      return err("duplicate " + where);
  }
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = 0;
  for (auto [b, e] : ranges) {
    if (b != at)
      return err("tensor data overlaps or leaves a hole at byte " + std::to_string(at));
    at = e;
  }
  if (at != dataSize)
    return err("the file has " + std::to_string(dataSize - at) +
               " bytes after the last tensor (corrupted?)");
  return Status::ok();
}

Status readSafetensors(const std::string &path, SafetensorsFile *out) {
  std::vector<uint8_t> bytes;
  TC_RETURN_IF_ERROR(readFileBytes(path, &bytes));
  return parseSafetensors(bytes.data(), bytes.size(), out, path);
}

} // namespace tc::rt
