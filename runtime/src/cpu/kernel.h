//===- kernel.h - what CPU reference kernels see ----------------*- C++ -*-===//
//
// Internal to runtime/src/cpu. A kernel reads its operands (Buffers in
// double or int64) and fills its pre-allocated results; the executor then
// rounds the results to their declared types. Kernels report errors by
// calling KernelContext::fail, which throws a KernelError that the executor
// turns into a Status naming the op (exceptions never leave the executor).
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_CPU_KERNEL_H
#define TC_RUNTIME_CPU_KERNEL_H

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/src/base/host_tensor.h"
#include "runtime/src/schema/program.h"
#include "runtime/src/base/status.h"
#include "runtime/src/cpu/executor.h"

namespace tc::rt::cpu {

/// A tensor being computed on: floats as double, integers (and i1) as int64
/// (ui64 as its bit pattern).
struct Buffer {
  TensorType type;
  bool isFloat = true;
  std::vector<double> f;
  std::vector<int64_t> i;

  int64_t size() const { return isFloat ? (int64_t)f.size() : (int64_t)i.size(); }
  const std::vector<int64_t> &shape() const { return type.shape; }
  int64_t rank() const { return (int64_t)type.shape.size(); }
  DType dtype() const { return type.dtype; }
  /// Element k as double (integers converted; ui64 unsigned).
  double asDouble(int64_t k) const {
    if (isFloat)
      return f[k];
    if (type.dtype == DType::U64)
      return static_cast<double>(static_cast<uint64_t>(i[k]));
    return static_cast<double>(i[k]);
  }
};

/// Allocates a zeroed buffer of `type`.
Buffer makeBuffer(const TensorType &type);
/// Decodes storage-format bytes (numElements of `type`) into a Buffer.
Buffer decodeBuffer(const TensorType &type, const uint8_t *data);
/// Encodes a Buffer into a HostTensor of its type.
HostTensor encodeBuffer(const Buffer &b);

struct KernelError {
  StatusCode code;
  std::string message;
};

class KernelContext {
public:
  KernelContext(const Op &op, const Function &fn, const Artifact &artifact,
                const ExecOptions &opts,
                const std::map<std::string, HostTensor> *overrides)
      : op(op), fn(fn), artifact(artifact), opts(opts), overrides(overrides) {}

  const Op &op;
  const Function &fn;
  const Artifact &artifact;
  const ExecOptions &opts;
  const std::map<std::string, HostTensor> *overrides;
  std::vector<const Buffer *> in;
  std::vector<Buffer *> out;

  [[noreturn]] void fail(const std::string &msg,
                         StatusCode code = StatusCode::InvalidArgument) const {
    throw KernelError{code, msg};
  }

  // Operand/result counts.
  void expectOperands(size_t n) const { expectOperands(n, n); }
  void expectOperands(size_t lo, size_t hi) const;
  void expectResults(size_t n) const;

  // Attributes by ODS name. The one-argument forms require the attribute.
  const Attr *findAttr(const char *name) const;
  int64_t intAttr(const char *name) const;
  int64_t intAttr(const char *name, int64_t dflt) const;
  bool boolAttr(const char *name, bool dflt) const { return intAttr(name, dflt) != 0; }
  double floatAttr(const char *name) const;
  double floatAttr(const char *name, double dflt) const;
  std::string strAttr(const char *name, const std::string &dflt) const;
  const std::vector<int64_t> &intsAttr(const char *name) const;

  /// The operands of an op with optional operands ("operand_present"):
  /// returns one pointer per ODS operand, nullptr for the absent ones.
  std::vector<const Buffer *> optionalOperands(size_t odsCount) const;

  /// An axis attribute checked against `rank` (negative counts from the end).
  int64_t axisAttr(const char *name, int64_t rank) const;

  // Checks with uniform messages.
  void expectFloat(const Buffer &b, const char *what) const;
  void expectInteger(const Buffer &b, const char *what) const;
  void expectSameDType(const Buffer &a, const Buffer &b, const char *what) const;
  void expectShape(const Buffer &b, const std::vector<int64_t> &shape,
                   const char *what) const;

