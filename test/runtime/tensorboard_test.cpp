//===- tensorboard_test.cpp - TensorBoard event files and CRC-32C ---------===//
//
// The framing and the Event encoding are checked byte for byte against what
// tensorboard's own Python writer produces (the hex strings below come from
// tensorboard 2.21's event_pb2 + summary.writer.record_writer.RecordWriter);
// written files are parsed back by the small TFRecord/protobuf reader here.
// tensorboard's own reader reads them in test/scripts/test_check_tensorboard.py:
// with TC_TB_OUT=DIR, TensorBoard.WritesRunForCheckScript leaves an event file
// and the matching metrics.jsonl in DIR for it.
//
//===----------------------------------------------------------------------===//
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <signal.h>
#include <string>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/src/base/crc.h"
#include "runtime/src/base/file_io.h"
#include "runtime/src/base/tensorboard.h"

namespace tc::rt {
namespace {

std::vector<uint8_t> fromHex(const std::string &hex) {
  std::vector<uint8_t> b;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    b.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  return b;
}

uint32_t crcOf(const std::string &s) {
  return crc32c(reinterpret_cast<const uint8_t *>(s.data()), s.size());
}

std::string makeTempDir() {
  char tmpl[] = "/tmp/tc_tensorboard_test.XXXXXX";
  const char *d = ::mkdtemp(tmpl);
  return d ? d : "";
}

std::vector<std::string> listDir(const std::string &dir) {
  std::vector<std::string> names;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *e = ::readdir(d))
      if (e->d_name[0] != '.')
        names.push_back(e->d_name);
    ::closedir(d);
  }
  return names;
}

//===----------------------------------------------------------------------===//
// A reader of what the writer writes: TFRecords, then the Event fields.
//===----------------------------------------------------------------------===//

uint64_t le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i)
    v |= uint64_t(p[i]) << (8 * i);
  return v;
}

/// Splits `file` into its records, checking both CRCs of each.
::testing::AssertionResult readRecords(const std::vector<uint8_t> &file,
                                       std::vector<std::vector<uint8_t>> *records) {
  size_t pos = 0;
  while (pos < file.size()) {
    if (file.size() - pos < 12)
      return ::testing::AssertionFailure() << "truncated length at byte " << pos;
    uint64_t n = le(&file[pos], 8);
    if (le(&file[pos + 8], 4) != maskCrc32c(crc32c(&file[pos], 8)))
      return ::testing::AssertionFailure() << "bad length CRC at byte " << pos;
    pos += 12;
    if (file.size() - pos < n + 4)
      return ::testing::AssertionFailure() << "truncated record at byte " << pos;
    std::vector<uint8_t> data(file.begin() + pos, file.begin() + pos + n);
    if (le(&file[pos + n], 4) != maskCrc32c(crc32c(data.data(), n)))
      return ::testing::AssertionFailure() << "bad data CRC at byte " << pos;
    pos += n + 4;
    records->push_back(std::move(data));
  }
  return ::testing::AssertionSuccess();
}

struct Field {
  uint32_t number = 0, wireType = 0;
  uint64_t num = 0;          // varint, fixed64, fixed32
  std::vector<uint8_t> data; // length-delimited
};

/// The fields of one protobuf message; false on malformed input.
bool parseMessage(const std::vector<uint8_t> &m, std::vector<Field> *fields) {
  size_t pos = 0;
  auto varint = [&](uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (pos >= m.size())
        return false;
      uint8_t b = m[pos++];
      *v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80))
        return true;
    }
    return false;
  };
  while (pos < m.size()) {
    uint64_t key;
    if (!varint(&key))
      return false;
    Field f;
    f.number = static_cast<uint32_t>(key >> 3);
    f.wireType = key & 7;
    if (f.wireType == 0) {
      if (!varint(&f.num))
        return false;
    } else if (f.wireType == 1 || f.wireType == 5) {
      size_t n = f.wireType == 1 ? 8 : 4;
      if (m.size() - pos < n)
        return false;
      f.num = le(&m[pos], static_cast<int>(n));
      pos += n;
    } else if (f.wireType == 2) {
      uint64_t n;
      if (!varint(&n) || m.size() - pos < n)
        return false;
      f.data.assign(m.begin() + pos, m.begin() + pos + n);
      pos += n;
    } else {
      return false;
    }
    fields->push_back(std::move(f));
  }
  return true;
}

