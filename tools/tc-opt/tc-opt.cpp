//===- tc-opt.cpp - the tc optimizer driver --------------------------------===//
//
// MlirOptMain with the tc dialect, func, every tc pass and the named
// pipelines of tc-compile (Pipelines.h): lit's workhorse.
//
//===----------------------------------------------------------------------===//
#include "compiler/Conversion/Passes.h"
#include "compiler/Pipelines.h"
#include "compiler/Transforms/Passes.h"
#include "compiler/codegen/cuda/Passes.h"
#include "dialects/tc/IR/TcOps.h"
#include "dialects/tcx/IR/TcxOps.h"
#include "dialects/tcx/Transforms/Passes.h"
#include "tools/cli.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::func::FuncDialect>();
  tc::registerTcDialect(registry);
  tcx::registerTcxDialect(registry);
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  tc::registerTcCompilerPasses();
  tc::registerTcConversionPasses();
  tcx::registerTcxTransformsPasses();
  tc::cuda::registerTcCudaCodegenPasses();
  tc::registerTcPipelines();
  llvm::cl::AddExtraVersionPrinter(
      [](llvm::raw_ostream &os) { os << "tc-opt (tc) " << tc::cli::kVersion << "\n"; });
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "tc optimizer driver\n", registry));
}
