//===- capi_io.cpp - the C API: files, token sources, metrics, generation -===//
#include "tc/runtime.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <new>
#include <sys/stat.h>

#include "runtime/src/schema/artifact.h"
#include "runtime/src/base/host_tensor.h"
#include "runtime/src/base/json.h"
#include "runtime/src/base/npy.h"
#include "runtime/src/base/safetensors.h"
#include "runtime/src/session/backend.h"
#include "runtime/src/session/capi.h"
#include "runtime/src/session/run.h"
#include "runtime/src/session/trainer.h"

using namespace tc::rt;
using namespace tc::rt::capi;

struct tc_tensor_list_t {
  std::vector<tc_tensor_t *> tensors;
  ~tc_tensor_list_t() {
    for (tc_tensor_t *t : tensors)
      tc_tensor_release(t);
  }
};

namespace {

tc_status_t *outOfMemory() { return makeStatus(TC_STATUS_RESOURCE_EXHAUSTED, "out of memory"); }

/// Sets *out to a new tensor of `t`, or says why not.
tc_status_t *give(const std::string &name, const HostTensor &t, tc_tensor_t **out) {
  *out = newTensor(name, t);
  return *out ? nullptr : outOfMemory();
}

/// mkdir -p.
bool makeDirs(const std::string &dir) {
  std::string path;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    path = dir.substr(0, pos);
    if (path.empty())
      continue;
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
      return false;
  }
  struct stat st;
  return ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

/// bf16/fp8/fp4 have no numpy dtype: widened to f32 (exact).
HostTensor npyWritable(const HostTensor &t) {
  if (npyDescr(t.type.dtype))
    return t;
  return makeHostTensor({DType::F32, t.type.shape}, hostTensorToDoubles(t));
}

/// A scalar output's JSON number: %.9g for floats, an integer otherwise,
/// null when not finite.
std::string jsonNumber(DType dtype, double v) {
  if (!std::isfinite(v))
    return "null";
  char buf[64];
  if (dtypeIsFloat(dtype))
    std::snprintf(buf, sizeof buf, "%.9g", v);
  else
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  return buf;
}

StepRecord stepRecordOf(const tc_step_metrics_t &m) {
  StepRecord r;
  r.step = m.step;
  r.first = m.first_step;
  r.total = m.total_steps;
  r.loss = m.loss;
  r.lossSmooth = m.loss_smooth;
  r.lr = m.lr;
  r.gradNorm = m.has_grad_norm ? m.grad_norm : NAN;
  r.tokens = m.tokens;
  r.tokensTotal = m.tokens_total;
  r.tokensPerS = m.tokens_per_s;
  r.stepTimeS = m.step_time_s;
  r.elapsedS = m.elapsed_s;
  r.etaS = m.eta_s;
  r.mfu = m.mfu;
  r.hfu = m.hfu;
  r.periodic = m.periodic != 0;
  r.skipped = m.skipped != 0;
  r.lossScale = m.loss_scale;
  r.fp8Saturated = m.has_fp8_saturated ? static_cast<double>(m.fp8_saturated) : -1;
  return r;
}

tc_status_t *giveString(const std::string &s, char **out) {
  *out = copyString(s);
  return *out ? nullptr : outOfMemory();
}

} // namespace

