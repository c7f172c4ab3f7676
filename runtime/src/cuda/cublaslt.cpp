//===- cublaslt.cpp - the one matmul wrapper (cuBLASLt) -------------------===//
#include "runtime/src/cuda/cublaslt.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/src/base/init_rng.h"
#include "runtime/src/cuda/cudnn/loader.h"
#include "runtime/src/cuda/device.h"
#include "runtime/src/cuda/kernels/kernels.h"
#include "runtime/src/schema/version.h"

namespace tc::rt::cuda {

Status cublasStatus(cublasStatus_t st, const std::string &call) {
  if (st == CUBLAS_STATUS_SUCCESS)
    return Status::ok();
  StatusCode code = StatusCode::Internal;
  switch (st) {
  case CUBLAS_STATUS_ALLOC_FAILED:
    code = StatusCode::ResourceExhausted;
    break;
  case CUBLAS_STATUS_INVALID_VALUE:
    code = StatusCode::InvalidArgument;
    break;
  case CUBLAS_STATUS_NOT_SUPPORTED:
    code = StatusCode::Unimplemented;
    break;
  case CUBLAS_STATUS_NOT_INITIALIZED:
  case CUBLAS_STATUS_ARCH_MISMATCH:
    code = StatusCode::FailedPrecondition;
    break;
  default:
    break;
  }
  return Status(code,
                call + ": " + cublasLtGetStatusString(st) + " (" + cublasLtGetStatusName(st) + ")");
}

#define TC_CUBLAS_RETURN_IF_ERROR(expr)                                                            \
  do {                                                                                             \
    cublasStatus_t tc_cublas_st_ = (expr);                                                         \
    if (tc_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                                    \
      return ::tc::rt::cuda::cublasStatus(tc_cublas_st_, #expr);                                   \
  } while (0)

const char *matmulEpilogueName(MatmulEpilogue e) {
  switch (e) {
  case MatmulEpilogue::None:
    return "none";
  case MatmulEpilogue::Bias:
    return "bias";
  case MatmulEpilogue::Gelu:
    return "gelu";
  case MatmulEpilogue::BiasGelu:
    return "bias+gelu";
  case MatmulEpilogue::GeluAux:
    return "gelu+aux";
  case MatmulEpilogue::BiasGeluAux:
    return "bias+gelu+aux";
  case MatmulEpilogue::BiasGradLhs:
    return "bias-grad(lhs)";
  case MatmulEpilogue::BiasGradRhs:
    return "bias-grad(rhs)";
  case MatmulEpilogue::DGelu:
    return "dgelu";
  case MatmulEpilogue::GeluErfAux:
    return "gelu(erf)+aux";
  case MatmulEpilogue::BiasGeluErfAux:
    return "bias+gelu(erf)+aux";
  case MatmulEpilogue::DGeluErf:
    return "dgelu(erf)";
  }
  return "?";
}

namespace {
const char *fp8ScaleBlocksName(Fp8ScaleBlocks b) {
  switch (b) {
  case Fp8ScaleBlocks::Vec128:
    return "1x128";
  case Fp8ScaleBlocks::Blk128:
    return "128x128";
  case Fp8ScaleBlocks::Vec32Ue8m0:
    return "1x32 e8m0";
  default:
    return "none";
  }
}
} // namespace

std::string MatmulDesc::toString() const {
  std::string s = nvfp4 ? std::string("nvfp4xnvfp4->") + dtypeName(dtype)
                  : fp8 ? std::string(dtypeName(lhsType)) + "x" + dtypeName(rhsType) + "->" +
                            dtypeName(dtype) + (fastAccum ? "(fast accum)" : "") +
                            (rowScales ? "(row scales)" : "") +
                            (lhsBlocks != Fp8ScaleBlocks::None
                                 ? std::string("(blocks ") + fp8ScaleBlocksName(lhsBlocks) + " x " +
                                       fp8ScaleBlocksName(rhsBlocks) + ")"
                                 : "")
                      : std::string(dtypeName(dtype)) + (tf32 ? "(tf32)" : "");
  s += " M=" + std::to_string(m) + " N=" + std::to_string(n) + " K=" + std::to_string(k);
  if (deviceAlpha)
    s += " device alpha";
  if (addend)
    s += " +addend";
  if (batch != 1)
    s += " batch " + std::to_string(batch);
  if (transposeLhs)
    s += " lhs^T";
  if (transposeRhs)
    s += " rhs^T";
  if (epilogue != MatmulEpilogue::None)
    s += std::string(" +") + matmulEpilogueName(epilogue);
  return s;
}

namespace {

std::atomic<bool> gMatmulTuning{true};

/// Two timings within this fraction of the fastest are a tie, which the
/// earlier way or candidate (the heuristic's order) wins: fewer processes
/// keep different algorithms for noise alone.
constexpr float kTimingTie = 0.01f;

/// The index of the way to keep: the first within kTimingTie of the fastest
/// of `ms` (negative: could not run); -1 when none ran.
int pickTimed(const std::vector<float> &ms) {
  float best = -1.0f;
  for (float t : ms)
    if (t >= 0.0f && (best < 0.0f || t < best))
      best = t;
  if (best < 0.0f)
    return -1;
  for (size_t i = 0; i < ms.size(); ++i)
    if (ms[i] >= 0.0f && ms[i] <= best * (1.0f + kTimingTie))
      return static_cast<int>(i);
  return -1;
}

const char *epiloguePathName(Matmul::EpiloguePath p) {
  switch (p) {
  case Matmul::EpiloguePath::Epilogue:
    return "epilogue";
  case Matmul::EpiloguePath::Separate:
    return "separate";
  case Matmul::EpiloguePath::Own:
    return "own";
  case Matmul::EpiloguePath::Library:
    return "library";
  case Matmul::EpiloguePath::Unknown:
    break;
  }
  return "unknown";
}

bool isBiasGrad(MatmulEpilogue e) {
  return e == MatmulEpilogue::BiasGradLhs || e == MatmulEpilogue::BiasGradRhs;
}
/// Whether the epilogue reads or (a bias gradient) writes cuBLASLt's bias
/// pointer.
bool hasBias(MatmulEpilogue e) {
  return e == MatmulEpilogue::Bias || e == MatmulEpilogue::BiasGelu ||
         e == MatmulEpilogue::BiasGeluAux || e == MatmulEpilogue::BiasGeluErfAux || isBiasGrad(e);
}
/// The exact GELU's epilogues (no cuBLASLt form).
bool isErf(MatmulEpilogue e) {
  return e == MatmulEpilogue::GeluErfAux || e == MatmulEpilogue::BiasGeluErfAux ||
         e == MatmulEpilogue::DGeluErf;
}
bool isDGelu(MatmulEpilogue e) {
  return e == MatmulEpilogue::DGelu || e == MatmulEpilogue::DGeluErf;
}
bool hasAux(MatmulEpilogue e) {
  return e == MatmulEpilogue::GeluAux || e == MatmulEpilogue::BiasGeluAux || isErf(e) || isDGelu(e);
}

cublasLtEpilogue_t toCublas(MatmulEpilogue e) {
  switch (e) {
  case MatmulEpilogue::None:
    return CUBLASLT_EPILOGUE_DEFAULT;
  case MatmulEpilogue::Bias:
    return CUBLASLT_EPILOGUE_BIAS;
  case MatmulEpilogue::Gelu:
    return CUBLASLT_EPILOGUE_GELU;
  case MatmulEpilogue::BiasGelu:
    return CUBLASLT_EPILOGUE_GELU_BIAS;
  case MatmulEpilogue::GeluAux:
    return CUBLASLT_EPILOGUE_GELU_AUX;
  case MatmulEpilogue::BiasGeluAux:
    return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  // cuBLASLt's A is our rhs, its B our lhs (the file comment of cublaslt.h).
  case MatmulEpilogue::BiasGradLhs:
    return CUBLASLT_EPILOGUE_BGRADB;
  case MatmulEpilogue::BiasGradRhs:
    return CUBLASLT_EPILOGUE_BGRADA;
  case MatmulEpilogue::DGelu:
    return CUBLASLT_EPILOGUE_DGELU;
  case MatmulEpilogue::GeluErfAux: // no cuBLASLt form: never planned
  case MatmulEpilogue::BiasGeluErfAux:
  case MatmulEpilogue::DGeluErf:
    break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

/// Largest power of two dividing the address, at most 256 (cuBLASLt's
/// heuristic picks vectorised kernels from it).
uint32_t alignmentOf(const void *p) {
  uintptr_t v = reinterpret_cast<uintptr_t>(p);
  if (v == 0)
    return 256;
  uintptr_t a = v & (~v + 1);
  return static_cast<uint32_t>(a > 256 ? 256 : a);
}

int64_t elementBytes(DType t) { return t == DType::F32 ? 4 : 2; }

cudaDataType_t cudaType(DType t) {
  switch (t) {
  case DType::F32:
    return CUDA_R_32F;
  case DType::BF16:
    return CUDA_R_16BF;
  case DType::F8E4M3FN:
    return CUDA_R_8F_E4M3;
  case DType::F8E5M2:
    return CUDA_R_8F_E5M2;
  default:
    return CUDA_R_16F;
  }
}

/// "" or why `d` is not a problem cuBLASLt's FP8 GEMMs take.
std::string fp8FormError(const MatmulDesc &d) {
  auto isFp8 = [](DType t) { return t == DType::F8E4M3FN || t == DType::F8E5M2; };
  if (!isFp8(d.lhsType) || !isFp8(d.rhsType))
    return "FP8 operands must be f8E4M3FN or f8E5M2";
  if (d.lhsType == DType::F8E5M2 && d.rhsType == DType::F8E5M2)
    return "cuBLASLt has no E5M2 x E5M2 GEMM";
  if (d.dtype != DType::F32 && d.dtype != DType::BF16 && d.dtype != DType::F16)
    return "an FP8 GEMM writes f32, bf16 or f16";
  if (!d.transposeRhs || d.transposeLhs)
    return "cuBLASLt's FP8 GEMMs are TN only: lhs [M, K] and rhs [N, K] (transposeRhs, not "
           "transposeLhs)";
  if (d.k % 16 != 0 || d.n % 16 != 0)
    return "FP8 needs K and N multiples of 16 (16-byte leading dimensions)";
  // cuBLASLt 13.1 on the H200 has FP8 algorithms for BIAS and GELU_AUX_BIAS
  // (/work probe, 2026-12-02); only the bias is wired up.
  if (d.epilogue != MatmulEpilogue::None && d.epilogue != MatmulEpilogue::Bias)
    return "FP8 operands take no epilogue but a bias";
  if (d.rowScales && d.epilogue != MatmulEpilogue::None)
    return "no epilogue with row scales";
  if (d.rowScales && d.fastAccum)
    return "no fast accumulation with row scales (cuBLASLt has no such algorithm)";
  if (d.tf32)
    return "tf32 does not apply to FP8";
  if (d.rowScales && d.batch != 1)
    return "row scales take one matrix (batch 1)";
  bool lb = d.lhsBlocks != Fp8ScaleBlocks::None, rb = d.rhsBlocks != Fp8ScaleBlocks::None;
  if (lb || rb) {
    // What cuBLASLt 13.1 finds algorithms for on the H200 (issue 11's
    // probe, /work/notes/probe.md of 2026-12-02): VEC128 x VEC128, VEC128 x
    // BLK128x128 either way; not BLK x BLK, not with fast accumulation or
    // an f32 result.
    if (lb != rb || d.rowScales)
      return "block scales take both operands block-scaled (no row or tensor scale beside them)";
    bool mxl = d.lhsBlocks == Fp8ScaleBlocks::Vec32Ue8m0;
    bool mxr = d.rhsBlocks == Fp8ScaleBlocks::Vec32Ue8m0;
    if (mxl != mxr)
      return "MXFP8's 1x32 E8M0 block scales take both operands (VEC32_UE8M0 x VEC32_UE8M0)";
    if (mxl && d.k % 32 != 0)
      return "MXFP8 needs K a multiple of 32 (whole 1x32 blocks)";
    if (d.lhsBlocks == Fp8ScaleBlocks::Blk128 && d.rhsBlocks == Fp8ScaleBlocks::Blk128)
      return "cuBLASLt has no 128x128 x 128x128 block-scaled GEMM (one operand in 1x128 blocks)";
    if (d.fastAccum)
      return "block-scaled FP8 GEMMs take no fast accumulation";
    if (d.dtype == DType::F32)
      return "block-scaled FP8 GEMMs write bf16 or f16";
    if (d.batch != 1)
      return "block scales take one matrix (batch 1)";
  }
  return "";
}

/// The strides of `d` with -1 resolved.
struct Strides {
  int64_t lhs, rhs, out;
};
Strides resolveStrides(const MatmulDesc &d) {
  return {d.strideLhs < 0 ? d.m * d.k : d.strideLhs, d.strideRhs < 0 ? d.k * d.n : d.strideRhs,
          d.strideOut < 0 ? d.m * d.n : d.strideOut};
}

Status setBatch(cublasLtMatrixLayout_t l, int64_t batch, int64_t stride) {
  if (batch == 1)
    return Status::ok();
  int32_t count = static_cast<int32_t>(batch);
  TC_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                             &count, sizeof count));
  TC_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(
      l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
  return Status::ok();
}

/// cuBLASLt's A and B scale modes (A is our rhs, B our lhs).
Status setScaleModes(cublasLtMatmulDesc_t op, int32_t modeA, int32_t modeB) {
  TC_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &modeA, sizeof modeA));
  TC_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &modeB, sizeof modeB));
  return Status::ok();
}

} // namespace

