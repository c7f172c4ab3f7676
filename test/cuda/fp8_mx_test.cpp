//===- fp8_mx_test.cpp - --fp8-scaling mxfp8 on the GPU -------------------===//
//
// quantizeMx against tc.quantize's CPU reference (f8E8M0FNU scales, 1x32
// blocks along the columns and 32x1 along the rows, partial edge blocks),
// bit for bit: every byte of q and of the transposed copy, every E8M0 scale
// in tc's grid and in cuBLASLt's VEC32_UE8M0 layout (block_scale_layout.h,
// zero padded), for f32 and bf16 inputs, E4M3 and E5M2, odd row counts,
// column counts that are not multiples of 128 (nor of 8: the element-wise
// path), saturation, NaN, inf (a NaN scale) and all-zero blocks (E8M0's
// 2^-127, byte 0). This kernel builds for sm_90 too, so the H200 runs all
// of it.
//
// Then Matmul::runMxfp8 (cuBLASLt's VEC32_UE8M0 GEMM, sm_100 / sm_120
// only): on a GPU without block-scaled FP8 tensor cores (the H200) it must
// be the clear Unimplemented error naming the GPU, never a crash; where it
// can run, the forward x (1x32) @ W (1x32)^T, dgrad dY (1x32) @ W (W in
// 32x1 blocks, through its copy) and wgrad dY^T @ x (both in 32x1 blocks,
// through their copies) against tc.scaled_matmul of the same GPU-quantized
// operands (bf16 within 1e-2, as fp8_block128_test.cpp).
//
//===----------------------------------------------------------------------===//
#include "test/cuda/cuda_test_util.h"

#include <limits>

#include "runtime/src/cuda/cublaslt.h"
#include "runtime/src/cuda/kernels/kernels.h"
#include "runtime/src/schema/block_scale_layout.h"
#include "runtime/src/schema/library_abi.h"

namespace tc::rt::cuda {
namespace {

using namespace tc::rt::cuda::test;

class CudaFp8Mx : public CudaTest {};

/// The GPU's quantization of x [rows, cols] in 1x32 (or, alongRows, 32x1)
/// blocks, with the transposed copy for 32x1 blocks.
struct GpuMx {
  HostTensor q, qT, scaleInv, gemm;
  DevBuf dq, dqT, dscale, dgemm;
};

/// tc.quantize's block of the same quantization (a dim below 32: one block).
std::vector<int64_t> mxBlockOf(int64_t rows, int64_t cols, bool alongRows) {
  return alongRows ? std::vector<int64_t>{std::min<int64_t>(32, rows), 1}
                   : std::vector<int64_t>{1, std::min<int64_t>(32, cols)};
}

Status quantizeMxOnGpu(const HostTensor &x, DType qt, bool alongRows, cudaStream_t s, GpuMx *out) {
  int64_t rows = x.type.shape[0], cols = x.type.shape[1];
  int64_t gr = alongRows ? (rows + 31) / 32 : rows, gc = alongRows ? cols : (cols + 31) / 32;
  int64_t ng = mxfp8GemmScaleBytes(rows, cols, alongRows);
  DevBuf dx;
  TC_RETURN_IF_ERROR(upload(x, &dx, s));
  TC_RETURN_IF_ERROR(devZeros(rows * cols, &out->dq, s));
  TC_RETURN_IF_ERROR(devZeros(rows * cols, &out->dqT, s));
  TC_RETURN_IF_ERROR(devZeros(gr * gc, &out->dscale, s));
  // NaN bytes, so that the zero padding is checked too.
  TC_RETURN_IF_ERROR(devZeros(ng, &out->dgemm, s));
  TC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out->dgemm.p, 0xff, ng, s));
  TC_RETURN_IF_ERROR(quantizeMx(x.type.dtype, dx.p, qt, out->dq.p, alongRows ? out->dqT.p : nullptr,
                                out->dscale.as<uint8_t>(), out->dgemm.as<uint8_t>(), rows, cols,
                                alongRows, s));
  TC_RETURN_IF_ERROR(download(out->dq.p, ty(qt, {rows, cols}), &out->q, s));
  if (alongRows)
    TC_RETURN_IF_ERROR(download(out->dqT.p, ty(qt, {cols, rows}), &out->qT, s));
  TC_RETURN_IF_ERROR(download(out->dscale.p, ty(DType::F8E8M0FNU, {gr, gc}), &out->scaleInv, s));
  TC_RETURN_IF_ERROR(download(out->dgemm.p, ty(DType::F8E8M0FNU, {ng}), &out->gemm, s));
  return Status::ok();
}

