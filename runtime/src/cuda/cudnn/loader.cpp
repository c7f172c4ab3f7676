//===- loader.cpp - opens libtc_cudnn.so once, forwards to it -------------===//
#include "runtime/src/cuda/cudnn/loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace tc::rt::cuda {
namespace {

struct Plugin {
  TcCudnnAttentionForwardFn forward = nullptr;
  TcCudnnMatmulGeluAuxFn matmulGeluAux = nullptr;
  TcCudnnAttentionBackwardFn backward = nullptr;
  std::string status; // cudnnStatusLine()
};

/// The directory of the module (executable or shared library) holding this
/// code.
std::string ownDirectory() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void *>(&ownDirectory), &info) || !info.dli_fname)
    return ".";
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

Plugin open() {
  Plugin p;
  const char *off = std::getenv("TC_CUDNN");
  if (off && std::string(off) == "0") {
    p.status = "cuDNN off (TC_CUDNN=0)";
    return p;
  }
  std::vector<std::string> candidates;
  if (const char *path = std::getenv("TC_CUDNN_PLUGIN"); path && *path) {
    candidates.push_back(path);
  } else {
    std::string dir = ownDirectory();
    candidates = {dir + "/libtc_cudnn.so", dir + "/../lib/libtc_cudnn.so"};
  }
  void *handle = nullptr;
  std::string path, why = "no libtc_cudnn.so at";
  for (const std::string &c : candidates) {
    if (access(c.c_str(), F_OK) != 0) {
      why += " " + c;
      continue;
    }
    // A plugin that is there but cannot load (no libcudnn.so.9) says why.
    handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *err = dlerror();
      why = err ? err : ("cannot open " + c);
    }
    path = c;
    break;
  }
  if (!handle) {
    p.status = "cuDNN not used: " + why;
    return p;
  }
  auto abi = reinterpret_cast<TcCudnnAbiFn>(dlsym(handle, TC_CUDNN_ABI_SYMBOL));
  auto version = reinterpret_cast<TcCudnnVersionFn>(dlsym(handle, TC_CUDNN_VERSION_SYMBOL));
  auto forward =
      reinterpret_cast<TcCudnnAttentionForwardFn>(dlsym(handle, TC_CUDNN_ATTENTION_FORWARD_SYMBOL));
  auto matmulGeluAux =
      reinterpret_cast<TcCudnnMatmulGeluAuxFn>(dlsym(handle, TC_CUDNN_MATMUL_GELU_AUX_SYMBOL));
  auto backward = reinterpret_cast<TcCudnnAttentionBackwardFn>(
      dlsym(handle, TC_CUDNN_ATTENTION_BACKWARD_SYMBOL));
  if (!abi || !version || !forward || !matmulGeluAux || !backward || abi() != TC_CUDNN_PLUGIN_ABI) {
    p.status = "cuDNN not used: " + path + " is not a tc cuDNN plugin of ABI " +
               std::to_string(TC_CUDNN_PLUGIN_ABI);
    return p;
  }
  char err[256] = {0};
  size_t v = version(err, sizeof err);
  if (v == 0) {
    p.status = std::string("cuDNN not used: ") + err;
    return p;
  }
  p.forward = forward;
  p.matmulGeluAux = matmulGeluAux;
  p.backward = backward;
  p.status = "cuDNN " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
             std::to_string(v % 100) + " (" + path + ")";
  return p;
}

const Plugin &plugin() {
  static std::once_flag once;
  static Plugin *p = nullptr;
  std::call_once(once, [] { p = new Plugin(open()); });
  return *p;
}

std::atomic<int64_t> gForwards{0}, gBackwards{0};

/// A plugin call's return code as the loader's functions answer it.
Status outcome(int rc, const char *err, const char *what, bool *taken,
               std::atomic<int64_t> *count = nullptr) {
  if (rc == TC_CUDNN_UNSUPPORTED)
    return Status::ok();
  if (rc != TC_CUDNN_OK)
    return internalError(err[0] ? err : std::string(what) + " failed");
  *taken = true;
  if (count)
    count->fetch_add(1, std::memory_order_relaxed);
  return Status::ok();
}

} // namespace

Status cudnnAttentionForward(const TcCudnnAttentionForward &args, void *stream, bool *taken) {
  *taken = false;
  const Plugin &p = plugin();
  if (!p.forward)
    return Status::ok();
  char err[512] = {0};
  int rc = p.forward(&args, stream, err, sizeof err);
  return outcome(rc, err, "cuDNN attention forward", taken, &gForwards);
}

Status cudnnAttentionBackward(const TcCudnnAttentionBackward &args, void *stream,
                              int64_t maxWorkspaceBytes, bool *taken) {
  *taken = false;
  const Plugin &p = plugin();
  if (!p.backward)
    return Status::ok();
  char err[512] = {0};
  int rc = p.backward(&args, stream, maxWorkspaceBytes, err, sizeof err);
  return outcome(rc, err, "cuDNN attention backward", taken, &gBackwards);
}

Status cudnnMatmulGeluAux(const TcCudnnMatmulGeluAux &args, void *stream, bool prepareOnly,
                          bool *taken) {
  *taken = false;
  const Plugin &p = plugin();
  if (!p.matmulGeluAux)
    return Status::ok();
  char err[512] = {0};
  int rc = p.matmulGeluAux(&args, stream, prepareOnly ? 1 : 0, err, sizeof err);
  return outcome(rc, err, "cuDNN GEMM + GELU", taken);
}

std::string cudnnStatusLine() { return plugin().status; }

bool cudnnAvailable() { return plugin().forward != nullptr; }

int64_t cudnnAttentionForwardCount() { return gForwards.load(std::memory_order_relaxed); }

int64_t cudnnAttentionBackwardCount() { return gBackwards.load(std::memory_order_relaxed); }

} // namespace tc::rt::cuda