struct Matmul::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  /// The heuristic's candidates (best first) until the first eager call
  /// times them and keeps the fastest in `algo`.
  std::vector<cublasLtMatmulAlgo_t> candidates;
  bool tuned = false;
  /// The problem (MatmulDesc::toString) and its key in the tuning record:
  /// "algo <problem> <hash of the plan's key>" (the alignments, strides).
  std::string desc, recordKey;
  ~Plan() {
    if (op)
      cublasLtMatmulDescDestroy(op);
    if (a)
      cublasLtMatrixLayoutDestroy(a);
    if (b)
      cublasLtMatrixLayoutDestroy(b);
    if (c)
      cublasLtMatrixLayoutDestroy(c);
  }
};

Status Matmul::create(std::unique_ptr<Matmul> *out, void *workspace, size_t workspaceBytes) {
  TC_RETURN_IF_ERROR(requireGpu());
  std::unique_ptr<Matmul> mm(new Matmul());
  TC_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&mm->handle_));
  if (workspace) {
    mm->workspace_ = workspace;
    mm->workspaceBytes_ = workspaceBytes;
  } else {
    mm->workspaceBytes_ = workspaceBytes ? workspaceBytes : kDefaultWorkspaceBytes;
    TC_RETURN_IF_ERROR(cudaStatus(cudaMalloc(&mm->workspace_, mm->workspaceBytes_),
                                  "cudaMalloc(" + std::to_string(mm->workspaceBytes_) +
                                      " bytes) for the cuBLASLt workspace"));
    mm->ownsWorkspace_ = true;
  }
  const float consts[2] = {0.0f, 1.0f};
  TC_RETURN_IF_ERROR(cudaStatus(cudaMalloc(reinterpret_cast<void **>(&mm->consts_), sizeof consts),
                                "cudaMalloc for cuBLASLt's device beta"));
  TC_RETURN_IF_ERROR(cudaStatus(
      cudaMemcpy(mm->consts_, consts, sizeof consts, cudaMemcpyHostToDevice), "cudaMemcpy"));
  const char *own = std::getenv("TC_OWN_GEMM");
  mm->ownGemm_ = own && std::strcmp(own, "1") == 0;
  mm->ownAvailable_ = ownGemmAvailable();
  *out = std::move(mm);
  return Status::ok();
}