/// tc's E8M0 grid in cuBLASLt's VEC32_UE8M0 layout, computed on the host
/// with the documented offsets: the scale of block (outer o, K block b) at
/// blockScaleOffset(o, b, kBlocks), the padding 0.
HostTensor vec32Layout(const HostTensor &grid, bool alongRows, int64_t bytes) {
  int64_t gr = grid.type.shape[0], gc = grid.type.shape[1];
  int64_t outer = alongRows ? gc : gr, kBlocks = alongRows ? gr : gc;
  HostTensor t;
  t.type = ty(DType::F8E8M0FNU, {bytes});
  t.data.assign(bytes, 0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t b = 0; b < kBlocks; ++b)
      t.data[blockScaleOffset(o, b, kBlocks)] =
          grid.data[alongRows ? b * gc + o : o * gc + b];
  return t;
}

TEST_F(CudaFp8Mx, QuantizeMatchesReferenceBitForBit) {
  const double kInf = std::numeric_limits<double>::infinity();
  const double kNaN = std::numeric_limits<double>::quiet_NaN();
  // Odd rows, cols % 8 != 0 (element-wise loads), cols % 128 != 0, a dim
  // below 32 (one partial block), several 128-row bands of the layout.
  const std::pair<int64_t, int64_t> shapes[] = {{37, 50},  {33, 64}, {130, 300},
                                                {256, 96}, {1, 1000}, {7, 20}, {300, 136}};
  int64_t bad = 0;
  for (DType dt : {DType::F32, DType::BF16})
    for (DType qt : {DType::F8E4M3FN, DType::F8E5M2})
      for (bool alongRows : {false, true})
        for (auto [rows, cols] : shapes) {
          std::string what = std::string(dtypeName(dt)) + "->" + dtypeName(qt) +
                             (alongRows ? " 32x1 " : " 1x32 ") + shapeStr({rows, cols});
          HostTensor x = randomTensor(ty(dt, {rows, cols}), rng, -3, 3);
          // Wide magnitudes (the exponents differ block to block), then
          // specials: an inf (its block's scale is NaN, and every value of
          // it), a NaN element (ignored by the amax, NaN itself), a
          // subnormal, an all-zero block (scale 2^-127), -480 (saturates in
          // E4M3 when it is its block's amax: scale 2^0). Saturation also
          // comes from every block whose amax has a significand above 1.75
          // (x / scale_inv above 448 = 1.75 * 2^8, 57344 = 1.75 * 2^15).
          std::vector<double> v = hostTensorToDoubles(x);
          int64_t n = rows * cols;
          for (int64_t i = 0; i < n; i += 7)
            v[i] *= std::ldexp(1.0, static_cast<int>(i % 41) - 20);
          v[0] = kInf;
          v[n / 2] = 1e-39;
          v[n / 3] = kNaN;
          v[n / 4] = -480.0;
          // The last block of the last row (1x32) / of column 1 (32x1).
          if (alongRows) {
            int64_t c = std::min<int64_t>(1, cols - 1);
            for (int64_t r = (rows - 1) / 32 * 32; r < rows; ++r)
              v[r * cols + c] = 0.0;
          } else {
            for (int64_t c = (cols - 1) / 32 * 32; c < cols; ++c)
              v[(rows - 1) * cols + c] = 0.0;
          }
          x = makeHostTensor(x.type, v);
          std::vector<int64_t> block = mxBlockOf(rows, cols, alongRows);
          int64_t gr = (rows + block[0] - 1) / block[0], gc = (cols + block[1] - 1) / block[1];
          std::vector<HostTensor> ref;
          ASSERT_OK(reference("tc.quantize", {x},
                              {ty(qt, {rows, cols}), ty(DType::F8E8M0FNU, {gr, gc})},
                              {{"block", aInts(block)}}, &ref));
          GpuMx g;
          ASSERT_OK(quantizeMxOnGpu(x, qt, alongRows, stream(), &g));
          bad += mismatches(g.q, ref[0], what + " q");
          bad += mismatches(g.scaleInv, ref[1], what + " scale_inv");
          bad += mismatches(
              g.gemm, vec32Layout(ref[1], alongRows, mxfp8GemmScaleBytes(rows, cols, alongRows)),
              what + " scale_gemm");
          if (alongRows)
            bad += mismatches(g.qT, transposed(ref[0]), what + " q_t");
        }
  EXPECT_EQ(bad, 0);
}

