//===- attention_test.cpp - fused attention forward/backward vs a CPU loop ===//
//
// attentionForward / attentionBackward (runtime/src/cuda/kernels/
// attention.cu) against a double-precision reference written here: the
// forward by its definition, the backward by the analytic formulas
// (dS = P (dP - rowsum(P dP)), dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO),
// the latter checked once against central finite differences (no GPU
// needed). Inputs are uniform random (q, k in [-2, 2] so the softmax is far
// from uniform), rounded to the storage dtype before the reference sees them.
// Errors are max |got - want| / max |want| per output: 1e-4 for f32 (the
// generic fp32-FMA kernels), 2e-2 for bf16 (tensor cores on bf16 P and dS),
// 1e-2 for f16 (three more mantissa bits than bf16; the same kernels on the
// f16 mma). Cases cover the tensor-core path (bf16 and f16, d = dv in
// {32, 64, 128}) and the generic one (f32, other head dims), causal (top-left) and not, GQA/MQA,
// lengths that are not tile multiples, tq != tk, and q/k/v read out of one
// fused [batch, t, heads + 2 kvHeads, d] projection with the output written
// [batch, t, heads, d], and lengths spanning several of the backward's
// 128-row blocks. A timing test prints the GPT-2 124M shape.
//
//===----------------------------------------------------------------------===//
#include "test/cuda/cuda_test_util.h"

#include <cstdlib>
#include <cstring>

#include "runtime/src/cuda/cudnn/loader.h"
#include "runtime/src/cuda/kernels/attention_wgmma_layout.h"
#include "runtime/src/cuda/kernels/kernels.h"

namespace tc::rt::cuda {
namespace {

using namespace tc::rt::cuda::test;

//===----------------------------------------------------------------------===//
// Double-precision reference on contiguous [b, h, t, d] arrays
//===----------------------------------------------------------------------===//

struct RefResult {
  std::vector<double> out, lse, dq, dk, dv;
};

RefResult attentionRef(const AttentionShape &s, const std::vector<double> &q,
                       const std::vector<double> &k, const std::vector<double> &v,
                       const std::vector<double> &dout, double scale, bool causal,
                       const std::vector<uint8_t> *keys = nullptr, double fill = -INFINITY) {
  const int64_t B = s.batch, H = s.heads, KVH = s.kvHeads, TQ = s.tq, TK = s.tk, D = s.d,
                DV = s.dv, group = H / KVH;
  RefResult r;
  r.out.assign(B * H * TQ * DV, 0);
  r.lse.assign(B * H * TQ, 0);
  r.dq.assign(B * H * TQ * D, 0);
  r.dk.assign(B * KVH * TK * D, 0);
  r.dv.assign(B * KVH * TK * DV, 0);
  std::vector<double> sc(TK), p(TK), dp(TK);
  std::vector<int64_t> seen; // the keys a row attends to
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      int64_t kvh = h / group;
      const double *kb = &k[(b * KVH + kvh) * TK * D], *vb = &v[(b * KVH + kvh) * TK * DV];
      double *dkb = &r.dk[(b * KVH + kvh) * TK * D], *dvb = &r.dv[(b * KVH + kvh) * TK * DV];
      for (int64_t i = 0; i < TQ; ++i) {
        int64_t row = (b * H + h) * TQ + i;
        const double *qi = &q[row * D], *doi = &dout[row * DV];
        // The visible keys; none and a finite fill: every key, with the
        // scores (scale s + fill) - fill (an exported additive mask).
        seen.clear();
        for (int64_t j = 0; j < TK; ++j)
          if (!(causal && j > i) && !(keys && (*keys)[b * TK + j] == 0))
            seen.push_back(j);
        const bool averaged = seen.empty() && std::isfinite(fill);
        if (averaged)
          for (int64_t j = 0; j < TK; ++j)
            seen.push_back(j);
        if (seen.empty()) {
          r.lse[row] = -INFINITY;
          continue;
        }
        double m = -INFINITY;
        for (int64_t j : seen) {
          double acc = 0;
          for (int64_t c = 0; c < D; ++c)
            acc += qi[c] * kb[j * D + c];
          sc[j] = averaged ? (scale * acc + fill) - fill : scale * acc;
          m = std::max(m, sc[j]);
        }
        double l = 0;
        for (int64_t j : seen)
          l += p[j] = std::exp(sc[j] - m);
        r.lse[row] = m + std::log(l);
        double dsum = 0;
        for (int64_t j : seen) {
          p[j] /= l;
          double acc = 0;
          for (int64_t c = 0; c < DV; ++c) {
            r.out[row * DV + c] += p[j] * vb[j * DV + c];
            acc += doi[c] * vb[j * DV + c];
          }
          dp[j] = acc;
          dsum += p[j] * acc;
        }
        for (int64_t j : seen) {
          double ds = p[j] * (dp[j] - dsum);
          for (int64_t c = 0; c < D; ++c) {
            r.dq[row * D + c] += scale * ds * kb[j * D + c];
            dkb[j * D + c] += scale * ds * qi[c];
          }
          for (int64_t c = 0; c < DV; ++c)
            dvb[j * DV + c] += p[j] * doi[c];
        }
      }
    }
  return r;
}

// The analytic backward of the reference against central differences of
// L = sum(out * dout), on a small shape with GQA, causal and not.
TEST(AttentionReference, BackwardMatchesFiniteDifferences) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1.5, 1.5);
  AttentionShape s;
  s.batch = 1, s.heads = 2, s.kvHeads = 1, s.tq = 5, s.tk = 7, s.d = 3, s.dv = 4;
  auto rnd = [&](int64_t n) {
    std::vector<double> x(n);
    for (double &e : x)
      e = u(rng);
    return x;
  };
  std::vector<double> q = rnd(2 * 5 * 3), k = rnd(7 * 3), v = rnd(7 * 4), dout = rnd(2 * 5 * 4);
  // A key mask hiding keys 0, 1 and 4: with causal, queries 0 and 1 see no
  // key (-inf: they are 0; a finite fill: they attend to every key).
  const std::vector<uint8_t> keys = {0, 0, 1, 1, 0, 1, 1};
  struct Mask {
    const std::vector<uint8_t> *keys;
    double fill;
  };
  for (bool causal : {false, true})
   for (Mask mk : {Mask{nullptr, -INFINITY}, Mask{&keys, -INFINITY}, Mask{&keys, -1000.0}}) {
    RefResult r = attentionRef(s, q, k, v, dout, 0.7, causal, mk.keys, mk.fill);
    auto loss = [&]() {
      RefResult f = attentionRef(s, q, k, v, dout, 0.7, causal, mk.keys, mk.fill);
      double l = 0;
      for (size_t i = 0; i < f.out.size(); ++i)
        l += f.out[i] * dout[i];
      return l;
    };
    auto fd = [&](std::vector<double> &x, const std::vector<double> &grad, const char *name) {
      for (size_t i = 0; i < x.size(); ++i) {
        double x0 = x[i], eps = 1e-5;
        x[i] = x0 + eps;
        double lp = loss();
        x[i] = x0 - eps;
        double lm = loss();
        x[i] = x0;
        EXPECT_NEAR(grad[i], (lp - lm) / (2 * eps), 1e-7) << name << "[" << i << "]"
                                                          << (causal ? " causal" : "");
      }
    };
    fd(q, r.dq, "dq");
    fd(k, r.dk, "dk");
    fd(v, r.dv, "dv");
  }
}

//===----------------------------------------------------------------------===//
// Layouts: contiguous, or q/k/v inside one fused qkv buffer
//===----------------------------------------------------------------------===//

/// Where one [batch, heads, t, d] operand lives inside a flat buffer.
struct Operand {
  int64_t offset = 0; // elements
  AttentionStrides st;
  int64_t heads = 0, t = 0, d = 0;
  int64_t index(int64_t b, int64_t h, int64_t i, int64_t c) const {
    return offset + b * st.batch + h * st.head + i * st.row + c;
  }
};

/// Buffer view <-> contiguous [b, heads, t, d] doubles.
std::vector<double> gather(const std::vector<double> &buf, const Operand &o, int64_t batch) {
  std::vector<double> x;
  x.reserve(batch * o.heads * o.t * o.d);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < o.heads; ++h)
      for (int64_t i = 0; i < o.t; ++i)
        for (int64_t c = 0; c < o.d; ++c)
          x.push_back(buf[o.index(b, h, i, c)]);
  return x;
}

struct AttnCase {
  DType dt;
  int64_t batch, heads, kvHeads, tq, tk, d, dv;
  bool causal;
  bool fused; // q/k/v in [batch, t, heads + 2 kvHeads, d]; out/dout [batch, t, heads, d]
  std::string str() const {
    return std::string(dtypeName(dt)) + " " + shapeStr({batch, heads, kvHeads, tq, tk, d, dv}) +
           (causal ? " causal" : "") + (fused ? " fused" : "");
  }
  AttentionShape shape() const {
    AttentionShape s;
    s.batch = batch, s.heads = heads, s.kvHeads = kvHeads, s.tq = tq, s.tk = tk, s.d = d,
    s.dv = dv;
    return s;
  }
};

/// The five operand layouts of a case and the sizes of the buffers holding
/// them: qkv (q, k, v; also dq, dk, dv) and o (out; also dout).
struct Layout {
  Operand q, k, v, o;
  int64_t qkvElems = 0, oElems = 0;
};

