//===- own_gemm_test.cpp - tc's own sm_90a GEMM against the reference ----===//
//
// ownGemm (kernels/gemm_sm90.cu) against a double-precision reference of its
// contract (kernels.h), bit-for-bit run to run, through the Matmul (forced,
// and timed beside cuBLASLt's epilogues), and its refusals. Skipped where
// the GPU is not an H100/H200.
//
//===----------------------------------------------------------------------===//
#include "test/cuda/cuda_test_util.h"

#include <cmath>

#include "runtime/src/cuda/cublaslt.h"
#include "runtime/src/cuda/kernels/kernels.h"

namespace tc::rt::cuda {
namespace {

using namespace tc::rt::cuda::test;

class OwnGemm : public CudaTest {
protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped() || HasFatalFailure())
      return;
    if (!ownGemmAvailable())
      GTEST_SKIP() << "tc's own GEMM runs on sm_90 GPUs (H100 / H200) only";
  }
};

std::vector<double> roundedBf16(const std::vector<double> &v) {
  return hostTensorToDoubles(makeHostTensor(ty(DType::BF16, {static_cast<int64_t>(v.size())}), v));
}

double gelu(double h, bool exact) {
  if (exact)
    return 0.5 * h * (1.0 + std::erf(h / std::sqrt(2.0)));
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * h * (1.0 + std::tanh(k * (h + 0.044715 * h * h * h)));
}

double geluGrad(double h, bool exact) {
  if (exact)
    return 0.5 * (1.0 + std::erf(h / std::sqrt(2.0))) +
           h * std::exp(-0.5 * h * h) / std::sqrt(2.0 * M_PI);
  const double k = std::sqrt(2.0 / M_PI), c = 0.044715, t = std::tanh(k * (h + c * h * h * h));
  return 0.5 * (1 + t) + 0.5 * h * (1 - t * t) * k * (1 + 3 * c * h * h);
}

