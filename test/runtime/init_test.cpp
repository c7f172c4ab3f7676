//===- init_test.cpp - parameter initialisers (init.h, init_rng.h) --------===//
#include <cmath>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "runtime/src/schema/artifact.h"
#include "runtime/src/base/host_tensor.h"
#include "runtime/src/base/init.h"
#include "runtime/src/schema/init_spec.h"
#include "runtime/src/base/init_rng.h"
#include "test_util.h"

namespace tc::rt {
namespace {

using namespace tc::rt::test;

Parameter param(const std::string &name, TensorType type, ParamInit init, double a = 0,
                double b = 0) {
  Parameter p;
  p.name = name;
  p.type = std::move(type);
  p.hasData = false;
  p.init = init;
  p.initArgs[0] = a;
  p.initArgs[1] = b;
  return p;
}

void moments(const std::vector<double> &v, double *mean, double *std) {
  double s = 0, s2 = 0;
  for (double x : v)
    s += x;
  *mean = s / v.size();
  for (double x : v)
    s2 += (x - *mean) * (x - *mean);
  *std = std::sqrt(s2 / v.size());
}

// Tests that the counter RNG is a pure function of (seed, stream, i), in
// range, and that streams and seeds differ.
TEST(InitRng, CounterBased) {
  uint64_t s = paramStream("wte");
  EXPECT_EQ(s, initrng::fnv1a64("wte", 3));
  EXPECT_EQ(initrng::fnv1a64("", 0), 0xcbf29ce484222325ULL);
  EXPECT_EQ(initrng::fnv1a64("a", 1), 0xaf63dc4c8601ec8cULL); // FNV-1a 64 test vector
  std::set<uint64_t> seen;
  for (uint64_t i = 0; i < 1000; ++i) {
    double u = initrng::uniform01(7, s, i);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    EXPECT_EQ(u, initrng::uniform01(7, s, i));
    seen.insert(initrng::bits(7, s, i));
  }
  EXPECT_EQ(seen.size(), 1000u);
  EXPECT_NE(initrng::uniform01(7, s, 0), initrng::uniform01(8, s, 0));
  EXPECT_NE(initrng::uniform01(7, s, 0), initrng::uniform01(7, paramStream("wpe"), 0));
  EXPECT_TRUE(std::isfinite(initrng::standardNormal(0, 0, 0)));
}

// Tests mean/std of normal and uniform fills over 1M elements, for f32.
TEST(InitParameter, Moments) {
  HostTensor t;
  ASSERT_TRUE(initParameter(param("h.0.mlp.c_fc.weight", f32({1000, 1000}), ParamInit::Normal,
                                  0.5, 0.02),
                            1337, &t)
                  .isOk());
  double mean, std;
  moments(hostTensorToDoubles(t), &mean, &std);
  EXPECT_NEAR(mean, 0.5, 1e-4); // 5 sigma of the mean: 5 * 0.02 / 1000
  EXPECT_NEAR(std, 0.02, 1e-4);
  ASSERT_TRUE(
      initParameter(param("wte", f32({1000, 1000}), ParamInit::Uniform, -0.1, 0.3), 1, &t).isOk());
  std::vector<double> v = hostTensorToDoubles(t);
  moments(v, &mean, &std);
  EXPECT_NEAR(mean, 0.1, 1e-3);
  EXPECT_NEAR(std, 0.4 / std::sqrt(12.0), 1e-3);
  for (double x : v) {
    ASSERT_GE(x, -0.1 - 1e-7);
    ASSERT_LT(x, 0.3 + 1e-7);
  }
}

// Tests that a fill depends only on (seed, name, index): the same twice, a
// prefix of a larger tensor, different per seed and per name; and that
// every float dtype is rounded from the same double.
TEST(InitParameter, Deterministic) {
  Parameter p = param("w", f32({64, 8}), ParamInit::Normal, 0, 1);
  HostTensor a, b, c, big;
  ASSERT_TRUE(initParameter(p, 42, &a).isOk());
  ASSERT_TRUE(initParameter(p, 42, &b).isOk());
  EXPECT_EQ(a.data, b.data);
  ASSERT_TRUE(initParameter(p, 43, &c).isOk());
  EXPECT_NE(a.data, c.data);
  Parameter q = p;
  q.name = "v";
  ASSERT_TRUE(initParameter(q, 42, &c).isOk());
  EXPECT_NE(a.data, c.data);
  Parameter r = p;
  r.type = f32({128, 8});
  ASSERT_TRUE(initParameter(r, 42, &big).isOk());
  EXPECT_TRUE(std::equal(a.data.begin(), a.data.end(), big.data.begin()));
  std::vector<double> want = hostTensorToDoubles(a);
  for (DType dt : {DType::F64, DType::BF16, DType::F16, DType::F8E4M3FN, DType::F8E5M2}) {
    Parameter d = p;
    d.type.dtype = dt;
    HostTensor t;
    ASSERT_TRUE(initParameter(d, 42, &t).isOk()) << dtypeName(dt);
    std::vector<double> got = hostTensorToDoubles(t);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], std::abs(want[i]) * 0.15 + 1e-2) << dtypeName(dt) << " " << i;
  }
}

