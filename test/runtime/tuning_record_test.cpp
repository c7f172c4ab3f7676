//===- tuning_record_test.cpp - choices kept across processes -------------===//
#include "runtime/src/base/tuning_record.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "runtime/include/tc/runtime.h"

namespace tc::rt {
namespace {

std::string freshDir(const std::string &name) {
  std::string dir = ::testing::TempDir() + "/tc_tuning_" + name + "_" + std::to_string(::getpid());
  std::string cmd = "rm -rf '" + dir + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return dir;
}

std::string slurp(const std::string &path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void spit(const std::string &path, const std::string &text) {
  std::ofstream f(path);
  f << text;
}

TEST(TuningRecord, KeptChoicesReachALaterRecordOfTheSameFile) {
  // The folder is made on the first put, parents included.
  std::string path = freshDir("roundtrip") + "/matmul/H200.tsv";
  {
    TuningRecord r(path, "NVIDIA H200 sm_90");
    EXPECT_FALSE(r.get("algo bf16 M=8 N=8 K=8 0a").has_value());
    ASSERT_TRUE(r.put("algo bf16 M=8 N=8 K=8 0a", "2 of 8").isOk());
    ASSERT_TRUE(r.put("path bf16 M=8 N=8 K=8 +bgradb", "separate").isOk());
    ASSERT_TRUE(r.put("algo bf16 M=8 N=8 K=8 0a", "3 of 8").isOk()); // a new choice replaces
    EXPECT_EQ(r.get("algo bf16 M=8 N=8 K=8 0a").value_or(""), "3 of 8");
  }
  TuningRecord later(path, "NVIDIA H200 sm_90");
  EXPECT_EQ(later.get("algo bf16 M=8 N=8 K=8 0a").value_or(""), "3 of 8");
  EXPECT_EQ(later.get("path bf16 M=8 N=8 K=8 +bgradb").value_or(""), "separate");
  EXPECT_EQ(slurp(path), "tc-tuning 1\tNVIDIA H200 sm_90\n"
                         "algo bf16 M=8 N=8 K=8 0a\t3 of 8\n"
                         "path bf16 M=8 N=8 K=8 +bgradb\tseparate\n");
}

TEST(TuningRecord, TwoWritersKeepBothsChoices) {
  // Two processes tuning at once: each put merges what the file holds now.
  std::string path = freshDir("merge") + "/t.tsv";
  TuningRecord a(path, "gpu"), b(path, "gpu");
  ASSERT_TRUE(a.put("k1", "0 of 4").isOk());
  ASSERT_TRUE(b.put("k2", "1 of 4").isOk());
  ASSERT_TRUE(a.put("k3", "own").isOk());
  TuningRecord c(path, "gpu");
  EXPECT_EQ(c.get("k1").value_or(""), "0 of 4");
  EXPECT_EQ(c.get("k2").value_or(""), "1 of 4");
  EXPECT_EQ(c.get("k3").value_or(""), "own");
}

TEST(TuningRecord, AnotherIdentityOrFormatIsNotRead) {
  std::string dir = freshDir("identity");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  std::string path = dir + "/t.tsv";
  spit(path, "tc-tuning 1\tNVIDIA H100 sm_90\nk\t1 of 4\n");
  EXPECT_FALSE(TuningRecord(path, "NVIDIA H200 sm_90").get("k").has_value());
  EXPECT_EQ(TuningRecord(path, "NVIDIA H100 sm_90").get("k").value_or(""), "1 of 4");
  spit(path, "tc-tuning 2\tNVIDIA H100 sm_90\nk\t1 of 4\n");
  EXPECT_FALSE(TuningRecord(path, "NVIDIA H100 sm_90").get("k").has_value());
  // The next put replaces a file of another identity with this one's.
  TuningRecord r(path, "NVIDIA H200 sm_90");
  ASSERT_TRUE(r.put("k2", "0 of 2").isOk());
  EXPECT_EQ(slurp(path), "tc-tuning 1\tNVIDIA H200 sm_90\nk2\t0 of 2\n");
}

TEST(TuningRecord, MalformedLinesAreSkipped) {
  std::string dir = freshDir("malformed");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  std::string path = dir + "/t.tsv";
  // No tab, two tabs, an empty key or value, a last line cut short.
  spit(path, "tc-tuning 1\tgpu\nno tab here\na\tb\tc\n\tv\nk\t\ngood\t1 of 2\ncut\t0 of");
  TuningRecord r(path, "gpu");
  EXPECT_EQ(r.get("good").value_or(""), "1 of 2");
  EXPECT_FALSE(r.get("no tab here").has_value());
  EXPECT_FALSE(r.get("a").has_value());
  EXPECT_FALSE(r.get("k").has_value());
  EXPECT_FALSE(r.get("cut").has_value());
  // A binary file, an empty one: no choices, no crash.
  spit(path, std::string("\0\xff\n\t\n", 5));
  EXPECT_FALSE(TuningRecord(path, "gpu").get("good").has_value());
  spit(path, "");
  EXPECT_FALSE(TuningRecord(path, "gpu").get("good").has_value());
}

TEST(TuningRecord, BadKeysAndUnwritableFoldersAreErrorsNotCrashes) {
  TuningRecord memory; // no file: kept in memory only
  EXPECT_TRUE(memory.put("k", "v").isOk());
  EXPECT_EQ(memory.get("k").value_or(""), "v");
  EXPECT_FALSE(memory.put("a\tb", "v").isOk());
  EXPECT_FALSE(memory.put("k", "line\nbreak").isOk());
  EXPECT_FALSE(memory.put("", "v").isOk());
  // A folder that cannot be made (a file is in the way): the put fails, the
  // choice stays in memory.
  std::string dir = freshDir("blocked");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  spit(dir + "/file", "x");
  TuningRecord r(dir + "/file/matmul/t.tsv", "gpu");
  Status st = r.put("k", "0 of 2");
  EXPECT_FALSE(st.isOk());
  EXPECT_EQ(r.get("k").value_or(""), "0 of 2");
}

TEST(TuningRecord, FileNamesAreSafe) {
  EXPECT_EQ(TuningRecord::fileNameOf("NVIDIA H200 sm_90 132 SMs cuBLASLt 130100 tc 0.3.0"),
            "NVIDIA_H200_sm_90_132_SMs_cuBLASLt_130100_tc_0.3.0");
  EXPECT_EQ(TuningRecord::fileNameOf("a/../b"), "a_.._b");
}

TEST(TuningRecord, CacheDirFollowsTcCacheDir) {
  // tc_cache_dir() is read once per process; this only checks it is a
  // stable string and, where TC_CACHE_DIR or HOME was set, not empty.
  const char *d = tc_cache_dir();
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d, tc_cache_dir());
  const char *env = std::getenv("TC_CACHE_DIR");
  const char *home = std::getenv("HOME");
  if (env && *env) {
    EXPECT_STREQ(d, env);
  } else if (home && *home) {
    EXPECT_EQ(std::string(d), std::string(home) + "/.cache/tc");
  }
}

} // namespace
} // namespace tc::rt