Layout layoutOf(const AttnCase &c) {
  Layout L;
  if (c.fused) {
    int64_t T = c.tq, W = c.heads + 2 * c.kvHeads;
    AttentionStrides st{T * W * c.d, c.d, W * c.d};
    L.q = {0, st, c.heads, T, c.d};
    L.k = {c.heads * c.d, st, c.kvHeads, T, c.d};
    L.v = {(c.heads + c.kvHeads) * c.d, st, c.kvHeads, T, c.d};
    L.o = {0, {T * c.heads * c.dv, c.dv, c.heads * c.dv}, c.heads, T, c.dv};
    L.qkvElems = c.batch * T * W * c.d;
    L.oElems = c.batch * T * c.heads * c.dv;
    return L;
  }
  int64_t qn = c.batch * c.heads * c.tq * c.d, kn = c.batch * c.kvHeads * c.tk * c.d;
  L.q = {0, contiguousAttentionStrides(c.heads, c.tq, c.d), c.heads, c.tq, c.d};
  L.k = {qn, contiguousAttentionStrides(c.kvHeads, c.tk, c.d), c.kvHeads, c.tk, c.d};
  L.v = {qn + kn, contiguousAttentionStrides(c.kvHeads, c.tk, c.dv), c.kvHeads, c.tk, c.dv};
  L.o = {0, contiguousAttentionStrides(c.heads, c.tq, c.dv), c.heads, c.tq, c.dv};
  L.qkvElems = qn + kn + c.batch * c.kvHeads * c.tk * c.dv;
  L.oElems = c.batch * c.heads * c.tq * c.dv;
  return L;
}

int64_t elemBytes(DType dt) { return dt == DType::F32 ? 4 : 2; }

/// Max |got - want| / max |want|.
double maxAbsErr(const std::vector<double> &got, const std::vector<double> &want) {
  double scale = 0, err = 0;
  for (double w : want)
    if (std::isfinite(w))
      scale = std::max(scale, std::fabs(w));
  if (scale == 0)
    scale = 1;
  if (got.size() != want.size())
    return INFINITY;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i]) || std::isinf(got[i])) {
      if (got[i] != want[i])
        return INFINITY;
      continue;
    }
    double e = std::fabs(got[i] - want[i]) / scale;
    if (!(e <= err)) // NaN propagates as a failure
      err = std::isnan(e) ? INFINITY : e;
  }
  return err;
}

class AttentionTest : public CudaTest {
protected:
  /// Device results of one case: forward then backward.
  struct Run {
    HostTensor out, lse, dqkv;
    double outAmax = 0, gradAmax = 0; // the kernels' amaxes (tc-fuse-fp8-amax)
    HostTensor sums;                  // with withSums: the gradients' column sums
  };

  /// Runs the case on the GPU on the given (already rounded) inputs.
  /// The backward's amax covers the gradients `amaxOf` names.
  void runCase(const AttnCase &c, const Layout &L, const HostTensor &qkv, const HostTensor &dout,
               float scale, Run *r, int amaxOf = 7) {
    AttentionShape s = c.shape();
    DevBuf dQkv, dO, dDout, dLse, dGrad, dScratch, dAmax;
    // Two amaxes over stale values the calls must clear.
    ASSERT_OK(upload(makeHostTensor(ty(DType::F32, {2}), {1e30, 1e30}), &dAmax, stream()));
    ASSERT_OK(upload(qkv, &dQkv, stream()));
    ASSERT_OK(upload(dout, &dDout, stream()));
    ASSERT_OK(devZeros(L.oElems * elemBytes(c.dt), &dO, stream()));
    ASSERT_OK(devZeros(std::max<int64_t>(1, c.batch * c.heads * c.tq) * 4, &dLse, stream()));
    ASSERT_OK(devZeros(L.qkvElems * elemBytes(c.dt), &dGrad, stream()));
    ASSERT_OK(devZeros(attentionBackwardScratchBytes(s, withSums), &dScratch, stream()));
    // The column sums (AttentionGradSums) into a buffer of NaNs the call must overwrite.
    DevBuf dSums;
    AttentionGradSums sums;
    if (withSums) {
      ASSERT_OK(devAlloc(sumCols * elemBytes(c.dt), &dSums));
      ASSERT_EQ(cudaMemsetAsync(dSums.p, 0xFF, sumCols * elemBytes(c.dt), stream()), cudaSuccess);
      sums.out = dSums.p;
      std::copy(sumOffsets, sumOffsets + 3, sums.offsets);
      sums.headStride = sumHeadStride;
    }
    // The backward's rotary (AttentionGradRotary) of the gradients rotOf names.
    AttentionGradRotary rot;
    DevBuf dCos, dSin;
    if (rotOf) {
      ASSERT_OK(upload(rotCos, &dCos, stream()));
      ASSERT_OK(upload(rotSin, &dSin, stream()));
      rot.cos = dCos.p, rot.sin = dSin.p, rot.half = rotCos.type.shape[2], rot.of = rotOf;
    }
    AttentionMask mask;
    DevBuf dKeys;
    if (keyMask) {
      std::vector<double> bytes(keyMask->begin(), keyMask->end());
      ASSERT_OK(upload(makeHostTensor(ty(DType::U8, {static_cast<int64_t>(bytes.size())}), bytes),
                       &dKeys, stream()));
      mask.keys = static_cast<const uint8_t *>(dKeys.p);
      mask.fill = static_cast<float>(maskFill);
    }
    const int64_t eb = elemBytes(c.dt);
    auto at = [&](const DevBuf &b, const Operand &o) {
      return static_cast<char *>(b.p) + o.offset * eb;
    };
    ASSERT_OK(attentionForward(c.dt, s, at(dQkv, L.q), L.q.st, at(dQkv, L.k), L.k.st, at(dQkv, L.v),
                               L.v.st, dO.p, L.o.st, dLse.as<float>(), scale, c.causal, stream(),
                               outAmaxOff ? nullptr : dAmax.as<float>(), kernels, mask));
    ASSERT_OK(attentionBackward(
        c.dt, s, at(dQkv, L.q), L.q.st, at(dQkv, L.k), L.k.st, at(dQkv, L.v), L.v.st, dO.p, L.o.st,
        dDout.p, L.o.st, dLse.as<float>(), at(dGrad, L.q), L.q.st, at(dGrad, L.k), L.k.st,
        at(dGrad, L.v), L.v.st, dScratch.p, scale, c.causal, stream(),
        gradAmaxOff ? nullptr : dAmax.as<float>() + 1, amaxOf, kernels, mask, sums, rot));
    HostTensor amaxes;
    ASSERT_OK(download(dAmax.p, ty(DType::F32, {2}), &amaxes, stream()));
    r->outAmax = hostTensorToDoubles(amaxes)[0];
    r->gradAmax = hostTensorToDoubles(amaxes)[1];
    ASSERT_OK(download(dO.p, ty(c.dt, {L.oElems}), &r->out, stream()));
    ASSERT_OK(download(dLse.p, ty(DType::F32, {c.batch * c.heads * c.tq}), &r->lse, stream()));
    ASSERT_OK(download(dGrad.p, ty(c.dt, {L.qkvElems}), &r->dqkv, stream()));
    if (withSums)
      ASSERT_OK(download(dSums.p, ty(c.dt, {sumCols}), &r->sums, stream()));
  }

  /// Random inputs for a case, rounded to its dtype.
  void inputs(const AttnCase &c, const Layout &L, HostTensor *qkv, HostTensor *dout) {
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::vector<double> buf(L.qkvElems, 0.0);
    auto fill = [&](const Operand &o, double amp) {
      for (int64_t b = 0; b < c.batch; ++b)
        for (int64_t h = 0; h < o.heads; ++h)
          for (int64_t i = 0; i < o.t; ++i)
            for (int64_t e = 0; e < o.d; ++e) {
              double x = 0;
              while (x == 0)
                x = amp * u(rng);
              buf[o.index(b, h, i, e)] = x;
            }
    };
    fill(L.q, 2.0);
    fill(L.k, 2.0);
    fill(L.v, 1.0);
    *qkv = makeHostTensor(ty(c.dt, {L.qkvElems}), buf);
    *dout = randomTensor(ty(c.dt, {L.oElems}), rng);
  }

  /// Runs the case twice with the column sums (withSums, sumOffsets,
  /// sumHeadStride) and once without, and checks them: the same bits both
  /// runs, the gradients the bits of the run without sums, and each sum
  /// against the double sum of the stored gradients over (batch, t) within
  /// twice the rounding of the output (bf16 5e-3, f16 1.3e-3, f32 2e-5) of
  /// its column's sum of |x|. The worst relative error and the tolerance.
  void checkColumnSums(const AttnCase &c, const Layout &L, const HostTensor &qkv,
                       const HostTensor &dout, double *worst, double *tol) {
    Run a, b, plain;
    ASSERT_NO_FATAL_FAILURE(runCase(c, L, qkv, dout, 0.125f, &a));
    ASSERT_NO_FATAL_FAILURE(runCase(c, L, qkv, dout, 0.125f, &b));
    withSums = false;
    ASSERT_NO_FATAL_FAILURE(runCase(c, L, qkv, dout, 0.125f, &plain));
    withSums = true;
    EXPECT_EQ(a.sums.data, b.sums.data) << "column sums differ run to run";
    EXPECT_EQ(a.dqkv.data, plain.dqkv.data) << "the gradients changed with the sums";
    std::vector<double> grad = hostTensorToDoubles(a.dqkv), got = hostTensorToDoubles(a.sums);
    *tol = c.dt == DType::F32 ? 2e-5 : c.dt == DType::F16 ? 1.3e-3 : 5e-3;
    const Operand *ops[3] = {&L.q, &L.k, &L.v};
    *worst = 0;
    for (int j = 0; j < 3; ++j) {
      const Operand &o = *ops[j];
      const int64_t headStride = sumHeadStride ? sumHeadStride : o.d;
      for (int64_t h = 0; h < o.heads; ++h)
        for (int64_t e = 0; e < o.d; ++e) {
          double want = 0, mag = 0;
          for (int64_t bb = 0; bb < c.batch; ++bb)
            for (int64_t i = 0; i < o.t; ++i) {
              double x = grad[o.index(bb, h, i, e)];
              want += x, mag += std::fabs(x);
            }
          double g = got[sumOffsets[j] + h * headStride + e];
          double err = std::fabs(g - want) / std::max(mag, 1e-30);
          if (!(err <= *tol) && !(g == 0 && want == 0))
            ADD_FAILURE() << "gradient " << j << " head " << h << " column " << e << ": got " << g
                          << ", want " << want << " (sum of |x| " << mag << ")";
          *worst = std::max(*worst, mag > 0 ? err : 0.0);
        }
    }
  }

