//===- OnnxInput.h - an ONNX file as compile()'s input ----------*- C++ -*-===//
//
// The glue between the ONNX frontend and the compiler, which know nothing of
// each other: tc-compile and the tests that compile ONNX files use it.
//
//===----------------------------------------------------------------------===//
#ifndef TC_TOOLS_ONNXINPUT_H
#define TC_TOOLS_ONNXINPUT_H

#include "compiler/Compile.h"
#include "frontends/onnx/Import.h"

#include <string>

namespace tc {

/// Imports the ONNX model at `path` into `*out` (module, weights, notes and
/// the parameters the exporter dropped). False with `*error` set (bad input)
/// on failure.
bool importOnnx(mlir::MLIRContext &ctx, const std::string &path,
                const onnx_import::ImportOptions &opts, CompileInput *out, std::string *error);

/// The batch `opts` imports at (the "batch" dim or axis 0 of the --input
/// shapes, all equal), or -1 with `*why` set.
int64_t batchOf(const onnx_import::ImportOptions &opts, std::string *why);

/// `opts` at batch `b` (as batchOf reads it).
onnx_import::ImportOptions atBatch(const onnx_import::ImportOptions &opts, int64_t b);

} // namespace tc

#endif // TC_TOOLS_ONNXINPUT_H
