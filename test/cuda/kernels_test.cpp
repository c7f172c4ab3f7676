//===- kernels_test.cpp - softmax, norms, cross-entropy, embedding, GELU, casts
//
// Each kernel against the CPU reference on random inputs: through the tc op
// where one exists (tc.softmax, tc.layer_norm, tc.rms_norm, tc.cross_entropy
// and tc.cross_entropy_grad, tc.gather and tc.scatter_add, tc.gelu, tc.cast),
// otherwise (norm backward, GELU backward) a double-precision loop here.
// Shapes cover both the vectorised path (last dim a multiple of 8) and the
// scalar one. Each test then times the kernel at a GPT-2 124M size.
//
//===----------------------------------------------------------------------===//
#include "test/cuda/cuda_test_util.h"

#include "runtime/src/base/float_format.h"
#include "runtime/src/cuda/kernels/kernels.h"

namespace tc::rt::cuda {
namespace {

using namespace tc::rt::cuda::test;

const DType kFloatTypes[] = {DType::F32, DType::BF16};

int64_t bytesOf(DType dt) { return dt == DType::F32 ? 4 : 2; }

class CudaKernels : public CudaTest {
public:
  std::mt19937 &rngRef() { return rng; }
  cudaStream_t streamRef() const { return stream(); }
};

//===----------------------------------------------------------------------===//
// softmax / log_softmax
//===----------------------------------------------------------------------===//

TEST_F(CudaKernels, SoftmaxMatchesReference) {
  for (DType dt : kFloatTypes)
    for (bool log : {false, true}) {
      std::string name = log ? "log_softmax" : "softmax";
      std::vector<double> got, want;
      for (auto [rows, cols] :
           {std::pair<int64_t, int64_t>{37, 1000}, {16, 4096}, {16, 1024}, {5, 13}}) {
        HostTensor x = randomTensor(ty(dt, {rows, cols}), rng, -4, 4);
        if (cols == 1024) { // a causal mask: row r sees columns [0, 64 r]
          std::vector<double> v = hostTensorToDoubles(x);
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 64 * r + 1; j < cols; ++j)
              v[r * cols + j] = -INFINITY;
          x = makeHostTensor(x.type, v);
        }
        std::vector<HostTensor> ref;
        ASSERT_OK(reference("tc." + name, {x}, {x.type}, {{"axis", aInt(1)}}, &ref));
        DevBuf dx, dy;
        ASSERT_OK(upload(x, &dx, stream()));
        ASSERT_OK(devZeros(x.data.size(), &dy, stream()));
        ASSERT_OK(softmaxForward(dt, dx.p, dy.p, rows, cols, log, stream()));
        HostTensor y;
        ASSERT_OK(download(dy.p, x.type, &y, stream()));
        std::vector<double> g = hostTensorToDoubles(y), w = hostTensorToDoubles(ref[0]);
        // Each shape on its own scale, then pooled.
        CompareResult r = compare(g, w);
        EXPECT_LE(r.maxErr, tolFor(dt)) << name << " " << rows << "x" << cols;
        // In place gives the same bits.
        ASSERT_OK(softmaxForward(dt, dx.p, dx.p, rows, cols, log, stream()));
        HostTensor inPlace;
        ASSERT_OK(download(dx.p, x.type, &inPlace, stream()));
        EXPECT_EQ(inPlace.data, y.data) << name << " in place";
        got.insert(got.end(), g.begin(), g.end());
        want.insert(want.end(), w.begin(), w.end());
      }
      // Timing: attention-score rows of GPT-2 (T = 1024) and vocabulary rows.
      const int64_t rows = 16384, cols = 1024;
      DevBuf buf;
      ASSERT_OK(devZeros(rows * cols * bytesOf(dt), &buf, stream()));
      double us = timeUs(stream(), 20, [&] {
        return softmaxForward(dt, buf.p, buf.p, rows, cols, log, stream());
      });
      check(name, dt, got, want, tolFor(dt), us, shapeStr({rows, cols}));
    }
}

//===----------------------------------------------------------------------===//
// layer_norm / rms_norm
//===----------------------------------------------------------------------===//

/// Double-precision backward of layer_norm (Rms false) or rms_norm, from the
/// stored inputs: returns dx, dweight, dbias (flat).
struct NormGrads {
  std::vector<double> dx, dw, db;
};
NormGrads normBackwardRef(bool rms, const std::vector<double> &x, const std::vector<double> &w,
                          const std::vector<double> &dy, int64_t rows, int64_t cols, double eps) {
  NormGrads g;
  g.dx.assign(rows * cols, 0);
  g.dw.assign(cols, 0);
  g.db.assign(cols, 0);
  for (int64_t r = 0; r < rows; ++r) {
    const double *xr = &x[r * cols], *dyr = &dy[r * cols];
    double mean = 0, var = 0;
    if (!rms) {
      for (int64_t j = 0; j < cols; ++j)
        mean += xr[j];
      mean /= cols;
    }
    for (int64_t j = 0; j < cols; ++j)
      var += (xr[j] - mean) * (xr[j] - mean);
    double rstd = 1 / std::sqrt(var / cols + eps);
    double sg = 0, sgx = 0;
    for (int64_t j = 0; j < cols; ++j) {
      double xhat = (xr[j] - mean) * rstd, gj = dyr[j] * (w.empty() ? 1.0 : w[j]);
      sg += gj;
      sgx += gj * xhat;
      g.dw[j] += dyr[j] * xhat;
      g.db[j] += dyr[j];
    }
    for (int64_t j = 0; j < cols; ++j) {
      double xhat = (xr[j] - mean) * rstd, gj = dyr[j] * (w.empty() ? 1.0 : w[j]);
      g.dx[r * cols + j] = rstd * (gj - (rms ? 0.0 : sg / cols) - xhat * sgx / cols);
    }
  }
  return g;
}

void normCase(CudaKernels &t, bool rms, DType dt, DType pt, int64_t rows, int64_t cols,
              bool affine, std::vector<double> *gotF, std::vector<double> *wantF,
              std::vector<double> *gotB, std::vector<double> *wantB) {
  const float eps = 1e-5f;
  std::mt19937 &rng = t.rngRef();
  cudaStream_t s = t.streamRef();
  HostTensor x = randomTensor(ty(dt, {rows, cols}), rng, -2, 3);
  HostTensor w = randomTensor(ty(pt, {cols}), rng, 0.5, 1.5);
  HostTensor b = randomTensor(ty(pt, {cols}), rng, -0.5, 0.5);
  HostTensor dy = randomTensor(ty(dt, {rows, cols}), rng);
  // Forward reference.
  std::vector<HostTensor> ins = {x};
  Attrs at = {{"axis", aInt(1)}, {"epsilon", aFloat(eps)}};
  if (affine) {
    ins.push_back(w);
    if (!rms)
      ins.push_back(b);
    at["operand_present"] = rms ? aInts({1, 1}) : aInts({1, 1, 1});
  }
  std::vector<HostTensor> ref;
  ASSERT_OK(reference(rms ? "tc.rms_norm" : "tc.layer_norm", ins, {x.type}, at, &ref));
  DevBuf dX, dW, dB, dY, dMean, dRstd, dDy, dDx, dDw, dDb, scratch;
  ASSERT_OK(upload(x, &dX, s));
  ASSERT_OK(upload(w, &dW, s));
  ASSERT_OK(upload(b, &dB, s));
  ASSERT_OK(upload(dy, &dDy, s));
  ASSERT_OK(devZeros(x.data.size(), &dY, s));
  ASSERT_OK(devZeros(rows * 4, &dMean, s));
  ASSERT_OK(devZeros(rows * 4, &dRstd, s));
  ASSERT_OK(devZeros(x.data.size(), &dDx, s));
  ASSERT_OK(devZeros(w.data.size(), &dDw, s));
  ASSERT_OK(devZeros(b.data.size(), &dDb, s));
  ASSERT_OK(devZeros(normBackwardScratchBytes(rows, cols), &scratch, s));
  const void *wp = affine ? dW.p : nullptr, *bp = affine && !rms ? dB.p : nullptr;
  // The amax of y for its quantize_fp8 (tc-fuse-fp8-amax), over a stale
  // value the call must clear.
  DevBuf dAmax;
  ASSERT_OK(upload(makeHostTensor(f32({1}), {1e30}), &dAmax, s));
  if (rms)
    ASSERT_OK(rmsNormForward(dt, pt, dX.p, wp, dY.p, dRstd.as<float>(), rows, cols, eps, s,
                             dAmax.as<float>()));
  else
    ASSERT_OK(layerNormForward(dt, pt, dX.p, wp, bp, dY.p, dMean.as<float>(), dRstd.as<float>(),
                               rows, cols, eps, s, dAmax.as<float>()));
  HostTensor y, amaxT;
  ASSERT_OK(download(dY.p, x.type, &y, s));
  ASSERT_OK(download(dAmax.p, f32({1}), &amaxT, s));
  std::vector<double> g = hostTensorToDoubles(y), wv = hostTensorToDoubles(ref[0]);
  double amax = 0; // max |y| of the stored values, exactly what amaxFp8 would take
  for (double v : g)
    if (!std::isnan(v))
      amax = std::max(amax, std::fabs(v));
  EXPECT_EQ(hostTensorToDoubles(amaxT)[0], amax) << "amax of y";
  gotF->insert(gotF->end(), g.begin(), g.end());
  wantF->insert(wantF->end(), wv.begin(), wv.end());

  // Saved statistics against double.
  std::vector<double> xd = hostTensorToDoubles(x), wd = hostTensorToDoubles(w);
  HostTensor meanT, rstdT;
  ASSERT_OK(download(dMean.p, f32({rows}), &meanT, s));
  ASSERT_OK(download(dRstd.p, f32({rows}), &rstdT, s));
  std::vector<double> gm = hostTensorToDoubles(meanT), gr = hostTensorToDoubles(rstdT);
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < cols; ++j)
      mean += rms ? 0 : xd[r * cols + j];
    mean /= cols;
    for (int64_t j = 0; j < cols; ++j)
      var += (xd[r * cols + j] - mean) * (xd[r * cols + j] - mean);
    double rstd = 1 / std::sqrt(var / cols + eps);
    if (!rms)
      EXPECT_NEAR(gm[r], mean, 1e-5 * (1 + std::fabs(mean))) << "mean of row " << r;
    EXPECT_NEAR(gr[r], rstd, 1e-5 * rstd) << "rstd of row " << r;
  }

  // Backward: twice with accumulate off (same bits), then once accumulating.
  NormGrads want = normBackwardRef(rms, xd, affine ? wd : std::vector<double>{},
                                   hostTensorToDoubles(dy), rows, cols, eps);
  auto backward = [&](bool acc) {
    if (rms)
      return rmsNormBackward(dt, pt, dDy.p, dX.p, wp, dRstd.as<float>(), dDx.p,
                             affine ? dDw.p : nullptr, scratch.p, rows, cols, acc, s);
    return layerNormBackward(dt, pt, dDy.p, dX.p, wp, dMean.as<float>(), dRstd.as<float>(), dDx.p,
                             affine ? dDw.p : nullptr, affine ? dDb.p : nullptr, scratch.p, rows,
                             cols, acc, s);
  };
  ASSERT_OK(backward(false));
  HostTensor dx1, dw1, db1, dx2, dw2, db2;
  ASSERT_OK(download(dDx.p, x.type, &dx1, s));
  ASSERT_OK(download(dDw.p, w.type, &dw1, s));
  ASSERT_OK(download(dDb.p, b.type, &db1, s));
  ASSERT_OK(backward(false));
  ASSERT_OK(download(dDx.p, x.type, &dx2, s));
  ASSERT_OK(download(dDw.p, w.type, &dw2, s));
  ASSERT_OK(download(dDb.p, b.type, &db2, s));
  EXPECT_EQ(dx1.data, dx2.data) << "dx is deterministic";
  EXPECT_EQ(dw1.data, dw2.data) << "dweight is deterministic";
  EXPECT_EQ(db1.data, db2.data) << "dbias is deterministic";
  auto append = [](std::vector<double> *to, const std::vector<double> &v) {
    to->insert(to->end(), v.begin(), v.end());
  };
  append(gotB, hostTensorToDoubles(dx1));
  append(wantB, want.dx);
  if (affine) {
    // Parameter gradients sum over rows: compare each on its own scale.
    CompareResult cw = compare(hostTensorToDoubles(dw1), want.dw);
    EXPECT_LE(cw.maxErr, tolFor(dt)) << "dweight element " << cw.worst;
    append(gotB, hostTensorToDoubles(dw1));
    append(wantB, want.dw);
    if (!rms) {
      CompareResult cb = compare(hostTensorToDoubles(db1), want.db);
      EXPECT_LE(cb.maxErr, tolFor(dt)) << "dbias element " << cb.worst;
    }
  }
  // Accumulating adds a second copy (bf16 rounds twice, well within its
  // tolerance).
  ASSERT_OK(backward(true));
  HostTensor dx3, dw3, db3;
  ASSERT_OK(download(dDx.p, x.type, &dx3, s));
  ASSERT_OK(download(dDw.p, w.type, &dw3, s));
  ASSERT_OK(download(dDb.p, b.type, &db3, s));
  auto twice = [](std::vector<double> v) {
    for (double &e : v)
      e *= 2;
    return v;
  };
  double tol = tolFor(dt);
  EXPECT_LE(compare(hostTensorToDoubles(dx3), twice(want.dx)).maxErr, tol) << "accumulated dx";
  // dresidual: dx = the given rows (here dx1, the norm's own gradient) + the
  // norm's gradient, written over dx; refused with accumulate.
  DevBuf dRes;
  ASSERT_OK(upload(dx1, &dRes, s));
  Status st = rms ? rmsNormBackward(dt, pt, dDy.p, dX.p, wp, dRstd.as<float>(), dDx.p,
                                    affine ? dDw.p : nullptr, scratch.p, rows, cols, false, s,
                                    dRes.p)
                  : layerNormBackward(dt, pt, dDy.p, dX.p, wp, dMean.as<float>(),
                                      dRstd.as<float>(), dDx.p, affine ? dDw.p : nullptr,
                                      affine ? dDb.p : nullptr, scratch.p, rows, cols, false, s,
                                      dRes.p);
  ASSERT_OK(st);
  HostTensor dx4;
  ASSERT_OK(download(dDx.p, x.type, &dx4, s));
  EXPECT_LE(compare(hostTensorToDoubles(dx4), twice(want.dx)).maxErr, tol) << "dx + dresidual";
  EXPECT_FALSE((rms ? rmsNormBackward(dt, pt, dDy.p, dX.p, wp, dRstd.as<float>(), dDx.p, nullptr,
                                      scratch.p, rows, cols, true, s, dRes.p)
                    : layerNormBackward(dt, pt, dDy.p, dX.p, wp, dMean.as<float>(),
                                        dRstd.as<float>(), dDx.p, nullptr, nullptr, scratch.p,
                                        rows, cols, true, s, dRes.p))
                   .isOk())
      << "dresidual with accumulate";
  // colSum (the bias gradient of the Linear layer dx flows into): the column
  // sums of dx as stored, with dresidual as the residual stream's gradient
  // brings it; dx itself unchanged, the sums the same bits twice.
  DevBuf dCol, scratch3;
  ASSERT_OK(devZeros(cols * 4, &dCol, s));
  ASSERT_OK(devZeros(normBackwardScratchBytes(rows, cols, /*colSum=*/true), &scratch3, s));
  auto withColSum = [&](bool acc) {
    return rms ? rmsNormBackward(dt, pt, dDy.p, dX.p, wp, dRstd.as<float>(), dDx.p,
                                 affine ? dDw.p : nullptr, scratch3.p, rows, cols, acc, s, dRes.p,
                                 dCol.p)
               : layerNormBackward(dt, pt, dDy.p, dX.p, wp, dMean.as<float>(), dRstd.as<float>(),
                                   dDx.p, affine ? dDw.p : nullptr, affine ? dDb.p : nullptr,
                                   scratch3.p, rows, cols, acc, s, dRes.p, dCol.p);
  };
  HostTensor dx5, col1, col2;
  ASSERT_OK(withColSum(false));
  ASSERT_OK(download(dDx.p, x.type, &dx5, s));
  ASSERT_OK(download(dCol.p, ty(dt, {cols}), &col1, s));
  ASSERT_OK(withColSum(false));
  ASSERT_OK(download(dCol.p, ty(dt, {cols}), &col2, s));
  EXPECT_EQ(dx5.data, dx4.data) << "dx with its column sums";
  EXPECT_EQ(col1.data, col2.data) << "column sums are deterministic";
  std::vector<double> dxs = hostTensorToDoubles(dx5), wantCol(cols, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j)
      wantCol[j] += dxs[r * cols + j];
  CompareResult cc = compare(hostTensorToDoubles(col1), wantCol);
  EXPECT_LE(cc.maxErr, dt == DType::F32 ? 1e-5 : 1e-2) << "column sum element " << cc.worst;
  EXPECT_FALSE(withColSum(true).isOk()) << "column sums with accumulate";
  if (affine) {
    EXPECT_LE(compare(hostTensorToDoubles(dw3), twice(want.dw)).maxErr, tol) << "accumulated dw";
    if (!rms) {
      EXPECT_LE(compare(hostTensorToDoubles(db3), twice(want.db)).maxErr, tol) << "accumulated db";
    }
  }
}

