//===- cublaslt.h - the one matmul wrapper (cuBLASLt) ------------*- C++ -*-===//
//
// Every matmul of the CUDA backend goes through Matmul::run: the compiler
// targets this wrapper, never raw GEMM calls. Semantics are tc.matmul's, in
// row-major terms:
//
//   out[b, M, N] = alpha * op(lhs[b]) op(rhs[b]) + beta * out[b]  (+ bias[N])
//                  (then GELU, tanh approximation, when asked)
//   lhs [b, M, K] ([b, K, M] with transposeLhs), rhs [b, K, N] ([b, N, K]
//   with transposeRhs), b strided (stride 0 broadcasts one matrix to every
//   batch); runBroadcast takes tc.matmul's numpy-style batch dimensions.
//
// Row-major is mapped onto cuBLASLt's column-major by computing
// out^T = op(rhs)^T op(lhs)^T: cuBLASLt's "A" is our rhs and its "B" our lhs,
// so bias[N] is the per-row bias of cuBLASLt's D (its native epilogue).
//
// dtypes: f32 (compute f32, or TF32 tensor cores with `tf32`), bf16 and f16
// (fp32 accumulation and scaling, bf16/f16 bias), and FP8 operands (runFp8:
// E4M3/E5M2 with f32 dequantisation scales, fp32 accumulation, a bf16, f16
// or f32 result). cuBLASLt's FP8 GEMMs are "TN" only: its A transposed and
// B not. With A = our rhs and B = our lhs that is transposeRhs and not
// transposeLhs: both operands stored with K contiguous (lhs [M, K], rhs
// [N, K], a Linear layer's x and W); dgrad and wgrad read transposed FP8
// copies, which the quantize kernel writes. The algorithm is chosen by
// cuBLASLt's heuristic once per (problem, pointer alignment) and cached; the
// workspace is preallocated (an arena slice, or 32 MiB of its own).
//
// Not thread-safe: one Matmul per stream/thread.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_CUDA_CUBLASLT_H
#define TC_RUNTIME_CUDA_CUBLASLT_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "runtime/src/base/dtype.h"
#include "runtime/src/base/status.h"
#include "runtime/src/base/tuning_record.h"
#include "runtime/src/cuda/device.h"
#include "runtime/src/schema/library_abi.h"

