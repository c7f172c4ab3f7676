//===- tensorboard.cpp - TensorBoard event files --------------------------===//
#include "runtime/src/base/tensorboard.h"

#include <cctype>
#include <cerrno>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <unistd.h>

#include "runtime/src/base/crc.h"
#include "runtime/src/base/proto_writer.h"
#include "runtime/src/base/file_io.h"

namespace tc::rt {

namespace {


// Event, Summary and Summary.Value field numbers (tensorflow/core/util/event.proto,
// tensorflow/core/framework/summary.proto).
constexpr uint32_t kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3,
                   kEventSummary = 5;
constexpr uint32_t kSummaryValue = 1;
constexpr uint32_t kValueTag = 1, kValueSimpleValue = 2;

/// `v` rounded to the nearest float. A double cast to float outside float's
/// range is undefined behaviour in C++, so the overflow is spelled out: values
/// from FLT_MAX + half an ulp (2^128 - 2^103, where round-to-nearest-even
/// goes up) on are infinite, those below it round down to FLT_MAX.
float toFloat(double v) {
  const double overflow = std::ldexp(1.0, 128) - std::ldexp(1.0, 103);
  double a = std::fabs(v);
  if (a >= overflow && std::isfinite(v))
    return v > 0 ? HUGE_VALF : -HUGE_VALF;
  if (a > FLT_MAX && std::isfinite(v))
    return v > 0 ? FLT_MAX : -FLT_MAX;
  return static_cast<float>(v);
}

double nowSeconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

/// This machine's name, reduced to characters that are safe in a file name.
std::string hostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0')
    return "localhost";
  std::string s(buf);
  for (char &c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_'))
      c = '_';
  return s;
}

} // namespace

uint32_t maskCrc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

void appendTfRecord(const std::vector<uint8_t> &data, std::vector<uint8_t> *out) {
  uint8_t len[8];
  uint64_t n = data.size();
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<uint8_t>(n >> (8 * i));
  auto u32 = [out](uint32_t v) {
    for (int i = 0; i < 4; ++i)
      out->push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  out->insert(out->end(), len, len + 8);
  u32(maskCrc32c(crc32c(len, 8)));
  out->insert(out->end(), data.begin(), data.end());
  u32(maskCrc32c(crc32c(data.data(), data.size())));
}

std::vector<uint8_t> encodeFileVersionEvent(double wallTime) {
  std::vector<uint8_t> ev;
  ProtoWriter w(&ev);
  w.f64(kEventWallTime, wallTime);
  w.str(kEventFileVersion, "brain.Event:2");
  return ev;
}

std::vector<uint8_t> encodeScalarEvent(const std::string &tag, int64_t step, double value,
                                       double wallTime) {
  std::vector<uint8_t> val, summary, ev;
  ProtoWriter v(&val);
  v.str(kValueTag, tag);
  v.f32(kValueSimpleValue, toFloat(value));
  ProtoWriter(&summary).message(kSummaryValue, val);
  ProtoWriter w(&ev);
  w.f64(kEventWallTime, wallTime);
  // int64 is a varint of the two's complement: a negative step takes 10 bytes.
  w.varint(kEventStep, static_cast<uint64_t>(step));
  w.message(kEventSummary, summary);
  return ev;
}

EventWriter::~EventWriter() { (void)close(); }

Status EventWriter::fail(Status st) {
  if (error_.isOk())
    error_ = st;
  return error_;
}

Status EventWriter::open(const std::string &dir) {
  if (file_)
    return failedPrecondition("the event file '" + path_ + "' is already open");
  error_ = Status::ok();
  TC_RETURN_IF_ERROR(makeDirectories(dir).withPrefix("cannot open a TensorBoard log directory"));
  std::string stem = dir + (dir.back() == '/' ? "" : "/") + "events.out.tfevents." +
                     std::to_string(static_cast<long long>(std::time(nullptr))) + "." +
                     hostName();
  // O_EXCL: two writers started in the same second on one host must not
  // share (and interleave into) one file.
  int fd = -1;
  std::string path;
  for (int n = 1; fd < 0 && n <= 1000; ++n) {
    path = stem + (n == 1 ? "" : "." + std::to_string(n)) + ".tc";
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST)
      return ioError("cannot create event file '" + path + "': " + std::strerror(errno));
  }
  if (fd < 0)
    return ioError("cannot create event file '" + path + "': 1000 names taken");
  file_ = ::fdopen(fd, "wb");
  if (!file_) {
    Status st = ioError("cannot open event file '" + path + "': " + std::strerror(errno));
    ::close(fd);
    return st;
  }
  path_ = path;
  TC_RETURN_IF_ERROR(writeRecord(encodeFileVersionEvent(nowSeconds())));
  return flush();
}

Status EventWriter::writeRecord(const std::vector<uint8_t> &event) {
  std::vector<uint8_t> record;
  record.reserve(event.size() + 16);
  appendTfRecord(event, &record);
  errno = 0;
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size())
    return fail(ioError("cannot write event file '" + path_ + "': " +
                        (errno ? std::strerror(errno) : "short write")));
  return Status::ok();
}

Status EventWriter::scalar(const std::string &tag, int64_t step, double value,
                           double wallTime) {
  if (!error_.isOk())
    return error_;
  if (!file_)
    return failedPrecondition("cannot write scalar '" + tag + "': no event file is open");
  return writeRecord(encodeScalarEvent(tag, step, value, wallTime));
}

Status EventWriter::flush() {
  if (!error_.isOk())
    return error_;
  if (!file_)
    return failedPrecondition("cannot flush: no event file is open");
  if (std::fflush(file_) != 0)
    return fail(ioError("cannot write event file '" + path_ + "': " + std::strerror(errno)));
  return Status::ok();
}

Status EventWriter::close() {
  if (!file_)
    return Status::ok();
  Status st = error_.isOk() ? flush() : error_;
  if (std::fclose(file_) != 0 && st.isOk())
    st = fail(ioError("cannot close event file '" + path_ + "': " + std::strerror(errno)));
  file_ = nullptr;
  return st;
}

} // namespace tc::rt