// Mixed precision: bf16 rows (x, y, dy, dx) with f32 weights, bias and their
// gradients (what tc-precision's bf16 mode gives norms of bf16 activations).
TEST_F(CudaKernels, NormsWithBf16RowsAndF32Weights) {
  for (bool rms : {false, true}) {
    std::vector<double> gotF, wantF, gotB, wantB;
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{150, 768}, {100, 520}, {33, 100}}) {
      SCOPED_TRACE(std::string(rms ? "rms_norm" : "layer_norm") + " bf16/f32 " +
                   std::to_string(rows) + "x" + std::to_string(cols));
      normCase(*this, rms, DType::BF16, DType::F32, rows, cols, true, &gotF, &wantF, &gotB,
               &wantB);
      if (HasFatalFailure())
        return;
    }
    std::string name = rms ? "rms_norm (f32 weights)" : "layer_norm (f32 weights)";
    check(name + " forward", DType::BF16, gotF, wantF, tolFor(DType::BF16));
    check(name + " backward", DType::BF16, gotB, wantB, tolFor(DType::BF16));
  }
  // An unsupported pair names both types.
  Status st = layerNormForward(DType::F32, DType::BF16, nullptr, nullptr, nullptr, nullptr,
                               nullptr, nullptr, 1, 8, 1e-5f, stream());
  EXPECT_FALSE(st.isOk());
}