/// Every form (GELU + aux with and without a bias, DGELU; the tanh and the
/// exact GELU; b [n, k] and [k, n]) on shapes that take one tile with one k-block, several tiles
/// with short K (the deferred boxes flushed at the tile's end), GPT-2's K of 768 (the boxes between
/// k-blocks), and more tiles than SMs (a block's tiles in turn, each finishing the previous one's
/// boxes).
TEST_F(OwnGemm, MatchesReference) {
  struct Shape {
    int64_t m, n, k;
  };
  for (Shape s :
       {Shape{128, 256, 64}, Shape{256, 512, 192}, Shape{512, 768, 768}, Shape{2048, 2304, 384}}) {
    const int64_t m = s.m, n = s.n, k = s.k;
    SCOPED_TRACE(shapeStr({m, n, k}));
    HostTensor A = randomTensor(ty(DType::BF16, {m, k}), rng);
    HostTensor B = randomTensor(ty(DType::BF16, {n, k}), rng, -0.1, 0.1);
    HostTensor Bias = randomTensor(ty(DType::BF16, {n}), rng, -0.5, 0.5);
    HostTensor X = randomTensor(ty(DType::BF16, {m, n}), rng, -3.0, 3.0); // DGELU's aux
    std::vector<double> a = hostTensorToDoubles(A), b = hostTensorToDoubles(B),
                        bias = hostTensorToDoubles(Bias), x = hostTensorToDoubles(X), bt(n * k);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t l = 0; l < k; ++l)
        bt[l * n + j] = b[j * k + l];
    HostTensor Bt = makeHostTensor(ty(DType::BF16, {k, n}), bt); // exact: b's values
    std::vector<double> acc(m * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double p = 0;
        for (int64_t l = 0; l < k; ++l)
          p += a[i * k + l] * b[j * k + l];
        acc[i * n + j] = p;
      }
    DevBuf dA, dB, dBt, dBias, dX, dOut, dAux, dOut2, dAux2;
    ASSERT_OK(upload(A, &dA, stream()));
    ASSERT_OK(upload(B, &dB, stream()));
    ASSERT_OK(upload(Bt, &dBt, stream()));
    ASSERT_OK(upload(Bias, &dBias, stream()));
    ASSERT_OK(upload(X, &dX, stream()));
    for (DevBuf *d : {&dOut, &dAux, &dOut2, &dAux2})
      ASSERT_OK(devZeros(m * n * 2, d, stream()));
    for (int form = 0; form < 6; ++form)
      for (bool kMajor : {true, false}) {
        const bool dgelu = form % 3 == 2, withBias = form % 3 == 0, exact = form >= 3;
        std::string name = std::string(dgelu      ? "dgelu"
                                       : withBias ? "gelu+aux+bias"
                                                  : "gelu+aux") +
                           (exact ? " (erf)" : "") + (kMajor ? "" : ", b [k, n]");
        SCOPED_TRACE(name);
        OwnGemmArgs g;
        g.epilogue = dgelu ? OwnGemmEpilogue::DGelu : OwnGemmEpilogue::GeluAux;
        g.a = dA.p;
        g.b = kMajor ? dB.p : dBt.p;
        g.bKMajor = kMajor;
        g.exact = exact;
        g.bias = withBias ? dBias.p : nullptr;
        g.aux = dgelu ? dX.p : dAux.p;
        g.out = dOut.p;
        g.m = m, g.n = n, g.k = k;
        ASSERT_OK(ownGemm(g, stream()));
        std::vector<double> wantOut(m * n), wantAux;
        if (dgelu) {
          std::vector<double> prod = roundedBf16(acc);
          for (int64_t i = 0; i < m * n; ++i)
            wantOut[i] = prod[i] * geluGrad(x[i], exact);
        } else {
          std::vector<double> pre(m * n);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j)
              pre[i * n + j] = acc[i * n + j] + (withBias ? bias[j] : 0.0);
          wantAux = roundedBf16(pre);
          for (int64_t i = 0; i < m * n; ++i)
            wantOut[i] = gelu(wantAux[i], exact);
        }
        HostTensor gotOut, gotAux;
        ASSERT_OK(download(dOut.p, ty(DType::BF16, {m, n}), &gotOut, stream()));
        // bf16's tolerance: the GPU's fp32 sum can round the stored
        // pre-activation (or product) one bf16 step from the double
        // reference's, and out is rounded again (H100: up to 1.2e-2 at K 384
        // and 768; a wrong fragment or swizzle is off by O(1)).
        check("ownGemm " + name, DType::BF16, hostTensorToDoubles(gotOut), wantOut,
              tolFor(DType::BF16));
        if (!dgelu) {
          ASSERT_OK(download(dAux.p, ty(DType::BF16, {m, n}), &gotAux, stream()));
          check("ownGemm " + name + " (aux)", DType::BF16, hostTensorToDoubles(gotAux), wantAux,
                tolFor(DType::BF16));
        }
        // The same bits again.
        g.out = dOut2.p;
        if (!dgelu)
          g.aux = dAux2.p;
        ASSERT_OK(ownGemm(g, stream()));
        HostTensor again, againAux;
        ASSERT_OK(download(dOut2.p, ty(DType::BF16, {m, n}), &again, stream()));
        EXPECT_EQ(mismatches(again, gotOut, name + " run to run"), 0);
        if (!dgelu) {
          ASSERT_OK(download(dAux2.p, ty(DType::BF16, {m, n}), &againAux, stream()));
          EXPECT_EQ(mismatches(againAux, gotAux, name + " aux run to run"), 0);
        }
      }
    // DGELU in place: out over its aux (each box of aux read before that box
    // of out is written).
    OwnGemmArgs g;
    g.epilogue = OwnGemmEpilogue::DGelu;
    g.a = dA.p;
    g.b = dB.p;
    g.aux = dX.p;
    g.out = dOut.p;
    g.m = m, g.n = n, g.k = k;
    ASSERT_OK(ownGemm(g, stream()));
    g.out = dX.p;
    ASSERT_OK(ownGemm(g, stream()));
    HostTensor separate, inPlace;
    ASSERT_OK(download(dOut.p, ty(DType::BF16, {m, n}), &separate, stream()));
    ASSERT_OK(download(dX.p, ty(DType::BF16, {m, n}), &inPlace, stream()));
    EXPECT_EQ(mismatches(inPlace, separate, "dgelu in place"), 0);
  }
}

