//===- run_generated.cpp - generated CUDA kernels vs the CPU reference ----===//
//
// Usage: run_generated BUNDLE_DIR...
//
// A bundle is what `tc-cuda-codegen test/codegen/Inputs/cases.mlir --target sm_90 --bundle DIR`
// writes: reference.tca (the unfused functions), plan.txt (the fused
// functions' buffers and kernel launches) and one <kernel>.cubin each. For
// every function this program draws random inputs (never all zeros), runs
// the reference executor (tc::rt::runFunction) and the plan on the GPU
// (cudaLibraryLoadData + cudaLibraryGetKernel + cudaLaunchKernel: no -lcuda),
// and prints one PASS/FAIL line per function. Exit status: 0 when all pass
// or when there is no GPU (one SKIP line), 1 on any failure.
//
// plan.txt grammar (one record per line):
//   tc-gpu-plan 1
//   func NAME NVALUES
//   value ID DTYPE RANK DIM...        (DTYPE: rt::DType number)
//   input ID | output ID
//   const ID NBYTES BYTE...
//   launch KERNEL GRID BLOCK NPARAMS (P ID | N INT | M K INT...)...
//   end
//
//===----------------------------------------------------------------------===//

#include "runtime/src/schema/artifact.h"
#include "runtime/src/base/dtype.h"
#include "runtime/src/base/file_io.h"
#include "runtime/src/base/host_tensor.h"
#include "runtime/src/cpu/executor.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace tc::rt;

