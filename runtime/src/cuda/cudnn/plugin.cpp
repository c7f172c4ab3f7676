//===- plugin.cpp - libtc_cudnn.so: cuDNN's attention and GEMMs for tc ----===//
//
// The plugin plugin.h declares. Each distinct case (attention: sizes,
// strides, scale, causal, dtype, whether statistics are made; the GEMM: its
// sizes, rhs layout, bias) is one cudnn_frontend graph,
// built on its first eager call (cuDNN's heuristic mode A picks the engine;
// a case with no engine is remembered as unsupported) and kept for the life
// of the process, with one cuDNN handle and one workspace per device.
// Thread-safe (one mutex: the runtime launches from one thread per session).
//
//===----------------------------------------------------------------------===//
#include "runtime/src/cuda/cudnn/plugin.h"

#include <cuda_runtime.h>
#include <cudnn_frontend.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace fe = cudnn_frontend;

namespace {

enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kLhs,
  kRhs,
  kBias,
  kAux,
  kOut,
  kDO,
  kDQ,
  kDK,
  kDV
};

void setError(char *error, size_t bytes, const std::string &msg) {
  if (error && bytes > 0)
    std::snprintf(error, bytes, "%s", msg.c_str());
}

/// Appends each value to a plan's key, space-separated.
void append(std::string &key, std::initializer_list<int64_t> values) {
  for (int64_t v : values)
    key += " " + std::to_string(v);
}

/// An attention case's sizes, scale and strides (`strides`: its operands'
/// [batch, head, row] arrays) after `kind`.
template <class A>
std::string attentionKey(const char *kind, const A &a,
                         std::initializer_list<const int64_t *> strides) {
  std::string k = kind;
  uint32_t scaleBits;
  std::memcpy(&scaleBits, &a.scale, 4);
  append(k, {int64_t(a.dtype), int64_t(a.causal != 0), a.batch, a.heads, a.kvHeads, a.tq, a.tk, a.d,
             int64_t(scaleBits)});
  for (const int64_t *st : strides)
    append(k, {st[0], st[1], st[2]});
  return k;
}

/// Everything of a case but its pointers.
std::string keyOf(const TcCudnnAttentionForward &a) {
  std::string k = attentionKey("attention", a, {a.qStride, a.kStride, a.vStride, a.oStride});
  append(k, {int64_t(a.lse != nullptr)});
  return k;
}

std::string keyOf(const TcCudnnAttentionBackward &a) {
  return attentionKey(
      "attention_backward", a,
      {a.qStride, a.kStride, a.vStride, a.oStride, a.doStride, a.dqStride, a.dkStride, a.dvStride});
}

std::string keyOf(const TcCudnnMatmulGeluAux &a) {
  std::string k = "matmul_gelu_aux";
  append(k, {a.m, a.n, a.k, int64_t(a.rhsKMajor), int64_t(a.bias != nullptr)});
  return k;
}

struct Plan {
  std::shared_ptr<fe::graph::Graph> graph; // null: no engine for the case
  int64_t workspace = 0;
};

struct Device {
  cudnnHandle_t handle = nullptr;
  bool noHandle = false; // cudnnCreate failed here: cuDNN stays off this device
  void *workspace = nullptr;
  int64_t workspaceBytes = 0;
  /// Workspaces a larger one replaced: never freed (a CUDA graph captured
  /// earlier may still read them).
  std::vector<void *> retired;
  std::map<std::string, Plan> plans; // by keyOf
};

struct State {
  std::mutex mu;
  std::map<int, Device> devices;
};

/// d's cuDNN handle, created on first use; cudnnCreate's status (and no
/// second try on this device) where it fails.
cudnnStatus_t ensureHandle(Device &d) {
  if (d.handle)
    return CUDNN_STATUS_SUCCESS;
  if (d.noHandle)
    return CUDNN_STATUS_NOT_INITIALIZED;
  cudnnStatus_t st = cudnnCreate(&d.handle);
  if (st != CUDNN_STATUS_SUCCESS)
    d.handle = nullptr, d.noHandle = true;
  return st;
}

State &state() {
  static State *s = new State; // never destroyed: plans outlive static destruction order
  return *s;
}

