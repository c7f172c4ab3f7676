//===- session.cpp - the public C API over the CPU reference executor -----===//
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
#if TC_HAVE_CUDA
#include "runtime/src/cuda/executor.h"
#endif

using namespace tc::rt;

struct tc_status_t {
  tc_status_code_t code;
  std::string message;
};

struct tc_session_t {
  Artifact artifact;
  ExecOptions exec;
  tc_allocator_t allocator;
#if TC_HAVE_CUDA
  // TC_DEVICE_CUDA: the artifact's device program on GPU 0; parameters and
  // optimizer state live there and functions that update them do so in place.
  std::unique_ptr<tc::rt::cuda::DeviceExecutor> gpu;
#endif
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

namespace {

/// Returned when even a status cannot be allocated; never freed.
tc_status_t *outOfMemoryStatus() {
  static tc_status_t *s = new tc_status_t{TC_STATUS_RESOURCE_EXHAUSTED, "out of memory"};
  return s;
}

tc_status_t *makeStatus(tc_status_code_t code, std::string message) {
  try {
    return new tc_status_t{code, std::move(message)};
  } catch (const std::bad_alloc &) {
    return outOfMemoryStatus();
  }
}

tc_status_t *toC(const Status &st) {
  if (st.isOk())
    return nullptr;
  return makeStatus(static_cast<tc_status_code_t>(st.code()), st.message());
}

tc_status_t *invalid(const std::string &msg) {
  return makeStatus(TC_STATUS_INVALID_ARGUMENT, msg);
}

void *defaultAlloc(void *, size_t size, size_t alignment) {
  size_t rounded = (size + alignment - 1) / alignment * alignment;
  return std::aligned_alloc(alignment, rounded ? rounded : alignment);
}
void defaultFree(void *, void *ptr) { std::free(ptr); }

tc_status_t *findFunction(const tc_session_t *s, const char *name, const Function **out) {
  if (!s)
    return invalid("session is NULL");
  if (!name)
    return invalid("function name is NULL");
  *out = s->artifact.findFunction(name);
  if (!*out)
    return makeStatus(TC_STATUS_NOT_FOUND,
                      std::string("no function '") + name + "' in the artifact");
  return nullptr;
}

tc_status_t *valueInfo(const Function &fn, const std::vector<int32_t> &ids,
                       const std::vector<std::string> &names, const char *what,
                       size_t index, const char **out_name, tc_dtype_t *out_dtype,
                       size_t *out_rank, const int64_t **out_shape) {
  if (index >= ids.size())
    return makeStatus(TC_STATUS_OUT_OF_RANGE,
                      std::string(what) + " index " + std::to_string(index) +
                          " is out of range: function '" + fn.name + "' has " +
                          std::to_string(ids.size()));
  const TensorType &t = fn.values[ids[index]];
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

tc_status_t *createSession(Artifact artifact, const tc_session_options_t *options,
                           tc_session_t **out_session) {
  tc_session_options_t opts;
  tc_session_options_initialize(&opts);
  if (options)
    opts = *options;
#if !TC_HAVE_CUDA
  if (opts.device == TC_DEVICE_CUDA)
    return makeStatus(TC_STATUS_UNIMPLEMENTED,
                      "this build of the tc runtime has no CUDA backend");
#endif
  if (opts.device != TC_DEVICE_CPU && opts.device != TC_DEVICE_CUDA)
    return invalid("unknown device " + std::to_string(opts.device));
  if (opts.ref_precision != TC_REF_PRECISION_F32 &&
      opts.ref_precision != TC_REF_PRECISION_F64)
    return invalid("unknown reference precision " + std::to_string(opts.ref_precision));
  if ((opts.allocator.alloc == nullptr) != (opts.allocator.free == nullptr))
    return invalid("allocator needs both alloc and free, or neither");
  if (!opts.allocator.alloc) {
    opts.allocator.alloc = defaultAlloc;
    opts.allocator.free = defaultFree;
  }
  tc_session_t *s = new (std::nothrow) tc_session_t;
  if (!s)
    return makeStatus(TC_STATUS_RESOURCE_EXHAUSTED, "out of memory creating a session");
  s->artifact = std::move(artifact);
  s->exec.precision = opts.ref_precision == TC_REF_PRECISION_F64 ? RefPrecision::F64
                                                                 : RefPrecision::F32;
  s->allocator = opts.allocator;
#if TC_HAVE_CUDA
  if (opts.device == TC_DEVICE_CUDA) {
    if (opts.ref_precision != TC_REF_PRECISION_F32) {
      delete s;
      return invalid("ref_precision f64 is a CPU reference mode; it does not go with "
                     "TC_DEVICE_CUDA");
    }
    tc::rt::cuda::ExecutorOptions eo;
    Status st = tc::rt::cuda::DeviceExecutor::create(&s->artifact, eo, &s->gpu);
    if (!st.isOk()) {
      delete s;
      return toC(st);
    }
  }
#endif
  *out_session = s;
  return nullptr;
}

} // namespace

extern "C" {

tc_status_code_t tc_status_code(const tc_status_t *status) {
  return status ? status->code : TC_STATUS_OK;
}

const char *tc_status_message(const tc_status_t *status) {
  return status ? status->message.c_str() : "";
}

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
}

tc_status_t *tc_session_create(const char *artifact_path,
                               const tc_session_options_t *options,
                               tc_session_t **out_session) {
  if (!out_session)
    return invalid("out_session is NULL");
  *out_session = nullptr;
  if (!artifact_path)
    return invalid("artifact_path is NULL");
  Artifact a;
  if (tc_status_t *st = toC(readArtifact(artifact_path, &a)))
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
  Artifact a;
  static const uint8_t kEmpty = 0;
  const uint8_t *p = data ? static_cast<const uint8_t *>(data) : &kEmpty;
  if (tc_status_t *st = toC(parseArtifact(p, size, &a, "<memory>")))
    return st;
  return createSession(std::move(a), options, out_session);
}

void tc_session_release(tc_session_t *session) { delete session; }

size_t tc_session_function_count(const tc_session_t *session) {
  return session ? session->artifact.functions.size() : 0;
}

const char *tc_session_function_name(const tc_session_t *session, size_t index) {
  if (!session || index >= session->artifact.functions.size())
    return nullptr;
  return session->artifact.functions[index].name.c_str();
}

tc_status_t *tc_session_input_count(const tc_session_t *session, const char *function_name,
                                    size_t *out_count) {
  const Function *fn;
  if (tc_status_t *st = findFunction(session, function_name, &fn))
    return st;
  if (out_count)
    *out_count = fn->inputs.size();
  return nullptr;
}

tc_status_t *tc_session_input_info(const tc_session_t *session, const char *function_name,
                                   size_t index, const char **out_name,
                                   tc_dtype_t *out_dtype, size_t *out_rank,
                                   const int64_t **out_shape) {
  const Function *fn;
  if (tc_status_t *st = findFunction(session, function_name, &fn))
    return st;
  return valueInfo(*fn, fn->inputs, fn->inputNames, "input", index, out_name, out_dtype,
                   out_rank, out_shape);
}

tc_status_t *tc_session_output_count(const tc_session_t *session, const char *function_name,
                                     size_t *out_count) {
  const Function *fn;
  if (tc_status_t *st = findFunction(session, function_name, &fn))
    return st;
  if (out_count)
    *out_count = fn->outputs.size();
  return nullptr;
}

tc_status_t *tc_session_output_info(const tc_session_t *session, const char *function_name,
                                    size_t index, const char **out_name,
                                    tc_dtype_t *out_dtype, size_t *out_rank,
                                    const int64_t **out_shape) {
  const Function *fn;
  if (tc_status_t *st = findFunction(session, function_name, &fn))
    return st;
  return valueInfo(*fn, fn->outputs, fn->outputNames, "output", index, out_name,
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
#if TC_HAVE_CUDA
    if (session->gpu) {
      if (!session->gpu->hasFunction(fn->name))
        return makeStatus(TC_STATUS_NOT_FOUND, "the artifact's GPU program has no function '" +
                                                   fn->name + "' (create a CPU session for it)");
      if (tc_status_t *st = toC(session->gpu->run(fn->name, ordered, &outs)))
        return st;
    } else
#endif
    if (tc_status_t *st = toC(runFunction(session->artifact, *fn, ordered, &outs,
                                          session->exec)))
      return st;
    struct Releaser {
      void operator()(tc_tensor_t *t) const { tc_tensor_release(t); }
    };
    std::vector<std::unique_ptr<tc_tensor_t, Releaser>> made;
    for (size_t i = 0; i < outs.size(); ++i) {
      made.emplace_back(new tc_tensor_t);
      tc_tensor_t *t = made.back().get();
      t->name = fn->outputNames[i];
      t->dtype = static_cast<tc_dtype_t>(outs[i].type.dtype);
      t->shape = outs[i].type.shape;
      t->elements = static_cast<size_t>(outs[i].type.numElements());
      t->bytes = outs[i].data.size();
      t->allocator = session->allocator;
      t->data = t->allocator.alloc(t->allocator.user, t->bytes ? t->bytes : 1, 64);
      if (!t->data)
        return makeStatus(TC_STATUS_RESOURCE_EXHAUSTED, "cannot allocate output '" +
                                                            t->name + "'");
      if (t->bytes)
        std::memcpy(t->data, outs[i].data.data(), t->bytes);
    }
    for (size_t i = 0; i < made.size(); ++i)
      out_outputs[i] = made[i].release();
  } catch (const std::bad_alloc &) {
    return makeStatus(TC_STATUS_RESOURCE_EXHAUSTED, "out of memory in tc_session_run");
  }
  return nullptr;
}

} // extern "C"
