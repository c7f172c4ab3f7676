//===- Nvrtc.cpp - compile generated kernels with NVRTC -------------------===//
//
// Each distinct kernel is compiled twice: to SASS for the real architecture
// (the cubin the runtime loads) and to PTX for its virtual one (kept in the
// artifact for inspection and JIT on a newer GPU). Without NVRTC at build
// time (TC_HAVE_NVRTC unset) compileKernels fails with a clear message.
// cubinArch reads a cubin's architecture back without any CUDA tool.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/cuda/CudaCodegen.h"

#include "llvm/ADT/StringSet.h"

#include <cctype>

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

std::optional<std::string> cubinArch(llvm::ArrayRef<uint8_t> c) {
  // ELF64 little-endian with e_machine EM_CUDA (190). With the CUDA 13 ELF
  // ABI (e_ident[EI_ABIVERSION] = 8) the SM number is e_flags bits 8..15
  // (0x5a = 90, 0x78 = 120), the same for sm_120, sm_120a and sm_120f; the
  // variant is recorded in the toolkit-info note ptxas writes
  // (".note.nv.tkinfo": "... -arch sm_120a -m 64"), which is where cuobjdump
  // reads it too. The note must agree with e_flags.
  if (c.size() < 64 || c[0] != 0x7f || c[1] != 'E' || c[2] != 'L' || c[3] != 'F' || c[4] != 2)
    return std::nullopt;
  uint16_t machine = c[18] | (c[19] << 8);
  if (machine != 190)
    return std::nullopt;
  uint32_t flags = c[48] | (c[49] << 8) | (c[50] << 16) | ((uint32_t)c[51] << 24);
  unsigned sm = c[8] >= 8 ? (flags >> 8) & 0xff : flags & 0xff;
  std::string base = "sm_" + std::to_string(sm);
  llvm::StringRef bytes(reinterpret_cast<const char *>(c.data()), c.size());
  size_t p = bytes.find("-arch sm_");
  if (p == llvm::StringRef::npos)
    return base;
  llvm::StringRef arch = bytes.substr(p + 6).take_while([](char ch) { return std::isalnum(ch) || ch == '_'; });
  if (!arch.starts_with(base) || arch.size() > base.size() + 1)
    return base + " (note says " + arch.str() + ")";
  return arch.str();
}

} // namespace tc::cuda
