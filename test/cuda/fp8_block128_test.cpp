//===- fp8_block128_test.cpp - --fp8-scaling block128 on the GPU
//------------===//
//
// quantizeFp8Blocks against tc.quantize's CPU reference (pow2_scale, blocks
// 1x128, 128x1 and 128x128, partial edge blocks), bit for bit: every byte of
// q and of the transposed copy, every f32 scale in tc's grid and in the
// layouts cuBLASLt reads (Transformer Engine's GEMM_READY: 1x128 scales
// [ceil(K / 128)][roundup(rows, 4)] with the rows contiguous, 128x128 scales
// [ceil(rows / 128)][roundup(ceil(K / 128), 4)], zero padded).
//
// Then Matmul::runFp8 with block scales (cuBLASLt's VEC128_32F /
// BLK128x128_32F, no fast accumulation, bf16 out) against tc.scaled_matmul
// of the same GPU-quantized operands: the forward x (1x128) @ W (128x128)^T,
// dgrad dY (1x128) @ W (W's transposed copy with its transposed 128x128
// scales), wgrad dY^T @ x (both quantized in 128x1 blocks and read through
// their transposed copies). bf16 results within 1e-2 of max(|want|,
// rms(want)), as fp8_test.cpp's per-tensor GEMMs.
//
//===----------------------------------------------------------------------===//
#include "test/cuda/cuda_test_util.h"

#include <cstring>
#include <limits>

#include "runtime/src/base/float_format.h"
#include "runtime/src/cuda/cublaslt.h"
#include "runtime/src/cuda/kernels/kernels.h"

namespace tc::rt::cuda {
namespace {

using namespace tc::rt::cuda::test;

class CudaFp8Block128 : public CudaTest {};

/// The GPU's quantization of x [rows, cols] in `blocks`.
struct GpuBlocks {
  HostTensor q, qT, scaleInv, gemm, gemmT;
  DevBuf dq, dqT, dscale, dgemm, dgemmT;
};

/// tc's scale grid of x [rows, cols] in `blocks`, and the tc.quantize block.
std::vector<int64_t> blockOf(int64_t rows, int64_t cols, Fp8Blocks b) {
  int64_t br = b == Fp8Blocks::Cols128 ? 1 : std::min<int64_t>(128, rows);
  int64_t bc = b == Fp8Blocks::Rows128 ? 1 : std::min<int64_t>(128, cols);
  return {br, bc};
}

Status quantizeBlocksOnGpu(const HostTensor &x, DType qt, Fp8Blocks b, cudaStream_t s,
                           GpuBlocks *out) {
  int64_t rows = x.type.shape[0], cols = x.type.shape[1];
  std::vector<int64_t> block = blockOf(rows, cols, b);
  int64_t gr = (rows + block[0] - 1) / block[0], gc = (cols + block[1] - 1) / block[1];
  bool transpose = b != Fp8Blocks::Cols128, square = b == Fp8Blocks::Square128;
  int64_t ng = fp8BlockGemmScaleFloats(rows, cols, static_cast<int64_t>(b), false);
  int64_t ngT = square ? fp8BlockGemmScaleFloats(rows, cols, static_cast<int64_t>(b), true) : 1;
  DevBuf dx;
  TC_RETURN_IF_ERROR(upload(x, &dx, s));
  TC_RETURN_IF_ERROR(devZeros(rows * cols, &out->dq, s));
  TC_RETURN_IF_ERROR(devZeros(rows * cols, &out->dqT, s));
  TC_RETURN_IF_ERROR(devZeros(4 * gr * gc, &out->dscale, s));
  // NaN bytes, so that the zero padding is checked too.
  TC_RETURN_IF_ERROR(devZeros(4 * ng, &out->dgemm, s));
  TC_RETURN_IF_ERROR(devZeros(4 * ngT, &out->dgemmT, s));
  TC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out->dgemm.p, 0xff, 4 * ng, s));
  TC_RETURN_IF_ERROR(quantizeFp8Blocks(
      x.type.dtype, dx.p, qt, out->dq.p, transpose ? out->dqT.p : nullptr, out->dscale.as<float>(),
      out->dgemm.as<float>(), square ? out->dgemmT.as<float>() : nullptr, rows, cols, b,
      /*pow2=*/true, s));
  TC_RETURN_IF_ERROR(download(out->dq.p, ty(qt, {rows, cols}), &out->q, s));
  if (transpose)
    TC_RETURN_IF_ERROR(download(out->dqT.p, ty(qt, {cols, rows}), &out->qT, s));
  TC_RETURN_IF_ERROR(download(out->dscale.p, ty(DType::F32, {gr, gc}), &out->scaleInv, s));
  TC_RETURN_IF_ERROR(download(out->dgemm.p, ty(DType::F32, {ng}), &out->gemm, s));
  if (square)
    TC_RETURN_IF_ERROR(download(out->dgemmT.p, ty(DType::F32, {ngT}), &out->gemmT, s));
  return Status::ok();
}

