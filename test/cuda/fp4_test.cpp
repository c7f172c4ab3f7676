//===- fp4_test.cpp - NVFP4 / MXFP4 fake quantisation on the GPU -------------===//
//
// fakeQuantizeFp4 against tc.fake_quantize's CPU reference, bit for bit
// (a NaN element only needs to be NaN on both sides): nvfp4 in 1x16 and
// 16x16 blocks, mxfp4 in 1x32, f32 and bf16, blocks along the last axis, the
// first and a middle one, partial blocks at the edges, on random data and
// with zeros of both signs, +-inf, NaN, huge values (an amax whose scales
// saturate or underflow), tiny ones (subnormal block scales), all-zero and
// all-NaN tensors; nearest even and stochastic rounding (the same seed,
// stream and step draw the same values on both sides). Then the
// "fake_quantize" library op through the CUDA executor's binder. Then
// quantize_fp4 (fp4_pack.cu): its packed codes and scales dequantised on
// the host give fake_quantize's bits; and fp4_mma_gemm (fp4_gemm.cu) with
// its emulated MMA step against a CPU GEMM (the sm_120a instruction cannot
// run on the H200; its fragment layouts are test/runtime/
// fp4_mma_layout_test.cpp's, its SASS test/codegen/cuobjdump-fp4-mma.test).
//
//===----------------------------------------------------------------------===//
#include "test/cuda/cuda_test_util.h"

#include <cfloat>
#include <limits>
#include <memory>
#include <tuple>

#include "runtime/src/base/fp4_mma_layout.h"
#include "runtime/src/cuda/cublaslt.h"
#include "runtime/src/cuda/kernels/kernels.h"
#include "runtime/src/cuda/library_calls.h"
#include "runtime/src/schema/block_scale_layout.h"
#include "runtime/src/schema/library_abi.h"

