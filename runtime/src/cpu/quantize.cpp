//===- quantize.cpp - tc.quantize, tc.scaled_matmul
//---------------------------===//
//
// The reference for the scaled narrow formats (FP8, FP4), bit for bit what
// the GPU computes (TcOps.td has the contract):
//   - f32 scales (Transformer Engine's current scaling): amax in f32 (NaN
//     elements ignored, as fmaxf does), s = fmax / amax rounded to f32, the
//     product x * s rounded to f32 and then to the narrow format with
//     saturation (cvt ... .satfinite: +-inf too becomes +-max, NaN stays);
//     scale_inv = 1 / s in f32.
//   - with pow2_scale (Transformer Engine's Float8BlockScaling default,
//     force_pow_2_scales): that s with its mantissa bits cleared (a power of
//     two, FLT_MAX becoming 2^127), so scale_inv = 1 / s is exact.
//   - E8M0 scales (OCP MX): scale_inv = 2^(floor(log2 amax) - emax), clamped
//     to E8M0's range; NaN for a block whose amax is inf or NaN; x / scale_inv
//     is exact, then rounded with saturation.
// tc.scaled_matmul dequantizes exactly (an 8-bit by 24-bit product fits a
// double) and sums in double; the executor rounds the result once.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/base/float_format.h"
#include "runtime/src/base/fp4_math.h"
#include "runtime/src/base/init_rng.h"
#include "runtime/src/cpu/kernel.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace tc::rt::cpu {

namespace {

/// The largest exponent of a normal value of element format `t`.
int elementEmax(DType t) {
  switch (t) {
  case DType::F8E4M3FN: return 8;
  case DType::F8E5M2: return 15;
  default: return 2; // F4E2M1FN
  }
}

bool isScaledElement(DType t) {
  return t == DType::F8E4M3FN || t == DType::F8E5M2 || t == DType::F4E2M1FN;
}

} // namespace

/// Transformer Engine's scale from an amax (compute_scale_from_amax with no
/// epsilon and no power-of-two rounding).
float currentScale(float amax, float fmax) {
  if (std::isinf(amax) || amax == 0.f)
    return 1.f;
  float s = fmax / amax;
  if (std::isinf(s))
    return FLT_MAX;
  if (std::isnan(s))
    return 1.f;
  return s;
}

float pow2Scale(float s) {
  uint32_t bits;
  std::memcpy(&bits, &s, sizeof bits);
  bits &= 0xff800000u; // sign and exponent: s rounded down to a power of two
  std::memcpy(&s, &bits, sizeof s);
  return s;
}

/// x in narrow format `t` as the GPU's saturating conversion gives it.
double saturatingRound(double x, DType t) {
  if (std::isinf(x))
    return std::copysign(maxFiniteValue(t), x);
  return roundToFloatDType(x, t, /*saturate=*/true);
}

/// OCP MX's shared scale of a block (fp4_math.h, shared with the GPU).
double mxScaleInv(float amax, DType element) {
  return fp4::mxScaleInv(amax, elementEmax(element));
}

double roundE2M1(double v, const double *uniform) {
  return fp4::roundE2M1(v, uniform ? *uniform : -1.0);
}

std::vector<double> stochasticDraws(uint64_t seed, uint64_t stream, uint64_t step, int64_t n) {
  uint64_t key = initrng::mix64(stream + step * initrng::kGamma);
  std::vector<double> u(n);
  for (int64_t i = 0; i < n; ++i)
    u[i] = initrng::uniform01(seed, key, static_cast<uint64_t>(i));
  return u;
}