  /// Random rotary tables rotCos / rotSin [batch, tq, half] of the case's
  /// type: cos and sin of one random angle an element.
  void makeRotaryTables(const AttnCase &c, int64_t half) {
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::vector<double> cs(c.batch * c.tq * half), sn(cs.size());
    for (size_t i = 0; i < cs.size(); ++i) {
      double a = 3.0 * u(rng);
      cs[i] = std::cos(a), sn[i] = std::sin(a);
    }
    rotCos = makeHostTensor(ty(c.dt, {c.batch, c.tq, half}), cs);
    rotSin = makeHostTensor(ty(c.dt, {c.batch, c.tq, half}), sn);
  }

  int amaxCases = 0;
  /// The tensor-core kernels the calls ask for.
  AttentionKernels kernels = AttentionKernels::Mma;
  /// The softmax scale; 0: 1 / sqrt(d).
  float scaleOverride = 0.0f;
  /// A key mask [batch, tk] (non-zero = visible) and its fill, or none.
  const std::vector<uint8_t> *keyMask = nullptr;
  double maskFill = -INFINITY;
  /// With withSums the backward also writes the gradients' column sums
  /// (AttentionGradSums) into sumCols elements at sumOffsets (dq, dk, dv).
  bool withSums = false;
  int64_t sumOffsets[3] = {0, 0, 0}, sumCols = 0;
  /// Non-zero: the sums' heads interleave (AttentionGradSums::headStride).
  int64_t sumHeadStride = 0;
  /// The backward without an amax (the flash kernels sum in-kernel only then).
  bool gradAmaxOff = false;
  /// The forward without an amax (cuDNN's forward takes only such calls).
  bool outAmaxOff = false;
  /// With rotOf (1 dq, 2 dk) the backward stores those gradients rotated by
  /// rotCos / rotSin [batch, t, half] (AttentionGradRotary).
  int rotOf = 0;
  HostTensor rotCos, rotSin;

  /// Forward and backward of one case against the reference.
  void checkCase(const AttnCase &c) {
    SCOPED_TRACE(c.str());
    Layout L = layoutOf(c);
    HostTensor qkv, dout;
    inputs(c, L, &qkv, &dout);
    std::vector<double> qkvD = hostTensorToDoubles(qkv), doutD = hostTensorToDoubles(dout);
    const float scale =
        scaleOverride != 0.0f ? scaleOverride : 1.0f / std::sqrt(static_cast<float>(c.d));
    RefResult want = attentionRef(c.shape(), gather(qkvD, L.q, c.batch), gather(qkvD, L.k, c.batch),
                                  gather(qkvD, L.v, c.batch), gather(doutD, L.o, c.batch), scale,
                                  c.causal, keyMask, maskFill);
    Run r;
    // Each case's backward amax covers another set of gradients.
    const int amaxOf = 1 + amaxCases++ % 7;
    ASSERT_NO_FATAL_FAILURE(runCase(c, L, qkv, dout, scale, &r, amaxOf));
    std::vector<double> outD = hostTensorToDoubles(r.out), grad = hostTensorToDoubles(r.dqkv);
    // The amaxes are max |x| over the stored values (NaN ignored), exactly.
    auto amaxOfValues = [](const std::vector<double> &v) {
      double m = 0;
      for (double e : v)
        if (!std::isnan(e))
          m = std::max(m, std::fabs(e));
      return m;
    };
    if (!outAmaxOff)
      EXPECT_EQ(r.outAmax, amaxOfValues(gather(outD, L.o, c.batch))) << "amax of out";
    double gradAmax = 0;
    const Operand *gradOps[3] = {&L.q, &L.k, &L.v};
    for (int j = 0; j < 3; ++j)
      if (amaxOf & (1 << j))
        gradAmax = std::max(gradAmax, amaxOfValues(gather(grad, *gradOps[j], c.batch)));
    if (!gradAmaxOff)
      EXPECT_EQ(r.gradAmax, gradAmax) << "amax of the gradients " << amaxOf;
    const double tol = c.dt == DType::F32 ? 1e-4 : c.dt == DType::F16 ? 1e-2 : 2e-2;
    struct {
      const char *name;
      std::vector<double> got, want;
    } outs[] = {{"out", gather(outD, L.o, c.batch), want.out},
                {"lse", hostTensorToDoubles(r.lse), want.lse},
                {"dq", gather(grad, L.q, c.batch), want.dq},
                {"dk", gather(grad, L.k, c.batch), want.dk},
                {"dv", gather(grad, L.v, c.batch), want.dv}};
    for (auto &o : outs) {
      double err = maxAbsErr(o.got, o.want);
      EXPECT_LE(err, tol) << o.name;
      report(std::string("attention ") + o.name + " " + c.str(), c.dt, err, tol, -1, "");
    }
  }
};

// The wgmma kernels' tiles and descriptors (attention_wgmma_layout.h)
// against the canonical no-swizzle ("interleave") layouts of the PTX ISA's
// matrix descriptors for 16-bit elements (as CUTLASS's make_gmma_desc
// spells them, in bytes): K-major, operand element (m, k) of a k16 step at
// start + (m % 8) 16 + (m / 8) SBO + (k / 8) LBO + (k % 8) 2; MN-major,
// element (k, n) at start + (n % 8) 2 + (n / 8) SBO + (k % 8) 16 + (k / 8)
// LBO. Each tile holds its logical (row, column) per element; every operand
// the kernels hand to a wgmma must read the rows and columns it means. Runs
// without a GPU.
template <int D> void checkWgmmaLayout() {
  SCOPED_TRACE("d " + std::to_string(D));
  constexpr int R = 128; // the largest tile: 128 keys
  std::vector<int> tile(R * D, -1);
  auto code = [](int r, int c) { return r * 1000 + c; };
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < D; ++c) {
      int at = attn::coreOffset<D>(r, c);
      ASSERT_TRUE(at >= 0 && at < R * D && tile[at] == -1) << "(" << r << ", " << c << ")";
      tile[at] = code(r, c);
    }
  // cp.async's chunks in storage order: chunk ch is 8 elements of one row.
  for (int ch = 0; ch < R * D / 8; ++ch) {
    int r = -1, c = -1;
    attn::coreChunk<D>(ch, r, c);
    ASSERT_EQ(attn::coreOffset<D>(r, c), 8 * ch) << "chunk " << ch;
  }
  auto at = [&](uint32_t byte) { return byte % 2 == 0 && byte / 2 < tile.size() ? tile[byte / 2] : -2; };
  // K-major: S = Q K^T (rows of q, rows of k), dP = dO V^T, S^T = K Q^T, ...
  for (int r0 : {0, 64})
    for (int kk = 0; kk < D / 16; ++kk) {
      attn::WgDescFields f = attn::kMajorFields<D>(r0, kk);
      for (int m = 0; m < 64; ++m)
        for (int k = 0; k < 16; ++k)
          ASSERT_EQ(at(f.start + (m % 8) * 16 + (m / 8) * f.sbo + (k / 8) * f.lbo + (k % 8) * 2),
                    code(r0 + m, 16 * kk + k))
              << "K-major rows from " << r0 << ", k-step " << kk << ", element (" << m << ", "
              << k << ")";
    }
  // MN-major B: O += P V, dQ += dS K, dV += P^T dO, dK += dS^T Q (K = the
  // tile's rows, N = its D columns).
  for (int kk = 0; kk < R / 16; ++kk) {
    attn::WgDescFields f = attn::mnMajorFields<D>(kk);
    for (int k = 0; k < 16; ++k)
      for (int n = 0; n < D; ++n)
        ASSERT_EQ(at(f.start + (n % 8) * 2 + (n / 8) * f.sbo + (k % 8) * 16 + (k / 8) * f.lbo),
                  code(16 * kk + k, n))
            << "MN-major k-step " << kk << ", element (" << k << ", " << n << ")";
  }
  // The descriptor fields hold 14 bits of 16-byte units.
  for (attn::WgDescFields f : {attn::kMajorFields<D>(64, D / 16 - 1), attn::mnMajorFields<D>(7)})
    for (uint32_t v : {f.start, f.lbo, f.sbo})
      EXPECT_TRUE(v % 16 == 0 && v / 16 < (1u << 14)) << v;
}

TEST(AttentionWgmmaLayout, DescriptorsReadTheMeantElements) {
  checkWgmmaLayout<64>();
  checkWgmmaLayout<128>();
}

// bf16 and f16, d == dv in {32, 64, 128}: the mma.sync path.
TEST_F(AttentionTest, TensorCorePathMatchesReference) {
  for (DType dt : {DType::BF16, DType::F16}) {
    for (bool causal : {false, true}) {
      checkCase({dt, 2, 4, 2, 77, 77, 64, 64, causal, false});     // GQA, partial tiles
      checkCase({dt, 1, 4, 1, 130, 130, 128, 128, causal, false}); // MQA
      checkCase({dt, 2, 2, 2, 16, 40, 64, 64, causal, false});     // tq < tk, top-left causal
      checkCase({dt, 1, 2, 2, 130, 77, 32, 32, causal, false});    // tq > tk
      checkCase({dt, 1, 2, 1, 40, 130, 128, 128, causal, false});  // keys past every query
      checkCase({dt, 2, 3, 3, 128, 128, 64, 64, causal, false});   // whole tiles
      checkCase({dt, 1, 4, 2, 300, 300, 64, 64, causal, false});   // several row blocks, GQA
      checkCase({dt, 1, 2, 1, 200, 333, 64, 64, causal, false});   // tq < tk over several blocks
    }
  }
}