namespace tc::rt::cuda {
namespace {

using namespace tc::rt::cuda::test;

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

class CudaFp4 : public CudaTest {};

/// One case: the input's shape, the blocks' axis, the format.
struct Fp4Case {
  std::vector<int64_t> shape;
  int64_t axis;
  bool mxfp4, blocks2d;
};

/// x of `dt`: normal(0, 1) * 10^U(-2, 2) with the special values of `kind`.
HostTensor fp4Input(DType dt, const std::vector<int64_t> &shape, const std::string &kind,
                    std::mt19937 &rng) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::normal_distribution<double> z(0, 1);
  std::uniform_real_distribution<double> e(-2, 2);
  std::uniform_int_distribution<int64_t> pick(0, n - 1);
  std::vector<double> v(static_cast<size_t>(n));
  for (double &x : v) {
    double r = z(rng) * std::pow(10.0, e(rng));
    x = kind == "zeros" ? 0.0 : kind == "nan" ? kNaN : kind == "tiny" ? r * 1e-38
        : kind == "huge" ? r * 1e36 : r;
  }
  if (kind == "special") {
    const double specials[] = {0.0, -0.0, kInf, -kInf, kNaN, 3e38, -1e30, 1e-40, 6.0, -448.0};
    for (double sp : specials)
      for (int rep = 0; rep < 3; ++rep)
        v[pick(rng)] = sp;
  }
  if (kind == "saturate") // one huge element: the other blocks' scales underflow
    v[pick(rng)] = 3e38;
  return makeHostTensor(ty(dt, shape), v);
}

/// The view [outer, len, inner] of case c's x.
void viewOf(const std::vector<int64_t> &shape, int64_t axis, int64_t *outer, int64_t *inner) {
  *outer = *inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    if (d < axis)
      *outer *= shape[d];
    else if (d > axis)
      *inner *= shape[d];
}

/// tc.fake_quantize of x on the CPU reference for case c (stochastic at
/// `step` with sr's seed and stream when `sr`; unscaled, the tensor scale
/// into *tensorScale, when that is given).
Status fakeQuantizeReference(const HostTensor &x, const Fp4Case &c, const Fp4Stochastic *sr,
                             double step, HostTensor *out, HostTensor *tensorScale = nullptr) {
  Attrs attrs{{"format", aStr(c.mxfp4 ? "mxfp4" : "nvfp4")},
              {"axis", aInt(c.axis)},
              {"blocks2d", aInt(c.blocks2d)},
              {"unscaled", aInt(tensorScale != nullptr)}};
  std::vector<HostTensor> ins{x};
  if (sr) {
    attrs["stochastic"] = aInt(1);
    attrs["seed"] = aInt(static_cast<int64_t>(sr->seed));
    attrs["stream"] = aInt(static_cast<int64_t>(sr->stream));
    ins.push_back(makeHostTensor(ty(DType::F32, {}), {step}));
  }
  std::vector<HostTensor> ref;
  std::vector<TensorType> results{x.type};
  if (tensorScale)
    results.push_back(ty(DType::F32, {}));
  TC_RETURN_IF_ERROR(reference("tc.fake_quantize", ins, results, attrs, &ref));
  *out = ref[0];
  if (tensorScale)
    *tensorScale = ref[1];
  return Status::ok();
}

/// sr with its step `step` in *dstep on the device.
Status deviceKey(const Fp4Stochastic &sr, double step, DevBuf *dstep, Fp4Stochastic *key,
                 cudaStream_t s) {
  *key = sr;
  TC_RETURN_IF_ERROR(upload(makeHostTensor(ty(DType::F32, {1}), {step}), dstep, s));
  key->step = dstep->as<float>();
  return Status::ok();
}

/// The GPU's y of `x` (stochastic rounding at `step` when `sr`; unscaled,
/// the tensor scale into *tensorScale, when that is given).
Status fakeQuantizeOnGpu(const HostTensor &x, const Fp4Case &c, const Fp4Stochastic *sr,
                         double step, cudaStream_t s, HostTensor *y,
                         HostTensor *tensorScale = nullptr) {
  const std::vector<int64_t> &shape = x.type.shape;
  int64_t outer, inner;
  viewOf(shape, c.axis, &outer, &inner);
  DevBuf dx, dy, amax, dstep, dts;
  TC_RETURN_IF_ERROR(upload(x, &dx, s));
  TC_RETURN_IF_ERROR(devZeros(std::max<size_t>(1, x.data.size()), &dy, s));
  TC_RETURN_IF_ERROR(devZeros(fp8QuantizeScratchBytes(1), &amax, s));
  TC_RETURN_IF_ERROR(devZeros(4, &dts, s));
  Fp4Stochastic key;
  if (sr)
    TC_RETURN_IF_ERROR(deviceKey(*sr, step, &dstep, &key, s));
  TC_RETURN_IF_ERROR(fakeQuantizeFp4(x.type.dtype, dx.p, dy.p, amax.as<float>(), outer,
                                     shape[c.axis], inner,
                                     c.mxfp4 ? Fp4Format::Mxfp4 : Fp4Format::Nvfp4, c.blocks2d,
                                     sr ? &key : nullptr, s,
                                     tensorScale ? dts.as<float>() : nullptr));
  if (tensorScale)
    TC_RETURN_IF_ERROR(download(dts.p, ty(DType::F32, {}), tensorScale, s));
  return download(dy.p, x.type, y, s);
}

TEST_F(CudaFp4, FakeQuantizeMatchesReferenceBitForBit) {
  const Fp4Case cases[] = {
      {{37, 50}, 1, false, false}, {{50, 37}, 0, false, false}, {{3, 20, 5}, 1, false, false},
      {{1, 1000}, 1, false, false}, {{33, 40}, 0, false, true}, {{40, 33}, 1, false, true},
      {{37, 70}, 1, true, false},  {{70, 37}, 0, true, false},  {{4, 45, 3}, 1, true, false},
  };
  const char *kinds[] = {"random", "special", "saturate", "zeros", "nan", "tiny", "huge"};
  for (DType dt : {DType::F32, DType::BF16})
    for (bool stochastic : {false, true}) {
      int64_t bad = 0;
      for (const Fp4Case &c : cases)
        for (const char *kind : kinds) {
          std::string what = std::string(dtypeName(dt)) + (c.mxfp4 ? " mxfp4" : " nvfp4") +
                             (c.blocks2d ? " 16x16" : "") + (stochastic ? " stochastic " : " ") +
                             kind + " axis " + std::to_string(c.axis);
          HostTensor x = fp4Input(dt, c.shape, kind, rng);
          Fp4Stochastic sr;
          sr.seed = 0x9e3779b97f4a7c15ULL; // above 2^63: the i64 attribute's bits
          sr.stream = 12345;
          const double step = 17;
          HostTensor ref, y;
          ASSERT_OK(fakeQuantizeReference(x, c, stochastic ? &sr : nullptr, step, &ref));
          ASSERT_OK(fakeQuantizeOnGpu(x, c, stochastic ? &sr : nullptr, step, stream(), &y));
          bad += mismatches(y, ref, what);
        }
      // Timing: a GPT-2 124M activation [8 x 1024, 768] in 1x16 blocks.
      const int64_t rows = 8192, cols = 768;
      DevBuf dx, dy, amax, dstep;
      ASSERT_OK(devZeros(rows * cols * dtypeStorageBytes(dt), &dx, stream()));
      ASSERT_OK(devZeros(rows * cols * dtypeStorageBytes(dt), &dy, stream()));
      ASSERT_OK(devZeros(fp8QuantizeScratchBytes(1), &amax, stream()));
      ASSERT_OK(devZeros(4, &dstep, stream()));
      Fp4Stochastic sr;
      sr.step = dstep.as<float>();
      double us = timeUs(stream(), 20, [&]() -> Status {
        return fakeQuantizeFp4(dt, dx.p, dy.p, amax.as<float>(), rows, cols, 1, Fp4Format::Nvfp4,
                               false, stochastic ? &sr : nullptr, stream());
      });
      std::string name = std::string("fake_quantize nvfp4") + (stochastic ? " stochastic" : "");
      // The "error" is the count of elements whose bits differ: 0 allowed.
      report(name, dt, static_cast<double>(bad), 0, us, shapeStr({rows, cols}));
      EXPECT_EQ(bad, 0) << name;
    }
}

// tc-fp4-exact's unscaled form (code x block scale, the tensor scale
// apart): y and the tensor scale bit for bit the CPU reference's.
TEST_F(CudaFp4, UnscaledFakeQuantizeMatchesReferenceBitForBit) {
  const Fp4Case cases[] = {
      {{37, 50}, 1, false, false}, {{50, 37}, 0, false, false}, {{3, 20, 5}, 1, false, false},
      {{33, 40}, 0, false, true},  {{40, 33}, 1, false, true},
  };
  const char *kinds[] = {"random", "special", "saturate", "zeros", "nan", "tiny", "huge"};
  int64_t bad = 0;
  for (DType dt : {DType::F32, DType::BF16})
    for (bool stochastic : {false, true})
      for (const Fp4Case &c : cases)
        for (const char *kind : kinds) {
          std::string what = std::string(dtypeName(dt)) + " unscaled nvfp4" +
                             (c.blocks2d ? " 16x16" : "") + (stochastic ? " stochastic " : " ") +
                             kind + " rank " + std::to_string(c.shape.size()) + " axis " +
                             std::to_string(c.axis);
          HostTensor x = fp4Input(dt, c.shape, kind, rng);
          Fp4Stochastic sr;
          sr.seed = 77;
          sr.stream = 5;
          HostTensor ref, refTs, y, ts;
          ASSERT_OK(fakeQuantizeReference(x, c, stochastic ? &sr : nullptr, 3, &ref, &refTs));
          ASSERT_OK(fakeQuantizeOnGpu(x, c, stochastic ? &sr : nullptr, 3, stream(), &y, &ts));
          bad += mismatches(y, ref, what) + mismatches(ts, refTs, what + " tensor_scale");
        }
  report("fake_quantize nvfp4 unscaled", DType::F32, static_cast<double>(bad), 0, -1, "");
  EXPECT_EQ(bad, 0);
  DevBuf buf;
  ASSERT_OK(devZeros(4096, &buf, stream()));
  float *f = buf.as<float>();
  EXPECT_FALSE(fakeQuantizeFp4(DType::F32, f, f, f, 4, 32, 1, Fp4Format::Mxfp4, false, nullptr,
                               stream(), f)
                   .isOk());
}

// The "fake_quantize" library op as the lowering emits it (test/Conversion/
// lower_to_tcx_fp4.mlir), bound by the CUDA executor's binder from the ABI
// table: x [32, 48] blocked along axis 0 (outer 1, len 32, inner 48), the
// step buffer and the scratch, against the CPU reference.
TEST_F(CudaFp4, LibraryCallMatchesReference) {
  for (bool stochastic : {false, true}) {
    HostTensor x = fp4Input(DType::BF16, {32, 48}, "random", rng);
    HostTensor step = makeHostTensor(ty(DType::F32, {}), {5});
    DevBuf dx, dy, dstep, scratch;
    ASSERT_OK(upload(x, &dx, stream()));
    ASSERT_OK(devZeros(x.data.size(), &dy, stream()));
    ASSERT_OK(upload(step, &dstep, stream()));
    ASSERT_OK(devZeros(fp8QuantizeScratchBytes(1), &scratch, stream()));
    DeviceOp op;
    op.kind = "library";
    op.name = "fake_quantize";
    op.attrs = {{"outer", aInt(1)},  {"len", aInt(32)},      {"inner", aInt(48)},
                {"mxfp4", aInt(0)},  {"blocks2d", aInt(0)},  {"stochastic", aInt(stochastic)},
                {"seed", aInt(-7)},  {"rng_stream", aInt(99)}};
    std::string where = "op 'fake_quantize' #0";
    std::vector<void *> ins{dx.p}, outs{dy.p, scratch.p};
    std::vector<TensorType> inTypes{x.type}, outTypes{x.type, ty(DType::I8, {256})};
    if (stochastic) {
      ins.push_back(dstep.p);
      inTypes.push_back(step.type);
    }
    std::function<Status()> launch;
    bool capturable = false;
    ASSERT_OK(bindLibraryCall({op, where, ins, outs, inTypes, outTypes}, stream(), &launch,
                              &capturable));
    EXPECT_TRUE(capturable) << "the step is read on the device";
    ASSERT_OK(launch());
    HostTensor y;
    ASSERT_OK(download(dy.p, x.type, &y, stream()));
    Attrs attrs{{"format", aStr("nvfp4")}, {"axis", aInt(0)}};
    std::vector<HostTensor> refIns{x};
    if (stochastic) {
      attrs["stochastic"] = aInt(1);
      attrs["seed"] = aInt(-7);
      attrs["stream"] = aInt(99);
      refIns.push_back(step);
    }
    std::vector<HostTensor> ref;
    ASSERT_OK(reference("tc.fake_quantize", refIns, {x.type}, attrs, &ref));
    EXPECT_EQ(mismatches(y, ref[0], stochastic ? "library stochastic" : "library"), 0);
  }
}

TEST_F(CudaFp4, FakeQuantizeRefusesWhatItCannotDo) {
  DevBuf buf;
  ASSERT_OK(devZeros(4096, &buf, stream()));
  float *f = buf.as<float>();
  // 16x16 mxfp4 blocks, a missing amax, a missing step, an integer input.
  EXPECT_FALSE(
      fakeQuantizeFp4(DType::F32, f, f, f, 4, 16, 1, Fp4Format::Mxfp4, true, nullptr, stream())
          .isOk());
  EXPECT_FALSE(fakeQuantizeFp4(DType::F32, f, f, nullptr, 4, 16, 1, Fp4Format::Nvfp4, false,
                               nullptr, stream())
                   .isOk());
  Fp4Stochastic sr;
  EXPECT_FALSE(
      fakeQuantizeFp4(DType::F32, f, f, f, 4, 16, 1, Fp4Format::Nvfp4, false, &sr, stream())
          .isOk());
  EXPECT_FALSE(
      fakeQuantizeFp4(DType::I32, f, f, f, 4, 16, 1, Fp4Format::Nvfp4, false, nullptr, stream())
          .isOk());
}

//===----------------------------------------------------------------------===//
// quantize_fp4: the same quantisation packed for block-scaled GEMMs
//===----------------------------------------------------------------------===//

/// What quantizeFp4Packed wrote, on the host.
struct Packed {
  std::vector<uint8_t> q, scales;
  float tensor = 1.f;
  int64_t rows = 0, len = 0, rowBytes = 0, kBlocks = 0;
};

Status downloadBytes(const DevBuf &b, int64_t n, std::vector<uint8_t> *out, cudaStream_t s) {
  HostTensor t;
  TC_RETURN_IF_ERROR(download(b.p, ty(DType::I8, {n}), &t, s));
  out->assign(t.data.begin(), t.data.end());
  return Status::ok();
}

Status uploadBytes(const std::vector<uint8_t> &bytes, DevBuf *out, cudaStream_t s) {
  TC_RETURN_IF_ERROR(devZeros(std::max<size_t>(bytes.size(), 1), out, s));
  TC_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(out->p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice, s));
  return Status::ok();
}

