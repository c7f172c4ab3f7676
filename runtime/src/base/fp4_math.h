//===- fp4_math.h - E2M1 rounding and NVFP4 / MXFP4 scales, host and device -*- C++ -*-===//
//
// The arithmetic of tc.fake_quantize that the CPU reference
// (runtime/src/cpu/quantize.cpp) and the GPU kernel
// (runtime/src/cuda/kernels/fake_quantize.cu) share, written once so that
// both compute it operation for operation: E2M1 rounding (nearest even or
// stochastic), NVFP4's f32 scale chain as Transformer Engine computes it
// (transformer_engine/common/cast/nvfp4/core_nvfp4.cuh), OCP MX's E8M0
// scale. Only +, *, / of one precision (IEEE round to nearest on both
// sides: no multiply-add to contract, and tc builds CUDA without fast
// math), rint/floor/frexp/ldexp (exact). The E4M3 rounding of NVFP4's block
// scale is not here: the CPU uses float_format's, the GPU cvt.satfinite,
// which agree (test/cuda/fp4_test.cpp).
//
// No dependencies (the CUDA compiler includes it as well): only <cmath>
// and <cfloat>.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_BASE_FP4_MATH_H
#define TC_RUNTIME_BASE_FP4_MATH_H

#include <cfloat>
#include <cmath>

#if defined(__CUDACC__)
#define TC_FP4_HD __host__ __device__
#else
#define TC_FP4_HD
#endif

namespace tc::rt::fp4 {

/// E2M1's largest value and the largest normal exponent of an element
/// format (for MX scales).
constexpr double kE2M1Max = 6.0;
constexpr int kE2M1Emax = 2;

/// E2M1 rounding of `v` (a value already divided by its scales). `u` < 0:
/// nearest even with saturation at +-6 (inf too; NaN gives +6: E2M1 has
/// none, as f4E2M1FN's conversion does). `u` in [0, 1): stochastic: |v|
/// between grid neighbours lo < hi rounds up when u < (|v| - lo) / (hi -
/// lo) (exact: the steps are powers of two), so that its expected value is
/// v within [-6, 6].
TC_FP4_HD inline double roundE2M1(double v, double u) {
  if (v != v)
    return kE2M1Max;
  double a = fabs(v);
  if (a >= kE2M1Max)
    return copysign(kE2M1Max, v);
  // The grid 0, 0.5, 1, 1.5, 2, 3, 4, 6: steps of 0.5 below 2, 1 in [2, 4),
  // 2 in [4, 6). a / step is exact.
  double step = a < 2.0 ? 0.5 : (a < 4.0 ? 1.0 : 2.0);
  double r;
  if (u < 0) {
    r = rint(a / step) * step; // the default rounding mode: nearest even
  } else {
    double lo = floor(a / step) * step;
    r = (a - lo) / step > u ? lo + step : lo;
  }
  return copysign(r, v);
}

/// NVFP4's per-tensor encode scale S_enc = min(448 * 6 / amax, FLT_MAX),
/// 1 when amax is 0 or inf (the quotient 0).
TC_FP4_HD inline float nvfp4TensorEncode(float amax) {
  float enc = fminf(448.0f * 6.0f / amax, FLT_MAX);
  return amax == 0.f || enc == 0.f ? 1.f : enc;
}

/// A block's decode scale before its E4M3 rounding: min(block_amax *
/// (S_enc * f32(1/6)), FLT_MAX).
TC_FP4_HD inline float nvfp4BlockScaleUnrounded(float blockAmax, float tensorEncode) {
  const float mult = tensorEncode * (1.0f / 6.0f);
  return fminf(blockAmax * mult, FLT_MAX);
}

/// The factor that takes an element of a block to E2M1's range: min(1 /
/// (S_dec_b * S_dec), FLT_MAX) from the block's E4M3 decode scale and the
/// tensor's decode scale 1 / S_enc.
TC_FP4_HD inline float nvfp4ElementEncode(float blockScale, float tensorDecode) {
  return fminf(1.0f / (blockScale * tensorDecode), FLT_MAX);
}

/// mxScaleExponent's value for a block whose amax is not finite (E8M0's
/// NaN: the exponent + 127 is its byte 0xFF).
constexpr int kMxScaleNan = 128;

/// OCP MX's shared scale of a block as its exponent x, scale = 2^x:
/// floor(log2 amax) - emax clamped to E8M0's [-127, 127] (-127 for amax
/// 0), kMxScaleNan when amax is not finite. In integers and f32 only, so
/// that the GPU's quantize kernels need no f64 (x + 127 is the E8M0 byte).
TC_FP4_HD inline int mxScaleExponent(float amax, int emax) {
  if (!(amax - amax == 0.f))
    return kMxScaleNan;
  if (amax == 0.f)
    return -127;
  int e;
  frexpf(amax, &e); // amax = m * 2^e, m in [0.5, 1): floor(log2 amax) = e - 1
  int x = e - 1 - emax;
  return x < -127 ? -127 : (x > 127 ? 127 : x);
}

/// OCP MX's shared scale 2^(floor(log2 amax) - emax) of a block, clamped
/// to E8M0's [2^-127, 2^127]; NaN when amax is not finite.
TC_FP4_HD inline double mxScaleInv(float amax, int emax) {
  int x = mxScaleExponent(amax, emax);
  return x == kMxScaleNan ? static_cast<double>(NAN) : ldexp(1.0, x);
}

} // namespace tc::rt::fp4

#endif // TC_RUNTIME_BASE_FP4_MATH_H