  /// "%3" for messages.
  std::string resultName(size_t k = 0) const;
};

using KernelFn = void (*)(KernelContext &);
using KernelTable = std::unordered_map<std::string, KernelFn>;

// One registration function per op family (one .cpp each).
void registerLeafKernels(KernelTable &t);        // leaf.cpp
void registerElementwiseKernels(KernelTable &t); // elementwise.cpp
void registerReduceKernels(KernelTable &t);      // reduce.cpp
void registerNormKernels(KernelTable &t);        // norm.cpp
void registerAttentionKernels(KernelTable &t);   // attention.cpp
void registerRotaryKernels(KernelTable &t);      // rotary.cpp
void registerQuantizeKernels(KernelTable &t);    // quantize.cpp
void registerLossKernels(KernelTable &t);        // loss.cpp
void registerMatmulKernels(KernelTable &t);      // matmul.cpp
void registerShapeKernels(KernelTable &t);       // shape.cpp
void registerGradKernels(KernelTable &t);        // grad.cpp

/// The scaled narrow formats' arithmetic (quantize.cpp), shared with the
/// tests that pin it: Transformer Engine's f32 scale from an amax for a
/// format whose largest value is `fmax`; `x` rounded into narrow format `t`
/// as the GPU's saturating conversion does it (+-inf to +-max, NaN kept);
/// OCP MX's E8M0 block scale for an amax.
float currentScale(float amax, float fmax);
double saturatingRound(double x, DType t);
/// Transformer Engine's power-of-two rounding of a current-scaling scale
/// (compute_scale_from_amax with force_pow_2_scales): the f32 bits of `s`
/// with the mantissa cleared.
float pow2Scale(float s);
double mxScaleInv(float amax, DType element);

/// E2M1 rounding of `v` (a value already divided by its scales): nearest
/// even with saturation at +-6 (inf too; NaN gives +6, as f4E2M1FN's
/// conversion does) when `uniform` is null; otherwise stochastic rounding
/// with the draw *uniform in [0, 1): |v| between neighbours lo < hi rounds
/// up when *uniform < (|v| - lo) / (hi - lo) (exact: the E2M1 steps are
/// powers of two), so that the expected value is v within [-6, 6].
double roundE2M1(double v, const double *uniform = nullptr);

/// The draws in [0, 1) of stochastic rounding for elements 0..n-1 of a
/// tensor at training step `step`: init_rng.h's counter-based uniform01
/// keyed on (seed, mix64(stream + step * kGamma), element index), so that
/// a GPU kernel computes the same draw for an element from its index alone.
std::vector<double> stochasticDraws(uint64_t seed, uint64_t stream, uint64_t step, int64_t n);

/// A 2-D tensor in NVIDIA's NVFP4: E2M1 values, one E4M3 decode scale per
/// block (1x16 along a row, or 16x16 for weights) and an FP32 per-tensor
/// decode scale. x[i, j] ~= values[i, j] * blockScale[block of (i, j)] *
/// tensorDecode; values * blockScale is exact in BF16 (a 2-bit by 4-bit
/// significand product within BF16's exponent range), so an emulating GEMM
/// runs on that BF16 operand and takes tensorDecode as its alpha.
struct Nvfp4Tensor {
  int64_t rows = 0, cols = 0;
  int64_t blockRows = 1, blockCols = 16; // 1x16, or 16x16 for weights
  int64_t gridRows = 0, gridCols = 0;    // ceil(rows / blockRows), ceil(cols / blockCols)
  std::vector<double> values;            // E2M1, rows x cols row-major
  std::vector<double> blockScale;        // E4M3, gridRows x gridCols row-major
  float tensorEncode = 1.f;              // 448 * 6 / amax (the global encode scale)
  float tensorDecode = 1.f;              // 1 / tensorEncode in f32
};

/// Quantizes the rows x cols f32 tensor `x` (row-major; values are taken as
/// f32) to NVFP4 bit for bit as Transformer Engine's kernels do, with 16x16
/// blocks when `blocks2d`. Partial blocks at the edges use the elements they
/// have; NaN elements do not count towards an amax (fmaxf). `uniform`, when
/// not null, holds one draw in [0, 1) per element for stochastic rounding.
Nvfp4Tensor quantizeNvfp4(const std::vector<double> &x, int64_t rows, int64_t cols,
                          bool blocks2d, const std::vector<double> *uniform = nullptr);

/// Row-major strides of `shape`.
std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &shape);

