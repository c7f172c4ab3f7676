//===- matmul_test.cpp - the cuBLASLt wrapper against tc.matmul -----------===//
#include "test/cuda/cuda_test_util.h"

#include <array>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <unistd.h>

#include "runtime/src/cuda/cublaslt.h"
#include "runtime/src/cuda/cudnn/loader.h"

namespace tc::rt::cuda {
namespace {

using namespace tc::rt::cuda::test;

//===----------------------------------------------------------------------===//
// Batch planning (host only)
//===----------------------------------------------------------------------===//

/// Checks a plan against the broadcast rule, output matrix by output matrix.
void expectPlanCovers(const std::vector<int64_t> &a, const std::vector<int64_t> &b) {
  BatchPlan plan;
  ASSERT_OK(planBatches(a, b, &plan));
  size_t r = plan.outBatch.size();
  std::vector<int64_t> pa(r, 1), pb(r, 1);
  std::copy(a.begin(), a.end(), pa.begin() + (r - a.size()));
  std::copy(b.begin(), b.end(), pb.begin() + (r - b.size()));
  int64_t total = 1;
  for (int64_t d : plan.outBatch)
    total *= d;
  ASSERT_EQ(static_cast<int64_t>(plan.calls.size()) * plan.batchPerCall, total);
  // Expected operand matrix of every output matrix.
  std::vector<int64_t> idx(r, 0);
  for (int64_t o = 0; o < total; ++o) {
    int64_t ia = 0, ib = 0;
    for (size_t d = 0; d < r; ++d) {
      ia = ia * pa[d] + (pa[d] == 1 ? 0 : idx[d]);
      ib = ib * pb[d] + (pb[d] == 1 ? 0 : idx[d]);
    }
    const BatchPlan::Call &c = plan.calls[o / plan.batchPerCall];
    int64_t j = o % plan.batchPerCall;
    EXPECT_EQ(c.out + j, o);
    EXPECT_EQ(c.lhs + (plan.lhsStrided ? j : 0), ia) << "output matrix " << o;
    EXPECT_EQ(c.rhs + (plan.rhsStrided ? j : 0), ib) << "output matrix " << o;
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < plan.outBatch[d])
        break;
      idx[d] = 0;
    }
  }
}

TEST(CudaMatmulPlan, BroadcastBatchesBecomeFewStridedCalls) {
  BatchPlan p;
  ASSERT_OK(planBatches({}, {}, &p));
  EXPECT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.batchPerCall, 1);
  ASSERT_OK(planBatches({4, 3}, {4, 3}, &p));
  EXPECT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.batchPerCall, 12);
  ASSERT_OK(planBatches({4, 3}, {}, &p)); // shared weights: rhs broadcast
  EXPECT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.batchPerCall, 12);
  EXPECT_TRUE(p.lhsStrided);
  EXPECT_FALSE(p.rhsStrided);
  ASSERT_OK(planBatches({2, 1}, {3}, &p)); // tc.matmul's own example
  EXPECT_EQ(p.outBatch, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.batchPerCall, 3);
  EXPECT_FALSE(p.lhsStrided);
  EXPECT_TRUE(p.rhsStrided);
  for (auto [a, b] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{2, 1}, {3}},
           {{5, 1, 3}, {1, 4, 3}},
           {{2, 3, 4}, {4}},
           {{1, 1, 6}, {2, 5, 1}},
           {{7}, {3, 1}},
           {{2, 1, 1, 3}, {1, 4, 2, 3}},
       }) {
    SCOPED_TRACE(shapeToString(a) + " x " + shapeToString(b));
    expectPlanCovers(a, b);
  }
  Status st = planBatches({2}, {3}, &p);
  EXPECT_EQ(st.code(), StatusCode::InvalidArgument);
  EXPECT_NE(st.message().find("do not broadcast"), std::string::npos) << st.message();
}

//===----------------------------------------------------------------------===//
// Against the reference executor
//===----------------------------------------------------------------------===//