Matmul::~Matmul() {
  plans_.clear();
  if (handle_)
    cublasLtDestroy(handle_);
  if (ownsWorkspace_ && workspace_)
    (void)cudaFree(workspace_);
  if (consts_)
    (void)cudaFree(consts_);
  for (auto &[dtype, o] : ones_)
    if (o.ptr)
      (void)cudaFree(o.ptr);
  for (void *p : retiredOnes_)
    (void)cudaFree(p);
}

Status Matmul::setCallPointers(const MatmulDesc &d, Plan *plan, const void *bias, void *aux,
                               const float *scaleA, const float *scaleB) {
  if (hasBias(d.epilogue))
    TC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  if (hasAux(d.epilogue))
    TC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
  if (scaleA)
    TC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scaleA, sizeof scaleA));
  if (scaleB)
    TC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scaleB, sizeof scaleB));
  return Status::ok();
}

Status Matmul::getPlan(const MatmulDesc &d, const void *lhs, const void *rhs, void *out,
                       const void *bias, void *aux, Plan **result, const float *scaleA,
                       const float *scaleB) {
  Strides st = resolveStrides(d);
  // cuBLASLt "A" is our rhs, "B" our lhs, "C"/"D" our out (transposed view).
  uint32_t alignA = alignmentOf(rhs), alignB = alignmentOf(lhs), alignC = alignmentOf(out);
  uint32_t alignBias = hasBias(d.epilogue) ? alignmentOf(bias) : 0;
  uint32_t alignAux = hasAux(d.epilogue) ? alignmentOf(aux) : 0;
  const int64_t key[] = {d.m,
                         d.n,
                         d.k,
                         d.batch,
                         st.lhs,
                         st.rhs,
                         st.out,
                         alignA,
                         alignB,
                         alignC,
                         alignBias,
                         alignAux,
                         static_cast<int64_t>(d.dtype),
                         d.tf32,
                         d.transposeLhs,
                         d.transposeRhs,
                         static_cast<int64_t>(d.epilogue),
                         d.beta != 0.0f,
                         d.fp8,
                         static_cast<int64_t>(d.lhsType),
                         static_cast<int64_t>(d.rhsType),
                         d.fastAccum,
                         d.rowScales,
                         static_cast<int64_t>(d.lhsBlocks),
                         static_cast<int64_t>(d.rhsBlocks),
                         d.nvfp4,
                         d.deviceAlpha};
  std::string keyBytes(reinterpret_cast<const char *>(key), sizeof key);
  auto it = plans_.find(keyBytes);
  if (it != plans_.end()) {
    *result = it->second.get();
    return setCallPointers(d, *result, bias, aux, scaleA, scaleB);
  }

  auto plan = std::make_unique<Plan>();
  cudaDataType_t type = cudaType(d.dtype);
  // FP8: A (our rhs) and B (our lhs) in their own types, C/D the result's.
  cudaDataType_t typeA = d.fp8 ? cudaType(d.rhsType) : type;
  cudaDataType_t typeB = d.fp8 ? cudaType(d.lhsType) : type;
  if (d.nvfp4)
    typeA = typeB = CUDA_R_4F_E2M1;
  cublasComputeType_t compute =
      d.dtype == DType::F32 && d.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  TC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&plan->op, compute, CUDA_R_32F));
  cublasOperation_t opA = d.transposeRhs ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = d.transposeLhs ? CUBLAS_OP_T : CUBLAS_OP_N;
  TC_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA));
  TC_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB));
  if (d.fp8) {
    int8_t fast = d.fastAccum ? 1 : 0;
    TC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
    if (d.rowScales) {
      // A's scales are a vector over the rows of op(A) (our rhs: n), B's
      // over the columns of op(B) (our lhs: m).
      TC_RETURN_IF_ERROR(setScaleModes(plan->op, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
                                       CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F));
    }
    if (d.lhsBlocks != Fp8ScaleBlocks::None) {
      // A is our rhs [n, k], B our lhs [m, k], both K-contiguous (TN).
      auto modeOf = [](Fp8ScaleBlocks b) -> int32_t {
        if (b == Fp8ScaleBlocks::Vec32Ue8m0)
          return CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0;
        return b == Fp8ScaleBlocks::Vec128 ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F
                                           : CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
      };
      TC_RETURN_IF_ERROR(setScaleModes(plan->op, modeOf(d.rhsBlocks), modeOf(d.lhsBlocks)));
    }
  }
  if (d.nvfp4) {
    // E4M3 scales of 1x16 blocks; alpha (the tensor scales' product) and
    // beta on the device.
    TC_RETURN_IF_ERROR(setScaleModes(plan->op, CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3,
                                     CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3));
    int32_t pointerMode = CUBLASLT_POINTER_MODE_DEVICE;
    TC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pointerMode, sizeof pointerMode));
  }
  if (d.deviceAlpha) {
    int32_t pointerMode = CUBLASLT_POINTER_MODE_DEVICE;
    TC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pointerMode, sizeof pointerMode));
  }
  cublasLtEpilogue_t epi = toCublas(d.epilogue);
  TC_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
  // Before the heuristic query: with outer-vector or block scale modes
  // cuBLASLt refuses a plan without its scale pointers.
  TC_RETURN_IF_ERROR(setCallPointers(d, plan.get(), bias, aux, scaleA, scaleB));
  if (hasAux(d.epilogue)) {
    int64_t ld = d.n, stride = d.m * d.n;
    TC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
    if (d.batch > 1)
      TC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
          plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &stride, sizeof stride));
  }

  // Column-major views (see the file comment of cublaslt.h).
  uint64_t aRows = d.transposeRhs ? d.k : d.n, aCols = d.transposeRhs ? d.n : d.k;
  uint64_t bRows = d.transposeLhs ? d.m : d.k, bCols = d.transposeLhs ? d.k : d.m;
  TC_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatrixLayoutCreate(&plan->a, typeA, aRows, aCols, static_cast<int64_t>(aRows)));
  TC_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatrixLayoutCreate(&plan->b, typeB, bRows, bCols, static_cast<int64_t>(bRows)));
  TC_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan->c, type, d.n, d.m, d.n));
  TC_RETURN_IF_ERROR(setBatch(plan->a, d.batch, st.rhs));
  TC_RETURN_IF_ERROR(setBatch(plan->b, d.batch, st.lhs));
  TC_RETURN_IF_ERROR(setBatch(plan->c, d.batch, st.out));

  cublasLtMatmulPreference_t pref = nullptr;
  TC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
  struct PrefGuard {
    cublasLtMatmulPreference_t p;
    ~PrefGuard() { cublasLtMatmulPreferenceDestroy(p); }
  } guard{pref};
  uint64_t ws = workspaceBytes_;
  TC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  TC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignA, sizeof alignA));
  TC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignB, sizeof alignB));
  TC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignC, sizeof alignC));
  TC_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignC, sizeof alignC));

  constexpr int kCandidates = 8;
  cublasLtMatmulHeuristicResult_t heur[kCandidates] = {};
  int returned = 0;
  TC_RETURN_IF_ERROR(
      cublasStatus(cublasLtMatmulAlgoGetHeuristic(handle_, plan->op, plan->a, plan->b, plan->c,
                                                  plan->c, pref, kCandidates, heur, &returned),
                   "cublasLtMatmulAlgoGetHeuristic for " + d.toString()));
  if (returned == 0)
    return unimplemented("cuBLASLt has no algorithm for " + d.toString());
  plan->algo = heur[0].algo;
  for (int i = 0; i < returned; ++i)
    if (heur[i].state == CUBLAS_STATUS_SUCCESS)
      plan->candidates.push_back(heur[i].algo);
  plan->desc = d.toString();
  char hash[17];
  std::snprintf(
      hash, sizeof hash, "%016llx",
      static_cast<unsigned long long>(initrng::fnv1a64(keyBytes.data(), keyBytes.size())));
  plan->recordKey = "algo " + plan->desc + " " + hash;
  *result = plan.get();
  plans_.emplace(std::move(keyBytes), std::move(plan));
  return Status::ok();
}