// The same cases on sm_90a's warpgroup MMA (head dims 64 and 128), with q,
// k, v also read out of a fused projection: the same results as the
// reference to the same tolerance.
TEST_F(AttentionTest, WgmmaPathMatchesReference) {
  if (!wgmmaAttentionAvailable())
    GTEST_SKIP() << "the wgmma kernels need an H100/H200 (sm_90)";
  kernels = AttentionKernels::Wgmma;
  for (DType dt : {DType::BF16, DType::F16}) {
    for (bool causal : {false, true}) {
      checkCase({dt, 2, 4, 2, 77, 77, 64, 64, causal, false});     // GQA, partial tiles
      checkCase({dt, 1, 4, 1, 130, 130, 128, 128, causal, false}); // MQA
      checkCase({dt, 2, 2, 2, 16, 40, 64, 64, causal, false});     // tq < tk, top-left causal
      checkCase({dt, 1, 2, 2, 130, 77, 128, 128, causal, false});  // tq > tk
      checkCase({dt, 1, 2, 1, 40, 130, 128, 128, causal, false});  // keys past every query
      checkCase({dt, 2, 3, 3, 128, 128, 64, 64, causal, false});   // whole tiles
      checkCase({dt, 1, 4, 2, 300, 300, 64, 64, causal, false});   // several row blocks, GQA
      checkCase({dt, 1, 2, 1, 200, 333, 64, 64, causal, false});   // tq < tk over several blocks
      checkCase({dt, 1, 2, 1, 333, 200, 128, 128, causal, false}); // tq > tk over several blocks
      checkCase({dt, 2, 4, 2, 130, 130, 64, 64, causal, true});    // fused projection
      checkCase({dt, 2, 4, 4, 77, 77, 128, 128, causal, true});
    }
  }
}

// The loader's one line (tc-run's device line carries it), with or without a
// GPU: "cuDNN X.Y.Z (PATH)" when the plugin and cuDNN are usable, else
// "cuDNN not used: " and why, or "cuDNN off (TC_CUDNN=0)".
TEST(CudnnLoader, StatusLineSaysWhichOrWhy) {
  const std::string line = cudnnStatusLine();
  std::printf("%s\n", line.c_str());
  ASSERT_EQ(line.rfind("cuDNN ", 0), 0u) << line;
  const bool why = line.rfind("cuDNN not used: ", 0) == 0 || line == "cuDNN off (TC_CUDNN=0)";
  EXPECT_NE(cudnnAvailable(), why) << line;
  if (why)
    EXPECT_GT(line.size(), std::string("cuDNN not used: ").size()) << "a reason";
}

// cuDNN's fused attention (AttentionKernels::Cudnn, the optional plugin)
// where it is installed: every case its forward takes (d 64 and 128, causal
// with tq == tk, full with any tq / tk, GQA, MQA, q / k / v out of a fused
// projection) and its deterministic backward takes (the same at d 128, no
// amax) against the reference, the rest of the backward tc's kernels from
// cuDNN's out and lse; a case it must not take (d 32, causal tq != tk, an
// f16 amax) runs tc's kernels. Skipped, saying why, without cuDNN.
TEST_F(AttentionTest, CudnnMatchesReference) {
  if (!cudnnAvailable())
    GTEST_SKIP() << cudnnStatusLine();
  std::printf("attention through %s\n", cudnnStatusLine().c_str());
  kernels = AttentionKernels::Cudnn;
  outAmaxOff = true;
  gradAmaxOff = true;
  auto expectTaken = [&](const AttnCase &c, bool forward, bool backward) {
    int64_t fwd = cudnnAttentionForwardCount(), bwd = cudnnAttentionBackwardCount();
    ASSERT_NO_FATAL_FAILURE(checkCase(c));
    EXPECT_EQ(cudnnAttentionForwardCount() - fwd, forward ? 1 : 0)
        << c.str() << (forward ? ": the forward should run on cuDNN" : ": tc's forward");
    EXPECT_EQ(cudnnAttentionBackwardCount() - bwd > 0, backward)
        << c.str() << (backward ? ": the backward should run on cuDNN" : ": tc's backward");
  };
  for (DType dt : {DType::BF16, DType::F16}) {
    for (bool causal : {false, true}) {
      expectTaken({dt, 2, 4, 2, 77, 77, 64, 64, causal, false}, true, false);    // GQA
      expectTaken({dt, 1, 4, 1, 130, 130, 128, 128, causal, false}, true, true); // MQA
      expectTaken({dt, 2, 3, 3, 128, 128, 64, 64, causal, false}, true, false);  // whole tiles
      expectTaken({dt, 1, 4, 2, 300, 300, 64, 64, causal, false}, true, false);  // row blocks
      expectTaken({dt, 2, 4, 2, 130, 130, 64, 64, causal, true}, true, false);   // fused
      expectTaken({dt, 2, 4, 4, 77, 77, 128, 128, causal, true}, true, true);
      expectTaken({dt, 2, 4, 2, 200, 200, 128, 128, causal, true}, true, true);    // GQA, fused
      expectTaken({dt, 1, 2, 1, 200, 333, 64, 64, causal, false}, !causal, false); // tq < tk
      expectTaken({dt, 1, 2, 1, 333, 200, 128, 128, causal, false}, !causal, !causal);
      expectTaken({dt, 1, 2, 2, 130, 77, 32, 32, causal, false}, false, false); // d 32
    }
  }
  // With amaxes (checked exactly by checkCase): the forward on cuDNN with
  // the amax of out taken after it, the d-128 backward on cuDNN with the
  // amax of the gradients amaxOf names taken after it (the cases step
  // through amaxOf 1..7: dq, dk, dv alone and together, fused and separate,
  // GQA).
  outAmaxOff = false;
  gradAmaxOff = false;
  for (DType dt : {DType::BF16, DType::F16}) {
    expectTaken({dt, 2, 4, 2, 77, 77, 64, 64, true, false}, true, false);
    for (bool fused : {false, true}) {
      expectTaken({dt, 2, 4, 2, 130, 130, 128, 128, true, fused}, true, true);
      expectTaken({dt, 1, 4, 4, 77, 77, 128, 128, false, fused}, true, true);
    }
  }
}

// A scale <= 0 (an ONNX Attention's scale attribute may be anything): the
// tensor-core forward takes the max of the raw scores, so such a scale takes
// the generic forward (and the tensor-core backward); a larger positive
// scale stays on the tensor cores. Both match the reference.
TEST_F(AttentionTest, AnyScaleMatchesReference) {
  for (float sc : {-0.125f, 0.5f}) {
    scaleOverride = sc;
    for (bool causal : {false, true}) {
      checkCase({DType::BF16, 2, 4, 2, 77, 77, 64, 64, causal, false});
      checkCase({DType::F16, 1, 2, 1, 130, 130, 128, 128, causal, false});
    }
  }
}

/// A key mask [batch, tk] of padded batches: batch b % 4 == 0 left-padded
/// by `left` keys, 1 right-padded by `right`, 2 with holes (every third key
/// hidden), 3 with no visible key at all.
std::vector<uint8_t> paddingMask(int64_t batch, int64_t tk, int64_t left, int64_t right) {
  std::vector<uint8_t> m(batch * tk, 1);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < tk; ++j) {
      uint8_t &x = m[b * tk + j];
      switch (b % 4) {
      case 0:
        x = j >= left;
        break;
      case 1:
        x = j < tk - right;
        break;
      case 2:
        x = j % 3 != 1;
        break;
      default:
        x = 0;
      }
    }
  return m;
}

// Padding masks (tc.attention's key_mask) on every path: fill -inf (rows
// with no visible key are 0), HF's finfo.min (they attend to every key,
// uniformly: the fill absorbs the scores in f32) and -1e4 (they take the
// softmax of the scores). The left padding spans more than one 64-row block
// so that whole blocks (forward, dQ) and query tiles (dK/dV) of such rows
// visit every key, and both paddings span whole key tiles and dK/dV blocks
// (which the kernels skip, or visit only for those rows); lengths that are
// not tile multiples, GQA, tq != tk.
TEST_F(AttentionTest, KeyMaskMatchesReference) {
  const double finfoMin = -3.4028234663852886e38;
  struct Shape {
    DType dt;
    int64_t batch, heads, kvHeads, tq, tk, d;
    int64_t left, right;
  };
  const Shape shapes[] = {
      {DType::BF16, 4, 4, 2, 300, 300, 64, 140, 150}, // tensor cores, GQA
      {DType::BF16, 4, 4, 2, 200, 200, 64, 100, 37},
      {DType::F16, 4, 2, 1, 130, 130, 128, 70, 64},   // d 128, MQA
      {DType::BF16, 4, 2, 2, 77, 150, 32, 90, 10},    // tq < tk
      {DType::BF16, 4, 2, 2, 150, 77, 64, 20, 30},    // tq > tk
      {DType::F32, 4, 4, 2, 77, 77, 64, 30, 17},      // generic f32
      {DType::BF16, 4, 2, 1, 77, 77, 80, 30, 17},     // generic bf16 (d 80)
  };
  for (const Shape &sh : shapes)
    for (double fill : {-double(INFINITY), finfoMin, -1e4}) {
      if (sh.dt == DType::F32 && fill == -1e4)
        continue; // f32 holds (s + 1e4) - 1e4 to 5e-4: above f32's tolerance
      std::vector<uint8_t> m = paddingMask(sh.batch, sh.tk, sh.left, sh.right);
      keyMask = &m;
      maskFill = fill;
      SCOPED_TRACE("fill " + std::to_string(fill));
      for (bool causal : {false, true})
        checkCase({sh.dt, sh.batch, sh.heads, sh.kvHeads, sh.tq, sh.tk, sh.d, sh.d, causal, false});
    }
  // Read out of a fused projection, and through the wgmma request (which
  // a key mask sends to the mma.sync kernels).
  std::vector<uint8_t> m = paddingMask(4, 130, 70, 20);
  keyMask = &m;
  maskFill = finfoMin;
  for (bool causal : {false, true})
    checkCase({DType::BF16, 4, 4, 2, 130, 130, 64, 64, causal, true});
  kernels = AttentionKernels::Wgmma;
  for (bool causal : {false, true})
    checkCase({DType::BF16, 4, 4, 2, 130, 130, 128, 128, causal, false});
  keyMask = nullptr;
}