extern "C" {

/*===------------------------------ dtypes, tensors ----------------------===*/

int tc_dtype_is_float(tc_dtype_t dtype) {
  return dtypeIsValid(static_cast<uint8_t>(dtype)) && dtypeIsFloat(static_cast<DType>(dtype));
}

tc_status_t *tc_type_to_string(tc_dtype_t dtype, size_t rank, const int64_t *shape,
                               char **out_text) {
  if (!out_text)
    return invalid("out_text is NULL");
  *out_text = nullptr;
  if (!dtypeIsValid(static_cast<uint8_t>(dtype)))
    return invalid("dtype " + std::to_string(dtype) + " is not a tc_dtype_t");
  if (rank && !shape)
    return invalid("shape is NULL");
  TensorType t{static_cast<DType>(dtype), std::vector<int64_t>(shape, shape + rank)};
  return giveString(typeToString(t), out_text);
}

tc_status_t *tc_tensor_create(const tc_tensor_view_t *view, tc_tensor_t **out_tensor) {
  if (!out_tensor)
    return invalid("out_tensor is NULL");
  *out_tensor = nullptr;
  HostTensor t;
  if (tc_status_t *st = fromView(view, "view", &t))
    return st;
  if (tc_status_t *st = toC(checkHostTensor(t, "view"), true))
    return st;
  return give(str(view->name), t, out_tensor);
}

void tc_tensor_as_view(const tc_tensor_t *tensor, tc_tensor_view_t *out_view) {
  if (!out_view)
    return;
  std::memset(out_view, 0, sizeof *out_view);
  if (!tensor)
    return;
  out_view->name = tensor->name.c_str();
  out_view->dtype = tensor->dtype;
  out_view->rank = tensor->shape.size();
  out_view->shape = tensor->shape.data();
  out_view->data = tensor->data;
  out_view->data_size = tensor->bytes;
}

tc_status_t *tc_tensor_to_f64(const tc_tensor_t *tensor, double *out_values, size_t count) {
  if (!tensor)
    return invalid("tensor is NULL");
  if (count != tensor->elements)
    return invalid("count is " + std::to_string(count) + " but tensor '" + tensor->name +
                   "' has " + std::to_string(tensor->elements) + " elements");
  if (count && !out_values)
    return invalid("out_values is NULL");
  std::vector<double> v = hostTensorToDoubles(hostTensorOf(*tensor));
  std::copy(v.begin(), v.end(), out_values);
  return nullptr;
}

/*===-------------------------------- files ------------------------------===*/

tc_status_t *tc_npy_read(const char *path, const char *name, tc_tensor_t **out_tensor) {
  if (!out_tensor)
    return invalid("out_tensor is NULL");
  *out_tensor = nullptr;
  if (!path)
    return invalid("path is NULL");
  HostTensor t;
  if (tc_status_t *st = toC(readNpy(path, &t), true))
    return st;
  return give(str(name), t, out_tensor);
}

tc_status_t *tc_npy_write(const char *path, const tc_tensor_view_t *tensor) {
  if (!path)
    return invalid("path is NULL");
  HostTensor t;
  if (tc_status_t *st = fromView(tensor, "tensor", &t))
    return st;
  return toC(writeNpy(path, npyWritable(t)));
}

tc_status_t *tc_npy_write_dir(const char *dir, const tc_tensor_t *const *tensors, size_t count) {
  if (!dir)
    return invalid("dir is NULL");
  if (count && !tensors)
    return invalid("tensors is NULL");
  if (!makeDirs(dir))
    return makeStatus(TC_STATUS_IO_ERROR, std::string("cannot create folder '") + dir +
                                              "': " + std::strerror(errno));
  for (size_t i = 0; i < count; ++i) {
    if (!tensors[i])
      return invalid("tensors[" + std::to_string(i) + "] is NULL");
    std::string file = tensors[i]->name;
    for (char &ch : file)
      if (ch == '/' || ch == '\\')
        ch = '_'; // output names are not paths
    if (tc_status_t *st = toC(writeNpy(std::string(dir) + "/" + file + ".npy",
                                       npyWritable(hostTensorOf(*tensors[i])))))
      return st;
  }
  return nullptr;
}

size_t tc_tensor_list_count(const tc_tensor_list_t *list) {
  return list ? list->tensors.size() : 0;
}

const tc_tensor_t *tc_tensor_list_get(const tc_tensor_list_t *list, size_t index) {
  return list && index < list->tensors.size() ? list->tensors[index] : nullptr;
}

const tc_tensor_t *tc_tensor_list_find(const tc_tensor_list_t *list, const char *name) {
  if (!list || !name)
    return nullptr;
  for (const tc_tensor_t *t : list->tensors)
    if (t->name == name)
      return t;
  return nullptr;
}

void tc_tensor_list_release(tc_tensor_list_t *list) { delete list; }

tc_status_t *tc_safetensors_read(const char *path, tc_tensor_list_t **out_list) {
  if (!out_list)
    return invalid("out_list is NULL");
  *out_list = nullptr;
  if (!path)
    return invalid("path is NULL");
  SafetensorsFile f;
  if (tc_status_t *st = toC(readSafetensors(path, &f), true))
    return st;
  std::unique_ptr<tc_tensor_list_t> list(new (std::nothrow) tc_tensor_list_t);
  if (!list)
    return outOfMemory();
  for (const auto &[name, t] : f.tensors) {
    tc_tensor_t *c = newTensor(name, t);
    if (!c)
      return outOfMemory();
    list->tensors.push_back(c);
  }
  *out_list = list.release();
  return nullptr;
}

tc_status_t *tc_safetensors_write(const char *path, const tc_tensor_view_t *tensors,
                                  size_t count) {
  if (!path)
    return invalid("path is NULL");
  if (count && !tensors)
    return invalid("tensors is NULL");
  SafetensorsFile f;
  for (size_t i = 0; i < count; ++i) {
    std::string what = "tensors[" + std::to_string(i) + "]";
    if (!tensors[i].name || !*tensors[i].name)
      return invalid(what + " has no name");
    HostTensor t;
    if (tc_status_t *st = fromView(&tensors[i], what, &t))
      return st;
    if (tc_status_t *st = toC(checkHostTensor(t, what + " '" + tensors[i].name + "'"), true))
      return st;
    if (!f.tensors.emplace(tensors[i].name, std::move(t)).second)
      return invalid(what + ": the name '" + std::string(tensors[i].name) + "' is given twice");
  }
  return toC(writeSafetensors(path, f));
}

/*===---------------------------- token sources --------------------------===*/

tc_status_t *tc_token_source_open(const char *path, tc_dtype_t token_dtype,
                                  tc_token_source_t **out_source) {
  if (!out_source)
    return invalid("out_source is NULL");
  *out_source = nullptr;
  if (!path)
    return invalid("path is NULL");
  if (token_dtype != TC_DTYPE_U16 && token_dtype != TC_DTYPE_U32)
    return invalid("token_dtype is " + std::string(tc_dtype_name(token_dtype)) +
                   ": token files are u16 or u32");
  std::unique_ptr<tc_token_source_t> s(new (std::nothrow) tc_token_source_t);
  if (!s)
    return outOfMemory();
  if (tc_status_t *st =
          toC(s->data.open(path, token_dtype == TC_DTYPE_U32 ? 4 : 2), true))
    return st;
  *out_source = s.release();
  return nullptr;
}

tc_status_t *tc_token_source_from_memory(const int64_t *tokens, size_t count,
                                         tc_token_source_t **out_source) {
  if (!out_source)
    return invalid("out_source is NULL");
  *out_source = nullptr;
  if (count && !tokens)
    return invalid("tokens is NULL");
  std::vector<uint32_t> ids(count);
  for (size_t i = 0; i < count; ++i) {
    if (tokens[i] < 0 || tokens[i] > 0xffffffffLL)
      return invalid("tokens[" + std::to_string(i) + "] is " + std::to_string(tokens[i]) +
                     ": token ids lie in [0, 2^32)");
    ids[i] = static_cast<uint32_t>(tokens[i]);
  }
  std::unique_ptr<tc_token_source_t> s(new (std::nothrow) tc_token_source_t);
  if (!s)
    return outOfMemory();
  if (tc_status_t *st = toC(s->data.openMemory(std::move(ids), "the given tokens")))
    return st;
  *out_source = s.release();
  return nullptr;
}

void tc_token_source_release(tc_token_source_t *source) { delete source; }

int64_t tc_token_source_count(const tc_token_source_t *source) {
  return source ? source->data.numTokens() : 0;
}

tc_status_t *tc_token_source_batch(const tc_token_source_t *source, const uint64_t *offsets,
                                   size_t num_offsets, int64_t seq, tc_dtype_t dtype,
                                   tc_label_shift_t labels, tc_tensor_t **out_input_ids,
                                   tc_tensor_t **out_labels) {
  if (!out_input_ids || !out_labels)
    return invalid(std::string(out_input_ids ? "out_labels" : "out_input_ids") + " is NULL");
  *out_input_ids = *out_labels = nullptr;
  if (!source)
    return invalid("source is NULL");
  if (num_offsets && !offsets)
    return invalid("offsets is NULL");
  if (seq < 1)
    return invalid("seq is " + std::to_string(seq) + ": it must be >= 1");
  if (!dtypeIsValid(static_cast<uint8_t>(dtype)) || !dtypeIsInteger(static_cast<DType>(dtype)))
    return invalid("dtype " + std::string(tc_dtype_name(dtype)) + " is not an integer type");
  if (labels != TC_LABELS_NEXT && labels != TC_LABELS_SAME)
    return invalid("labels is " + std::to_string(labels) + ": TC_LABELS_NEXT or TC_LABELS_SAME");
  HostTensor ids, lab;
  if (tc_status_t *st = toC(source->data.batchAt(
                                std::vector<uint64_t>(offsets, offsets + num_offsets), seq,
                                static_cast<DType>(dtype), &ids, &lab,
                                labels == TC_LABELS_SAME ? LabelShift::Same : LabelShift::Next),
                            true))
    return st;
  if (tc_status_t *st = give("input_ids", ids, out_input_ids))
    return st;
  if (tc_status_t *st = give("labels", lab, out_labels)) {
    tc_tensor_release(*out_input_ids);
    *out_input_ids = nullptr;
    return st;
  }
  return nullptr;
}

tc_status_t *tc_token_source_eval_offsets(const tc_token_source_t *source, int64_t batch,
                                          int64_t seq, int64_t index, int64_t iters,
                                          uint64_t *out_offsets) {
  if (!source)
    return invalid("source is NULL");
  if (!out_offsets)
    return invalid("out_offsets is NULL");
  if (batch < 1 || seq < 1 || iters < 1)
    return invalid(std::string(batch < 1 ? "batch" : seq < 1 ? "seq" : "iters") +
                   " must be >= 1");
  if (index < 0 || index >= iters)
    return invalid("index is " + std::to_string(index) + ": it must lie in [0, iters)");
  if (source->data.numTokens() < seq + 1)
    return invalid("the source has " + std::to_string(source->data.numTokens()) +
                   " tokens, fewer than seq+1 = " + std::to_string(seq + 1));
  std::vector<uint64_t> o = evalOffsets(source->data, batch, seq, index, iters);
  std::copy(o.begin(), o.end(), out_offsets);
  return nullptr;
}

/*===------------------------------ artifacts ----------------------------===*/

tc_status_t *tc_artifact_open(const char *path, tc_artifact_t **out_artifact) {
  if (!out_artifact)
    return invalid("out_artifact is NULL");
  *out_artifact = nullptr;
  if (!path)
    return invalid("path is NULL");
  std::unique_ptr<tc_artifact_t> a(new (std::nothrow) tc_artifact_t);
  if (!a)
    return outOfMemory();
  a->artifact = std::make_shared<Artifact>();
  a->path = path;
  if (tc_status_t *st = toC(readArtifact(path, a->artifact.get()), true))
    return st;
  *out_artifact = a.release();
  return nullptr;
}

void tc_artifact_release(tc_artifact_t *artifact) { delete artifact; }

const char *tc_artifact_path(const tc_artifact_t *artifact) {
  return artifact ? artifact->path.c_str() : "";
}

const char *tc_artifact_target(const tc_artifact_t *artifact) {
  return artifact ? artifact->artifact->target.c_str() : "";
}

int tc_artifact_has_device_program(const tc_artifact_t *artifact) {
  return artifact && !artifact->artifact->deviceFunctions.empty();
}

size_t tc_artifact_function_count(const tc_artifact_t *artifact) {
  return artifact ? artifact->artifact->functions.size() : 0;
}

const char *tc_artifact_function_name(const tc_artifact_t *artifact, size_t index) {
  if (!artifact || index >= artifact->artifact->functions.size())
    return nullptr;
  return artifact->artifact->functions[index].name.c_str();
}

int tc_artifact_has_function(const tc_artifact_t *artifact, const char *name) {
  return artifact && name && artifact->artifact->findFunction(name);
}

int tc_artifact_has_device_function(const tc_artifact_t *artifact, const char *name) {
  return artifact && name && artifact->artifact->findDeviceFunction(name);
}

tc_status_t *tc_artifact_load_weights(tc_artifact_t *artifact, const char *weights,
                                      int64_t *out_step) {
  if (!artifact)
    return invalid("artifact is NULL");
  if (!weights)
    return invalid("weights is NULL");
  // Copy on write: sessions and trainers keep the weights they were made with.
  auto copy = std::make_shared<Artifact>(*artifact->artifact);
  int64_t step = -1;
  if (tc_status_t *st = toC(loadArtifactWeights(copy.get(), weights, &step), true))
    return st;
  artifact->artifact = std::move(copy);
  if (out_step)
    *out_step = step;
  return nullptr;
}

/*===------------------------------- devices -----------------------------===*/

int tc_cuda_built(void) { return cudaBuilt() ? 1 : 0; }

tc_status_t *tc_cuda_check(void) { return toC(cudaAvailable()); }

/*===------------------------------ generation ---------------------------===*/

void tc_generate_options_initialize(tc_generate_options_t *out_options) {
  if (!out_options)
    return;
  std::memset(out_options, 0, sizeof *out_options);
  out_options->max_new_tokens = 32;
  out_options->temperature = 1.0;
  out_options->seed = 1337;
  out_options->ref_precision = TC_REF_PRECISION_F32;
}

tc_status_t *tc_run_generate(const tc_artifact_t *artifact, const tc_generate_options_t *options,
                             const int64_t *prompt, size_t prompt_length,
                             tc_tensor_t **out_tokens) {
  if (!out_tokens)
    return invalid("out_tokens is NULL");
  *out_tokens = nullptr;
  if (!artifact)
    return invalid("artifact is NULL");
  GenerateOptions g;
  if (tc_status_t *st = generateOptionsOf(options, prompt, prompt_length, &g))
    return st;
  std::vector<int64_t> tokens;
  bool userError = false;
  if (tc_status_t *st = toC(generate(*artifact->artifact, g, &tokens, &userError), &userError))
    return st;
  return tokensTensor(tokens, out_tokens);
}

/*===------------------------------- metrics -----------------------------===*/

tc_status_t *tc_metrics_train_json(const tc_step_metrics_t *metrics, char **out_json) {
  if (!out_json)
    return invalid("out_json is NULL");
  *out_json = nullptr;
  if (!metrics)
    return invalid("metrics is NULL");
  return giveString(trainMetricsJson(stepRecordOf(*metrics)), out_json);
}

tc_status_t *tc_metrics_val_json(const tc_val_metrics_t *metrics, char **out_json) {
  if (!out_json)
    return invalid("out_json is NULL");
  *out_json = nullptr;
  if (!metrics)
    return invalid("metrics is NULL");
  ValRecord v;
  v.step = metrics->step;
  v.valLoss = metrics->val_loss;
  v.valTokens = metrics->val_tokens;
  return giveString(valMetricsJson(v), out_json);
}

tc_status_t *tc_metrics_eval_loss_json(int64_t step, double loss, int64_t tokens,
                                       char **out_json) {
  if (!out_json)
    return invalid("out_json is NULL");
  return giveString(evalLossMetricsJson(step, loss, tokens), out_json);
}

tc_status_t *tc_metrics_eval_outputs_json(int64_t step, const char *function,
                                          const tc_tensor_t *const *outputs, size_t count,
                                          char **out_json) {
  if (!out_json)
    return invalid("out_json is NULL");
  *out_json = nullptr;
  if (!function)
    return invalid("function is NULL");
  if (count && !outputs)
    return invalid("outputs is NULL");
  std::string line = std::string("{\"schema\": \"") + kMetricsSchema +
                     "\", \"kind\": \"eval\", \"step\": " +
                     (step >= 0 ? std::to_string(step) : "null") +
                     ", \"function\": " + jsonQuote(function);
  for (size_t i = 0; i < count; ++i) {
    if (!outputs[i])
      return invalid("outputs[" + std::to_string(i) + "] is NULL");
    const tc_tensor_t &t = *outputs[i];
    if (!t.shape.empty())
      continue;
    HostTensor h = hostTensorOf(t);
    line += ", " + jsonQuote(t.name) + ": " + jsonNumber(h.type.dtype, hostTensorToDoubles(h)[0]);
  }
  return giveString(line + "}", out_json);
}

} // extern "C"