class CudaMatmul : public CudaTest {
protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped() || HasFatalFailure())
      return;
    ASSERT_OK(Matmul::create(&mm));
  }

  struct Case {
    std::string name;
    DType dt = DType::F32;
    std::vector<int64_t> lhs, rhs; // full shapes as stored (transposed if asked)
    bool ta = false, tb = false, tf32 = false;
    MatmulEpilogue epi = MatmulEpilogue::None;
    float alpha = 1, beta = 0;
    double tol = 0;
    /// alpha read on the device (tc.matmul's alpha operand; tc-fp4-exact).
    bool deviceAlpha = false;
    /// C0 added as the addend (cuBLASLt's C, beta 1) into a separate out.
    bool addend = false;
  };

  /// Runs `c` through Matmul (runBroadcast, or run() for the aux/beta
  /// variants) and through the reference: tc.matmul (+ tc.add bias)
  /// (+ tc.gelu tanh) (alpha, beta: tc.mul / tc.add).
  void runCase(const Case &c) {
    SCOPED_TRACE(c.name);
    size_t ra = c.lhs.size(), rb = c.rhs.size();
    int64_t m = c.ta ? c.lhs[ra - 1] : c.lhs[ra - 2], k = c.ta ? c.lhs[ra - 2] : c.lhs[ra - 1];
    int64_t n = c.tb ? c.rhs[rb - 2] : c.rhs[rb - 1];
    std::vector<int64_t> aBatch(c.lhs.begin(), c.lhs.end() - 2);
    std::vector<int64_t> bBatch(c.rhs.begin(), c.rhs.end() - 2);
    BatchPlan plan;
    ASSERT_OK(planBatches(aBatch, bBatch, &plan));
    std::vector<int64_t> outShape = plan.outBatch;
    outShape.push_back(m);
    outShape.push_back(n);
    bool bias = c.epi == MatmulEpilogue::Bias || c.epi == MatmulEpilogue::BiasGelu ||
                c.epi == MatmulEpilogue::BiasGeluAux;
    bool gelu = c.epi != MatmulEpilogue::None && c.epi != MatmulEpilogue::Bias;
    bool aux = c.epi == MatmulEpilogue::GeluAux || c.epi == MatmulEpilogue::BiasGeluAux;

    HostTensor A = randomTensor(ty(c.dt, c.lhs), rng), B = randomTensor(ty(c.dt, c.rhs), rng);
    HostTensor Bias = randomTensor(ty(c.dt, {n}), rng);
    HostTensor C0 = randomTensor(ty(c.dt, outShape), rng);

    // Reference.
    FnBuilder fb;
    int32_t a = fb.input("a", A.type), b = fb.input("b", B.type);
    std::vector<HostTensor> ins = {A, B};
    Attrs mmAttrs = {{"transpose_lhs", aInt(c.ta)}, {"transpose_rhs", aInt(c.tb)}};
    int32_t y;
    HostTensor Alpha = makeHostTensor(ty(DType::F32, {}), {c.alpha});
    if (c.deviceAlpha) { // the f32 alpha scales the sums before the one rounding
      int32_t s = fb.input("alpha", Alpha.type);
      ins.push_back(Alpha);
      y = fb.op("tc.matmul", {a, b, s}, ty(c.dt, outShape), mmAttrs);
    } else {
      y = fb.op("tc.matmul", {a, b}, ty(c.dt, outShape), mmAttrs);
    }
    if (c.alpha != 1 && !c.deviceAlpha) {
      int32_t s = fb.op("tc.constant", {}, ty(c.dt, {}),
                        {{"value", aTensor(makeHostTensor(ty(c.dt, {}), {c.alpha}))}});
      y = fb.op("tc.mul", {y, s}, ty(c.dt, outShape));
    }
    if (c.beta != 0 || c.addend) {
      ASSERT_EQ(c.addend ? 1.0f : c.beta, 1.0f);
      int32_t c0 = fb.input("c0", C0.type);
      ins.push_back(C0);
      y = fb.op("tc.add", {y, c0}, ty(c.dt, outShape));
    }
    if (bias) {
      int32_t bv = fb.input("bias", Bias.type);
      ins.push_back(Bias);
      y = fb.op("tc.add", {y, bv}, ty(c.dt, outShape));
    }
    int32_t pre = y;
    if (gelu)
      y = fb.op("tc.gelu", {y}, ty(c.dt, outShape), {{"approximate", aStr("tanh")}});
    fb.output("y", y);
    if (aux)
      fb.output("pre", pre);
    std::vector<HostTensor> want;
    Artifact empty;
    ASSERT_OK(runFunction(empty, fb.fn, ins, &want, f64Mode()));

    // GPU.
    DevBuf dA, dB, dBias, dC, dAux, dAlpha;
    ASSERT_OK(upload(makeHostTensor(ty(DType::F32, {1}), {c.alpha}), &dAlpha, stream()));
    const float *alphaP = c.deviceAlpha ? dAlpha.as<float>() : nullptr;
    ASSERT_OK(upload(A, &dA, stream()));
    ASSERT_OK(upload(B, &dB, stream()));
    ASSERT_OK(upload(Bias, &dBias, stream()));
    ASSERT_OK(upload(C0, &dC, stream()));
    ASSERT_OK(devZeros(C0.data.size(), &dAux, stream()));
    MatmulDesc d;
    d.dtype = c.dt;
    d.tf32 = c.tf32;
    d.transposeLhs = c.ta;
    d.transposeRhs = c.tb;
    d.m = m;
    d.n = n;
    d.k = k;
    d.epilogue = c.epi;
    d.alpha = c.deviceAlpha ? 1.0f : c.alpha; // unused with a device alpha
    d.beta = c.beta;
    d.deviceAlpha = c.deviceAlpha;
    d.addend = c.addend;
    DevBuf dOut; // the addend's separate result
    ASSERT_OK(devZeros(C0.data.size(), &dOut, stream()));
    if (c.addend) {
      ASSERT_TRUE(aBatch == bBatch) << "addend cases need equal batches";
      int64_t batch = 1;
      for (int64_t x : aBatch)
        batch *= x;
      d.batch = batch;
      ASSERT_OK(mm->run(d, dA.p, dB.p, dOut.p, stream(), dBias.p, nullptr, nullptr, dC.p));
    } else if (aux || c.beta != 0) {
      ASSERT_TRUE(aBatch == bBatch) << "run() cases need equal batches";
      int64_t batch = 1;
      for (int64_t x : aBatch)
        batch *= x;
      d.batch = batch;
      ASSERT_OK(mm->run(d, dA.p, dB.p, dC.p, stream(), dBias.p, dAux.p, alphaP));
    } else {
      ASSERT_OK(
          mm->runBroadcast(d, aBatch, bBatch, dA.p, dB.p, dC.p, stream(), dBias.p, alphaP));
    }
    HostTensor got;
    ASSERT_OK(download(c.addend ? dOut.p : dC.p, ty(c.dt, outShape), &got, stream()));
    check("matmul " + c.name, c.dt, hostTensorToDoubles(got), hostTensorToDoubles(want[0]),
          c.tol ? c.tol : tolFor(c.dt));
    if (aux) {
      HostTensor gotAux;
      ASSERT_OK(download(dAux.p, ty(c.dt, outShape), &gotAux, stream()));
      check("matmul " + c.name + " (aux)", c.dt, hostTensorToDoubles(gotAux),
            hostTensorToDoubles(want[1]), c.tol ? c.tol : tolFor(c.dt));
    }
  }

  std::unique_ptr<Matmul> mm;
};

TEST_F(CudaMatmul, F32MatchesReference) {
  using E = MatmulEpilogue;
  for (const Case &c : std::vector<Case>{
           {"plain", DType::F32, {64, 96}, {96, 80}},
           {"lhs^T", DType::F32, {96, 64}, {96, 80}, true},
           {"rhs^T", DType::F32, {64, 96}, {80, 96}, false, true},
           {"lhs^T rhs^T", DType::F32, {96, 64}, {80, 96}, true, true},
           {"odd sizes", DType::F32, {33, 67}, {67, 45}},
           {"batched", DType::F32, {3, 64, 96}, {3, 96, 80}},
           {"shared rhs", DType::F32, {4, 32, 96}, {96, 80}},
           {"broadcast [2,1]x[3]", DType::F32, {2, 1, 32, 48}, {3, 48, 40}},
           {"batched rhs^T", DType::F32, {2, 3, 32, 64}, {2, 3, 48, 64}, false, true},
           {"+bias", DType::F32, {64, 96}, {96, 80}, false, false, false, E::Bias},
           {"+gelu", DType::F32, {64, 96}, {96, 80}, false, false, false, E::Gelu},
           {"+bias+gelu", DType::F32, {64, 96}, {96, 80}, false, false, false, E::BiasGelu},
           {"+bias+gelu+aux", DType::F32, {64, 96}, {96, 80}, false, false, false, E::BiasGeluAux},
           {"batched +bias+gelu+aux",
            DType::F32,
            {2, 64, 96},
            {2, 96, 80},
            false,
            false,
            false,
            E::BiasGeluAux},
           {"alpha 0.5", DType::F32, {64, 96}, {96, 80}, false, false, false, E::None, 0.5f},
           {"beta 1 (accumulate)",
            DType::F32,
            {64, 96},
            {96, 80},
            false,
            false,
            false,
            E::None,
            1.0f,
            1.0f},
       })
    runCase(c);
}

