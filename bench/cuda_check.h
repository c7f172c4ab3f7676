// bench/cuda_check.h - the benches' CUDA and cuBLASLt error checks (a failed
// call prints itself, where and why, and exits 1) and their timer.
#ifndef TC_BENCH_CUDA_CHECK_H
#define TC_BENCH_CUDA_CHECK_H

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));      \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)
#define CB(x)                                                                                      \
  do {                                                                                             \
    cublasStatus_t s_ = (x);                                                                       \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                             \
      std::fprintf(stderr, "%s:%d %s: status %d\n", __FILE__, __LINE__, #x, (int)s_);              \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

/// fn() once, then the mean of `reps` runs of it on stream s, in microseconds.
template <class F> float timeUs(cudaStream_t s, int reps, F &&fn) {
  fn();
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventRecord(e0, s));
  for (int r = 0; r < reps; ++r)
    fn();
  CK(cudaEventRecord(e1, s));
  CK(cudaEventSynchronize(e1));
  float ms;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return ms * 1000 / reps;
}

#endif // TC_BENCH_CUDA_CHECK_H