/// quantizeFp4Packed of x on the GPU, its outputs downloaded.
Status packOnGpu(const HostTensor &x, const Fp4Case &c, const Fp4Stochastic *sr, double step,
                 cudaStream_t s, Packed *out) {
  int64_t outer, inner;
  viewOf(x.type.shape, c.axis, &outer, &inner);
  out->rows = outer * inner;
  out->len = x.type.shape[c.axis];
  out->rowBytes = fp4PackedRowBytes(out->len, c.mxfp4);
  out->kBlocks = (out->len + (c.mxfp4 ? 31 : 15)) / (c.mxfp4 ? 32 : 16);
  int64_t qBytes = out->rows * out->rowBytes;
  int64_t sBytes = fp4ScaleLayoutBytes(out->rows, out->len, c.mxfp4);
  DevBuf dx, dq, ds, dt, amax, dstep;
  TC_RETURN_IF_ERROR(upload(x, &dx, s));
  // Poisoned, so that padding the kernel does not write shows.
  TC_RETURN_IF_ERROR(devZeros(std::max<int64_t>(qBytes, 1), &dq, s));
  TC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dq.p, 0xa5, std::max<int64_t>(qBytes, 1), s));
  TC_RETURN_IF_ERROR(devZeros(std::max<int64_t>(sBytes, 1), &ds, s));
  TC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(ds.p, 0xa5, std::max<int64_t>(sBytes, 1), s));
  TC_RETURN_IF_ERROR(devZeros(4, &dt, s));
  TC_RETURN_IF_ERROR(devZeros(fp8QuantizeScratchBytes(1), &amax, s));
  Fp4Stochastic key;
  if (sr)
    TC_RETURN_IF_ERROR(deviceKey(*sr, step, &dstep, &key, s));
  TC_RETURN_IF_ERROR(quantizeFp4Packed(
      x.type.dtype, dx.p, dq.as<uint8_t>(), ds.as<uint8_t>(), dt.as<float>(), amax.as<float>(),
      outer, out->len, inner, c.mxfp4 ? Fp4Format::Mxfp4 : Fp4Format::Nvfp4, c.blocks2d,
      sr ? &key : nullptr, s));
  TC_RETURN_IF_ERROR(downloadBytes(dq, qBytes, &out->q, s));
  TC_RETURN_IF_ERROR(downloadBytes(ds, sBytes, &out->scales, s));
  HostTensor t;
  TC_RETURN_IF_ERROR(download(dt.p, ty(DType::F32, {1}), &t, s));
  out->tensor = static_cast<float>(hostTensorToDoubles(t)[0]);
  return Status::ok();
}

