//===- cuda_test_util.h - helpers of the CUDA kernel tests -------*- C++ -*-===//
//
// - CudaTest: a fixture that skips (with requireGpu()'s reason) without a GPU
//   and gives every test its own stream;
// - device buffers (each one DeviceArena), uploads and downloads;
// - random inputs (uniform, never zeros), the CPU reference through
//   tc::rt::runFunction (test/runtime/test_util.h builds the one-op functions);
// - mismatches(): the elements whose bits differ (bit-exact kernels);
// - compare(): max over elements of |got - want| / max(|want|, rms(want)) —
//   relative for elements of typical size, absolute at the tensor's scale for
//   elements near zero (where the fp32 rounding of the terms dominates);
// - report(): one line per check into $TC_CUDA_REPORT (tab-separated: kernel,
//   dtype, max error, tolerance, PASS/FAIL, microseconds per call, timed
//   shape), which scripts/gpu-check.sh turns into its summary table.
//
//===----------------------------------------------------------------------===//
#ifndef TC_TEST_CUDA_CUDA_TEST_UTIL_H
#define TC_TEST_CUDA_CUDA_TEST_UTIL_H

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/src/base/host_tensor.h"
#include "runtime/src/cuda/cublaslt.h"
#include "runtime/src/cuda/device.h"
#include "test/runtime/test_util.h"

#define ASSERT_OK(expr)                                                                            \
  do {                                                                                             \
    ::tc::rt::Status tc_st_ = (expr);                                                              \
    ASSERT_TRUE(tc_st_.isOk()) << #expr << ": " << tc_st_.toString();                              \
  } while (0)
#define EXPECT_OK(expr)                                                                            \
  do {                                                                                             \
    ::tc::rt::Status tc_st_ = (expr);                                                              \
    EXPECT_TRUE(tc_st_.isOk()) << #expr << ": " << tc_st_.toString();                              \
  } while (0)

namespace tc::rt::cuda::test {

using namespace tc::rt::test;

constexpr double kTolF32 = 1e-5;
constexpr double kTolBf16 = 2e-2;
inline double tolFor(DType t) { return t == DType::F32 ? kTolF32 : kTolBf16; }

/// A device buffer: one DeviceArena of exactly `bytes`.
struct DevBuf {
  DeviceArena arena;
  void *p = nullptr;
  size_t bytes = 0;
  template <class T = void> T *as() const { return static_cast<T *>(p); }
};

inline Status devAlloc(size_t bytes, DevBuf *out) {
  TC_RETURN_IF_ERROR(DeviceArena::create(bytes, &out->arena));
  out->p = out->arena.base();
  out->bytes = bytes;
  return Status::ok();
}

inline Status devZeros(size_t bytes, DevBuf *out, cudaStream_t s) {
  TC_RETURN_IF_ERROR(devAlloc(bytes, out));
  return out->arena.zero(0, bytes, s);
}

inline Status upload(const HostTensor &t, DevBuf *out, cudaStream_t s) {
  TC_RETURN_IF_ERROR(devAlloc(t.data.size(), out));
  return copyToDevice(t, out->p, out->bytes, s);
}

inline Status download(const void *p, const TensorType &type, HostTensor *out, cudaStream_t s) {
  return copyToHost(p, type, out, s);
}

/// Uniform random values in [lo, hi], rounded to the tensor's dtype.
inline HostTensor randomTensor(TensorType type, std::mt19937 &rng, double lo = -1.0,
                               double hi = 1.0) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(static_cast<size_t>(type.numElements()));
  for (double &x : v)
    x = d(rng);
  return makeHostTensor(type, v);
}

inline HostTensor randomInts(TensorType type, std::mt19937 &rng, int64_t lo, int64_t hi) {
  std::uniform_int_distribution<int64_t> d(lo, hi);
  std::vector<int64_t> v(static_cast<size_t>(type.numElements()));
  for (int64_t &x : v)
    x = d(rng);
  return makeHostTensorInts(type, v);
}

