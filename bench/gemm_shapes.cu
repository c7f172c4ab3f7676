// bench/gemm_shapes.cu - every cuBLASLt candidate for a GEMM shape, timed.
//
//   nvcc -O2 -std=c++17 -arch=sm_90 bench/gemm_shapes.cu -lcublasLt -o gemm_shapes
//   gemm_shapes [--candidates N] [--workspace MiB] [wgrad|dgelu] M N K [...]
//
// `wgrad` shapes (the default) are tc's weight-gradient form: out[M, N] =
// lhs^T rhs with lhs [K, M] and rhs [K, N] row-major bf16, fp32 accumulate,
// bf16 out (what `matmul bf16 M=.. N=.. K=.. lhs^T` in TC_CUDA_PROFILE=1 is),
// plain and with the BGRAD epilogue (bias gradient = sum of lhs over K, as
// tc-fuse-bias-grad asks for). `dgelu` shapes are out[M, N] = lhs [M, K] rhs
// [K, N] with the DGELU epilogue (aux: the [M, N] pre-activation), without
// and with its bias gradient (DGELU_BGRAD: the column sums of out). Each
// variant's heuristic candidates are each timed (20
// runs after 3 warm-ups) and the fastest few printed with their configuration
// (tile id, split-K count, stages, CTA swizzle, cluster shape), so that the
// runtime's choice can be compared with the best this cuBLASLt has.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_check.h"