/// The packed data dequantised on the host into x's layout and type:
/// code x block scale (x tensor scale), exact in double, rounded once. Also
/// counts padding (nibbles past len, scale-layout bytes outside the scale
/// matrix) that is not zero.
HostTensor unpackOnHost(const Packed &p, const HostTensor &x, int64_t axis, bool mxfp4,
                        int64_t *badPadding) {
  int64_t outer, inner;
  viewOf(x.type.shape, axis, &outer, &inner);
  int64_t n = outer * p.len * inner, block = mxfp4 ? 32 : 16;
  std::vector<double> v(static_cast<size_t>(n));
  std::vector<bool> scaleUsed(p.scales.size(), false);
  for (int64_t k = 0; k < n; ++k) {
    int64_t o = k / (p.len * inner), j = k / inner % p.len, i = o * inner + k % inner;
    auto code = static_cast<uint8_t>(p.q[i * p.rowBytes + j / 2] >> (4 * (j & 1)) & 15);
    int64_t so = blockScaleOffset(i, j / block, p.kBlocks);
    scaleUsed[so] = true;
    double q = fp4::e2m1Value(code);
    v[k] = mxfp4 ? q * fp4::e8m0Value(p.scales[so])
                 : q * fp4::e4m3Value(p.scales[so]) * static_cast<double>(p.tensor);
  }
  *badPadding = 0;
  for (int64_t i = 0; i < p.rows; ++i)
    for (int64_t j = p.len; j < p.rowBytes * 2; ++j)
      *badPadding += (p.q[i * p.rowBytes + j / 2] >> (4 * (j & 1)) & 15) != 0;
  for (size_t b = 0; b < p.scales.size(); ++b)
    *badPadding += !scaleUsed[b] && p.scales[b] != 0;
  return makeHostTensor(x.type, v);
}

