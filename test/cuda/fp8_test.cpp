//===- fp8_test.cpp - FP8 quantization and the cuBLASLt FP8 GEMM ------------===//
//
// amaxFp8 + quantizeFp8 against tc.quantize's CPU reference, bit for bit:
// every byte of q and of the transposed copy and every f32 scale_inv equal
// (a NaN element only needs to be NaN on both sides: its sign bit is not
// part of the contract), on random data with zeros, +-inf, NaN, values that
// saturate, an all-zero and an all-NaN tensor, and an amax so small that its
// scale overflows f32; per tensor and per row, f32 and bf16 inputs, E4M3
// and E5M2.
//
// Matmul::runFp8 against tc.scaled_matmul of the same quantized operands
// (quantized on the GPU, so the chain is what a step runs; per tensor, and
// per row for the forward with cuBLASLt's outer-vector scales): the forward
// (x [M, K] @ W [N, K]^T, E4M3 x E4M3), dgrad (dY [M, N] E5M2 @ W, reading
// W's transposed copy) and wgrad (dY^T @ X, reading both transposed copies).
// The products of the dequantized operands are exact on both sides; only
// the sums differ: the CPU adds in double, cuBLASLt in fp32 in its own
// order, and Hopper's FP8 tensor cores keep fewer bits between the
// promotions of their partial sums to fp32 (the reason fast accumulation,
// which promotes less often, is for the forward only). Tolerances, relative
// to max(|want|, rms(want)) as compare() measures: f32 results 1e-3
// (sqrt(K) 2^-24 per element is the fp32 part; the tensor cores' partial
// sums add the rest), bf16 results 1e-2 (one bf16 rounding, 2^-8 relative,
// may fall on the other side of a tie), fast accumulation 2e-2.
//
// Then the device program of an FP8 linear layer (quantize_fp8 library ops,
// compute_type "fp8" matmuls, as tc-lower-to-tcx emits them) through the
// CUDA executor against the same tc ops on the CPU.
//
//===----------------------------------------------------------------------===//
#include "test/cuda/cuda_test_util.h"

#include <cfloat>
#include <limits>

#include "runtime/src/base/float_format.h"
#include "runtime/src/cuda/cublaslt.h"
#include "runtime/src/cuda/executor.h"
#include "runtime/src/cuda/kernels/kernels.h"

