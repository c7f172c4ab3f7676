//===- Nvrtc.cpp - compile generated kernels with NVRTC -------------------===//
//
// Each distinct kernel is compiled once, for the real architecture: the
// cubin the runtime loads and the PTX of its virtual one (kept in the
// artifact for inspection and JIT on a newer GPU) come from the same NVRTC
// program. Kernels compile on every core, and the compile cache
// (compiler/Cache.h, kernels/) keeps each result under a key of its source,
// architecture, options and NVRTC's version. Without NVRTC at build time
// (TC_HAVE_NVRTC unset) compileKernels fails with a clear message.
// cubinArch reads a cubin's architecture back without any CUDA tool.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/cuda/CudaCodegen.h"

#include "compiler/Cache.h"

#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <atomic>
#include <thread>

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

std::string nvrtcVersionString() {
#ifdef TC_HAVE_NVRTC
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
    return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
#else
  return "";
#endif
}

#ifdef TC_HAVE_NVRTC
namespace {
/// NVRTC's options: a contract of the kernel cache's key too.
std::vector<std::string> nvrtcOptions(const std::string &arch) {
  return {"--gpu-architecture=" + arch, "-std=c++17", "--fmad=true", "-default-device"};
}

/// Compiles `src` for the real architecture `arch` ("sm_90"): the cubin, and
/// the PTX of the same compile (NVRTC keeps it; it is what compiling for
/// the virtual "compute_90" alone gives, byte for byte).
bool nvrtcCompile(const std::string &name, const std::string &src, const std::string &arch,
                  KernelBinary *out, std::string *error) {
  nvrtcProgram prog;
  nvrtcResult r = nvrtcCreateProgram(&prog, src.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) {
    *error = "NVRTC: cannot create program for kernel '" + name + "': " + nvrtcGetErrorString(r);
    return false;
  }
  std::vector<std::string> opts = nvrtcOptions(arch);
  std::vector<const char *> argv;
  for (const std::string &o : opts)
    argv.push_back(o.c_str());
  r = nvrtcCompileProgram(prog, int(argv.size()), argv.data());
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
    out->log += l + "\n";
  size_t size = 0;
  const char *what = "cubin";
  r = nvrtcGetCUBINSize(prog, &size);
  if (r == NVRTC_SUCCESS) {
    out->cubin.resize(size);
    r = nvrtcGetCUBIN(prog, reinterpret_cast<char *>(out->cubin.data()));
  }
  if (r == NVRTC_SUCCESS) {
    what = "PTX";
    r = nvrtcGetPTXSize(prog, &size);
  }
  if (r == NVRTC_SUCCESS) {
    out->ptx.assign(size, '\0');
    r = nvrtcGetPTX(prog, out->ptx.data());
  }
  nvrtcDestroyProgram(&prog);
  if (r != NVRTC_SUCCESS) {
    *error = "NVRTC: cannot read the " + std::string(what) + " of kernel '" + name + "': " +
             nvrtcGetErrorString(r);
    return false;
  }
  while (!out->ptx.empty() && out->ptx.back() == 0)
    out->ptx.pop_back();
  return true;
}

cache::Key kernelKey(const KernelBinary &k, const std::string &arch) {
  cache::KeyBuilder b("tc-kernel-1");
  b.add("nvrtc", nvrtcVersionString()).add("arch", arch);
  for (const std::string &o : nvrtcOptions(arch))
    b.add("option", o);
  return b.add("name", k.name).add("source", k.source).finish();
}

constexpr size_t kKernelFields = 3; // cubin, PTX, NVRTC's log

void decode(llvm::ArrayRef<llvm::StringRef> f, KernelBinary *b) {
  b->cubin.assign(f[0].begin(), f[0].end());
  b->ptx = f[1].str();
  b->log = f[2].str();
}
} // namespace
#endif

mlir::FailureOr<std::vector<KernelBinary>>
compileKernels(const std::vector<KernelSource> &sources, llvm::StringRef target, std::string *error,
               std::vector<std::string> *notes) {
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
  // Each distinct kernel once: from the cache when it has it, else NVRTC,
  // on as many threads as there are cores (NVRTC programs are independent).
  std::vector<KernelBinary> out;
  llvm::StringSet<> done;
  for (const KernelSource &k : sources) {
    if (!done.insert(k.name).second)
      continue;
    KernelBinary b;
    b.name = k.name;
    b.source = k.source;
    b.arch = arch;
    out.push_back(std::move(b));
  }
  const cache::Store &store = cache::global();
  std::vector<cache::Key> keys(out.size());
  std::vector<size_t> misses;
  for (size_t i = 0; i < out.size(); ++i) {
    keys[i] = kernelKey(out[i], arch);
    std::optional<cache::Store::Entry> hit = store.get("kernels", keys[i], kKernelFields, notes);
    if (hit)
      decode(hit->fields, &out[i]);
    else
      misses.push_back(i);
  }
  std::vector<std::string> errors(out.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t m; (m = next.fetch_add(1)) < misses.size();) {
      KernelBinary &b = out[misses[m]];
      nvrtcCompile(b.name, b.source, arch, &b, &errors[misses[m]]);
    }
  };
  unsigned threads = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()),
                                      misses.size());
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t)
    pool.emplace_back(work);
  work();
  for (std::thread &t : pool)
    t.join();
  for (size_t i : misses) { // the first failure in source order
    if (!errors[i].empty()) {
      *error = errors[i];
      return mlir::failure();
    }
    const KernelBinary &b = out[i];
    llvm::StringRef cubin(reinterpret_cast<const char *>(b.cubin.data()), b.cubin.size());
    store.put("kernels", keys[i], {cubin, b.ptx, b.log}, notes);
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
