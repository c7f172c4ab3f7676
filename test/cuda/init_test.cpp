//===- init_test.cpp - parameter initialisers on the device ---------------===//
//
// initParameterDevice against the host's initParameter (init.h): the same
// counter RNG, so the values agree to 1 ulp of the dtype (normal: CUDA's
// double log/cos may differ from glibc's by a few ulp of double; see
// init_rng.h), and bit for bit for zeros, ones and uniform. Plus mean/std of
// a 1M-element normal fill.
//
//===----------------------------------------------------------------------===//
#include "test/cuda/cuda_test_util.h"

#include "runtime/src/base/init.h"
#include "runtime/src/cuda/kernels/kernels.h"

namespace tc::rt::cuda {
namespace {

using namespace tc::rt::cuda::test;

class CudaInit : public CudaTest {};

Parameter param(const std::string &name, DType dt, std::vector<int64_t> shape, ParamInit init,
                double a = 0, double b = 0) {
  Parameter p;
  p.name = name;
  p.type = {dt, std::move(shape)};
  p.hasData = false;
  p.init = init;
  p.initArgs[0] = a;
  p.initArgs[1] = b;
  return p;
}

/// Spacing of the dtype's values at |x| (1 ulp).
double ulpAt(double x, DType dt) {
  int mant = dt == DType::F32 ? 23 : dt == DType::BF16 ? 7 : 10;
  int minExp = dt == DType::F32 ? -126 : dt == DType::BF16 ? -126 : -14;
  int e = x == 0 ? minExp : std::max(minExp, static_cast<int>(std::floor(std::log2(std::fabs(x)))));
  return std::ldexp(1.0, e - mant);
}

// Tests device == host (<= 1 ulp; exact for all but normal) for every kind
// and f32/bf16/f16, with a size that is not a multiple of the block.
TEST_F(CudaInit, MatchesHost) {
  const int64_t n = 1 << 20;
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    for (ParamInit init : {ParamInit::Zeros, ParamInit::Ones, ParamInit::Normal,
                           ParamInit::Uniform}) {
      double a = init == ParamInit::Uniform ? -0.5 : 0.1;
      double b = init == ParamInit::Uniform ? 0.25 : 0.7;
      Parameter p = param("h.3.mlp.c_proj.weight", dt, {n + 37}, init, a, b);
      HostTensor want, got;
      ASSERT_OK(initParameter(p, 20240601, &want));
      DevBuf d;
      ASSERT_OK(devAlloc(want.data.size(), &d));
      ASSERT_OK(initParameterDevice(p, 20240601, d.p, stream()));
      ASSERT_OK(download(d.p, p.type, &got, stream()));
      ASSERT_OK(sync());
      std::vector<double> g = hostTensorToDoubles(got), w = hostTensorToDoubles(want);
      size_t differ = 0;
      double maxUlps = 0;
      for (size_t i = 0; i < w.size(); ++i) {
        if (g[i] == w[i])
          continue;
        ++differ;
        maxUlps = std::max(maxUlps, std::fabs(g[i] - w[i]) / ulpAt(w[i], dt));
      }
      EXPECT_LE(maxUlps, 1.0) << dtypeName(dt) << " " << paramInitName(init);
      if (init != ParamInit::Normal)
        EXPECT_EQ(differ, 0u) << dtypeName(dt) << " " << paramInitName(init);
      report("initParameterDevice/" + std::string(paramInitName(init)), dt, maxUlps, 1.0, 0,
             std::to_string(n + 37));
    }
  }
}

// Tests mean and std of a 1M-element normal fill made on the device.
TEST_F(CudaInit, NormalMoments) {
  Parameter p = param("wte", DType::F32, {1024, 1024}, ParamInit::Normal, 0.0, 0.02);
  DevBuf d;
  ASSERT_OK(devAlloc(4u << 20, &d));
  ASSERT_OK(initParameterDevice(p, 1, d.p, stream()));
  HostTensor got;
  ASSERT_OK(download(d.p, p.type, &got, stream()));
  ASSERT_OK(sync());
  std::vector<double> v = hostTensorToDoubles(got);
  double s = 0, s2 = 0;
  for (double x : v)
    s += x;
  double mean = s / v.size();
  for (double x : v)
    s2 += (x - mean) * (x - mean);
  EXPECT_NEAR(mean, 0.0, 1e-4);
  EXPECT_NEAR(std::sqrt(s2 / v.size()), 0.02, 1e-4);
}

// Tests the errors: unsupported dtype, init Data.
TEST_F(CudaInit, Errors) {
  DevBuf d;
  ASSERT_OK(devAlloc(64, &d));
  Status st = initParameterDevice(param("x", DType::F64, {4}, ParamInit::Ones), 0, d.p, stream());
  EXPECT_EQ(st.code(), StatusCode::Unimplemented) << st.message();
  st = initParameterDevice(param("x", DType::F32, {4}, ParamInit::Data), 0, d.p, stream());
  EXPECT_EQ(st.code(), StatusCode::FailedPrecondition) << st.message();
  EXPECT_NE(st.message().find("--no-weights"), std::string::npos) << st.message();
}

} // namespace
} // namespace tc::rt::cuda