TEST_F(CudaMatmul, Tf32MatchesReferenceLoosely) {
  // TF32 keeps 10 mantissa bits of each operand: ~5e-4 per product, a few
  // 1e-3 at worst over the output; a loose sanity check.
  runCase({"tf32",
           DType::F32,
           {128, 256},
           {256, 96},
           false,
           false,
           true,
           MatmulEpilogue::None,
           1,
           0,
           1e-2});
  runCase({"tf32 rhs^T +bias",
           DType::F32,
           {128, 256},
           {96, 256},
           false,
           true,
           true,
           MatmulEpilogue::Bias,
           1,
           0,
           1e-2});
}

TEST_F(CudaMatmul, Bf16AndF16MatchReference) {
  using E = MatmulEpilogue;
  for (const Case &c : std::vector<Case>{
           {"plain", DType::BF16, {64, 256}, {256, 80}},
           {"lhs^T rhs^T", DType::BF16, {256, 64}, {80, 256}, true, true},
           {"batched", DType::BF16, {3, 64, 128}, {3, 128, 80}},
           {"broadcast [2,1]x[3]", DType::BF16, {2, 1, 32, 48}, {3, 48, 40}},
           {"shared rhs +bias", DType::BF16, {2, 3, 32, 64}, {64, 48}, false, false, false,
            E::Bias},
           {"shared lhs", DType::BF16, {32, 64}, {3, 64, 48}},
           {"+bias+gelu", DType::BF16, {64, 256}, {256, 80}, false, false, false, E::BiasGelu},
           {"+bias+gelu+aux",
            DType::BF16,
            {64, 256},
            {256, 80},
            false,
            false,
            false,
            E::BiasGeluAux},
           {"beta 1 (accumulate)",
            DType::BF16,
            {64, 256},
            {256, 80},
            false,
            false,
            false,
            E::None,
            1.0f,
            1.0f},
           {"odd sizes", DType::BF16, {33, 67}, {67, 45}},
           {"plain", DType::F16, {64, 256}, {256, 80}},
           {"rhs^T +bias", DType::F16, {64, 256}, {80, 256}, false, true, false, E::Bias},
           // alpha read on the device (tc-fp4-exact's NVFP4 tensor scales).
           {"device alpha", DType::BF16, {64, 256}, {80, 256}, false, true, false, E::None,
            0.3712f, 0.0f, 0, true},
           {"device alpha shared rhs +bias", DType::BF16, {2, 3, 32, 64}, {64, 48}, false, false,
            false, E::Bias, 1.0f / 448.0f, 0.0f, 0, true},
           {"device alpha beta 1", DType::BF16, {64, 256}, {256, 80}, false, false, false,
            E::None, 2.5f, 1.0f, 0, true},
       })
    runCase(c);
}

TEST_F(CudaMatmul, AddendIsAddedBeforeTheBias) {
  // A projection's residual add as cuBLASLt's C (tc.epilogue_addend): out =
  // lhs rhs + C0 (+ bias), C0 untouched.
  using E = MatmulEpilogue;
  for (DType dt : {DType::F32, DType::BF16}) {
    Case c{"addend", dt, {64, 128}, {128, 96}};
    c.addend = true;
    runCase(c);
    Case b{"addend +bias rhs^T batch 2", dt, {2, 64, 128}, {2, 96, 128}, false, true};
    b.epi = E::Bias;
    b.addend = true;
    runCase(b);
  }
  // Refused: an addend with beta 1, and a pointer without the flag.
  DevBuf buf;
  ASSERT_OK(devZeros(64 * 64 * 4, &buf, stream()));
  MatmulDesc d;
  d.m = d.n = d.k = 64;
  d.addend = true;
  d.beta = 1.0f;
  EXPECT_FALSE(mm->run(d, buf.p, buf.p, buf.p, stream(), nullptr, nullptr, nullptr, buf.p).isOk());
  d.addend = false;
  d.beta = 0.0f;
  EXPECT_FALSE(mm->run(d, buf.p, buf.p, buf.p, stream(), nullptr, nullptr, nullptr, buf.p).isOk());
}

TEST_F(CudaMatmul, DeviceAlphaNeedsItsPointer) {
  DevBuf buf;
  ASSERT_OK(devZeros(4096, &buf, stream()));
  MatmulDesc d;
  d.dtype = DType::BF16;
  d.m = d.n = d.k = 16;
  d.deviceAlpha = true;
  EXPECT_FALSE(mm->run(d, buf.p, buf.p, buf.p, stream()).isOk());
  d.deviceAlpha = false;
  EXPECT_FALSE(
      mm->run(d, buf.p, buf.p, buf.p, stream(), nullptr, nullptr, buf.as<float>()).isOk());
  d.deviceAlpha = true;
  d.beta = 0.5f;
  EXPECT_FALSE(
      mm->run(d, buf.p, buf.p, buf.p, stream(), nullptr, nullptr, buf.as<float>()).isOk());
}