/// The Matmul takes it for GELU + aux and DGELU when forced (bit-for-bit
/// what ownGemm writes), and not for problems it does not take.
TEST_F(OwnGemm, MatmulTakesItWhereItFits) {
  const int64_t m = 256, n = 512, k = 256;
  std::unique_ptr<Matmul> mm;
  ASSERT_OK(Matmul::create(&mm));
  mm->enableOwnGemm(true, /*force=*/true);
  HostTensor A = randomTensor(ty(DType::BF16, {m, k}), rng);
  HostTensor B = randomTensor(ty(DType::BF16, {n, k}), rng, -0.1, 0.1);
  HostTensor Bias = randomTensor(ty(DType::BF16, {n}), rng);
  DevBuf dA, dB, dBias, dOut, dAux, dOwn, dOwnAux;
  ASSERT_OK(upload(A, &dA, stream()));
  ASSERT_OK(upload(B, &dB, stream()));
  ASSERT_OK(upload(Bias, &dBias, stream()));
  for (DevBuf *d : {&dOut, &dAux, &dOwn, &dOwnAux})
    ASSERT_OK(devZeros(m * n * 2, d, stream()));
  MatmulDesc d;
  d.dtype = DType::BF16;
  d.transposeRhs = true;
  d.m = m, d.n = n, d.k = k;
  d.epilogue = MatmulEpilogue::BiasGeluAux;
  ASSERT_OK(mm->run(d, dA.p, dB.p, dOut.p, stream(), dBias.p, dAux.p));
  EXPECT_EQ(mm->epiloguePath(d), Matmul::EpiloguePath::Own);
  OwnGemmArgs g;
  g.a = dA.p, g.b = dB.p, g.bias = dBias.p, g.aux = dOwnAux.p, g.out = dOwn.p;
  g.m = m, g.n = n, g.k = k;
  ASSERT_OK(ownGemm(g, stream()));
  HostTensor got, want;
  ASSERT_OK(download(dOut.p, ty(DType::BF16, {m, n}), &got, stream()));
  ASSERT_OK(download(dOwn.p, ty(DType::BF16, {m, n}), &want, stream()));
  EXPECT_EQ(mismatches(got, want, "gelu+aux through the Matmul"), 0);

  MatmulDesc dg = d;
  dg.epilogue = MatmulEpilogue::DGelu;
  ASSERT_OK(mm->run(dg, dA.p, dB.p, dOut.p, stream(), nullptr, dAux.p));
  EXPECT_EQ(mm->epiloguePath(dg), Matmul::EpiloguePath::Own);

  // Not taken: n not a multiple of 256, f32, lhs transposed.
  MatmulDesc odd = dg;
  odd.n = 384;
  ASSERT_OK(mm->run(odd, dA.p, dB.p, dOut.p, stream(), nullptr, dAux.p));
  EXPECT_NE(mm->epiloguePath(odd), Matmul::EpiloguePath::Own);
  MatmulDesc lhsT = dg;
  lhsT.transposeLhs = true;
  ASSERT_OK(mm->run(lhsT, dA.p, dB.p, dOut.p, stream(), nullptr, dAux.p));
  EXPECT_NE(mm->epiloguePath(lhsT), Matmul::EpiloguePath::Own);
}

/// Bad arguments name what is wrong.
TEST_F(OwnGemm, RefusesWhatItDoesNotTake) {
  DevBuf buf;
  ASSERT_OK(devZeros(1 << 20, &buf, stream()));
  OwnGemmArgs g;
  g.a = g.b = buf.p;
  g.aux = g.out = buf.p;
  g.m = 100, g.n = 256, g.k = 64;
  Status st = ownGemm(g, stream());
  EXPECT_EQ(st.code(), StatusCode::InvalidArgument);
  EXPECT_NE(st.message().find("m % 128"), std::string::npos) << st.message();
  g.m = 128;
  st = ownGemm(g, stream()); // GELU + aux with out == aux
  EXPECT_EQ(st.code(), StatusCode::InvalidArgument);
  EXPECT_NE(st.message().find("distinct"), std::string::npos) << st.message();
  g.out = static_cast<char *>(buf.p) + 2;
  g.aux = static_cast<char *>(buf.p) + 4096;
  st = ownGemm(g, stream());
  EXPECT_EQ(st.code(), StatusCode::InvalidArgument);
  EXPECT_NE(st.message().find("16-byte aligned"), std::string::npos) << st.message();
  g.out = buf.p;
  g.aux = nullptr;
  st = ownGemm(g, stream());
  EXPECT_EQ(st.code(), StatusCode::InvalidArgument);
  EXPECT_NE(st.message().find("non-null"), std::string::npos) << st.message();
}

