//===- optimizer.cu - fused AdamW / SGD updates, global gradient norm -----===//
//
// The updates run over one flat range of parameters (the memory plan lays
// parameters, gradients and optimizer state out contiguously, so one launch
// updates all of them; call once per range with different hyper-parameters,
// e.g. without weight decay for norms and biases). Master weights and state
// are fp32; gradients f32 or bf16; an optional copy of the updated weights in
// the model's dtype is written in the same pass.
//
// Gradient clipping is fused: given the device scalar sum of squares of all
// gradients (sumSquares), every thread computes torch's clip coefficient
// min(1, max_norm / (norm + 1e-6)) itself, so no host round trip is needed.
//
// sumSquares is deterministic: a fixed number of blocks (from n only) write
// partial sums, one block adds them in order (in double).
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>

#include "runtime/src/cuda/kernels/common.cuh"
#include "runtime/src/cuda/kernels/kernels.h"

namespace tc::rt::cuda {
namespace {

using namespace kern;

constexpr int kThreads = 256;

__device__ __forceinline__ float clipCoef(const float *gradNormSq, float maxNorm) {
  if (!gradNormSq || maxNorm <= 0.0f)
    return 1.0f;
  return fminf(1.0f, maxNorm / (sqrtf(*gradNormSq) + 1e-6f));
}

/// Hyper-parameters of one AdamW launch, bias corrections folded in on the
/// host (in double).
struct AdamWArgs {
  float lr, beta1, beta2, eps, decayFactor; // decayFactor = 1 - lr * wd
  float stepSize;                           // lr / (1 - beta1^t)
  float sqrtBc2;                            // sqrt(1 - beta2^t)
  float maxGradNorm;
};

template <class G, class C>
__global__ void __launch_bounds__(kThreads)
    adamwKernel(float *__restrict__ p, const G *__restrict__ g, float *__restrict__ m,
                float *__restrict__ v, int64_t n, AdamWArgs a, const float *__restrict__ normSq,
                C *__restrict__ copy) {
  float coef = clipCoef(normSq, a.maxGradNorm);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    float grad = toF(g[i]) * coef;
    float param = p[i] * a.decayFactor;
    float mi = m[i], vi = v[i];
    mi += (1.0f - a.beta1) * (grad - mi); // exp_avg.lerp_(grad, 1 - beta1)
    vi = vi * a.beta2 + (1.0f - a.beta2) * grad * grad;
    float denom = sqrtf(vi) / a.sqrtBc2 + a.eps;
    param -= a.stepSize * (mi / denom);
    m[i] = mi;
    v[i] = vi;
    p[i] = param;
    if (copy)
      copy[i] = fromF<C>(param);
  }
}

struct SgdArgs {
  float lr, momentum, dampening, weightDecay, maxGradNorm;
  bool nesterov, firstStep;
};

template <class G, class C>
__global__ void __launch_bounds__(kThreads)
    sgdKernel(float *__restrict__ p, const G *__restrict__ g, float *__restrict__ buf, int64_t n,
              SgdArgs a, const float *__restrict__ normSq, C *__restrict__ copy) {
  float coef = clipCoef(normSq, a.maxGradNorm);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    float param = p[i];
    float d = toF(g[i]) * coef;
    if (a.weightDecay != 0.0f)
      d += a.weightDecay * param;
    if (a.momentum != 0.0f) {
      float b = a.firstStep ? d : a.momentum * buf[i] + (1.0f - a.dampening) * d;
      buf[i] = b;
      d = a.nesterov ? d + a.momentum * b : b;
    }
    param -= a.lr * d;
    p[i] = param;
    if (copy)
      copy[i] = fromF<C>(param);
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    sumSquaresPartialKernel(const T *__restrict__ x, int64_t n, float *__restrict__ partial) {
  float s = 0.0f;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    float v = toF(x[i]);
    s += v * v;
  }
  s = blockSum(s);
  if (threadIdx.x == 0)
    partial[blockIdx.x] = s;
}

__global__ void __launch_bounds__(kMaxNormBlocks)
    sumPartialsKernel(const float *__restrict__ partial, int blocks, float *out, bool accumulate) {
  double s =
      static_cast<int>(threadIdx.x) < blocks ? static_cast<double>(partial[threadIdx.x]) : 0.0;
  s = blockSum(s);
  if (threadIdx.x == 0)
    *out = static_cast<float>(accumulate ? s + static_cast<double>(*out) : s);
}

unsigned updateGrid(int64_t n) {
  int64_t blocks = ceilDiv(n, kThreads);
  return static_cast<unsigned>(blocks < (int64_t(1) << 20) ? blocks : (int64_t(1) << 20));
}

/// Calls f(C{}) with C the copy's storage type (float when there is none).
template <class F> Status dispatchCopy(DType copyType, void *copy, const char *what, F &&f) {
  if (!copy)
    return f(float{});
  return dispatchFloat(copyType, what, f);
}

Status checkUpdate(const char *what, const float *params, const void *grads, int64_t n,
                   float maxGradNorm, const float *gradNormSq) {
  TC_RETURN_IF_ERROR(checkEntry(what, n));
  if (n > 0 && (!params || !grads))
    return invalidArgument(std::string(what) + ": null params or grads");
  if (maxGradNorm > 0 && !gradNormSq)
    return invalidArgument(std::string(what) + ": clipping needs gradNormSq");
  return Status::ok();
}

} // namespace