// Dequantising what quantize_fp4 packed gives tc.fake_quantize's CPU output
// bit for bit: both formats, 1-D and 16x16 blocks, odd sizes, blocks along
// the last axis (a TN operand as it is), the first (its transposed copy) and
// a middle one, the special values, nearest and stochastic rounding.
TEST_F(CudaFp4, PackedQuantizeDequantisesToFakeQuantizeBitForBit) {
  const Fp4Case cases[] = {
      {{37, 50}, 1, false, false}, {{50, 37}, 0, false, false}, {{3, 20, 5}, 1, false, false},
      {{33, 40}, 0, false, true},  {{40, 33}, 1, false, true},  {{37, 70}, 1, true, false},
      {{70, 37}, 0, true, false},  {{4, 45, 3}, 1, true, false}, {{130, 96}, 1, true, false},
  };
  const char *kinds[] = {"random", "special", "zeros", "nan", "tiny", "huge"};
  int64_t bad = 0, badPadding = 0;
  for (DType dt : {DType::F32, DType::BF16})
    for (bool stochastic : {false, true})
      for (const Fp4Case &c : cases)
        for (const char *kind : kinds) {
          std::string what = std::string("quantize_fp4 ") + dtypeName(dt) +
                             (c.mxfp4 ? " mxfp4" : " nvfp4") + (c.blocks2d ? " 16x16" : "") +
                             (stochastic ? " stochastic " : " ") + kind + " axis " +
                             std::to_string(c.axis);
          HostTensor x = fp4Input(dt, c.shape, kind, rng);
          Fp4Stochastic sr;
          sr.seed = 77;
          sr.stream = 4242;
          const double step = 3;
          HostTensor ref;
          ASSERT_OK(fakeQuantizeReference(x, c, stochastic ? &sr : nullptr, step, &ref));
          Packed p;
          ASSERT_OK(packOnGpu(x, c, stochastic ? &sr : nullptr, step, stream(), &p));
          int64_t pad = 0;
          bad += mismatches(unpackOnHost(p, x, c.axis, c.mxfp4, &pad), ref, what);
          EXPECT_EQ(pad, 0) << what << ": nonzero padding";
          badPadding += pad;
        }
  report("quantize_fp4 (packed == fake_quantize)", DType::BF16, static_cast<double>(bad + badPadding),
         0, 0, "");
  EXPECT_EQ(bad, 0);
}