namespace {
/// The checks every problem passes; *empty when it is a no-op (m, n or
/// batch 0).
Status checkProblem(const MatmulDesc &d, const void *lhs, const void *rhs, const void *out,
                    bool *empty) {
  if (d.m < 0 || d.n < 0 || d.k < 0 || d.batch < 0)
    return invalidArgument("matmul: negative size (" + d.toString() + ")");
  *empty = d.m == 0 || d.n == 0 || d.batch == 0;
  if (*empty)
    return Status::ok();
  if (d.k == 0)
    return unimplemented("matmul: K == 0 (" + d.toString() + ")");
  if (d.batch > INT32_MAX)
    return invalidArgument("matmul: batch above 2^31 (" + d.toString() + ")");
  if (!lhs || !rhs || !out)
    return invalidArgument("matmul: null operand (" + d.toString() + ")");
  return Status::ok();
}
} // namespace

Status Matmul::run(const MatmulDesc &d, const void *lhs, const void *rhs, void *out,
                   cudaStream_t stream, const void *bias, void *aux, const float *deviceAlpha,
                   const void *addend) {
  if (d.fp8 || d.rowScales)
    return invalidArgument("matmul: FP8 operands (and row scales) run through runFp8 (" +
                           d.toString() + ")");
  if (d.deviceAlpha != (deviceAlpha != nullptr))
    return invalidArgument(std::string("matmul: ") +
                           (d.deviceAlpha ? "a device alpha problem without its alpha pointer"
                                          : "an alpha pointer for a host alpha problem") +
                           " (" + d.toString() + ")");
  if (d.deviceAlpha && d.beta != 0.0f && d.beta != 1.0f)
    return invalidArgument("matmul: a device alpha takes beta 0 or 1 (" + d.toString() + ")");
  if (d.addend != (addend != nullptr))
    return invalidArgument(std::string("matmul: ") +
                           (d.addend ? "an addend problem without its addend pointer"
                                     : "an addend pointer for a problem without one") +
                           " (" + d.toString() + ")");
  if (d.addend && (d.deviceAlpha || d.beta != 0.0f))
    return invalidArgument("matmul: an addend takes beta 0 and a host alpha (" + d.toString() +
                           ")");
  if (d.dtype != DType::F32 && d.dtype != DType::BF16 && d.dtype != DType::F16)
    return invalidArgument(std::string("matmul: dtype must be f32, bf16 or f16, got ") +
                           dtypeName(d.dtype));
  if (d.tf32 && d.dtype != DType::F32)
    return invalidArgument("matmul: tf32 applies to f32 only (" + d.toString() + ")");
  bool empty = false;
  TC_RETURN_IF_ERROR(checkProblem(d, lhs, rhs, out, &empty));
  if (empty)
    return Status::ok();
  if (hasBias(d.epilogue) && !bias)
    return invalidArgument("matmul: the epilogue needs a bias (" + d.toString() + ")");
  if (isBiasGrad(d.epilogue))
    return runBiasGrad(d, lhs, rhs, out, const_cast<void *>(bias), stream);
  if (hasAux(d.epilogue)) {
    if (!aux)
      return invalidArgument("matmul: the epilogue needs an aux buffer (" + d.toString() + ")");
    // (cuBLASLt's aux leading dimension; the exact GELU's forms take any N.)
    if (d.n % 8 != 0 && !isErf(d.epilogue))
      return invalidArgument("matmul: a GELU aux output needs N % 8 == 0 (" + d.toString() + ")");
  }
  if (isDGelu(d.epilogue))
    return runDGelu(d, lhs, rhs, out, aux, stream);
  if (hasAux(d.epilogue)) {
    const bool erf = isErf(d.epilogue);
    std::function<Status()> own = ownForm(d, lhs, rhs, out, bias, aux, stream);
    std::function<Status()> library = libraryForm(d, lhs, rhs, out, bias, aux, stream);
    if (erf || own || library) {
      // The exact GELU's separate form: the product (+ bias) as aux, then
      // out = gelu(aux).
      std::function<Status()> separate;
      if (erf) {
        if (d.beta != 0.0f || d.addend || d.deviceAlpha)
          return invalidArgument("matmul: an exact GELU epilogue takes beta 0, no addend and no "
                                 "device alpha (" +
                                 d.toString() + ")");
        separate = [this, d, lhs, rhs, out, bias, aux, stream]() -> Status {
          MatmulDesc plain = d;
          plain.epilogue = hasBias(d.epilogue) ? MatmulEpilogue::Bias : MatmulEpilogue::None;
          TC_RETURN_IF_ERROR(run(plain, lhs, rhs, aux, stream, bias));
          return geluForward(d.dtype, GeluApprox::None, aux, out, d.batch * d.m * d.n, stream);
        };
      }
      auto epiloguePlan = [&]() -> Plan * {
        Plan *plan = nullptr;
        return !erf && getPlan(d, lhs, rhs, out, bias, aux, &plan).isOk() ? plan : nullptr;
      };
      return epilogueOrSeparate(d, epiloguePlan, separate, stream, lhs, rhs, out, own, library);
    }
  }
  Strides st = resolveStrides(d);
  if (st.out == 0 && d.batch > 1)
    return invalidArgument("matmul: out stride 0 with batch > 1 (" + d.toString() + ")");

  Plan *plan = nullptr;
  // C (the addend) and D share a layout: the plan takes the lesser alignment.
  void *cd = d.addend && alignmentOf(addend) < alignmentOf(out) ? const_cast<void *>(addend) : out;
  TC_RETURN_IF_ERROR(getPlan(d, lhs, rhs, cd, bias, aux, &plan));
  float alpha = d.alpha, beta = d.addend ? 1.0f : d.beta;
  const float *alphaP = &alpha, *betaP = &beta;
  const void *c = d.addend ? addend : out;
  if (d.deviceAlpha) {
    alphaP = deviceAlpha;
    betaP = consts_ + (d.beta != 0.0f ? 1 : 0);
    plan->tuned = true; // tune() times candidates with host scalars
  }
  if (!plan->tuned)
    TC_RETURN_IF_ERROR(tune(d, plan, lhs, rhs, out, stream));
  TC_RETURN_IF_ERROR(cublasStatus(cublasLtMatmul(handle_, plan->op, alphaP, rhs, plan->a, lhs,
                                                 plan->b, betaP, c, plan->c, out, plan->c,
                                                 &plan->algo, workspace_, workspaceBytes_, stream),
                                  "cublasLtMatmul " + d.toString()));
  return Status::ok();
}