namespace {

struct Result {
  float us;
  int heurIndex;
  std::string config;
};

std::string describe(const cublasLtMatmulAlgo_t &algo) {
  auto get = [&](cublasLtMatmulAlgoConfigAttributes_t a) {
    uint32_t v = 0;
    size_t w = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&algo, a, &v, sizeof v, &w);
    return v;
  };
  char buf[160];
  std::snprintf(buf, sizeof buf, "algo %u tile %u splitK %u reduction %u stages %u swizzle %u cluster %u",
                get(CUBLASLT_ALGO_CONFIG_ID), get(CUBLASLT_ALGO_CONFIG_TILE_ID),
                get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM), get(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
                get(CUBLASLT_ALGO_CONFIG_STAGES_ID), get(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
                get(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
  return buf;
}

void runShape(cublasLtHandle_t h, bool dgelu, int64_t M, int64_t N, int64_t K, int candidates,
              void *ws, size_t wsBytes) {
  __nv_bfloat16 *lhs, *rhs, *out, *bias, *aux;
  CK(cudaMalloc(&lhs, K * M * 2));
  CK(cudaMalloc(&rhs, K * N * 2));
  CK(cudaMalloc(&out, M * N * 2));
  CK(cudaMalloc(&aux, M * N * 2));
  CK(cudaMemset(aux, 0, M * N * 2));
  CK(cudaMalloc(&bias, std::max(M, N) * 2));
  CK(cudaMemset(lhs, 0, K * M * 2));
  CK(cudaMemset(rhs, 0, K * N * 2));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  // Column-major: wgrad out^T [N, M] = rhs_cm [N, K] * (lhs_cm [M, K])^T;
  // dgelu out^T [N, M] = rhs_cm [N, K] * lhs_cm [K, M].
  for (int bgrad = 0; bgrad < 2; ++bgrad) {
    cublasLtMatmulDesc_t op;
    CB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t tn = CUBLAS_OP_N, tt = CUBLAS_OP_T;
    CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tn, sizeof tn));
    CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, dgelu ? &tn : &tt,
                                      sizeof tt));
    cublasLtEpilogue_t ep = dgelu ? (bgrad ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU)
                                  : (bgrad ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_DEFAULT);
    CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
    if (bgrad) {
      CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
      cudaDataType_t bt = CUDA_R_16BF;
      CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    }
    if (dgelu) {
      int64_t ld = N;
      CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                                        sizeof aux));
      CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
    }
    cublasLtMatrixLayout_t a, b, c;
    CB(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, N, K, N));
    if (dgelu)
      CB(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, K, M, K));
    else
      CB(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, M, K, M));
    CB(cublasLtMatrixLayoutCreate(&c, CUDA_R_16BF, N, M, N));
    cublasLtMatmulPreference_t pref;
    CB(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t wsb = wsBytes;
    CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                            sizeof wsb));
    std::vector<cublasLtMatmulHeuristicResult_t> heur(candidates);
    int returned = 0;
    CB(cublasLtMatmulAlgoGetHeuristic(h, op, a, b, c, c, pref, candidates, heur.data(), &returned));
    std::vector<Result> results;
    float alpha = 1, beta = 0;
    for (int i = 0; i < returned; ++i) {
      if (heur[i].state != CUBLAS_STATUS_SUCCESS)
        continue;
      bool ok = true;
      for (int r = 0; r < 23 && ok; ++r) {
        if (r == 3)
          cudaEventRecord(e0, s);
        ok = cublasLtMatmul(h, op, &alpha, rhs, a, lhs, b, &beta, out, c, out, c, &heur[i].algo, ws,
                            wsBytes, s) == CUBLAS_STATUS_SUCCESS;
      }
      cudaEventRecord(e1, s);
      float ms = 0;
      if (!ok || cudaEventSynchronize(e1) != cudaSuccess ||
          cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess) {
        cudaGetLastError();
        continue;
      }
      results.push_back({ms * 1000 / 20, i, describe(heur[i].algo)});
    }
    std::vector<Result> sorted = results;
    std::sort(sorted.begin(), sorted.end(), [](auto &x, auto &y) { return x.us < y.us; });
    double flop = 2.0 * M * N * K;
    std::printf("%s M=%lld N=%lld K=%lld %s: %d candidates", dgelu ? "dgelu" : "wgrad",
                (long long)M, (long long)N, (long long)K, bgrad ? "+bgrad" : "plain", returned);
    for (const Result &r : results)
      if (r.heurIndex == 0)
        std::printf("; heuristic's first %.1f us", r.us);
    float best8 = 1e30f;
    for (const Result &r : results)
      if (r.heurIndex < 8)
        best8 = std::min(best8, r.us);
    std::printf("; best of the first 8 %.1f us\n", best8);
    for (size_t i = 0; i < sorted.size() && i < 4; ++i)
      std::printf("  %7.1f us %6.0f TFLOP/s  #%-2d %s\n", sorted[i].us, flop / sorted[i].us / 1e6,
                  sorted[i].heurIndex, sorted[i].config.c_str());
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(c);
    cublasLtMatmulDescDestroy(op);
  }
  cudaFree(lhs);
  cudaFree(rhs);
  cudaFree(out);
  cudaFree(bias);
  cudaFree(aux);
  cudaStreamDestroy(s);
}

} // namespace

int main(int argc, char **argv) {
  int candidates = 64;
  size_t wsMiB = 32;
  std::vector<int64_t> dims;
  std::vector<bool> forms;
  bool dgelu = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--candidates") && i + 1 < argc)
      candidates = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--workspace") && i + 1 < argc)
      wsMiB = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "dgelu") || !std::strcmp(argv[i], "wgrad"))
      dgelu = !std::strcmp(argv[i], "dgelu");
    else {
      if (dims.size() % 3 == 0)
        forms.push_back(dgelu);
      dims.push_back(std::atoll(argv[i]));
    }
  }
  if (dims.empty() || dims.size() % 3) {
    std::fprintf(stderr, "usage: gemm_shapes [--candidates N] [--workspace MiB] [wgrad|dgelu] M N K [...]\n");
    return 2;
  }
  cublasLtHandle_t h;
  CB(cublasLtCreate(&h));
  void *ws;
  CK(cudaMalloc(&ws, wsMiB << 20));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, cuBLASLt %zu, workspace %zu MiB\n", prop.name, cublasLtGetVersion(), wsMiB);
  for (size_t i = 0; i < dims.size(); i += 3)
    runShape(h, forms[i / 3], dims[i], dims[i + 1], dims[i + 2], candidates, ws, wsMiB << 20);
  return 0;
}