// The forward's 128-row blocks (64-key tiles for d <= 64, 32-key for d 128)
// at their edges: partial and several row blocks, tq != tk, GQA, d 32 and
// 128, a fused projection and a key mask (d 128 with a key mask: 64-row
// blocks), against the reference.
TEST_F(AttentionTest, ForwardRowBlocksMatchReference) {
  const double finfoMin = -3.4028234663852886e38;
  std::vector<uint8_t> m = paddingMask(4, 300, 140, 150);
  for (DType dt : {DType::BF16, DType::F16})
    for (bool causal : {false, true}) {
      checkCase({dt, 2, 4, 2, 77, 77, 64, 64, causal, false});    // GQA, partial tiles
      checkCase({dt, 2, 2, 2, 16, 40, 64, 64, causal, false});    // tq < tk
      checkCase({dt, 1, 2, 2, 130, 77, 32, 32, causal, false});   // tq > tk, d 32
      checkCase({dt, 1, 4, 2, 300, 300, 64, 64, causal, false});  // several row blocks
      checkCase({dt, 1, 2, 1, 200, 333, 64, 64, causal, false});  // tq < tk, several blocks
      checkCase({dt, 2, 4, 2, 130, 130, 64, 64, causal, true});   // fused projection
      checkCase({dt, 1, 4, 1, 130, 130, 128, 128, causal, false}); // d 128
      checkCase({dt, 1, 2, 1, 40, 130, 128, 128, causal, false});
    }
  keyMask = &m;
  maskFill = finfoMin;
  for (bool causal : {false, true}) {
    checkCase({DType::BF16, 4, 4, 2, 300, 300, 64, 64, causal, false});
    checkCase({DType::BF16, 4, 2, 1, 300, 300, 128, 128, causal, false}); // 64-row blocks
  }
  keyMask = nullptr;
}

// A mask fill the kernels do not take (above -1e4, or NaN) is refused.
TEST_F(AttentionTest, KeyMaskFillRefused) {
  AttentionShape s;
  s.batch = 1, s.heads = 1, s.kvHeads = 1, s.tq = 4, s.tk = 4, s.d = 64, s.dv = 64;
  AttentionStrides st = contiguousAttentionStrides(1, 4, 64);
  DevBuf buf, lse, keys;
  ASSERT_OK(devZeros(4 * 64 * 2, &buf, stream()));
  ASSERT_OK(devZeros(16, &lse, stream()));
  ASSERT_OK(devZeros(4, &keys, stream()));
  for (float fill : {-100.0f, NAN, 0.0f}) {
    AttentionMask mask{static_cast<const uint8_t *>(keys.p), fill};
    Status st1 = attentionForward(DType::BF16, s, buf.p, st, buf.p, st, buf.p, st, buf.p, st,
                                  lse.as<float>(), 0.125f, true, stream(), nullptr,
                                  AttentionKernels::Mma, mask);
    EXPECT_FALSE(st1.isOk());
    EXPECT_NE(st1.message().find("fill"), std::string::npos) << st1.toString();
  }
}

// f32 (always the generic fp32-FMA kernels) and bf16/f16 head dims without a
// tensor-core kernel.
TEST_F(AttentionTest, GenericPathMatchesReference) {
  for (bool causal : {false, true}) {
    for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
      checkCase({dt, 2, 4, 2, 77, 77, 80, 80, causal, false});
      checkCase({dt, 1, 4, 1, 130, 130, 48, 48, causal, false});
      checkCase({dt, 2, 2, 2, 16, 40, 48, 48, causal, false});
      checkCase({dt, 1, 2, 1, 33, 21, 64, 32, causal, false}); // d != dv
    }
    checkCase({DType::F32, 2, 4, 2, 77, 77, 64, 64, causal, false});
    checkCase({DType::F32, 1, 4, 1, 130, 130, 128, 128, causal, false});
    checkCase({DType::F32, 2, 2, 2, 16, 40, 64, 64, causal, false});
  }
}

// q, k, v read straight out of a fused projection [batch, t, heads + 2 kvHeads, d],
// out/dout [batch, t, heads, d], gradients written into a fused dqkv.
TEST_F(AttentionTest, FusedQkvLayoutMatchesReference) {
  for (bool causal : {false, true}) {
    checkCase({DType::BF16, 2, 4, 4, 77, 77, 64, 64, causal, true});
    checkCase({DType::BF16, 2, 4, 2, 130, 130, 128, 128, causal, true});
    checkCase({DType::BF16, 2, 3, 3, 77, 77, 48, 48, causal, true});
    checkCase({DType::F16, 2, 4, 2, 130, 130, 64, 64, causal, true});
    checkCase({DType::F16, 2, 3, 3, 77, 77, 48, 48, causal, true});
    checkCase({DType::F32, 2, 4, 2, 77, 77, 64, 64, causal, true});
  }
}

// tk == 0 gives out = 0 and lse = -inf (and dq = 0); batch == 0 does nothing.
TEST_F(AttentionTest, NoKeys) {
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    AttnCase c{dt, 1, 2, 1, 5, 0, 64, 64, false, false};
    Layout L = layoutOf(c);
    HostTensor qkv = randomTensor(ty(dt, {L.qkvElems}), rng);
    HostTensor dout = randomTensor(ty(dt, {L.oElems}), rng);
    Run r;
    ASSERT_NO_FATAL_FAILURE(runCase(c, L, qkv, dout, 0.125f, &r));
    for (double x : hostTensorToDoubles(r.out))
      EXPECT_EQ(x, 0.0);
    for (double x : hostTensorToDoubles(r.lse))
      EXPECT_EQ(x, -INFINITY);
    for (double x : gather(hostTensorToDoubles(r.dqkv), L.q, 1))
      EXPECT_EQ(x, 0.0);
    EXPECT_EQ(r.outAmax, 0.0); // cleared, though no kernel stored a value
    EXPECT_EQ(r.gradAmax, 0.0);
  }
  AttentionShape empty;
  empty.heads = 4, empty.kvHeads = 2, empty.tq = 8, empty.tk = 8, empty.d = 64, empty.dv = 64;
  AttentionStrides st{};
  EXPECT_OK(attentionForward(DType::BF16, empty, nullptr, st, nullptr, st, nullptr, st, nullptr,
                             st, nullptr, 1.0f, true, stream()));
}

// The same inputs give the same bits (no atomics), on both paths.
TEST_F(AttentionTest, Deterministic) {
  std::vector<AttentionKernels> paths = {AttentionKernels::Mma};
  if (wgmmaAttentionAvailable())
    paths.push_back(AttentionKernels::Wgmma);
  if (cudnnAvailable())
    paths.push_back(AttentionKernels::Cudnn);
  const AttnCase cases[] = {AttnCase{DType::BF16, 2, 4, 2, 130, 130, 64, 64, true, false},
                            AttnCase{DType::BF16, 1, 4, 1, 77, 77, 128, 128, false, true},
                            AttnCase{DType::F16, 2, 4, 2, 130, 130, 64, 64, true, false},
                            AttnCase{DType::F32, 1, 4, 2, 77, 77, 48, 48, true, false}};
  for (AttentionKernels path : paths) {
    kernels = path;
    // cuDNN's backward takes no amax (its forward's is taken after it)
    outAmaxOff = gradAmaxOff = path == AttentionKernels::Cudnn;
    for (const AttnCase &c : cases) {
      SCOPED_TRACE(c.str() + (path == AttentionKernels::Wgmma   ? " wgmma"
                              : path == AttentionKernels::Cudnn ? " cudnn"
                                                                : ""));
      Layout L = layoutOf(c);
      HostTensor qkv, dout;
      inputs(c, L, &qkv, &dout);
      Run a, b;
      ASSERT_NO_FATAL_FAILURE(runCase(c, L, qkv, dout, 0.1f, &a));
      ASSERT_NO_FATAL_FAILURE(runCase(c, L, qkv, dout, 0.1f, &b));
      EXPECT_EQ(a.out.data, b.out.data);
      EXPECT_EQ(a.lse.data, b.lse.data);
      EXPECT_EQ(a.dqkv.data, b.dqkv.data);
      EXPECT_EQ(a.outAmax, b.outAmax);
      EXPECT_EQ(a.gradAmax, b.gradAmax);
    }
  }
  outAmaxOff = gradAmaxOff = false;
}

// The gradients' column sums over (batch, t) (AttentionGradSums: the bias
// gradient of a fused qkv projection), against double sums of the stored
// gradients: each within twice the rounding of the output (2^-9 relative
// for bf16, 2^-11 for f16, f32 accumulation for f32: the flash kernels sum
// the values before their rounding, which moves each by at most as much) of
// its column's sum of |x|; the
// same bits every run; the gradients themselves as without the sums. Every
// path: the flash kernels (they sum their rows, in one matrix of partials
// when the output's dq, dk, dv columns are adjacent and tq == tk, else in
// three; several row blocks, partial ones, GQA, tq != tk; with an amax they
// are summed after), the wgmma kernels and the generic one (summed after).
TEST_F(AttentionTest, GradColumnSumsMatchStoredGradients) {
  enum Path { kMma, kWgmma };
  std::vector<Path> paths = {kMma};
  if (wgmmaAttentionAvailable())
    paths.push_back(kWgmma);
  const char *pathNames[] = {"", " wgmma"};
  const AttnCase cases[] = {
      AttnCase{DType::BF16, 2, 4, 4, 300, 300, 64, 64, true, true}, // GPT-2's form
      AttnCase{DType::BF16, 2, 4, 2, 130, 130, 64, 64, false, true},
      AttnCase{DType::F16, 1, 4, 2, 77, 77, 128, 128, true, true},
      AttnCase{DType::BF16, 1, 2, 2, 200, 333, 64, 64, true, false}, // tq < tk
      AttnCase{DType::BF16, 1, 2, 1, 333, 130, 128, 128, false, false},
      AttnCase{DType::BF16, 2, 2, 2, 77, 77, 32, 32, true, false},
      AttnCase{DType::F32, 2, 3, 3, 77, 77, 48, 48, true, true},   // the generic path
      AttnCase{DType::BF16, 1, 2, 1, 40, 0, 64, 64, false, false}, // no keys
  };
  withSums = true;
  for (Path path : paths)
    for (int form = 0; form < 3; ++form) // adjacent columns, gaps, adjacent with an amax
      for (const AttnCase &c : cases) {
        kernels = path == kWgmma ? AttentionKernels::Wgmma : AttentionKernels::Mma;
        gradAmaxOff = form != 2;
        const std::string forms[] = {" adjacent", " gaps", " adjacent amax"};
        SCOPED_TRACE(c.str() + pathNames[path] + forms[form]);
        Layout L = layoutOf(c);
        // dq, dk, dv columns in order, adjacent or with a gap before each.
        const int64_t cq = c.heads * c.d, ck = c.kvHeads * c.d, cv = c.kvHeads * c.dv;
        const int64_t gap = form == 1 ? 1 : 0;
        sumOffsets[0] = 3 * gap, sumOffsets[1] = sumOffsets[0] + cq + 5 * gap;
        sumOffsets[2] = sumOffsets[1] + ck + 2 * gap;
        sumCols = sumOffsets[2] + cv + gap;
        HostTensor qkv, dout;
        inputs(c, L, &qkv, &dout);
        double worst = 0, tol = 0;
        ASSERT_NO_FATAL_FAILURE(checkColumnSums(c, L, qkv, dout, &worst, &tol));
        report("attention column sums " + c.str() + pathNames[path] + forms[form],
               c.dt, worst, tol, -1, "");
      }
  withSums = false;
  gradAmaxOff = false;
}