// The call as the ABI table lays it out (has_tensor_scale: nvfp4's f32).
TEST_F(CudaFp4, PackedQuantizeLibraryCall) {
  HostTensor x = fp4Input(DType::BF16, {20, 48}, "random", rng);
  int64_t qBytes = 20 * fp4PackedRowBytes(48, false), sBytes = fp4ScaleLayoutBytes(20, 48, false);
  DevBuf dx, dq, ds, dt, scratch;
  ASSERT_OK(upload(x, &dx, stream()));
  ASSERT_OK(devZeros(qBytes, &dq, stream()));
  ASSERT_OK(devZeros(sBytes, &ds, stream()));
  ASSERT_OK(devZeros(4, &dt, stream()));
  ASSERT_OK(devZeros(fp8QuantizeScratchBytes(1), &scratch, stream()));
  DeviceOp op;
  op.kind = "library";
  op.name = "quantize_fp4";
  op.attrs = {{"outer", aInt(20)}, {"len", aInt(48)}, {"inner", aInt(1)},
              {"has_tensor_scale", aInt(1)}};
  std::string where = "op 'quantize_fp4' #0";
  std::vector<void *> ins{dx.p}, outs{dq.p, ds.p, dt.p, scratch.p};
  std::vector<TensorType> inTypes{x.type},
      outTypes{ty(DType::I8, {qBytes}), ty(DType::I8, {sBytes}), ty(DType::F32, {1}),
               ty(DType::I8, {256})};
  std::function<Status()> launch;
  bool capturable = false;
  ASSERT_OK(bindLibraryCall({op, where, ins, outs, inTypes, outTypes}, stream(), &launch,
                            &capturable));
  ASSERT_OK(launch());
  Packed p;
  p.rows = 20;
  p.len = 48;
  p.rowBytes = fp4PackedRowBytes(48, false);
  p.kBlocks = 3;
  ASSERT_OK(downloadBytes(dq, qBytes, &p.q, stream()));
  ASSERT_OK(downloadBytes(ds, sBytes, &p.scales, stream()));
  HostTensor t;
  ASSERT_OK(download(dt.p, ty(DType::F32, {1}), &t, stream()));
  p.tensor = static_cast<float>(hostTensorToDoubles(t)[0]);
  HostTensor ref;
  ASSERT_OK(fakeQuantizeReference(x, {{20, 48}, 1, false, false}, nullptr, 0, &ref));
  int64_t pad = 0;
  EXPECT_EQ(mismatches(unpackOnHost(p, x, 1, false, &pad), ref, "library quantize_fp4"), 0);
  EXPECT_EQ(pad, 0);
}

//===----------------------------------------------------------------------===//
// fp4_mma_gemm: the sm_120a kernel's tile loop with the emulated MMA step
//===----------------------------------------------------------------------===//