namespace tc::rt::cuda {

/// OK for CUBLAS_STATUS_SUCCESS; otherwise "<call>: <cuBLASLt status string>
/// (<status name>)" (InvalidArgument, Unimplemented, ResourceExhausted,
/// FailedPrecondition or Internal).
Status cublasStatus(cublasStatus_t st, const std::string &call);

/// What runs after the product (cuBLASLt epilogues).
enum class MatmulEpilogue : uint8_t {
  None,
  Bias,        // + bias[N]
  Gelu,        // gelu_tanh(x)
  BiasGelu,    // gelu_tanh(x + bias[N])
  GeluAux,     // gelu_tanh(x), and x (the GELU input) stored to `aux`
  BiasGeluAux, // gelu_tanh(x + bias[N]), and x + bias stored to `aux`
  // The product, and the sum over K of one operand written to `bias` (of
  // d.dtype, accumulated in fp32): a Linear layer's bias gradient from the
  // weight-gradient GEMM that reads the output gradient anyway (cuBLASLt's
  // BGRADB / BGRADA). Batch 1, beta 0, no addend or device alpha.
  BiasGradLhs, // bias[M] = sum_k op(lhs)[:, k]  (lhs [K, M] with transposeLhs: its column sums)
  BiasGradRhs, // bias[N] = sum_k op(rhs)[k, :]  (rhs [K, N]: its column sums)
  // x * gelu_tanh'(aux): the backward of a GELU whose input `aux` [batch, m,
  // n] (read, out's type) the forward's GELU_AUX wrote (cuBLASLt's DGELU).
  // Beta 0, no addend or device alpha.
  DGelu,
  // GeluAux, BiasGeluAux and DGelu with the exact GELU, 0.5 x (1 + erf(x /
  // sqrt 2)): no cuBLASLt epilogue computes it; tc's own GEMM (ownGemm) or
  // the product and the GELU kernels (geluForward / geluBackward) do. Beta 0,
  // no addend or device alpha.
  GeluErfAux,
  BiasGeluErfAux,
  DGeluErf,
};
const char *matmulEpilogueName(MatmulEpilogue e);

/// FP8 block scaling of one operand (--fp8-scaling block128, sm_90): one f32
/// scale per 1x128 block along K (cuBLASLt's VEC128_32F) or per 128x128
/// block (BLK128x128_32F), in the layouts quantizeFp8Blocks' scale_gemm
/// has (kernels.h). Vec32Ue8m0 (--fp8-scaling mxfp8, sm_100 / sm_120 only):
/// one E8M0 byte per 1x32 block along K (VEC32_UE8M0), in the 128x4-tile
/// layout of schema/block_scale_layout.h (quantizeMx's scale_gemm); run
/// with runMxfp8.
enum class Fp8ScaleBlocks : uint8_t { None, Vec128, Blk128, Vec32Ue8m0 };

/// One matmul problem, tc.matmul's attributes in row-major terms.
struct MatmulDesc {
  DType dtype = DType::F32; // lhs, rhs, out, bias and aux: F32, BF16 or F16
  bool tf32 = false;        // F32 only: allow TF32 tensor cores
  bool transposeLhs = false;
  bool transposeRhs = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  /// Elements between consecutive batch matrices. -1 = packed (m*k, k*n,
  /// m*n); 0 broadcasts one matrix (lhs/rhs only).
  int64_t strideLhs = -1, strideRhs = -1, strideOut = -1;
  MatmulEpilogue epilogue = MatmulEpilogue::None;
  float alpha = 1.0f;
  /// 0 overwrites `out`; 1 accumulates into it (gradient accumulation).
  float beta = 0.0f;
  /// FP8 operands (run with runFp8): lhsType/rhsType F8E4M3FN or F8E5M2,
  /// not both E5M2; `dtype` is the result's (F32, BF16 or F16). Needs
  /// transposeRhs, not transposeLhs, K and N multiples of 16 (cuBLASLt's
  /// 16-byte leading dimensions), no epilogue.
  bool fp8 = false;
  DType lhsType = DType::F8E4M3FN, rhsType = DType::F8E4M3FN;
  /// FP8 only: cuBLASLt's fast accumulation (fewer promotions of the tensor
  /// cores' partial sums to fp32). Forward GEMMs only: in dgrad/wgrad it
  /// costs 7-33x the error (measured on the H200, issue 11's notes).
  bool fastAccum = false;
  /// FP8 only: per-row scales, m values for lhs [m, k] and n for rhs [n, k]
  /// (tc.quantize per row of both; cuBLASLt's OUTER_VEC_32F scaling, sm_90);
  /// otherwise one scale each.
  bool rowScales = false;
  /// FP8 only: block scales of lhs [m, k] and rhs [n, k] (both or neither;
  /// not both Blk128, no fast accumulation, batch 1, a bf16 or f16 result:
  /// what cuBLASLt 13.1 has algorithms for on the H200).
  Fp8ScaleBlocks lhsBlocks = Fp8ScaleBlocks::None, rhsBlocks = Fp8ScaleBlocks::None;
  /// NVFP4 operands (run with runNvfp4; set by it).
  bool nvfp4 = false;
  /// Not FP8: alpha read on the device, from run's / runBroadcast's
  /// `deviceAlpha` (one f32; `alpha` is then unused), beta (0 or 1) from
  /// the Matmul's own device constants: CUBLASLT_POINTER_MODE_DEVICE
  /// (tc.matmul's alpha, tc-fp4-exact). Such plans are not tuned (tune
  /// times candidates with host scalars): the heuristic's first choice.
  bool deviceAlpha = false;
  /// Not FP8, beta 0, no device alpha: run's `addend` [batch, m, n] (out's
  /// type and layout) is added to the product before the epilogue's bias:
  /// cuBLASLt's C with beta 1, out = alpha lhs rhs + addend (+ bias). The
  /// plan is that of the problem without it (tuned with beta 0).
  bool addend = false;

  /// "bf16 M=128 N=768 K=3072 batch 4 lhs^T +bias+gelu"
  std::string toString() const;
};

/// Whether Matmul tunes (see Matmul::tune; on by default). Process-wide: the
/// CUDA executor sets it from ExecutorOptions::matmulTune.
void setMatmulTuning(bool on);

class Matmul {
public:
  /// 32 MiB; the compiler's memory plan counts the same (schema/library_abi.h).
  static constexpr size_t kDefaultWorkspaceBytes = kCublasLtWorkspaceBytes;