TEST_F(CudaMatmul, PlansAreCachedPerShape) {
  DevBuf a, b, c;
  ASSERT_OK(devZeros(64 * 64 * 4, &a, stream()));
  ASSERT_OK(devZeros(64 * 64 * 4, &b, stream()));
  ASSERT_OK(devZeros(64 * 64 * 4, &c, stream()));
  MatmulDesc d;
  d.m = d.n = d.k = 64;
  size_t before = mm->cachedPlans();
  ASSERT_OK(mm->run(d, a.p, b.p, c.p, stream()));
  ASSERT_OK(mm->run(d, a.p, b.p, c.p, stream()));
  EXPECT_EQ(mm->cachedPlans(), before + 1);
  d.transposeLhs = true;
  ASSERT_OK(mm->run(d, a.p, b.p, c.p, stream()));
  EXPECT_EQ(mm->cachedPlans(), before + 2);
  // Errors are statuses naming the problem.
  d.dtype = DType::I32;
  Status st = mm->run(d, a.p, b.p, c.p, stream());
  EXPECT_EQ(st.code(), StatusCode::InvalidArgument);
  d.dtype = DType::BF16;
  d.tf32 = true;
  EXPECT_EQ(mm->run(d, a.p, b.p, c.p, stream()).code(), StatusCode::InvalidArgument);
  d.tf32 = false;
  d.epilogue = MatmulEpilogue::Bias;
  st = mm->run(d, a.p, b.p, c.p, stream());
  EXPECT_NE(st.message().find("needs a bias"), std::string::npos) << st.message();
}

/// The weight-gradient GEMM with its bias gradient (BiasGradLhs / Rhs):
/// the product and the sum over K of one operand against tc.matmul and
/// tc.reduce_sum, through cuBLASLt's BGRAD epilogue where it has one and the
/// separate sum (forced) either way.
TEST_F(CudaMatmul, BiasGradientSumsTheOperandOverK) {
  using E = MatmulEpilogue;
  struct BgCase {
    DType dt;
    bool ta, tb;
    E epi;
    int64_t m, n, k;
  };
  for (bool force : {false, true}) {
    std::unique_ptr<Matmul> own;
    ASSERT_OK(Matmul::create(&own));
    own->forceSeparateEpilogues(force);
    for (const BgCase &c : std::vector<BgCase>{
             // GPT-2's Conv1D: dW [in, out] = x^T dY, db = the column sums of dY (rhs).
             {DType::BF16, true, false, E::BiasGradRhs, 64, 96, 512},
             // A Linear layer: dW [out, in] = dY^T x, db = the column sums of dY (lhs).
             {DType::BF16, true, false, E::BiasGradLhs, 96, 64, 512},
             {DType::F32, true, false, E::BiasGradRhs, 48, 80, 256},
             {DType::F32, true, false, E::BiasGradLhs, 80, 48, 256},
             {DType::F16, true, false, E::BiasGradLhs, 64, 32, 384},
             // The column-sum kernel's scalar path (columns not a multiple
             // of 8) and several row parts (K = 3000 tokens).
             {DType::BF16, true, false, E::BiasGradLhs, 36, 40, 3000},
             {DType::F32, true, false, E::BiasGradRhs, 24, 52, 3000},
             {DType::F16, true, false, E::BiasGradRhs, 32, 600, 2048},
             // The other layouts (sums of rows as stored), odd sizes.
             {DType::BF16, false, true, E::BiasGradRhs, 40, 24, 136},
             {DType::BF16, false, false, E::BiasGradLhs, 24, 40, 136},
         }) {
      bool lhsSide = c.epi == E::BiasGradLhs;
      std::string name = std::string(dtypeName(c.dt)) + (c.ta ? " lhs^T" : "") +
                         (c.tb ? " rhs^T" : "") + (lhsSide ? " sum(lhs)" : " sum(rhs)") +
                         (force ? " separate" : "");
      SCOPED_TRACE(name);
      std::vector<int64_t> lhsShape = c.ta ? std::vector<int64_t>{c.k, c.m}
                                           : std::vector<int64_t>{c.m, c.k};
      std::vector<int64_t> rhsShape = c.tb ? std::vector<int64_t>{c.n, c.k}
                                           : std::vector<int64_t>{c.k, c.n};
      HostTensor A = randomTensor(ty(c.dt, lhsShape), rng), B = randomTensor(ty(c.dt, rhsShape), rng);
      // Reference: the product, and the operand summed over its K axis.
      FnBuilder fb;
      int32_t a = fb.input("a", A.type), b = fb.input("b", B.type);
      int32_t y = fb.op("tc.matmul", {a, b}, ty(c.dt, {c.m, c.n}),
                        {{"transpose_lhs", aInt(c.ta)}, {"transpose_rhs", aInt(c.tb)}});
      int64_t len = lhsSide ? c.m : c.n;
      int64_t kAxis = lhsSide ? (c.ta ? 0 : 1) : (c.tb ? 1 : 0);
      int32_t sum = fb.op("tc.reduce_sum", {lhsSide ? a : b}, ty(c.dt, {len}),
                          {{"axes", aInts({kAxis})}});
      fb.output("y", y);
      fb.output("db", sum);
      std::vector<HostTensor> want;
      Artifact empty;
      ASSERT_OK(runFunction(empty, fb.fn, {A, B}, &want, f64Mode()));

      DevBuf dA, dB, dC, dBias;
      ASSERT_OK(upload(A, &dA, stream()));
      ASSERT_OK(upload(B, &dB, stream()));
      ASSERT_OK(devZeros(c.m * c.n * 4, &dC, stream()));
      ASSERT_OK(devZeros(len * 4, &dBias, stream()));
      MatmulDesc d;
      d.dtype = c.dt;
      d.transposeLhs = c.ta;
      d.transposeRhs = c.tb;
      d.m = c.m;
      d.n = c.n;
      d.k = c.k;
      d.epilogue = c.epi;
      for (int call = 0; call < 2; ++call) // the first decides the path, the second takes it
        ASSERT_OK(own->run(d, dA.p, dB.p, dC.p, stream(), dBias.p));
      Matmul::EpiloguePath path = own->epiloguePath(d);
      ASSERT_NE(path, Matmul::EpiloguePath::Unknown);
      if (force)
        EXPECT_EQ(path, Matmul::EpiloguePath::Separate);
      std::printf("bias gradient %s (%s): %s\n", name.c_str(), d.toString().c_str(),
                  path == Matmul::EpiloguePath::Epilogue ? "cuBLASLt BGRAD epilogue"
                                                         : "product and separate sum");
      HostTensor got, gotDb;
      ASSERT_OK(download(dC.p, ty(c.dt, {c.m, c.n}), &got, stream()));
      ASSERT_OK(download(dBias.p, ty(c.dt, {len}), &gotDb, stream()));
      check("matmul " + name, c.dt, hostTensorToDoubles(got), hostTensorToDoubles(want[0]),
            tolFor(c.dt));
      // A sum of k values of magnitude ~1: the tolerance of the product.
      check("bias gradient " + name, c.dt, hostTensorToDoubles(gotDb),
            hostTensorToDoubles(want[1]), tolFor(c.dt));
    }
  }
  // What a bias gradient does not take.
  MatmulDesc d;
  d.dtype = DType::BF16;
  d.m = d.n = d.k = 64;
  d.transposeLhs = true;
  d.epilogue = E::BiasGradRhs;
  d.beta = 1.0f;
  DevBuf x, db;
  ASSERT_OK(devZeros(64 * 64 * 2, &x, stream()));
  ASSERT_OK(devZeros(64 * 2, &db, stream()));
  Status st = mm->run(d, x.p, x.p, x.p, stream(), db.p);
  EXPECT_EQ(st.code(), StatusCode::InvalidArgument);
  EXPECT_NE(st.message().find("a bias gradient takes"), std::string::npos) << st.message();
  d.beta = 0.0f;
  st = mm->run(d, x.p, x.p, x.p, stream(), nullptr);
  EXPECT_NE(st.message().find("needs a bias"), std::string::npos) << st.message();
}

