//===- gelu.cuh - GELU and its derivative, device functions -----*- CUDA -*-===//
//
// The GELU of tc.gelu on the GPU, written without cancellation:
//   exact: 0.5 x erfc(-x / sqrt 2)           (= 0.5 x (1 + erf(x / sqrt 2)))
//   tanh:  x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)
//                                            (= 0.5 x (1 + tanh u))
// and their derivatives, in fp32. The elementwise kernels (elementwise.cu)
// and tc's own GEMM's epilogues (gemm_sm90.cuh; its tanh form uses the MUFU
// tanh instead, for speed) share them. Header-only, no other dependency.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_CUDA_KERNELS_GELU_CUH
#define TC_RUNTIME_CUDA_KERNELS_GELU_CUH

namespace tc::rt::cuda::gelu {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kC = 0.044715f;

/// gelu(x): the exact form with Exact, else the tanh form.
template <bool Exact> __device__ __forceinline__ float value(float x) {
  if constexpr (Exact) {
    return 0.5f * x * erfcf(-x * kInvSqrt2);
  } else {
    float u = kSqrt2OverPi * (x + kC * x * x * x);
    return x / (1.0f + expf(-2.0f * u));
  }
}

/// d gelu(x) / dx of the same form.
template <bool Exact> __device__ __forceinline__ float grad(float x) {
  if constexpr (Exact) {
    return 0.5f * erfcf(-x * kInvSqrt2) + x * expf(-0.5f * x * x) * kInvSqrt2Pi;
  } else {
    float u = kSqrt2OverPi * (x + kC * x * x * x);
    float s = 1.0f / (1.0f + expf(-2.0f * u)); // 0.5 (1 + tanh u)
    // d/dx 0.5 x (1 + tanh u) = s + 0.5 x (1 - tanh^2 u) u', 1 - tanh^2 = 4 s (1 - s)
    return s + 2.0f * x * s * (1.0f - s) * kSqrt2OverPi * (1.0f + 3.0f * kC * x * x);
  }
}

} // namespace tc::rt::cuda::gelu

#endif // TC_RUNTIME_CUDA_KERNELS_GELU_CUH