TEST_F(CudaKernels, LayerNormAndRmsNormMatchReference) {
  for (bool rms : {false, true})
    for (DType dt : kFloatTypes) {
      std::string name = rms ? "rms_norm" : "layer_norm";
      std::vector<double> gotF, wantF, gotB, wantB;
      // The fused backward (cols <= 4096, a multiple of 8): several chunks of
      // 64 rows (32 past 768 columns), the last partial, a partial last
      // stretch of 256 (520, 200); a row over 2 warps (1024) or 4 of 2
      // stretches (2048, 1280: the last warp past the row, 2000: fewer rows
      // than the block's groups) or 4 of 4 (4096, 3000);
      // the other path: cols not a multiple of 8 (204, 100) or > 4096 (4104).
      for (auto [rows, cols, affine] : {std::tuple<int64_t, int64_t, bool>{150, 768, true},
                                        {130, 1024, true},
                                        {100, 520, false},
                                        {70, 200, true},
                                        {90, 204, true},
                                        {33, 100, true},
                                        {20, 64, false},
                                        {3, 2000, true},
                                        {130, 2048, true},
                                        {70, 1280, true},
                                        {66, 4096, false},
                                        {9, 3000, true},
                                        {5, 4104, true}}) {
        SCOPED_TRACE(name + " " + dtypeName(dt) + " " + std::to_string(rows) + "x" +
                     std::to_string(cols));
        normCase(*this, rms, dt, dt, rows, cols, affine, &gotF, &wantF, &gotB, &wantB);
        if (HasFatalFailure())
          return;
      }
      // Timing at GPT-2 size: [16384, 768].
      const int64_t rows = 16384, cols = 768;
      DevBuf x, w, b, y, mean, rstd, dy, dx, dw, db, scratch;
      size_t bytes = rows * cols * bytesOf(dt);
      for (DevBuf *d : {&x, &y, &dy, &dx})
        ASSERT_OK(devZeros(bytes, d, stream()));
      for (DevBuf *d : {&w, &b, &dw, &db})
        ASSERT_OK(devZeros(cols * bytesOf(dt), d, stream()));
      ASSERT_OK(devZeros(rows * 4, &mean, stream()));
      ASSERT_OK(devZeros(rows * 4, &rstd, stream()));
      ASSERT_OK(devZeros(normBackwardScratchBytes(rows, cols), &scratch, stream()));
      double usF = timeUs(stream(), 20, [&] {
        return rms ? rmsNormForward(dt, x.p, w.p, y.p, rstd.as<float>(), rows, cols, 1e-5f,
                                    stream())
                   : layerNormForward(dt, x.p, w.p, b.p, y.p, mean.as<float>(), rstd.as<float>(),
                                      rows, cols, 1e-5f, stream());
      });
      double usB = timeUs(stream(), 20, [&] {
        return rms ? rmsNormBackward(dt, dy.p, x.p, w.p, rstd.as<float>(), dx.p, dw.p, scratch.p,
                                     rows, cols, false, stream())
                   : layerNormBackward(dt, dy.p, x.p, w.p, mean.as<float>(), rstd.as<float>(), dx.p,
                                       dw.p, db.p, scratch.p, rows, cols, false, stream());
      });
      // With the residual stream's gradient and dx's column sums, as GPT-2's
      // norms before a Linear layer's weight gradient take them.
      DevBuf scratch3, colSum;
      ASSERT_OK(devZeros(normBackwardScratchBytes(rows, cols, true), &scratch3, stream()));
      ASSERT_OK(devZeros(cols * 4, &colSum, stream()));
      double usRes = -1, usCol = -1;
      for (bool withCol : {false, true}) {
        double us = timeUs(stream(), 20, [&] {
          void *cs = withCol ? colSum.p : nullptr;
          return rms ? rmsNormBackward(dt, dt, dy.p, x.p, w.p, rstd.as<float>(), dx.p, dw.p,
                                       scratch3.p, rows, cols, false, stream(), y.p, cs)
                     : layerNormBackward(dt, dt, dy.p, x.p, w.p, mean.as<float>(),
                                         rstd.as<float>(), dx.p, dw.p, db.p, scratch3.p, rows,
                                         cols, false, stream(), y.p, cs);
        });
        (withCol ? usCol : usRes) = us;
      }
      std::printf("%s backward %s [%lld, %lld] with dresidual: %.1f us, and dx's column sums: "
                  "%.1f us\n",
                  name.c_str(), dtypeName(dt), (long long)rows, (long long)cols, usRes, usCol);
      for (int64_t wc : {1024, 2048}) {
        // Rows over 2 and 4 warps, at GPT-2 350M's [8192, 1024] and the ~1B
        // configuration's [8192, 2048].
        const int64_t wr = 8192;
        DevBuf wx, wdy, wdx, ww, wdw, wdb, wmean, wrstd, wscratch;
        for (DevBuf *d : {&wx, &wdy, &wdx})
          ASSERT_OK(devZeros(wr * wc * bytesOf(dt), d, stream()));
        for (DevBuf *d : {&ww, &wdw, &wdb})
          ASSERT_OK(devZeros(wc * bytesOf(dt), d, stream()));
        ASSERT_OK(devZeros(wr * 4, &wmean, stream()));
        ASSERT_OK(devZeros(wr * 4, &wrstd, stream()));
        ASSERT_OK(devZeros(normBackwardScratchBytes(wr, wc), &wscratch, stream()));
        double us = timeUs(stream(), 20, [&] {
          return rms ? rmsNormBackward(dt, wdy.p, wx.p, ww.p, wrstd.as<float>(), wdx.p, wdw.p,
                                       wscratch.p, wr, wc, false, stream())
                     : layerNormBackward(dt, wdy.p, wx.p, ww.p, wmean.as<float>(),
                                         wrstd.as<float>(), wdx.p, wdw.p, wdb.p, wscratch.p, wr, wc,
                                         false, stream());
        });
        std::printf("%s backward %s [%lld, %lld]: %.1f us\n", name.c_str(), dtypeName(dt),
                    (long long)wr, (long long)wc, us);
      }
      check(name + " forward", dt, gotF, wantF, tolFor(dt), usF, shapeStr({rows, cols}));
      check(name + " backward", dt, gotB, wantB, tolFor(dt), usB, shapeStr({rows, cols}));
    }
}