/// DGELU: the product times gelu_tanh'(x) of the forward's pre-activation x,
/// against the same in double on the host, through cuBLASLt's epilogue where
/// it has one and the separate GELU backward kernel (forced) either way.
TEST_F(CudaMatmul, DGeluMultipliesByTheGeluDerivative) {
  const int64_t m = 64, n = 96, k = 128;
  for (bool force : {false, true}) {
    std::unique_ptr<Matmul> own;
    ASSERT_OK(Matmul::create(&own));
    own->forceSeparateEpilogues(force);
    for (DType dt : {DType::BF16, DType::F32}) {
      std::string name = std::string(dtypeName(dt)) + (force ? " separate" : "");
      SCOPED_TRACE(name);
      HostTensor A = randomTensor(ty(dt, {m, k}), rng), B = randomTensor(ty(dt, {n, k}), rng);
      HostTensor X = randomTensor(ty(dt, {m, n}), rng);
      std::vector<double> a = hostTensorToDoubles(A), b = hostTensorToDoubles(B),
                          x = hostTensorToDoubles(X), want(m * n);
      const double kk = std::sqrt(2.0 / M_PI), c = 0.044715;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double p = 0;
          for (int64_t l = 0; l < k; ++l)
            p += a[i * k + l] * b[j * k + l];
          double v = x[i * n + j], u = kk * (v + c * v * v * v), t = std::tanh(u);
          double d = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * kk * (1 + 3 * c * v * v);
          want[i * n + j] = p * d;
        }
      DevBuf dA, dB, dX, dC;
      ASSERT_OK(upload(A, &dA, stream()));
      ASSERT_OK(upload(B, &dB, stream()));
      ASSERT_OK(upload(X, &dX, stream()));
      ASSERT_OK(devZeros(m * n * 4, &dC, stream()));
      MatmulDesc d;
      d.dtype = dt;
      d.transposeRhs = true;
      d.m = m;
      d.n = n;
      d.k = k;
      d.epilogue = MatmulEpilogue::DGelu;
      for (int call = 0; call < 2; ++call)
        ASSERT_OK(own->run(d, dA.p, dB.p, dC.p, stream(), nullptr, dX.p));
      Matmul::EpiloguePath path = own->epiloguePath(d);
      ASSERT_NE(path, Matmul::EpiloguePath::Unknown);
      if (force)
        EXPECT_EQ(path, Matmul::EpiloguePath::Separate);
      std::printf("dgelu %s (%s): %s\n", name.c_str(), d.toString().c_str(),
                  path == Matmul::EpiloguePath::Epilogue ? "cuBLASLt DGELU epilogue"
                                                         : "product and GELU backward kernel");
      HostTensor got;
      ASSERT_OK(download(dC.p, ty(dt, {m, n}), &got, stream()));
      check("matmul +dgelu " + name, dt, hostTensorToDoubles(got), want,
            dt == DType::F32 ? 1e-4 : tolFor(dt));
    }
  }
  // DGELU reads its aux: none is an error naming it.
  MatmulDesc d;
  d.dtype = DType::BF16;
  d.m = d.n = d.k = 64;
  d.epilogue = MatmulEpilogue::DGelu;
  DevBuf z;
  ASSERT_OK(devZeros(64 * 64 * 2, &z, stream()));
  Status st = mm->run(d, z.p, z.p, z.p, stream());
  EXPECT_NE(st.message().find("needs an aux buffer"), std::string::npos) << st.message();
}