namespace {

struct Param {
  char kind; // 'P' pointer (value id), 'N' long long, 'M' long long array
  std::vector<long long> v;
};
struct Launch {
  std::string kernel;
  unsigned grid, block;
  std::vector<Param> params;
};
struct PlanFunc {
  std::string name;
  std::vector<TensorType> values;
  std::vector<int> inputs, outputs;
  std::map<int, std::vector<uint8_t>> consts;
  std::vector<Launch> launches;
};

bool readPlan(const std::string &path, std::vector<PlanFunc> *out, std::string *err) {
  std::ifstream f(path);
  if (!f) {
    *err = "cannot open " + path;
    return false;
  }
  std::string line;
  PlanFunc *cur = nullptr;
  while (std::getline(f, line)) {
    std::istringstream is(line);
    std::string tag;
    is >> tag;
    if (tag == "func") {
      out->emplace_back();
      cur = &out->back();
      size_t n;
      is >> cur->name >> n;
      cur->values.resize(n);
    } else if (tag == "value") {
      int id, dt, rank;
      is >> id >> dt >> rank;
      TensorType &t = cur->values.at(id);
      t.dtype = static_cast<DType>(dt);
      t.shape.resize(rank);
      for (auto &d : t.shape)
        is >> d;
    } else if (tag == "input" || tag == "output") {
      int id;
      is >> id;
      (tag == "input" ? cur->inputs : cur->outputs).push_back(id);
    } else if (tag == "const") {
      int id;
      size_t n;
      is >> id >> n;
      std::vector<uint8_t> bytes(n);
      for (auto &b : bytes) {
        int x;
        is >> x;
        b = (uint8_t)x;
      }
      cur->consts[id] = std::move(bytes);
    } else if (tag == "launch") {
      Launch l;
      size_t np;
      is >> l.kernel >> l.grid >> l.block >> np;
      for (size_t i = 0; i < np; ++i) {
        Param p;
        is >> p.kind;
        long long x;
        if (p.kind == 'M') {
          size_t k;
          is >> k;
          for (size_t j = 0; j < k; ++j) {
            is >> x;
            p.v.push_back(x);
          }
        } else {
          is >> x;
          p.v.push_back(x);
        }
        l.params.push_back(std::move(p));
      }
      cur->launches.push_back(std::move(l));
    }
    if (!is && tag != "end" && !tag.empty() && tag != "tc-gpu-plan") {
      *err = "bad line in plan: " + line;
      return false;
    }
  }
  return true;
}

#define CU(expr)                                                                  \
  do {                                                                            \
    cudaError_t e_ = (expr);                                                      \
    if (e_ != cudaSuccess) {                                                      \
      *err = std::string(#expr) + ": " + cudaGetErrorString(e_);                  \
      return false;                                                               \
    }                                                                             \
  } while (0)

struct KernelCache {
  std::string dir;
  std::map<std::string, cudaKernel_t> kernels;
  bool get(const std::string &name, cudaKernel_t *k, std::string *err) {
    auto it = kernels.find(name);
    if (it != kernels.end()) {
      *k = it->second;
      return true;
    }
    std::ifstream f(dir + "/" + name + ".cubin", std::ios::binary);
    std::vector<char> data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (data.empty()) {
      *err = "missing cubin " + dir + "/" + name + ".cubin";
      return false;
    }
    cudaLibrary_t lib;
    CU(cudaLibraryLoadData(&lib, data.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    CU(cudaLibraryGetKernel(k, lib, name.c_str()));
    kernels[name] = *k;
    return true;
  }
};

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

bool runGpu(const PlanFunc &pf, KernelCache &cache, const std::vector<HostTensor> &inputs,
            std::vector<HostTensor> *outputs, std::string *err) {
  std::vector<void *> buf(pf.values.size(), nullptr);
  auto cleanup = [&] {
    for (void *p : buf)
      if (p)
        cudaFree(p);
  };
  for (size_t i = 0; i < pf.values.size(); ++i) {
    size_t bytes = std::max<int64_t>(1, storageBytes(pf.values[i]));
    CU(cudaMalloc(&buf[i], bytes));
    CU(cudaMemset(buf[i], 0xff, bytes)); // poison: unwritten outputs show
  }
  for (size_t i = 0; i < pf.inputs.size(); ++i)
    CU(cudaMemcpy(buf[pf.inputs[i]], inputs[i].data.data(), inputs[i].data.size(),
                  cudaMemcpyHostToDevice));
  for (auto &[id, bytes] : pf.consts)
    CU(cudaMemcpy(buf[id], bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  for (const Launch &l : pf.launches) {
    cudaKernel_t k;
    if (!cache.get(l.kernel, &k, err))
      return cleanup(), false;
    std::vector<void *> ptrs(l.params.size());
    std::vector<long long> scalars(l.params.size());
    std::vector<void *> args;
    for (size_t i = 0; i < l.params.size(); ++i) {
      const Param &p = l.params[i];
      if (p.kind == 'P') {
        ptrs[i] = buf.at(p.v[0]);
        args.push_back(&ptrs[i]);
      } else if (p.kind == 'N') {
        scalars[i] = p.v[0];
        args.push_back(&scalars[i]);
      } else {
        args.push_back(const_cast<long long *>(p.v.data()));
      }
    }
    CU(cudaLaunchKernel((const void *)k, dim3(l.grid), dim3(l.block), args.data(), 0, nullptr));
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      *err = "kernel " + l.kernel + ": " + cudaGetErrorString(e);
      return cleanup(), false;
    }
  }
  for (int id : pf.outputs) {
    HostTensor h;
    h.type = pf.values[id];
    h.data.resize(storageBytes(h.type));
    CU(cudaMemcpy(h.data.data(), buf[id], h.data.size(), cudaMemcpyDeviceToHost));
    outputs->push_back(std::move(h));
  }
  cleanup();
  return true;
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
    std::fprintf(stderr, "usage: run_generated BUNDLE_DIR...\n");
    return 2;
  }
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    std::printf("SKIP run_generated: no CUDA GPU (%s)\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 0;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  int passed = 0, failed = 0;
  for (int a = 1; a < argc; ++a) {
    std::string dir = argv[a], err;
    Artifact ref;
    Status st = readArtifact(dir + "/reference.tca", &ref);
    std::vector<PlanFunc> plan;
    if (!st.isOk() || !readPlan(dir + "/plan.txt", &plan, &err)) {
      std::printf("FAIL %s: %s\n", dir.c_str(), st.isOk() ? err.c_str() : st.message().c_str());
      ++failed;
      continue;
    }
    KernelCache cache{dir, {}};
    for (const PlanFunc &pf : plan) {
      const Function *fn = nullptr;
      for (const Function &f : ref.functions)
        if (f.name == pf.name)
          fn = &f;
      std::mt19937 rng(std::hash<std::string>()(pf.name) & 0xffffffff);
      std::vector<HostTensor> inputs;
      for (int id : pf.inputs)
        inputs.push_back(randomTensor(pf.values[id], rng));
      std::vector<HostTensor> want, got;
      if (!fn) {
        std::printf("FAIL %s: no reference function\n", pf.name.c_str());
        ++failed;
        continue;
      }
      st = runFunction(ref, *fn, inputs, &want);
      if (!st.isOk()) {
        std::printf("FAIL %s: reference: %s\n", pf.name.c_str(), st.message().c_str());
        ++failed;
        continue;
      }
      if (!runGpu(pf, cache, inputs, &got, &err)) {
        std::printf("FAIL %s: gpu: %s\n", pf.name.c_str(), err.c_str());
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
      std::printf("%s %s (%zu launches):%s\n", ok ? "PASS" : "FAIL", pf.name.c_str(),
                  pf.launches.size(), detail.c_str());
      (ok ? passed : failed)++;
    }
  }
  std::printf("run_generated: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
