//===- Metadata.cpp - what exporters record beside the graph --------------===//
//
// See Metadata.h.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Metadata.h"

#include <google/protobuf/unknown_field_set.h>

#include <set>
#include <sstream>

namespace tc::onnx_import {

std::map<std::string, std::string> unknownMetadata(const google::protobuf::Message &msg,
                                                   int field) {
  std::map<std::string, std::string> out;
  const google::protobuf::UnknownFieldSet &u = msg.GetReflection()->GetUnknownFields(msg);
  for (int i = 0; i < u.field_count(); ++i) {
    const google::protobuf::UnknownField &f = u.field(i);
    if (f.number() != field || f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    onnx::StringStringEntryProto e;
    if (e.ParseFromString(f.length_delimited()))
      out[e.key()] = e.value();
  }
  return out;
}

std::map<std::string, SignatureInput> graphSignature(const onnx::GraphProto &graph) {
  std::map<std::string, SignatureInput> out;
  auto gmd = unknownMetadata(graph, kGraphMetadataField);
  auto sig = gmd.find("pkg.torch.export.ExportedProgram.graph_signature");
  if (sig == gmd.end())
    return out;
  std::istringstream lines(sig->second);
  std::string line;
  while (std::getline(lines, line)) {
    // "p_model_wte_weight: PARAMETER target='model.wte.weight'"
    size_t colon = line.find(": "), t = line.find("target='");
    if (colon == std::string::npos || colon == 0 || t == std::string::npos)
      continue;
    size_t end = line.find('\'', t + 8);
    if (end == std::string::npos)
      continue;
    SignatureInput in;
    in.kind = line.substr(colon + 2, line.find(' ', colon + 2) - colon - 2);
    in.target = line.substr(t + 8, end - t - 8);
    out[line.substr(0, colon)] = in;
  }
  return out;
}

std::vector<std::string> pythonStringList(const std::string &t) {
  std::vector<std::string> out;
  for (size_t a = t.find('\''); a != std::string::npos; a = t.find('\'', a + 1)) {
    size_t b = t.find('\'', a + 1);
    if (b == std::string::npos)
      break;
    out.push_back(t.substr(a + 1, b - a - 1));
    a = b;
  }
  return out;
}

std::map<std::string, std::vector<std::string>> foldedSources(const onnx::GraphProto &graph) {
  std::set<std::string> inits;
  for (const auto &init : graph.initializer())
    inits.insert(init.name());
  std::map<std::string, std::vector<std::string>> out;
  for (const auto &vi : graph.value_info()) {
    if (!inits.count(vi.name()))
      continue;
    auto md = unknownMetadata(vi, kValueInfoMetadataField);
    auto f = md.find("pkg.onnxscript.optimizer.folded_from");
    if (f != md.end())
      out[vi.name()] = pythonStringList(f->second);
  }
  return out;
}

} // namespace tc::onnx_import