// NVFP4 as NVIDIA's Transformer Engine computes it, operation for operation
// in f32 (transformer_engine/common/cast/nvfp4/core_nvfp4.cuh:
// compute_global_encode_scaling_factor_FP4, compute_decoding_scaling_factor,
// compute_scaling_coefficient<float>; the Python reference
// transformer_engine/pytorch/custom_recipes/quantization_nvfp4.py,
// _quantize_blockwise_reference, does the same):
//   S_enc  = min(448 * 6 / amax, FLT_MAX), or 1 when amax is 0 or inf;
//   S_dec_b = e4m3(min(block_amax * (S_enc * (1/6)), FLT_MAX)) (saturating);
//   encode = min(1 / (S_dec_b * (1 / S_enc)), FLT_MAX);
//   q = e2m1(x * encode) (saturating at +-6, nearest even).
Nvfp4Tensor quantizeNvfp4(const std::vector<double> &x, int64_t rows, int64_t cols,
                          bool blocks2d, const std::vector<double> *uniform) {
  Nvfp4Tensor t;
  t.rows = rows;
  t.cols = cols;
  t.blockRows = blocks2d ? 16 : 1;
  t.blockCols = 16;
  t.gridRows = (rows + t.blockRows - 1) / t.blockRows;
  t.gridCols = (cols + t.blockCols - 1) / t.blockCols;
  auto blockOf = [&](int64_t i, int64_t j) {
    return (i / t.blockRows) * t.gridCols + j / t.blockCols;
  };
  float amax = 0.f;
  std::vector<float> blockAmax(t.gridRows * t.gridCols, 0.f);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      float a = std::fabs(static_cast<float>(x[i * cols + j]));
      amax = std::fmax(amax, a);
      float &b = blockAmax[blockOf(i, j)];
      b = std::fmax(b, a);
    }
  float enc = fp4::nvfp4TensorEncode(amax);
  t.tensorEncode = enc;
  t.tensorDecode = 1.0f / enc;
  t.blockScale.resize(blockAmax.size());
  std::vector<float> encode(blockAmax.size());
  for (size_t b = 0; b < blockAmax.size(); ++b) {
    float s = fp4::nvfp4BlockScaleUnrounded(blockAmax[b], enc);
    t.blockScale[b] = saturatingRound(s, DType::F8E4M3FN);
    encode[b] = fp4::nvfp4ElementEncode(static_cast<float>(t.blockScale[b]), t.tensorDecode);
  }
  t.values.resize(x.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      int64_t k = i * cols + j;
      float v = static_cast<float>(x[k]) * encode[blockOf(i, j)];
      t.values[k] = roundE2M1(v, uniform ? &(*uniform)[k] : nullptr);
    }
  return t;
}

namespace {

void quantizeKernel(KernelContext &c) {
  c.expectOperands(1, 2);
  c.expectResults(2);
  const Buffer &x = *c.in[0];
  Buffer &q = *c.out[0], &sc = *c.out[1];
  c.expectFloat(x, "input");
  DType elt = q.dtype();
  if (!isScaledElement(elt))
    c.fail("tc.quantize: the result must be f8E4M3FN, f8E5M2 or f4E2M1FN");
  bool mx = sc.dtype() == DType::F8E8M0FNU;
  if (!mx && sc.dtype() != DType::F32)
    c.fail("tc.quantize: scale_inv must be f32 or f8E8M0FNU");
  bool pow2 = c.boolAttr("pow2_scale", false);
  if (pow2 && mx)
    c.fail("tc.quantize: pow2_scale rounds f32 scales, not f8E8M0FNU ones");
  const std::vector<int64_t> &block = c.intsAttr("block");
  const std::vector<int64_t> &shape = x.shape();
  if (block.size() != shape.size())
    c.fail("tc.quantize: block has " + std::to_string(block.size()) + " entries for a rank-" +
           std::to_string(shape.size()) + " input");
  std::vector<int64_t> grid(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (block[d] < 1)
      c.fail("tc.quantize: block entries must be positive");
    grid[d] = (shape[d] + block[d] - 1) / block[d];
  }
  c.expectShape(sc, grid, "scale_inv");
  c.expectShape(q, shape, "result");
  // The block of every element, walking the input in row-major order.
  std::vector<int64_t> blockOf(x.size());
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t k = 0; k < x.size(); ++k) {
    int64_t b = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      b = b * grid[d] + idx[d] / block[d];
    blockOf[k] = b;
    for (size_t d = shape.size(); d-- > 0;)
      if (++idx[d] < shape[d])
        break;
      else
        idx[d] = 0;
  }
  std::vector<float> amax(sc.size(), 0.f);
  if (c.in.size() == 2) { // the amax the producer took (tc-fuse-fp8-amax)
    const Buffer &given = *c.in[1];
    if (given.size() != 1 || given.dtype() != DType::F32 || mx || sc.size() != 1)
      c.fail("tc.quantize: an amax operand is one f32 value, for per-tensor scaling with f32 "
             "scale_inv");
    amax[0] = static_cast<float>(given.f[0]);
  } else {
    for (int64_t k = 0; k < x.size(); ++k)
      amax[blockOf[k]] = std::fmax(amax[blockOf[k]], std::fabs(static_cast<float>(x.f[k])));
  }
  float fmax = static_cast<float>(maxFiniteValue(elt));
  std::vector<float> scale(sc.size());
  for (int64_t b = 0; b < sc.size(); ++b) {
    if (mx) {
      sc.f[b] = mxScaleInv(amax[b], elt);
    } else {
      scale[b] = currentScale(amax[b], fmax);
      if (pow2)
        scale[b] = pow2Scale(scale[b]);
      sc.f[b] = 1.0f / scale[b];
    }
  }
  for (int64_t k = 0; k < x.size(); ++k) {
    double v = x.f[k];
    int64_t b = blockOf[k];
    q.f[k] = mx ? saturatingRound(v / sc.f[b], elt)
                : saturatingRound(static_cast<float>(v) * scale[b], elt);
  }
}