Matmul::EpiloguePath Matmul::epiloguePath(const MatmulDesc &d) const {
  auto it = epiloguePaths_.find(d.toString());
  return it == epiloguePaths_.end() ? EpiloguePath::Unknown : it->second;
}

std::function<Status()> Matmul::ownForm(const MatmulDesc &d, const void *lhs, const void *rhs,
                                        void *out, const void *bias, void *aux,
                                        cudaStream_t stream) {
  if (!ownGemm_ || d.dtype != DType::BF16 || d.fp8 || d.nvfp4 || d.batch != 1 || d.transposeLhs ||
      d.alpha != 1.0f || d.beta != 0.0f || d.addend || d.deviceAlpha || !hasAux(d.epilogue) ||
      !ownGemmShapeFits(d.m, d.n, d.k) || !ownAvailable_)
    return {};
  OwnGemmArgs g;
  g.epilogue = isDGelu(d.epilogue) ? OwnGemmEpilogue::DGelu : OwnGemmEpilogue::GeluAux;
  g.exact = isErf(d.epilogue);
  g.a = lhs;
  g.b = rhs;
  g.bKMajor = d.transposeRhs; // rhs stored [n, k]
  g.bias = hasBias(d.epilogue) ? bias : nullptr;
  g.aux = aux;
  g.out = out;
  g.m = d.m, g.n = d.n, g.k = d.k;
  const void *pointers[] = {g.a, g.b, g.bias, g.aux, g.out};
  for (const void *p : pointers)
    if (p && alignmentOf(p) < 16)
      return {};
  if (g.epilogue == OwnGemmEpilogue::GeluAux && g.out == g.aux)
    return {};
  return [g, stream] { return ownGemm(g, stream); };
}

std::function<Status()> Matmul::libraryForm(const MatmulDesc &d, const void *lhs, const void *rhs,
                                            void *out, const void *bias, void *aux,
                                            cudaStream_t stream) {
  if (d.dtype != DType::BF16 || d.fp8 || d.nvfp4 || d.batch != 1 || d.transposeLhs ||
      d.alpha != 1.0f || d.beta != 0.0f || d.addend || d.deviceAlpha || out == aux ||
      (d.epilogue != MatmulEpilogue::GeluAux && d.epilogue != MatmulEpilogue::BiasGeluAux))
    return {};
  TcCudnnMatmulGeluAux g{};
  g.m = d.m, g.n = d.n, g.k = d.k;
  g.rhsKMajor = d.transposeRhs ? 1 : 0; // rhs stored [n, k]
  g.lhs = lhs, g.rhs = rhs, g.out = out, g.aux = aux;
  g.bias = hasBias(d.epilogue) ? bias : nullptr;
  const void *pointers[] = {g.lhs, g.rhs, g.bias, g.aux, g.out};
  for (const void *p : pointers)
    if (p && alignmentOf(p) < 16)
      return {};
  bool ready = false;
  if (!cudnnMatmulGeluAux(g, stream, /*prepareOnly=*/true, &ready).isOk() || !ready)
    return {};
  return [g, stream]() -> Status {
    bool taken = false;
    TC_RETURN_IF_ERROR(cudnnMatmulGeluAux(g, stream, false, &taken));
    return taken ? Status::ok()
                 : internalError("cuDNN's GEMM + GELU plan went missing after it was built");
  };
}

Status Matmul::epilogueOrSeparate(const MatmulDesc &d, const std::function<Plan *()> &planOf,
                                  const std::function<Status()> &separate, cudaStream_t stream,
                                  const void *lhs, const void *rhs, void *out,
                                  const std::function<Status()> &own,
                                  const std::function<Status()> &library) {
  auto epilogue = [&](Plan *plan) -> Status {
    if (!plan->tuned)
      TC_RETURN_IF_ERROR(tune(d, plan, lhs, rhs, out, stream));
    float alpha = d.alpha, beta = 0.0f;
    return cublasStatus(cublasLtMatmul(handle_, plan->op, &alpha, rhs, plan->a, lhs, plan->b,
                                       &beta, out, plan->c, out, plan->c, &plan->algo, workspace_,
                                       workspaceBytes_, stream),
                        "cublasLtMatmul " + d.toString());
  };
  EpiloguePath &path = epiloguePaths_[d.toString()];
  if (path == EpiloguePath::Unknown) {
    // The ways this problem can run, in this order: cuBLASLt's epilogue
    // (where it has an algorithm), the separate form, tc's own kernel.
    std::vector<std::pair<EpiloguePath, std::function<Status()>>> ways;
    if (forceOwn_ && own) {
      ways.emplace_back(EpiloguePath::Own, own);
    } else if (forceLibrary_ && library) {
      ways.emplace_back(EpiloguePath::Library, library);
    } else if (forceSeparate_ && separate) {
      ways.emplace_back(EpiloguePath::Separate, separate);
    } else {
      if (Plan *plan = planOf())
        ways.emplace_back(EpiloguePath::Epilogue, [&epilogue, plan] { return epilogue(plan); });
      if (separate)
        ways.emplace_back(EpiloguePath::Separate, separate);
      if (own)
        ways.emplace_back(EpiloguePath::Own, own);
      if (library)
        ways.emplace_back(EpiloguePath::Library, library);
    }
    if (ways.empty())
      return unimplemented("cuBLASLt has no algorithm for " + d.toString() +
                           " and it has no other form here");
    path = ways[0].first;
    // The first eager call times every way (each twice after a warm-up:
    // cuBLASLt's epilogue kernels can be slower than the product and the
    // separate pass, as its DGELU_BGRAD is on the H200) and keeps the
    // fastest (the earliest of a tie); the first way where tuning is off or
    // a graph is captured. A way the tuning record holds for the problem is
    // taken without timing, where this call has it.
    const std::string recordKey = "path " + d.toString();
    bool recorded = false;
    bool tuning = ways.size() > 1 && gMatmulTuning.load(std::memory_order_relaxed);
    if (tuning && record_) {
      if (std::optional<std::string> v = record_->get(recordKey))
        for (auto &[way, run] : ways)
          if (*v == epiloguePathName(way)) {
            path = way;
            recorded = true;
          }
    }
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    TC_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &capture));
    if (tuning && !recorded && capture == cudaStreamCaptureStatusNone) {
      std::vector<float> times;
      for (auto &[way, run] : ways) {
        cudaEvent_t start = nullptr, stop = nullptr;
        TC_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
        TC_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
        Status st = Status::ok();
        for (int rep = 0; rep < 3 && st.isOk(); ++rep) {
          if (rep == 1)
            cudaEventRecord(start, stream);
          st = run();
        }
        cudaEventRecord(stop, stream);
        float ms = 0.0f;
        if (st.isOk())
          st = cudaStatus(cudaEventSynchronize(stop), "cudaEventSynchronize");
        if (st.isOk())
          st = cudaStatus(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
        cudaEventDestroy(start);
        cudaEventDestroy(stop);
        TC_RETURN_IF_ERROR(st);
        times.push_back(ms);
      }
      int pick = pickTimed(times);
      if (pick >= 0) {
        path = ways[static_cast<size_t>(pick)].first;
        if (record_)
          (void)record_->put(recordKey, epiloguePathName(path));
      }
    }
  }
  if (path == EpiloguePath::Own && own)
    return own();
  if (path == EpiloguePath::Library && library)
    return library();
  if (path == EpiloguePath::Separate && separate)
    return separate();
  // The epilogue; or where this call cannot run the way taken (the same
  // problem at another alignment, where cuBLASLt has no algorithm or the
  // pointers are not ones ownGemm takes), the first other way it can.
  if (Plan *plan = planOf())
    return epilogue(plan);
  if (separate)
    return separate();
  if (own)
    return own();
  if (library)
    return library();
  return unimplemented("cuBLASLt has no algorithm for " + d.toString() +
                       " and it has no other form here");
}

