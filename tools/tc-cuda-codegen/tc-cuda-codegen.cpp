//===- tc-cuda-codegen.cpp - tc-fuse + CUDA codegen, for lit and the GPU check -===//
//
// Reads tc MLIR, runs tc-fuse, generates one CUDA kernel per kernel op and
// prints or compiles them:
//   --emit=mlir    the fused module
//   --emit=cuda    every kernel: a header per op (name, launch, parameters),
//                  then the source (once per distinct kernel)
//   --emit=arch    compiles for --target and prints "<name>: <arch>" read from
//                  each cubin's ELF header
//   --cubin-dir=D  also writes D/<name>.cubin and D/<name>.ptx
//   --artifact=F   also compiles the module as tc-compile compiles a model
//                  for --target (compile(), no training) and writes the
//                  artifact F: the reference program, the kernels and the
//                  device program (the input of test/codegen/run_generated)
//   --experimental=L  tc-compile's levers not yet checked on a GPU, for both
//   --no-group-sums  single-row reductions split over blocks each get a kernel
//                  of their length (CodegenOptions::groupSplitRows off; the
//                  form before grouped sums became the default)
//
//===----------------------------------------------------------------------===//

#include "compiler/Compile.h"
#include "compiler/Transforms/Passes.h"
#include "compiler/codegen/cuda/CudaCodegen.h"
#include "runtime/src/schema/artifact.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include "tools/cli.h"

#include <fstream>

using namespace mlir;
namespace cl = llvm::cl;

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input .mlir>"), cl::init("-"));
static cl::opt<std::string> emit("emit", cl::desc("mlir | cuda | arch | none"), cl::init("cuda"));
static cl::opt<std::string> target("target", cl::desc("sm_90 | sm_120"), cl::init("sm_90"));
static cl::opt<bool> noFuse("no-fuse", cl::desc("Skip tc-fuse"), cl::init(false));
static cl::opt<std::string> cubinDir("cubin-dir", cl::desc("Write <name>.cubin/.ptx here"), cl::init(""));
static cl::list<std::string> experimental(
    "experimental", cl::CommaSeparated,
    cl::desc("Levers not yet checked on a GPU (tc-compile --experimental)"));
static cl::opt<bool> noGroupSums("no-group-sums",
                                 cl::desc("One kernel per length for split single-row reductions"),
                                 cl::init(false));
static cl::opt<std::string> artifactPath("artifact",
                                         cl::desc("Compile for --target and write the artifact here"),
                                         cl::init(""));

namespace {
int fail(const std::string &msg) {
  llvm::errs() << "tc-cuda-codegen: " << msg << "\n";
  return 1;
}

bool writeFile(const std::string &path, const void *data, size_t size) {
  std::ofstream f(path, std::ios::binary);
  f.write(static_cast<const char *>(data), size);
  return (bool)f;
}

/// compile() on a copy of `module` (before tc-fuse: the pipelines fuse it
/// themselves) for `target`, written to `path`.
int writeCompiledArtifact(MLIRContext &ctx, ModuleOp module, const std::string &path) {
  tc::CompileInput input;
  input.module = OwningOpRef<ModuleOp>(module.clone());
  tc::CompileOptions opts;
  opts.experimental.assign(experimental.begin(), experimental.end());
  opts.target = target;
  tc::CompileResult result;
  tc::CompileError error;
  if (!tc::compile(ctx, std::move(input), opts, &result, &error))
    return fail("compiling for " + target + ": " + error.message);
  tc::rt::Status st = tc::rt::writeArtifact(result.artifact, path);
  if (!st.isOk())
    return fail("writing '" + path + "': " + st.message());
  return 0;
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::AddExtraVersionPrinter(
      [](llvm::raw_ostream &os) { os << "tc-cuda-codegen (tc) " << tc::cli::kVersion << "\n"; });
  cl::ParseCommandLineOptions(argc, argv, "tc-fuse + CUDA codegen\n");
  if (std::string e = tc::checkExperimentalLevers({experimental.begin(), experimental.end()});
      !e.empty())
    return fail(e);
  MLIRContext ctx;
  tc::loadCompilerDialects(ctx);
  llvm::SourceMgr sm;
  std::string err;
  auto buf = llvm::MemoryBuffer::getFileOrSTDIN(inputFile);
  if (!buf)
    return fail("cannot read '" + inputFile + "'");
  sm.AddNewSourceBuffer(std::move(*buf), llvm::SMLoc());
  SourceMgrDiagnosticHandler diag(sm, &ctx);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sm, &ctx);
  if (!module)
    return 1;

  if (!artifactPath.empty())
    if (int rc = writeCompiledArtifact(ctx, *module, artifactPath))
      return rc;
  if (!noFuse) {
    PassManager pm(&ctx);
    pm.addNestedPass<func::FuncOp>(tc::createTcFuse());
    if (failed(pm.run(*module)))
      return 1;
  }
  if (emit == "mlir") {
    module->print(llvm::outs());
    llvm::outs() << "\n";
  }
  tc::cuda::CodegenOptions codegen;
  codegen.groupSplitRows = !noGroupSums;
  auto kernels = tc::cuda::generateKernels(*module, codegen);
  if (failed(kernels))
    return 1;
  if (emit == "cuda") {
    llvm::StringSet<> printed;
    for (const auto &k : *kernels) {
      llvm::outs() << "// ===== kernel " << k.name << " for " << k.op->getName() << " at "
                   << k.op->getLoc() << "\n// launch: grid " << k.launch.grid << ", block "
                   << k.launch.block << "\n";
      for (const auto &p : k.params) {
        llvm::outs() << "// param " << p.name << ": ";
        if (p.kind == tc::cuda::ParamKind::Output || p.kind == tc::cuda::ParamKind::Input) {
          llvm::outs() << p.dtype << " [";
          llvm::interleave(p.shape, llvm::outs(), "x");
          llvm::outs() << "]";
        } else {
          llvm::interleave(p.values, llvm::outs(), " ");
        }
        llvm::outs() << "\n";
      }
      if (printed.insert(k.name).second)
        llvm::outs() << k.source;
    }
  }
  bool wantBinaries = emit == "arch" || !cubinDir.empty();
  if (!wantBinaries)
    return 0;
  auto bins = tc::cuda::compileKernels(*kernels, target, &err);
  if (failed(bins))
    return fail(err);
  if (!cubinDir.empty()) {
    llvm::sys::fs::create_directories(cubinDir);
    for (const auto &b : *bins)
      if (!writeFile(cubinDir + "/" + b.name + ".cubin", b.cubin.data(), b.cubin.size()) ||
          !writeFile(cubinDir + "/" + b.name + ".ptx", b.ptx.data(), b.ptx.size()))
        return fail("cannot write to '" + cubinDir + "'");
  }
  if (emit == "arch")
    for (const auto &b : *bins) {
      auto arch = tc::cuda::cubinArch(b.cubin);
      llvm::outs() << b.name << ": " << (arch ? *arch : "not a CUDA ELF") << " ("
                   << b.cubin.size() << " bytes cubin, " << b.ptx.size() << " bytes PTX)\n";
    }
  return 0;
}