/// deq(q)[i, j] = q[i, j] * scale[i / bi, j / bj] of a rank-2 operand.
std::vector<double> dequantize(const KernelContext &c, const Buffer &q, const Buffer &s,
                               const char *what) {
  if (q.rank() != 2 || s.rank() != 2)
    c.fail(std::string("tc.scaled_matmul: ") + what + " and its scale must be rank 2");
  int64_t r = q.shape()[0], n = q.shape()[1];
  int64_t gr = s.shape()[0], gc = s.shape()[1];
  if (gr < 1 || gc < 1 || gr > r || gc > n)
    c.fail(std::string("tc.scaled_matmul: ") + what + " scale is not a grid of its blocks");
  int64_t br = (r + gr - 1) / gr, bc = (n + gc - 1) / gc;
  std::vector<double> out(q.size());
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < n; ++j)
      out[i * n + j] = q.f[i * n + j] * s.f[(i / br) * gc + j / bc];
  return out;
}

void scaledMatmulKernel(KernelContext &c) {
  c.expectOperands(4);
  c.expectResults(1);
  const Buffer &a = *c.in[0], &sa = *c.in[1], &b = *c.in[2], &sb = *c.in[3];
  Buffer &y = *c.out[0];
  std::vector<double> da = dequantize(c, a, sa, "lhs"), db = dequantize(c, b, sb, "rhs");
  bool ta = c.boolAttr("transpose_lhs", false), tb = c.boolAttr("transpose_rhs", false);
  int64_t m = ta ? a.shape()[1] : a.shape()[0], k = ta ? a.shape()[0] : a.shape()[1];
  int64_t kb = tb ? b.shape()[1] : b.shape()[0], n = tb ? b.shape()[0] : b.shape()[1];
  if (k != kb)
    c.fail("tc.scaled_matmul: contraction sizes differ");
  c.expectShape(y, {m, n}, "result");
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += da[ta ? p * m + i : i * k + p] * db[tb ? j * k + p : p * n + j];
      y.f[i * n + j] = acc;
    }
}

/// deq(quant(x)) of tc.fake_quantize for a rows x k view (blocks along k);
/// `uniform` (may be null: nearest even) one draw per element of the view.
/// `tensorScale` (nvfp4 only; unscaled): the values times their block
/// scales only, the tensor's decode scale stored there.
std::vector<double> fakeQuantizeRows(const std::vector<double> &x, int64_t rows, int64_t k,
                                     bool nvfp4, bool blocks2d,
                                     const std::vector<double> *uniform,
                                     double *tensorScale = nullptr) {
  std::vector<double> out(x.size());
  if (nvfp4) {
    Nvfp4Tensor t = quantizeNvfp4(x, rows, k, blocks2d, uniform);
    double dec = static_cast<double>(t.tensorDecode);
    if (tensorScale) {
      *tensorScale = dec;
      dec = 1.0;
    }
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < k; ++j) {
        // value * block scale is exact (BF16's 8 bits); the tensor scale
        // multiplies it exactly in f64, and the executor rounds once.
        double s = t.blockScale[(i / t.blockRows) * t.gridCols + j / t.blockCols];
        out[i * k + j] = t.values[i * k + j] * s * dec;
      }
    return out;
  }
  // MXFP4: tc.quantize's f4E2M1FN + f8E8M0FNU arithmetic in 1x32 blocks.
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j0 = 0; j0 < k; j0 += 32) {
      int64_t j1 = std::min<int64_t>(j0 + 32, k);
      float amax = 0.f;
      for (int64_t j = j0; j < j1; ++j)
        amax = std::fmax(amax, std::fabs(static_cast<float>(x[i * k + j])));
      double sinv = mxScaleInv(amax, DType::F4E2M1FN);
      for (int64_t j = j0; j < j1; ++j)
        out[i * k + j] =
            roundE2M1(x[i * k + j] / sinv, uniform ? &(*uniform)[i * k + j] : nullptr) * sinv;
    }
  return out;
}