Status Matmul::ones(DType dtype, int64_t k, const void **out, cudaStream_t stream) {
  Ones &o = ones_[static_cast<int>(dtype)];
  if (o.count < k) {
    // A new, larger vector; the old one stays allocated (a CUDA graph
    // captured earlier may read it) until the Matmul goes.
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    TC_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &capture));
    if (capture != cudaStreamCaptureStatusNone)
      return failedPrecondition("matmul: a bias gradient's ones vector of " + std::to_string(k) +
                                " elements is first needed while a CUDA graph is captured "
                                "(run the function eagerly once first)");
    if (o.ptr)
      retiredOnes_.push_back(o.ptr);
    o = Ones();
    int bytes = static_cast<int>(elementBytes(dtype));
    TC_RETURN_IF_ERROR(cudaStatus(cudaMalloc(&o.ptr, static_cast<size_t>(k) * bytes),
                                  "cudaMalloc of a bias gradient's ones vector (" +
                                      std::to_string(k) + " elements)"));
    o.count = k;
    uint64_t one = dtype == DType::F32    ? 0x3F800000u
                   : dtype == DType::BF16 ? 0x3F80u
                                          : 0x3C00u; // f16
    TC_RETURN_IF_ERROR(fillBuffer(o.ptr, bytes, one, k, stream));
  }
  *out = o.ptr;
  return Status::ok();
}

Status Matmul::runBiasGrad(const MatmulDesc &d, const void *lhs, const void *rhs, void *out,
                           void *biasGrad, cudaStream_t stream) {
  if (d.batch != 1 || d.alpha != 1.0f || d.beta != 0.0f || d.addend || d.deviceAlpha)
    return invalidArgument("matmul: a bias gradient takes batch 1, alpha 1, beta 0, no addend "
                           "and no device alpha (" + d.toString() + ")");
  bool lhsSide = d.epilogue == MatmulEpilogue::BiasGradLhs;
  MatmulDesc plain = d;
  plain.epilogue = MatmulEpilogue::None;
  // The separate sum: the column sums of the operand stored [k, cols] (the
  // weight-gradient GEMMs' dY), its partial sums in the workspace the plain
  // product is done with (the same stream); else ones[1, k] @ op(operand)
  // [k, cols] (op(lhs)^T for lhs).
  MatmulDesc sum;
  sum.dtype = d.dtype;
  sum.m = 1;
  sum.n = lhsSide ? d.m : d.n;
  sum.k = d.k;
  sum.transposeRhs = lhsSide ? !d.transposeLhs : d.transposeRhs;
  const void *operand = lhsSide ? lhs : rhs;
  bool columns = !sum.transposeRhs && workspaceBytes_ >= static_cast<size_t>(sum.n) * 4;
  auto separate = [&]() -> Status {
    TC_RETURN_IF_ERROR(run(plain, lhs, rhs, out, stream));
    if (columns)
      return columnSums(d.dtype, operand, d.k, sum.n, biasGrad, static_cast<float *>(workspace_),
                        workspaceBytes_, stream);
    const void *one = nullptr;
    TC_RETURN_IF_ERROR(ones(d.dtype, d.k, &one, stream));
    return run(sum, one, operand, biasGrad, stream);
  };
  // The BGRAD plan, its bias pointer set for this call; null where cuBLASLt
  // has none for the problem (any heuristic error: the plain product's own
  // plan reports a problem that is wrong in itself).
  auto epiloguePlan = [&]() -> Plan * {
    Plan *plan = nullptr;
    return getPlan(d, lhs, rhs, out, biasGrad, nullptr, &plan).isOk() ? plan : nullptr;
  };
  return epilogueOrSeparate(d, epiloguePlan, separate, stream, lhs, rhs, out);
}

Status Matmul::runDGelu(const MatmulDesc &d, const void *lhs, const void *rhs, void *out,
                        const void *aux, cudaStream_t stream) {
  if (d.beta != 0.0f || d.addend || d.deviceAlpha)
    return invalidArgument("matmul: DGELU takes beta 0, no addend and no device alpha (" +
                           d.toString() + ")");
  MatmulDesc plain = d;
  plain.epilogue = MatmulEpilogue::None;
  int64_t n = d.batch * d.m * d.n;
  const bool erf = isErf(d.epilogue);
  auto separate = [&]() -> Status {
    TC_RETURN_IF_ERROR(run(plain, lhs, rhs, out, stream));
    return geluBackward(d.dtype, erf ? GeluApprox::None : GeluApprox::Tanh, aux, out, out, n,
                        stream);
  };
  // (cuBLASLt's DGELU is the tanh form's only.)
  auto epiloguePlan = [&]() -> Plan * {
    Plan *plan = nullptr;
    return !erf && getPlan(d, lhs, rhs, out, nullptr, const_cast<void *>(aux), &plan).isOk()
               ? plan
               : nullptr;
  };
  return epilogueOrSeparate(d, epiloguePlan, separate, stream, lhs, rhs, out,
                            ownForm(d, lhs, rhs, out, nullptr, const_cast<void *>(aux), stream));
}