// The backward's rotary of dq / dk (AttentionGradRotary): the gradients a
// call stores rotated against the same call's plain gradients rotated on the
// host (tc.rotary's math in double), on each path: the flash kernels rotate
// their accumulators (half a multiple of 8: Pythia's 8, Llama's 32, d 128's
// 64), the other paths (half 4 and 12, f32's generic kernel, wgmma, cuDNN's
// d-128 backward) rotate the stored gradients after them. dv and the
// features past the rotary are the plain call's bits.
/// A case of the backward with a rotary of half `half` (0: none) on the
/// kernels `kernels` asks for; kRotaryKernelNames names them.
struct RotaryCase {
  AttnCase c;
  int64_t half;
  AttentionKernels kernels;
};
const char *const kRotaryKernelNames[] = {" mma", " wgmma", " cudnn"};

/// `cases` and, where the GPU has wgmma, GPT-2's shape (half 8) on it.
std::vector<RotaryCase> withWgmmaCase(std::vector<RotaryCase> cases) {
  if (wgmmaAttentionAvailable())
    cases.push_back(
        {AttnCase{DType::BF16, 2, 4, 4, 300, 300, 64, 64, true, true}, 8, AttentionKernels::Wgmma});
  return cases;
}

TEST_F(AttentionTest, RotaryGradientsMatchRotatedPlainGradients) {
  const std::vector<RotaryCase> cases = withWgmmaCase({
      {AttnCase{DType::BF16, 2, 4, 4, 300, 300, 64, 64, true, true}, 8, AttentionKernels::Mma},
      {AttnCase{DType::BF16, 2, 4, 2, 130, 130, 64, 64, true, false}, 32, AttentionKernels::Mma},
      {AttnCase{DType::F16, 1, 4, 4, 77, 77, 64, 64, false, true}, 16, AttentionKernels::Mma},
      {AttnCase{DType::BF16, 1, 2, 1, 200, 200, 128, 128, true, false}, 64, AttentionKernels::Mma},
      {AttnCase{DType::BF16, 2, 2, 2, 77, 77, 32, 32, true, false}, 8, AttentionKernels::Mma},
      {AttnCase{DType::BF16, 2, 4, 4, 130, 130, 64, 64, true, true}, 4, AttentionKernels::Mma},
      {AttnCase{DType::F32, 2, 3, 3, 77, 77, 48, 48, true, false}, 12, AttentionKernels::Mma},
      {AttnCase{DType::BF16, 1, 2, 1, 200, 200, 128, 128, true, false}, 64,
       AttentionKernels::Cudnn},
  });
  outAmaxOff = gradAmaxOff = true;
  for (const RotaryCase &rc : cases)
    for (int of : {3, 1, 2}) {
      const AttnCase &c = rc.c;
      kernels = rc.kernels;
      SCOPED_TRACE(c.str() + kRotaryKernelNames[static_cast<int>(rc.kernels)] + " half " +
                   std::to_string(rc.half) + " of " + std::to_string(of));
      Layout L = layoutOf(c);
      HostTensor qkv, dout;
      inputs(c, L, &qkv, &dout);
      makeRotaryTables(c, rc.half);
      std::vector<double> cs = hostTensorToDoubles(rotCos), sn = hostTensorToDoubles(rotSin);
      Run rotated, plain;
      rotOf = of;
      ASSERT_NO_FATAL_FAILURE(runCase(c, L, qkv, dout, 0.125f, &rotated));
      rotOf = 0;
      ASSERT_NO_FATAL_FAILURE(runCase(c, L, qkv, dout, 0.125f, &plain));
      std::vector<double> got = hostTensorToDoubles(rotated.dqkv);
      std::vector<double> base = hostTensorToDoubles(plain.dqkv);
      const double tol = c.dt == DType::F32 ? 1e-5 : c.dt == DType::F16 ? 2e-3 : 1e-2;
      const Operand *ops[3] = {&L.q, &L.k, &L.v};
      for (int j = 0; j < 3; ++j) {
        const Operand &o = *ops[j];
        const bool rot = j < 2 && (of & (1 << j));
        std::vector<double> want, have;
        int64_t sameBits = 0, elems = 0;
        for (int64_t b = 0; b < c.batch; ++b)
          for (int64_t h = 0; h < o.heads; ++h)
            for (int64_t i = 0; i < o.t; ++i)
              for (int64_t e = 0; e < o.d; ++e) {
                const double x = base[o.index(b, h, i, e)], y = got[o.index(b, h, i, e)];
                if (!rot || e >= 2 * rc.half) {
                  ++elems;
                  sameBits += x == y || (std::isnan(x) && std::isnan(y));
                  continue;
                }
                const int64_t k = e % rc.half, at = (b * o.t + i) * rc.half + k;
                const double x1 = base[o.index(b, h, i, k)],
                             x2 = base[o.index(b, h, i, k + rc.half)];
                want.push_back(e < rc.half ? cs[at] * x1 - sn[at] * x2 : sn[at] * x1 + cs[at] * x2);
                have.push_back(y);
              }
        EXPECT_EQ(sameBits, elems) << "gradient " << j << ": the elements no rotary touches "
                                   << "differ from the plain call's";
        if (rot) {
          const double err = maxAbsErr(have, want);
          EXPECT_LE(err, tol) << "gradient " << j << " rotated";
          report("attention rotary d" + std::to_string(j) + " " + c.str() +
                     kRotaryKernelNames[static_cast<int>(rc.kernels)] + " half " +
                     std::to_string(rc.half),
                 c.dt, err, tol, -1, "");
        }
      }
    }
  // What the call refuses: gradients other than dq / dk, no tables, a half
  // past d / 2, an amax beside it (column sums are of the rotated gradients:
  // GradColumnSumsOfInterleavedHeadsAndRotaries).
  const AttnCase c{DType::BF16, 1, 2, 2, 16, 16, 64, 64, true, false};
  DevBuf buf, scratch, amax;
  ASSERT_OK(devZeros(1 << 20, &buf, stream()));
  ASSERT_OK(devZeros(attentionBackwardScratchBytes(c.shape(), true), &scratch, stream()));
  ASSERT_OK(devZeros(16, &amax, stream()));
  const AttentionStrides st = contiguousAttentionStrides(2, 16, 64);
  auto call = [&](AttentionGradRotary r, bool withAmax, bool withSums) {
    AttentionGradSums sums;
    if (withSums)
      sums.out = buf.p;
    return attentionBackward(c.dt, c.shape(), buf.p, st, buf.p, st, buf.p, st, buf.p, st, buf.p, st,
                             buf.as<float>(), buf.p, st, buf.p, st, buf.p, st, scratch.p, 0.125f,
                             true, stream(), withAmax ? amax.as<float>() : nullptr, 1,
                             AttentionKernels::Mma, {}, sums, r);
  };
  auto refused = [&](AttentionGradRotary r, bool withAmax, bool withSums, const char *why) {
    Status st = call(r, withAmax, withSums);
    EXPECT_EQ(st.code(), StatusCode::InvalidArgument) << st.toString();
    EXPECT_NE(st.message().find(why), std::string::npos) << st.toString();
  };
  refused({buf.p, buf.p, 8, 4}, false, false, "dq (1) and / or dk");
  refused({nullptr, buf.p, 8, 1}, false, false, "cos / sin tables");
  refused({buf.p, buf.p, 33, 1}, false, false, "2 half <= d");
  refused({buf.p, buf.p, 8, 1}, true, false, "with an amax");
  outAmaxOff = gradAmaxOff = false;
  rotOf = 0;
}