/// Numpy broadcast of `shapes`; calls ctx.fail when they do not broadcast.
std::vector<int64_t> broadcastShape(const KernelContext &ctx,
                                    const std::vector<std::vector<int64_t>> &shapes);

/// Walks `outShape` in row-major order and calls f(outIndex, offsets) where
/// offsets[k] is the matching element of input k (numpy broadcasting; each
/// input shape must broadcast to outShape, checked by the caller).
template <size_t N, typename F>
void broadcastLoop(const std::vector<int64_t> &outShape,
                   const std::array<const std::vector<int64_t> *, N> &inShapes, F &&f) {
  int64_t total = 1;
  for (int64_t d : outShape)
    total *= d;
  if (total == 0)
    return;
  size_t r = outShape.size();
  std::array<int64_t, N> zero{};
  if (r == 0) {
    f(int64_t{0}, zero);
    return;
  }
  std::array<std::vector<int64_t>, N> st;
  for (size_t k = 0; k < N; ++k) {
    const std::vector<int64_t> &s = *inShapes[k];
    st[k].assign(r, 0);
    int64_t stride = 1;
    for (size_t d = s.size(); d-- > 0;) {
      size_t od = d + (r - s.size());
      st[k][od] = (s[d] == 1 && outShape[od] != 1) ? 0 : stride;
      stride *= s[d];
    }
  }
  int64_t inner = outShape[r - 1];
  int64_t outer = total / inner;
  std::array<int64_t, N> innerStride;
  for (size_t k = 0; k < N; ++k)
    innerStride[k] = st[k][r - 1];
  std::vector<int64_t> idx(r, 0);
  std::array<int64_t, N> base{};
  int64_t o = 0;
  for (int64_t it = 0; it < outer; ++it) {
    std::array<int64_t, N> off = base;
    for (int64_t j = 0; j < inner; ++j) {
      f(o++, off);
      for (size_t k = 0; k < N; ++k)
        off[k] += innerStride[k];
    }
    for (size_t d = r - 1; d-- > 0;) {
      ++idx[d];
      for (size_t k = 0; k < N; ++k)
        base[k] += st[k][d];
      if (idx[d] < outShape[d])
        break;
      for (size_t k = 0; k < N; ++k)
        base[k] -= st[k][d] * outShape[d];
      idx[d] = 0;
    }
  }
}

/// Wraps an int64 to the width of integer dtype `t` (i1: low bit).
int64_t wrapInt(int64_t v, DType t);
/// Float to integer of dtype `t`: truncation toward zero, NaN -> 0,
/// saturating at the int64 range (ui64: the uint64 range), then wrapped.
int64_t floatToIntOf(double v, DType t);
/// Smallest/largest value of integer dtype `t` (ui64 max is -1 as bits).
int64_t intTypeMin(DType t);
int64_t intTypeMax(DType t);

/// The elements of integer buffer `indices` as positions along axis `axis`
/// of length `len`, negative ones counted from the end. An index outside
/// [-len, len), or a ui64 one past the int64 range, fails through `c` with
/// OutOfRange, naming the index, its position and the axis.
std::vector<int64_t> normalizeIndices(const KernelContext &c, const Buffer &indices,
                                      int64_t axis, int64_t len);

/// What the loss ops and their gradients share: input [..., C] float,
/// labels [...] integer, optional weight [C]; ignore_index and reduction
/// read and checked (failures throw through `c`).
struct LossArgs {
  int64_t classes = 0;
  std::vector<int64_t> rowShape;
  int64_t ignore = -100;
  bool none = false; // reduction == "none"
  bool mean = false; // reduction == "mean"
};
LossArgs checkLossArgs(KernelContext &c, const Buffer &x, const Buffer &labels,
                       const Buffer *weight);

} // namespace tc::rt::cpu

#endif // TC_RUNTIME_CPU_KERNEL_H