namespace tc::rt::cuda {
namespace {

using namespace tc::rt::cuda::test;

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

class CudaFp8 : public CudaTest {};

/// The GPU's q (and qT when `transpose`) and scale_inv of x [rows, cols].
struct GpuQuantized {
  HostTensor q, qT, scaleInv;
  DevBuf dq, dqT, dscale;
};

Status quantizeOnGpu(const HostTensor &x, DType qt, Fp8Scaling scaling, bool transpose,
                     cudaStream_t s, GpuQuantized *out) {
  int64_t rows = x.type.shape[0], cols = x.type.shape[1];
  bool perRow = scaling == Fp8Scaling::Row, perCol = scaling == Fp8Scaling::Column;
  int64_t scales = perRow ? rows : perCol ? cols : 1;
  DevBuf dx, amax;
  TC_RETURN_IF_ERROR(upload(x, &dx, s));
  TC_RETURN_IF_ERROR(devZeros(fp8QuantizeScratchBytes(scales), &amax, s));
  TC_RETURN_IF_ERROR(devZeros(std::max<int64_t>(1, rows * cols), &out->dq, s));
  TC_RETURN_IF_ERROR(devZeros(std::max<int64_t>(1, rows * cols), &out->dqT, s));
  TC_RETURN_IF_ERROR(devZeros(4 * std::max<int64_t>(1, scales), &out->dscale, s));
  TC_RETURN_IF_ERROR(amaxFp8(x.type.dtype, dx.p, amax.as<float>(), rows, cols, scaling, s));
  TC_RETURN_IF_ERROR(quantizeFp8(x.type.dtype, dx.p, amax.as<float>(), qt, out->dq.p,
                                 transpose ? out->dqT.p : nullptr, out->dscale.as<float>(), rows,
                                 cols, scaling, s));
  TC_RETURN_IF_ERROR(download(out->dq.p, ty(qt, {rows, cols}), &out->q, s));
  if (transpose)
    TC_RETURN_IF_ERROR(download(out->dqT.p, ty(qt, {cols, rows}), &out->qT, s));
  return download(out->dscale.p, ty(DType::F32, {perCol ? 1 : scales, perCol ? cols : 1}),
                  &out->scaleInv, s);
}

/// x [rows, cols] of `dt`: uniform in [-3, 3] with the special values of
/// `kind` mixed in.
HostTensor fp8Input(DType dt, int64_t rows, int64_t cols, const std::string &kind,
                    std::mt19937 &rng) {
  std::uniform_real_distribution<double> u(-3, 3);
  std::uniform_int_distribution<int64_t> pick(0, rows * cols - 1);
  std::vector<double> v(static_cast<size_t>(rows * cols));
  for (double &e : v)
    e = kind == "zeros" ? 0.0 : kind == "nan" ? kNaN : kind == "tiny" ? u(rng) * 1e-39 : u(rng);
  if (kind == "special") {
    // Zeros (of both signs), +-inf (amax inf: s = 1, so the large values
    // saturate), NaN (ignored by amax, kept by q), values beyond E4M3's 448.
    const double specials[] = {0.0, -0.0, kInf, -kInf, kNaN, 1e5, -1e5, 448, 500, 6e4};
    for (double sp : specials)
      for (int rep = 0; rep < 3; ++rep)
        v[pick(rng)] = sp;
  }
  if (kind == "saturate") // the row/tensor amax rounds the product to exactly fmax
    for (int rep = 0; rep < 5; ++rep)
      v[pick(rng)] = 3.0;
  return makeHostTensor(ty(dt, {rows, cols}), v);
}

TEST_F(CudaFp8, QuantizeMatchesReferenceBitForBit) {
  const char *kinds[] = {"random", "special", "saturate", "zeros", "nan", "tiny"};
  // 64x128 tiles with 8-element vectors where cols % 8 == 0 (whole and
  // partial tiles; qT by words when rows % 4 == 0, by bytes otherwise),
  // 32x32 scalar tiles for the rest.
  const std::pair<int64_t, int64_t> shapes[] = {{37, 50},   {64, 128}, {1, 1000}, {300, 17},
                                                {200, 264}, {130, 136}, {72, 8}};
  for (DType dt : {DType::F32, DType::BF16})
    for (DType qt : {DType::F8E4M3FN, DType::F8E5M2})
      for (Fp8Scaling scaling : {Fp8Scaling::Tensor, Fp8Scaling::Row, Fp8Scaling::Column}) {
        bool perRow = scaling == Fp8Scaling::Row, perCol = scaling == Fp8Scaling::Column;
        int64_t bad = 0;
        for (auto [rows, cols] : shapes)
          for (const char *kind : kinds) {
            std::string what = std::string(dtypeName(dt)) + "->" + dtypeName(qt) +
                               (perRow   ? " per row "
                                : perCol ? " per column "
                                         : " per tensor ") +
                               kind + " " + shapeStr({rows, cols});
            HostTensor x = fp8Input(dt, rows, cols, kind, rng);
            std::vector<HostTensor> ref;
            // Scale grids [1, 1], [rows, 1] or [1, cols].
            int64_t gr = perRow ? rows : 1, gc = perCol ? cols : 1;
            ASSERT_OK(reference("tc.quantize", {x}, {ty(qt, {rows, cols}), ty(DType::F32, {gr, gc})},
                                {{"block", aInts({perRow ? 1 : rows, perCol ? 1 : cols})}}, &ref));
            GpuQuantized g;
            ASSERT_OK(quantizeOnGpu(x, qt, scaling, /*transpose=*/!perRow, stream(), &g));
            bad += mismatches(g.q, ref[0], what + " q");
            bad += mismatches(g.scaleInv, ref[1], what + " scale_inv");
            if (perRow)
              continue;
            // The transposed copy holds q's bytes at [c, r].
            HostTensor wantT = ref[0];
            wantT.type.shape = {cols, rows};
            for (int64_t r = 0; r < rows; ++r)
              for (int64_t c = 0; c < cols; ++c)
                wantT.data[c * rows + r] = ref[0].data[r * cols + c];
            bad += mismatches(g.qT, wantT, what + " q_t");
          }
        // Timing: the quantize of a GPT-2 124M activation [8 x 1024, 768]
        // and of a 1B MLP activation [8 x 1024, 8192] (the amax pass and the
        // quantize pass, with the transposed copy per tensor).
        std::string name = std::string("quantize_fp8 ") + dtypeName(qt) +
                           (perRow ? " row" : perCol ? " column+T" : " tensor+T");
        for (int64_t cols : {768, 8192}) {
          const int64_t rows = 8192;
          DevBuf dx, amax, dq, dqT, ds;
          ASSERT_OK(devZeros(rows * cols * dtypeStorageBytes(dt), &dx, stream()));
          ASSERT_OK(devZeros(fp8QuantizeScratchBytes(std::max(rows, cols)), &amax, stream()));
          ASSERT_OK(devZeros(rows * cols, &dq, stream()));
          ASSERT_OK(devZeros(rows * cols, &dqT, stream()));
          ASSERT_OK(devZeros(4 * std::max(rows, cols), &ds, stream()));
          double us = timeUs(stream(), 20, [&]() -> Status {
            TC_RETURN_IF_ERROR(amaxFp8(dt, dx.p, amax.as<float>(), rows, cols, scaling, stream()));
            return quantizeFp8(dt, dx.p, amax.as<float>(), qt, dq.p, perRow ? nullptr : dqT.p,
                               ds.as<float>(), rows, cols, scaling, stream());
          });
          // The "error" is the count of elements whose bits differ: 0 allowed.
          report(name, dt, static_cast<double>(bad), 0, us, shapeStr({rows, cols}));
        }
        EXPECT_EQ(bad, 0) << name;
      }
}

/// Delayed scaling's quantization as the reference program computes it
/// (tc-quantize-fp8's quantizedDelayed, op by op on the CPU): q =
/// cast(x * scale) saturating, scale_inv = 1 / scale, amax =
/// reduce_max(|x|), saturated = reduce_sum(cast(|x * scale| > fmax)).
void delayedReference(const HostTensor &x, double scale, DType qt, std::vector<HostTensor> *out) {
  const int64_t rows = x.type.shape[0], cols = x.type.shape[1];
  const TensorType full = ty(DType::F32, {rows, cols}), scalar = ty(DType::F32, {});
  auto one = [&](const std::string &op, std::vector<HostTensor> ins, TensorType t,
                 Attrs attrs = {}) {
    std::vector<HostTensor> r;
    EXPECT_OK(reference(op, ins, {t}, std::move(attrs), &r));
    return r.empty() ? HostTensor() : r[0];
  };
  HostTensor xf = x.type.dtype == DType::F32 ? x : one("tc.cast", {x}, full);
  HostTensor s = makeHostTensor(scalar, {scale});
  HostTensor fmax = makeHostTensor(scalar, {qt == DType::F8E5M2 ? 57344.0 : 448.0});
  HostTensor scaled = one("tc.mul", {xf, s}, full);
  out->clear();
  out->push_back(one("tc.cast", {scaled}, ty(qt, {rows, cols}), {{"saturate", aInt(1)}}));
  out->push_back(one("tc.div", {makeHostTensor(scalar, {1.0}), s}, scalar));
  out->push_back(
      one("tc.reduce_max", {one("tc.abs", {xf}, full)}, scalar, {{"axes", aInts({0, 1})}}));
  HostTensor over =
      one("tc.gt", {one("tc.abs", {scaled}, full), fmax}, ty(DType::I1, {rows, cols}));
  out->push_back(
      one("tc.reduce_sum", {one("tc.cast", {over}, full)}, scalar, {{"axes", aInts({0, 1})}}));
}

// quantizeFp8Delayed against delayedReference, bit for bit: q, its
// transposed copy, scale_inv, amax (NaN where x has one) and the saturation
// count; the vector path (cols % 8 == 0, 16-byte rows) and the 32x32 tiles,
// f32 and bf16, both formats, scales that saturate many elements, none, and
// an infinite one. Then the time of a 1B step's [8192, 8192] (x read once,
// q and qT written) beside current scaling's amax + quantize.
TEST_F(CudaFp8, DelayedQuantizeMatchesReference) {
  const char *kinds[] = {"random", "special", "zeros", "nan"};
  const std::pair<int64_t, int64_t> shapes[] = {
      {37, 50}, {64, 128}, {200, 264}, {130, 136}, {1, 8}};
  const double scales[] = {1.0, 200.0, 0.01, 1e30};
  int64_t bad = 0;
  for (DType dt : {DType::F32, DType::BF16})
    for (DType qt : {DType::F8E4M3FN, DType::F8E5M2})
      for (auto [rows, cols] : shapes)
        for (const char *kind : kinds)
          for (double scale : scales) {
            std::string what = std::string(dtypeName(dt)) + "->" + dtypeName(qt) + " " + kind +
                               " " + shapeStr({rows, cols}) + " scale " + std::to_string(scale);
            HostTensor x = fp8Input(dt, rows, cols, kind, rng);
            std::vector<HostTensor> ref;
            delayedReference(x, scale, qt, &ref);
            ASSERT_EQ(ref.size(), 4u);
            DevBuf dx, ds, dq, dqT, dinv, damax, dsat;
            ASSERT_OK(upload(x, &dx, stream()));
            ASSERT_OK(upload(makeHostTensor(ty(DType::F32, {}), {scale}), &ds, stream()));
            ASSERT_OK(devZeros(rows * cols, &dq, stream()));
            ASSERT_OK(devZeros(rows * cols, &dqT, stream()));
            ASSERT_OK(devZeros(4, &dinv, stream()));
            ASSERT_OK(devZeros(4, &damax, stream()));
            ASSERT_OK(devZeros(4, &dsat, stream()));
            ASSERT_OK(quantizeFp8Delayed(dt, dx.p, ds.as<float>(), qt, dq.p, dqT.p,
                                         dinv.as<float>(), damax.as<float>(), dsat.as<float>(),
                                         rows, cols, stream()));
            HostTensor q, qT, inv, amax, sat;
            ASSERT_OK(download(dq.p, ty(qt, {rows, cols}), &q, stream()));
            ASSERT_OK(download(dqT.p, ty(qt, {cols, rows}), &qT, stream()));
            ASSERT_OK(download(dinv.p, ty(DType::F32, {}), &inv, stream()));
            ASSERT_OK(download(damax.p, ty(DType::F32, {}), &amax, stream()));
            ASSERT_OK(download(dsat.p, ty(DType::F32, {}), &sat, stream()));
            bad += mismatches(q, ref[0], what + " q");
            bad += mismatches(qT, transposed(ref[0]), what + " q_t");
            bad += mismatches(inv, ref[1], what + " scale_inv");
            bad += mismatches(amax, ref[2], what + " amax");
            bad += mismatches(sat, ref[3], what + " saturated");
          }
  EXPECT_EQ(bad, 0);
  for (DType dt : {DType::BF16}) {
    const int64_t rows = 8192, cols = 8192;
    DevBuf dx, ds, dq, dqT, dinv, dstat, amax;
    ASSERT_OK(devZeros(rows * cols * dtypeStorageBytes(dt), &dx, stream()));
    ASSERT_OK(upload(makeHostTensor(ty(DType::F32, {}), {1.0}), &ds, stream()));
    ASSERT_OK(devZeros(rows * cols, &dq, stream()));
    ASSERT_OK(devZeros(rows * cols, &dqT, stream()));
    ASSERT_OK(devZeros(16, &dinv, stream()));
    ASSERT_OK(devZeros(16, &dstat, stream()));
    ASSERT_OK(devZeros(fp8QuantizeScratchBytes(1), &amax, stream()));
    double us = timeUs(stream(), 20, [&]() -> Status {
      return quantizeFp8Delayed(dt, dx.p, ds.as<float>(), DType::F8E5M2, dq.p, dqT.p,
                                dinv.as<float>(), dstat.as<float>(), dstat.as<float>() + 1, rows,
                                cols, stream());
    });
    report("quantize_fp8_delayed E5M2 tensor+T", dt, static_cast<double>(bad), 0, us,
           shapeStr({rows, cols}));
    double cur = timeUs(stream(), 20, [&]() -> Status {
      TC_RETURN_IF_ERROR(
          amaxFp8(dt, dx.p, amax.as<float>(), rows, cols, Fp8Scaling::Tensor, stream()));
      return quantizeFp8(dt, dx.p, amax.as<float>(), DType::F8E5M2, dq.p, dqT.p, dinv.as<float>(),
                         rows, cols, Fp8Scaling::Tensor, stream());
    });
    report("quantize_fp8 E5M2 tensor+T (amax pass + quantize)", dt, 0, 0, cur,
           shapeStr({rows, cols}));
  }
}

/// Delayed scaling's bookkeeping as the reference program computes it
/// (tc-quantize-fp8's quantizedDelayed, op by op on the CPU): {next scale,
/// 1 / scale, next history (when `history` has elements)}.
std::vector<HostTensor> scaleUpdateReference(double amax, double scale,
                                             const std::vector<double> &history, double fmax,
                                             bool mostRecent) {
  const TensorType scalar = ty(DType::F32, {}), flag = ty(DType::I1, {});
  auto one = [&](const std::string &op, std::vector<HostTensor> ins, TensorType t,
                 Attrs attrs = {}) {
    std::vector<HostTensor> r;
    EXPECT_OK(reference(op, ins, {t}, std::move(attrs), &r));
    return r.empty() ? HostTensor() : r[0];
  };
  const int64_t len = static_cast<int64_t>(history.size());
  HostTensor a = makeHostTensor(scalar, {amax}), s = makeHostTensor(scalar, {scale});
  HostTensor front = one("tc.reshape", {a}, ty(DType::F32, {1}));
  HostTensor window = front, next;
  if (len > 0) {
    window = one("tc.concat", {front, makeHostTensor(ty(DType::F32, {len}), history)},
                 ty(DType::F32, {len + 1}), {{"axis", aInt(0)}});
    next = one("tc.slice", {window}, ty(DType::F32, {len}),
               {{"starts", aInts({0})}, {"strides", aInts({1})}});
  }
  HostTensor used = mostRecent ? a : one("tc.reduce_max", {window}, scalar, {{"axes", aInts({0})}});
  HostTensor fm = makeHostTensor(scalar, {fmax});
  HostTensor usable = one("tc.and",
                          {one("tc.gt", {used, makeHostTensor(scalar, {0.0})}, flag),
                           one("tc.not", {one("tc.isinf", {used}, flag)}, flag)},
                          flag);
  HostTensor quotient = one("tc.div", {fm, used}, scalar);
  HostTensor capped = one("tc.select",
                          {one("tc.isinf", {quotient}, flag),
                           makeHostTensor(scalar, {static_cast<double>(FLT_MAX)}), quotient},
                          scalar);
  std::vector<HostTensor> out{one("tc.select", {usable, capped, s}, scalar),
                              one("tc.div", {makeHostTensor(scalar, {1.0}), s}, scalar)};
  if (len > 0)
    out.push_back(next);
  return out;
}

// fp8ScaleUpdate against scaleUpdateReference, bit for bit: histories of 0,
// 1, 5, 255-257 (the block's chunks), 1023 and 5000 amaxes; a NaN or an
// inf in the history or as this step's amax, all zeros (the scale kept),
// a subnormal window max (the quotient overflows: the largest f32), negative
// stored values (a hand-edited checkpoint), most_recent, both formats'
// fmax, and every case again in place (next scale and history written over
// scale and history, as the step's memory plan does).
TEST_F(CudaFp8, ScaleUpdateMatchesReference) {
  std::uniform_real_distribution<double> u(0.0, 100.0);
  const int64_t lens[] = {0, 1, 5, 255, 256, 257, 1023, 5000};
  const char *kinds[] = {"random", "nan-history", "nan-amax", "inf", "zeros", "tiny", "negative"};
  int64_t bad = 0, cases = 0;
  for (int64_t len : lens)
    for (const char *kind : kinds)
      for (bool mostRecent : {false, true})
        for (double fmax : {448.0, 57344.0})
          for (bool inPlace : {false, true}) {
            const std::string k = kind;
            std::vector<double> h(static_cast<size_t>(len));
            for (double &v : h)
              v = k == "zeros" ? 0.0 : k == "tiny" ? 1e-41 : u(rng);
            double amax = k == "zeros" ? 0.0 : k == "tiny" ? 2e-42 : u(rng);
            if (k == "nan-amax")
              amax = std::nan("");
            if (len > 0 && k == "nan-history")
              h[static_cast<size_t>(len / 2)] = std::nan("");
            if (len > 0 && k == "inf")
              h[static_cast<size_t>(len - 1)] = INFINITY;
            if (len > 0 && k == "negative")
              for (size_t i = 0; i < h.size(); i += 2)
                h[i] = -h[i] - 1000.0;
            const double scale = k == "tiny" ? 3e38 : 0.75;
            std::string what = k + " len " + std::to_string(len) +
                               (mostRecent ? " most_recent" : "") + " fmax " +
                               std::to_string(fmax) + (inPlace ? " in place" : "");
            std::vector<HostTensor> ref = scaleUpdateReference(amax, scale, h, fmax, mostRecent);
            const TensorType scalar = ty(DType::F32, {});
            DevBuf da, ds, dh, dns, dinv, dnh;
            ASSERT_OK(upload(makeHostTensor(scalar, {amax}), &da, stream()));
            ASSERT_OK(upload(makeHostTensor(scalar, {scale}), &ds, stream()));
            if (len > 0)
              ASSERT_OK(upload(makeHostTensor(ty(DType::F32, {len}), h), &dh, stream()));
            ASSERT_OK(devZeros(4, &dns, stream()));
            ASSERT_OK(devZeros(4, &dinv, stream()));
            ASSERT_OK(devZeros(4 * std::max<int64_t>(len, 1), &dnh, stream()));
            float *nextScale = inPlace ? ds.as<float>() : dns.as<float>();
            float *nextHistory = len == 0 ? nullptr : inPlace ? dh.as<float>() : dnh.as<float>();
            ASSERT_OK(fp8ScaleUpdate(da.as<float>(), ds.as<float>(), len ? dh.as<float>() : nullptr,
                                     len, static_cast<float>(fmax), mostRecent, nextScale,
                                     dinv.as<float>(), nextHistory, stream()));
            HostTensor ns, inv, nh;
            ASSERT_OK(download(nextScale, scalar, &ns, stream()));
            ASSERT_OK(download(dinv.p, scalar, &inv, stream()));
            bad += mismatches(ns, ref[0], what + " next scale");
            bad += mismatches(inv, ref[1], what + " scale_inv");
            if (len > 0) {
              ASSERT_OK(download(nextHistory, ty(DType::F32, {len}), &nh, stream()));
              bad += mismatches(nh, ref[2], what + " next history");
            }
            ++cases;
          }
  EXPECT_EQ(bad, 0);
  report("fp8_scale_update (" + std::to_string(cases) + " cases)", DType::F32,
         static_cast<double>(bad), 0, 0, "history 0..5000");
}

TEST_F(CudaFp8, QuantizeWritesColumnSums) {
  // A bias gradient from the quantize pass (tc-fuse-bias-grad): colSum is
  // tc.reduce_sum over the rows within one rounding (f32 sums of each
  // tile's rows, then the tiles' sums in order: another order than the
  // CPU's double sum), q and scale_inv bit for bit as without it. The 64x128
  // vector tiles (cols % 8 == 0) and the 32x32 scalar ones, partial tiles
  // of both, one row, 4100 rows.
  const std::pair<int64_t, int64_t> shapes[] = {{37, 50},   {64, 128}, {1, 1000},
                                                {300, 17},  {200, 264}, {4100, 72}};
  const DType qt = DType::F8E5M2;
  for (DType dt : {DType::F32, DType::BF16}) {
    std::vector<double> got, want;
    int64_t bad = 0;
    auto run = [&](const void *x, DevBuf &scratch, DevBuf &dq, DevBuf &dqT, DevBuf &ds,
                   DevBuf &dc, int64_t rows, int64_t cols) -> Status {
      float *amax = scratch.as<float>();
      auto *partial = reinterpret_cast<float *>(scratch.as<char>() + fp8QuantizeScratchBytes(1));
      TC_RETURN_IF_ERROR(amaxFp8(dt, x, amax, rows, cols, Fp8Scaling::Tensor, stream()));
      return quantizeFp8(dt, x, amax, qt, dq.p, dqT.p, ds.as<float>(), rows, cols,
                         Fp8Scaling::Tensor, stream(), dc.p, partial);
    };
    auto buffers = [&](int64_t rows, int64_t cols, DevBuf &scratch, DevBuf &dq, DevBuf &dqT,
                       DevBuf &ds, DevBuf &dc) -> Status {
      TC_RETURN_IF_ERROR(devZeros(fp8QuantizeScratchBytes(1) + fp8ColumnSumScratchBytes(rows, cols),
                                  &scratch, stream()));
      TC_RETURN_IF_ERROR(devZeros(rows * cols, &dq, stream()));
      TC_RETURN_IF_ERROR(devZeros(rows * cols, &dqT, stream()));
      TC_RETURN_IF_ERROR(devZeros(4, &ds, stream()));
      return devZeros(cols * dtypeStorageBytes(dt), &dc, stream());
    };
    for (auto [rows, cols] : shapes) {
      std::string what = std::string(dtypeName(dt)) + " column sums " + shapeStr({rows, cols});
      HostTensor x = fp8Input(dt, rows, cols, "random", rng);
      std::vector<HostTensor> ref, sum;
      ASSERT_OK(reference("tc.quantize", {x}, {ty(qt, {rows, cols}), ty(DType::F32, {1, 1})},
                          {{"block", aInts({rows, cols})}}, &ref));
      ASSERT_OK(reference("tc.reduce_sum", {x}, {ty(dt, {cols})}, {{"axes", aInts({0})}}, &sum));
      DevBuf dx, scratch, dq, dqT, ds, dc;
      ASSERT_OK(upload(x, &dx, stream()));
      ASSERT_OK(buffers(rows, cols, scratch, dq, dqT, ds, dc));
      ASSERT_OK(run(dx.p, scratch, dq, dqT, ds, dc, rows, cols));
      HostTensor q, c;
      ASSERT_OK(download(dq.p, ty(qt, {rows, cols}), &q, stream()));
      ASSERT_OK(download(dc.p, ty(dt, {cols}), &c, stream()));
      bad += mismatches(q, ref[0], what + " q");
      // Values, not the tensors' storage bytes (compared as bytes, f32 sums
      // differing in their last bits read as errors of 1.75 on 2026-12-02).
      std::vector<double> g = hostTensorToDoubles(c), w = hostTensorToDoubles(sum[0]);
      got.insert(got.end(), g.begin(), g.end());
      want.insert(want.end(), w.begin(), w.end());
    }
    EXPECT_EQ(bad, 0) << dtypeName(dt);
    // Timed on a 1B step's dY of the MLP's up projection [8 x 1024, 8192]
    // (the amax pass and the quantize pass with qT and the sums; the sums
    // alone were a 1.5 TB/s pass of their own).
    const int64_t rows = 8192, cols = 8192;
    DevBuf dx, scratch, dq, dqT, ds, dc;
    ASSERT_OK(devZeros(rows * cols * dtypeStorageBytes(dt), &dx, stream()));
    ASSERT_OK(buffers(rows, cols, scratch, dq, dqT, ds, dc));
    double us = timeUs(stream(), 20,
                       [&]() { return run(dx.p, scratch, dq, dqT, ds, dc, rows, cols); });
    // One rounding of the result: f32 sums in another order (1e-5), bf16's
    // 2^-8 when the two sums round to neighbouring bf16 values.
    check("quantize_fp8 E5M2 tensor+T+col_sum", dt, got, want, dt == DType::F32 ? 1e-5 : 1e-2, us,
          shapeStr({rows, cols}));
  }
}

TEST_F(CudaFp8, QuantizeRefusesWhatItCannotDo) {
  DevBuf buf;
  ASSERT_OK(devZeros(4096, &buf, stream()));
  float *f = buf.as<float>();
  // A transposed copy with per-row scales, a non-FP8 result, a bad input type.
  EXPECT_FALSE(quantizeFp8(DType::F32, f, f, DType::F8E4M3FN, f, f, f, 4, 4, Fp8Scaling::Row,
                           stream())
                   .isOk());
  EXPECT_FALSE(quantizeFp8(DType::F32, f, f, DType::BF16, f, nullptr, f, 4, 4,
                           Fp8Scaling::Tensor, stream())
                   .isOk());
  EXPECT_FALSE(amaxFp8(DType::I32, f, f, 4, 4, Fp8Scaling::Tensor, stream()).isOk());
  // Column sums with per-row scaling, or without their partials' scratch.
  EXPECT_FALSE(quantizeFp8(DType::F32, f, f, DType::F8E5M2, f, nullptr, f, 4, 4, Fp8Scaling::Row,
                           stream(), f, f)
                   .isOk());
  EXPECT_FALSE(quantizeFp8(DType::F32, f, f, DType::F8E5M2, f, nullptr, f, 4, 4,
                           Fp8Scaling::Tensor, stream(), f, nullptr)
                   .isOk());
}

//===----------------------------------------------------------------------===//
// Matmul::runFp8
//===----------------------------------------------------------------------===//

/// An E4M3 x E4M3 problem in cuBLASLt's TN form: lhs [m, k], rhs [n, k].
MatmulDesc fp8Desc(DType outType, int64_t m, int64_t n, int64_t k) {
  MatmulDesc d;
  d.fp8 = true;
  d.dtype = outType;
  d.transposeRhs = true;
  d.m = m;
  d.n = n;
  d.k = k;
  return d;
}

/// Runs `d` on lhs (its transposed copy with lhsT) and rhs (likewise) and
/// returns out [m, n].
Status fp8Gemm(Matmul &mm, const MatmulDesc &d, const GpuQuantized &lhs, bool lhsT,
               const GpuQuantized &rhs, bool rhsT, cudaStream_t s, HostTensor *out) {
  DevBuf dout;
  TC_RETURN_IF_ERROR(devZeros(d.m * d.n * dtypeStorageBytes(d.dtype), &dout, s));
  TC_RETURN_IF_ERROR(mm.runFp8(d, lhsT ? lhs.dqT.p : lhs.dq.p, lhs.dscale.as<float>(),
                               rhsT ? rhs.dqT.p : rhs.dq.p, rhs.dscale.as<float>(), dout.p, s));
  return download(dout.p, ty(d.dtype, {d.m, d.n}), out, s);
}

TEST_F(CudaFp8, MatmulMatchesScaledMatmulReference) {
  std::unique_ptr<Matmul> mm;
  ASSERT_OK(Matmul::create(&mm));
  const int64_t shapes[][3] = {{64, 128, 256}, {40, 48, 64}, {128, 256, 1024}};
  struct Case {
    const char *name;
    DType out;
    bool fast;
    double tol;
  } cases[] = {{"fp8_gemm", DType::F32, false, 1e-3},
               {"fp8_gemm", DType::BF16, false, 1e-2},
               {"fp8_gemm fast-accum", DType::BF16, true, 2e-2}};
  for (const Case &cs : cases) {
    // fwd: y [M, N] = x [M, K] @ W [N, K]^T; dgrad: dx [M, K] = dy [M, N] @ W
    // (W^T's copy [K, N] as cuBLASLt's A); wgrad: dW [N, K] = dy^T @ x (the
    // copies dy^T [N, M] and x^T [K, M]).
    for (std::string p : {"fwd", "dgrad", "wgrad"}) {
      if (cs.fast && p != "fwd")
        continue; // fast accumulation is for the forward only
      std::vector<double> got, want;
      for (auto [mRows, nOut, kIn] : shapes) {
        if (p == "wgrad" && mRows % 16 != 0)
          continue; // K = M rows: the lowering keeps such a wgrad out of FP8
        HostTensor x = randomTensor(ty(DType::BF16, {mRows, kIn}), rng, -2, 2);
        HostTensor w = randomTensor(ty(DType::BF16, {nOut, kIn}), rng, -0.5, 0.5);
        HostTensor dy = randomTensor(ty(DType::BF16, {mRows, nOut}), rng, -1e-3, 1e-3);
        DType xt = DType::F8E4M3FN, wt = DType::F8E4M3FN, gt = DType::F8E5M2;
        GpuQuantized qx, qw, qdy;
        ASSERT_OK(quantizeOnGpu(x, xt, Fp8Scaling::Tensor, true, stream(), &qx));
        ASSERT_OK(quantizeOnGpu(w, wt, Fp8Scaling::Tensor, true, stream(), &qw));
        ASSERT_OK(quantizeOnGpu(dy, gt, Fp8Scaling::Tensor, true, stream(), &qdy));
        // The reference reads the same operands through tc.scaled_matmul.
        const GpuQuantized *l = p == "fwd" ? &qx : &qdy;
        const GpuQuantized *r = p == "dgrad" ? &qw : p == "wgrad" ? &qx : &qw;
        bool tl = p == "wgrad", tr = p == "fwd";
        int64_t m = p == "wgrad" ? nOut : mRows;
        int64_t n = p == "fwd" ? nOut : kIn;
        int64_t k = p == "fwd" ? kIn : p == "dgrad" ? nOut : mRows;
        std::vector<HostTensor> ref;
        ASSERT_OK(reference("tc.scaled_matmul", {l->q, l->scaleInv, r->q, r->scaleInv},
                            {ty(cs.out, {m, n})},
                            {{"transpose_lhs", aInt(tl)}, {"transpose_rhs", aInt(tr)}}, &ref));
        // cuBLASLt reads lhs [m, k] and rhs [n, k]: the transposed copies
        // where the tc operand is stored the other way.
        HostTensor y;
        MatmulDesc d = fp8Desc(cs.out, m, n, k);
        d.lhsType = l->q.type.dtype;
        d.rhsType = r->q.type.dtype;
        d.fastAccum = cs.fast;
        ASSERT_OK(fp8Gemm(*mm, d, *l, /*lhsT=*/tl, *r, /*rhsT=*/!tr, stream(), &y));
        std::vector<double> g = hostTensorToDoubles(y), wv = hostTensorToDoubles(ref[0]);
        CompareResult c = compare(g, wv);
        EXPECT_LE(c.maxErr, cs.tol) << cs.name << " " << p << " " << m << "x" << n << "x" << k;
        got.insert(got.end(), g.begin(), g.end());
        want.insert(want.end(), wv.begin(), wv.end());
      }
      // Timing: a GPT-2 124M MLP up-projection, [8192, 768] x [3072, 768]^T.
      const int64_t m = 8192, n = 3072, k = 768;
      DevBuf a, b, o, sc;
      ASSERT_OK(devZeros(m * k, &a, stream()));
      ASSERT_OK(devZeros(n * k, &b, stream()));
      ASSERT_OK(devZeros(m * n * dtypeStorageBytes(cs.out), &o, stream()));
      ASSERT_OK(devZeros(256, &sc, stream()));
      MatmulDesc d = fp8Desc(cs.out, m, n, k);
      if (p != "fwd")
        d.lhsType = DType::F8E5M2;
      d.fastAccum = cs.fast;
      double us = timeUs(stream(), 20, [&] {
        return mm->runFp8(d, a.p, sc.as<float>(), b.p, sc.as<float>(), o.p, stream());
      });
      check(std::string(cs.name) + " " + p, cs.out, got, want, cs.tol, us,
            shapeStr({m, n, k}));
    }
  }
}

TEST_F(CudaFp8, MatmulAddsBiasInItsEpilogue) {
  // The forward of a linear layer with its bias (tc-fuse-matmul-epilogue's
  // "bias" on an FP8 GEMM): y = x @ W^T + b, b bf16 [N], added by cuBLASLt
  // in fp32 before y is rounded to bf16; the reference adds b to the f32
  // tc.scaled_matmul. Tolerance as fast accumulation's (2e-2), since forward
  // GEMMs run with it.
  std::unique_ptr<Matmul> mm;
  ASSERT_OK(Matmul::create(&mm));
  std::vector<double> got, want;
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{64, 128, 256}, {40, 48, 64}}) {
    HostTensor x = randomTensor(ty(DType::BF16, {m, k}), rng, -2, 2);
    HostTensor w = randomTensor(ty(DType::BF16, {n, k}), rng, -0.5, 0.5);
    HostTensor b = randomTensor(ty(DType::BF16, {n}), rng, -4, 4);
    GpuQuantized qx, qw;
    ASSERT_OK(quantizeOnGpu(x, DType::F8E4M3FN, Fp8Scaling::Tensor, false, stream(), &qx));
    ASSERT_OK(quantizeOnGpu(w, DType::F8E4M3FN, Fp8Scaling::Tensor, false, stream(), &qw));
    std::vector<HostTensor> ref;
    ASSERT_OK(reference("tc.scaled_matmul", {qx.q, qx.scaleInv, qw.q, qw.scaleInv},
                        {ty(DType::F32, {m, n})}, {{"transpose_rhs", aInt(1)}}, &ref));
    std::vector<double> r = hostTensorToDoubles(ref[0]), bias = hostTensorToDoubles(b);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        r[i * n + j] += bias[j];
    MatmulDesc d = fp8Desc(DType::BF16, m, n, k);
    d.fastAccum = true;
    d.epilogue = MatmulEpilogue::Bias;
    DevBuf db, dout;
    ASSERT_OK(upload(b, &db, stream()));
    ASSERT_OK(devZeros(m * n * 2, &dout, stream()));
    ASSERT_OK(mm->runFp8(d, qx.dq.p, qx.dscale.as<float>(), qw.dq.p, qw.dscale.as<float>(),
                         dout.p, stream(), db.p));
    HostTensor y;
    ASSERT_OK(download(dout.p, ty(DType::BF16, {m, n}), &y, stream()));
    std::vector<double> g = hostTensorToDoubles(y);
    got.insert(got.end(), g.begin(), g.end());
    want.insert(want.end(), r.begin(), r.end());
  }
  // Timing: the 1B step's MLP up-projection with its bias, [8192, 2048] x
  // [8192, 2048]^T.
  const int64_t m = 8192, n = 8192, k = 2048;
  DevBuf a, bw, o, sc, bias;
  ASSERT_OK(devZeros(m * k, &a, stream()));
  ASSERT_OK(devZeros(n * k, &bw, stream()));
  ASSERT_OK(devZeros(m * n * 2, &o, stream()));
  ASSERT_OK(devZeros(256, &sc, stream()));
  ASSERT_OK(devZeros(n * 2, &bias, stream()));
  MatmulDesc d = fp8Desc(DType::BF16, m, n, k);
  d.fastAccum = true;
  d.epilogue = MatmulEpilogue::Bias;
  double us = timeUs(stream(), 20, [&] {
    return mm->runFp8(d, a.p, sc.as<float>(), bw.p, sc.as<float>(), o.p, stream(), bias.p);
  });
  check("fp8_gemm bias epilogue", DType::BF16, got, want, 2e-2, us, shapeStr({m, n, k}));
  // Not with row scales, and not without the bias pointer.
  MatmulDesc e = fp8Desc(DType::BF16, 64, 128, 256);
  e.epilogue = MatmulEpilogue::Bias;
  EXPECT_FALSE(mm->runFp8(e, a.p, sc.as<float>(), bw.p, sc.as<float>(), o.p, stream()).isOk());
  e.rowScales = true;
  EXPECT_FALSE(
      mm->runFp8(e, a.p, sc.as<float>(), bw.p, sc.as<float>(), o.p, stream(), bias.p).isOk());
}

