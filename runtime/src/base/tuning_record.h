//===- tuning_record.h - choices a timing made, kept across processes -*- C++ -*-===//
//
// The CUDA backend times cuBLASLt's candidate algorithms (and a product's
// ways: epilogue, separate pass, tc's own kernel) on a matmul's first eager
// call and keeps the fastest. Where two candidates time alike, two processes
// can keep different ones, and different algorithms sum in different orders:
// a resumed run in a new process, or the same run started twice, would differ
// in the bits. A TuningRecord keeps each choice in a file, so that every later
// process on the same device, library and tc version makes the same one (as
// PyTorch's TunableOp keeps its results file).
//
// The file (one per identity: the device, cuBLASLt's and tc's versions):
//
//   tc-tuning 1<TAB><identity>
//   <key><TAB><value>            one line a choice
//
// A file of another identity or format is ignored (and replaced at the next
// put); a malformed line is skipped. put() merges the file's current lines
// with this record's (two processes tuning at once keep both's choices, the
// later writer's where they chose for the same key) and writes it atomically:
// a reader sees the old file or the new one, never a torn line.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_BASE_TUNING_RECORD_H
#define TC_RUNTIME_BASE_TUNING_RECORD_H

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "runtime/src/base/status.h"

namespace tc::rt {

class TuningRecord {
public:
  /// A record in memory only (nothing read or written).
  TuningRecord() = default;
  /// The record of `path` for `identity` (no tab or newline): its choices are
  /// read now (an absent or unreadable file: none).
  TuningRecord(std::string path, std::string identity);

  /// The value kept for `key`, if any.
  std::optional<std::string> get(const std::string &key) const;
  /// Keeps `value` for `key` (neither may hold a tab or newline, nor be
  /// empty) and, with a file, writes the file (merged with what it holds
  /// now). An error of the write leaves the choice kept in memory.
  Status put(const std::string &key, const std::string &value);

  const std::string &path() const { return path_; }
  const std::string &identity() const { return identity_; }

  /// `s` with every character outside [A-Za-z0-9._-] made '_': a file name.
  static std::string fileNameOf(const std::string &s);

private:
  /// The choices `path_` holds now (none when it is absent, unreadable or of
  /// another identity).
  std::map<std::string, std::string> readFile() const;

  std::string path_, identity_;
  mutable std::mutex mu_;
  std::map<std::string, std::string> choices_;
};

} // namespace tc::rt

#endif // TC_RUNTIME_BASE_TUNING_RECORD_H