/// alpha * fq(a) fq(b)^T in double on the CPU, a [m, k] along its axis 1, b
/// [n, k] along axis 1 or [k, n] along axis 0 (the product's K either way).
Status referenceGemm(const HostTensor &a, const Fp4Case &ca, const HostTensor &b,
                     const Fp4Case &cb, double alpha, std::vector<double> *want) {
  // Dequantised in f32: nvfp4's f32 tensor scale times an e2m1 x e4m3 value
  // is not a bf16 value, and the GEMM applies it exactly (in alpha), so
  // fake_quantize's bf16 result would be the inexact side (up to half a
  // bf16 ulp per operand). The bf16 inputs are exact in f32: the same blocks
  // and codes.
  auto asF32 = [](const HostTensor &x) {
    return makeHostTensor(ty(DType::F32, x.type.shape), hostTensorToDoubles(x));
  };
  HostTensor ra, rb;
  TC_RETURN_IF_ERROR(fakeQuantizeReference(asF32(a), ca, nullptr, 0, &ra));
  TC_RETURN_IF_ERROR(fakeQuantizeReference(asF32(b), cb, nullptr, 0, &rb));
  std::vector<double> av = hostTensorToDoubles(ra), bv = hostTensorToDoubles(rb);
  int64_t m = a.type.shape[0], k = a.type.shape[1];
  bool kn = cb.axis == 0;
  int64_t n = b.type.shape[kn ? 1 : 0];
  want->assign(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t kk = 0; kk < k; ++kk)
        acc += av[i * k + kk] * (kn ? bv[kk * n + j] : bv[j * k + kk]);
      (*want)[i * n + j] = alpha * acc;
    }
  return Status::ok();
}

// d = alpha a b^T of mxfp4 (and nvfp4: E4M3 1x16 scales, a 16x16-blocked
// b, alpha times the tensor scales) operands through the kernel's loads,
// fragment layouts and scale selectors, each MMA step emulated (what runs
// where sm_120a is not), against the CPU GEMM (in double) of fake_quantize's
// dequantised operands: odd M and N, K not a multiple of the scale word's
// 128 / 64 (a partial step), b as it is ([N, K] along K) and as the
// transposed copy of a [K, N] tensor (packed along its axis 0). Within fp32
// accumulation + bf16 rounding (the emulation sums in its own order, as the
// tensor cores do in theirs). The instruction itself (Sm120Mma) is
// Unimplemented here.
TEST_F(CudaFp4, MmaGemmEmulatedMatchesReference) {
  const double alpha = 0.75;
  for (bool nv : {false, true})
    for (int64_t k : {96, 160, 256})
      for (bool transposedB : {false, true}) {
        const int64_t m = 37, n = 45;
        HostTensor a = fp4Input(DType::BF16, {m, k}, "random", rng);
        HostTensor b = fp4Input(DType::BF16, transposedB ? std::vector<int64_t>{k, n}
                                                         : std::vector<int64_t>{n, k},
                                "random", rng);
        Fp4Case ca{{m, k}, 1, !nv, false}, cb{b.type.shape, transposedB ? 0 : 1, !nv, nv};
        float tensorScales = 1.f;
        auto onGpu = [&](const HostTensor &x, const Fp4Case &c, DevBuf *q, DevBuf *s) -> Status {
          Packed p;
          TC_RETURN_IF_ERROR(packOnGpu(x, c, nullptr, 0, stream(), &p));
          tensorScales *= p.tensor;
          TC_RETURN_IF_ERROR(uploadBytes(p.q, q, stream()));
          return uploadBytes(p.scales, s, stream());
        };
        DevBuf qa, sa, qb, sb, dalpha, dd;
        ASSERT_OK(onGpu(a, ca, &qa, &sa));
        ASSERT_OK(onGpu(b, cb, &qb, &sb));
        double gpuAlpha = alpha * (nv ? tensorScales : 1.f);
        ASSERT_OK(upload(makeHostTensor(ty(DType::F32, {1}), {gpuAlpha}), &dalpha, stream()));
        ASSERT_OK(devZeros(m * n * 2, &dd, stream()));
        ASSERT_OK(fp4MmaGemm(qa.as<uint8_t>(), sa.as<uint8_t>(), qb.as<uint8_t>(),
                             sb.as<uint8_t>(), dalpha.as<float>(), dd.p, m, n, k, nv, true,
                             stream()));
        HostTensor d;
        ASSERT_OK(download(dd.p, ty(DType::BF16, {m, n}), &d, stream()));
        std::vector<double> want;
        ASSERT_OK(referenceGemm(a, ca, b, cb, alpha, &want));
        CompareResult r = compare(hostTensorToDoubles(d), want);
        std::string name = std::string("fp4_mma_gemm emulated ") + (nv ? "nvfp4" : "mxfp4") +
                           " k" + std::to_string(k) + (transposedB ? " b^T copy" : "");
        report(name, DType::BF16, r.maxErr, 1e-2, 0, shapeStr({m, n, k}));
        EXPECT_LT(r.maxErr, 1e-2) << name << ": element " << r.worst << " is " << r.got
                                  << ", want " << r.want;
      }
}