/// Elements whose bits differ (NaN matches NaN), the first one named.
int64_t mismatches(const HostTensor &got, const HostTensor &want, const std::string &what) {
  if (got.data.size() != want.data.size()) {
    ADD_FAILURE() << what << ": " << got.data.size() << " bytes, want " << want.data.size();
    return 1;
  }
  std::vector<double> g = hostTensorToDoubles(got), w = hostTensorToDoubles(want);
  int eb = dtypeStorageBytes(want.type.dtype);
  int64_t bad = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if ((std::isnan(g[i]) && std::isnan(w[i])) ||
        std::memcmp(&got.data[i * eb], &want.data[i * eb], eb) == 0)
      continue;
    if (bad++ == 0)
      ADD_FAILURE() << what << ": element " << i << " is " << g[i] << ", want " << w[i];
  }
  return bad;
}

/// tc's grid [gr, gc] in cuBLASLt's layout: out[i][j] (row pitch ld) =
/// grid[i][j], or grid[j][i] when `transposed`; zero padding.
HostTensor gemmLayout(const HostTensor &grid, bool transposed, int64_t floats) {
  int64_t gr = grid.type.shape[0], gc = grid.type.shape[1];
  int64_t rows = transposed ? gc : gr, cols = transposed ? gr : gc;
  int64_t ld = (cols + 3) / 4 * 4;
  std::vector<double> g = hostTensorToDoubles(grid), out(floats, 0.0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      out[i * ld + j] = transposed ? g[j * gc + i] : g[i * gc + j];
  return makeHostTensor(ty(DType::F32, {floats}), out);
}


TEST_F(CudaFp8Block128, QuantizeMatchesReferenceBitForBit) {
  const double kInf = std::numeric_limits<double>::infinity();
  const std::pair<int64_t, int64_t> shapes[] = {{37, 50}, {130, 300}, {256, 128}, {1, 1000}};
  int64_t bad = 0;
  for (DType dt : {DType::F32, DType::BF16})
    for (DType qt : {DType::F8E4M3FN, DType::F8E5M2})
      for (Fp8Blocks b : {Fp8Blocks::Cols128, Fp8Blocks::Rows128, Fp8Blocks::Square128})
        for (auto [rows, cols] : shapes) {
          std::string what = std::string(dtypeName(dt)) + "->" + dtypeName(qt) + " blocks " +
                             std::to_string(static_cast<int>(b)) + " " + shapeStr({rows, cols});
          HostTensor x = randomTensor(ty(dt, {rows, cols}), rng, -3, 3);
          // Specials: an inf (its block's scale is 1, the rest saturate), a
          // zero 1x128 block (scale 1), a subnormal element.
          std::vector<double> v = hostTensorToDoubles(x);
          v[0] = kInf;
          for (int64_t c = 0; c < std::min<int64_t>(cols, 128); ++c)
            v[(rows - 1) * cols + c] = rows > 1 ? 0.0 : v[c];
          v[v.size() / 2] = 1e-39;
          x = makeHostTensor(x.type, v);
          std::vector<int64_t> block = blockOf(rows, cols, b);
          int64_t gr = (rows + block[0] - 1) / block[0], gc = (cols + block[1] - 1) / block[1];
          std::vector<HostTensor> ref;
          ASSERT_OK(reference("tc.quantize", {x}, {ty(qt, {rows, cols}), ty(DType::F32, {gr, gc})},
                              {{"block", aInts(block)}, {"pow2_scale", aInt(1)}}, &ref));
          GpuBlocks g;
          ASSERT_OK(quantizeBlocksOnGpu(x, qt, b, stream(), &g));
          bad += mismatches(g.q, ref[0], what + " q");
          bad += mismatches(g.scaleInv, ref[1], what + " scale_inv");
          // Cols128's GEMM scales are its grid transposed (K blocks by rows);
          // Rows128's (for q_t) and Square128's (for q) the grid itself.
          bool sq = b == Fp8Blocks::Square128;
          bad += mismatches(
              g.gemm,
              gemmLayout(ref[1], b == Fp8Blocks::Cols128,
                         fp8BlockGemmScaleFloats(rows, cols, static_cast<int64_t>(b), false)),
              what + " scale_gemm");
          if (b != Fp8Blocks::Cols128)
            bad += mismatches(g.qT, transposed(ref[0]), what + " q_t");
          if (sq)
            bad += mismatches(
                g.gemmT,
                gemmLayout(ref[1], true,
                           fp8BlockGemmScaleFloats(rows, cols, static_cast<int64_t>(b), true)),
                what + " scale_gemm_t");
        }
  EXPECT_EQ(bad, 0);
}

TEST_F(CudaFp8Block128, QuantizeRefusesWhatItCannotDo) {
  DevBuf buf;
  ASSERT_OK(devZeros(1 << 16, &buf, stream()));
  float *f = buf.as<float>();
  // 1x128 blocks along the columns have no transposed copy; gemmScaleT is
  // 128x128's; the result must be FP8.
  EXPECT_FALSE(quantizeFp8Blocks(DType::F32, f, DType::F8E4M3FN, f, f, f, f, nullptr, 4, 4,
                                 Fp8Blocks::Cols128, true, stream())
                   .isOk());
  EXPECT_FALSE(quantizeFp8Blocks(DType::F32, f, DType::F8E4M3FN, f, f, f, f, f, 4, 4,
                                 Fp8Blocks::Rows128, true, stream())
                   .isOk());
  EXPECT_FALSE(quantizeFp8Blocks(DType::F32, f, DType::BF16, f, nullptr, f, f, nullptr, 4, 4,
                                 Fp8Blocks::Cols128, true, stream())
                   .isOk());
}

TEST_F(CudaFp8Block128, MatmulMatchesScaledMatmulReference) {
  std::unique_ptr<Matmul> mm;
  ASSERT_OK(Matmul::create(&mm));
  // M x N x K; every wgrad contracts over M, so M is a multiple of 16 and
  // at most 128 or a multiple of 128 (fp8SizeRule), as are N and K.
  const int64_t shapes[][3] = {{128, 256, 512}, {32, 64, 64}, {256, 384, 256}, {384, 128, 1024}};
  std::vector<double> got, want;
  for (std::string p : {"fwd", "dgrad", "wgrad"})
    for (auto [mRows, nOut, kIn] : shapes) {
      HostTensor x = randomTensor(ty(DType::BF16, {mRows, kIn}), rng, -2, 2);
      HostTensor w = randomTensor(ty(DType::BF16, {nOut, kIn}), rng, -0.5, 0.5);
      HostTensor dy = randomTensor(ty(DType::BF16, {mRows, nOut}), rng, -1e-3, 1e-3);
      GpuBlocks l, r;
      const char *reads = "";
      if (p == "fwd") { // x [M, K] @ W [N, K]^T
        ASSERT_OK(quantizeBlocksOnGpu(x, DType::F8E4M3FN, Fp8Blocks::Cols128, stream(), &l));
        ASSERT_OK(quantizeBlocksOnGpu(w, DType::F8E4M3FN, Fp8Blocks::Square128, stream(), &r));
      } else if (p == "dgrad") { // dY [M, N] @ W [N, K]
        ASSERT_OK(quantizeBlocksOnGpu(dy, DType::F8E5M2, Fp8Blocks::Cols128, stream(), &l));
        ASSERT_OK(quantizeBlocksOnGpu(w, DType::F8E4M3FN, Fp8Blocks::Square128, stream(), &r));
        reads = " (W through its copy)";
      } else { // dY^T [N, M] @ x [M, K]
        ASSERT_OK(quantizeBlocksOnGpu(dy, DType::F8E5M2, Fp8Blocks::Rows128, stream(), &l));
        ASSERT_OK(quantizeBlocksOnGpu(x, DType::F8E4M3FN, Fp8Blocks::Rows128, stream(), &r));
        reads = " (both through their copies)";
      }
      LinearProduct lp = linearProduct(p, mRows, nOut, kIn, l.q.type.dtype, r.q.type.dtype);
      HostTensor ref;
      ASSERT_OK(scaledMatmulReference(lp, l.q, l.scaleInv, r.q, r.scaleInv, &ref));
      MatmulDesc d = lp.gemm;
      int64_t m = d.m, n = d.n, k = d.k;
      bool tl = lp.transposeLhs, tr = lp.transposeRhs;
      d.lhsBlocks = Fp8ScaleBlocks::Vec128;
      d.rhsBlocks = p == "wgrad" ? Fp8ScaleBlocks::Vec128 : Fp8ScaleBlocks::Blk128;
      // W's copy reads its transposed 128x128 scales.
      const float *rs = p == "dgrad" ? r.dgemmT.as<float>() : r.dgemm.as<float>();
      DevBuf dout;
      ASSERT_OK(devZeros(m * n * 2, &dout, stream()));
      ASSERT_OK(mm->runFp8(d, tl ? l.dqT.p : l.dq.p, l.dgemm.as<float>(), tr ? r.dq.p : r.dqT.p, rs,
                           dout.p, stream()));
      HostTensor y;
      ASSERT_OK(download(dout.p, ty(DType::BF16, {m, n}), &y, stream()));
      std::vector<double> g = hostTensorToDoubles(y), wv = hostTensorToDoubles(ref);
      CompareResult c = compare(g, wv);
      EXPECT_LE(c.maxErr, 1e-2) << p << reads << " " << m << "x" << n << "x" << k;
      got.insert(got.end(), g.begin(), g.end());
      want.insert(want.end(), wv.begin(), wv.end());
    }
  check("fp8_gemm block128", DType::BF16, got, want, 1e-2);
}

TEST_F(CudaFp8Block128, MatmulRefusesWhatCublasLtCannotDo) {
  std::unique_ptr<Matmul> mm;
  ASSERT_OK(Matmul::create(&mm));
  DevBuf buf;
  ASSERT_OK(devZeros(1 << 16, &buf, stream()));
  float *f = buf.as<float>();
  MatmulDesc d;
  d.fp8 = true;
  d.dtype = DType::BF16;
  d.transposeRhs = true;
  d.m = d.n = d.k = 128;
  d.lhsBlocks = d.rhsBlocks = Fp8ScaleBlocks::Blk128; // no 128x128 x 128x128 algorithm
  EXPECT_FALSE(mm->runFp8(d, f, f, f, f, f, stream()).isOk());
  d.lhsBlocks = Fp8ScaleBlocks::Vec128;
  d.fastAccum = true;
  EXPECT_FALSE(mm->runFp8(d, f, f, f, f, f, stream()).isOk());
  d.fastAccum = false;
  d.dtype = DType::F32;
  EXPECT_FALSE(mm->runFp8(d, f, f, f, f, f, stream()).isOk());
  d.dtype = DType::BF16;
  d.rhsBlocks = Fp8ScaleBlocks::None; // both or neither
  EXPECT_FALSE(mm->runFp8(d, f, f, f, f, f, stream()).isOk());
}

} // namespace
} // namespace tc::rt::cuda
