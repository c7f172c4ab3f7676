//===- loader.h - the runtime's side of the optional cuDNN plugin ---------===//
//
// Opens libtc_cudnn.so (plugin.h) once a process: the path in TC_CUDNN_PLUGIN,
// else beside the module that holds this code (tc-run, the C API's library)
// or in its ../lib. Nothing of cuDNN is linked into the runtime: without the
// plugin, or without cuDNN 9 (libcudnn.so.9 on the loader's path), every call
// here answers "not taken" and tc's own kernels run. TC_CUDNN=0 keeps the
// plugin closed (a measurement knob: tc's kernels against cuDNN's).
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_CUDA_CUDNN_LOADER_H
#define TC_RUNTIME_CUDA_CUDNN_LOADER_H

#include <cstdint>
#include <string>

#include "runtime/src/base/status.h"
#include "runtime/src/cuda/cudnn/plugin.h"

namespace tc::rt::cuda {

/// Runs `args` through cuDNN's fused attention forward on `stream` (a
/// cudaStream_t): *taken says whether it ran; not taken (Status ok) when the
/// plugin or cuDNN is missing or cuDNN has no engine for the case; an error
/// Status when cuDNN took the case and its launch failed.
Status cudnnAttentionForward(const TcCudnnAttentionForward &args, void *stream, bool *taken);

/// The attention backward (plugin.h) through cuDNN's deterministic
/// algorithm, its workspace at most maxWorkspaceBytes: *taken as above.
Status cudnnAttentionBackward(const TcCudnnAttentionBackward &args, void *stream,
                              int64_t maxWorkspaceBytes, bool *taken);

/// The GEMM with the GELU epilogue (plugin.h) through cuDNN: *taken as
/// above; with prepareOnly its plan is built (or found) and nothing runs.
Status cudnnMatmulGeluAux(const TcCudnnMatmulGeluAux &args, void *stream, bool prepareOnly,
                          bool *taken);

/// One line for logs: "cuDNN 9.19.0 (PATH)" when the plugin is open, else
/// why not ("cuDNN not used: " dlopen's message, "cuDNN off (TC_CUDNN=0)").
std::string cudnnStatusLine();

/// Whether the plugin is open and cuDNN usable (opens it on the first call).
bool cudnnAvailable();

/// How many forwards cuDNN has run in this process (tests check that a
/// case they meant for cuDNN went there).
int64_t cudnnAttentionForwardCount();
/// How many backward calls (chunks) cuDNN has run in this process.
int64_t cudnnAttentionBackwardCount();

} // namespace tc::rt::cuda

#endif // TC_RUNTIME_CUDA_CUDNN_LOADER_H