Status adamwUpdate(float *params, DType gradType, const void *grads, float *expAvg, float *expAvgSq,
                   int64_t n, const AdamWConfig &cfg, const float *gradNormSq, DType copyType,
                   void *paramsCopy, cudaStream_t stream) {
  TC_RETURN_IF_ERROR(checkUpdate("adamwUpdate", params, grads, n, cfg.maxGradNorm, gradNormSq));
  if (n == 0)
    return Status::ok();
  if (!expAvg || !expAvgSq)
    return invalidArgument("adamwUpdate: null optimizer state");
  if (cfg.step < 1)
    return invalidArgument("adamwUpdate: step must be >= 1, got " + std::to_string(cfg.step));
  double t = static_cast<double>(cfg.step);
  double bc1 = 1.0 - std::pow(static_cast<double>(cfg.beta1), t);
  double bc2 = 1.0 - std::pow(static_cast<double>(cfg.beta2), t);
  AdamWArgs a;
  a.lr = cfg.lr;
  a.beta1 = cfg.beta1;
  a.beta2 = cfg.beta2;
  a.eps = cfg.eps;
  a.decayFactor = static_cast<float>(1.0 - static_cast<double>(cfg.lr) * cfg.weightDecay);
  a.stepSize = static_cast<float>(cfg.lr / bc1);
  a.sqrtBc2 = static_cast<float>(std::sqrt(bc2));
  a.maxGradNorm = cfg.maxGradNorm;
  unsigned grid = updateGrid(n);
  return dispatchFloat(gradType, "adamwUpdate", [&](auto gtag) {
    using G = decltype(gtag);
    return dispatchCopy(copyType, paramsCopy, "adamwUpdate", [&](auto ctag) {
      using C = decltype(ctag);
      adamwKernel<G, C><<<grid, kThreads, 0, stream>>>(params, static_cast<const G *>(grads),
                                                       expAvg, expAvgSq, n, a, gradNormSq,
                                                       static_cast<C *>(paramsCopy));
      return checkLaunch("adamw_update");
    });
  });
}

Status sgdUpdate(float *params, DType gradType, const void *grads, float *momentumBuf, int64_t n,
                 const SgdConfig &cfg, const float *gradNormSq, DType copyType, void *paramsCopy,
                 cudaStream_t stream) {
  TC_RETURN_IF_ERROR(checkUpdate("sgdUpdate", params, grads, n, cfg.maxGradNorm, gradNormSq));
  if (n == 0)
    return Status::ok();
  if (cfg.momentum != 0 && !momentumBuf)
    return invalidArgument("sgdUpdate: momentum needs a momentum buffer");
  if (cfg.step < 1)
    return invalidArgument("sgdUpdate: step must be >= 1, got " + std::to_string(cfg.step));
  SgdArgs a{cfg.lr,          cfg.momentum, cfg.dampening, cfg.weightDecay,
            cfg.maxGradNorm, cfg.nesterov, cfg.step == 1};
  unsigned grid = updateGrid(n);
  return dispatchFloat(gradType, "sgdUpdate", [&](auto gtag) {
    using G = decltype(gtag);
    return dispatchCopy(copyType, paramsCopy, "sgdUpdate", [&](auto ctag) {
      using C = decltype(ctag);
      sgdKernel<G, C><<<grid, kThreads, 0, stream>>>(params, static_cast<const G *>(grads),
                                                     momentumBuf, n, a, gradNormSq,
                                                     static_cast<C *>(paramsCopy));
      return checkLaunch("sgd_update");
    });
  });
}

Status sumSquares(DType dt, const void *x, int64_t n, float *out, void *scratch, bool accumulate,
                  cudaStream_t stream) {
  TC_RETURN_IF_ERROR(checkEntry("sumSquares", n));
  if (!out || !scratch || (n > 0 && !x))
    return invalidArgument("sumSquares: null pointer");
  // The grid depends on n only, so the summation order (and the bits) do too.
  int blocks = static_cast<int>(std::min<int64_t>(kMaxNormBlocks, ceilDiv(n, kThreads * 8)));
  if (blocks == 0)
    blocks = 1;
  float *partial = static_cast<float *>(scratch);
  return dispatchFloat(dt, "sumSquares", [&](auto tag) -> Status {
    using T = decltype(tag);
    sumSquaresPartialKernel<T>
        <<<blocks, kThreads, 0, stream>>>(static_cast<const T *>(x), n, partial);
    TC_RETURN_IF_ERROR(checkLaunch("sum_squares_partial"));
    sumPartialsKernel<<<1, static_cast<unsigned>(kMaxNormBlocks), 0, stream>>>(partial, blocks, out, accumulate);
    return checkLaunch("sum_squares_total");
  });
}

} // namespace tc::rt::cuda