// Tests zeros/ones, and the errors for Data without data and integer dtypes.
TEST(InitParameter, ConstantsAndErrors) {
  HostTensor t;
  ASSERT_TRUE(initParameter(param("ln.weight", ty(DType::BF16, {5}), ParamInit::Ones), 0, &t).isOk());
  for (double x : hostTensorToDoubles(t))
    EXPECT_EQ(x, 1.0);
  ASSERT_TRUE(initParameter(param("b", f32({5}), ParamInit::Zeros), 0, &t).isOk());
  for (double x : hostTensorToDoubles(t))
    EXPECT_EQ(x, 0.0);
  ASSERT_TRUE(initParameter(param("i", i64({3}), ParamInit::Zeros), 0, &t).isOk());
  Status st = initParameter(param("i", i64({3}), ParamInit::Normal, 0, 1), 0, &t);
  EXPECT_EQ(st.code(), StatusCode::InvalidArgument);
  st = initParameter(param("wte", f32({3}), ParamInit::Data), 0, &t);
  EXPECT_EQ(st.code(), StatusCode::FailedPrecondition);
  EXPECT_EQ(st.message(), "parameter 'wte' has no data (compiled with --no-weights): give "
                          "--init-params at compile time or --init FILE at run time");
}

// Tests the spec grammar of --init-params / --init-param.
TEST(InitSpec, Parse) {
  InitSpec s;
  ASSERT_TRUE(parseInitSpec("normal", &s).isOk());
  EXPECT_EQ(s.init, ParamInit::Normal);
  EXPECT_EQ(s.args[0], 0.0);
  EXPECT_EQ(s.args[1], 0.02);
  ASSERT_TRUE(parseInitSpec("normal:0.5", &s).isOk());
  EXPECT_EQ(s.args[1], 0.5);
  ASSERT_TRUE(parseInitSpec("uniform:0.1", &s).isOk());
  EXPECT_EQ(s.init, ParamInit::Uniform);
  EXPECT_EQ(s.args[0], -0.1);
  EXPECT_EQ(s.args[1], 0.1);
  ASSERT_TRUE(parseInitSpec("ones", &s).isOk());
  EXPECT_EQ(s.init, ParamInit::Ones);
  for (const char *bad : {"gauss", "normal:", "normal:x", "normal:-1", "zeros:1", "uniform:inf", ""})
    EXPECT_EQ(parseInitSpec(bad, &s).code(), StatusCode::InvalidArgument) << bad;
  std::pair<std::string, InitSpec> o;
  ASSERT_TRUE(parseInitParamFlag("h\\.[0-9]+\\.attn=normal:0.01", &o).isOk());
  EXPECT_EQ(o.first, "h\\.[0-9]+\\.attn");
  EXPECT_EQ(o.second.args[1], 0.01);
  EXPECT_FALSE(parseInitParamFlag("([=zeros", &o).isOk());
  EXPECT_FALSE(parseInitParamFlag("zeros", &o).isOk());
}

// Tests the GPT-2 rule of --init-params (rank >= 2 random, *bias zeros, other
// rank < 2 ones), overrides (last match wins), buffers untouched and the
// weights compacted to the entries that keep data.
TEST(InitSpec, ApplyByRole) {
  Artifact a;
  a.target = "cpu";
  appendParameter(&a, "wte", tensor(f32({2, 2}), {1, 2, 3, 4}), true);
  appendParameter(&a, "h.0.ln_1.weight", tensor(f32({2}), {1, 1}), true);
  appendParameter(&a, "h.0.ln_1.bias", tensor(f32({2}), {0, 0}), true);
  appendParameter(&a, "h.0.attn.c_attn.weight", tensor(f32({2, 3}), {1, 2, 3, 4, 5, 6}), true);
  appendParameter(&a, "mask", tensor(f32({2, 2}), {1, 0, 1, 1}));
  a.params.back().kind = ParamKind::Buffer;
  InitSpec all;
  ASSERT_TRUE(parseInitSpec("normal:0.03", &all).isOk());
  std::vector<std::pair<std::string, InitSpec>> over(2);
  ASSERT_TRUE(parseInitParamFlag("attn=uniform:0.5", &over[0]).isOk());
  ASSERT_TRUE(parseInitParamFlag("c_attn\\.weight$=zeros", &over[1]).isOk());
  ASSERT_TRUE(applyInitialisers(all, over, &a).isOk());
  EXPECT_EQ(a.params[0].init, ParamInit::Normal);
  EXPECT_EQ(a.params[0].initArgs[1], 0.03);
  EXPECT_FALSE(a.params[0].hasData);
  EXPECT_EQ(a.params[1].init, ParamInit::Ones);
  EXPECT_EQ(a.params[2].init, ParamInit::Zeros);
  EXPECT_EQ(a.params[3].init, ParamInit::Zeros); // the last matching override
  EXPECT_EQ(a.params[4].init, ParamInit::Data);
  EXPECT_TRUE(a.params[4].hasData);
  EXPECT_EQ(a.params[4].offset, 0u);
  EXPECT_EQ(a.weights.size(), 16u);
  EXPECT_TRUE(validateArtifact(a).isOk()) << validateArtifact(a).message();
  HostTensor t;
  ASSERT_TRUE(parameterValue(a, a.params[4], 0, &t).isOk());
  EXPECT_EQ(hostTensorToDoubles(t), (std::vector<double>{1, 0, 1, 1}));

  // uniform by role: rank < 2 follows the same bias/ones rule.
  Artifact b;
  appendParameter(&b, "lm_head.bias", tensor(f32({2}), {5, 5}));
  appendParameter(&b, "w", tensor(f32({1, 2}), {5, 5}));
  ASSERT_TRUE(parseInitSpec("uniform", &all).isOk());
  ASSERT_TRUE(applyInitialisers(all, {}, &b).isOk());
  EXPECT_EQ(b.params[0].init, ParamInit::Zeros);
  EXPECT_EQ(b.params[1].init, ParamInit::Uniform);
  EXPECT_TRUE(b.weights.empty());
}

} // namespace
} // namespace tc::rt