// GPT-NeoX's qkv bias gradient (AttentionGradSums::headStride): the heads'
// columns interleave ([heads][q k v], in any order of the three), and the
// sums are of the gradients as stored, rotated where the call rotates them
// (AttentionGradRotary): against double sums of the stored gradients within
// GradColumnSumsMatchStoredGradients' tolerances; the same bits run to run;
// the gradients the bits of the same call without sums. Every path: the
// flash kernels summing the rows they rotate and store (half a multiple of
// 8), rotated and summed after them (half 4), without a rotary, f32's
// generic kernel, wgmma and cuDNN's d-128 backward (summed after). Then what
// the call refuses: interleaved heads with GQA, with tq != tk, or whose
// columns do not tile the head stride.
TEST_F(AttentionTest, GradColumnSumsOfInterleavedHeadsAndRotaries) {
  const std::vector<RotaryCase> cases = withWgmmaCase({
      {AttnCase{DType::BF16, 2, 4, 4, 300, 300, 64, 64, true, true}, 8, AttentionKernels::Mma},
      {AttnCase{DType::BF16, 2, 4, 4, 300, 300, 64, 64, true, true}, 4, AttentionKernels::Mma},
      {AttnCase{DType::BF16, 2, 4, 4, 130, 130, 64, 64, false, true}, 0, AttentionKernels::Mma},
      {AttnCase{DType::F16, 1, 4, 4, 77, 77, 128, 128, true, true}, 64, AttentionKernels::Mma},
      {AttnCase{DType::BF16, 2, 2, 2, 77, 77, 32, 32, true, false}, 8, AttentionKernels::Mma},
      {AttnCase{DType::F32, 2, 3, 3, 77, 77, 48, 48, true, true}, 12, AttentionKernels::Mma},
      {AttnCase{DType::BF16, 1, 2, 2, 200, 200, 128, 128, true, false}, 64,
       AttentionKernels::Cudnn},
  });
  outAmaxOff = gradAmaxOff = true;
  withSums = true;
  for (const RotaryCase &sc : cases)
    for (int order = 0; order < 2; ++order) { // q k v, or k v q, in a head's columns
      const AttnCase &c = sc.c;
      kernels = sc.kernels;
      SCOPED_TRACE(c.str() + kRotaryKernelNames[static_cast<int>(sc.kernels)] + " half " +
                   std::to_string(sc.half) + (order ? " k v q" : " q k v"));
      const int64_t W = 2 * c.d + c.dv, base = 3;
      if (order == 0)
        sumOffsets[0] = base, sumOffsets[1] = base + c.d, sumOffsets[2] = base + 2 * c.d;
      else
        sumOffsets[1] = base, sumOffsets[2] = base + c.d, sumOffsets[0] = base + c.d + c.dv;
      sumHeadStride = W;
      sumCols = base + c.heads * W + 2;
      Layout L = layoutOf(c);
      HostTensor qkv, dout;
      inputs(c, L, &qkv, &dout);
      rotOf = 0;
      if (sc.half) {
        makeRotaryTables(c, sc.half);
        rotOf = 3;
      }
      double worst = 0, tol = 0;
      ASSERT_NO_FATAL_FAILURE(checkColumnSums(c, L, qkv, dout, &worst, &tol));
      report("attention interleaved column sums " + c.str() +
                 kRotaryKernelNames[static_cast<int>(sc.kernels)] + " half " +
                 std::to_string(sc.half),
             c.dt, worst, tol, -1, "");
    }
  // The refusals, before any launch.
  DevBuf buf, scratch;
  ASSERT_OK(devZeros(1 << 20, &buf, stream()));
  ASSERT_OK(devZeros(1 << 20, &scratch, stream()));
  auto call = [&](AttentionShape s, AttentionGradSums sums) {
    const AttentionStrides st = contiguousAttentionStrides(s.heads, std::max(s.tq, s.tk), s.d);
    sums.out = buf.p;
    return attentionBackward(DType::BF16, s, buf.p, st, buf.p, st, buf.p, st, buf.p, st, buf.p, st,
                             buf.as<float>(), buf.p, st, buf.p, st, buf.p, st, scratch.p, 0.125f,
                             true, stream(), nullptr, 0, AttentionKernels::Mma, {}, sums, {});
  };
  auto refused = [&](AttentionShape s, AttentionGradSums sums) {
    Status st = call(s, sums);
    EXPECT_EQ(st.code(), StatusCode::InvalidArgument) << st.toString();
    EXPECT_NE(st.message().find("interleaved heads"), std::string::npos) << st.toString();
  };
  AttentionGradSums ok;
  ok.offsets[0] = 0, ok.offsets[1] = 64, ok.offsets[2] = 128, ok.headStride = 192;
  refused(AttentionShape{1, 4, 2, 16, 16, 64, 64}, ok); // GQA
  refused(AttentionShape{1, 2, 2, 16, 32, 64, 64}, ok); // tq != tk
  AttentionGradSums gap = ok;
  gap.offsets[2] = 129; // a gap before dv
  refused(AttentionShape{1, 2, 2, 16, 16, 64, 64}, gap);
  AttentionGradSums overlap = ok;
  overlap.offsets[1] = 0; // dq and dk on the same columns
  refused(AttentionShape{1, 2, 2, 16, 16, 64, 64}, overlap);
  AttentionGradSums wide = ok;
  wide.headStride = 200; // past the three's columns
  refused(AttentionShape{1, 2, 2, 16, 16, 64, 64}, wide);
  withSums = false;
  sumHeadStride = 0;
  outAmaxOff = gradAmaxOff = false;
  rotOf = 0;
}

TEST_F(AttentionTest, RejectsBadArguments) {
  AttentionShape s;
  s.batch = 1, s.heads = 4, s.kvHeads = 3, s.tq = 8, s.tk = 8, s.d = 64, s.dv = 64;
  DevBuf buf;
  ASSERT_OK(devZeros(1 << 16, &buf, stream()));
  AttentionStrides st = contiguousAttentionStrides(4, 8, 64);
  void *p = buf.p;
  Status st1 =
      attentionForward(DType::BF16, s, p, st, p, st, p, st, p, st, nullptr, 1.0f, false, stream());
  EXPECT_EQ(st1.code(), StatusCode::InvalidArgument) << st1.toString();
  EXPECT_NE(st1.message().find("attentionForward"), std::string::npos) << st1.toString();
  Status st2 = attentionBackward(DType::BF16, s, p, st, p, st, p, st, p, st, p, st,
                                 buf.as<float>(), p, st, p, st, p, st, p, 1.0f, false, stream());
  EXPECT_EQ(st2.code(), StatusCode::InvalidArgument) << st2.toString();
  s.kvHeads = 2;
  Status st3 = attentionForward(DType::BF16, s, p, st, nullptr, st, p, st, p, st, nullptr, 1.0f,
                                false, stream());
  EXPECT_EQ(st3.code(), StatusCode::InvalidArgument) << st3.toString();
  Status st4 = attentionBackward(DType::F32, s, p, st, p, st, p, st, p, st, p, st, nullptr, p, st,
                                 p, st, p, st, p, 1.0f, false, stream());
  EXPECT_EQ(st4.code(), StatusCode::InvalidArgument) << st4.toString();
  s.d = s.dv = 320;
  Status st5 =
      attentionForward(DType::F32, s, p, st, p, st, p, st, p, st, nullptr, 1.0f, false, stream());
  EXPECT_EQ(st5.code(), StatusCode::InvalidArgument) << st5.toString();
  s.d = s.dv = 64;
  Status st6 =
      attentionForward(DType::I32, s, p, st, p, st, p, st, p, st, nullptr, 1.0f, false, stream());
  EXPECT_EQ(st6.code(), StatusCode::InvalidArgument) << st6.toString();
  // An amax needs the gradients it covers named.
  Status st7 = attentionBackward(DType::BF16, s, p, st, p, st, p, st, p, st, p, st,
                                 buf.as<float>(), p, st, p, st, p, st, p, 1.0f, false, stream(),
                                 buf.as<float>(), 0);
  EXPECT_EQ(st7.code(), StatusCode::InvalidArgument) << st7.toString();
  EXPECT_NE(st7.message().find("amaxOf"), std::string::npos) << st7.toString();
}

//===----------------------------------------------------------------------===//
// Timing (always passes; prints)
//===----------------------------------------------------------------------===//