TEST_F(CudaFp4, MmaGemmRefusesWhatItCannotDo) {
  DevBuf buf;
  ASSERT_OK(devZeros(4096, &buf, stream()));
  auto *u = buf.as<uint8_t>();
  auto *f = buf.as<float>();
  EXPECT_FALSE(fp4MmaGemm(u, u, u, u, f, buf.p, 16, 8, 48, false, true, stream()).isOk())
      << "K % 32";
  EXPECT_FALSE(fp4MmaGemm(u, u, u, u, f, buf.p, 16, 8, 40, true, true, stream()).isOk())
      << "K % 16";
  EXPECT_FALSE(fp4MmaGemm(u, nullptr, u, u, f, buf.p, 16, 8, 64, false, true, stream()).isOk());
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  if (major != 12) { // the instruction exists in the sm_120a code only
    Status st = fp4MmaGemm(u, u, u, u, f, buf.p, 16, 8, 64, false, false, stream());
    EXPECT_FALSE(st.isOk());
    EXPECT_NE(st.message().find("sm_120a"), std::string::npos) << st.message();
  }
}

// cuBLASLt's NVFP4 GEMM (Matmul::runNvfp4) on quantize_fp4's operands: on
// an sm_120-class GPU against a CPU GEMM of fake_quantize's operands (never
// run yet); elsewhere (the H200) an error naming the NVFP4 problem, not a
// silent bf16 GEMM.
TEST_F(CudaFp4, Nvfp4CublasLtGemm) {
  const int64_t m = 40, n = 48, k = 96;
  HostTensor a = fp4Input(DType::BF16, {m, k}, "random", rng);
  HostTensor b = fp4Input(DType::BF16, {n, k}, "random", rng);
  Fp4Case ca{{m, k}, 1, false, false}, cb{{n, k}, 1, false, true};
  DevBuf qa, sa, ta, qb, sb, tb, scalars, dd;
  for (auto [x, c, q, s, t] : {std::tuple{&a, &ca, &qa, &sa, &ta}, std::tuple{&b, &cb, &qb, &sb, &tb}}) {
    Packed p;
    ASSERT_OK(packOnGpu(*x, *c, nullptr, 0, stream(), &p));
    ASSERT_OK(uploadBytes(p.q, q, stream()));
    ASSERT_OK(uploadBytes(p.scales, s, stream()));
    ASSERT_OK(upload(makeHostTensor(ty(DType::F32, {1}), {p.tensor}), t, stream()));
  }
  ASSERT_OK(devZeros(256, &scalars, stream()));
  ASSERT_OK(devZeros(m * n * 2, &dd, stream()));
  std::unique_ptr<Matmul> mm;
  ASSERT_OK(Matmul::create(&mm));
  Matmul::Nvfp4Gemm g;
  g.lhs = qa.p;
  g.lhsScales = sa.as<uint8_t>();
  g.lhsTensorScale = ta.as<float>();
  g.rhs = qb.p;
  g.rhsScales = sb.as<uint8_t>();
  g.rhsTensorScale = tb.as<float>();
  g.scalars = scalars.as<float>();
  g.out = dd.p;
  g.m = m;
  g.n = n;
  g.k = k;
  Status st = mm->runNvfp4(g, stream());
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  if (major < 10) {
    EXPECT_FALSE(st.isOk()) << "cuBLASLt has FP4 kernels on Blackwell only";
    EXPECT_NE(st.message().find("nvfp4"), std::string::npos) << st.message();
    return;
  }
  ASSERT_OK(st);
  HostTensor d;
  ASSERT_OK(download(dd.p, ty(DType::BF16, {m, n}), &d, stream()));
  std::vector<double> want;
  ASSERT_OK(referenceGemm(a, ca, b, cb, 1.0, &want));
  CompareResult r = compare(hostTensorToDoubles(d), want);
  report("nvfp4 cuBLASLt GEMM", DType::BF16, r.maxErr, 1e-2, 0, shapeStr({m, n, k}));
  EXPECT_LT(r.maxErr, 1e-2);
}

} // namespace
} // namespace tc::rt::cuda