/// GPT-2 124M's (and Pythia-160m's, exact GELU) MLP at 16 x 1024 tokens: the
/// c_fc forward (bias + GELU + aux) and the c_proj dgrad's DGELU, both weight
/// layouts, tc's own kernel beside cuBLASLt's epilogue or, for the exact
/// GELU, the product and the GELU kernel (the Matmul's timed choice printed).
TEST_F(OwnGemm, TimingGpt2) {
  const int64_t M = 16384, N = 3072, K = 768;
  DevBuf a, b, bias, out, aux;
  ASSERT_OK(devZeros(M * K * 2, &a, stream()));
  ASSERT_OK(devZeros(N * K * 2, &b, stream()));
  ASSERT_OK(devZeros(N * 2, &bias, stream()));
  ASSERT_OK(devZeros(M * N * 2, &out, stream()));
  ASSERT_OK(devZeros(M * N * 2, &aux, stream()));
  HostTensor A = randomTensor(ty(DType::BF16, {M, K}), rng);
  HostTensor B = randomTensor(ty(DType::BF16, {N, K}), rng, -0.05, 0.05);
  ASSERT_OK(upload(A, &a, stream()));
  ASSERT_OK(upload(B, &b, stream()));
  for (int form = 0; form < 8; ++form) {
    const bool dgelu = form & 1, kMajor = !(form & 2), exact = form & 4;
    MatmulDesc d;
    d.dtype = DType::BF16;
    d.transposeRhs = kMajor;
    d.m = M, d.n = N, d.k = K;
    d.epilogue = dgelu ? (exact ? MatmulEpilogue::DGeluErf : MatmulEpilogue::DGelu)
                       : (exact ? MatmulEpilogue::BiasGeluErfAux : MatmulEpilogue::BiasGeluAux);
    const void *bi = dgelu ? nullptr : bias.p;
    std::unique_ptr<Matmul> lt, own, chosen;
    ASSERT_OK(Matmul::create(&lt));
    ASSERT_OK(Matmul::create(&own));
    ASSERT_OK(Matmul::create(&chosen));
    own->enableOwnGemm(true, /*force=*/true);
    chosen->enableOwnGemm(true);
    double ltUs =
        timeUs(stream(), 20, [&] { return lt->run(d, a.p, b.p, out.p, stream(), bi, aux.p); });
    double ownUs =
        timeUs(stream(), 20, [&] { return own->run(d, a.p, b.p, out.p, stream(), bi, aux.p); });
    ASSERT_OK(chosen->run(d, a.p, b.p, out.p, stream(), bi, aux.p));
    Matmul::EpiloguePath path = chosen->epiloguePath(d);
    std::printf("ownGemm %s: %.1f us, cuBLASLt's %s %.1f us (%s); the Matmul takes %s\n",
                d.toString().c_str(), ownUs,
                lt->epiloguePath(d) == Matmul::EpiloguePath::Separate ? "product and GELU kernel"
                                                                      : "epilogue",
                ltUs, ownUs < ltUs ? "faster" : "slower",
                path == Matmul::EpiloguePath::Own ? "tc's own" : "the other");
    ASSERT_GT(ownUs, 0);
    report(std::string("ownGemm ") + (dgelu ? "dgelu" : "gelu+aux") + (exact ? " erf" : "") +
               (kMajor ? "" : " b[k,n]") + " (timing)",
           DType::BF16, 0, 0, ownUs, shapeStr({M, N, K}));
  }
}

} // namespace
} // namespace tc::rt::cuda