  /// Creates the cuBLASLt handle. `workspace` (device memory of
  /// workspaceBytes, e.g. an arena slice, 256-byte aligned) is used by every
  /// call; when null, the Matmul allocates kDefaultWorkspaceBytes itself.
  static Status create(std::unique_ptr<Matmul> *out, void *workspace = nullptr,
                       size_t workspaceBytes = kDefaultWorkspaceBytes);
  ~Matmul();
  Matmul(const Matmul &) = delete;
  Matmul &operator=(const Matmul &) = delete;

  /// Runs `d` on `stream`. lhs/rhs/out (and bias [n], aux [batch, m, n] when
  /// the epilogue uses them) are device pointers of d.dtype; the
  /// bias-gradient epilogues write `bias` ([m] or [n]). m, n or batch of 0
  /// is a no-op; k == 0 is Unimplemented.
  Status run(const MatmulDesc &d, const void *lhs, const void *rhs, void *out, cudaStream_t stream,
             const void *bias = nullptr, void *aux = nullptr,
             const float *deviceAlpha = nullptr, const void *addend = nullptr);

  /// Runs the FP8 problem `d` (d.fp8): out = (lhs * *lhsScaleInv) op
  /// (rhs * *rhsScaleInv), the scales f32 scalars on the device (the
  /// dequantisation factors tc.quantize writes: cuBLASLt's A/B scale
  /// pointers), or with d.rowScales f32 vectors [m] and [n]: out[i, j] =
  /// lhsScaleInv[i] * rhsScaleInv[j] * sum_k lhs[i, k] rhs[j, k], or with
  /// d.lhsBlocks / d.rhsBlocks the block scales (Fp8ScaleBlocks): the sum
  /// over the K blocks of their partial products times both blocks' scales;
  /// then + bias[n] (d.dtype) with the Bias epilogue, added in fp32 before
  /// out is rounded. InvalidArgument for a problem outside cuBLASLt's FP8
  /// form.
  Status runFp8(const MatmulDesc &d, const void *lhs, const float *lhsScaleInv, const void *rhs,
                const float *rhsScaleInv, void *out, cudaStream_t stream,
                const void *bias = nullptr);

  /// runFp8 of an MXFP8 problem (d.lhsBlocks and d.rhsBlocks Vec32Ue8m0):
  /// the scales are E8M0 bytes in cuBLASLt's VEC32_UE8M0 layout; K a
  /// multiple of 32, no fast accumulation, batch 1, a bf16 or f16 result,
  /// the algorithm picked by cuBLASLt's heuristic on the card. Unimplemented
  /// naming the GPU on one without block-scaled FP8 tensor cores (sm_90:
  /// cuBLASLt has no VEC32_UE8M0 kernel there) or when the heuristic finds
  /// no algorithm.
  Status runMxfp8(const MatmulDesc &d, const void *lhs, const uint8_t *lhsScales, const void *rhs,
                  const uint8_t *rhsScales, void *out, cudaStream_t stream);

  /// One NVFP4 GEMM (sm_120a: cuBLASLt 13.1's block-scaled FP4 kernels;
  /// TN only): out [m, n] (bf16) = *lhsTensorScale * *rhsTensorScale *
  /// sum_k lhs[i, k] rhs[j, k] of quantizeFp4Packed's nvfp4 operands (lhs
  /// [m, k], rhs [n, k] E2M1, K contiguous; their E4M3 1x16 block scales
  /// in cuBLASLt's 128x4 layout: CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3),
  /// fp32 accumulation. The two f32 tensor scales stay on the device: a
  /// one-thread kernel writes their product and a zero into `scalars` (f32
  /// [2], device), cuBLASLt's alpha and beta in CUBLASLT_POINTER_MODE_DEVICE.
  /// Unimplemented, naming the problem, where cuBLASLt has no algorithm
  /// (every GPU but sm_100 / sm_120 class ones).
  struct Nvfp4Gemm {
    const void *lhs = nullptr, *rhs = nullptr;
    const uint8_t *lhsScales = nullptr, *rhsScales = nullptr;
    const float *lhsTensorScale = nullptr, *rhsTensorScale = nullptr;
    float *scalars = nullptr;
    void *out = nullptr;
    int64_t m = 0, n = 0, k = 0;
  };
  Status runNvfp4(const Nvfp4Gemm &g, cudaStream_t stream);