/// Builds g with cuDNN's heuristic (mode A) and keeps its first plan; a null
/// graph (and `why`) when cuDNN has no engine for it.
Plan finish(cudnnHandle_t handle, const std::shared_ptr<fe::graph::Graph> &g, std::string &why) {
  Plan plan;
  fe::error_object e = g->build(handle, {fe::HeurMode_t::A});
  if (e.is_good())
    e = g->get_workspace_size(plan.workspace);
  if (!e.is_good()) {
    why = e.get_message();
    return plan;
  }
  plan.graph = g;
  return plan;
}

fe::graph::Tensor_attributes operand(const char *name, int64_t uid, int64_t batch, int64_t heads,
                                     int64_t t, int64_t d, const int64_t *stride) {
  return fe::graph::Tensor_attributes()
      .set_name(name)
      .set_uid(uid)
      .set_dim({batch, heads, t, d})
      .set_stride({stride[0], stride[1], stride[2], 1});
}

/// A graph of the attention's types (A: the forward's or the backward's
/// arguments) and its q, k, v operands.
template <class A>
std::tuple<std::shared_ptr<fe::graph::Graph>, std::shared_ptr<fe::graph::Tensor_attributes>,
           std::shared_ptr<fe::graph::Tensor_attributes>,
           std::shared_ptr<fe::graph::Tensor_attributes>>
attentionGraph(const A &a) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(a.dtype == 0 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto q = g->tensor(operand("q", kQ, a.batch, a.heads, a.tq, a.d, a.qStride));
  auto k = g->tensor(operand("k", kK, a.batch, a.kvHeads, a.tk, a.d, a.kStride));
  auto v = g->tensor(operand("v", kV, a.batch, a.kvHeads, a.tk, a.d, a.vStride));
  return {g, q, k, v};
}

/// The attention case's graph, or a null graph (and `why`) when cuDNN has none.
Plan build(cudnnHandle_t handle, const TcCudnnAttentionForward &a, std::string &why) {
  auto [g, q, k, v] = attentionGraph(a);
  auto opts = fe::graph::SDPA_attributes()
                  .set_name("tc_attention_forward")
                  .set_generate_stats(a.lse != nullptr)
                  .set_attn_scale(a.scale);
  if (a.causal)
    opts.set_causal_mask(true);
  auto [o, stats] = g->sdpa(q, k, v, opts);
  o->set_output(true)
      .set_uid(kO)
      .set_dim({a.batch, a.heads, a.tq, a.d})
      .set_stride({a.oStride[0], a.oStride[1], a.oStride[2], 1});
  if (a.lse)
    stats->set_output(true)
        .set_uid(kStats)
        .set_dim({a.batch, a.heads, a.tq, 1})
        .set_stride({a.heads * a.tq, a.tq, 1, 1})
        .set_data_type(fe::DataType_t::FLOAT);
  return finish(handle, g, why);
}

/// The attention backward's graph (cuDNN's deterministic algorithm).
Plan build(cudnnHandle_t handle, const TcCudnnAttentionBackward &a, std::string &why) {
  auto [g, q, k, v] = attentionGraph(a);
  auto o = g->tensor(operand("o", kO, a.batch, a.heads, a.tq, a.d, a.oStride));
  auto dO = g->tensor(operand("do", kDO, a.batch, a.heads, a.tq, a.d, a.doStride));
  auto stats = g->tensor(fe::graph::Tensor_attributes()
                             .set_name("stats")
                             .set_uid(kStats)
                             .set_dim({a.batch, a.heads, a.tq, 1})
                             .set_stride({a.heads * a.tq, a.tq, 1, 1})
                             .set_data_type(fe::DataType_t::FLOAT));
  auto opts = fe::graph::SDPA_backward_attributes()
                  .set_name("tc_attention_backward")
                  .set_attn_scale(a.scale)
                  .set_deterministic_algorithm(true);
  if (a.causal)
    opts.set_causal_mask(true);
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dO, stats, opts);
  auto result = [&](const std::shared_ptr<fe::graph::Tensor_attributes> &t, int64_t uid,
                    int64_t heads, int64_t rows, const int64_t *st) {
    t->set_output(true)
        .set_uid(uid)
        .set_dim({a.batch, heads, rows, a.d})
        .set_stride({st[0], st[1], st[2], 1});
  };
  result(dq, kDQ, a.heads, a.tq, a.dqStride);
  result(dk, kDK, a.kvHeads, a.tk, a.dkStride);
  result(dv, kDV, a.kvHeads, a.tk, a.dvStride);
  return finish(handle, g, why);
}