TEST_F(CudaFp8Mx, QuantizeOfZerosIsTheSmallestScale) {
  // An all-zero tensor: every E8M0 scale 2^-127 (byte 0), every q +0.
  HostTensor x = makeHostTensor(ty(DType::BF16, {40, 64}), std::vector<double>(40 * 64, 0.0));
  for (bool alongRows : {false, true}) {
    GpuMx g;
    ASSERT_OK(quantizeMxOnGpu(x, DType::F8E4M3FN, alongRows, stream(), &g));
    for (uint8_t b : g.scaleInv.data)
      EXPECT_EQ(b, 0);
    for (uint8_t b : g.q.data)
      EXPECT_EQ(b, 0);
  }
}

TEST_F(CudaFp8Mx, QuantizeRefusesWhatItCannotDo) {
  DevBuf buf;
  ASSERT_OK(devZeros(1 << 16, &buf, stream()));
  uint8_t *u = buf.as<uint8_t>();
  // 1x32 blocks along the columns have no transposed copy; the result must
  // be FP8; the pointers must be given.
  EXPECT_FALSE(
      quantizeMx(DType::F32, u, DType::F8E4M3FN, u, u, u, u, 4, 64, false, stream()).isOk());
  EXPECT_FALSE(
      quantizeMx(DType::F32, u, DType::BF16, u, nullptr, u, u, 4, 64, false, stream()).isOk());
  EXPECT_FALSE(quantizeMx(DType::F32, u, DType::F8E4M3FN, u, nullptr, u, nullptr, 4, 64, false,
                          stream())
                   .isOk());
}

/// Whether this GPU has block-scaled FP8 tensor cores (sm_100 / sm_120).
bool hasBlockScaledTensorCores() {
  int dev = 0, major = 0;
  return cudaGetDevice(&dev) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
         major >= 10;
}

