//===- proto_writer.h - protobuf's wire format, written by hand -*- C++ -*-===//
//
// The few pieces of protobuf's encoding the runtime writes without
// libprotobuf (the runtime links no protobuf): TensorBoard's event files
// (tensorboard.cpp) and the ONNX export (session/export.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_BASE_PROTO_WRITER_H
#define TC_RUNTIME_BASE_PROTO_WRITER_H

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tc::rt {

// Protobuf wire types.
constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

/// Appends the fields of one protobuf message to a byte vector (varint holds
/// int64 as its two's complement, as protobuf does).
class ProtoWriter {
public:
  explicit ProtoWriter(std::vector<uint8_t> *out) : out_(out) {}

  void varint(uint32_t field, uint64_t v) {
    key(field, kVarint);
    raw(v);
  }
  void f64(uint32_t field, double v) {
    uint64_t b;
    std::memcpy(&b, &v, 8);
    key(field, kFixed64);
    le(b, 8);
  }
  void f32(uint32_t field, float v) {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    key(field, kFixed32);
    le(b, 4);
  }
  void bytes(uint32_t field, const void *p, size_t n) {
    key(field, kLengthDelimited);
    raw(n);
    const uint8_t *b = static_cast<const uint8_t *>(p);
    out_->insert(out_->end(), b, b + n);
  }
  void str(uint32_t field, const std::string &s) {
    bytes(field, s.data(), s.size());
  }
  void message(uint32_t field, const std::vector<uint8_t> &m) {
    bytes(field, m.data(), m.size());
  }

private:
  void key(uint32_t field, uint32_t wireType) { raw(uint64_t(field) << 3 | wireType); }
  void raw(uint64_t v) {
    while (v >= 0x80) {
      out_->push_back(static_cast<uint8_t>(v | 0x80));
      v >>= 7;
    }
    out_->push_back(static_cast<uint8_t>(v));
  }
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i)
      out_->push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> *out_;
};

} // namespace tc::rt

#endif // TC_RUNTIME_BASE_PROTO_WRITER_H