//===----------------------------------------------------------------------===//
// cross_entropy (+ fused backward)
//===----------------------------------------------------------------------===//

TEST_F(CudaKernels, CrossEntropyMatchesReference) {
  const int64_t kIgnore = -100;
  for (DType dt : kFloatTypes)
    for (DType lt : {DType::I64, DType::I32}) {
      std::vector<double> gotL, wantL, gotD, wantD;
      // bf16 rows of up to 32K classes, a multiple of 8, are held in
      // registers (8 values a vector, R vectors a thread of 512): 8 (one
      // thread holds a vector), 1000, 4096 (one vector each; R = 2), 32000
      // (R = 8); longer ones, up to 64K, in shared memory: 50304 (13
      // vectors, some threads 12), 65536 (16, all full).
      // The others, and f32, read the row twice: 1003, 100 (not a multiple
      // of 8), 65544 (past 64K).
      for (auto [rows, cols] : {std::pair<int64_t, int64_t>{64, 1000},
                                {40, 1003},
                                {8, 50304},
                                {6, 32000},
                                {12, 4096},
                                {7, 8},
                                {9, 100},
                                {4, 65536},
                                {4, 65544}}) {
        SCOPED_TRACE(std::string(dtypeName(dt)) + " " + std::to_string(rows) + "x" +
                     std::to_string(cols));
        HostTensor logits = randomTensor(ty(dt, {rows, cols}), rng, -6, 6);
        std::vector<int64_t> lv(rows);
        std::uniform_int_distribution<int64_t> pick(0, cols - 1);
        // Every fifth row ignored from the fourth; the label at the last
        // column (the last vector of the row) in the second, the first in
        // the third.
        for (int64_t r = 0; r < rows; ++r)
          lv[r] = r % 5 == 3 ? kIgnore : r % 5 == 1 ? cols - 1 : r % 5 == 2 ? 0 : pick(rng);
        HostTensor labels = makeHostTensorInts(ty(lt, {rows}), lv);
        const float gradScale = 0.75f;
        std::vector<HostTensor> ref, refNone, refGrad;
        ASSERT_OK(reference("tc.cross_entropy", {logits, labels}, {ty(dt, {})}, {}, &ref));
        ASSERT_OK(reference("tc.cross_entropy", {logits, labels}, {ty(dt, {rows})},
                            {{"reduction", aStr("none")}}, &refNone));
        ASSERT_OK(reference("tc.cross_entropy_grad",
                            {logits, labels, makeHostTensor(ty(dt, {}), {gradScale})},
                            {logits.type}, {}, &refGrad));
        DevBuf dL, dLab, dLoss, dMean, dD, scratch;
        ASSERT_OK(upload(logits, &dL, stream()));
        ASSERT_OK(upload(labels, &dLab, stream()));
        ASSERT_OK(devZeros(rows * 4, &dLoss, stream()));
        ASSERT_OK(devZeros(4, &dMean, stream()));
        ASSERT_OK(devZeros(logits.data.size(), &dD, stream()));
        ASSERT_OK(devZeros(crossEntropyScratchBytes(rows), &scratch, stream()));
        ASSERT_OK(crossEntropyForwardBackward(dt, dL.p, lt, dLab.p, dLoss.as<float>(),
                                              dMean.as<float>(), dD.p, scratch.p, rows, cols,
                                              kIgnore, gradScale, stream()));
        HostTensor loss, mean, dlogits;
        ASSERT_OK(download(dLoss.p, f32({rows}), &loss, stream()));
        ASSERT_OK(download(dMean.p, f32({}), &mean, stream()));
        ASSERT_OK(download(dD.p, logits.type, &dlogits, stream()));
        // The losses are fp32 whatever the logits' dtype; the reference's are
        // rounded to the logits' dtype (tc.cross_entropy keeps it).
        std::vector<double> wantRows = hostTensorToDoubles(refNone[0]);
        double wantMean = hostTensorToDoubles(ref[0])[0];
        std::vector<double> gl = hostTensorToDoubles(loss);
        gotL.insert(gotL.end(), gl.begin(), gl.end());
        gotL.push_back(hostTensorToDoubles(mean)[0]);
        wantL.insert(wantL.end(), wantRows.begin(), wantRows.end());
        wantL.push_back(wantMean);
        std::vector<double> gd = hostTensorToDoubles(dlogits), wd = hostTensorToDoubles(refGrad[0]);
        gotD.insert(gotD.end(), gd.begin(), gd.end());
        wantD.insert(wantD.end(), wd.begin(), wd.end());
        // In place, and forward only, give the same bits.
        ASSERT_OK(crossEntropyForwardBackward(dt, dL.p, lt, dLab.p, nullptr, nullptr, dL.p,
                                              scratch.p, rows, cols, kIgnore, gradScale, stream()));
        HostTensor inPlace;
        ASSERT_OK(download(dL.p, logits.type, &inPlace, stream()));
        EXPECT_EQ(inPlace.data, dlogits.data) << "in place";
      }
      // Every row ignored: the mean is NaN, the gradient zero.
      {
        HostTensor logits = randomTensor(ty(dt, {4, 16}), rng);
        HostTensor labels = makeHostTensorInts(ty(lt, {4}), {kIgnore, kIgnore, kIgnore, kIgnore});
        DevBuf dL, dLab, dMean, dD, scratch;
        ASSERT_OK(upload(logits, &dL, stream()));
        ASSERT_OK(upload(labels, &dLab, stream()));
        ASSERT_OK(devZeros(4, &dMean, stream()));
        ASSERT_OK(upload(randomTensor(logits.type, rng), &dD, stream()));
        ASSERT_OK(devZeros(crossEntropyScratchBytes(4), &scratch, stream()));
        ASSERT_OK(crossEntropyForwardBackward(dt, dL.p, lt, dLab.p, nullptr, dMean.as<float>(),
                                              dD.p, scratch.p, 4, 16, kIgnore, 1.0f, stream()));
        HostTensor mean, d;
        ASSERT_OK(download(dMean.p, f32({}), &mean, stream()));
        ASSERT_OK(download(dD.p, logits.type, &d, stream()));
        EXPECT_TRUE(std::isnan(hostTensorToDoubles(mean)[0]));
        for (double v : hostTensorToDoubles(d))
          ASSERT_EQ(v, 0.0);
      }
      if (lt == DType::I32)
        continue; // timed once per dtype
      // Timing: GPT-2's classifier, [16384, 50304], gradient in place.
      const int64_t rows = 16384, cols = 50304;
      DevBuf logits, labels, losses, mean, scratch;
      ASSERT_OK(devZeros(rows * cols * bytesOf(dt), &logits, stream()));
      ASSERT_OK(devZeros(rows * 8, &labels, stream()));
      ASSERT_OK(devZeros(rows * 4, &losses, stream()));
      ASSERT_OK(devZeros(4, &mean, stream()));
      ASSERT_OK(devZeros(crossEntropyScratchBytes(rows), &scratch, stream()));
      double us = timeUs(stream(), 10, [&] {
        return crossEntropyForwardBackward(dt, logits.p, DType::I64, labels.p, losses.as<float>(),
                                           mean.as<float>(), logits.p, scratch.p, rows, cols,
                                           kIgnore, 1.0f, stream());
      });
      check("cross_entropy loss", dt, gotL, wantL, tolFor(dt), us, shapeStr({rows, cols}));
      check("cross_entropy dlogits", dt, gotD, wantD, tolFor(dt), us, shapeStr({rows, cols}));
    }
}