struct Event {
  double wallTime = 0;
  int64_t step = 0;
  std::string fileVersion;
  std::vector<std::pair<std::string, float>> values; // (tag, simple_value)
};

::testing::AssertionResult parseEvent(const std::vector<uint8_t> &bytes, Event *ev) {
  std::vector<Field> fields;
  if (!parseMessage(bytes, &fields))
    return ::testing::AssertionFailure() << "malformed Event";
  for (const Field &f : fields) {
    if (f.number == 1 && f.wireType == 1) {
      std::memcpy(&ev->wallTime, &f.num, 8);
    } else if (f.number == 2 && f.wireType == 0) {
      ev->step = static_cast<int64_t>(f.num);
    } else if (f.number == 3 && f.wireType == 2) {
      ev->fileVersion.assign(f.data.begin(), f.data.end());
    } else if (f.number == 5 && f.wireType == 2) {
      std::vector<Field> summary;
      if (!parseMessage(f.data, &summary))
        return ::testing::AssertionFailure() << "malformed Summary";
      for (const Field &s : summary) {
        std::vector<Field> value;
        if (s.number != 1 || s.wireType != 2 || !parseMessage(s.data, &value))
          return ::testing::AssertionFailure() << "malformed Summary.value";
        std::pair<std::string, float> tv;
        for (const Field &v : value) {
          if (v.number == 1 && v.wireType == 2) {
            tv.first.assign(v.data.begin(), v.data.end());
          } else if (v.number == 2 && v.wireType == 5) {
            uint32_t b = static_cast<uint32_t>(v.num);
            std::memcpy(&tv.second, &b, 4);
          } else {
            return ::testing::AssertionFailure() << "unexpected Value field " << v.number;
          }
        }
        ev->values.push_back(tv);
      }
    } else {
      return ::testing::AssertionFailure() << "unexpected Event field " << f.number;
    }
  }
  return ::testing::AssertionSuccess();
}

/// Reads an event file written by EventWriter into its events.
::testing::AssertionResult readEventFile(const std::string &path, std::vector<Event> *events) {
  std::vector<uint8_t> bytes;
  Status st = readFileBytes(path, &bytes);
  if (!st.isOk())
    return ::testing::AssertionFailure() << st.toString();
  std::vector<std::vector<uint8_t>> records;
  if (auto r = readRecords(bytes, &records); !r)
    return r;
  for (const auto &rec : records) {
    Event ev;
    if (auto r = parseEvent(rec, &ev); !r)
      return r;
    events->push_back(ev);
  }
  return ::testing::AssertionSuccess();
}