/// The exact GELU's epilogues (no cuBLASLt form: the product and the GELU
/// kernels; tc's own GEMM is off in this Matmul): GELU + aux with and
/// without a bias, and DGELU, against a double-precision reference, N a
/// multiple of 8 or not.
TEST_F(CudaMatmul, ExactGeluEpiloguesMatchReference) {
  const int64_t m = 64, k = 128;
  for (auto [dt, n] : std::vector<std::pair<DType, int64_t>>{
           {DType::BF16, 96}, {DType::F32, 96}, {DType::BF16, 100}}) { // (any N: not cuBLASLt's)
    SCOPED_TRACE(std::string(dtypeName(dt)) + " n " + std::to_string(n));
    HostTensor A = randomTensor(ty(dt, {m, k}), rng), B = randomTensor(ty(dt, {n, k}), rng);
    HostTensor Bias = randomTensor(ty(dt, {n}), rng), X = randomTensor(ty(dt, {m, n}), rng, -3, 3);
    std::vector<double> a = hostTensorToDoubles(A), b = hostTensorToDoubles(B),
                        bias = hostTensorToDoubles(Bias), x = hostTensorToDoubles(X);
    std::vector<double> prod(m * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double p = 0;
        for (int64_t l = 0; l < k; ++l)
          p += a[i * k + l] * b[j * k + l];
        prod[i * n + j] = p;
      }
    auto gelu = [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); };
    auto geluGrad = [](double v) {
      return 0.5 * (1 + std::erf(v / std::sqrt(2.0))) +
             v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
    };
    DevBuf dA, dB, dBias, dX, dOut, dAux;
    ASSERT_OK(upload(A, &dA, stream()));
    ASSERT_OK(upload(B, &dB, stream()));
    ASSERT_OK(upload(Bias, &dBias, stream()));
    ASSERT_OK(upload(X, &dX, stream()));
    ASSERT_OK(devZeros(m * n * 4, &dOut, stream()));
    ASSERT_OK(devZeros(m * n * 4, &dAux, stream()));
    MatmulDesc d;
    d.dtype = dt;
    d.transposeRhs = true;
    d.m = m, d.n = n, d.k = k;
    for (bool withBias : {true, false}) {
      d.epilogue = withBias ? MatmulEpilogue::BiasGeluErfAux : MatmulEpilogue::GeluErfAux;
      ASSERT_OK(mm->run(d, dA.p, dB.p, dOut.p, stream(), dBias.p, dAux.p));
      EXPECT_EQ(mm->epiloguePath(d), Matmul::EpiloguePath::Separate);
      std::vector<double> pre(m * n), out(m * n);
      for (int64_t i = 0; i < m * n; ++i) {
        pre[i] = prod[i] + (withBias ? bias[i % n] : 0.0);
        out[i] = gelu(pre[i]);
      }
      HostTensor got, gotAux;
      ASSERT_OK(download(dOut.p, ty(dt, {m, n}), &got, stream()));
      ASSERT_OK(download(dAux.p, ty(dt, {m, n}), &gotAux, stream()));
      std::string name = std::string("matmul +") + (withBias ? "bias+" : "") + "gelu(erf)+aux";
      check(name, dt, hostTensorToDoubles(got), out, dt == DType::F32 ? 1e-4 : tolFor(dt));
      check(name + " (aux)", dt, hostTensorToDoubles(gotAux), pre,
            dt == DType::F32 ? 1e-4 : tolFor(dt));
    }
    d.epilogue = MatmulEpilogue::DGeluErf;
    ASSERT_OK(mm->run(d, dA.p, dB.p, dOut.p, stream(), nullptr, dX.p));
    EXPECT_EQ(mm->epiloguePath(d), Matmul::EpiloguePath::Separate);
    std::vector<double> want(m * n);
    for (int64_t i = 0; i < m * n; ++i)
      want[i] = prod[i] * geluGrad(x[i]);
    HostTensor got;
    ASSERT_OK(download(dOut.p, ty(dt, {m, n}), &got, stream()));
    check("matmul +dgelu(erf)", dt, hostTensorToDoubles(got), want,
          dt == DType::F32 ? 1e-4 : tolFor(dt));
  }
}

// cuDNN's runtime-fused GEMM for the tanh GELU + aux epilogue (the optional
// plugin, Matmul's Library path), forced: out = gelu(lhs rhs + bias) and aux
// = the pre-activation against a double reference, rhs stored [n, k] and [k,
// n], with and without the bias; then at GPT-2's c_fc shape, timed beside
// cuBLASLt's epilogue, and the path an untied Matmul's first call takes.
// Skipped, saying why, without cuDNN.
TEST_F(CudaMatmul, CudnnGeluAuxMatchesReference) {
  if (!cudnnAvailable())
    GTEST_SKIP() << cudnnStatusLine();
  const DType dt = DType::BF16;
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{64, 96, 128}, {256, 384, 256}})
    for (bool kMajor : {true, false}) {
      SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
                   (kMajor ? " rhs [n, k]" : " rhs [k, n]"));
      HostTensor A = randomTensor(ty(dt, {m, k}), rng);
      HostTensor B = randomTensor(
          ty(dt, kMajor ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}), rng);
      HostTensor Bias = randomTensor(ty(dt, {n}), rng);
      std::vector<double> a = hostTensorToDoubles(A), b = hostTensorToDoubles(B),
                          bias = hostTensorToDoubles(Bias);
      DevBuf dA, dB, dBias, dOut, dAux;
      ASSERT_OK(upload(A, &dA, stream()));
      ASSERT_OK(upload(B, &dB, stream()));
      ASSERT_OK(upload(Bias, &dBias, stream()));
      ASSERT_OK(devZeros(m * n * 2, &dOut, stream()));
      ASSERT_OK(devZeros(m * n * 2, &dAux, stream()));
      std::unique_ptr<Matmul> lib;
      ASSERT_OK(Matmul::create(&lib));
      lib->forceLibraryEpilogues(true);
      MatmulDesc d;
      d.dtype = dt;
      d.transposeRhs = kMajor;
      d.m = m, d.n = n, d.k = k;
      for (bool withBias : {true, false}) {
        d.epilogue = withBias ? MatmulEpilogue::BiasGeluAux : MatmulEpilogue::GeluAux;
        ASSERT_OK(lib->run(d, dA.p, dB.p, dOut.p, stream(), dBias.p, dAux.p));
        EXPECT_EQ(lib->epiloguePath(d), Matmul::EpiloguePath::Library);
        std::vector<double> pre(m * n), out(m * n);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double p = withBias ? bias[j] : 0.0;
            for (int64_t l = 0; l < k; ++l)
              p += a[i * k + l] * (kMajor ? b[j * k + l] : b[l * n + j]);
            pre[i * n + j] = p;
            double u = std::sqrt(2.0 / M_PI) * (p + 0.044715 * p * p * p);
            out[i * n + j] = 0.5 * p * (1 + std::tanh(u));
          }
        HostTensor got, gotAux;
        ASSERT_OK(download(dOut.p, ty(dt, {m, n}), &got, stream()));
        ASSERT_OK(download(dAux.p, ty(dt, {m, n}), &gotAux, stream()));
        std::string name = std::string("matmul cudnn +") + (withBias ? "bias+" : "") + "gelu+aux";
        check(name, dt, hostTensorToDoubles(got), out, tolFor(dt));
        check(name + " (aux)", dt, hostTensorToDoubles(gotAux), pre, tolFor(dt));
      }
    }
  // GPT-2 124M's c_fc, [16384, 768] x [3072, 768]^T + bias, GELU + aux.
  const int64_t M = 16384, K = 768, N = 3072;
  DevBuf a, b, bias, out, aux;
  ASSERT_OK(devZeros(M * K * 2, &a, stream()));
  ASSERT_OK(devZeros(N * K * 2, &b, stream()));
  ASSERT_OK(devZeros(N * 2, &bias, stream()));
  ASSERT_OK(devZeros(M * N * 2, &out, stream()));
  ASSERT_OK(devZeros(M * N * 2, &aux, stream()));
  MatmulDesc d;
  d.dtype = dt, d.transposeRhs = true, d.m = M, d.n = N, d.k = K;
  d.epilogue = MatmulEpilogue::BiasGeluAux;
  std::unique_ptr<Matmul> lib, any;
  ASSERT_OK(Matmul::create(&lib));
  ASSERT_OK(Matmul::create(&any));
  lib->forceLibraryEpilogues(true);
  double libUs =
      timeUs(stream(), 20, [&] { return lib->run(d, a.p, b.p, out.p, stream(), bias.p, aux.p); });
  // The same bits call after call (no split-K atomics): random operands, two runs.
  {
    HostTensor A = randomTensor(ty(dt, {M, K}), rng), B = randomTensor(ty(dt, {N, K}), rng);
    ASSERT_OK(upload(A, &a, stream()));
    ASSERT_OK(upload(B, &b, stream()));
    HostTensor first, again;
    ASSERT_OK(lib->run(d, a.p, b.p, out.p, stream(), bias.p, aux.p));
    ASSERT_OK(download(out.p, ty(dt, {M, N}), &first, stream()));
    ASSERT_OK(lib->run(d, a.p, b.p, out.p, stream(), bias.p, aux.p));
    ASSERT_OK(download(out.p, ty(dt, {M, N}), &again, stream()));
    EXPECT_EQ(first.data, again.data) << "cuDNN's GEMM + GELU gave other bits on a second call";
  }
  double anyUs =
      timeUs(stream(), 20, [&] { return any->run(d, a.p, b.p, out.p, stream(), bias.p, aux.p); });
  const char *paths[] = {"unknown", "cuBLASLt's epilogue", "separate", "tc's own", "cuDNN"};
  std::printf("matmul %s: cuDNN %.1f us; the timed choice (%s) %.1f us\n", d.toString().c_str(),
              libUs, paths[static_cast<int>(any->epiloguePath(d))], anyUs);
  report("matmul +bias+gelu+aux cudnn (timing)", dt, 0, tolFor(dt), libUs, shapeStr({M, K, N}));
  report("matmul +bias+gelu+aux chosen (timing)", dt, 0, tolFor(dt), anyUs, shapeStr({M, K, N}));
}