//===----------------------------------------------------------------------===//
// embedding
//===----------------------------------------------------------------------===//

TEST_F(CudaKernels, EmbeddingMatchesReference) {
  for (DType dt : kFloatTypes)
    for (DType it : {DType::I64, DType::I32}) {
      std::vector<double> gotF, wantF, gotB, wantB;
      // Small vocabularies repeat ids a lot (many tokens per row); 3000
      // tokens span several chunks of kEmbeddingChunk.
      for (auto [count, vocab, dim] : {std::tuple<int64_t, int64_t, int64_t>{3000, 50, 64},
                                       {700, 1000, 100},
                                       {64, 7, 768},
                                       {1, 3, 8}}) {
        SCOPED_TRACE(std::to_string(count) + " tokens, vocab " + std::to_string(vocab) + ", dim " +
                     std::to_string(dim));
        HostTensor table = randomTensor(ty(dt, {vocab, dim}), rng);
        HostTensor ids = randomInts(ty(it, {count}), rng, -vocab, vocab - 1); // negatives too
        HostTensor dout = randomTensor(ty(dt, {count, dim}), rng);
        std::vector<HostTensor> ref, refB;
        ASSERT_OK(reference("tc.gather", {table, ids}, {ty(dt, {count, dim})}, {{"axis", aInt(0)}},
                            &ref));
        ASSERT_OK(reference("tc.scatter_add", {dout, ids}, {ty(dt, {vocab, dim})},
                            {{"axis", aInt(0)}}, &refB));
        DevBuf dT, dI, dO, dDo, dDt, scratch;
        ASSERT_OK(upload(table, &dT, stream()));
        ASSERT_OK(upload(ids, &dI, stream()));
        ASSERT_OK(upload(dout, &dDo, stream()));
        ASSERT_OK(devZeros(count * dim * bytesOf(dt), &dO, stream()));
        ASSERT_OK(upload(randomTensor(table.type, rng), &dDt, stream())); // overwritten
        ASSERT_OK(devZeros(embeddingBackwardScratchBytes(count, vocab), &scratch, stream()));
        ASSERT_OK(embeddingForward(dt, dT.p, it, dI.p, dO.p, count, vocab, dim, stream()));
        HostTensor out;
        ASSERT_OK(download(dO.p, ty(dt, {count, dim}), &out, stream()));
        EXPECT_EQ(out.data, ref[0].data) << "a gather copies bits";
        std::vector<double> g = hostTensorToDoubles(out), w = hostTensorToDoubles(ref[0]);
        gotF.insert(gotF.end(), g.begin(), g.end());
        wantF.insert(wantF.end(), w.begin(), w.end());

        ASSERT_OK(embeddingBackward(dt, dDo.p, it, dI.p, dDt.p, scratch.p, count, vocab, dim, false,
                                    stream()));
        HostTensor d1, d2;
        ASSERT_OK(download(dDt.p, table.type, &d1, stream()));
        ASSERT_OK(embeddingBackward(dt, dDo.p, it, dI.p, dDt.p, scratch.p, count, vocab, dim, false,
                                    stream()));
        ASSERT_OK(download(dDt.p, table.type, &d2, stream()));
        EXPECT_EQ(d1.data, d2.data) << "the backward is deterministic";
        std::vector<double> gb = hostTensorToDoubles(d1), wb = hostTensorToDoubles(refB[0]);
        CompareResult r = compare(gb, wb);
        EXPECT_LE(r.maxErr, tolFor(dt)) << "element " << r.worst;
        gotB.insert(gotB.end(), gb.begin(), gb.end());
        wantB.insert(wantB.end(), wb.begin(), wb.end());
        if (dt == DType::F32) { // accumulating adds a second copy
          ASSERT_OK(embeddingBackward(dt, dDo.p, it, dI.p, dDt.p, scratch.p, count, vocab, dim,
                                      true, stream()));
          HostTensor d3;
          ASSERT_OK(download(dDt.p, table.type, &d3, stream()));
          std::vector<double> twice = wb;
          for (double &v : twice)
            v *= 2;
          EXPECT_LE(compare(hostTensorToDoubles(d3), twice).maxErr, kTolF32) << "accumulate";
        }
      }
      if (it == DType::I32)
        continue;
      // Timing: GPT-2's token embedding, 16384 tokens of a 50304 x 768 table.
      const int64_t count = 16384, vocab = 50304, dim = 768;
      DevBuf table, ids, out, dtable, scratch;
      ASSERT_OK(devZeros(vocab * dim * bytesOf(dt), &table, stream()));
      ASSERT_OK(devZeros(vocab * dim * bytesOf(dt), &dtable, stream()));
      ASSERT_OK(devZeros(count * dim * bytesOf(dt), &out, stream()));
      ASSERT_OK(upload(randomInts(i64({count}), rng, 0, vocab - 1), &ids, stream()));
      ASSERT_OK(devZeros(embeddingBackwardScratchBytes(count, vocab), &scratch, stream()));
      double usF = timeUs(stream(), 20, [&] {
        return embeddingForward(dt, table.p, DType::I64, ids.p, out.p, count, vocab, dim, stream());
      });
      double usB = timeUs(stream(), 20, [&] {
        return embeddingBackward(dt, out.p, DType::I64, ids.p, dtable.p, scratch.p, count, vocab,
                                 dim, false, stream());
      });
      check("embedding forward", dt, gotF, wantF, tolFor(dt), usF, shapeStr({count, vocab, dim}));
      check("embedding backward", dt, gotB, wantB, tolFor(dt), usB, shapeStr({count, vocab, dim}));
    }
}

