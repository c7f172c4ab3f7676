//===- capi.h - what the C API's implementation files share -----*- C++ -*-===//
//
// The C handles' definitions and the conversions between the runtime's C++
// types and tc/runtime.h's: session.cpp (statuses, tensors, artifacts,
// sessions), capi_io.cpp (files, token sources, metrics, generation) and
// capi_train.cpp (trainers, runs).
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_SESSION_CAPI_H
#define TC_RUNTIME_SESSION_CAPI_H

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/src/base/executor.h"
#include "runtime/src/schema/program.h"
#include "runtime/src/base/status.h"
#include "runtime/src/session/run.h"
#include "runtime/src/session/trainer.h"
#include "tc/runtime.h"

struct tc_status_t {
  tc_status_code_t code;
  std::string message;
  bool inputError = false; ///< tc_status_is_input_error
};

struct tc_tensor_t {
  std::string name;
  tc_dtype_t dtype;
  std::vector<int64_t> shape;
  size_t elements = 0;
  size_t bytes = 0;
  void *data = nullptr;
  tc_allocator_t allocator;
};

struct tc_artifact_t {
  /// Shared with the sessions and trainers made from it; replaced (copy on
  /// write) by tc_artifact_load_weights.
  std::shared_ptr<tc::rt::Artifact> artifact;
  std::string path;
};

struct tc_token_source_t {
  tc::rt::TokenData data;
};

namespace tc::rt::capi {

/// A status (never fails: out of memory gives a static one).
tc_status_t *makeStatus(tc_status_code_t code, std::string message, bool inputError = false);
/// nullptr for ok.
tc_status_t *toC(const Status &st, bool inputError = false);
/// The same with the input-error flag read after `st` is made: pass the
/// flag that the call making `st` sets (toC(f(&flag), &flag)).
inline tc_status_t *toC(const Status &st, const bool *inputError) {
  return toC(st, *inputError);
}
/// INVALID_ARGUMENT for a bad argument of the caller (an input error).
tc_status_t *invalid(const std::string &message);

/// malloc/free with alignment.
tc_allocator_t defaultAllocator();
/// A new C tensor holding `t` (nullptr when out of memory).
tc_tensor_t *newTensor(const std::string &name, const HostTensor &t,
                       const tc_allocator_t &allocator = defaultAllocator());
/// The C++ view of a C tensor (a copy).
HostTensor hostTensorOf(const tc_tensor_t &t);
/// A view's tensor, copied; `what` names it in errors ("inputs[2]").
tc_status_t *fromView(const tc_tensor_view_t *view, const std::string &what, HostTensor *out);

/// A malloc'd copy of `s` for a char **out_* argument.
char *copyString(const std::string &s);
/// NULL-safe std::string of a C string.
inline std::string str(const char *s) { return s ? s : ""; }

/// tc_generate_options_t (NULL: the defaults) and the prompt as the
/// sampler's options; the error names the bad argument.
tc_status_t *generateOptionsOf(const tc_generate_options_t *options, const int64_t *prompt,
                               size_t promptLength, GenerateOptions *out);
/// The sampler's result as a new rank-1 i64 tensor "tokens".
tc_status_t *tokensTensor(const std::vector<int64_t> &tokens, tc_tensor_t **out,
                          const tc_allocator_t &allocator = defaultAllocator());

/// The checks of tc_*_infer_greedy's arguments but the handle's; clears the
/// outputs.
tc_status_t *inferArguments(const int64_t *prompt, size_t promptLength, tc_tensor_t **outLogits,
                            tc_tensor_t **outTokens);
/// inferGreedy's logits and tokens as new tensors "logits" and "tokens"
/// (both or neither: out of memory releases the first).
tc_status_t *inferResult(const HostTensor &logits, const std::vector<int64_t> &tokens,
                         const tc_allocator_t &allocator, tc_tensor_t **outLogits,
                         tc_tensor_t **outTokens);

/// The C options as the runtime's.
CudaOptions cudaOptionsOf(const tc_cuda_options_t &c);
void initializeCudaOptions(tc_cuda_options_t *c);

} // namespace tc::rt::capi

#endif // TC_RUNTIME_SESSION_CAPI_H
