//===- Nvrtc.cpp - compile generated kernels with NVRTC -------------------===//
//
// Each distinct kernel is compiled twice: to SASS for the real architecture
// (the cubin the runtime loads) and to PTX for its virtual one (kept in the
// artifact for inspection and JIT on a newer GPU). Without NVRTC at build
// time (TC_HAVE_NVRTC unset) compileKernels fails with a clear message.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/cuda/CudaCodegen.h"

#include "llvm/ADT/StringSet.h"

#ifdef TC_HAVE_NVRTC
#include <nvrtc.h>
#endif

namespace tc::cuda {

bool haveNvrtc() {
#ifdef TC_HAVE_NVRTC
  return true;
#else
  return false;
#endif
}

#ifdef TC_HAVE_NVRTC
namespace {
/// Compiles `src` for `arch` ("sm_90" -> SASS, "compute_90" -> PTX).
bool nvrtcCompile(const std::string &name, const std::string &src, const std::string &arch,
                  bool ptx, std::vector<uint8_t> *out, std::string *log, std::string *error) {
  nvrtcProgram prog;
  nvrtcResult r = nvrtcCreateProgram(&prog, src.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) {
    *error = "NVRTC: cannot create program for kernel '" + name + "': " + nvrtcGetErrorString(r);
    return false;
  }
  std::string archOpt = "--gpu-architecture=" + arch;
  const char *opts[] = {archOpt.c_str(), "-std=c++17", "--fmad=true", "-default-device"};
  r = nvrtcCompileProgram(prog, 4, opts);
  size_t logSize = 0;
  nvrtcGetProgramLogSize(prog, &logSize);
  std::string l(logSize, '\0');
  if (logSize)
    nvrtcGetProgramLog(prog, l.data());
  while (!l.empty() && (l.back() == '\0' || l.back() == '\n'))
    l.pop_back();
  if (r != NVRTC_SUCCESS) {
    *error = "NVRTC failed to compile kernel '" + name + "' for " + arch + " (" +
             nvrtcGetErrorString(r) + "):\n" + l;
    nvrtcDestroyProgram(&prog);
    return false;
  }
  if (!l.empty())
    *log += l + "\n";
  size_t size = 0;
  r = ptx ? nvrtcGetPTXSize(prog, &size) : nvrtcGetCUBINSize(prog, &size);
  if (r == NVRTC_SUCCESS) {
    out->resize(size);
    r = ptx ? nvrtcGetPTX(prog, reinterpret_cast<char *>(out->data()))
            : nvrtcGetCUBIN(prog, reinterpret_cast<char *>(out->data()));
  }
  nvrtcDestroyProgram(&prog);
  if (r != NVRTC_SUCCESS) {
    *error = "NVRTC: cannot read the " + std::string(ptx ? "PTX" : "cubin") + " of kernel '" +
             name + "': " + nvrtcGetErrorString(r);
    return false;
  }
  if (ptx)
    while (!out->empty() && out->back() == 0)
      out->pop_back();
  return true;
}
} // namespace
#endif

mlir::FailureOr<std::vector<KernelBinary>>
compileKernels(const std::vector<KernelSource> &sources, llvm::StringRef target, std::string *error) {
  std::string arch = nvrtcArch(target);
  if (arch.empty()) {
    *error = "no CUDA architecture for target '" + target.str() + "' (use sm_90 or sm_120)";
    return mlir::failure();
  }
#ifndef TC_HAVE_NVRTC
  *error = "this build of tc has no NVRTC (CUDA toolkit not found at build time), so it "
           "cannot compile kernels for " + arch;
  return mlir::failure();
#else
  std::vector<KernelBinary> out;
  llvm::StringSet<> done;
  std::string virt = "compute_" + arch.substr(3);
  for (const KernelSource &k : sources) {
    if (!done.insert(k.name).second)
      continue;
    KernelBinary b;
    b.name = k.name;
    b.source = k.source;
    b.arch = arch;
    std::vector<uint8_t> ptx;
    if (!nvrtcCompile(k.name, k.source, arch, false, &b.cubin, &b.log, error) ||
        !nvrtcCompile(k.name, k.source, virt, true, &ptx, &b.log, error))
      return mlir::failure();
    b.ptx.assign(ptx.begin(), ptx.end());
    out.push_back(std::move(b));
  }
  return out;
#endif
}

} // namespace tc::cuda