//===----------------------------------------------------------------------===//
// CRC-32C and the encoding
//===----------------------------------------------------------------------===//

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(crcOf("123456789"), 0xE3069283u);
  EXPECT_EQ(crcOf(""), 0u);
  // RFC 3720 (iSCSI), appendix B.4.
  std::vector<uint8_t> zeros(32, 0x00), ones(32, 0xFF), up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<uint8_t>(i);
    down[i] = static_cast<uint8_t>(31 - i);
  }
  EXPECT_EQ(crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(crc32c(up.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(crc32c(down.data(), 32), 0x113FDB5Cu);
  // The zlib CRC-32 that shares the implementation is unchanged.
  EXPECT_EQ(crc32(reinterpret_cast<const uint8_t *>("123456789"), 9), 0xCBF43926u);
}

TEST(Crc32c, ContinuesAcrossChunks) {
  const std::string s = "The quick brown fox jumps over the lazy dog";
  const auto *p = reinterpret_cast<const uint8_t *>(s.data());
  for (size_t cut = 0; cut <= s.size(); cut += 7)
    EXPECT_EQ(crc32c(p + cut, s.size() - cut, crc32c(p, cut)), crcOf(s)) << cut;
}

TEST(TensorBoard, MaskIsTfRecords) {
  // mask(c) = rotate right by 15, plus 0xa282ead8 (mod 2^32).
  EXPECT_EQ(maskCrc32c(0), 0xa282ead8u);
  EXPECT_EQ(maskCrc32c(0x00008000u), 0xa282ead9u);
  EXPECT_EQ(maskCrc32c(0xE3069283u), ((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xa282ead8u);
}

TEST(TensorBoard, ScalarEventBytesAreTensorBoards) {
  // Event(wall_time=1700000000.25, step=7, summary=[("train/loss", 2.5)]).
  const std::string event = "0900001040fc54d94110072a130a110a0a747261696e2f6c6f73731500002040";
  EXPECT_EQ(encodeScalarEvent("train/loss", 7, 2.5, 1700000000.25), fromHex(event));
  std::vector<uint8_t> record;
  appendTfRecord(fromHex(event), &record);
  EXPECT_EQ(record, fromHex("200000000000000029eda950" + event + "9b044a25"));
  // A negative step (10-byte varint) and an infinite value.
  EXPECT_EQ(encodeScalarEvent("val/loss", -3, INFINITY, 0.5),
            fromHex("09000000000000e03f10fdffffffffffffffff012a110a0f0a0876616c2f6c6f7373150000807f"));
}

TEST(TensorBoard, FileVersionRecordIsTensorBoards) {
  std::vector<uint8_t> record;
  appendTfRecord(encodeFileVersionEvent(1700000000.25), &record);
  EXPECT_EQ(record, fromHex("1800000000000000a37f4b22"
                            "0900001040fc54d9411a0d627261696e2e4576656e743a32"
                            "338d2fe9"));
}

TEST(TensorBoard, ValuesRoundToFloatWithoutOverflow) {
  auto stored = [](double v) {
    Event ev;
    EXPECT_TRUE(parseEvent(encodeScalarEvent("t", 1, v, 0), &ev));
    return ev.values.at(0).second;
  };
  EXPECT_EQ(stored(0.1), 0.1f);
  EXPECT_EQ(stored(-1e-50), -0.0f);
  EXPECT_EQ(stored(DBL_MAX), HUGE_VALF);
  EXPECT_EQ(stored(-1e39), -HUGE_VALF);
  // Between FLT_MAX and FLT_MAX + half an ulp rounds down, from there up.
  const double halfway = std::ldexp(1.0, 128) - std::ldexp(1.0, 103);
  EXPECT_EQ(stored(std::nextafter(halfway, 0.0)), FLT_MAX);
  EXPECT_EQ(stored(-std::nextafter(halfway, 0.0)), -FLT_MAX);
  EXPECT_EQ(stored(halfway), HUGE_VALF);
  EXPECT_TRUE(std::isnan(stored(NAN)));
}

//===----------------------------------------------------------------------===//
// EventWriter
//===----------------------------------------------------------------------===//

TEST(TensorBoard, WrittenFileParsesBack) {
  std::string root = makeTempDir();
  ASSERT_FALSE(root.empty());
  std::string dir = root + "/logs/run1"; // mkdir -p
  EventWriter w;
  ASSERT_TRUE(w.open(dir).isOk());
  EXPECT_EQ(w.path().rfind(dir + "/events.out.tfevents.", 0), 0u) << w.path();
  EXPECT_EQ(w.path().substr(w.path().size() - 3), ".tc");
  const std::vector<std::pair<std::string, double>> scalars = {
      {"train/loss", 2.75}, {"train/lr", 3e-4}, {"val/loss", 0.1}};
  for (int64_t step = 1; step <= 3; ++step)
    for (const auto &s : scalars)
      ASSERT_TRUE(w.scalar(s.first, step, s.second * step, 1e9 + step).isOk());
  ASSERT_TRUE(w.close().isOk());
  EXPECT_FALSE(w.isOpen());

  std::vector<Event> events;
  ASSERT_TRUE(readEventFile(w.path(), &events));
  ASSERT_EQ(events.size(), 1 + 3 * scalars.size());
  EXPECT_EQ(events[0].fileVersion, "brain.Event:2");
  EXPECT_GT(events[0].wallTime, 1.6e9);
  EXPECT_TRUE(events[0].values.empty());
  size_t i = 1;
  for (int64_t step = 1; step <= 3; ++step) {
    for (const auto &s : scalars) {
      const Event &ev = events[i++];
      EXPECT_EQ(ev.step, step);
      EXPECT_EQ(ev.wallTime, 1e9 + step);
      ASSERT_EQ(ev.values.size(), 1u);
      EXPECT_EQ(ev.values[0].first, s.first);
      EXPECT_EQ(ev.values[0].second, static_cast<float>(s.second * step));
    }
  }
}

TEST(TensorBoard, SecondWriterGetsItsOwnFile) {
  std::string dir = makeTempDir();
  EventWriter a, b;
  ASSERT_TRUE(a.open(dir).isOk());
  ASSERT_TRUE(b.open(dir).isOk());
  EXPECT_NE(a.path(), b.path());
  EXPECT_EQ(b.path().substr(b.path().size() - 3), ".tc");
  ASSERT_TRUE(a.scalar("train/loss", 1, 1.0, 1).isOk());
  ASSERT_TRUE(b.scalar("train/loss", 1, 2.0, 1).isOk());
  ASSERT_TRUE(a.close().isOk());
  ASSERT_TRUE(b.close().isOk());
  EXPECT_EQ(listDir(dir).size(), 2u);
  std::vector<Event> ea, eb;
  ASSERT_TRUE(readEventFile(a.path(), &ea));
  ASSERT_TRUE(readEventFile(b.path(), &eb));
  ASSERT_EQ(ea.size(), 2u);
  ASSERT_EQ(eb.size(), 2u);
  EXPECT_EQ(ea[1].values.at(0).second, 1.0f);
  EXPECT_EQ(eb[1].values.at(0).second, 2.0f);
}

TEST(TensorBoard, MisuseIsAnError) {
  EventWriter w;
  Status st = w.scalar("train/loss", 1, 1.0, 0);
  EXPECT_EQ(st.code(), StatusCode::FailedPrecondition);
  EXPECT_NE(st.message().find("train/loss"), std::string::npos) << st.toString();
  EXPECT_EQ(w.flush().code(), StatusCode::FailedPrecondition);
  EXPECT_TRUE(w.close().isOk());
  std::string dir = makeTempDir();
  ASSERT_TRUE(w.open(dir).isOk());
  EXPECT_EQ(w.open(dir).code(), StatusCode::FailedPrecondition);
}

TEST(TensorBoard, DirectoryThatCannotBeMadeNamesThePath) {
  std::string root = makeTempDir();
  std::string file = root + "/plain";
  const uint8_t byte = 'x';
  ASSERT_TRUE(writeFileAtomic(file, &byte, 1).isOk());
  EventWriter w;
  Status st = w.open(file + "/logs");
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find(file), std::string::npos) << st.toString();
  EXPECT_FALSE(w.isOpen());
}

/// While alive, the OS refuses writes past `bytes` of any file (EFBIG; SIGXFSZ
/// is ignored so that it does not end the process).
struct FileSizeLimit {
  explicit FileSizeLimit(rlim_t bytes) {
    ok = ::getrlimit(RLIMIT_FSIZE, &old) == 0;
    handler = ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = old;
    small.rlim_cur = bytes;
    ok = ok && ::setrlimit(RLIMIT_FSIZE, &small) == 0;
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old);
    ::signal(SIGXFSZ, handler);
  }
  bool ok;
  struct rlimit old;
  void (*handler)(int);
};

void expectStickyWriteError(EventWriter &w, const Status &st) {
  ASSERT_FALSE(st.isOk());
  EXPECT_EQ(st.code(), StatusCode::IoError);
  EXPECT_NE(st.message().find(w.path()), std::string::npos) << st.toString();
  // The error sticks: nothing is written after the hole.
  EXPECT_EQ(w.scalar("train/loss", 2000, 1.0, 0).message(), st.message());
  EXPECT_EQ(w.flush().message(), st.message());
  EXPECT_EQ(w.close().message(), st.message());
}

TEST(TensorBoard, WriteErrorIsAStatusNamingTheFile) {
  // Without flush(): 1000 records (~30 KB) overflow stdio's buffer, so
  // scalar() itself must see the OS refuse the write.
  EventWriter w;
  ASSERT_TRUE(w.open(makeTempDir()).isOk());
  Status st;
  {
    FileSizeLimit limit(4096);
    ASSERT_TRUE(limit.ok);
    for (int step = 0; step < 1000 && st.isOk(); ++step)
      st = w.scalar("train/loss", step, 1.0, 0);
  }
  expectStickyWriteError(w, st);
}

TEST(TensorBoard, FlushErrorIsAStatusNamingTheFile) {
  // Three records fit in stdio's buffer; the file may not grow past the
  // file_version record, so flush() is where the OS refuses them.
  EventWriter w;
  ASSERT_TRUE(w.open(makeTempDir()).isOk());
  Status st;
  {
    FileSizeLimit limit(64);
    ASSERT_TRUE(limit.ok);
    for (int step = 0; step < 3; ++step)
      ASSERT_TRUE(w.scalar("train/loss", step, 1.0, 0).isOk());
    st = w.flush();
  }
  expectStickyWriteError(w, st);
}

//===----------------------------------------------------------------------===//
// A run for scripts/check_tensorboard.py
//===----------------------------------------------------------------------===//

/// Writes what `tc-run --metrics M --tensorboard D` will write for a short
/// run: train lines (one with grad_norm/mfu null), a val line and an eval
/// line, and the scalars of the tags the metrics schema names, with values
/// whose float32 rounding differs from the double (0.1, 1/3). Into
/// $TC_TB_OUT when set (test/scripts/test_check_tensorboard.py reads it back
/// with tensorboard's reader), else into a temporary folder.
TEST(TensorBoard, WritesRunForCheckScript) {
  const char *out = std::getenv("TC_TB_OUT");
  std::string dir = out && *out ? out : makeTempDir();
  EventWriter w;
  ASSERT_TRUE(w.open(dir + "/tb").isOk());
  std::string jsonl;
  auto num = [](double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  double elapsed = 0;
  for (int64_t step = 1; step <= 4; ++step) {
    double loss = 4.0 / 3.0 + 0.1 * static_cast<double>(5 - step);
    double smooth = loss * 1.01, lr = 6e-4 * static_cast<double>(step) / 4;
    double gradNorm = 0.7 + 0.01 * static_cast<double>(step), tps = 12345.678 * step;
    double mfu = 0.31 + 0.001 * static_cast<double>(step);
    bool nulls = step == 2; // grad_norm and mfu unknown at this step
    elapsed += 0.25;
    jsonl += "{\"schema\": \"tc.metrics/1\", \"kind\": \"train\", \"step\": " +
             std::to_string(step) + ", \"loss\": " + num(loss) +
             ", \"loss_smooth\": " + num(smooth) + ", \"lr\": " + num(lr) +
             ", \"grad_norm\": " + (nulls ? "null" : num(gradNorm)) +
             ", \"tokens\": 512, \"tokens_total\": " + std::to_string(512 * step) +
             ", \"tokens_per_s\": " + num(tps) + ", \"step_time_s\": 0.25" +
             ", \"elapsed_s\": " + num(elapsed) +
             ", \"mfu\": " + (nulls ? "null" : num(mfu)) + ", \"hfu\": null}\n";
    double wall = 1.7e9 + elapsed;
    ASSERT_TRUE(w.scalar("train/loss", step, loss, wall).isOk());
    ASSERT_TRUE(w.scalar("train/loss_smooth", step, smooth, wall).isOk());
    ASSERT_TRUE(w.scalar("train/lr", step, lr, wall).isOk());
    if (!nulls) {
      ASSERT_TRUE(w.scalar("train/grad_norm", step, gradNorm, wall).isOk());
    }
    ASSERT_TRUE(w.scalar("train/tokens_per_s", step, tps, wall).isOk());
    if (!nulls) {
      ASSERT_TRUE(w.scalar("train/mfu", step, mfu, wall).isOk());
    }
    if (step % 2 == 0) {
      double val = loss + 0.1;
      jsonl += "{\"schema\": \"tc.metrics/1\", \"kind\": \"val\", \"step\": " +
               std::to_string(step) + ", \"val_loss\": " + num(val) +
               ", \"val_tokens\": 2048}\n";
      ASSERT_TRUE(w.scalar("val/loss", step, val, wall).isOk());
    }
  }
  jsonl += "{\"schema\": \"tc.metrics/1\", \"kind\": \"eval\", \"step\": 4, "
           "\"function\": \"eval\", \"loss\": 1.5}\n";
  ASSERT_TRUE(w.close().isOk());
  const auto *p = reinterpret_cast<const uint8_t *>(jsonl.data());
  ASSERT_TRUE(writeFileAtomic(dir + "/metrics.jsonl", p, jsonl.size()).isOk());
  std::vector<Event> events;
  ASSERT_TRUE(readEventFile(w.path(), &events));
  EXPECT_EQ(events.size(), 1u + 4 * 6 - 2 + 2);
}

} // namespace
} // namespace tc::rt