TEST_F(CudaFp8Mx, MatmulRefusesWhatCublasLtCannotDo) {
  std::unique_ptr<Matmul> mm;
  ASSERT_OK(Matmul::create(&mm));
  DevBuf buf;
  ASSERT_OK(devZeros(1 << 16, &buf, stream()));
  uint8_t *u = buf.as<uint8_t>();
  MatmulDesc d;
  d.fp8 = true;
  d.dtype = DType::BF16;
  d.transposeRhs = true;
  d.m = d.n = d.k = 128;
  d.lhsBlocks = d.rhsBlocks = Fp8ScaleBlocks::Vec32Ue8m0;
  // Forms no block-scaled GEMM takes, on every GPU: InvalidArgument.
  MatmulDesc e = d;
  e.rhsBlocks = Fp8ScaleBlocks::Vec128; // both 1x32 E8M0
  EXPECT_EQ(mm->runMxfp8(e, u, u, u, u, u, stream()).code(), StatusCode::InvalidArgument);
  e = d;
  e.k = 112; // a multiple of 16, not of 32
  EXPECT_EQ(mm->runMxfp8(e, u, u, u, u, u, stream()).code(), StatusCode::InvalidArgument);
  e = d;
  e.fastAccum = true;
  EXPECT_EQ(mm->runMxfp8(e, u, u, u, u, u, stream()).code(), StatusCode::InvalidArgument);
  e = d;
  e.dtype = DType::F32;
  EXPECT_EQ(mm->runMxfp8(e, u, u, u, u, u, stream()).code(), StatusCode::InvalidArgument);
  if (hasBlockScaledTensorCores())
    return;
  // sm_90: cuBLASLt has no VEC32_UE8M0 kernel; the error says so and names
  // the GPU, and nothing is launched.
  Status st = mm->runMxfp8(d, u, u, u, u, u, stream());
  EXPECT_EQ(st.code(), StatusCode::Unimplemented) << st.message();
  EXPECT_NE(st.message().find("VEC32_UE8M0"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("this GPU is sm_"), std::string::npos) << st.message();
  EXPECT_OK(sync());
}

TEST_F(CudaFp8Mx, MatmulMatchesScaledMatmulReference) {
  if (!hasBlockScaledTensorCores()) {
    // The property tells scripts/gpu-check.sh that this skip is the GPU's
    // architecture, not a missing GPU.
    RecordProperty("needs_arch", "sm_100 / sm_120");
    GTEST_SKIP() << "cuBLASLt's VEC32_UE8M0 GEMMs need sm_100 / sm_120 (the refusal is "
                    "MatmulRefusesWhatCublasLtCannotDo)";
  }
  std::unique_ptr<Matmul> mm;
  ASSERT_OK(Matmul::create(&mm));
  // M x N x K: every wgrad contracts over M, so all three are multiples of 32.
  const int64_t shapes[][3] = {{128, 256, 512}, {32, 64, 64}, {96, 160, 224}};
  std::vector<double> got, want;
  for (std::string p : {"fwd", "dgrad", "wgrad"})
    for (auto [mRows, nOut, kIn] : shapes) {
      HostTensor x = randomTensor(ty(DType::BF16, {mRows, kIn}), rng, -2, 2);
      HostTensor w = randomTensor(ty(DType::BF16, {nOut, kIn}), rng, -0.5, 0.5);
      HostTensor dy = randomTensor(ty(DType::BF16, {mRows, nOut}), rng, -1e-3, 1e-3);
      GpuMx l, r;
      if (p == "fwd") { // x [M, K] @ W [N, K]^T
        ASSERT_OK(quantizeMxOnGpu(x, DType::F8E4M3FN, false, stream(), &l));
        ASSERT_OK(quantizeMxOnGpu(w, DType::F8E4M3FN, false, stream(), &r));
      } else if (p == "dgrad") { // dY [M, N] @ W [N, K]: W^T's blocks along N
        ASSERT_OK(quantizeMxOnGpu(dy, DType::F8E5M2, false, stream(), &l));
        ASSERT_OK(quantizeMxOnGpu(w, DType::F8E4M3FN, true, stream(), &r));
      } else { // dY^T [N, M] @ x [M, K]: both blocked along M
        ASSERT_OK(quantizeMxOnGpu(dy, DType::F8E5M2, true, stream(), &l));
        ASSERT_OK(quantizeMxOnGpu(x, DType::F8E4M3FN, true, stream(), &r));
      }
      LinearProduct lp = linearProduct(p, mRows, nOut, kIn, l.q.type.dtype, r.q.type.dtype);
      HostTensor ref;
      ASSERT_OK(scaledMatmulReference(lp, l.q, l.scaleInv, r.q, r.scaleInv, &ref));
      MatmulDesc d = lp.gemm;
      int64_t m = d.m, n = d.n, k = d.k;
      bool tl = lp.transposeLhs, tr = lp.transposeRhs;
      d.lhsBlocks = d.rhsBlocks = Fp8ScaleBlocks::Vec32Ue8m0;
      DevBuf dout;
      ASSERT_OK(devZeros(m * n * 2, &dout, stream()));
      ASSERT_OK(mm->runMxfp8(d, tl ? l.dqT.p : l.dq.p, l.dgemm.as<uint8_t>(),
                             tr ? r.dq.p : r.dqT.p, r.dgemm.as<uint8_t>(), dout.p, stream()));
      HostTensor y;
      ASSERT_OK(download(dout.p, ty(DType::BF16, {m, n}), &y, stream()));
      std::vector<double> g = hostTensorToDoubles(y), wv = hostTensorToDoubles(ref);
      CompareResult c = compare(g, wv);
      EXPECT_LE(c.maxErr, 1e-2) << p << " " << m << "x" << n << "x" << k;
      got.insert(got.end(), g.begin(), g.end());
      want.insert(want.end(), wv.begin(), wv.end());
    }
  check("fp8_gemm mxfp8", DType::BF16, got, want, 1e-2);
}

} // namespace
} // namespace tc::rt::cuda
