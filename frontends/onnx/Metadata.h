//===- Metadata.h - what exporters record beside the graph ------*- C++ -*-===//
//
// ONNX >= 1.16 added `metadata_props` to NodeProto (field 9), ValueInfoProto
// (field 4) and GraphProto (field 16). libonnx 1.12, which tc links, does not
// know them, so its protobuf classes keep them as unknown fields; these
// helpers read them back. torch's dynamo exporter writes there:
//   graph      pkg.torch.export.ExportedProgram.graph_signature
//              ("p_w: PARAMETER target='h.0.ln_1.weight'" lines)
//   value_info pkg.torch.export.graph_signature.InputSpec.kind (initializers)
//              pkg.onnxscript.optimizer.folded_from ("['a', 'b']")
//   node       pkg.torch.onnx.fx_node ("%mul_6 : ... = call_function[...](
//              args = (%p_w, %mul_5), kwargs = {})"), pkg.torch.onnx.name_scopes
//
//===----------------------------------------------------------------------===//
#ifndef TC_FRONTENDS_ONNX_METADATA_H
#define TC_FRONTENDS_ONNX_METADATA_H

#include "onnx/onnx_pb.h"

#include <map>
#include <string>
#include <vector>

namespace tc::onnx_import {

/// Protobuf field numbers of metadata_props.
inline constexpr int kNodeMetadataField = 9;
inline constexpr int kValueInfoMetadataField = 4;
inline constexpr int kGraphMetadataField = 16;

/// metadata_props stored as unknown field `field` of `msg`: key -> value.
std::map<std::string, std::string> unknownMetadata(const google::protobuf::Message &msg,
                                                   int field);

/// One input of torch.export's graph signature.
struct SignatureInput {
  std::string kind;   ///< PARAMETER, BUFFER, CONSTANT_TENSOR, USER_INPUT, ...
  std::string target; ///< the module's FQN ("transformer.h.0.ln_1.weight")
};

/// The dynamo exporter's graph signature: placeholder name -> input. Empty
/// when the graph has none (TorchScript exports, hand-written models).
std::map<std::string, SignatureInput> graphSignature(const onnx::GraphProto &graph);

/// Initializers that onnxscript's optimizer folded (value_info
/// pkg.onnxscript.optimizer.folded_from): name -> the values they came from.
std::map<std::string, std::vector<std::string>> foldedSources(const onnx::GraphProto &graph);

/// The strings inside a Python list literal "['a', 'b']" (folded_from).
std::vector<std::string> pythonStringList(const std::string &text);

} // namespace tc::onnx_import

#endif // TC_FRONTENDS_ONNX_METADATA_H