/// The tuning record (Matmul::setTuningRecord): a tuned problem's choice is
/// written to the file; a later Matmul with a record of the same file takes
/// it without timing (so the same algorithm, the same bits), a stale choice
/// (another candidate count) is timed again and replaced, and an epilogue's
/// way is kept the same way.
TEST_F(CudaMatmul, TuningRecordKeepsChoicesAcrossProcesses) {
  std::string dir = ::testing::TempDir() + "/tc_matmul_tuning_" + std::to_string(::getpid());
  ASSERT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
  int dev = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  DeviceInfo info;
  ASSERT_OK(queryDevice(dev, &info));
  std::string identity = Matmul::tuningIdentity(info);
  EXPECT_NE(identity.find(" sm_"), std::string::npos) << identity;
  EXPECT_NE(identity.find(" cuBLASLt "), std::string::npos) << identity;
  const std::string path = dir + "/matmul/" + TuningRecord::fileNameOf(identity) + ".tsv";
  auto fresh = [&](std::unique_ptr<Matmul> *out) {
    ASSERT_OK(Matmul::create(out));
    (*out)->setTuningRecord(std::make_shared<TuningRecord>(path, identity));
  };
  // The file's line for a key starting with `prefix`: key and value.
  auto lineOf = [&](const std::string &prefix, std::string *key, std::string *value) {
    std::ifstream f(path);
    std::string line;
    while (std::getline(f, line))
      if (line.rfind(prefix, 0) == 0) {
        size_t tab = line.find('\t');
        *key = line.substr(0, tab);
        *value = line.substr(tab + 1);
        return true;
      }
    return false;
  };

  const int64_t m = 1024, n = 768, k = 3072;
  HostTensor A = randomTensor(ty(DType::BF16, {m, k}), rng);
  HostTensor B = randomTensor(ty(DType::BF16, {k, n}), rng);
  DevBuf dA, dB, dC1, dC2;
  ASSERT_OK(upload(A, &dA, stream()));
  ASSERT_OK(upload(B, &dB, stream()));
  ASSERT_OK(devZeros(m * n * 2, &dC1, stream()));
  ASSERT_OK(devZeros(m * n * 2, &dC2, stream()));
  MatmulDesc d;
  d.dtype = DType::BF16;
  d.m = m;
  d.n = n;
  d.k = k;

  std::unique_ptr<Matmul> first;
  fresh(&first);
  ASSERT_OK(first->run(d, dA.p, dB.p, dC1.p, stream()));
  std::string key, value;
  ASSERT_TRUE(lineOf("algo " + d.toString() + " ", &key, &value))
      << "no choice for " << d.toString() << " in " << path;
  size_t of = value.find(" of ");
  ASSERT_NE(of, std::string::npos) << value;
  int count = std::stoi(value.substr(of + 4));
  EXPECT_EQ(std::stoi(value), first->chosenCandidate(d)) << value;
  if (count < 2)
    GTEST_SKIP() << "cuBLASLt offers one algorithm for " << d.toString() << ": nothing to choose";

  // Another candidate put in the record: a later Matmul takes it, untimed.
  const int other = count - 1 == first->chosenCandidate(d) ? 0 : count - 1;
  ASSERT_TRUE(TuningRecord(path, identity)
                  .put(key, std::to_string(other) + " of " + std::to_string(count))
                  .isOk());
  std::unique_ptr<Matmul> second;
  fresh(&second);
  ASSERT_OK(second->run(d, dA.p, dB.p, dC2.p, stream()));
  EXPECT_EQ(second->chosenCandidate(d), other);

  // The same choice, the same bits: a third Matmul reading the record again.
  std::unique_ptr<Matmul> third;
  fresh(&third);
  ASSERT_OK(third->run(d, dA.p, dB.p, dC1.p, stream()));
  EXPECT_EQ(third->chosenCandidate(d), other);
  HostTensor r2, r3;
  ASSERT_OK(download(dC2.p, ty(DType::BF16, {m, n}), &r2, stream()));
  ASSERT_OK(download(dC1.p, ty(DType::BF16, {m, n}), &r3, stream()));
  EXPECT_EQ(r2.data, r3.data) << "two Matmuls with one recorded algorithm differ in the bits";

  // A stale choice (another candidate count) is timed again and replaced.
  ASSERT_TRUE(TuningRecord(path, identity).put(key, "0 of 99").isOk());
  std::unique_ptr<Matmul> fourth;
  fresh(&fourth);
  ASSERT_OK(fourth->run(d, dA.p, dB.p, dC1.p, stream()));
  ASSERT_TRUE(lineOf(key, &key, &value));
  EXPECT_EQ(value, std::to_string(fourth->chosenCandidate(d)) + " of " + std::to_string(count));

  // Without tuning the record is neither read nor written: the heuristic's first.
  setMatmulTuning(false);
  std::unique_ptr<Matmul> untuned;
  fresh(&untuned);
  ASSERT_TRUE(TuningRecord(path, identity)
                  .put(key, std::to_string(other) + " of " + std::to_string(count))
                  .isOk());
  Status st = untuned->run(d, dA.p, dB.p, dC1.p, stream());
  setMatmulTuning(true);
  ASSERT_OK(st);
  EXPECT_EQ(untuned->chosenCandidate(d), 0);

  // An epilogue's way: the separate form put in the record is taken.
  MatmulDesc g;
  g.dtype = DType::BF16;
  g.transposeLhs = true;
  g.m = 768;
  g.n = 256;
  g.k = 1024;
  g.epilogue = MatmulEpilogue::BiasGradRhs;
  DevBuf x, y, w, db;
  ASSERT_OK(upload(randomTensor(ty(DType::BF16, {g.k, g.m}), rng), &x, stream()));
  ASSERT_OK(upload(randomTensor(ty(DType::BF16, {g.k, g.n}), rng), &y, stream()));
  ASSERT_OK(devZeros(g.m * g.n * 2, &w, stream()));
  ASSERT_OK(devZeros(g.n * 2, &db, stream()));
  std::unique_ptr<Matmul> timed;
  fresh(&timed);
  ASSERT_OK(timed->run(g, x.p, y.p, w.p, stream(), db.p));
  ASSERT_TRUE(lineOf("path " + g.toString(), &key, &value)) << "no way kept for " << g.toString();
  for (const char *way : {"separate", "epilogue"}) {
    ASSERT_TRUE(TuningRecord(path, identity).put(key, way).isOk());
    std::unique_ptr<Matmul> later;
    fresh(&later);
    Status st2 = later->run(g, x.p, y.p, w.p, stream(), db.p);
    if (std::string(way) == "epilogue" && !st2.isOk())
      continue; // no BGRAD algorithm here: the separate form only
    ASSERT_OK(st2);
    Matmul::EpiloguePath p = later->epiloguePath(g);
    EXPECT_EQ(p, std::string(way) == "separate" ? Matmul::EpiloguePath::Separate
                                                : Matmul::EpiloguePath::Epilogue)
        << way;
  }
}