  /// tc.matmul with numpy-broadcast batch dimensions: lhs [lhsBatch..., M, K],
  /// rhs [rhsBatch..., K, N] (transposes as in `d`), out
  /// [broadcast(lhsBatch, rhsBatch)..., M, N], all packed. d.batch and the
  /// strides are ignored: the broadcast is split into as few strided-batched
  /// calls as possible (one when the batch dims allow it; see planBatches),
  /// and a run of packed lhs matrices sharing one rhs (a Linear layer) becomes
  /// one GEMM of M * batch rows.
  Status runBroadcast(const MatmulDesc &d, const std::vector<int64_t> &lhsBatch,
                      const std::vector<int64_t> &rhsBatch, const void *lhs, const void *rhs,
                      void *out, cudaStream_t stream, const void *bias = nullptr,
                      const float *deviceAlpha = nullptr);

  /// How a problem with an epilogue that has another form ran (bias
  /// gradients: the plain product and a sum of the operand, a GEMM of a ones
  /// vector by it; DGELU: the plain product and the GELU backward kernel;
  /// GELU + aux and DGELU: tc's own sm_90a GEMM, ownGemm in kernels.h, where
  /// it takes the problem and is enabled; GELU + aux: cuDNN's runtime-fused
  /// GEMM, where the optional cuDNN plugin is installed and takes it):
  /// cuBLASLt's epilogue, the separate form, tc's own kernel or cuDNN's,
  /// whichever the first eager call timed fastest (the others where cuBLASLt
  /// has no algorithm for the epilogue). Unknown before that first call.
  enum class EpiloguePath : uint8_t { Unknown, Epilogue, Separate, Own, Library };
  EpiloguePath epiloguePath(const MatmulDesc &d) const;
  /// Tests: take the separate form of every such problem.
  void forceSeparateEpilogues(bool on) { forceSeparate_ = on; }
  /// Tests: take cuDNN's form of every problem it takes, without timing.
  void forceLibraryEpilogues(bool on) { forceLibrary_ = on; }
  /// Whether tc's own GEMM is a candidate for the problems it takes (bf16,
  /// batch 1, lhs not transposed, alpha 1, beta 0, no addend, m % 128, n %
  /// 256, k % 64, 16-byte aligned pointers, an H100/H200). Off by default
  /// until measured on a GPU; on with TC_OWN_GEMM=1 in the environment
  /// (read when the Matmul is created) or this call. `force` (tests) takes it
  /// whenever it can, without timing.
  void enableOwnGemm(bool on, bool force = false) {
    ownGemm_ = on;
    forceOwn_ = on && force;
  }

  /// Where the tunings' choices are kept across processes (null: in this
  /// Matmul only; shared by the executor's Matmuls). A problem the record has
  /// a choice for takes it without timing (also while a graph is captured),
  /// where the choice still applies (the same number of candidates; a way
  /// this call has); any other is timed and its choice put in the record.
  void setTuningRecord(std::shared_ptr<TuningRecord> record) { record_ = std::move(record); }
  /// The record's identity for device `info` (queryDevice): its name and sm,
  /// its SM count, cuBLASLt's version and tc's ("NVIDIA H200 sm_90 132 SMs
  /// cuBLASLt 130100 tc 0.3.0"): a choice made on one is kept for that one.
  static std::string tuningIdentity(const DeviceInfo &info);
  /// Tests: the index among cuBLASLt's candidates of the algorithm a plan of
  /// `d` runs (the first such plan: a test makes one); -1 without a plan.
  int chosenCandidate(const MatmulDesc &d) const;

