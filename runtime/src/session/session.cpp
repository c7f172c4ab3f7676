//===- session.cpp - the C API: statuses, tensors, artifacts, sessions ----===//
#include "tc/runtime.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "runtime/src/schema/artifact.h"
#include "runtime/src/base/host_tensor.h"
#include "runtime/src/cpu/executor.h"
#include "runtime/src/session/backend.h"
#include "runtime/src/session/capi.h"
#include "runtime/src/session/run.h"
#include "runtime/src/session/trainer.h"

using namespace tc::rt;
using namespace tc::rt::capi;

struct tc_session_t {
  std::shared_ptr<const Artifact> artifact;
  ExecOptions exec;
  tc_allocator_t allocator;
  /// The backend holding the parameters and optimizer state; functions that
  /// update them do so in place (on either device).
  std::unique_ptr<Executor> executor;
  /// A GPU executor runs one function at a time (the CPU one locks itself).
  std::mutex gpuMutex;
};

namespace tc::rt::capi {

namespace {
/// Returned when even a status cannot be allocated; never freed.
tc_status_t *outOfMemoryStatus() {
  static tc_status_t *s = new tc_status_t{TC_STATUS_RESOURCE_EXHAUSTED, "out of memory"};
  return s;
}

void *defaultAlloc(void *, size_t size, size_t alignment) {
  size_t rounded = (size + alignment - 1) / alignment * alignment;
  return std::aligned_alloc(alignment, rounded ? rounded : alignment);
}
void defaultFree(void *, void *ptr) { std::free(ptr); }
} // namespace

tc_status_t *makeStatus(tc_status_code_t code, std::string message, bool inputError) {
  try {
    return new tc_status_t{code, std::move(message), inputError};
  } catch (const std::bad_alloc &) {
    return outOfMemoryStatus();
  }
}

tc_status_t *toC(const Status &st, bool inputError) {
  if (st.isOk())
    return nullptr;
  return makeStatus(static_cast<tc_status_code_t>(st.code()), st.message(), inputError);
}

tc_status_t *invalid(const std::string &msg) {
  return makeStatus(TC_STATUS_INVALID_ARGUMENT, msg, true);
}

tc_allocator_t defaultAllocator() {
  tc_allocator_t a;
  a.alloc = defaultAlloc;
  a.free = defaultFree;
  a.user = nullptr;
  return a;
}

tc_tensor_t *newTensor(const std::string &name, const HostTensor &src,
                       const tc_allocator_t &allocator) {
  std::unique_ptr<tc_tensor_t> t(new (std::nothrow) tc_tensor_t);
  if (!t)
    return nullptr;
  t->name = name;
  t->dtype = static_cast<tc_dtype_t>(src.type.dtype);
  t->shape = src.type.shape;
  t->elements = static_cast<size_t>(src.type.numElements());
  t->bytes = src.data.size();
  t->allocator = allocator;
  t->data = t->allocator.alloc(t->allocator.user, t->bytes ? t->bytes : 1, 64);
  if (!t->data)
    return nullptr;
  if (t->bytes)
    std::memcpy(t->data, src.data.data(), t->bytes);
  return t.release();
}

HostTensor hostTensorOf(const tc_tensor_t &t) {
  HostTensor h;
  h.type.dtype = static_cast<DType>(t.dtype);
  h.type.shape = t.shape;
  const uint8_t *p = static_cast<const uint8_t *>(t.data);
  h.data.assign(p, p + t.bytes);
  return h;
}

tc_status_t *fromView(const tc_tensor_view_t *v, const std::string &what, HostTensor *out) {
  if (!v)
    return invalid(what + " is NULL");
  if (!dtypeIsValid(static_cast<uint8_t>(v->dtype)))
    return invalid(what + ": invalid dtype " + std::to_string(v->dtype));
  if (v->rank && !v->shape)
    return invalid(what + ": shape is NULL");
  if (v->data_size && !v->data)
    return invalid(what + ": data is NULL");
  out->type.dtype = static_cast<DType>(v->dtype);
  out->type.shape.assign(v->shape, v->shape + v->rank);
  const uint8_t *p = static_cast<const uint8_t *>(v->data);
  out->data.assign(p, p + v->data_size);
  return nullptr;
}

char *copyString(const std::string &s) {
  char *c = static_cast<char *>(std::malloc(s.size() + 1));
  if (c)
    std::memcpy(c, s.c_str(), s.size() + 1);
  return c;
}

tc_status_t *generateOptionsOf(const tc_generate_options_t *options, const int64_t *prompt,
                               size_t promptLength, GenerateOptions *g) {
  if (promptLength && !prompt)
    return invalid("prompt is NULL");
  tc_generate_options_t o;
  tc_generate_options_initialize(&o);
  if (options)
    o = *options;
  if (o.max_new_tokens < 0)
    return invalid("options->max_new_tokens is " + std::to_string(o.max_new_tokens) +
                   ": it must be >= 0");
  g->prompt.assign(prompt, prompt + promptLength);
  g->maxNewTokens = o.max_new_tokens;
  g->temperature = o.temperature;
  g->topK = o.top_k;
  g->seed = o.seed;
  g->init = str(o.init);
  g->refPrecision = o.ref_precision == TC_REF_PRECISION_F64 ? "f64" : "f32";
  return nullptr;
}

tc_status_t *tokensTensor(const std::vector<int64_t> &tokens, tc_tensor_t **out,
                          const tc_allocator_t &allocator) {
  *out = newTensor(
      "tokens", makeHostTensorInts({DType::I64, {static_cast<int64_t>(tokens.size())}}, tokens),
      allocator);
  return *out ? nullptr : makeStatus(TC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
}

tc_status_t *inferArguments(const int64_t *prompt, size_t promptLength, tc_tensor_t **outLogits,
                            tc_tensor_t **outTokens) {
  if (!outLogits || !outTokens)
    return invalid(std::string(outLogits ? "out_tokens" : "out_logits") + " is NULL");
  *outLogits = *outTokens = nullptr;
  if (promptLength && !prompt)
    return invalid("prompt is NULL");
  return nullptr;
}

tc_status_t *inferResult(const HostTensor &logits, const std::vector<int64_t> &tokens,
                         const tc_allocator_t &allocator, tc_tensor_t **outLogits,
                         tc_tensor_t **outTokens) {
  *outLogits = newTensor("logits", logits, allocator);
  if (!*outLogits)
    return makeStatus(TC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  if (tc_status_t *st = tokensTensor(tokens, outTokens, allocator)) {
    tc_tensor_release(*outLogits);
    *outLogits = nullptr;
    return st;
  }
  return nullptr;
}

CudaOptions cudaOptionsOf(const tc_cuda_options_t &c) {
  CudaOptions o;
  o.graphs = c.graphs != 0;
  o.checkEachOp = c.check_each_op != 0;
  o.profile = c.profile != 0;
  o.matmulTune = c.matmul_tune != 0;
  o.matmulTuneDir = c.matmul_tune_dir ? c.matmul_tune_dir : "";
  o.pipeline = c.pipeline != 0;
  return o;
}

void initializeCudaOptions(tc_cuda_options_t *c) {
  c->graphs = 1;
  c->check_each_op = 0;
  c->profile = 0;
  c->matmul_tune = 1;
  c->matmul_tune_dir = nullptr;
  c->pipeline = 1;
}

} // namespace tc::rt::capi

namespace {

tc_status_t *findFunction(const Artifact *a, const char *what, const char *name,
                          const Function **out) {
  if (!a)
    return invalid(std::string(what) + " is NULL");
  if (!name)
    return invalid("function name is NULL");
  *out = a->findFunction(name);
  if (!*out)
    return makeStatus(TC_STATUS_NOT_FOUND,
                      std::string("no function '") + name + "' in the artifact");
  return nullptr;
}

tc_status_t *findFunction(const tc_session_t *s, const char *name, const Function **out) {
  return findFunction(s ? s->artifact.get() : nullptr, "session", name, out);
}

const Artifact *artifactOf(const tc_artifact_t *a) { return a ? a->artifact.get() : nullptr; }

tc_status_t *valueCount(const Artifact *a, const char *what, const char *function_name,
                        bool inputs, size_t *out_count) {
  const Function *fn;
  if (tc_status_t *st = findFunction(a, what, function_name, &fn))
    return st;
  if (out_count)
    *out_count = inputs ? fn->inputs.size() : fn->outputs.size();
  return nullptr;
}

/// The input_info / output_info queries: value `index` of a function.
tc_status_t *valueInfo(const Artifact *a, const char *what, const char *function_name,
                       bool inputs, size_t index, const char **out_name, tc_dtype_t *out_dtype,
                       size_t *out_rank, const int64_t **out_shape) {
  const Function *fn;
  if (tc_status_t *st = findFunction(a, what, function_name, &fn))
    return st;
  const std::vector<int32_t> &ids = inputs ? fn->inputs : fn->outputs;
  const std::vector<std::string> &names = inputs ? fn->inputNames : fn->outputNames;
  if (index >= ids.size())
    return makeStatus(TC_STATUS_OUT_OF_RANGE,
                      std::string(inputs ? "input" : "output") + " index " +
                          std::to_string(index) + " is out of range: function '" + fn->name +
                          "' has " + std::to_string(ids.size()));
  const TensorType &t = fn->values[ids[index]];
  if (out_name)
    *out_name = names[index].c_str();
  if (out_dtype)
    *out_dtype = static_cast<tc_dtype_t>(t.dtype);
  if (out_rank)
    *out_rank = t.shape.size();
  if (out_shape)
    *out_shape = t.shape.data();
  return nullptr;
}

tc_status_t *createSession(std::shared_ptr<const Artifact> artifact,
                           const tc_session_options_t *options, tc_session_t **out_session) {
  tc_session_options_t opts;
  tc_session_options_initialize(&opts);
  if (options)
    opts = *options;
  if (opts.device != TC_DEVICE_CPU && opts.device != TC_DEVICE_CUDA)
    return invalid("unknown device " + std::to_string(opts.device));
  if (opts.ref_precision != TC_REF_PRECISION_F32 &&
      opts.ref_precision != TC_REF_PRECISION_F64)
    return invalid("unknown reference precision " + std::to_string(opts.ref_precision));
  if ((opts.allocator.alloc == nullptr) != (opts.allocator.free == nullptr))
    return invalid("allocator needs both alloc and free, or neither");
  if (opts.device == TC_DEVICE_CUDA && opts.device_ordinal < 0)
    return invalid("options->device_ordinal is " + std::to_string(opts.device_ordinal) +
                   ": a GPU ordinal is >= 0");
  if (opts.device == TC_DEVICE_CUDA && opts.ref_precision != TC_REF_PRECISION_F32)
    return invalid("ref_precision f64 is a CPU reference mode; it does not go with "
                   "TC_DEVICE_CUDA");
  if (!opts.allocator.alloc)
    opts.allocator = defaultAllocator();
  std::unique_ptr<tc_session_t> s(new (std::nothrow) tc_session_t);
  if (!s)
    return makeStatus(TC_STATUS_RESOURCE_EXHAUSTED, "out of memory creating a session");
  s->artifact = std::move(artifact);
  s->exec.precision = opts.ref_precision == TC_REF_PRECISION_F64 ? RefPrecision::F64
                                                                 : RefPrecision::F32;
  s->exec.initSeed = opts.init_seed;
  s->allocator = opts.allocator;
  DeviceOptions device;
  device.gpu = opts.device == TC_DEVICE_CUDA ? opts.device_ordinal : -1;
  device.cuda = cudaOptionsOf(opts.cuda);
  if (tc_status_t *st = toC(createExecutor(s->artifact.get(), s->exec, device, &s->executor)))
    return st;
  *out_session = s.release();
  return nullptr;
}

/// The session's executor, locked when it is a GPU's.
struct Locked {
  explicit Locked(tc_session_t *s)
      : lock(s->gpuMutex, std::defer_lock), ex(*s->executor) {
    if (ex.onDevice())
      lock.lock();
  }
  std::unique_lock<std::mutex> lock;
  Executor &ex;
};

} // namespace

extern "C" {

tc_status_code_t tc_status_code(const tc_status_t *status) {
  return status ? status->code : TC_STATUS_OK;
}

const char *tc_status_message(const tc_status_t *status) {
  return status ? status->message.c_str() : "";
}

int tc_status_is_input_error(const tc_status_t *status) {
  return status && status->inputError ? 1 : 0;
}

void tc_string_release(char *text) { std::free(text); }

void tc_status_release(tc_status_t *status) {
  if (status != outOfMemoryStatus())
    delete status;
}

const char *tc_dtype_name(tc_dtype_t dtype) {
  if (!dtypeIsValid(static_cast<uint8_t>(dtype)))
    return "?";
  return dtypeName(static_cast<DType>(dtype));
}

size_t tc_dtype_size(tc_dtype_t dtype) {
  if (!dtypeIsValid(static_cast<uint8_t>(dtype)))
    return 0;
  return static_cast<size_t>(dtypeStorageBytes(static_cast<DType>(dtype)));
}

const char *tc_tensor_name(const tc_tensor_t *t) { return t ? t->name.c_str() : ""; }
tc_dtype_t tc_tensor_dtype(const tc_tensor_t *t) { return t ? t->dtype : TC_DTYPE_F32; }
size_t tc_tensor_rank(const tc_tensor_t *t) { return t ? t->shape.size() : 0; }
const int64_t *tc_tensor_shape(const tc_tensor_t *t) { return t ? t->shape.data() : nullptr; }
size_t tc_tensor_element_count(const tc_tensor_t *t) { return t ? t->elements : 0; }
size_t tc_tensor_byte_size(const tc_tensor_t *t) { return t ? t->bytes : 0; }
const void *tc_tensor_data(const tc_tensor_t *t) { return t ? t->data : nullptr; }

void tc_tensor_release(tc_tensor_t *t) {
  if (!t)
    return;
  if (t->data)
    t->allocator.free(t->allocator.user, t->data);
  delete t;
}

void tc_session_options_initialize(tc_session_options_t *out_options) {
  if (!out_options)
    return;
  std::memset(out_options, 0, sizeof(*out_options));
  out_options->device = TC_DEVICE_CPU;
  out_options->ref_precision = TC_REF_PRECISION_F32;
  out_options->init_seed = 1337;
  initializeCudaOptions(&out_options->cuda);
}

tc_status_t *tc_session_create(const char *artifact_path,
                               const tc_session_options_t *options,
                               tc_session_t **out_session) {
  if (!out_session)
    return invalid("out_session is NULL");
  *out_session = nullptr;
  if (!artifact_path)
    return invalid("artifact_path is NULL");
  auto a = std::make_shared<Artifact>();
  if (tc_status_t *st = toC(readArtifact(artifact_path, a.get())))
    return st;
  return createSession(std::move(a), options, out_session);
}

tc_status_t *tc_session_create_from_memory(const void *data, size_t size,
                                           const tc_session_options_t *options,
                                           tc_session_t **out_session) {
  if (!out_session)
    return invalid("out_session is NULL");
  *out_session = nullptr;
  if (!data && size)
    return invalid("data is NULL");
  auto a = std::make_shared<Artifact>();
  static const uint8_t kEmpty = 0;
  const uint8_t *p = data ? static_cast<const uint8_t *>(data) : &kEmpty;
  if (tc_status_t *st = toC(parseArtifact(p, size, a.get(), "<memory>")))
    return st;
  return createSession(std::move(a), options, out_session);
}

tc_status_t *tc_session_create_from_artifact(const tc_artifact_t *artifact,
                                             const tc_session_options_t *options,
                                             tc_session_t **out_session) {
  if (!out_session)
    return invalid("out_session is NULL");
  *out_session = nullptr;
  if (!artifact)
    return invalid("artifact is NULL");
  return createSession(artifact->artifact, options, out_session);
}

void tc_session_release(tc_session_t *session) { delete session; }

size_t tc_session_function_count(const tc_session_t *session) {
  return session ? session->artifact->functions.size() : 0;
}

const char *tc_session_function_name(const tc_session_t *session, size_t index) {
  if (!session || index >= session->artifact->functions.size())
    return nullptr;
  return session->artifact->functions[index].name.c_str();
}

tc_status_t *tc_session_input_count(const tc_session_t *session, const char *function_name,
                                    size_t *out_count) {
  return valueCount(session ? session->artifact.get() : nullptr, "session", function_name, true,
                    out_count);
}

tc_status_t *tc_session_input_info(const tc_session_t *session, const char *function_name,
                                   size_t index, const char **out_name,
                                   tc_dtype_t *out_dtype, size_t *out_rank,
                                   const int64_t **out_shape) {
  return valueInfo(session ? session->artifact.get() : nullptr, "session", function_name, true,
                   index, out_name, out_dtype, out_rank, out_shape);
}

tc_status_t *tc_session_output_count(const tc_session_t *session, const char *function_name,
                                     size_t *out_count) {
  return valueCount(session ? session->artifact.get() : nullptr, "session", function_name, false,
                    out_count);
}

tc_status_t *tc_session_output_info(const tc_session_t *session, const char *function_name,
                                    size_t index, const char **out_name,
                                    tc_dtype_t *out_dtype, size_t *out_rank,
                                    const int64_t **out_shape) {
  return valueInfo(session ? session->artifact.get() : nullptr, "session", function_name, false,
                   index, out_name, out_dtype, out_rank, out_shape);
}

tc_status_t *tc_artifact_input_count(const tc_artifact_t *artifact, const char *function_name,
                                     size_t *out_count) {
  return valueCount(artifactOf(artifact), "artifact", function_name, true, out_count);
}

tc_status_t *tc_artifact_input_info(const tc_artifact_t *artifact, const char *function_name,
                                    size_t index, const char **out_name, tc_dtype_t *out_dtype,
                                    size_t *out_rank, const int64_t **out_shape) {
  return valueInfo(artifactOf(artifact), "artifact", function_name, true, index, out_name,
                   out_dtype, out_rank, out_shape);
}

tc_status_t *tc_artifact_output_count(const tc_artifact_t *artifact, const char *function_name,
                                      size_t *out_count) {
  return valueCount(artifactOf(artifact), "artifact", function_name, false, out_count);
}

tc_status_t *tc_artifact_output_info(const tc_artifact_t *artifact, const char *function_name,
                                     size_t index, const char **out_name, tc_dtype_t *out_dtype,
                                     size_t *out_rank, const int64_t **out_shape) {
  return valueInfo(artifactOf(artifact), "artifact", function_name, false, index, out_name,
                   out_dtype, out_rank, out_shape);
}

tc_status_t *tc_session_run(tc_session_t *session, const char *function_name,
                            const tc_tensor_view_t *inputs, size_t num_inputs,
                            tc_tensor_t **out_outputs, size_t num_outputs) {
  if (out_outputs)
    for (size_t i = 0; i < num_outputs; ++i)
      out_outputs[i] = nullptr;
  const Function *fn;
  if (tc_status_t *st = findFunction(session, function_name, &fn))
    return st;
  if (num_inputs && !inputs)
    return invalid("inputs is NULL");
  if (num_outputs != fn->outputs.size())
    return invalid("function '" + fn->name + "' has " + std::to_string(fn->outputs.size()) +
                   " outputs, num_outputs is " + std::to_string(num_outputs));
  if (num_outputs && !out_outputs)
    return invalid("out_outputs is NULL");
  if (num_inputs != fn->inputs.size())
    return invalid("function '" + fn->name + "' takes " + std::to_string(fn->inputs.size()) +
                   " inputs, got " + std::to_string(num_inputs));
  try {
    // Order the views as the function's inputs, by name.
    std::vector<HostTensor> ordered(fn->inputs.size());
    std::vector<bool> fed(fn->inputs.size(), false);
    for (size_t i = 0; i < num_inputs; ++i) {
      const tc_tensor_view_t &v = inputs[i];
      if (!v.name)
        return invalid("input view #" + std::to_string(i) + " has no name");
      size_t slot = fn->inputNames.size();
      for (size_t k = 0; k < fn->inputNames.size(); ++k)
        if (fn->inputNames[k] == v.name)
          slot = k;
      if (slot == fn->inputNames.size())
        return invalid(std::string("function '") + fn->name + "' has no input '" + v.name + "'");
      if (fed[slot])
        return invalid(std::string("input '") + v.name + "' is given twice");
      fed[slot] = true;
      if (!dtypeIsValid(static_cast<uint8_t>(v.dtype)))
        return invalid(std::string("input '") + v.name + "': invalid dtype " +
                       std::to_string(v.dtype));
      if (v.rank && !v.shape)
        return invalid(std::string("input '") + v.name + "': shape is NULL");
      HostTensor &t = ordered[slot];
      t.type.dtype = static_cast<DType>(v.dtype);
      t.type.shape.assign(v.shape, v.shape + v.rank);
      const TensorType &want = fn->values[fn->inputs[slot]];
      if (t.type != want)
        return invalid(std::string("input '") + v.name + "': expected " +
                       typeToString(want) + ", got " + typeToString(t.type));
      size_t need = static_cast<size_t>(storageBytes(want));
      if (v.data_size != need)
        return invalid(std::string("input '") + v.name + "': " + typeToString(want) +
                       " needs " + std::to_string(need) + " bytes, got " +
                       std::to_string(v.data_size));
      if (need && !v.data)
        return invalid(std::string("input '") + v.name + "': data is NULL");
      const uint8_t *p = static_cast<const uint8_t *>(v.data);
      t.data.assign(p, p + need);
    }
    std::vector<HostTensor> outs;
    {
      Locked run(session);
      if (run.ex.onDevice() && !run.ex.hasFunction(fn->name))
        return makeStatus(TC_STATUS_NOT_FOUND, "the artifact's GPU program has no function '" +
                                                   fn->name + "' (create a CPU session for it)");
      if (tc_status_t *st = toC(run.ex.run(fn->name, ordered, &outs)))
        return st;
    }
    struct Releaser {
      void operator()(tc_tensor_t *t) const { tc_tensor_release(t); }
    };
    std::vector<std::unique_ptr<tc_tensor_t, Releaser>> made;
    for (size_t i = 0; i < outs.size(); ++i) {
      made.emplace_back(newTensor(fn->outputNames[i], outs[i], session->allocator));
      if (!made.back())
        return makeStatus(TC_STATUS_RESOURCE_EXHAUSTED, "cannot allocate output '" +
                                                            fn->outputNames[i] + "'");
    }
    for (size_t i = 0; i < made.size(); ++i)
      out_outputs[i] = made[i].release();
  } catch (const std::bad_alloc &) {
    return makeStatus(TC_STATUS_RESOURCE_EXHAUSTED, "out of memory in tc_session_run");
  }
  return nullptr;
}

tc_status_t *tc_artifact_check_inputs(const tc_artifact_t *artifact, const char *function_name,
                                      const tc_tensor_view_t *inputs, size_t num_inputs) {
  const Function *fn;
  if (tc_status_t *st = findFunction(artifactOf(artifact), "artifact", function_name, &fn))
    return st;
  if (num_inputs && !inputs)
    return invalid("inputs is NULL");
  std::vector<HostTensor> values(num_inputs);
  for (size_t i = 0; i < num_inputs; ++i)
    if (tc_status_t *st = fromView(&inputs[i], "inputs[" + std::to_string(i) + "]", &values[i]))
      return st;
  Status st = checkInputs(*fn, values);
  if (st.isOk())
    st = checkInputRanges(*artifact->artifact, fn->inputNames, values);
  return toC(st, true);
}

tc_status_t *tc_session_generate(tc_session_t *session, const tc_generate_options_t *options,
                                 const int64_t *prompt, size_t prompt_length,
                                 tc_tensor_t **out_tokens) {
  if (!out_tokens)
    return invalid("out_tokens is NULL");
  *out_tokens = nullptr;
  if (!session)
    return invalid("session is NULL");
  GenerateOptions g;
  if (tc_status_t *st = generateOptionsOf(options, prompt, prompt_length, &g))
    return st;
  std::vector<int64_t> tokens;
  bool userError = false;
  Status st;
  {
    Locked run(session);
    st = generateWith(*session->artifact, run.ex, g, &tokens, &userError);
  }
  if (!st.isOk())
    return toC(st, userError);
  return tokensTensor(tokens, out_tokens, session->allocator);
}

tc_status_t *tc_session_next_logits(tc_session_t *session, const int64_t *context,
                                    size_t context_length, tc_tensor_t **out_logits) {
  if (!out_logits)
    return invalid("out_logits is NULL");
  *out_logits = nullptr;
  if (!session)
    return invalid("session is NULL");
  if (context_length && !context)
    return invalid("context is NULL");
  HostTensor logits;
  bool userError = false;
  Status st;
  {
    Locked run(session);
    st = nextLogits(*session->artifact, run.ex,
                    std::vector<int64_t>(context, context + context_length), &logits, &userError);
  }
  if (!st.isOk())
    return toC(st, userError);
  *out_logits = newTensor("logits", logits, session->allocator);
  return *out_logits ? nullptr : makeStatus(TC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
}

tc_status_t *tc_session_infer_greedy(tc_session_t *session, const int64_t *prompt,
                                     size_t prompt_length, int64_t max_new_tokens,
                                     tc_tensor_t **out_logits, tc_tensor_t **out_tokens) {
  if (tc_status_t *st = inferArguments(prompt, prompt_length, out_logits, out_tokens))
    return st;
  if (!session)
    return invalid("session is NULL");
  HostTensor logits;
  std::vector<int64_t> tokens;
  bool userError = false;
  Status st;
  {
    Locked run(session);
    st = inferGreedy(*session->artifact, run.ex, std::vector<int64_t>(prompt, prompt + prompt_length),
                     max_new_tokens, &logits, &tokens, &userError);
  }
  if (!st.isOk())
    return toC(st, userError);
  return inferResult(logits, tokens, session->allocator, out_logits, out_tokens);
}

} // extern "C"