TEST_F(CudaMatmul, GptShapesTiming) {
  // GPT-2 124M MLP up-projection at batch 16 x 1024 tokens: [16384, 768] x
  // [768, 3072] + bias + GELU, bf16; and the fp32 (no TF32) projection.
  const int64_t M = 16384, K = 768, N = 3072;
  for (DType dt : {DType::BF16, DType::F32}) {
    size_t eb = dt == DType::F32 ? 4 : 2;
    DevBuf a, b, bias, c;
    ASSERT_OK(devZeros(M * K * eb, &a, stream()));
    ASSERT_OK(devZeros(K * N * eb, &b, stream()));
    ASSERT_OK(devZeros(N * eb, &bias, stream()));
    ASSERT_OK(devZeros(M * N * eb, &c, stream()));
    MatmulDesc d;
    d.dtype = dt;
    d.m = M;
    d.n = N;
    d.k = K;
    d.epilogue = MatmulEpilogue::BiasGelu;
    double us = timeUs(stream(), 20, [&] { return mm->run(d, a.p, b.p, c.p, stream(), bias.p); });
    ASSERT_GT(us, 0);
    std::printf("matmul %s %ldx%ldx%ld +bias+gelu: %.1f us, %.1f TFLOP/s\n", dtypeName(dt), (long)M,
                (long)N, (long)K, us, 2.0 * M * N * K / (us * 1e-6) / 1e12);
    report("matmul +bias+gelu (timing)", dt, 0, tolFor(dt), us, shapeStr({M, K, N}));
  }
  // GPT-2 124M's weight gradients with their bias gradients (x^T dY, dY
  // summed over the 16384 tokens), each way: the path the first call chose,
  // then the product alone, for the bench's record.
  for (auto [m, n] : std::vector<std::pair<int64_t, int64_t>>{{768, 3072}, {3072, 768}, {768, 2304}, {768, 768}}) {
    const int64_t k = 16384;
    DevBuf x, dy, dw, db;
    ASSERT_OK(devZeros(k * m * 2, &x, stream()));
    ASSERT_OK(devZeros(k * n * 2, &dy, stream()));
    ASSERT_OK(devZeros(m * n * 2, &dw, stream()));
    ASSERT_OK(devZeros(n * 2, &db, stream()));
    MatmulDesc d;
    d.dtype = DType::BF16;
    d.m = m;
    d.n = n;
    d.k = k;
    d.transposeLhs = true;
    double plain = timeUs(stream(), 20, [&] { return mm->run(d, x.p, dy.p, dw.p, stream()); });
    d.epilogue = MatmulEpilogue::BiasGradRhs;
    double withSum = timeUs(stream(), 20, [&] { return mm->run(d, x.p, dy.p, dw.p, stream(), db.p); });
    std::unique_ptr<Matmul> sep;
    ASSERT_OK(Matmul::create(&sep));
    sep->forceSeparateEpilogues(true);
    double separate =
        timeUs(stream(), 20, [&] { return sep->run(d, x.p, dy.p, dw.p, stream(), db.p); });
    std::printf("matmul %s: %.1f us with the bias gradient (%s), %.1f us without, %.1f us with "
                "the separate column sums\n",
                d.toString().c_str(), withSum,
                mm->epiloguePath(d) == Matmul::EpiloguePath::Epilogue ? "BGRAD epilogue"
                                                                      : "separate sum",
                plain, separate);
    report("matmul +bias-grad (timing)", DType::BF16, 0, tolFor(DType::BF16), withSum,
           shapeStr({m, n, k}));
  }
}

} // namespace
} // namespace tc::rt::cuda
