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
//   --bundle=D     the input for test/codegen/run_generated: D/reference.tca
//                  (the unfused functions for the CPU reference executor),
//                  D/plan.txt (buffers + launches of the fused functions) and
//                  the cubins
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "compiler/codegen/cuda/CudaCodegen.h"
#include "dialects/tc/Eval/Program.h"
#include "dialects/tc/IR/TcOps.h"
#include "runtime/src/schema/artifact.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseMap.h"
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
static cl::opt<std::string> bundleDir("bundle", cl::desc("Write a run_generated bundle here"), cl::init(""));

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

std::string dtypeOf(Type t) {
  auto tt = tc::toTensorType(t);
  return tt ? std::to_string((int)tt->dtype) : "?";
}

/// plan.txt: per function, its buffers and launches (see run_generated.cpp).
LogicalResult writePlan(ModuleOp module, const std::vector<tc::cuda::KernelSource> &kernels,
                        llvm::raw_ostream &os) {
  llvm::DenseMap<Operation *, const tc::cuda::KernelSource *> byOp;
  for (const auto &k : kernels)
    byOp[k.op] = &k;
  os << "tc-gpu-plan 1\n";
  for (auto fn : module.getOps<func::FuncOp>()) {
    llvm::DenseMap<Value, int> ids;
    std::string body;
    llvm::raw_string_ostream b(body);
    auto def = [&](Value v) {
      int id = ids.size();
      ids[v] = id;
      auto tt = llvm::cast<RankedTensorType>(v.getType());
      b << "value " << id << " " << dtypeOf(tt) << " " << tt.getRank();
      for (int64_t d : tt.getShape())
        b << " " << d;
      b << "\n";
      return id;
    };
    for (BlockArgument a : fn.getArguments()) {
      int id = def(a);
      b << "input " << id << "\n";
    }
    for (Operation &op : fn.getBody().front()) {
      if (auto ret = llvm::dyn_cast<func::ReturnOp>(op)) {
        for (Value v : ret.getOperands())
          b << "output " << ids.lookup(v) << "\n";
        continue;
      }
      if (auto c = llvm::dyn_cast<tc::ConstantOp>(op)) {
        auto h = tc::toHostTensor(c.getValue());
        if (failed(h))
          return op.emitOpError() << "bundle: unsupported constant";
        int id = def(c.getResult());
        b << "const " << id << " " << h->data.size();
        for (uint8_t x : h->data)
          b << " " << (int)x;
        b << "\n";
        continue;
      }
      auto it = byOp.find(&op);
      if (it == byOp.end())
        return op.emitOpError() << "bundle: no generated kernel for this op";
      const tc::cuda::KernelSource &k = *it->second;
      for (Value r : op.getResults())
        def(r);
      b << "launch " << k.name << " " << k.launch.grid << " " << k.launch.block << " "
        << k.params.size();
      for (const auto &p : k.params) {
        switch (p.kind) {
        case tc::cuda::ParamKind::Output:
          b << " P " << ids.lookup(op.getResult(p.index));
          break;
        case tc::cuda::ParamKind::Input:
          b << " P " << ids.lookup(op.getOperand(p.index));
          break;
        case tc::cuda::ParamKind::Int64:
          b << " N " << p.values[0];
          break;
        case tc::cuda::ParamKind::Int64Array:
          b << " M " << p.values.size();
          for (int64_t v : p.values)
            b << " " << v;
          break;
        }
      }
      b << "\n";
    }
    os << "func " << fn.getName() << " " << ids.size() << "\n" << body << "end\n";
  }
  return success();
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::AddExtraVersionPrinter(
      [](llvm::raw_ostream &os) { os << "tc-cuda-codegen (tc) " << tc::cli::kVersion << "\n"; });
  cl::ParseCommandLineOptions(argc, argv, "tc-fuse + CUDA codegen\n");
  DialectRegistry registry;
  registry.insert<func::FuncDialect>();
  tc::registerTcDialect(registry);
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
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

  tc::rt::Artifact reference;
  if (!bundleDir.empty()) {
    reference.target = "cpu";
    reference.producer = "tc-cuda-codegen";
    for (auto fn : module->getOps<func::FuncOp>()) {
      auto p = tc::lowerToProgram(fn, fn.getName(), &err);
      if (failed(p))
        return fail("reference program of @" + fn.getName().str() + ": " + err);
      reference.functions.push_back(std::move(*p));
    }
  }
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
  auto kernels = tc::cuda::generateKernels(*module);
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
  bool wantBinaries = emit == "arch" || !cubinDir.empty() || !bundleDir.empty();
  if (!wantBinaries)
    return 0;
  auto bins = tc::cuda::compileKernels(*kernels, target, &err);
  if (failed(bins))
    return fail(err);
  for (const std::string &dir : {cubinDir.getValue(), bundleDir.getValue()}) {
    if (dir.empty())
      continue;
    llvm::sys::fs::create_directories(dir);
    for (const auto &b : *bins)
      if (!writeFile(dir + "/" + b.name + ".cubin", b.cubin.data(), b.cubin.size()) ||
          !writeFile(dir + "/" + b.name + ".ptx", b.ptx.data(), b.ptx.size()))
        return fail("cannot write to '" + dir + "'");
  }
  if (emit == "arch")
    for (const auto &b : *bins) {
      auto arch = tc::cuda::cubinArch(b.cubin);
      llvm::outs() << b.name << ": " << (arch ? *arch : "not a CUDA ELF") << " ("
                   << b.cubin.size() << " bytes cubin, " << b.ptx.size() << " bytes PTX)\n";
    }
  if (!bundleDir.empty()) {
    tc::rt::Status st = tc::rt::writeArtifact(reference, bundleDir + "/reference.tca");
    if (!st.isOk())
      return fail("writing reference.tca: " + st.message());
    std::string plan;
    llvm::raw_string_ostream os(plan);
    if (failed(writePlan(*module, *kernels, os)))
      return 1;
    if (!writeFile(bundleDir + "/plan.txt", plan.data(), plan.size()))
      return fail("cannot write plan.txt");
  }
  return 0;
}
