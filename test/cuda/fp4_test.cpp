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
// "fake_quantize" library op through the CUDA executor's binder.
//
//===----------------------------------------------------------------------===//
#include "test/cuda/cuda_test_util.h"

#include <cfloat>
#include <limits>

#include "runtime/src/cuda/kernels/kernels.h"
#include "runtime/src/cuda/library_calls.h"
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

/// The GPU's y of `x` (stochastic rounding at `step` when `sr`).
Status fakeQuantizeOnGpu(const HostTensor &x, const Fp4Case &c, const Fp4Stochastic *sr,
                         double step, cudaStream_t s, HostTensor *y) {
  const std::vector<int64_t> &shape = x.type.shape;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    if (d < c.axis)
      outer *= shape[d];
    else if (d > c.axis)
      inner *= shape[d];
  DevBuf dx, dy, amax, dstep;
  TC_RETURN_IF_ERROR(upload(x, &dx, s));
  TC_RETURN_IF_ERROR(devZeros(std::max<size_t>(1, x.data.size()), &dy, s));
  TC_RETURN_IF_ERROR(devZeros(fp8QuantizeScratchBytes(1), &amax, s));
  Fp4Stochastic key;
  if (sr) {
    key = *sr;
    TC_RETURN_IF_ERROR(upload(makeHostTensor(ty(DType::F32, {1}), {step}), &dstep, s));
    key.step = dstep.as<float>();
  }
  TC_RETURN_IF_ERROR(fakeQuantizeFp4(x.type.dtype, dx.p, dy.p, amax.as<float>(), outer,
                                     shape[c.axis], inner,
                                     c.mxfp4 ? Fp4Format::Mxfp4 : Fp4Format::Nvfp4, c.blocks2d,
                                     sr ? &key : nullptr, s));
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
          Attrs attrs{{"format", aStr(c.mxfp4 ? "mxfp4" : "nvfp4")},
                      {"axis", aInt(c.axis)},
                      {"blocks2d", aInt(c.blocks2d)}};
          std::vector<HostTensor> ins{x};
          Fp4Stochastic sr;
          sr.seed = 0x9e3779b97f4a7c15ULL; // above 2^63: the i64 attribute's bits
          sr.stream = 12345;
          const double step = 17;
          if (stochastic) {
            attrs["stochastic"] = aInt(1);
            attrs["seed"] = aInt(static_cast<int64_t>(sr.seed));
            attrs["stream"] = aInt(static_cast<int64_t>(sr.stream));
            ins.push_back(makeHostTensor(ty(DType::F32, {}), {step}));
          }
          std::vector<HostTensor> ref;
          ASSERT_OK(reference("tc.fake_quantize", ins, {x.type}, attrs, &ref));
          HostTensor y;
          ASSERT_OK(fakeQuantizeOnGpu(x, c, stochastic ? &sr : nullptr, step, stream(), &y));
          bad += mismatches(y, ref[0], what);
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

} // namespace
} // namespace tc::rt::cuda