/// Runs one tc op on the CPU reference executor (in f64 mode: f32 values are
/// kept in double inside the op and rounded once at the end).
inline Status reference(const std::string &op, const std::vector<HostTensor> &ins,
                        std::vector<TensorType> results, Attrs attrs,
                        std::vector<HostTensor> *outs) {
  return tryRunOp(op, ins, std::move(results), std::move(attrs), outs, f64Mode());
}

struct CompareResult {
  double maxErr = 0;
  size_t worst = 0;
  double got = 0, want = 0;
};

inline CompareResult compare(const std::vector<double> &got, const std::vector<double> &want) {
  CompareResult r;
  if (got.size() != want.size()) {
    r.maxErr = INFINITY;
    return r;
  }
  double ss = 0;
  size_t finite = 0;
  for (double w : want)
    if (std::isfinite(w)) {
      ss += w * w;
      ++finite;
    }
  double scale = finite ? std::sqrt(ss / static_cast<double>(finite)) : 1.0;
  if (scale == 0)
    scale = 1.0;
  for (size_t i = 0; i < got.size(); ++i) {
    double g = got[i], w = want[i], e;
    if (std::isnan(w) || std::isnan(g))
      e = std::isnan(w) && std::isnan(g) ? 0.0 : INFINITY;
    else if (std::isinf(w) || std::isinf(g))
      e = g == w ? 0.0 : INFINITY;
    else
      e = std::fabs(g - w) / std::max(std::fabs(w), scale);
    if (i == 0 || e > r.maxErr) {
      r.maxErr = e;
      r.worst = i;
      r.got = g;
      r.want = w;
    }
  }
  return r;
}

/// Appends one line to $TC_CUDA_REPORT (if set) and prints it.
inline void report(const std::string &kernel, DType dt, double maxErr, double tol, double us,
                   const std::string &timedShape) {
  bool pass = maxErr <= tol;
  char time[32] = "-";
  if (us >= 0)
    std::snprintf(time, sizeof time, "%.1f", us);
  char line[512];
  std::snprintf(line, sizeof line, "%s\t%s\t%.3g\t%.0e\t%s\t%s\t%s\n", kernel.c_str(),
                dtypeName(dt), maxErr, tol, pass ? "PASS" : "FAIL", time,
                timedShape.empty() ? "-" : timedShape.c_str());
  std::printf("[report] %s", line);
  if (const char *path = std::getenv("TC_CUDA_REPORT")) {
    if (FILE *f = std::fopen(path, "a")) {
      std::fputs(line, f);
      std::fclose(f);
    }
  }
}

/// Compares, expects within `tol`, and reports.
inline void check(const std::string &kernel, DType dt, const std::vector<double> &got,
                  const std::vector<double> &want, double tol, double us = -1,
                  const std::string &timedShape = "") {
  CompareResult r = compare(got, want);
  EXPECT_LE(r.maxErr, tol) << kernel << " " << dtypeName(dt) << ": element " << r.worst << " got "
                           << r.got << " want " << r.want << " (" << got.size() << " elements)";
  report(kernel, dt, r.maxErr, tol, us, timedShape);
}

/// Microseconds per call of `launch` on `stream` (3 warm-up calls, then
/// `iters` timed back to back between two events). -1 on error.
inline double timeUs(cudaStream_t stream, int iters, const std::function<Status()> &launch) {
  for (int i = 0; i < 3; ++i)
    if (!launch().isOk())
      return -1;
  Event start, end;
  if (!Event::create(&start, true).isOk() || !Event::create(&end, true).isOk())
    return -1;
  if (!start.record(stream).isOk())
    return -1;
  for (int i = 0; i < iters; ++i)
    if (!launch().isOk())
      return -1;
  float ms = 0;
  if (!end.record(stream).isOk() || !end.synchronize().isOk() ||
      !Event::elapsedMs(start, end, &ms).isOk())
    return -1;
  return 1000.0 * ms / iters;
}

