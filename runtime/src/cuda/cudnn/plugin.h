//===- plugin.h - the C ABI of libtc_cudnn.so, tc's optional cuDNN plugin -===//
//
// cuDNN's fused flash attention (its graph API's SDPA, built through the
// header-only cudnn_frontend) runs where cuDNN 9 is installed, and tc's own
// kernels everywhere else: the plugin is a shared object of its own
// (plugin.cpp, which alone includes cuDNN and links libcudnn.so.9), opened at
// run time by the runtime's loader (cudnn/loader.cpp); a machine without
// cuDNN, or without the plugin, runs as before. This header is the contract
// between the two: plain C types, no cuDNN, no CUDA runtime headers.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_CUDA_CUDNN_PLUGIN_H
#define TC_RUNTIME_CUDA_CUDNN_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Bumped whenever a struct or signature below changes; the loader refuses
/// a plugin of another version.
#define TC_CUDNN_PLUGIN_ABI 4

/// One causal or full attention forward, as tc's attentionForward takes it:
/// q [batch, heads, tq, d], k / v [batch, kvHeads, tk, d], out [batch,
/// heads, tq, d] with element strides (batch, head, row; the last dim
/// contiguous), lse [batch, heads, tq] f32 contiguous or null (then no
/// statistics are made), causal top-left aligned (key j > query i hidden).
typedef struct {
  int32_t dtype; ///< 0 bf16, 1 f16
  int32_t causal;
  int64_t batch, heads, kvHeads, tq, tk, d;
  int64_t qStride[3], kStride[3], vStride[3], oStride[3];
  float scale;
  const void *q, *k, *v;
  void *out;
  float *lse;
} TcCudnnAttentionForward;

/// The gradients of that forward, cuDNN's deterministic algorithm: dq, dk,
/// dv (overwritten; GQA's dk / dv summed over the group) from q, k, v, out,
/// dout and the forward's lse, each operand with its strides. Its workspace
/// ([batch, heads, tq, tk] bf16 and a little): the caller's `workspace`
/// where its `workspaceBytes` hold what the plan asks (tc's memory plan
/// reserves it in the op's scratch), else the plugin's own.
typedef struct {
  int32_t dtype; ///< 0 bf16, 1 f16
  int32_t causal;
  int64_t batch, heads, kvHeads, tq, tk, d;
  int64_t qStride[3], kStride[3], vStride[3], oStride[3], doStride[3];
  int64_t dqStride[3], dkStride[3], dvStride[3];
  float scale;
  const void *q, *k, *v, *out, *dout;
  const float *lse;
  void *dq, *dk, *dv;
  void *workspace; ///< may be null
  int64_t workspaceBytes;
} TcCudnnAttentionBackward;

/// out [m, n] = lhs [m, k] rhs (+ bias [n]), with a GELU epilogue (tanh
/// form): aux [m, n] = the pre-activation, out = gelu(aux). bf16, packed
/// row-major, rhs stored [n, k] (rhsKMajor: nn.Linear's weight) or [k, n];
/// f32 accumulation. cuDNN's runtime-fused GEMM (measured faster than
/// cuBLASLt's GELU_AUX_BIAS epilogue at GPT-2's MLP shapes on an H100).
typedef struct {
  int64_t m, n, k;
  int32_t rhsKMajor;
  const void *lhs, *rhs, *bias; ///< bias may be null
  void *out, *aux;
} TcCudnnMatmulGeluAux;

/// Status codes of the calls below.
enum { TC_CUDNN_OK = 0, TC_CUDNN_UNSUPPORTED = 1, TC_CUDNN_ERROR = 2 };

/// TC_CUDNN_PLUGIN_ABI of the plugin.
typedef int (*TcCudnnAbiFn)(void);
/// The cuDNN library's version (cudnnGetVersion: 91900 for 9.19.0), 0 when
/// it cannot be used (no GPU, cudnnCreate failed; `error` says why).
typedef size_t (*TcCudnnVersionFn)(char *error, size_t errorBytes);
/// Runs the forward on `stream` (a cudaStream_t). TC_CUDNN_UNSUPPORTED when
/// cuDNN has no engine for the case (nothing was launched: the caller runs
/// its own kernels), or when the case's plan is not built yet and the stream
/// is being captured into a CUDA graph (plans are built on eager calls);
/// TC_CUDNN_ERROR with `error` filled when a launch failed.
typedef int (*TcCudnnAttentionForwardFn)(const TcCudnnAttentionForward *args, void *stream,
                                         char *error, size_t errorBytes);

/// The backward on `stream`, as the forward's entry (TC_CUDNN_UNSUPPORTED
/// when cuDNN has no deterministic engine for the case, or its workspace is
/// larger than the caller's and would pass `maxWorkspaceBytes` of the
/// plugin's own; nothing launched then).
typedef int (*TcCudnnAttentionBackwardFn)(const TcCudnnAttentionBackward *args, void *stream,
                                          int64_t maxWorkspaceBytes, char *error,
                                          size_t errorBytes);

/// The GEMM above on `stream`; with `prepareOnly` only builds (or finds) its
/// plan and launches nothing. TC_CUDNN_UNSUPPORTED when cuDNN has no engine
/// for it, or when its plan is not built and the stream is being captured.
typedef int (*TcCudnnMatmulGeluAuxFn)(const TcCudnnMatmulGeluAux *args, void *stream,
                                      int prepareOnly, char *error, size_t errorBytes);

#define TC_CUDNN_ABI_SYMBOL "tc_cudnn_abi"
#define TC_CUDNN_MATMUL_GELU_AUX_SYMBOL "tc_cudnn_matmul_gelu_aux"
#define TC_CUDNN_ATTENTION_BACKWARD_SYMBOL "tc_cudnn_attention_backward"
#define TC_CUDNN_VERSION_SYMBOL "tc_cudnn_version"
#define TC_CUDNN_ATTENTION_FORWARD_SYMBOL "tc_cudnn_attention_forward"

#ifdef __cplusplus
}
#endif

#endif // TC_RUNTIME_CUDA_CUDNN_PLUGIN_H
