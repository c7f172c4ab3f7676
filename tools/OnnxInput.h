//===- OnnxInput.h - an ONNX file as compile()'s input ----------*- C++ -*-===//
//
// The glue between the ONNX frontend and the compiler, which know nothing of
// each other: tc-compile and the tests that compile ONNX files use it.
//
//===----------------------------------------------------------------------===//
#ifndef TC_TOOLS_ONNXINPUT_H
#define TC_TOOLS_ONNXINPUT_H

#include "compiler/Cache.h"
#include "compiler/Compile.h"
#include "frontends/onnx/Import.h"

#include <optional>
#include <string>
#include <vector>

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

/// The compile cache's key of the artifact tc-compile makes from `modelPath`
/// with the command-line arguments `args` (all of them, as given): tc's
/// build id, NVRTC's version, every argument, and every byte the import
/// reads (onnx_import::feedModelInputs: the weights only with them). Nothing
/// when the model cannot be read (the compile then reports why).
std::optional<cache::Key> artifactCacheKey(const std::vector<std::string> &args,
                                           const std::string &modelPath,
                                           const onnx_import::ImportOptions &opts);

} // namespace tc

#endif // TC_TOOLS_ONNXINPUT_H