//===----------------------------------------------------------------------===//
// GELU and casts
//===----------------------------------------------------------------------===//

double geluGradRef(double x, bool tanhApprox) {
  if (!tanhApprox)
    return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) +
           x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
  const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
  double u = k * (x + c * x * x * x), t = std::tanh(u);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x);
}

TEST_F(CudaKernels, GeluMatchesReference) {
  // f16 too: a GEMM's DGELU epilogue falls back to the kernel where cuBLASLt
  // has no plan (GPT-2 in fp16 on an H100).
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    for (GeluApprox ap : {GeluApprox::None, GeluApprox::Tanh}) {
      bool th = ap == GeluApprox::Tanh;
      std::string name = std::string("gelu_") + (th ? "tanh" : "erf");
      std::vector<double> gotF, wantF, gotB, wantB;
      for (int64_t n : {int64_t(10000), int64_t(1027), int64_t(5)}) {
        HostTensor x = randomTensor(ty(dt, {n}), rng, -6, 6);
        HostTensor dy = randomTensor(ty(dt, {n}), rng);
        std::vector<HostTensor> ref;
        ASSERT_OK(reference("tc.gelu", {x}, {x.type}, {{"approximate", aStr(th ? "tanh" : "none")}},
                            &ref));
        DevBuf dX, dY, dDy, dDx;
        ASSERT_OK(upload(x, &dX, stream()));
        ASSERT_OK(upload(dy, &dDy, stream()));
        ASSERT_OK(devZeros(x.data.size(), &dY, stream()));
        ASSERT_OK(devZeros(x.data.size(), &dDx, stream()));
        ASSERT_OK(geluForward(dt, ap, dX.p, dY.p, n, stream()));
        ASSERT_OK(geluBackward(dt, ap, dX.p, dDy.p, dDx.p, n, stream()));
        HostTensor y, dx;
        ASSERT_OK(download(dY.p, x.type, &y, stream()));
        ASSERT_OK(download(dDx.p, x.type, &dx, stream()));
        std::vector<double> g = hostTensorToDoubles(y), w = hostTensorToDoubles(ref[0]);
        gotF.insert(gotF.end(), g.begin(), g.end());
        wantF.insert(wantF.end(), w.begin(), w.end());
        std::vector<double> xd = hostTensorToDoubles(x), dyd = hostTensorToDoubles(dy);
        std::vector<double> gd = hostTensorToDoubles(dx);
        for (int64_t i = 0; i < n; ++i) {
          double want = dyd[i] * geluGradRef(xd[i], th);
          // The reference rounds to the storage dtype as the kernel does.
          wantB.push_back(roundToFloatDType(want, dt));
          gotB.push_back(gd[i]);
        }
      }
      const int64_t n = 16384 * 3072; // GPT-2's MLP activations
      DevBuf x, y;
      ASSERT_OK(devZeros(n * bytesOf(dt), &x, stream()));
      ASSERT_OK(devZeros(n * bytesOf(dt), &y, stream()));
      double usF = timeUs(stream(), 20, [&] { return geluForward(dt, ap, x.p, y.p, n, stream()); });
      double usB =
          timeUs(stream(), 20, [&] { return geluBackward(dt, ap, x.p, y.p, y.p, n, stream()); });
      check(name + " forward", dt, gotF, wantF, tolFor(dt), usF, shapeStr({n}));
      check(name + " backward", dt, gotB, wantB, tolFor(dt), usB, shapeStr({n}));
    }
}

