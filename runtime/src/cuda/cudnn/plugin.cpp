//===- plugin.cpp - libtc_cudnn.so: cuDNN's fused attention for tc --------===//
//
// The plugin plugin.h declares. Each distinct case (sizes, strides, scale,
// causal, dtype, whether statistics are made) is one cudnn_frontend graph,
// built on its first eager call (cuDNN's heuristic mode A picks the engine;
// a case with no engine is remembered as unsupported) and kept for the life
// of the process, with one cuDNN handle and one workspace per device.
// Thread-safe (one mutex: the runtime launches from one thread per session).
//
//===----------------------------------------------------------------------===//
#include "runtime/src/cuda/cudnn/plugin.h"

#include <cuda_runtime.h>
#include <cudnn_frontend.h>

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

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats };

void setError(char *error, size_t bytes, const std::string &msg) {
  if (error && bytes > 0)
    std::snprintf(error, bytes, "%s", msg.c_str());
}

/// Everything of a case but its pointers, and the device.
using Key = std::tuple<int, int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                       std::vector<int64_t>, uint32_t, bool>;

Key keyOf(const TcCudnnAttentionForward &a) {
  std::vector<int64_t> st;
  for (const int64_t *s : {a.qStride, a.kStride, a.vStride, a.oStride})
    st.insert(st.end(), s, s + 3);
  uint32_t scaleBits;
  std::memcpy(&scaleBits, &a.scale, 4);
  int device = 0;
  cudaGetDevice(&device);
  return {device, a.dtype, a.causal != 0, a.batch, a.heads,   a.kvHeads,
          a.tq,   a.tk,    a.d,           st,      scaleBits, a.lse != nullptr};
}

struct Plan {
  std::shared_ptr<fe::graph::Graph> graph; // null: no engine for the case
  int64_t workspace = 0;
};

struct Device {
  cudnnHandle_t handle = nullptr;
  void *workspace = nullptr;
  int64_t workspaceBytes = 0;
};

struct State {
  std::mutex mu;
  std::map<int, Device> devices;
  std::map<Key, Plan> plans;
};

State &state() {
  static State *s = new State; // never destroyed: plans outlive static destruction order
  return *s;
}

fe::graph::Tensor_attributes operand(const char *name, int64_t uid, int64_t batch, int64_t heads,
                                     int64_t t, int64_t d, const int64_t *stride) {
  return fe::graph::Tensor_attributes()
      .set_name(name)
      .set_uid(uid)
      .set_dim({batch, heads, t, d})
      .set_stride({stride[0], stride[1], stride[2], 1});
}

/// The case's graph, or a null graph (and `why`) when cuDNN has none.
Plan build(cudnnHandle_t handle, const TcCudnnAttentionForward &a, std::string &why) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(a.dtype == 0 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto q = g->tensor(operand("q", kQ, a.batch, a.heads, a.tq, a.d, a.qStride));
  auto k = g->tensor(operand("k", kK, a.batch, a.kvHeads, a.tk, a.d, a.kStride));
  auto v = g->tensor(operand("v", kV, a.batch, a.kvHeads, a.tk, a.d, a.vStride));
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
  Plan plan;
  fe::error_object e = g->build(handle, {fe::HeurMode_t::A});
  if (!e.is_good()) {
    why = e.get_message();
    return plan;
  }
  e = g->get_workspace_size(plan.workspace);
  if (!e.is_good()) {
    why = e.get_message();
    return plan;
  }
  plan.graph = g;
  return plan;
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
  Device &d = s.devices[device];
  if (!d.handle) {
    cudnnStatus_t st = cudnnCreate(&d.handle);
    if (st != CUDNN_STATUS_SUCCESS) {
      d.handle = nullptr;
      setError(error, errorBytes, std::string("cudnnCreate: ") + cudnnGetErrorString(st));
      return 0;
    }
  }
  return cudnnGetVersion();
}

__attribute__((visibility("default"))) int
tc_cudnn_attention_forward(const TcCudnnAttentionForward *a, void *streamPtr, char *error,
                           size_t errorBytes) {
  auto stream = static_cast<cudaStream_t>(streamPtr);
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    setError(error, errorBytes, "cudaGetDevice failed");
    return TC_CUDNN_ERROR;
  }
  Device &dev = s.devices[device];
  if (!dev.handle)
    return TC_CUDNN_UNSUPPORTED; // tc_cudnn_version was not called or failed
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) {
    setError(error, errorBytes, "cudaStreamIsCapturing failed");
    return TC_CUDNN_ERROR;
  }
  bool capturing = capture != cudaStreamCaptureStatusNone;
  Key key = keyOf(*a);
  auto it = s.plans.find(key);
  if (it == s.plans.end()) {
    if (capturing)
      return TC_CUDNN_UNSUPPORTED;
    std::string why;
    it = s.plans.emplace(key, build(dev.handle, *a, why)).first;
  }
  Plan &plan = it->second;
  if (!plan.graph)
    return TC_CUDNN_UNSUPPORTED;
  if (plan.workspace > dev.workspaceBytes) {
    if (capturing)
      return TC_CUDNN_UNSUPPORTED;
    void *ws = nullptr;
    if (cudaMalloc(&ws, plan.workspace) != cudaSuccess) {
      cudaGetLastError();
      setError(error, errorBytes,
               "cudaMalloc of cuDNN's " + std::to_string(plan.workspace) + "-byte workspace");
      return TC_CUDNN_ERROR;
    }
    if (dev.workspace) {
      cudaDeviceSynchronize(); // the old workspace may still be in use
      cudaFree(dev.workspace);
    }
    dev.workspace = ws, dev.workspaceBytes = plan.workspace;
  }
  cudnnStatus_t st = cudnnSetStream(dev.handle, stream);
  if (st != CUDNN_STATUS_SUCCESS) {
    setError(error, errorBytes, std::string("cudnnSetStream: ") + cudnnGetErrorString(st));
    return TC_CUDNN_ERROR;
  }
  std::unordered_map<int64_t, void *> pack = {{kQ, const_cast<void *>(a->q)},
                                              {kK, const_cast<void *>(a->k)},
                                              {kV, const_cast<void *>(a->v)},
                                              {kO, a->out}};
  if (a->lse)
    pack[kStats] = a->lse;
  fe::error_object e = plan.graph->execute(dev.handle, pack, dev.workspace);
  if (!e.is_good()) {
    setError(error, errorBytes, "cuDNN attention forward: " + e.get_message());
    return TC_CUDNN_ERROR;
  }
  return TC_CUDNN_OK;
}

} // extern "C"
