//===- export.h - a trained model as standard ONNX / safetensors -*- C++ -*-===//
//
// tc-run --export-onnx / --export-safetensors (docs/export.md): the weights of
// an artifact (or of a checkpoint loaded over it) written in the source ONNX
// graph that tc-compile stored in the artifact (reports "export.onnx" and
// "export"), the linear-layer weights of the --fp8 plan quantised:
//   bf16   BFLOAT16 initializer -> Cast(to=FLOAT)                 (opset 23)
//   fp8    FLOAT8E4M3FN + per-tensor f32 scale -> DequantizeLinear (opset 23)
//   mxfp4  FLOAT4E2M1 + FLOAT8E8M0 1x32 block scales -> DequantizeLinear
//          (block_size 32, output_dtype FLOAT)                     (opset 24)
//   nvfp4  FLOAT4E2M1 + FLOAT8E4M3FN 16x16 block scales written as 1x16
//          blocks (repeated), themselves dequantised by a per-tensor f32
//          scale (a second DequantizeLinear), as NVIDIA's Model Optimizer
//          exports NVFP4                                           (opset 23)
// Everything else keeps its own dtype and value. The quantisation is
// tc.quantize's, run by the CPU reference, and for nvfp4 its quantizeNvfp4
// (runtime/src/cpu/quantize.cpp).
// The ONNX file is written with a small protobuf encoder (no libprotobuf in
// the runtime, which stays free of the compiler's dependencies).
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_SESSION_EXPORT_H
#define TC_RUNTIME_SESSION_EXPORT_H

#include <cstdint>
#include <string>

#include "runtime/src/base/status.h"
#include "runtime/src/schema/program.h"

namespace tc::rt {

struct ExportOptions {
  std::string onnxPath;        ///< --export-onnx (empty: none)
  std::string safetensorsPath; ///< --export-safetensors (empty: none)
  std::string precision;       ///< bf16, fp8, mxfp4 or nvfp4
  std::string init;            ///< checkpoint or .safetensors over the artifact's weights
  uint64_t seed = 1337;        ///< initialisers of entries without data
};

/// The valid --export-precision values, for messages.
constexpr const char *kExportPrecisions = "nvfp4, mxfp4, fp8 or bf16";

/// Writes what `o` asks for. InvalidArgument for bad options or an artifact
/// without the export records (the message says how to rebuild it).
Status exportModel(const Artifact &artifact, const ExportOptions &o);

} // namespace tc::rt

#endif // TC_RUNTIME_SESSION_EXPORT_H