TEST_F(CudaFp8, MatmulRowScalesMatchReferenceWhereCublasLtRunsThem) {
  // x [M, K] and W [N, K] quantized per row (scale grids [M, 1], [N, 1]):
  // cuBLASLt's outer-vector scaling, without fast accumulation. cuBLASLt
  // refuses the heuristic query (CUBLAS_STATUS_INVALID_VALUE) unless the
  // scale pointers are set before it (Matmul::getPlan does): with them, on
  // the H200 (cuBLASLt 13.1, 2026-12-02) both output types ran. What runs
  // must match tc.scaled_matmul of the same operands, what is refused must
  // be refused with a Status (never a crash or a silent result), and the
  // report row says which ran (the "error" column is the worst error of
  // those that ran).
  std::unique_ptr<Matmul> mm;
  ASSERT_OK(Matmul::create(&mm));
  const int64_t shapes[][3] = {{64, 128, 256}, {40, 48, 64}};
  for (DType outType : {DType::BF16, DType::F32}) {
    double worst = 0, tol = outType == DType::BF16 ? 1e-2 : 1e-3;
    int ran = 0, refused = 0;
    for (auto [m, n, k] : shapes) {
      HostTensor x = randomTensor(ty(DType::BF16, {m, k}), rng, -2, 2);
      HostTensor w = randomTensor(ty(DType::BF16, {n, k}), rng, -0.5, 0.5);
      GpuQuantized qx, qw;
      ASSERT_OK(quantizeOnGpu(x, DType::F8E4M3FN, Fp8Scaling::Row, false, stream(), &qx));
      ASSERT_OK(quantizeOnGpu(w, DType::F8E4M3FN, Fp8Scaling::Row, false, stream(), &qw));
      MatmulDesc d = fp8Desc(outType, m, n, k);
      d.rowScales = true;
      HostTensor y;
      Status st = fp8Gemm(*mm, d, qx, false, qw, false, stream(), &y);
      if (!st.isOk()) {
        ++refused;
        continue;
      }
      ++ran;
      std::vector<HostTensor> ref;
      ASSERT_OK(reference("tc.scaled_matmul", {qx.q, qx.scaleInv, qw.q, qw.scaleInv},
                          {ty(outType, {m, n})}, {{"transpose_rhs", aInt(1)}}, &ref));
      CompareResult c = compare(hostTensorToDoubles(y), hostTensorToDoubles(ref[0]));
      EXPECT_LE(c.maxErr, tol) << "row-scaled " << dtypeName(outType) << " " << m << "x" << n
                               << "x" << k;
      worst = std::max(worst, c.maxErr);
    }
    report(std::string("fp8_gemm row scales: ") + std::to_string(ran) + " ran, " +
               std::to_string(refused) + " refused",
           outType, worst, tol, 0, shapeStr({64, 128, 256}));
  }
}