/// columnSums (a bias gradient beside a plain weight-gradient GEMM) against
/// tc.reduce_sum over the rows: odd sizes (the scalar path), a scratch that
/// holds fewer parts, bits equal run to run; timed at GPT-2's dY shapes.
TEST_F(CudaKernels, ColumnSumsMatchReference) {
  struct Case {
    int64_t rows, cols;
    size_t scratch; // 0: columnSumScratchBytes
  };
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    for (const Case &c : std::vector<Case>{{1000, 768, 0},
                                           {3000, 52, 0},
                                           {517, 2304, 0},
                                           {7, 5, 0},
                                           {4096, 300, 3 * 300 * 4},
                                           {0, 24, 0}}) {
      std::string name = "column_sums " + shapeStr({c.rows, c.cols});
      SCOPED_TRACE(name + " " + dtypeName(dt));
      HostTensor x = randomTensor(ty(dt, {c.rows, c.cols}), rng);
      std::vector<HostTensor> ref;
      ASSERT_OK(reference("tc.reduce_sum", {x}, {ty(dt, {c.cols})}, {{"axes", aInts({0})}}, &ref));
      size_t scratch = c.scratch
                           ? c.scratch
                           : std::max<size_t>(4 * c.cols, columnSumScratchBytes(c.rows, c.cols));
      DevBuf dX, dSum, dPart;
      ASSERT_OK(upload(x, &dX, stream()));
      ASSERT_OK(devZeros(c.cols * 4, &dSum, stream()));
      ASSERT_OK(devZeros(scratch, &dPart, stream()));
      HostTensor got[2];
      for (int run = 0; run < 2; ++run) {
        ASSERT_OK(columnSums(dt, dX.p, c.rows, c.cols, dSum.p, static_cast<float *>(dPart.p),
                             scratch, stream()));
        ASSERT_OK(download(dSum.p, ty(dt, {c.cols}), &got[run], stream()));
      }
      EXPECT_EQ(got[0].data, got[1].data) << "bits differ run to run";
      // Sums of ~sqrt(rows)-sized values: relative to their RMS, the storage rounding.
      check(name, dt, hostTensorToDoubles(got[0]), hostTensorToDoubles(ref[0]),
            dt == DType::F32 ? 1e-5 : 1e-2);
    }
  EXPECT_EQ(columnSums(DType::BF16, nullptr, 4, 4, nullptr, nullptr, 0, stream()).code(),
            StatusCode::InvalidArgument);
  DevBuf x, sum, part;
  ASSERT_OK(devZeros(64 * 4, &x, stream()));
  ASSERT_OK(devZeros(64 * 4, &sum, stream()));
  ASSERT_OK(devZeros(64, &part, stream()));
  Status st = columnSums(DType::F32, x.p, 4, 64, sum.p, static_cast<float *>(part.p), 64, stream());
  EXPECT_NE(st.message().find("scratch bytes hold no row"), std::string::npos) << st.message();
  // Timed at the dY shapes of GPT-2 124M's weight gradients (16 x 1024 tokens).
  for (int64_t cols : {int64_t(768), int64_t(2304), int64_t(3072)}) {
    const int64_t rows = 16384;
    DevBuf dX, dSum, dPart;
    size_t scratch = columnSumScratchBytes(rows, cols);
    ASSERT_OK(devZeros(rows * cols * 2, &dX, stream()));
    ASSERT_OK(devZeros(cols * 2, &dSum, stream()));
    ASSERT_OK(devZeros(scratch, &dPart, stream()));
    double us = timeUs(stream(), 20, [&] {
      return columnSums(DType::BF16, dX.p, rows, cols, dSum.p, static_cast<float *>(dPart.p),
                        scratch, stream());
    });
    std::printf("column_sums bf16 [%lld, %lld]: %.1f us (%.0f GB/s)\n", (long long)rows,
                (long long)cols, us, rows * cols * 2 / us / 1e3);
  }
}

