//===- tc_run_test.cpp - the tc-run tool end to end -----------------------===//
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include "runtime/src/base/npy.h"
#include "test_util.h"

namespace tc::rt {
namespace {

using namespace tc::rt::test;

struct Result {
  int code;
  std::string out;
};

Result runTool(const std::string &args) {
  std::string cmd = std::string(TC_RUN_PATH) + " " + args + " 2>&1";
  FILE *p = popen(cmd.c_str(), "r");
  Result r{-1, ""};
  if (!p)
    return r;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof buf, p))
    r.out.append(buf, n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class TcRun : public ::testing::Test {
protected:
  void SetUp() override {
    // One folder per test: ctest runs the tests of this fixture in parallel.
    dir = ::testing::TempDir() + "/tc_run_test_" +
          ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()), 0);
    Artifact a;
    a.target = "cpu";
    appendParameter(&a, "wte", tensor(f32({4, 2}), {1, 2, 3, 4, 5, 6, 7, 8}));
    FnBuilder b("eval_step");
    int32_t ids = b.input("ids", i64({3}));
    int32_t labels = b.input("labels", i64({3}));
    int32_t w = b.op("tc.parameter", {}, f32({4, 2}), {{"name", aStr("wte")}});
    int32_t logits = b.op("tc.gather", {w, ids}, f32({3, 2}), {{"axis", aInt(0)}});
    int32_t loss = b.op("tc.cross_entropy", {logits, labels}, f32({}), {});
    b.output("loss", loss);
    b.output("logits", logits);
    a.functions.push_back(b.fn);
    FnBuilder c("infer");
    int32_t x = c.input("x", f32({2}));
    c.output("y", c.op("tc.neg", {x}, f32({2})));
    a.functions.push_back(c.fn);
    model = dir + "/m.tca";
    ASSERT_TRUE(writeArtifact(a, model).isOk());
    ASSERT_TRUE(writeNpy(dir + "/ids.npy", itensor(i64({3}), {0, 3, 1})).isOk());
    ASSERT_TRUE(writeNpy(dir + "/labels.npy", itensor(i64({3}), {1, 0, -100})).isOk());
    ASSERT_TRUE(writeNpy(dir + "/bad.npy", itensor(i32({3}), {0, 3, 1})).isOk());
    ASSERT_TRUE(writeNpy(dir + "/oob.npy", itensor(i64({3}), {0, 9, 1})).isOk());
  }
  std::string feeds() const {
    return " --feed ids=" + dir + "/ids.npy --feed labels=" + dir + "/labels.npy";
  }
  std::string dir, model;
};

TEST_F(TcRun, EvaluatesPrintsAndWritesMetrics) {
  Result r = runTool(model + " --eval" + feeds() + " --metrics " + dir + "/m.jsonl --save-outputs " +
                     dir + "/out");
  ASSERT_EQ(r.code, 0) << r.out;
  // Row 0: logits [1, 2], label 1 -> log(1 + e^-1); row 1: [7, 8], label 0 -> log(1 + e).
  EXPECT_NE(r.out.find("loss: f32 scalar = 0.813262"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("logits: f32 3x2 [1, 2, 7, 8, 3, 4]"), std::string::npos) << r.out;
  std::ifstream m(dir + "/m.jsonl");
  std::stringstream ss;
  ss << m.rdbuf();
  EXPECT_EQ(ss.str().rfind("{\"schema\": \"tc.metrics/1\", \"kind\": \"eval\", \"step\": null, "
                           "\"function\": \"eval_step\", \"loss\": 0.8132",
                           0),
            0u)
      << ss.str();
  HostTensor saved;
  ASSERT_TRUE(readNpy(dir + "/out/logits.npy", &saved).isOk());
  EXPECT_EQ(saved.type, f32({3, 2}));
  // A second evaluation appends a line.
  ASSERT_EQ(runTool(model + feeds() + " --metrics=" + dir + "/m.jsonl").code, 0);
  std::ifstream m2(dir + "/m.jsonl");
  int lines = 0;
  for (std::string l; std::getline(m2, l);)
    ++lines;
  EXPECT_EQ(lines, 2);
  // --function picks another function.
  ASSERT_TRUE(writeNpy(dir + "/x.npy", tensor(f32({2}), {1, -2})).isOk());
  r = runTool(model + " --eval --function infer --feed x=" + dir + "/x.npy --ref-precision f64");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("y: f32 2 [-1, 2]"), std::string::npos) << r.out;
}

void expectError(const Result &r, int code, const std::string &needle) {
  EXPECT_EQ(r.code, code) << r.out;
  EXPECT_EQ(r.out.rfind("tc-run: error: ", 0), 0u) << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "one line: " << r.out;
  EXPECT_NE(r.out.find(needle), std::string::npos) << r.out;
}

TEST_F(TcRun, UsageAndInputErrorsExit2) {
  expectError(runTool(dir + "/missing.tca --eval" + feeds()), 2, "missing.tca");
  expectError(runTool(dir + "/ids.npy --eval" + feeds()), 2, "not a tc artifact");
  expectError(runTool(model + " --eval --feed ids=" + dir + "/ids.npy"), 2,
              "missing --feed for input 'labels' (i64 3)");
  expectError(runTool(model + " --eval" + feeds() + " --feed extra=" + dir + "/ids.npy"), 2,
              "has no input 'extra'");
  expectError(runTool(model + " --eval --feed ids=" + dir + "/bad.npy --feed labels=" + dir +
                      "/labels.npy"),
              2, "input 'ids': expected i64 3, got i32 3");
  expectError(runTool(model + " --eval --feed ids=" + dir + "/nope.npy --feed labels=" + dir +
                      "/labels.npy"),
              2, "nope.npy");
  expectError(runTool(model + " --eval --bogus" + feeds()), 2, "unknown option '--bogus'; see --help");
  expectError(runTool(model + " --eval --function train_step" + feeds()), 2,
              "no function 'train_step'");
  // A CPU artifact has no GPU program, whatever the machine has.
  expectError(runTool(model + " --eval --device cuda" + feeds()), 2,
              "has no GPU program: compile it with tc-compile --target sm_90");
  expectError(runTool(model + " --eval --device gpu" + feeds()), 2,
              "--device must be auto, cpu, cuda or cuda:N");
  expectError(runTool(model + " --eval --ref-precision f16" + feeds()), 2, "--ref-precision");
  expectError(runTool("--eval"), 2, "no artifact");
  EXPECT_EQ(runTool("--help").code, 0);
}

TEST_F(TcRun, RuntimeFailureExits1) {
  expectError(runTool(model + " --eval --feed ids=" + dir + "/oob.npy --feed labels=" + dir +
                      "/labels.npy"),
              1, "index 9");
}

} // namespace
} // namespace tc::rt
