//===- byte_io.h - little-endian encoding with bounds checks ----*- C++ -*-===//
//
// ByteWriter appends little-endian fields; ByteReader reads them back and
// fails (never reads past the end, never allocates more than the bytes left
// could describe) on truncated or hostile input.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_BASE_BYTE_IO_H
#define TC_RUNTIME_BASE_BYTE_IO_H

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/src/base/status.h"

namespace tc::rt {

class ByteWriter {
public:
  explicit ByteWriter(std::vector<uint8_t> *out) : out_(out) {}
  void u8(uint8_t v) { out_->push_back(v); }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void i32(int32_t v) { le(static_cast<uint32_t>(v), 4); }
  void i64(int64_t v) { le(static_cast<uint64_t>(v), 8); }
  void f64(double v) {
    uint64_t b;
    std::memcpy(&b, &v, 8);
    le(b, 8);
  }
  void bytes(const uint8_t *p, size_t n) { out_->insert(out_->end(), p, p + n); }
  void str(const std::string &s) {
    u32(static_cast<uint32_t>(s.size()));
    bytes(reinterpret_cast<const uint8_t *>(s.data()), s.size());
  }
  size_t size() const { return out_->size(); }

private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i)
      out_->push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> *out_;
};

class ByteReader {
public:
  /// `what` names the data in error messages ("artifact 'm.tca' section FUNCTIONS").
  ByteReader(const uint8_t *data, size_t size, std::string what)
      : p_(data), n_(size), what_(std::move(what)) {}

  size_t remaining() const { return n_ - pos_; }
  size_t offset() const { return pos_; }

  Status u8(uint8_t *v, const char *field) {
    TC_RETURN_IF_ERROR(need(1, field));
    *v = p_[pos_++];
    return Status::ok();
  }
  Status u32(uint32_t *v, const char *field) {
    uint64_t x;
    TC_RETURN_IF_ERROR(le(&x, 4, field));
    *v = static_cast<uint32_t>(x);
    return Status::ok();
  }
  Status u64(uint64_t *v, const char *field) { return le(v, 8, field); }
  Status i32(int32_t *v, const char *field) {
    uint32_t x;
    TC_RETURN_IF_ERROR(u32(&x, field));
    *v = static_cast<int32_t>(x);
    return Status::ok();
  }
  Status i64(int64_t *v, const char *field) {
    uint64_t x;
    TC_RETURN_IF_ERROR(u64(&x, field));
    *v = static_cast<int64_t>(x);
    return Status::ok();
  }
  Status f64(double *v, const char *field) {
    uint64_t x;
    TC_RETURN_IF_ERROR(u64(&x, field));
    std::memcpy(v, &x, 8);
    return Status::ok();
  }
  Status str(std::string *s, const char *field) {
    uint32_t n;
    TC_RETURN_IF_ERROR(u32(&n, field));
    TC_RETURN_IF_ERROR(need(n, field));
    s->assign(reinterpret_cast<const char *>(p_ + pos_), n);
    pos_ += n;
    return Status::ok();
  }
  Status bytes(std::vector<uint8_t> *out, uint64_t n, const char *field) {
    TC_RETURN_IF_ERROR(need(n, field));
    out->assign(p_ + pos_, p_ + pos_ + n);
    pos_ += n;
    return Status::ok();
  }
  /// Reads a u32 element count and checks that `count * minElementBytes`
  /// bytes remain, so that a corrupted count cannot cause a huge allocation.
  Status count(uint32_t *n, size_t minElementBytes, const char *field) {
    TC_RETURN_IF_ERROR(u32(n, field));
    if (minElementBytes && *n > remaining() / minElementBytes)
      return error(std::string(field) + " count " + std::to_string(*n) +
                   " does not fit in the " + std::to_string(remaining()) +
                   " bytes left");
    return Status::ok();
  }
  Status error(const std::string &msg) const {
    return dataLoss(what_ + ": " + msg + " (at byte " + std::to_string(pos_) + ")");
  }

private:
  Status need(uint64_t n, const char *field) const {
    if (n > remaining())
      return error(std::string("truncated while reading ") + field + " (needs " +
                   std::to_string(n) + " bytes, " + std::to_string(remaining()) +
                   " left)");
    return Status::ok();
  }
  Status le(uint64_t *v, int n, const char *field) {
    TC_RETURN_IF_ERROR(need(n, field));
    uint64_t x = 0;
    for (int i = 0; i < n; ++i)
      x |= static_cast<uint64_t>(p_[pos_ + i]) << (8 * i);
    pos_ += n;
    *v = x;
    return Status::ok();
  }

  const uint8_t *p_;
  size_t n_;
  size_t pos_ = 0;
  std::string what_;
};

} // namespace tc::rt

#endif // TC_RUNTIME_BASE_BYTE_IO_H
