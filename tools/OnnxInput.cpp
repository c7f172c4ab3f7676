//===- OnnxInput.cpp - an ONNX file as compile()'s input ------------------===//

#include "tools/OnnxInput.h"

#include "compiler/codegen/cuda/CudaCodegen.h"

namespace tc {

bool importOnnx(mlir::MLIRContext &ctx, const std::string &path,
                const onnx_import::ImportOptions &opts, CompileInput *out, std::string *error) {
  auto imported = onnx_import::importOnnxFile(ctx, path, opts, error);
  if (mlir::failed(imported))
    return false;
  out->module = std::move(imported->module);
  for (onnx_import::ImportedWeight &w : imported->weights)
    out->weights.emplace_back(std::move(w.name), std::move(w.tensor));
  out->notes = std::move(imported->notes);
  out->droppedParameters = std::move(imported->droppedParameters);
  out->exportModel = std::move(imported->exportModel);
  for (const auto &e : imported->exportInits)
    out->exportInits.emplace_back(e.initializer, e.param, e.transposed);
  return true;
}

int64_t batchOf(const onnx_import::ImportOptions &opts, std::string *why) {
  if (auto it = opts.dimParams.find("batch"); it != opts.dimParams.end())
    return it->second;
  int64_t b = -1;
  for (const auto &[name, shape] : opts.inputShapes) {
    if (shape.empty() || (b >= 0 && shape[0] != b)) {
      *why = "the --input shapes do not share one batch (axis 0)";
      return -1;
    }
    b = shape[0];
  }
  if (b < 0)
    *why = "the batch is fixed by the export (static shapes) or not set: compile with "
           "--dim batch=B (or --input) to re-plan it";
  return b;
}

onnx_import::ImportOptions atBatch(const onnx_import::ImportOptions &opts, int64_t b) {
  onnx_import::ImportOptions o = opts;
  if (auto it = o.dimParams.find("batch"); it != o.dimParams.end())
    it->second = b;
  else
    for (auto &[name, shape] : o.inputShapes)
      shape[0] = b;
  return o;
}

std::optional<cache::Key> artifactCacheKey(const std::vector<std::string> &args,
                                           const std::string &modelPath,
                                           const onnx_import::ImportOptions &opts) {
  cache::KeyBuilder key("tc-artifact-1");
  key.add("build", llvm::ArrayRef<uint8_t>(cache::buildId().bytes))
      .add("nvrtc", cuda::nvrtcVersionString());
  for (const std::string &a : args)
    key.add("arg", a);
  std::string error;
  auto feed = [&](const std::string &tag, llvm::StringRef bytes) { key.add(tag, bytes); };
  if (!onnx_import::feedModelInputs(modelPath, opts, feed, &error))
    return std::nullopt; // the compile reports why the model cannot be read
  return key.finish();
}

} // namespace tc
