//===- run_generated.cpp - generated CUDA kernels vs the CPU reference ----===//
//
// Usage: run_generated ARTIFACT...
//
// An artifact is what `tc-cuda-codegen test/codegen/Inputs/cases.mlir --target sm_90 --artifact
// FILE` writes: the functions compiled as tc-compile compiles a model (the reference program,
// the generated kernels and the device program, in the one artifact format of
// runtime/src/schema/artifact.h). For every device function this program draws random inputs
// (never all zeros), runs the reference program on the CPU (tc::rt::runFunction) and the device
// program on the GPU through the runtime's C API (a CUDA session: every op checked as it runs),
// and prints one PASS/FAIL line per function. Exit status: 0 when all pass or when there is no
// GPU (one SKIP line with the device functions and launches it did not run), 1 on any failure
// (an artifact that does not read, or has no device program, fails with or without a GPU), 2 on
// a usage error.
//
//===----------------------------------------------------------------------===//

#include "runtime/include/tc/runtime.h"
#include "runtime/src/base/dtype.h"
#include "runtime/src/base/host_tensor.h"
#include "runtime/src/cpu/executor.h"
#include "runtime/src/schema/artifact.h"

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace tc::rt;

namespace {

struct StatusDeleter {
  void operator()(tc_status_t *s) const { tc_status_release(s); }
};
using StatusPtr = std::unique_ptr<tc_status_t, StatusDeleter>;
struct SessionDeleter {
  void operator()(tc_session_t *s) const { tc_session_release(s); }
};
using SessionPtr = std::unique_ptr<tc_session_t, SessionDeleter>;

HostTensor randomTensor(const TensorType &t, std::mt19937 &rng) {
  int64_t n = t.numElements();
  if (dtypeIsFloat(t.dtype)) {
    std::uniform_real_distribution<double> d(-2.0, 2.0);
    std::vector<double> v(n);
    for (auto &x : v)
      x = d(rng);
    return makeHostTensor(t, v);
  }
  std::vector<int64_t> v(n);
  if (t.dtype == DType::I1) {
    for (auto &x : v)
      x = rng() & 1;
  } else {
    bool u = dtypeIsUnsigned(t.dtype);
    std::uniform_int_distribution<int64_t> d(u ? 1 : -6, 9);
    for (auto &x : v) {
      x = d(rng);
      if (x == 0)
        x = 3; // no zero divisors
    }
  }
  return makeHostTensorInts(t, v);
}

/// `fn` of `session` on `inputs` (in the reference function's input order,
/// named as it names them); false with `*err` set when the runtime fails.
bool runGpu(tc_session_t *session, const Function &fn, const std::vector<HostTensor> &inputs,
            std::vector<HostTensor> *outputs, std::string *err) {
  std::vector<tc_tensor_view_t> views(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    views[i].name = fn.inputNames[i].c_str();
    views[i].dtype = static_cast<tc_dtype_t>(inputs[i].type.dtype);
    views[i].rank = inputs[i].type.shape.size();
    views[i].shape = inputs[i].type.shape.data();
    views[i].data = inputs[i].data.data();
    views[i].data_size = inputs[i].data.size();
  }
  std::vector<tc_tensor_t *> out(fn.outputs.size(), nullptr);
  StatusPtr st(tc_session_run(session, fn.name.c_str(), views.data(), views.size(), out.data(),
                              out.size()));
  if (st) {
    *err = tc_status_message(st.get());
    return false;
  }
  for (tc_tensor_t *t : out) {
    HostTensor h;
    h.type.dtype = static_cast<DType>(tc_tensor_dtype(t));
    h.type.shape.assign(tc_tensor_shape(t), tc_tensor_shape(t) + tc_tensor_rank(t));
    auto *data = static_cast<const uint8_t *>(tc_tensor_data(t));
    h.data.assign(data, data + tc_tensor_byte_size(t));
    tc_tensor_release(t);
    outputs->push_back(std::move(h));
  }
  return true;
}

/// Launches of generated kernels in `df` (the cases compile to nothing else).
size_t launchCount(const DeviceFunction &df) {
  size_t n = 0;
  for (const DeviceOp &op : df.ops)
    n += op.kind == "launch";
  return n;
}

/// Max error relative to the tolerance (<= 1 passes) and a description.
double compare(const HostTensor &ref, const HostTensor &got, std::string *what) {
  DType d = ref.type.dtype;
  if (!dtypeIsFloat(d)) {
    auto a = hostTensorToInts(ref), b = hostTensorToInts(got);
    int64_t bad = 0;
    for (size_t i = 0; i < a.size(); ++i)
      bad += a[i] != b[i];
    *what = std::to_string(bad) + " of " + std::to_string(a.size()) + " differ";
    return bad ? 2.0 : 0.0;
  }
  double atol = 1e-5, rtol = 1e-4;
  if (d == DType::BF16)
    atol = rtol = 3e-2;
  else if (d == DType::F16)
    atol = rtol = 4e-3;
  auto a = hostTensorToDoubles(ref), b = hostTensorToDoubles(got);
  double scale = 1;
  for (double x : a)
    if (std::isfinite(x))
      scale = std::max(scale, std::fabs(x));
  double worst = 0, maxAbs = 0;
  size_t at = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double r;
    if (std::isnan(a[i]) || std::isnan(b[i]))
      r = std::isnan(a[i]) && std::isnan(b[i]) ? 0 : 1e9;
    else if (std::isinf(a[i]) || std::isinf(b[i]))
      r = a[i] == b[i] ? 0 : 1e9;
    else {
      double e = std::fabs(a[i] - b[i]);
      maxAbs = std::max(maxAbs, e);
      r = e / (atol * scale + rtol * std::fabs(a[i]));
    }
    if (r > worst) {
      worst = r;
      at = i;
    }
  }
  char buf[160];
  std::snprintf(buf, sizeof buf, "max abs err %.3g, worst at %zu (ref %.6g, gpu %.6g), %.2f of tol",
                maxAbs, at, a.empty() ? 0.0 : a[at], b.empty() ? 0.0 : b[at], worst);
  *what = buf;
  return worst;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: run_generated ARTIFACT...\n");
    return 2;
  }
  int passed = 0, failed = 0;
  // Read (and validate) every artifact first: a bad one fails with or without a GPU.
  std::vector<std::pair<std::string, Artifact>> artifacts;
  size_t functions = 0, launches = 0;
  for (int a = 1; a < argc; ++a) {
    Artifact art;
    Status st = readArtifact(argv[a], &art);
    if (st.isOk() && art.deviceFunctions.empty())
      st = invalidArgument("'" + std::string(argv[a]) +
                           "' has no device program (compile it for a GPU target)");
    if (!st.isOk()) {
      std::printf("FAIL %s: %s\n", argv[a], st.message().c_str());
      ++failed;
      continue;
    }
    functions += art.deviceFunctions.size();
    for (const DeviceFunction &df : art.deviceFunctions)
      launches += launchCount(df);
    artifacts.emplace_back(argv[a], std::move(art));
  }
  if (StatusPtr st{tc_cuda_check()}) {
    std::printf("SKIP run_generated: no CUDA GPU (%s): %zu device functions, %zu launches\n",
                tc_status_message(st.get()), functions, launches);
    return failed ? 1 : 0;
  }
  for (const auto &[path, art] : artifacts) {
    tc_session_options_t opts;
    tc_session_options_initialize(&opts);
    opts.device = TC_DEVICE_CUDA;
    opts.cuda.graphs = 0;        // every run as launched, not a replay
    opts.cuda.check_each_op = 1; // a failing kernel is named
    tc_session_t *raw = nullptr;
    StatusPtr created(tc_session_create(path.c_str(), &opts, &raw));
    SessionPtr session(raw);
    if (created) {
      std::printf("FAIL %s: %s\n", path.c_str(), tc_status_message(created.get()));
      ++failed;
      continue;
    }
    for (const DeviceFunction &df : art.deviceFunctions) {
      const Function *fn = art.findFunction(df.name);
      if (!fn) {
        std::printf("FAIL %s: no reference function\n", df.name.c_str());
        ++failed;
        continue;
      }
      std::mt19937 rng(std::hash<std::string>()(fn->name) & 0xffffffff);
      std::vector<HostTensor> inputs;
      for (int32_t id : fn->inputs)
        inputs.push_back(randomTensor(fn->values[id], rng));
      std::vector<HostTensor> want, got;
      Status st = runFunction(art, *fn, inputs, &want);
      if (!st.isOk()) {
        std::printf("FAIL %s: reference: %s\n", fn->name.c_str(), st.message().c_str());
        ++failed;
        continue;
      }
      std::string err;
      if (!runGpu(session.get(), *fn, inputs, &got, &err)) {
        std::printf("FAIL %s: gpu: %s\n", fn->name.c_str(), err.c_str());
        ++failed;
        continue;
      }
      bool ok = true;
      std::string detail;
      for (size_t i = 0; i < want.size(); ++i) {
        std::string what;
        double r = compare(want[i], got[i], &what);
        ok = ok && r <= 1.0;
        detail += " out" + std::to_string(i) + " " + dtypeName(want[i].type.dtype) + " " +
                  shapeToString(want[i].type.shape) + ": " + what + ";";
      }
      std::printf("%s %s (%zu launches, %zu ops):%s\n", ok ? "PASS" : "FAIL", fn->name.c_str(),
                  launchCount(df), df.ops.size(), detail.c_str());
      (ok ? passed : failed)++;
    }
  }
  std::printf("run_generated: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
