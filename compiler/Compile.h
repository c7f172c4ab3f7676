//===- Compile.h - the compiler's C++ entry point ---------------*- C++ -*-===//
//
// `compile(...)` is what tc-compile (and tests) call: import a model, run the
// named pipeline, lower to the runtime program and assemble the artifact.
//
//===----------------------------------------------------------------------===//
#ifndef TC_COMPILER_COMPILE_H
#define TC_COMPILER_COMPILE_H

#include "frontends/onnx/Import.h"
#include "runtime/src/base/program.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>

namespace tc {

/// Registers every dialect the compiler uses with `ctx`.
void loadCompilerDialects(mlir::MLIRContext &ctx);

struct CompileOptions {
  std::string modelPath;
  onnx_import::ImportOptions import;
  std::string target = "cpu";
};

struct CompileResult {
  mlir::OwningOpRef<mlir::ModuleOp> imported; // straight from the frontend
  mlir::OwningOpRef<mlir::ModuleOp> module;   // after the pipeline
  rt::Artifact artifact;
};

/// Error classes, so that tools can choose exit codes: bad input (the model,
/// a flag) is the user's to fix (exit 2); internal failures are tc's (exit 1).
enum class CompileErrorKind { None, BadInput, Internal };

struct CompileError {
  CompileErrorKind kind = CompileErrorKind::None;
  std::string message;
};

/// Imports only (no passes): `result->imported` is set.
bool importModel(mlir::MLIRContext &ctx, const CompileOptions &opts,
                 CompileResult *result, CompileError *error);

/// Import + pipeline + artifact.
bool compile(mlir::MLIRContext &ctx, const CompileOptions &opts,
             CompileResult *result, CompileError *error);

/// The import-cleanup pipeline (canonicalize, CSE) on a module.
mlir::LogicalResult runImportCleanup(mlir::ModuleOp module, std::string *error);

} // namespace tc

#endif // TC_COMPILER_COMPILE_H
