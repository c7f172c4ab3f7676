//===- OnnxLib.cpp - exception-safe wrappers around libonnx ---------------===//
//
// Compiled with -fexceptions (see CMakeLists.txt): every call into libonnx is
// wrapped in try/catch so that no exception reaches the MLIR side.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/OnnxLib.h"

#include "onnx/checker.h"
#include "onnx/defs/parser.h"
#include "onnx/defs/schema.h"

#include <climits>
#include <exception>

namespace tc::onnx_import::lib {

std::string parseBinaryModel(const void *data, size_t size,
                             onnx::ModelProto &model) {
  // protobuf's parser takes an int size: messages of 2 GiB and more cannot be
  // parsed at all (large weights must be stored as external data).
  if (size > static_cast<size_t>(INT_MAX))
    return "file is " + std::to_string(size) +
           " bytes; a protobuf message must be smaller than 2 GiB (store the "
           "weights as external data)";
  try {
    if (!model.ParseFromArray(data, static_cast<int>(size)))
      return "not a valid ONNX ModelProto (protobuf parse failed)";
  } catch (const std::exception &e) {
    return std::string("protobuf parse failed: ") + e.what();
  } catch (...) {
    return "protobuf parse failed";
  }
  return "";
}

std::string parseTextModel(const std::string &text, onnx::ModelProto &model) {
  try {
    onnx::OnnxParser parser(text.c_str());
    auto status = parser.Parse(model);
    if (!status.IsOK())
      return status.ErrorMessage();
    // The parser stops after the main graph (and any functions); anything
    // else left over is a syntax error it would otherwise ignore silently.
    if (!parser.EndOfInput())
      return "unexpected text after the model";
  } catch (const std::exception &e) {
    return std::string("parse failed: ") + e.what();
  } catch (...) {
    return "parse failed";
  }
  return "";
}

int knownOpsetVersion(const std::string &domain) {
  try {
    const auto &map = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
    auto it = map.find(domain == "ai.onnx" ? std::string("") : domain);
    if (it == map.end())
      return -1;
    return it->second.second;
  } catch (...) {
    return -1;
  }
}

bool schemaArity(const std::string &domain, const std::string &opType, int opset, int *maxInputs,
                 int *maxOutputs) {
  try {
    std::string d = domain == "ai.onnx" ? std::string("") : domain;
    int known = knownOpsetVersion(d);
    if (known < 0 || opset > known)
      return false;
    const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(opType, opset, d);
    if (!schema)
      return false;
    *maxInputs = schema->max_input();
    *maxOutputs = schema->max_output();
    return true;
  } catch (...) {
    return false;
  }
}

std::string checkModel(const onnx::ModelProto &model, const std::string &modelDir) {
  try {
    // Mirrors onnx::checker::check_model(const ModelProto&) of 1.12, plus the
    // model folder so that external data locations resolve as for a file.
    onnx::checker::CheckerContext ctx;
    if (!model.has_ir_version())
      return "the model has no ir_version";
    ctx.set_ir_version(static_cast<int>(model.ir_version()));
    std::unordered_map<std::string, int> opsets;
    for (const auto &imp : model.opset_import())
      opsets[imp.domain()] = static_cast<int>(imp.version());
    ctx.set_opset_imports(opsets);
    ctx.set_model_dir(modelDir);
    onnx::checker::LexicalScopeContext lex;
    onnx::checker::check_graph(model.graph(), ctx, lex);
    if (model.functions_size() > 0)
      onnx::checker::check_model_local_functions(model, ctx, lex);
  } catch (const std::exception &e) {
    return e.what();
  } catch (...) {
    return "the ONNX checker failed";
  }
  return "";
}

} // namespace tc::onnx_import::lib