  /// Number of cached (problem, alignment) -> algorithm entries.
  size_t cachedPlans() const { return plans_.size(); }
  size_t workspaceBytes() const { return workspaceBytes_; }

private:
  struct Plan;
  Matmul() = default;
  /// The cached plan of `d`, made on first use. `scaleA` / `scaleB`
  /// (cuBLASLt's A and B: our rhs and lhs) are set before the heuristic
  /// query: with outer-vector or block scale modes cuBLASLt refuses a plan
  /// without them (CUBLAS_STATUS_INVALID_VALUE on the H200).
  ///
  /// The plan's pointer attributes (bias, aux, scales) are this call's on a
  /// cache hit too (setCallPointers): they change per call, and a CUDA graph
  /// captures the values of the call it records.
  Status getPlan(const MatmulDesc &d, const void *lhs, const void *rhs, void *out, const void *bias,
                 void *aux, Plan **result, const float *scaleA = nullptr,
                 const float *scaleB = nullptr);
  Status setCallPointers(const MatmulDesc &d, Plan *plan, const void *bias, void *aux,
                         const float *scaleA, const float *scaleB);
  Status tune(const MatmulDesc &d, Plan *plan, const void *lhs, const void *rhs, void *out,
              cudaStream_t stream);
  Status runBiasGrad(const MatmulDesc &d, const void *lhs, const void *rhs, void *out,
                     void *biasGrad, cudaStream_t stream);
  Status runDGelu(const MatmulDesc &d, const void *lhs, const void *rhs, void *out,
                  const void *aux, cudaStream_t stream);
  /// Runs `d` (beta 0) through cuBLASLt's epilogue (the plan `plan` gives,
  /// its pointers set for this call; null where cuBLASLt has none) or
  /// `separate`, by d's EpiloguePath (timing both on the first eager call).
  ///
  /// `separate` may be empty (no separate form); `own` is tc's own kernel
  /// and `library` cuDNN's, each empty where it does not take the problem.
  Status epilogueOrSeparate(const MatmulDesc &d, const std::function<Plan *()> &plan,
                            const std::function<Status()> &separate, cudaStream_t stream,
                            const void *lhs, const void *rhs, void *out,
                            const std::function<Status()> &own = {},
                            const std::function<Status()> &library = {});
  /// tc's own GEMM for `d` (ownGemm), or an empty function where it is off
  /// or does not take the problem.
  std::function<Status()> ownForm(const MatmulDesc &d, const void *lhs, const void *rhs, void *out,
                                  const void *bias, void *aux, cudaStream_t stream);
  /// cuDNN's GEMM with the GELU + aux epilogue for `d` (cudnn/loader.h), or an
  /// empty function where the plugin is absent or does not take the problem
  /// (its plan is built here, on an eager call).
  std::function<Status()> libraryForm(const MatmulDesc &d, const void *lhs, const void *rhs,
                                      void *out, const void *bias, void *aux, cudaStream_t stream);
  /// A device vector of at least k ones of `dtype` (grown on an eager call).
  Status ones(DType dtype, int64_t k, const void **out, cudaStream_t stream);

  cublasLtHandle_t handle_ = nullptr;
  void *workspace_ = nullptr;
  size_t workspaceBytes_ = 0;
  bool ownsWorkspace_ = false;
  /// Device f32 {0, 1}: beta of device-alpha calls.
  float *consts_ = nullptr;
  std::unordered_map<std::string, std::unique_ptr<Plan>> plans_;
  std::shared_ptr<TuningRecord> record_;
  /// Problems with a separate form (MatmulDesc::toString) -> their path.
  std::unordered_map<std::string, EpiloguePath> epiloguePaths_;
  bool forceSeparate_ = false;
  bool forceLibrary_ = false;
  bool ownGemm_ = false, forceOwn_ = false;
  bool ownAvailable_ = false; // ownGemmAvailable() on this Matmul's device (create)
  struct Ones {
    void *ptr = nullptr;
    int64_t count = 0;
  };
  std::unordered_map<int, Ones> ones_; // by DType
  std::vector<void *> retiredOnes_;    // outgrown, kept for graphs captured with them
};

/// How a broadcast batch splits into strided-batched calls (host only; public
/// for tests). Offsets are in matrices (multiply by the matrix size).
struct BatchPlan {
  std::vector<int64_t> outBatch; // broadcast batch shape
  int64_t batchPerCall = 1;      // matrices per call
  bool lhsStrided = true;        // false: one lhs matrix broadcast in a call
  bool rhsStrided = true;
  struct Call {
    int64_t lhs = 0, rhs = 0, out = 0;
  };
  std::vector<Call> calls;
};
/// InvalidArgument when the batch dimensions do not broadcast.
Status planBatches(const std::vector<int64_t> &lhsBatch, const std::vector<int64_t> &rhsBatch,
                   BatchPlan *out);

} // namespace tc::rt::cuda

#endif // TC_RUNTIME_CUDA_CUBLASLT_H