/// Skips without a GPU; selects device 0 and gives each test a stream.
class CudaTest : public ::testing::Test {
protected:
  void SetUp() override {
    Status st = requireGpu();
    if (!st.isOk())
      GTEST_SKIP() << st.message();
    ASSERT_OK(selectDevice(0));
    ASSERT_OK(Stream::create(&stream_));
  }
  void TearDown() override {
    if (stream_.get())
      EXPECT_OK(stream_.synchronize());
  }
  cudaStream_t stream() const { return stream_.get(); }
  Status sync() const { return stream_.synchronize(); }

  std::mt19937 rng{1234};
  Stream stream_;
};

/// Elements whose bits differ (NaN matches NaN), with the first one named.
inline int64_t mismatches(const HostTensor &got, const HostTensor &want, const std::string &what) {
  if (got.data.size() != want.data.size()) {
    ADD_FAILURE() << what << ": " << got.data.size() << " bytes, want " << want.data.size();
    return std::max<int64_t>(1, static_cast<int64_t>(want.data.size()));
  }
  std::vector<double> g = hostTensorToDoubles(got), w = hostTensorToDoubles(want);
  int eb = dtypeStorageBytes(want.type.dtype);
  int64_t bad = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (std::isnan(g[i]) && std::isnan(w[i]))
      continue;
    if (std::memcmp(&got.data[i * eb], &want.data[i * eb], eb) == 0)
      continue;
    if (bad++ == 0)
      ADD_FAILURE() << what << ": element " << i << " is " << g[i] << ", want " << w[i];
  }
  return bad;
}

/// The transpose [cols, rows] of a matrix q [rows, cols] of 1-byte elements
/// (an FP8 tensor: the copy a TN-only GEMM reads).
inline HostTensor transposed(const HostTensor &q) {
  int64_t rows = q.type.shape[0], cols = q.type.shape[1];
  HostTensor t = q;
  t.type.shape = {cols, rows};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      t.data[c * rows + r] = q.data[r * cols + c];
  return t;
}

/// One product of a linear layer y = x W^T (x [M, K], W [N, K], dY [M, N])
/// as the FP8 plan writes it, "fwd" x @ W^T, "dgrad" dY @ W or "wgrad"
/// dY^T @ x (tc.scaled_matmul's transposes of the quantized operands), and
/// its TN FP8 GEMM (bf16 out, lhs [m, k], rhs [n, k]: the operands read
/// transposed come from their copies) without scales set.
struct LinearProduct {
  bool transposeLhs = false, transposeRhs = false;
  MatmulDesc gemm;
};
inline LinearProduct linearProduct(const std::string &p, int64_t mRows, int64_t nOut, int64_t kIn,
                                   DType lhsType, DType rhsType) {
  LinearProduct lp;
  lp.transposeLhs = p == "wgrad";
  lp.transposeRhs = p == "fwd";
  MatmulDesc &d = lp.gemm;
  d.fp8 = true;
  d.dtype = DType::BF16;
  d.transposeRhs = true;
  d.m = p == "wgrad" ? nOut : mRows;
  d.n = p == "fwd" ? nOut : kIn;
  d.k = p == "fwd" ? kIn : p == "dgrad" ? nOut : mRows;
  d.lhsType = lhsType;
  d.rhsType = rhsType;
  return lp;
}
/// tc.scaled_matmul (the CPU reference) of the product's quantized
/// operands and their scales in tc's grids: out [m, n] bf16.
inline Status scaledMatmulReference(const LinearProduct &lp, const HostTensor &lq,
                                    const HostTensor &ls, const HostTensor &rq,
                                    const HostTensor &rs, HostTensor *out) {
  std::vector<HostTensor> ref;
  TC_RETURN_IF_ERROR(reference("tc.scaled_matmul", {lq, ls, rq, rs},
                               {ty(DType::BF16, {lp.gemm.m, lp.gemm.n})},
                               {{"transpose_lhs", aInt(lp.transposeLhs)},
                                {"transpose_rhs", aInt(lp.transposeRhs)}},
                               &ref));
  *out = ref[0];
  return Status::ok();
}

inline std::string shapeStr(std::initializer_list<int64_t> dims) {
  std::string s;
  for (int64_t d : dims)
    s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

} // namespace tc::rt::cuda::test

#endif // TC_TEST_CUDA_CUDA_TEST_UTIL_H
