//===- matmul.cpp - batched matrix product --------------------------------===//
//
// lhs [..., M, K] (or [..., K, M] with transpose_lhs), rhs [..., K, N] (or
// [..., N, K] with transpose_rhs); batch dimensions broadcast. Operands are
// packed row-major when transposed, then multiplied with an i-k-j loop
// (contiguous, vectorisable inner loop) accumulating in double (floats) or
// wrapping int64 (integers).
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <type_traits>

#include "runtime/src/cpu/kernel.h"

namespace tc::rt::cpu {

namespace {

/// Copies the [rows, cols] matrix at `src` (row-major) transposed into `dst`
/// ([cols, rows]), in tiles for cache friendliness.
template <typename T>
void transposeInto(const T *src, int64_t rows, int64_t cols, T *dst) {
  constexpr int64_t kTile = 32;
  for (int64_t i0 = 0; i0 < rows; i0 += kTile)
    for (int64_t j0 = 0; j0 < cols; j0 += kTile)
      for (int64_t i = i0; i < std::min(rows, i0 + kTile); ++i)
        for (int64_t j = j0; j < std::min(cols, j0 + kTile); ++j)
          dst[j * rows + i] = src[i * cols + j];
}

/// C[M, N] = A[M, K] * B[K, N], all row-major; C is overwritten.
void gemm(const double *__restrict a, const double *__restrict b, double *__restrict c,
          int64_t m, int64_t k, int64_t n) {
  for (int64_t i = 0; i < m * n; ++i)
    c[i] = 0;
  constexpr int64_t kBlockK = 128; // keeps a K-panel of B hot across rows
  for (int64_t k0 = 0; k0 < k; k0 += kBlockK) {
    int64_t k1 = std::min(k, k0 + kBlockK);
    for (int64_t i = 0; i < m; ++i) {
      double *__restrict ci = c + i * n;
      const double *ai = a + i * k;
      for (int64_t p = k0; p < k1; ++p) {
        double av = ai[p];
        const double *__restrict bp = b + p * n;
        for (int64_t j = 0; j < n; ++j)
          ci[j] += av * bp[j];
      }
    }
  }
}

void gemmInt(const int64_t *a, const int64_t *b, int64_t *c, int64_t m, int64_t k,
             int64_t n) {
  for (int64_t i = 0; i < m; ++i) {
    uint64_t *ci = reinterpret_cast<uint64_t *>(c + i * n);
    for (int64_t j = 0; j < n; ++j)
      ci[j] = 0;
    for (int64_t p = 0; p < k; ++p) {
      uint64_t av = static_cast<uint64_t>(a[i * k + p]);
      const int64_t *bp = b + p * n;
      for (int64_t j = 0; j < n; ++j)
        ci[j] += av * static_cast<uint64_t>(bp[j]);
    }
  }
}

template <typename T>
void batchedMatmul(KernelContext &c, const std::vector<T> &A, const std::vector<T> &B,
                   std::vector<T> &C, const std::vector<int64_t> &aBatch,
                   const std::vector<int64_t> &bBatch, const std::vector<int64_t> &outBatch,
                   int64_t m, int64_t k, int64_t n, bool ta, bool tb) {
  (void)c;
  if (m == 0 || n == 0)
    return; // an empty result, whatever the batch (2^31 empty products took seconds)
  std::vector<T> packA(ta ? m * k : 0), packB(tb ? k * n : 0);
  std::array<const std::vector<int64_t> *, 2> shapes{&aBatch, &bBatch};
  broadcastLoop<2>(outBatch, shapes, [&](int64_t o, const std::array<int64_t, 2> &off) {
    const T *a = A.data() + off[0] * m * k;
    const T *b = B.data() + off[1] * k * n;
    if (ta) {
      transposeInto(a, k, m, packA.data());
      a = packA.data();
    }
    if (tb) {
      transposeInto(b, n, k, packB.data());
      b = packB.data();
    }
    T *out = C.data() + o * m * n;
    if constexpr (std::is_same_v<T, double>)
      gemm(a, b, out, m, k, n);
    else
      gemmInt(a, b, out, m, k, n);
  });
}

void matmulKernel(KernelContext &c) {
  // A third operand is alpha: one f32 value multiplying the double sums
  // before the result's one rounding.
  bool hasAlpha = c.in.size() == 3;
  c.expectOperands(hasAlpha ? 3 : 2);
  c.expectResults(1);
  const Buffer &a = *c.in[0], &b = *c.in[1];
  Buffer &y = *c.out[0];
  c.expectSameDType(a, b, "operands");
  c.expectSameDType(a, y, "result");
  if (a.rank() < 2 || b.rank() < 2)
    c.fail("operands need rank >= 2, got " + shapeToString(a.shape()) + " and " +
           shapeToString(b.shape()));
  bool ta = c.boolAttr("transpose_lhs", false);
  bool tb = c.boolAttr("transpose_rhs", false);
  int64_t ra = a.rank(), rb = b.rank();
  int64_t m = ta ? a.shape()[ra - 1] : a.shape()[ra - 2];
  int64_t k1 = ta ? a.shape()[ra - 2] : a.shape()[ra - 1];
  int64_t k2 = tb ? b.shape()[rb - 1] : b.shape()[rb - 2];
  int64_t n = tb ? b.shape()[rb - 2] : b.shape()[rb - 1];
  if (k1 != k2)
    c.fail("lhs K " + std::to_string(k1) + " != rhs K " + std::to_string(k2) + " (lhs " +
           shapeToString(a.shape()) + ", rhs " + shapeToString(b.shape()) + ")");
  std::vector<int64_t> aBatch(a.shape().begin(), a.shape().end() - 2);
  std::vector<int64_t> bBatch(b.shape().begin(), b.shape().end() - 2);
  std::vector<int64_t> outBatch = broadcastShape(c, {aBatch, bBatch});
  std::vector<int64_t> outShape = outBatch;
  outShape.push_back(m);
  outShape.push_back(n);
  c.expectShape(y, outShape, "result");
  if (hasAlpha && (!a.isFloat || c.in[2]->size() != 1))
    c.fail("alpha (one value) scales float products only");
  if (a.isFloat) {
    batchedMatmul(c, a.f, b.f, y.f, aBatch, bBatch, outBatch, m, k1, n, ta, tb);
    if (hasAlpha)
      for (double &v : y.f)
        v *= c.in[2]->f[0];
  } else
    batchedMatmul(c, a.i, b.i, y.i, aBatch, bBatch, outBatch, m, k1, n, ta, tb);
}

} // namespace

void registerMatmulKernels(KernelTable &t) { t["tc.matmul"] = matmulKernel; }

} // namespace tc::rt::cpu
