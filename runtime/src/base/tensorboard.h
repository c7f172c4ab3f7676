//===- tensorboard.h - TensorBoard event files ------------------*- C++ -*-===//
//
// Writes the scalar summaries of a run as TensorBoard reads them, with no
// TensorFlow or protobuf dependency: the file is a sequence of TFRecords
//
//   u64 length (LE) | u32 masked CRC-32C of the length bytes |
//   length bytes of data | u32 masked CRC-32C of the data
//
// (mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8), each data a serialized
// tensorflow.Event message, encoded here by hand:
//
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3;
//             Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
//
// The first record is the file_version "brain.Event:2" event that TensorBoard
// expects; every scalar() is one Event with one Value.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_BASE_TENSORBOARD_H
#define TC_RUNTIME_BASE_TENSORBOARD_H

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/src/base/status.h"

namespace tc::rt {

/// The TFRecord mask of a CRC-32C (stored CRCs are masked so that a CRC of
/// data that itself holds CRCs is not degenerate).
uint32_t maskCrc32c(uint32_t crc);

/// Appends `data` framed as one TFRecord to `out`.
void appendTfRecord(const std::vector<uint8_t> &data, std::vector<uint8_t> *out);

/// The serialized Event that starts every event file.
std::vector<uint8_t> encodeFileVersionEvent(double wallTime);

/// The serialized Event of one scalar summary. `value` is stored as a float
/// (simple_value), rounded to nearest; finite values beyond float's range
/// become +-inf as that rounding gives, NaN stays NaN.
std::vector<uint8_t> encodeScalarEvent(const std::string &tag, int64_t step, double value,
                                       double wallTime);

/// One event file in a log directory. Not thread-safe. The first error of a
/// write, flush or close is kept: every later call returns it again, so that
/// a run never goes on logging into a file that has a hole.
class EventWriter {
public:
  EventWriter() = default;
  /// Closes the file; an error closing it is lost then, so callers that care
  /// call close() first.
  ~EventWriter();
  EventWriter(const EventWriter &) = delete;
  EventWriter &operator=(const EventWriter &) = delete;

  /// Creates `dir` (mkdir -p) and in it a new file
  /// events.out.tfevents.<unix seconds>.<hostname>.tc (".<n>.tc" when that
  /// name is taken: an existing file is never appended to or replaced), and
  /// writes the file_version event. FailedPrecondition when already open.
  Status open(const std::string &dir);

  /// Appends one scalar event (tag, e.g. "train/loss"; step; value; wall
  /// time in seconds since the epoch). Buffered: flush() makes it visible.
  /// FailedPrecondition when not open.
  Status scalar(const std::string &tag, int64_t step, double value, double wallTime);

  /// Hands everything written so far to the OS.
  Status flush();

  /// Flushes and closes the file. OK when not open.
  Status close();

  bool isOpen() const { return file_ != nullptr; }
  /// The path of the file open() created; empty before.
  const std::string &path() const { return path_; }

private:
  Status writeRecord(const std::vector<uint8_t> &event);
  /// Keeps `st` as the sticky error when it is the first one.
  Status fail(Status st);

  std::FILE *file_ = nullptr;
  std::string path_;
  Status error_;
};

} // namespace tc::rt

#endif // TC_RUNTIME_BASE_TENSORBOARD_H