/// Uniform [-1, 1] bf16 bits, quickly (xorshift).
std::vector<uint16_t> randomBf16(size_t n, uint64_t seed) {
  std::vector<uint16_t> x(n);
  uint64_t st = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    st ^= st << 13, st ^= st >> 7, st ^= st << 17;
    float f = static_cast<float>((st >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f;
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    x[i] = static_cast<uint16_t>(bits >> 16);
  }
  return x;
}

/// Times the forward and backward of one shape with `kernels` (the same
/// random inputs every call) and returns out, dq, dk and dv.
void timeShape(cudaStream_t stream, int64_t B, int64_t H, int64_t T, int64_t d, bool causal,
               AttentionKernels kernels, std::vector<double> (&results)[4],
               const std::string &tag = "", const std::vector<uint8_t> *keyMask = nullptr) {
  AttentionShape s;
  s.batch = B, s.heads = H, s.kvHeads = H, s.tq = T, s.tk = T, s.d = d, s.dv = d;
  const int64_t n = B * H * T * d;
  AttentionStrides st = contiguousAttentionStrides(H, T, d);
  DevBuf q, k, v, o, dout, dq, dk, dv, lse, scratch;
  DevBuf *ins[] = {&q, &k, &v, &dout};
  for (int i = 0; i < 4; ++i) {
    std::vector<uint16_t> x = randomBf16(n, i + 1);
    ASSERT_OK(devAlloc(n * 2, ins[i]));
    ASSERT_OK(cudaStatus(cudaMemcpy(ins[i]->p, x.data(), n * 2, cudaMemcpyHostToDevice), "copy"));
  }
  for (DevBuf *b : {&o, &dq, &dk, &dv})
    ASSERT_OK(devZeros(n * 2, b, stream));
  ASSERT_OK(devZeros(B * H * T * 4, &lse, stream));
  ASSERT_OK(devZeros(attentionBackwardScratchBytes(s), &scratch, stream));
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  AttentionMask mask;
  DevBuf keys;
  if (keyMask) {
    ASSERT_OK(devAlloc(keyMask->size(), &keys));
    ASSERT_OK(cudaStatus(
        cudaMemcpy(keys.p, keyMask->data(), keyMask->size(), cudaMemcpyHostToDevice), "copy"));
    mask = {static_cast<const uint8_t *>(keys.p), -3.4028234663852886e38f};
  }
  auto fwd = [&] {
    return attentionForward(DType::BF16, s, q.p, st, k.p, st, v.p, st, o.p, st, lse.as<float>(),
                            scale, causal, stream, nullptr, kernels, mask);
  };
  auto bwd = [&] {
    return attentionBackward(DType::BF16, s, q.p, st, k.p, st, v.p, st, o.p, st, dout.p, st,
                             lse.as<float>(), dq.p, st, dk.p, st, dv.p, st, scratch.p, scale,
                             causal, stream, nullptr, 0, kernels, mask);
  };
  ASSERT_OK(fwd());
  double fwdUs = timeUs(stream, 20, fwd);
  double bwdUs = timeUs(stream, 20, bwd);
  ASSERT_GT(fwdUs, 0);
  ASSERT_GT(bwdUs, 0);
  double flops = 4.0 * B * H * T * T * d * (causal ? 0.5 : 1.0);
  const bool wgmma = kernels == AttentionKernels::Wgmma;
  std::string shape = "bf16 " + shapeStr({B, H, T, T}) + " d" + std::to_string(d) +
                      (causal ? " causal" : "") + (wgmma ? " wgmma" : "") +
                      (tag.empty() ? "" : " " + tag);
  std::printf("attention fwd %s: %.3f ms, %.1f TFLOP/s\n", shape.c_str(), fwdUs / 1000,
              flops / (fwdUs * 1e6));
  std::printf("attention bwd %s: %.3f ms, %.1f TFLOP/s\n", shape.c_str(), bwdUs / 1000,
              2.5 * flops / (bwdUs * 1e6));
  const std::string suffix =
      std::string(wgmma ? "_wgmma" : "") + (tag.empty() ? "" : "_" + tag);
  report(std::string("attention_forward") + suffix, DType::BF16, 0, 1, fwdUs,
         shapeStr({B, H, T, T, d}));
  report(std::string("attention_backward") + suffix, DType::BF16, 0, 1, bwdUs,
         shapeStr({B, H, T, T, d}));
  DevBuf *outs[] = {&o, &dq, &dk, &dv};
  for (int i = 0; i < 4; ++i) {
    HostTensor h;
    ASSERT_OK(download(outs[i]->p, ty(DType::BF16, {n}), &h, stream));
    results[i] = hostTensorToDoubles(h);
  }
}

/// Times a shape on the mma.sync kernels and, where cuDNN is installed, its
/// forward (tc's backward after it), and on an H100/H200 the wgmma kernels,
/// whose results must match the mma.sync kernels' at this size.
void timeBoth(cudaStream_t stream, int64_t B, int64_t H, int64_t T, int64_t d) {
  std::vector<double> mma[4], wg[4], dnn[4];
  ASSERT_NO_FATAL_FAILURE(timeShape(stream, B, H, T, d, true, AttentionKernels::Mma, mma));
  const char *names[] = {"out", "dq", "dk", "dv"};
  if (cudnnAvailable()) {
    ASSERT_NO_FATAL_FAILURE(
        timeShape(stream, B, H, T, d, true, AttentionKernels::Cudnn, dnn, "cudnn"));
    for (int i = 0; i < 4; ++i) {
      double err = maxAbsErr(dnn[i], mma[i]);
      EXPECT_LE(err, 2e-2) << names[i] << " cuDNN's forward against mma.sync, d" << d;
      report(std::string("attention cudnn vs mma ") + names[i], DType::BF16, err, 2e-2, -1,
             shapeStr({B, H, T, T, d}));
    }
  }
  if (!wgmmaAttentionAvailable())
    return;
  ASSERT_NO_FATAL_FAILURE(timeShape(stream, B, H, T, d, true, AttentionKernels::Wgmma, wg));
  for (int i = 0; i < 4; ++i) {
    double err = maxAbsErr(wg[i], mma[i]);
    EXPECT_LE(err, 2e-2) << names[i] << " wgmma against mma.sync, d" << d;
    report(std::string("attention wgmma vs mma ") + names[i], DType::BF16, err, 2e-2, -1,
           shapeStr({B, H, T, T, d}));
  }
}

// cuDNN's forward at GPT-2 124M's shape (q, k, v out of the fused
// projection) gives the same out and lse bits call after call.
TEST_F(AttentionTest, CudnnForwardSameBitsAtGpt2Shape) {
  if (!cudnnAvailable())
    GTEST_SKIP() << cudnnStatusLine();
  const int64_t B = 16, H = 12, T = 1024, d = 64, W = 3 * H * d, n = B * H * T * d;
  AttentionShape s;
  s.batch = B, s.heads = H, s.kvHeads = H, s.tq = T, s.tk = T, s.d = d, s.dv = d;
  AttentionStrides fused{T * W, d, W}, os{T * H * d, d, H * d};
  DevBuf qkv, o, lse;
  std::vector<uint16_t> x = randomBf16(3 * n, 11);
  ASSERT_OK(devAlloc(3 * n * 2, &qkv));
  ASSERT_OK(cudaStatus(cudaMemcpy(qkv.p, x.data(), 3 * n * 2, cudaMemcpyHostToDevice), "copy"));
  ASSERT_OK(devZeros(n * 2, &o, stream()));
  ASSERT_OK(devZeros(B * H * T * 4, &lse, stream()));
  char *base = static_cast<char *>(qkv.p);
  std::vector<uint16_t> out0(n), out(n);
  std::vector<float> lse0(B * H * T), lseN(B * H * T);
  const int64_t before = cudnnAttentionForwardCount();
  for (int rep = 0; rep < 40; ++rep) {
    ASSERT_OK(attentionForward(DType::BF16, s, base, fused, base + H * d * 2, fused,
                               base + 2 * H * d * 2, fused, o.p, os, lse.as<float>(), 0.125f, true,
                               stream(), nullptr, AttentionKernels::Cudnn));
    ASSERT_EQ(cudaStreamSynchronize(stream()), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(rep ? out.data() : out0.data(), o.p, n * 2, cudaMemcpyDeviceToHost),
              cudaSuccess);
    ASSERT_EQ(
        cudaMemcpy(rep ? lseN.data() : lse0.data(), lse.p, B * H * T * 4, cudaMemcpyDeviceToHost),
        cudaSuccess);
    if (rep) {
      ASSERT_EQ(out, out0) << "out differs at call " << rep;
      ASSERT_EQ(lseN, lse0) << "lse differs at call " << rep;
    }
  }
  EXPECT_EQ(cudnnAttentionForwardCount() - before, 40);
}

// What the column sums (AttentionGradSums) cost the backward at GPT-2 124M's
// shape, its gradients written into the fused qkv projection's gradient as
// in the step: the backward without and with them, and the three in-order
// sums of the partials (sumColumnPartials) alone.
TEST_F(AttentionTest, TimingGpt2ColumnSums) {
  const int64_t B = 16, H = 12, T = 1024, d = 64, W = 3 * H * d;
  AttentionShape s;
  s.batch = B, s.heads = H, s.kvHeads = H, s.tq = T, s.tk = T, s.d = d, s.dv = d;
  AttentionStrides fused{T * W, d, W}, st = contiguousAttentionStrides(H, T, d);
  const int64_t n = B * H * T * d;
  DevBuf qkv, o, dout, dqkv, lse, scratch, sums;
  std::vector<uint16_t> x = randomBf16(3 * n, 7);
  ASSERT_OK(devAlloc(3 * n * 2, &qkv));
  ASSERT_OK(cudaStatus(cudaMemcpy(qkv.p, x.data(), 3 * n * 2, cudaMemcpyHostToDevice), "copy"));
  x = randomBf16(n, 8);
  ASSERT_OK(devAlloc(n * 2, &dout));
  ASSERT_OK(cudaStatus(cudaMemcpy(dout.p, x.data(), n * 2, cudaMemcpyHostToDevice), "copy"));
  ASSERT_OK(devZeros(n * 2, &o, stream()));
  ASSERT_OK(devZeros(3 * n * 2, &dqkv, stream()));
  ASSERT_OK(devZeros(B * H * T * 4, &lse, stream()));
  ASSERT_OK(devZeros(attentionBackwardScratchBytes(s, true), &scratch, stream()));
  ASSERT_OK(devZeros(W * 2, &sums, stream()));
  auto at = [](const DevBuf &b, int64_t piece) {
    return static_cast<char *>(b.p) + piece * H * d * 2;
  };
  const float scale = 0.125f;
  ASSERT_OK(attentionForward(DType::BF16, s, at(qkv, 0), fused, at(qkv, 1), fused, at(qkv, 2),
                             fused, o.p, st, lse.as<float>(), scale, true, stream()));
  AttentionGradSums cs;
  cs.out = sums.p, cs.offsets[0] = 0, cs.offsets[1] = H * d, cs.offsets[2] = 2 * H * d;
  auto bwd = [&](const AttentionGradSums &with) {
    return attentionBackward(DType::BF16, s, at(qkv, 0), fused, at(qkv, 1), fused, at(qkv, 2),
                             fused, o.p, st, dout.p, st, lse.as<float>(), at(dqkv, 0), fused,
                             at(dqkv, 1), fused, at(dqkv, 2), fused, scratch.p, scale, true,
                             stream(), nullptr, 0, AttentionKernels::Mma, {}, with);
  };
  double plainUs = timeUs(stream(), 20, [&] { return bwd({}); });
  double sumsUs = timeUs(stream(), 20, [&] { return bwd(cs); });
  // The partials' sums alone: [16 x 8 blocks][768] three times.
  float *parts = reinterpret_cast<float *>(static_cast<char *>(scratch.p) +
                                           attentionBackwardScratchBytes(B, H, T));
  double finishUs = timeUs(stream(), 20, [&]() -> Status {
    for (int i = 0; i < 3; ++i)
      TC_RETURN_IF_ERROR(sumColumnPartials(DType::BF16, parts, B * 8, H * d,
                                           static_cast<char *>(sums.p) + i * H * d * 2, stream()));
    return Status::ok();
  });
  std::printf("attention bwd bf16 16x12x1024 d64 causal fused: %.1f us, with the column sums "
              "%.1f us (their final sums alone %.1f us)\n",
              plainUs, sumsUs, finishUs);
  report("attention_backward_fused", DType::BF16, 0, 1, plainUs, shapeStr({B, H, T, T, d}));
  report("attention_backward_fused_col_sums", DType::BF16, 0, 1, sumsUs, shapeStr({B, H, T, T, d}));
  report("attention_col_sums_finish", DType::BF16, 0, 1, finishUs, shapeStr({B * 8, H * d}));
}

TEST_F(AttentionTest, TimingGpt2) {
  ASSERT_NO_FATAL_FAILURE(timeBoth(stream(), 16, 12, 1024, 64));
  ASSERT_NO_FATAL_FAILURE(timeBoth(stream(), 8, 16, 1024, 128));
  // A right-padded batch with HF's finfo.min fill, the lengths of
  // bench/kernels_torch.py's "attention_*_padded": row b holds
  // T/2 + b T / (2 B) tokens (the kernels skip the padding's key tiles).
  const int64_t B = 16, T = 1024;
  std::vector<uint8_t> keys(B * T);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < T; ++j)
      keys[b * T + j] = j < T / 2 + b * T / (2 * B);
  std::vector<double> padded[4];
  ASSERT_NO_FATAL_FAILURE(
      timeShape(stream(), B, 12, T, 64, true, AttentionKernels::Mma, padded, "padded", &keys));
}

} // namespace
} // namespace tc::rt::cuda
