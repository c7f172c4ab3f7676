//===- capi_test.cpp - smoke test of the public C API ---------------------===//
#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "tc/runtime.h"
#include "test_util.h"

namespace tc::rt {
namespace {

using namespace tc::rt::test;

std::string writeModel() {
  Artifact a;
  a.target = "cpu";
  appendParameter(&a, "bias", tensor(f32({3}), {10, 20, 30}));
  FnBuilder b("infer");
  int32_t x = b.input("x", f32({2, 3}));
  int32_t bias = b.op("tc.parameter", {}, f32({3}), {{"name", aStr("bias")}});
  b.output("y", b.op("tc.add", {x, bias}, f32({2, 3})));
  b.output("n", b.op("tc.reduce_sum", {x}, f32({}), {{"axes", aInts({0, 1})}}));
  a.functions.push_back(b.fn);
  // One file per test: ctest runs them in parallel (and each removes its own).
  std::string path = ::testing::TempDir() + "/tc_capi_test_" +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".tca";
  EXPECT_TRUE(writeArtifact(a, path).isOk());
  return path;
}

struct CountingAllocator {
  int allocs = 0, frees = 0;
};
void *countAlloc(void *user, size_t size, size_t alignment) {
  static_cast<CountingAllocator *>(user)->allocs++;
  return std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
}
void countFree(void *user, void *ptr) {
  static_cast<CountingAllocator *>(user)->frees++;
  std::free(ptr);
}

TEST(CApi, SessionQueriesRunAndRelease) {
  std::string path = writeModel();
  CountingAllocator counter;
  tc_session_options_t opts;
  tc_session_options_initialize(&opts);
  EXPECT_EQ(opts.device, TC_DEVICE_CPU);
  opts.allocator.alloc = countAlloc;
  opts.allocator.free = countFree;
  opts.allocator.user = &counter;
  tc_session_t *s = nullptr;
  tc_status_t *st = tc_session_create(path.c_str(), &opts, &s);
  ASSERT_EQ(st, nullptr) << tc_status_message(st);
  ASSERT_NE(s, nullptr);

  ASSERT_EQ(tc_session_function_count(s), 1u);
  EXPECT_STREQ(tc_session_function_name(s, 0), "infer");
  EXPECT_EQ(tc_session_function_name(s, 1), nullptr);
  size_t n = 0;
  ASSERT_EQ(tc_session_input_count(s, "infer", &n), nullptr);
  EXPECT_EQ(n, 1u);
  const char *name;
  tc_dtype_t dt;
  size_t rank;
  const int64_t *shape;
  ASSERT_EQ(tc_session_input_info(s, "infer", 0, &name, &dt, &rank, &shape), nullptr);
  EXPECT_STREQ(name, "x");
  EXPECT_EQ(dt, TC_DTYPE_F32);
  ASSERT_EQ(rank, 2u);
  EXPECT_EQ(shape[0], 2);
  EXPECT_EQ(shape[1], 3);
  ASSERT_EQ(tc_session_output_count(s, "infer", &n), nullptr);
  EXPECT_EQ(n, 2u);
  ASSERT_EQ(tc_session_output_info(s, "infer", 1, &name, &dt, &rank, &shape), nullptr);
  EXPECT_STREQ(name, "n");
  EXPECT_EQ(rank, 0u);
  st = tc_session_output_info(s, "infer", 2, &name, &dt, &rank, &shape);
  EXPECT_EQ(tc_status_code(st), TC_STATUS_OUT_OF_RANGE);
  tc_status_release(st);
  st = tc_session_input_count(s, "train_step", &n);
  EXPECT_EQ(tc_status_code(st), TC_STATUS_NOT_FOUND);
  EXPECT_NE(std::string(tc_status_message(st)).find("train_step"), std::string::npos);
  tc_status_release(st);

  float x[6] = {1, 2, 3, 4, 5, 6};
  int64_t xs[2] = {2, 3};
  tc_tensor_view_t in = {"x", TC_DTYPE_F32, 2, xs, x, sizeof x};
  tc_tensor_t *outs[2] = {nullptr, nullptr};
  st = tc_session_run(s, "infer", &in, 1, outs, 2);
  ASSERT_EQ(st, nullptr) << tc_status_message(st);
  EXPECT_STREQ(tc_tensor_name(outs[0]), "y");
  EXPECT_EQ(tc_tensor_dtype(outs[0]), TC_DTYPE_F32);
  ASSERT_EQ(tc_tensor_rank(outs[0]), 2u);
  EXPECT_EQ(tc_tensor_shape(outs[0])[1], 3);
  EXPECT_EQ(tc_tensor_element_count(outs[0]), 6u);
  ASSERT_EQ(tc_tensor_byte_size(outs[0]), 24u);
  const float *y = static_cast<const float *>(tc_tensor_data(outs[0]));
  EXPECT_EQ(y[0], 11);
  EXPECT_EQ(y[5], 36);
  EXPECT_EQ(*static_cast<const float *>(tc_tensor_data(outs[1])), 21);
  EXPECT_EQ(counter.allocs, 2);
  tc_tensor_release(outs[0]);
  tc_tensor_release(outs[1]);
  EXPECT_EQ(counter.frees, 2);

  // A wrong dtype is an error naming the input; outputs stay NULL.
  int64_t xi[6] = {};
  tc_tensor_view_t bad = {"x", TC_DTYPE_I64, 2, xs, xi, sizeof xi};
  st = tc_session_run(s, "infer", &bad, 1, outs, 2);
  EXPECT_EQ(tc_status_code(st), TC_STATUS_INVALID_ARGUMENT);
  EXPECT_STREQ(tc_status_message(st), "input 'x': expected f32 2x3, got i64 2x3");
  EXPECT_EQ(outs[0], nullptr);
  tc_status_release(st);
  tc_tensor_view_t unknown = {"z", TC_DTYPE_F32, 2, xs, x, sizeof x};
  st = tc_session_run(s, "infer", &unknown, 1, outs, 2);
  EXPECT_NE(std::string(tc_status_message(st)).find("no input 'z'"), std::string::npos);
  tc_status_release(st);
  st = tc_session_run(s, "infer", &in, 1, outs, 1);
  EXPECT_EQ(tc_status_code(st), TC_STATUS_INVALID_ARGUMENT);
  tc_status_release(st);

  tc_session_release(s);
  std::remove(path.c_str());
}

TEST(CApi, NullSafetyAndCreationErrors) {
  tc_status_release(nullptr);
  tc_tensor_release(nullptr);
  tc_session_release(nullptr);
  EXPECT_EQ(tc_status_code(nullptr), TC_STATUS_OK);
  EXPECT_STREQ(tc_status_message(nullptr), "");
  EXPECT_EQ(tc_session_function_count(nullptr), 0u);
  EXPECT_STREQ(tc_dtype_name(TC_DTYPE_BF16), "bf16");
  EXPECT_EQ(tc_dtype_size(TC_DTYPE_F64), 8u);

  tc_session_t *s = reinterpret_cast<tc_session_t *>(0x1);
  tc_status_t *st = tc_session_create("/nonexistent/m.tca", nullptr, &s);
  EXPECT_EQ(tc_status_code(st), TC_STATUS_NOT_FOUND);
  EXPECT_EQ(s, nullptr);
  tc_status_release(st);

  const char junk[] = "not an artifact at all, just text";
  st = tc_session_create_from_memory(junk, sizeof junk, nullptr, &s);
  EXPECT_EQ(tc_status_code(st), TC_STATUS_DATA_LOSS);
  tc_status_release(st);

  std::string path = writeModel();
  tc_session_options_t opts;
  tc_session_options_initialize(&opts);
  // A CPU artifact on the CUDA device: refused, whatever this machine has
  // (no backend in the build, no GPU, or no GPU program in the artifact).
  opts.device = TC_DEVICE_CUDA;
  st = tc_session_create(path.c_str(), &opts, &s);
  ASSERT_NE(st, nullptr);
  EXPECT_NE(tc_status_code(st), TC_STATUS_OK);
  std::string msg = tc_status_message(st);
  EXPECT_TRUE(msg.find("GPU") != std::string::npos || msg.find("CUDA") != std::string::npos)
      << msg;
  tc_status_release(st);
  std::remove(path.c_str());
}

TEST(CApi, CreateFromMemory) {
  Artifact a;
  FnBuilder b("infer");
  int32_t x = b.input("x", i64({}));
  b.output("y", b.op("tc.mul", {x, x}, i64({})));
  a.functions.push_back(b.fn);
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(serializeArtifact(a, &bytes).isOk());
  tc_session_t *s = nullptr;
  ASSERT_EQ(tc_session_create_from_memory(bytes.data(), bytes.size(), nullptr, &s), nullptr);
  int64_t v = -7;
  tc_tensor_view_t in = {"x", TC_DTYPE_I64, 0, nullptr, &v, sizeof v};
  tc_tensor_t *out = nullptr;
  ASSERT_EQ(tc_session_run(s, "infer", &in, 1, &out, 1), nullptr);
  EXPECT_EQ(*static_cast<const int64_t *>(tc_tensor_data(out)), 49);
  tc_tensor_release(out);
  tc_session_release(s);
}

} // namespace
} // namespace tc::rt
