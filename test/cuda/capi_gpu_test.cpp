//===- capi_gpu_test.cpp - the C API's CUDA sessions against CPU ones -----===//
//
// A GPU-target artifact (compiled for sm_90 in fp32 with tf32 off, e.g. by
// scripts/gpu-prepare.sh; its path in TC_GPU_ARTIFACT) run through the C API
// on TC_DEVICE_CUDA and on TC_DEVICE_CPU: every output of "infer" on the same
// token batch agrees to 1e-4 relative. Skipped without a GPU or an artifact.
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/src/base/dtype.h"
#include "runtime/src/base/host_tensor.h"
#include "runtime/src/cuda/device.h"
#include "tc/runtime.h"

namespace {

using namespace tc::rt;

struct Session {
  tc_session_t *s = nullptr;
  ~Session() { tc_session_release(s); }
};

std::string take(tc_status_t *st) {
  std::string m = st ? tc_status_message(st) : "";
  tc_status_release(st);
  return m;
}

TEST(CudaCApi, InferMatchesCpuSession) {
  const char *path = std::getenv("TC_GPU_ARTIFACT");
  if (!path)
    GTEST_SKIP() << "TC_GPU_ARTIFACT is not set (scripts/gpu-check.sh sets it)";
  if (!cuda::requireGpu().isOk())
    GTEST_SKIP() << cuda::requireGpu().message();
  tc_session_options_t opts;
  tc_session_options_initialize(&opts);
  Session cpu, gpu;
  ASSERT_EQ(take(tc_session_create(path, &opts, &cpu.s)), "");
  opts.device = TC_DEVICE_CUDA;
  ASSERT_EQ(take(tc_session_create(path, &opts, &gpu.s)), "");

  size_t nin = 0, nout = 0;
  ASSERT_EQ(take(tc_session_input_count(cpu.s, "infer", &nin)), "");
  ASSERT_EQ(take(tc_session_output_count(cpu.s, "infer", &nout)), "");
  std::vector<std::vector<uint8_t>> data(nin);
  std::vector<tc_tensor_view_t> views(nin);
  for (size_t i = 0; i < nin; ++i) {
    const char *name = nullptr;
    tc_dtype_t dt;
    size_t rank = 0;
    const int64_t *shape = nullptr;
    ASSERT_EQ(take(tc_session_input_info(cpu.s, "infer", i, &name, &dt, &rank, &shape)), "");
    TensorType t{static_cast<DType>(dt), std::vector<int64_t>(shape, shape + rank)};
    ASSERT_TRUE(dtypeIsInteger(t.dtype)) << "token inputs expected, got " << typeToString(t);
    std::vector<int64_t> ids(t.numElements());
    for (size_t k = 0; k < ids.size(); ++k)
      ids[k] = static_cast<int64_t>((k * 37 + 11) % 200); // inside every fixture's vocab
    HostTensor h = makeHostTensorInts(t, ids);
    data[i] = h.data;
    views[i] = {name, dt, rank, shape, data[i].data(), data[i].size()};
  }
  std::vector<tc_tensor_t *> a(nout, nullptr), b(nout, nullptr);
  ASSERT_EQ(take(tc_session_run(cpu.s, "infer", views.data(), nin, a.data(), nout)), "");
  ASSERT_EQ(take(tc_session_run(gpu.s, "infer", views.data(), nin, b.data(), nout)), "");
  for (size_t o = 0; o < nout; ++o) {
    ASSERT_EQ(tc_tensor_byte_size(a[o]), tc_tensor_byte_size(b[o]));
    DType dt = static_cast<DType>(tc_tensor_dtype(a[o]));
    size_t n = tc_tensor_element_count(a[o]);
    double worst = 0, scale = 0;
    auto *pa = static_cast<const uint8_t *>(tc_tensor_data(a[o]));
    auto *pb = static_cast<const uint8_t *>(tc_tensor_data(b[o]));
    for (size_t k = 0; k < n; ++k)
      scale = std::max(scale, std::fabs(loadAsDouble(pa, dt, k)));
    for (size_t k = 0; k < n; ++k)
      worst = std::max(worst, std::fabs(loadAsDouble(pa, dt, k) - loadAsDouble(pb, dt, k)));
    EXPECT_LE(worst, 1e-4 * std::max(scale, 1.0))
        << tc_tensor_name(a[o]) << ": max |cpu - gpu| " << worst << " (max |cpu| " << scale << ")";
    tc_tensor_release(a[o]);
    tc_tensor_release(b[o]);
  }
}

} // namespace