TEST_F(CudaFp8, MatmulRefusesWhatCublasLtCannotDo) {
  std::unique_ptr<Matmul> mm;
  ASSERT_OK(Matmul::create(&mm));
  DevBuf buf;
  ASSERT_OK(devZeros(1 << 16, &buf, stream()));
  float *f = buf.as<float>();
  MatmulDesc d = fp8Desc(DType::BF16, 32, 32, 32);
  ASSERT_OK(mm->runFp8(d, f, f, f, f, f, stream()));
  auto refused = [&](MatmulDesc bad) { return !mm->runFp8(bad, f, f, f, f, f, stream()).isOk(); };
  MatmulDesc e = d;
  e.lhsType = e.rhsType = DType::F8E5M2;
  EXPECT_TRUE(refused(e)) << "E5M2 x E5M2";
  e = d;
  e.transposeRhs = false;
  EXPECT_TRUE(refused(e)) << "not TN";
  e = d;
  e.k = 40;
  EXPECT_TRUE(refused(e)) << "K % 16";
  e = d;
  e.n = 24;
  EXPECT_TRUE(refused(e)) << "N % 16";
  // run() does not take FP8 problems, runFp8 no other.
  EXPECT_FALSE(mm->run(d, f, f, f, stream()).isOk());
  e = d;
  e.fp8 = false;
  EXPECT_TRUE(refused(e));
  e = d;
  e.rowScales = true;
  e.batch = 2;
  EXPECT_TRUE(refused(e)) << "row scales with a batch";
}