/// The GEMM's graph: out = gelu(lhs rhs (+ bias)), aux = the pre-activation.
Plan build(cudnnHandle_t handle, const TcCudnnMatmulGeluAux &a, std::string &why) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto matrix = [](const char *name, int64_t uid, int64_t rows, int64_t cols, bool colMajor) {
    return fe::graph::Tensor_attributes()
        .set_name(name)
        .set_uid(uid)
        .set_dim({1, rows, cols})
        .set_stride(colMajor ? std::vector<int64_t>{rows * cols, 1, rows}
                             : std::vector<int64_t>{rows * cols, cols, 1})
        .set_data_type(fe::DataType_t::BFLOAT16);
  };
  auto lhs = g->tensor(matrix("lhs", kLhs, a.m, a.k, false));
  auto rhs = g->tensor(matrix("rhs", kRhs, a.k, a.n, a.rhsKMajor != 0));
  auto pw = [](fe::PointwiseMode_t mode) {
    return fe::graph::Pointwise_attributes().set_mode(mode).set_compute_data_type(
        fe::DataType_t::FLOAT);
  };
  auto pre = g->matmul(
      lhs, rhs,
      fe::graph::Matmul_attributes().set_name("mm").set_compute_data_type(fe::DataType_t::FLOAT));
  pre->set_data_type(fe::DataType_t::FLOAT);
  if (a.bias) {
    auto bias = g->tensor(fe::graph::Tensor_attributes()
                              .set_name("bias")
                              .set_uid(kBias)
                              .set_dim({1, 1, a.n})
                              .set_stride({a.n, a.n, 1})
                              .set_data_type(fe::DataType_t::BFLOAT16));
    pre = g->pointwise(pre, bias, pw(fe::PointwiseMode_t::ADD));
  }
  pre->set_output(true).set_uid(kAux).set_data_type(fe::DataType_t::BFLOAT16);
  auto out = g->pointwise(pre, pw(fe::PointwiseMode_t::GELU_APPROX_TANH_FWD));
  out->set_output(true).set_uid(kOut).set_data_type(fe::DataType_t::BFLOAT16);
  return finish(handle, g, why);
}

/// Runs (or with prepareOnly, only readies) the plan of `key` on `stream`:
/// built by `make` on its first eager call, the workspace grown outside
/// captures.
template <class Make>
int runPlan(const std::string &key, Make make, std::unordered_map<int64_t, void *> pack,
            cudaStream_t stream, bool prepareOnly, const char *what, char *error, size_t errorBytes,
            int64_t maxWorkspaceBytes = INT64_MAX, void *callerWorkspace = nullptr,
            int64_t callerWorkspaceBytes = 0) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    setError(error, errorBytes, "cudaGetDevice failed");
    return TC_CUDNN_ERROR;
  }
  Device &dev = s.devices[device];
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) {
    setError(error, errorBytes, "cudaStreamIsCapturing failed");
    return TC_CUDNN_ERROR;
  }
  const bool capturing = capture != cudaStreamCaptureStatusNone;
  // A device other than the one tc_cudnn_version opened: its handle now
  // (on an eager call; cuDNN's kernels stay off it where that fails).
  if (!dev.handle && (capturing || ensureHandle(dev) != CUDNN_STATUS_SUCCESS))
    return TC_CUDNN_UNSUPPORTED;
  auto it = dev.plans.find(key);
  if (it == dev.plans.end()) {
    if (capturing)
      return TC_CUDNN_UNSUPPORTED;
    std::string why;
    it = dev.plans.emplace(key, make(dev.handle, why)).first;
  }
  Plan &plan = it->second;
  if (!plan.graph)
    return TC_CUDNN_UNSUPPORTED;
  // The caller's workspace where it holds the plan's, else the plugin's own.
  const bool caller = callerWorkspace && plan.workspace <= callerWorkspaceBytes;
  if (!caller && plan.workspace > maxWorkspaceBytes)
    return TC_CUDNN_UNSUPPORTED;
  if (!caller && plan.workspace > dev.workspaceBytes) {
    if (capturing)
      return TC_CUDNN_UNSUPPORTED;
    void *ws = nullptr;
    if (cudaMalloc(&ws, plan.workspace) != cudaSuccess) {
      cudaGetLastError();
      setError(error, errorBytes,
               "cudaMalloc of cuDNN's " + std::to_string(plan.workspace) + "-byte workspace");
      return TC_CUDNN_ERROR;
    }
    if (dev.workspace)
      dev.retired.push_back(dev.workspace);
    dev.workspace = ws, dev.workspaceBytes = plan.workspace;
  }
  if (prepareOnly)
    return TC_CUDNN_OK;
  cudnnStatus_t st = cudnnSetStream(dev.handle, stream);
  if (st != CUDNN_STATUS_SUCCESS) {
    setError(error, errorBytes, std::string("cudnnSetStream: ") + cudnnGetErrorString(st));
    return TC_CUDNN_ERROR;
  }
  fe::error_object e =
      plan.graph->execute(dev.handle, pack, caller ? callerWorkspace : dev.workspace);
  if (!e.is_good()) {
    setError(error, errorBytes, std::string(what) + ": " + e.get_message());
    return TC_CUDNN_ERROR;
  }
  return TC_CUDNN_OK;
}

} // namespace