void fakeQuantizeKernel(KernelContext &c) {
  bool stochastic = c.boolAttr("stochastic", false);
  bool unscaled = c.boolAttr("unscaled", false);
  c.expectOperands(stochastic ? 2 : 1);
  c.expectResults(unscaled ? 2 : 1);
  const Buffer &x = *c.in[0];
  Buffer &y = *c.out[0];
  c.expectFloat(x, "input");
  c.expectShape(y, x.shape(), "result");
  std::string format = c.strAttr("format", "");
  if (format != "nvfp4" && format != "mxfp4")
    c.fail("tc.fake_quantize: format must be nvfp4 or mxfp4, got '" + format + "'");
  int64_t rank = x.rank();
  if (rank < 1)
    c.fail("tc.fake_quantize: the input must have rank >= 1");
  int64_t axis = c.intAttr("axis", -1); // absent: the default, the last axis
  axis = axis < 0 ? axis + rank : axis;
  if (axis < 0 || axis >= rank)
    c.fail("tc.fake_quantize: axis " + std::to_string(c.intAttr("axis", -1)) +
           " is out of range for rank " + std::to_string(rank));
  bool blocks2d = c.boolAttr("blocks2d", false);
  if (blocks2d && (format != "nvfp4" || rank != 2))
    c.fail("tc.fake_quantize: blocks2d needs format nvfp4 and a rank-2 input");
  if (unscaled && format != "nvfp4")
    c.fail("tc.fake_quantize: unscaled needs format nvfp4");
  if (unscaled && c.out[1]->size() != 1)
    c.fail("tc.fake_quantize: the tensor_scale result must hold one value");
  // The input with `axis` last: [outer, len, inner] -> [outer, inner, len].
  const std::vector<int64_t> &shape = x.shape();
  int64_t len = shape[axis], outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[d];
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= shape[d];
  auto movedIndex = [&](int64_t o, int64_t l, int64_t n) { return (o * inner + n) * len + l; };
  // Stochastic rounding: element k's draw (k its index in the input's own
  // row-major layout, as the GPU kernel keys it) at the step operand's step.
  std::vector<double> draws, moved(x.size());
  if (stochastic) {
    const Buffer &step = *c.in[1];
    if (step.size() != 1)
      c.fail("tc.fake_quantize: the step operand must hold one value");
    std::vector<double> u =
        stochasticDraws(static_cast<uint64_t>(c.intAttr("seed", 0)),
                        static_cast<uint64_t>(c.intAttr("stream", 0)),
                        static_cast<uint64_t>(step.f[0]), x.size());
    draws.resize(x.size());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t l = 0; l < len; ++l)
        for (int64_t n = 0; n < inner; ++n)
          draws[movedIndex(o, l, n)] = u[(o * len + l) * inner + n];
  }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t l = 0; l < len; ++l)
      for (int64_t n = 0; n < inner; ++n)
        moved[movedIndex(o, l, n)] = x.f[(o * len + l) * inner + n];
  double tensorScale = 1.0;
  std::vector<double> q = fakeQuantizeRows(moved, outer * inner, len, format == "nvfp4",
                                           blocks2d, stochastic ? &draws : nullptr,
                                           unscaled ? &tensorScale : nullptr);
  if (unscaled)
    c.out[1]->f[0] = tensorScale;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t l = 0; l < len; ++l)
      for (int64_t n = 0; n < inner; ++n)
        y.f[(o * len + l) * inner + n] = q[movedIndex(o, l, n)];
}

} // namespace

void registerQuantizeKernels(KernelTable &t) {
  t["tc.quantize"] = quantizeKernel;
  t["tc.scaled_matmul"] = scaledMatmulKernel;
  t["tc.fake_quantize"] = fakeQuantizeKernel;
}

} // namespace tc::rt::cpu
