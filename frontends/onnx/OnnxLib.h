//===- OnnxLib.h - exception-safe wrappers around libonnx -------*- C++ -*-===//
//
// libonnx 1.12's parser, checker and schema registry throw C++ exceptions,
// while the MLIR side of the importer is compiled with -fno-exceptions. These
// functions are compiled (OnnxLib.cpp, library TcOnnxLib) with exceptions on,
// catch everything and return an error string instead: "" means success.
// Nothing here includes MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef TC_FRONTENDS_ONNX_ONNXLIB_H
#define TC_FRONTENDS_ONNX_ONNXLIB_H

#include "onnx/onnx_pb.h"

#include <cstddef>
#include <map>
#include <string>

namespace tc::onnx_import::lib {

/// Parses a binary ModelProto from `size` bytes at `data`.
std::string parseBinaryModel(const void *data, size_t size,
                             onnx::ModelProto &model);

/// Parses ONNX's textual syntax (onnx::OnnxParser; `#` starts a comment).
std::string parseTextModel(const std::string &text, onnx::ModelProto &model);

/// The newest opset version of `domain` that the linked libonnx has schemas
/// for ("" and "ai.onnx" are the same domain), or -1 if it does not know it.
int knownOpsetVersion(const std::string &domain);

/// The most inputs and outputs the schema of `opType` in `domain` at `opset`
/// allows, when the linked libonnx has that schema (opset <= its newest);
/// false otherwise.
bool schemaArity(const std::string &domain, const std::string &opType, int opset, int *maxInputs,
                 int *maxOutputs);

/// Runs libonnx's model checker (what onnx::checker::check_model does, with
/// `modelDir` as the folder external data is looked up in).
std::string checkModel(const onnx::ModelProto &model, const std::string &modelDir);

} // namespace tc::onnx_import::lib

#endif // TC_FRONTENDS_ONNX_ONNXLIB_H