extern "C" {

__attribute__((visibility("default"))) int tc_cudnn_abi(void) { return TC_CUDNN_PLUGIN_ABI; }

__attribute__((visibility("default"))) size_t tc_cudnn_version(char *error, size_t errorBytes) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    setError(error, errorBytes, "no CUDA device");
    return 0;
  }
  cudnnStatus_t st = ensureHandle(s.devices[device]);
  if (st != CUDNN_STATUS_SUCCESS) {
    setError(error, errorBytes, std::string("cudnnCreate: ") + cudnnGetErrorString(st));
    return 0;
  }
  return cudnnGetVersion();
}

__attribute__((visibility("default"))) int
tc_cudnn_attention_forward(const TcCudnnAttentionForward *a, void *stream, char *error,
                           size_t errorBytes) {
  std::unordered_map<int64_t, void *> pack = {{kQ, const_cast<void *>(a->q)},
                                              {kK, const_cast<void *>(a->k)},
                                              {kV, const_cast<void *>(a->v)},
                                              {kO, a->out}};
  if (a->lse)
    pack[kStats] = a->lse;
  return runPlan(
      keyOf(*a), [a](cudnnHandle_t h, std::string &why) { return build(h, *a, why); }, pack,
      static_cast<cudaStream_t>(stream), false, "cuDNN attention forward", error, errorBytes);
}

__attribute__((visibility("default"))) int
tc_cudnn_attention_backward(const TcCudnnAttentionBackward *a, void *stream,
                            int64_t maxWorkspaceBytes, char *error, size_t errorBytes) {
  std::unordered_map<int64_t, void *> pack = {{kQ, const_cast<void *>(a->q)},
                                              {kK, const_cast<void *>(a->k)},
                                              {kV, const_cast<void *>(a->v)},
                                              {kO, const_cast<void *>(a->out)},
                                              {kDO, const_cast<void *>(a->dout)},
                                              {kStats, const_cast<float *>(a->lse)},
                                              {kDQ, a->dq},
                                              {kDK, a->dk},
                                              {kDV, a->dv}};
  return runPlan(
      keyOf(*a), [a](cudnnHandle_t h, std::string &why) { return build(h, *a, why); }, pack,
      static_cast<cudaStream_t>(stream), false, "cuDNN attention backward", error, errorBytes,
      maxWorkspaceBytes, a->workspace, a->workspaceBytes);
}

__attribute__((visibility("default"))) int tc_cudnn_matmul_gelu_aux(const TcCudnnMatmulGeluAux *a,
                                                                    void *stream, int prepareOnly,
                                                                    char *error,
                                                                    size_t errorBytes) {
  std::unordered_map<int64_t, void *> pack = {{kLhs, const_cast<void *>(a->lhs)},
                                              {kRhs, const_cast<void *>(a->rhs)},
                                              {kAux, a->aux},
                                              {kOut, a->out}};
  if (a->bias)
    pack[kBias] = const_cast<void *>(a->bias);
  return runPlan(
      keyOf(*a), [a](cudnnHandle_t h, std::string &why) { return build(h, *a, why); }, pack,
      static_cast<cudaStream_t>(stream), prepareOnly != 0, "cuDNN GEMM + GELU", error, errorBytes);
}

} // extern "C"