//===----------------------------------------------------------------------===//
// The device program: "quantize_fp8" library ops and compute_type "fp8"
// matmuls through the executor (the ABI binder and buildMatmul)
//===----------------------------------------------------------------------===//

TEST_F(CudaFp8, ExecutorRunsFp8LinearForwardAndDgrad) {
  // What tc-lower-to-tcx makes of an FP8 linear layer (test/Conversion/
  // lower_to_tcx_fp8.mlir): y = x @ W^T (fast accumulation) and dx = dY @ W
  // reading W's transposed copy.
  const int64_t M = 48, N = 128, K = 64;
  DeviceFunction f;
  f.name = "step";
  uint64_t arena = 0;
  auto buf = [&](DeviceBuffer::Space s, TensorType t, std::string name, int32_t index) {
    DeviceBuffer b;
    b.space = s;
    b.type = t;
    b.bytes = static_cast<uint64_t>(storageBytes(t));
    if (s == DeviceBuffer::Space::Arena) {
      b.offset = arena;
      arena += (b.bytes + 255) / 256 * 256;
    }
    b.name = std::move(name);
    b.index = index;
    f.buffers.push_back(b);
    return static_cast<int32_t>(f.buffers.size() - 1);
  };
  auto arenaBuf = [&](TensorType t) { return buf(DeviceBuffer::Space::Arena, t, "", -1); };
  const DType e4 = DType::F8E4M3FN, e5 = DType::F8E5M2;
  int32_t x = buf(DeviceBuffer::Space::Input, ty(DType::BF16, {M, K}), "x", 0);
  int32_t w = buf(DeviceBuffer::Space::Input, ty(DType::BF16, {N, K}), "w", 1);
  int32_t dy = buf(DeviceBuffer::Space::Input, ty(DType::BF16, {M, N}), "dy", 2);
  int32_t qx = arenaBuf(ty(e4, {M, K})), sx = arenaBuf(ty(DType::F32, {1, 1}));
  int32_t qw = arenaBuf(ty(e4, {N, K})), sw = arenaBuf(ty(DType::F32, {1, 1}));
  int32_t wT = arenaBuf(ty(e4, {K, N}));
  int32_t qd = arenaBuf(ty(e5, {M, N})), sd = arenaBuf(ty(DType::F32, {1, 1}));
  int32_t scratch[3];
  for (int32_t &sc : scratch)
    sc = arenaBuf(ty(DType::I8, {static_cast<int64_t>(fp8QuantizeScratchBytes(1))}));
  // Results live in the arena and the function's outputs name them, as in
  // the device programs tc-compile writes.
  int32_t y = arenaBuf(ty(DType::BF16, {M, N}));
  int32_t dx = arenaBuf(ty(DType::F32, {M, K}));
  f.arenaBytes = arena;
  auto op = [&](std::string kind, std::string name, std::vector<int32_t> ins,
                std::vector<int32_t> outs, std::map<std::string, Attr> attrs) {
    DeviceOp d;
    d.kind = std::move(kind);
    d.name = std::move(name);
    d.ins = std::move(ins);
    d.outs = std::move(outs);
    d.attrs = std::move(attrs);
    f.ops.push_back(std::move(d));
  };
  op("library", "quantize_fp8", {x}, {qx, sx, scratch[0]}, {{"rows", aInt(M)}, {"cols", aInt(K)}});
  op("library", "quantize_fp8", {w}, {qw, sw, wT, scratch[1]},
     {{"rows", aInt(N)}, {"cols", aInt(K)}, {"has_transpose", aInt(1)}});
  op("library", "quantize_fp8", {dy}, {qd, sd, scratch[2]}, {{"rows", aInt(M)}, {"cols", aInt(N)}});
  op("matmul", "", {qx, qw, sx, sw}, {y},
     {{"m", aInt(M)}, {"n", aInt(N)}, {"k", aInt(K)}, {"transpose_rhs", aInt(1)},
      {"compute_type", aStr("fp8")}, {"fast_accum", aInt(1)}});
  op("matmul", "", {qd, wT, sd, sw}, {dx},
     {{"m", aInt(M)}, {"n", aInt(K)}, {"k", aInt(N)}, {"transpose_rhs", aInt(1)},
      {"compute_type", aStr("fp8")}});
  f.inputNames = {"x", "w", "dy"};
  f.outputNames = {"y", "dx"};
  f.outputs = {y, dx};
  Artifact a;
  a.target = "sm_90";
  a.deviceFunctions.push_back(f);

  HostTensor hx = randomTensor(ty(DType::BF16, {M, K}), rng, -2, 2);
  HostTensor hw = randomTensor(ty(DType::BF16, {N, K}), rng, -0.5, 0.5);
  HostTensor hdy = randomTensor(ty(DType::BF16, {M, N}), rng, -1e-2, 1e-2);
  std::unique_ptr<DeviceExecutor> ex;
  ExecutorOptions opts;
  opts.checkEachOp = true;
  ASSERT_OK(DeviceExecutor::create(&a, opts, &ex));
  std::vector<HostTensor> outs;
  ASSERT_OK(ex->run("step", {hx, hw, hdy}, &outs));
  ASSERT_EQ(outs.size(), 2u);

  auto quantize = [&](const HostTensor &t, DType qt, std::vector<HostTensor> *r) {
    return reference("tc.quantize", {t}, {ty(qt, t.type.shape), ty(DType::F32, {1, 1})},
                     {{"block", aInts(t.type.shape)}}, r);
  };
  std::vector<HostTensor> rx, rw, rd, ry, rdx;
  ASSERT_OK(quantize(hx, e4, &rx));
  ASSERT_OK(quantize(hw, e4, &rw));
  ASSERT_OK(quantize(hdy, e5, &rd));
  ASSERT_OK(reference("tc.scaled_matmul", {rx[0], rx[1], rw[0], rw[1]}, {ty(DType::BF16, {M, N})},
                      {{"transpose_rhs", aInt(1)}}, &ry));
  ASSERT_OK(reference("tc.scaled_matmul", {rd[0], rd[1], rw[0], rw[1]}, {ty(DType::F32, {M, K})},
                      {}, &rdx));
  check("fp8 executor fwd", DType::BF16, hostTensorToDoubles(outs[0]),
        hostTensorToDoubles(ry[0]), 2e-2);
  check("fp8 executor dgrad", DType::F32, hostTensorToDoubles(outs[1]),
        hostTensorToDoubles(rdx[0]), 1e-3);
}

} // namespace
} // namespace tc::rt::cuda
