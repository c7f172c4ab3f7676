//===- optimizer_test.cpp - AdamW, SGD, the global gradient norm ----------===//
//
// Three optimizer steps on random parameters and gradients, against the
// torch.optim formulas evaluated in double here (the same formulas
// tc-optimizer emits as tc ops).
//
//===----------------------------------------------------------------------===//
#include "test/cuda/cuda_test_util.h"

#include "runtime/src/cuda/kernels/kernels.h"

namespace tc::rt::cuda {
namespace {

using namespace tc::rt::cuda::test;

class CudaOptimizer : public CudaTest {};

struct AdamWRef {
  std::vector<double> p, m, v;
  void step(const std::vector<double> &g, const AdamWConfig &c, double clip) {
    double t = static_cast<double>(c.step);
    double bc1 = 1 - std::pow((double)c.beta1, t), bc2 = 1 - std::pow((double)c.beta2, t);
    for (size_t i = 0; i < p.size(); ++i) {
      double gi = g[i] * clip;
      p[i] *= 1 - (double)c.lr * c.weightDecay;
      m[i] += (1 - (double)c.beta1) * (gi - m[i]);
      v[i] = v[i] * c.beta2 + (1 - (double)c.beta2) * gi * gi;
      double denom = std::sqrt(v[i]) / std::sqrt(bc2) + c.eps;
      p[i] -= (double)c.lr / bc1 * m[i] / denom;
    }
  }
};

double clipCoef(const std::vector<double> &g, double maxNorm) {
  if (maxNorm <= 0)
    return 1;
  double ss = 0;
  for (double x : g)
    ss += x * x;
  return std::min(1.0, maxNorm / (std::sqrt(ss) + 1e-6));
}

TEST_F(CudaOptimizer, AdamWMatchesTorchFormula) {
  const int64_t n = 10007;
  struct Variant {
    const char *name;
    DType grad;
    bool copy;
    float clip;
  };
  for (Variant var : {Variant{"adamw", DType::F32, false, 0.0f},
                      Variant{"adamw (bf16 grads, bf16 copy)", DType::BF16, true, 0.0f},
                      Variant{"adamw (clipped)", DType::F32, false, 20.0f}}) {
    SCOPED_TRACE(var.name);
    HostTensor p0 = randomTensor(f32({n}), rng);
    AdamWRef ref;
    ref.p = hostTensorToDoubles(p0);
    ref.m.assign(n, 0);
    ref.v.assign(n, 0);
    DevBuf dP, dM, dV, dG, dCopy, dNorm, scratch;
    ASSERT_OK(upload(p0, &dP, stream()));
    ASSERT_OK(devZeros(n * 4, &dM, stream()));
    ASSERT_OK(devZeros(n * 4, &dV, stream()));
    ASSERT_OK(devZeros(n * 2, &dCopy, stream()));
    ASSERT_OK(devZeros(4, &dNorm, stream()));
    ASSERT_OK(devZeros(sumSquaresScratchBytes(), &scratch, stream()));
    AdamWConfig cfg;
    cfg.lr = 0.05f;
    cfg.weightDecay = 0.1f;
    cfg.maxGradNorm = var.clip;
    for (int64_t step = 1; step <= 3; ++step) {
      HostTensor g = randomTensor(ty(var.grad, {n}), rng, -2, 2);
      ASSERT_OK(upload(g, &dG, stream()));
      cfg.step = step;
      std::vector<double> gd = hostTensorToDoubles(g);
      const float *normSq = nullptr;
      if (var.clip > 0) {
        ASSERT_OK(sumSquares(var.grad, dG.p, n, dNorm.as<float>(), scratch.p, false, stream()));
        normSq = dNorm.as<float>();
      }
      ASSERT_OK(adamwUpdate(dP.as<float>(), var.grad, dG.p, dM.as<float>(), dV.as<float>(), n, cfg,
                            normSq, DType::BF16, var.copy ? dCopy.p : nullptr, stream()));
      ref.step(gd, cfg, clipCoef(gd, var.clip));
    }
    HostTensor p, m, v, copy;
    ASSERT_OK(download(dP.p, f32({n}), &p, stream()));
    ASSERT_OK(download(dM.p, f32({n}), &m, stream()));
    ASSERT_OK(download(dV.p, f32({n}), &v, stream()));
    ASSERT_OK(download(dCopy.p, ty(DType::BF16, {n}), &copy, stream()));
    std::vector<double> got = hostTensorToDoubles(p), want = ref.p;
    CompareResult rm = compare(hostTensorToDoubles(m), ref.m);
    CompareResult rv = compare(hostTensorToDoubles(v), ref.v);
    EXPECT_LE(rm.maxErr, kTolF32) << "exp_avg element " << rm.worst;
    EXPECT_LE(rv.maxErr, kTolF32) << "exp_avg_sq element " << rv.worst;
    if (var.copy) {
      std::vector<double> rounded = hostTensorToDoubles(makeHostTensor(ty(DType::BF16, {n}), got));
      EXPECT_EQ(hostTensorToDoubles(copy), rounded) << "the bf16 copy is the rounded master";
    }
    // Timing at GPT-2 124M size (one flat buffer of every parameter).
    const int64_t big = 124439808;
    DevBuf bp, bg, bm, bv, bc;
    ASSERT_OK(devZeros(big * 4, &bp, stream()));
    ASSERT_OK(devZeros(big * (var.grad == DType::F32 ? 4 : 2), &bg, stream()));
    ASSERT_OK(devZeros(big * 4, &bm, stream()));
    ASSERT_OK(devZeros(big * 4, &bv, stream()));
    ASSERT_OK(devZeros(big * 2, &bc, stream()));
    AdamWConfig tcfg = cfg;
    tcfg.maxGradNorm = 0;
    double us = timeUs(stream(), 10, [&] {
      return adamwUpdate(bp.as<float>(), var.grad, bg.p, bm.as<float>(), bv.as<float>(), big, tcfg,
                         nullptr, DType::BF16, var.copy ? bc.p : nullptr, stream());
    });
    check(var.name, var.grad, got, want, kTolF32, us, shapeStr({big}));
  }
}

TEST_F(CudaOptimizer, SgdMatchesTorchFormula) {
  const int64_t n = 5003;
  struct Variant {
    const char *name;
    float momentum, dampening, wd;
    bool nesterov;
  };
  for (Variant var :
       {Variant{"sgd", 0, 0, 0, false}, Variant{"sgd momentum", 0.9f, 0.1f, 0.01f, false},
        Variant{"sgd nesterov", 0.9f, 0, 0.01f, true}}) {
    SCOPED_TRACE(var.name);
    HostTensor p0 = randomTensor(f32({n}), rng);
    std::vector<double> p = hostTensorToDoubles(p0), buf(n, 0);
    DevBuf dP, dB, dG;
    ASSERT_OK(upload(p0, &dP, stream()));
    ASSERT_OK(devZeros(n * 4, &dB, stream()));
    SgdConfig cfg;
    cfg.lr = 0.1f;
    cfg.momentum = var.momentum;
    cfg.dampening = var.dampening;
    cfg.weightDecay = var.wd;
    cfg.nesterov = var.nesterov;
    for (int64_t step = 1; step <= 3; ++step) {
      HostTensor g = randomTensor(f32({n}), rng);
      ASSERT_OK(upload(g, &dG, stream()));
      cfg.step = step;
      ASSERT_OK(sgdUpdate(dP.as<float>(), DType::F32, dG.p, var.momentum ? dB.as<float>() : nullptr,
                          n, cfg, nullptr, DType::F32, nullptr, stream()));
      std::vector<double> gd = hostTensorToDoubles(g);
      for (int64_t i = 0; i < n; ++i) { // torch.optim.SGD, single tensor
        double d = gd[i] + var.wd * p[i];
        if (var.momentum != 0) {
          buf[i] = step == 1 ? d : var.momentum * buf[i] + (1 - (double)var.dampening) * d;
          d = var.nesterov ? d + var.momentum * buf[i] : buf[i];
        }
        p[i] -= (double)cfg.lr * d;
      }
    }
    HostTensor got;
    ASSERT_OK(download(dP.p, f32({n}), &got, stream()));
    if (var.momentum) {
      HostTensor b;
      ASSERT_OK(download(dB.p, f32({n}), &b, stream()));
      EXPECT_LE(compare(hostTensorToDoubles(b), buf).maxErr, kTolF32) << "momentum buffer";
    }
    check(var.name, DType::F32, hostTensorToDoubles(got), p, kTolF32);
  }
}

TEST_F(CudaOptimizer, SumSquaresIsAccurateAndDeterministic) {
  for (DType dt : {DType::F32, DType::BF16}) {
    std::vector<double> got, want;
    for (int64_t n : {int64_t(1000003), int64_t(4097), int64_t(3)}) {
      HostTensor x = randomTensor(ty(dt, {n}), rng);
      double ss = 0;
      for (double v : hostTensorToDoubles(x))
        ss += v * v;
      DevBuf dX, out, scratch;
      ASSERT_OK(upload(x, &dX, stream()));
      ASSERT_OK(devZeros(4, &out, stream()));
      ASSERT_OK(devZeros(sumSquaresScratchBytes(), &scratch, stream()));
      ASSERT_OK(sumSquares(dt, dX.p, n, out.as<float>(), scratch.p, false, stream()));
      HostTensor r1, r2, r3;
      ASSERT_OK(download(out.p, f32({}), &r1, stream()));
      ASSERT_OK(sumSquares(dt, dX.p, n, out.as<float>(), scratch.p, false, stream()));
      ASSERT_OK(download(out.p, f32({}), &r2, stream()));
      EXPECT_EQ(r1.data, r2.data) << "deterministic";
      ASSERT_OK(sumSquares(dt, dX.p, n, out.as<float>(), scratch.p, true, stream()));
      ASSERT_OK(download(out.p, f32({}), &r3, stream()));
      EXPECT_NEAR(hostTensorToDoubles(r3)[0], 2 * ss, 2e-5 * ss) << "accumulate";
      got.push_back(hostTensorToDoubles(r1)[0]);
      want.push_back(ss);
    }
    const int64_t big = 124439808;
    DevBuf x, out, scratch;
    ASSERT_OK(devZeros(big * (dt == DType::F32 ? 4 : 2), &x, stream()));
    ASSERT_OK(devZeros(4, &out, stream()));
    ASSERT_OK(devZeros(sumSquaresScratchBytes(), &scratch, stream()));
    double us = timeUs(stream(), 10, [&] {
      return sumSquares(dt, x.p, big, out.as<float>(), scratch.p, false, stream());
    });
    // Each sum on its own scale: compare one at a time and report the worst.
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, std::fabs(got[i] - want[i]) / want[i]);
    EXPECT_LE(worst, kTolF32);
    report("grad-norm sum of squares", dt, worst, kTolF32, us, shapeStr({big}));
  }
}

} // namespace
} // namespace tc::rt::cuda