Status Matmul::runFp8(const MatmulDesc &d, const void *lhs, const float *lhsScaleInv,
                      const void *rhs, const float *rhsScaleInv, void *out, cudaStream_t stream,
                      const void *bias) {
  if (!d.fp8)
    return invalidArgument("matmul: runFp8 takes FP8 problems (" + d.toString() + ")");
  if (std::string e = fp8FormError(d); !e.empty())
    return invalidArgument("matmul: " + e + " (" + d.toString() + ")");
  bool empty = false;
  TC_RETURN_IF_ERROR(checkProblem(d, lhs, rhs, out, &empty));
  if (empty)
    return Status::ok();
  if (!lhsScaleInv || !rhsScaleInv)
    return invalidArgument("matmul: an FP8 problem needs both scales (" + d.toString() + ")");
  Strides st = resolveStrides(d);
  if (st.out == 0 && d.batch > 1)
    return invalidArgument("matmul: out stride 0 with batch > 1 (" + d.toString() + ")");
  if (hasBias(d.epilogue) && !bias)
    return invalidArgument("matmul: the epilogue needs a bias (" + d.toString() + ")");
  Plan *plan = nullptr;
  // cuBLASLt's A is our rhs.
  TC_RETURN_IF_ERROR(getPlan(d, lhs, rhs, out, bias, nullptr, &plan, rhsScaleInv, lhsScaleInv));
  float alpha = d.alpha, beta = d.beta;
  if (!plan->tuned)
    TC_RETURN_IF_ERROR(tune(d, plan, lhs, rhs, out, stream));
  return cublasStatus(cublasLtMatmul(handle_, plan->op, &alpha, rhs, plan->a, lhs, plan->b, &beta,
                                     out, plan->c, out, plan->c, &plan->algo, workspace_,
                                     workspaceBytes_, stream),
                      "cublasLtMatmul " + d.toString());
}

Status Matmul::runMxfp8(const MatmulDesc &d, const void *lhs, const uint8_t *lhsScales,
                        const void *rhs, const uint8_t *rhsScales, void *out,
                        cudaStream_t stream) {
  if (d.lhsBlocks != Fp8ScaleBlocks::Vec32Ue8m0 || d.rhsBlocks != Fp8ScaleBlocks::Vec32Ue8m0)
    return invalidArgument("matmul: runMxfp8 takes 1x32 E8M0 block scales on both operands (" +
                           d.toString() + ")");
  if (std::string e = fp8FormError(d); !e.empty())
    return invalidArgument("matmul: " + e + " (" + d.toString() + ")");
  // cuBLASLt has VEC32_UE8M0 kernels for the block-scaled tensor cores of
  // sm_100 / sm_120 only: say which GPU this is rather than pass on the
  // heuristic's status.
  int major = 0, minor = 0;
  TC_RETURN_IF_ERROR(currentComputeCapability(&major, &minor));
  if (major < 10)
    return unimplemented("matmul: MXFP8 (cuBLASLt's VEC32_UE8M0 block scales) needs the "
                         "block-scaled FP8 tensor cores of sm_100 / sm_120, this GPU is sm_" +
                         std::to_string(major * 10 + minor) + " (" + d.toString() +
                         "): compile with --fp8-scaling block128 or row for it");
  // cuBLASLt's scale pointers are opaque device pointers: E8M0 bytes here.
  return runFp8(d, lhs, reinterpret_cast<const float *>(lhsScales), rhs,
                reinterpret_cast<const float *>(rhsScales), out, stream);
}

Status Matmul::runNvfp4(const Nvfp4Gemm &g, cudaStream_t stream) {
  MatmulDesc d;
  d.dtype = DType::BF16;
  d.nvfp4 = true;
  d.transposeRhs = true; // TN: lhs [m, k], rhs [n, k]
  d.m = g.m;
  d.n = g.n;
  d.k = g.k;
  bool empty = false;
  TC_RETURN_IF_ERROR(checkProblem(d, g.lhs, g.rhs, g.out, &empty));
  if (empty)
    return Status::ok();
  if (!g.lhsScales || !g.rhsScales || !g.lhsTensorScale || !g.rhsTensorScale || !g.scalars)
    return invalidArgument("matmul: an NVFP4 problem needs its block scales, tensor scales and "
                           "scalars (" + d.toString() + ")");
  // 16-byte leading dimensions of packed E2M1 rows.
  if (d.k % 32 != 0)
    return invalidArgument("matmul: NVFP4 needs K a multiple of 32 (" + d.toString() + ")");
  TC_RETURN_IF_ERROR(nvfp4GemmScalars(g.lhsTensorScale, g.rhsTensorScale, g.scalars, stream));
  // cuBLASLt's A is our rhs; the scale arrays are bytes, passed as the
  // pointers getPlan sets before the heuristic query.
  auto *scaleA = reinterpret_cast<const float *>(g.rhsScales);
  auto *scaleB = reinterpret_cast<const float *>(g.lhsScales);
  Plan *plan = nullptr;
  if (Status st = getPlan(d, g.lhs, g.rhs, g.out, nullptr, nullptr, &plan, scaleA, scaleB);
      !st.isOk()) // every error names the problem (an FP4 layout, say, where FP4 is unknown)
    return Status(st.code(), "matmul " + d.toString() + ": " + st.message());
  // tune() times candidates with host scalars: not in device pointer mode.
  plan->tuned = true;
  return cublasStatus(cublasLtMatmul(handle_, plan->op, g.scalars, g.rhs, plan->a, g.lhs, plan->b,
                                     g.scalars + 1, g.out, plan->c, g.out, plan->c, &plan->algo,
                                     workspace_, workspaceBytes_, stream),
                      "cublasLtMatmul " + d.toString());
}

void setMatmulTuning(bool on) { gMatmulTuning.store(on, std::memory_order_relaxed); }