TEST_F(CudaKernels, CastsMatchReferenceBitForBit) {
  for (auto [from, to] : {std::pair<DType, DType>{DType::F32, DType::BF16},
                          {DType::BF16, DType::F32},
                          {DType::F32, DType::F32}}) {
    std::string name = std::string("cast ") + dtypeName(from) + "->" + dtypeName(to);
    std::vector<double> got, want;
    for (int64_t n : {int64_t(4099), int64_t(64)}) {
      // Values spanning many binades, including bf16 rounding ties.
      std::vector<double> v(n);
      std::uniform_real_distribution<double> e(-30, 30), m(1, 2);
      for (int64_t i = 0; i < n; ++i)
        v[i] = (i % 2 ? -1 : 1) * m(rng) * std::ldexp(1.0, static_cast<int>(e(rng)));
      v[0] = 1.0 + 1.0 / 256; // exactly between two bf16 values: rounds to even
      v[1] = 1.0 + 3.0 / 256;
      HostTensor x = makeHostTensor(ty(from, {n}), v);
      std::vector<HostTensor> ref;
      ASSERT_OK(reference("tc.cast", {x}, {ty(to, {n})}, {}, &ref));
      DevBuf dX, dY;
      ASSERT_OK(upload(x, &dX, stream()));
      ASSERT_OK(devZeros(n * bytesOf(to), &dY, stream()));
      ASSERT_OK(castBuffer(from, dX.p, to, dY.p, n, stream()));
      HostTensor y;
      ASSERT_OK(download(dY.p, ty(to, {n}), &y, stream()));
      EXPECT_EQ(y.data, ref[0].data) << name;
      std::vector<double> g = hostTensorToDoubles(y), w = hostTensorToDoubles(ref[0]);
      got.insert(got.end(), g.begin(), g.end());
      want.insert(want.end(), w.begin(), w.end());
    }
    const int64_t n = 124439808; // GPT-2 124M parameters
    DevBuf x, y;
    ASSERT_OK(devZeros(n * bytesOf(from), &x, stream()));
    ASSERT_OK(devZeros(n * bytesOf(to), &y, stream()));
    double us = timeUs(stream(), 20, [&] { return castBuffer(from, x.p, to, y.p, n, stream()); });
    check(name, to, got, want, 0, us, shapeStr({n}));
  }
}

} // namespace
} // namespace tc::rt::cuda
