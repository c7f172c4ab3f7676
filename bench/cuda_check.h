// bench/cuda_check.h - the benches' CUDA and cuBLASLt error checks: a failed
// call prints itself, where and why, and exits 1.
#ifndef TC_BENCH_CUDA_CHECK_H
#define TC_BENCH_CUDA_CHECK_H

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

#endif // TC_BENCH_CUDA_CHECK_H