Status Matmul::tune(const MatmulDesc &d, Plan *plan, const void *lhs, const void *rhs, void *out,
                    cudaStream_t stream) {
  // The heuristic's first choice is sometimes several times slower than its
  // runners-up (seen: bf16 16384x2304x768 with rhs^T on the H200), so the
  // first eager call of a plan times every candidate (2 runs each after a
  // warm-up) and keeps the fastest (the earliest of a tie: pickTimed). Not
  // while a stream is captured into a graph, not when the call accumulates
  // into `out` (beta != 0), and not with setMatmulTuning(false) (tc-run:
  // TC_MATMUL_TUNE=0; then the heuristic's first choice, reproducibly). A
  // choice the tuning record holds for the plan is taken without timing.
  plan->tuned = true;
  bool enabled = gMatmulTuning.load(std::memory_order_relaxed);
  if (!enabled || plan->candidates.size() < 2 || d.beta != 0.0f)
    return Status::ok();
  const std::string count = std::to_string(plan->candidates.size());
  if (record_) {
    // "<index> of <count>": the heuristic lists the same candidates for the
    // same problem, device and library; another count is a stale choice.
    if (std::optional<std::string> v = record_->get(plan->recordKey)) {
      size_t sp = v->find(" of ");
      if (sp != std::string::npos && v->substr(sp + 4) == count) {
        char *end = nullptr;
        long i = std::strtol(v->c_str(), &end, 10);
        if (end == v->c_str() + sp && i >= 0 && i < static_cast<long>(plan->candidates.size())) {
          plan->algo = plan->candidates[static_cast<size_t>(i)];
          return Status::ok();
        }
      }
    }
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  TC_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone)
    return Status::ok();
  cudaEvent_t start = nullptr, stop = nullptr;
  TC_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  TC_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  float alpha = d.alpha, beta = 0.0f;
  std::vector<float> times;
  for (const cublasLtMatmulAlgo_t &algo : plan->candidates) {
    bool ok = true;
    for (int rep = 0; rep < 3 && ok; ++rep) {
      if (rep == 1)
        cudaEventRecord(start, stream);
      ok = cublasLtMatmul(handle_, plan->op, &alpha, rhs, plan->a, lhs, plan->b, &beta, out,
                          plan->c, out, plan->c, &algo, workspace_, workspaceBytes_,
                          stream) == CUBLAS_STATUS_SUCCESS;
    }
    cudaEventRecord(stop, stream);
    float ms = 0;
    if (!ok || cudaEventSynchronize(stop) != cudaSuccess ||
        cudaEventElapsedTime(&ms, start, stop) != cudaSuccess)
      ms = -1.0f;
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGetLastError();
  int pick = pickTimed(times);
  if (pick < 0)
    return Status::ok(); // none ran: the heuristic's first choice
  plan->algo = plan->candidates[static_cast<size_t>(pick)];
  // The record is a cache: a folder that cannot be written costs later
  // processes a timing, never this run.
  if (record_)
    (void)record_->put(plan->recordKey, std::to_string(pick) + " of " + count);
  return Status::ok();
}

std::string Matmul::tuningIdentity(const DeviceInfo &info) {
  return info.name + " " + info.smName() + " " + std::to_string(info.smCount) + " SMs cuBLASLt " +
         std::to_string(cublasLtGetVersion()) + " tc " + kTcVersion;
}

int Matmul::chosenCandidate(const MatmulDesc &d) const {
  std::string desc = d.toString();
  for (const auto &[key, plan] : plans_) {
    if (plan->desc != desc)
      continue;
    for (size_t i = 0; i < plan->candidates.size(); ++i)
      if (std::memcmp(&plan->candidates[i], &plan->algo, sizeof plan->algo) == 0)
        return static_cast<int>(i);
    return -1;
  }
  return -1;
}

Status planBatches(const std::vector<int64_t> &lhsBatch, const std::vector<int64_t> &rhsBatch,
                   BatchPlan *out) {
  size_t r = std::max(lhsBatch.size(), rhsBatch.size());
  std::vector<int64_t> a(r, 1), b(r, 1), o(r, 1);
  std::copy(lhsBatch.begin(), lhsBatch.end(), a.begin() + (r - lhsBatch.size()));
  std::copy(rhsBatch.begin(), rhsBatch.end(), b.begin() + (r - rhsBatch.size()));
  for (size_t d = 0; d < r; ++d) {
    if (a[d] < 0 || b[d] < 0)
      return invalidArgument("matmul: negative batch dimension");
    if (a[d] == b[d] || b[d] == 1)
      o[d] = a[d];
    else if (a[d] == 1)
      o[d] = b[d];
    else
      return invalidArgument("matmul: batch dimension " + std::to_string(d) + " of lhs (" +
                             std::to_string(a[d]) + ") and rhs (" + std::to_string(b[d]) +
                             ") do not broadcast");
  }
  BatchPlan plan;
  plan.outBatch = o;
  // The innermost run of batch dims [j, r) over which each operand is either
  // entirely present (its index follows the output's: stride one matrix) or
  // entirely broadcast (stride 0). Dims of size 1 in the output fit both.
  enum Cls { None, Present, Broadcast };
  Cls ca = None, cb = None;
  auto fits = [](Cls &run, int64_t opDim, int64_t outDim) {
    if (outDim == 1)
      return true;
    Cls c = opDim == outDim ? Present : Broadcast;
    if (run == None)
      run = c;
    return run == c;
  };
  size_t j = r;
  while (j > 0) {
    Cls na = ca, nb = cb;
    if (!fits(na, a[j - 1], o[j - 1]) || !fits(nb, b[j - 1], o[j - 1]))
      break;
    ca = na;
    cb = nb;
    --j;
  }
  int64_t inner = 1, outer = 1;
  for (size_t d = j; d < r; ++d)
    inner *= o[d];
  for (size_t d = 0; d < j; ++d)
    outer *= o[d];
  plan.batchPerCall = inner;
  plan.lhsStrided = ca != Broadcast;
  plan.rhsStrided = cb != Broadcast;
  if (inner == 0 || outer == 0) {
    *out = std::move(plan);
    return Status::ok();
  }
  // Row-major strides (in matrices) of the padded operand batch shapes.
  std::vector<int64_t> sa(r, 1), sb(r, 1);
  for (size_t d = r; d-- > 1;) {
    sa[d - 1] = sa[d] * a[d];
    sb[d - 1] = sb[d] * b[d];
  }
  std::vector<int64_t> idx(j, 0);
  for (int64_t c = 0; c < outer; ++c) {
    BatchPlan::Call call;
    for (size_t d = 0; d < j; ++d) {
      call.lhs += (a[d] == 1 ? 0 : idx[d]) * sa[d];
      call.rhs += (b[d] == 1 ? 0 : idx[d]) * sb[d];
    }
    call.out = c * inner;
    plan.calls.push_back(call);
    for (size_t d = j; d-- > 0;) {
      if (++idx[d] < o[d])
        break;
      idx[d] = 0;
    }
  }
  *out = std::move(plan);
  return Status::ok();
}

Status Matmul::runBroadcast(const MatmulDesc &d, const std::vector<int64_t> &lhsBatch,
                            const std::vector<int64_t> &rhsBatch, const void *lhs, const void *rhs,
                            void *out, cudaStream_t stream, const void *bias,
                            const float *deviceAlpha) {
  if (hasAux(d.epilogue))
    return invalidArgument("matmul: runBroadcast does not take an aux epilogue");
  BatchPlan plan;
  TC_RETURN_IF_ERROR(planBatches(lhsBatch, rhsBatch, &plan));
  MatmulDesc call = d;
  if (plan.lhsStrided && !plan.rhsStrided && !d.transposeLhs) {
    // One rhs for a run of packed lhs matrices (a Linear layer over
    // [batch..., M, K]): the run is a single GEMM with M * batch rows.
    call.m = d.m * plan.batchPerCall;
    call.batch = 1;
    call.strideLhs = call.strideRhs = call.strideOut = -1;
  } else {
    call.batch = plan.batchPerCall;
    call.strideLhs = plan.lhsStrided ? d.m * d.k : 0;
    call.strideRhs = plan.rhsStrided ? d.k * d.n : 0;
    call.strideOut = d.m * d.n;
  }
  int64_t eb = elementBytes(d.dtype);
  for (const BatchPlan::Call &c : plan.calls) {
    const char *l = static_cast<const char *>(lhs) + c.lhs * d.m * d.k * eb;
    const char *rr = static_cast<const char *>(rhs) + c.rhs * d.k * d.n * eb;
    char *o = static_cast<char *>(out) + c.out * d.m * d.n * eb;
    TC_RETURN_IF_ERROR(run(call, l, rr, o, stream, bias, nullptr, deviceAlpha));
  }
  return Status::ok();
}

} // namespace tc::rt::cuda
