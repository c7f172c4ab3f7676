//===- Importer.cpp - ONNX ModelProto -> func.func @infer of tc ops -------===//
//
// The driver of the ONNX frontend: reads and checks the model, creates the
// function (graph inputs -> arguments, initializers -> tc.parameter or
// tc.constant), imports the nodes in topological order through the handler
// table, and returns the graph outputs. NodeContext, the helpers every
// handler uses, is in NodeContext.cpp.
//
// Order of the checks, so that the error a user sees is the most specific:
//   1. parse (size limit, malformed protobuf / text)
//   2. tc's structural checks: opset imports, unique names, every input
//      defined, topological order (sorting when needed, cycles reported)
//   3. initializer data (sizes, external data paths)
//   4. libonnx's checker, where 1.12 understands the model (IR <= 8, opsets
//      it knows), on the sorted graph
//   5. import, node by node
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/ImporterDriver.h"

#include "dialects/tc/Eval/Types.h"
#include "frontends/onnx/Metadata.h"
#include "frontends/onnx/OnnxLib.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/FormatVariadic.h"

#include <google/protobuf/unknown_field_set.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

using namespace mlir;

namespace tc::onnx_import {

DiagnosticCapture::DiagnosticCapture(MLIRContext *ctx)
    : handler_(ctx, [this](Diagnostic &d) {
        if (!messages_.empty())
          messages_ += "; ";
        messages_ += d.str();
        return success();
      }) {}

const std::vector<HandlerEntry> &handlerTable() {
  static const std::vector<HandlerEntry> table = [] {
    std::vector<HandlerEntry> t;
    registerElementwiseHandlers(t);
    registerReduceHandlers(t);
    registerShapeHandlers(t);
    registerNnHandlers(t);
    registerLossHandlers(t);
    registerSequenceHandlers(t);
    registerQuantizeHandlers(t);
    return t;
  }();
  return table;
}

namespace {
std::string canonicalDomain(const std::string &d) { return d == "ai.onnx" ? "" : d; }
std::string domainLabel(const std::string &d) { return d.empty() ? "ai.onnx" : d; }
std::string nodeLabel(const onnx::NodeProto &n) {
  if (!n.name().empty())
    return n.name();
  if (n.output_size() > 0 && !n.output(0).empty())
    return n.output(0);
  return n.op_type();
}
/// Up to four items, then "and N more".
std::string listItems(const std::vector<std::string> &names) {
  std::string list;
  for (size_t i = 0; i < names.size() && i < 4; ++i)
    list += (i ? ", " : "") + names[i];
  if (names.size() > 4)
    list += " and " + std::to_string(names.size() - 4) + " more";
  return list;
}

} // namespace

std::string joinShape(ArrayRef<int64_t> s) {
  return llvm::join(llvm::map_range(s, [](int64_t d) { return std::to_string(d); }), "x");
}
std::string tooLarge(ArrayRef<int64_t> s) {
  return "shape " + joinShape(s) + " has more than 2^40 elements";
}

std::string shapeStr(ArrayRef<int64_t> s) {
  return "[" + llvm::join(llvm::map_range(s, [](int64_t d) { return std::to_string(d); }), ", ") +
         "]";
}

int64_t boundedNumElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n) || n > kMaxTensorElements)
      return -1;
  return n;
}

//===----------------------------------------------------------------------===//
// Reading and checking
//===----------------------------------------------------------------------===//

LogicalResult Importer::checkModelFile() {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path_, ec))
    return fail("cannot open '" + path_ + "': no such file");
  if (!fs::is_regular_file(path_, ec))
    return fail("'" + path_ + "' is not a regular file (a FIFO, device or directory)");
  return success();
}

LogicalResult Importer::readModel(onnx::ModelProto &model) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (failed(checkModelFile()))
    return failure();
  uintmax_t size = fs::file_size(path_, ec);
  if (ec)
    return fail("cannot read '" + path_ + "'");
  bool text = llvm::StringRef(path_).ends_with(".onnxtxt");
  if (!text && size > (uintmax_t)INT_MAX)
    return fail("'" + path_ + "' is " + std::to_string(size) +
                " bytes; protobuf cannot parse messages of 2 GiB or more (store the "
                "weights as external data)");
  std::ifstream in(path_, std::ios::binary);
  std::string bytes(size, '\0');
  if (size > 0)
    in.read(bytes.data(), size);
  if (!in)
    return fail("cannot read '" + path_ + "'");
  std::string err = text ? lib::parseTextModel(bytes, model)
                         : lib::parseBinaryModel(bytes.data(), bytes.size(), model);
  if (!err.empty())
    return fail("'" + path_ + "' is not a valid ONNX model: " + err);
  if (!model.has_graph())
    return fail("'" + path_ + "' is not a valid ONNX model: it has no graph");
  return success();
}

LogicalResult Importer::checkOpsets(const onnx::ModelProto &model) {
  if (model.opset_import_size() == 0)
    return fail("the model has no opset_import");
  for (const auto &fn : model.functions())
    functions_[{fn.domain(), fn.name()}] = &fn;
  for (const auto &imp : model.opset_import()) {
    std::string d = canonicalDomain(imp.domain());
    int64_t v = imp.version();
    if (d.empty()) {
      if (v < 1 || v > kMaxOnnxOpset)
        return fail("unsupported opset ai.onnx version " + std::to_string(v) +
                    " (tc handles 1.." + std::to_string(kMaxOnnxOpset) + ")");
    } else if (d == "ai.onnx.ml") {
      if (v < 1 || v > kMaxOnnxMlOpset)
        return fail("unsupported opset ai.onnx.ml version " + std::to_string(v));
    }
    // Other domains (model-local function libraries such as the dynamo
    // exporter's "pkg.onnxscript.torch_lib") are accepted here; a node that
    // uses a domain tc does not know fails as an unsupported op.
    modelOpsets_[d] = v;
  }
  if (!modelOpsets_.count(""))
    modelOpsets_[""] = 1; // ONNX: an absent default domain means opset 1
  return success();
}

LogicalResult Importer::checkAndSortGraph(onnx::GraphProto &graph) {
  std::set<std::string> defined;
  for (const auto &init : graph.initializer()) {
    if (init.name().empty())
      return fail("an initializer has no name");
    if (!defined.insert(init.name()).second)
      return fail("initializer '" + init.name() + "' is defined twice");
  }
  std::set<std::string> inputNames;
  for (const auto &in : graph.input()) {
    if (!inputNames.insert(in.name()).second)
      return fail("graph input '" + in.name() + "' is listed twice");
    defined.insert(in.name()); // old-style models also list initializers here
  }
  std::map<std::string, int> producer;
  for (int i = 0; i < graph.node_size(); ++i)
    for (const auto &out : graph.node(i).output()) {
      if (out.empty())
        continue;
      if (defined.count(out) || !producer.emplace(out, i).second)
        return fail("value '" + out + "' (output of node '" + nodeLabel(graph.node(i)) +
                    "') is defined more than once");
    }
  bool sorted = true;
  for (int i = 0; i < graph.node_size(); ++i)
    for (const auto &in : graph.node(i).input()) {
      if (in.empty() || defined.count(in))
        continue;
      auto it = producer.find(in);
      if (it == producer.end())
        return fail("input '" + in + "' of node '" + nodeLabel(graph.node(i)) +
                    "' is not produced by any node, initializer or graph input");
      if (it->second >= i)
        sorted = false;
    }
  if (graph.output_size() == 0)
    return fail("the graph has no outputs");
  std::set<std::string> outputNames;
  for (const auto &out : graph.output()) {
    if (!outputNames.insert(out.name()).second)
      return fail("graph output '" + out.name() + "' is listed twice");
    if (!defined.count(out.name()) && !producer.count(out.name()))
      return fail("graph output '" + out.name() + "' is not produced by any node");
  }
  if (sorted)
    return success();

  // Kahn's algorithm, keeping the original order among ready nodes.
  int n = graph.node_size();
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> users(n);
  for (int i = 0; i < n; ++i)
    for (const auto &in : graph.node(i).input()) {
      if (in.empty() || defined.count(in))
        continue;
      int p = producer[in];
      users[p].push_back(i);
      ++pending[i];
    }
  std::set<int> ready;
  for (int i = 0; i < n; ++i)
    if (pending[i] == 0)
      ready.insert(i);
  std::vector<int> order;
  while (!ready.empty()) {
    int i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(i);
    for (int u : users[i])
      if (--pending[u] == 0)
        ready.insert(u);
  }
  if ((int)order.size() != n) {
    for (int i = 0; i < n; ++i)
      if (pending[i] > 0)
        return fail("graph has a cycle through node '" + nodeLabel(graph.node(i)) + "'");
  }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> sortedNodes;
  for (int i : order)
    *sortedNodes.Add() = graph.node(i);
  graph.mutable_node()->Swap(&sortedNodes);
  return success();
}

void Importer::classifyInitializers(const onnx::GraphProto &graph) {
  std::set<std::string> initNames;
  for (const auto &init : graph.initializer())
    initNames.insert(init.name());
  // A buffer registered with persistent=False (rotary inv_freq) is not in
  // torch's state_dict, and a folded constant is no torch tensor at all:
  // both get tc.not_in_state_dict, so that checkpoints leave them out and
  // load_model(strict=True) reads them back.
  std::map<std::string, std::string> kinds; // FQN or initializer name -> kind
  for (const auto &[placeholder, in] : graphSignature(graph))
    kinds[in.target] = in.kind;
  for (const auto &vi : graph.value_info()) {
    if (!initNames.count(vi.name()))
      continue;
    auto md = unknownMetadata(vi, kValueInfoMetadataField);
    auto it = md.find("pkg.torch.export.graph_signature.InputSpec.kind");
    if (it != md.end())
      kinds[vi.name()] = it->second;
    auto pe = md.find("pkg.torch.export.graph_signature.InputSpec.persistent");
    if (pe != md.end() && pe->second == "False")
      nonPersistent_.insert(vi.name());
  }
  std::map<std::string, std::vector<std::string>> foldedFrom = foldedSources(graph);
  for (const auto &[name, kind] : kinds)
    if (kind == "BUFFER" || kind == "CONSTANT_TENSOR")
      buffers_.insert(name);
  if (!kinds.empty()) // without a signature, sources cannot be told apart
    for (const auto &[name, src] : foldedFrom)
      if (!kinds.count(name) && llvm::none_of(src, [&](const std::string &s) {
            auto k = kinds.find(s);
            return k != kinds.end() && k->second == "PARAMETER";
          }))
        folded_.insert(name);
}

bool Importer::isParam(RankedTensorType type) {
  return isa<FloatType>(type.getElementType()) && type.getRank() >= 1 &&
         type.getNumElements() >= 1;
}

bool Importer::readsData(const onnx::TensorProto &init, RankedTensorType type) const {
  // Without weights, buffers and folded constants (no torch weights) are
  // still read when their data is there: --init-params must not draw them
  // and a checkpoint need not hold them.
  bool buffer = buffers_.count(init.name()) || folded_.count(init.name());
  return opts_.loadWeights || !isParam(type) || buffer;
}

LogicalResult Importer::feedInputs(const InputFeed &feed) {
  if (failed(checkModelFile())) // never open a FIFO: it would block
    return failure();
  {
    auto buf = llvm::MemoryBuffer::getFile(path_, /*IsText=*/false,
                                           /*RequiresNullTerminator=*/false);
    if (!buf)
      return fail("cannot read '" + path_ + "': " + buf.getError().message());
    llvm::StringRef bytes = (*buf)->getBuffer();
    feed("model", bytes);
    // A tensor stored outside the model names its file under the key
    // "location" (ONNX's external_data): without those bytes the model's
    // are all the import reads, and parsing them (500 MB for a TorchScript
    // export with its weights inside) is not needed.
    static constexpr char kLocation[] = "location";
    if (!memmem(bytes.data(), bytes.size(), kLocation, sizeof(kLocation) - 1))
      return success();
  }
  onnx::ModelProto model;
  if (failed(readModel(model)))
    return failure();
  restoreMergedParameters(*model.mutable_graph(), !opts_.restoreMerged);
  classifyInitializers(model.graph());
  // What the model file holds is in its bytes. With weights, the import
  // reads every external tensor: each external file is fed whole (mapped, not
  // copied) with the ranges that point into it. Without weights, each tensor
  // the import still reads is fed as it reads it (an unreadable one as its
  // error: the import fails on it, and a failed compile is never cached).
  std::set<std::string> files;
  auto feedTensor = [&](const onnx::TensorProto &t) {
    if (opts_.loadWeights) {
      std::string ranges;
      for (const auto &kv : t.external_data()) {
        ranges += kv.key() + "=" + kv.value() + ";";
        if (kv.key() == "location")
          files.insert(kv.value());
      }
      return feed("external " + t.name(), ranges);
    }
    std::string err;
    auto host = readTensorProto(&ctx_, t, modelDir_, &err);
    if (failed(host))
      return feed("unreadable " + t.name(), err);
    feed("tensor " + t.name(),
         llvm::StringRef(reinterpret_cast<const char *>(host->data.data()), host->data.size()));
  };
  for (const auto &init : model.graph().initializer()) {
    if (init.data_location() != onnx::TensorProto::EXTERNAL)
      continue;
    std::string err;
    auto type = tensorProtoType(&ctx_, init, &err);
    if (failed(type) || readsData(init, *type))
      feedTensor(init);
  }
  std::function<void(const onnx::GraphProto &)> walk = [&](const onnx::GraphProto &g) {
    for (const auto &node : g.node())
      for (const auto &a : node.attribute()) {
        if (a.has_t() && a.t().data_location() == onnx::TensorProto::EXTERNAL)
          feedTensor(a.t());
        for (const auto &t : a.tensors())
          if (t.data_location() == onnx::TensorProto::EXTERNAL)
            feedTensor(t);
        if (a.has_g())
          walk(a.g());
        for (const auto &sub : a.graphs())
          walk(sub);
      }
  };
  walk(model.graph());
  for (const std::string &f : files) { // std::set: in a fixed order
    auto buf = llvm::MemoryBuffer::getFile(modelDir_ + "/" + f, /*IsText=*/false,
                                           /*RequiresNullTerminator=*/false);
    feed("file " + f, buf ? (*buf)->getBuffer() : llvm::StringRef("(absent)"));
  }
  return success();
}

LogicalResult Importer::readInitializers(const onnx::GraphProto &graph) {
  for (const auto &init : graph.initializer()) {
    auto type = tensorProtoType(&ctx_, init, &error_);
    if (failed(type))
      return failure();
    if (init.data_type() == 8 /*STRING*/)
      return fail("tensor '" + init.name() + "' has unsupported element type STRING");
    initTypes_[init.name()] = *type;
    if (!readsData(init, *type))
      continue;
    std::string saved = error_;
    auto host = readTensorProto(&ctx_, init, modelDir_, &error_);
    if (failed(host) && isParam(*type) && !opts_.loadWeights) {
      error_ = saved; // its data is absent: a weight like the others
      continue;
    }
    if (failed(host)) {
      // Without weights only constants are read: say why this one is needed.
      if (!opts_.loadWeights)
        error_ = "initializer '" + init.name() +
                 "' is a constant (not a model weight), so its data is needed even without "
                 "weights (--no-weights): " + error_;
      return failure();
    }
    initData_[init.name()] = std::move(*host);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Function, inputs, initializers
//===----------------------------------------------------------------------===//

FailureOr<RankedTensorType> Importer::graphInputType(const onnx::ValueInfoProto &vi) {
  const std::string &name = vi.name();
  if (!vi.has_type() || !vi.type().has_tensor_type())
    return fail("graph input '" + name + "' is not a tensor (sequence, map and optional "
                "inputs are unsupported)"),
           failure();
  const auto &tt = vi.type().tensor_type();
  Type elt = elementTypeFromOnnx(&ctx_, tt.elem_type());
  if (!elt)
    return fail("graph input '" + name + "' has unsupported element type " +
                onnxTypeName(tt.elem_type())),
           failure();
  auto override = opts_.inputShapes.find(name);
  if (!tt.has_shape()) {
    if (override == opts_.inputShapes.end())
      return fail("input '" + name + "' has no shape; give it with --input " + name +
                  "=2x16 (its full shape)"),
             failure();
    if (boundedNumElements(override->second) < 0)
      return fail("--input " + name + ": " + tooLarge(override->second)), failure();
    boundInputs_[name] = joinShape(override->second) + " (from --input; the model gives no shape)";
    return RankedTensorType::get(override->second, elt);
  }
  const auto &shape = tt.shape();
  SmallVector<int64_t> dims;
  if (override != opts_.inputShapes.end() &&
      (int64_t)override->second.size() != shape.dim_size())
    return fail("--input " + name + "=" + joinShape(override->second) + " has rank " +
                std::to_string(override->second.size()) + " but input '" + name +
                "' has rank " + std::to_string(shape.dim_size())),
           failure();
  std::string how; // which dynamic axes the user's flags set
  for (int d = 0; d < shape.dim_size(); ++d) {
    const auto &dim = shape.dim(d);
    bool isStatic = dim.has_dim_value() && dim.dim_value() >= 0;
    std::string param = !isStatic && dim.has_dim_param() ? dim.dim_param() : "";
    if (!param.empty())
      dimParamNames_.insert(param);
    auto named = param.empty() ? opts_.dimParams.end() : opts_.dimParams.find(param);
    if (named != opts_.dimParams.end())
      usedDimParams_.insert(param);
    std::string axis = "axis " + std::to_string(d) + (param.empty() ? "" : " '" + param + "'");
    if (override != opts_.inputShapes.end()) {
      int64_t want = override->second[d];
      if (want < 0)
        return fail("--input " + name + " axis " + std::to_string(d) + " is negative"),
               failure();
      if (isStatic && dim.dim_value() != want)
        return fail("--input " + name + "=" + joinShape(override->second) +
                    " conflicts with the static shape of input '" + name + "': axis " +
                    std::to_string(d) + " is " + std::to_string(dim.dim_value())),
               failure();
      if (named != opts_.dimParams.end() && named->second != want)
        return fail("--input " + name + "=" + joinShape(override->second) + " sets " + axis +
                    " to " + std::to_string(want) + " but --dim " + param + "=" +
                    std::to_string(named->second)),
               failure();
      if (!isStatic)
        how += (how.empty() ? "" : ", ") + axis + " from --input";
      dims.push_back(want);
      continue;
    }
    if (!isStatic && named != opts_.dimParams.end()) {
      how += (how.empty() ? "" : ", ") + axis + " from --dim " + param + "=" +
             std::to_string(named->second);
      dims.push_back(named->second);
      continue;
    }
    if (!isStatic) {
      std::string example;
      for (int e = 0; e < shape.dim_size(); ++e) {
        const auto &de = shape.dim(e);
        example += (e ? "x" : "") + (de.has_dim_value() ? std::to_string(de.dim_value())
                                                         : std::string(e == 0 ? "2" : "16"));
      }
      return fail("input '" + name + "' axis " + std::to_string(d) +
                  (param.empty() ? "" : " ('" + param + "')") + " is dynamic; fix it with " +
                  (param.empty() ? "" : "--dim " + param + "=" + (d == 0 ? "2" : "16") + " or ") +
                  "--input " + name + "=" + example),
             failure();
    }
    dims.push_back(dim.dim_value());
  }
  if (boundedNumElements(dims) < 0)
    return fail("graph input '" + name + "': " + tooLarge(dims)), failure();
  if (!how.empty())
    boundInputs_[name] = joinShape(dims) + " (" + how + ")";
  return RankedTensorType::get(dims, elt);
}

LogicalResult Importer::createFunction(const onnx::GraphProto &graph) {
  for (const auto &[name, shape] : opts_.inputShapes) {
    bool found = llvm::any_of(graph.input(), [&](const onnx::ValueInfoProto &vi) {
      return vi.name() == name;
    });
    if (!found || initTypes_.count(name)) {
      std::string inputs;
      for (const auto &vi : graph.input())
        if (!initTypes_.count(vi.name()))
          inputs += (inputs.empty() ? "'" : ", '") + vi.name() + "'";
      return fail("--input names '" + name + "', which is not a graph input (the graph's inputs: " +
                  (inputs.empty() ? std::string("none") : inputs) + ")");
    }
  }
  for (const auto &[name, value] : opts_.constantInputs) {
    bool found = llvm::any_of(graph.input(), [&](const onnx::ValueInfoProto &vi) {
      return vi.name() == name;
    });
    if (!found)
      return fail("constant input '" + name + "' is not a graph input");
  }

  Location fileLoc = FileLineColLoc::get(&ctx_, path_, 0, 0);
  module_ = ModuleOp::create(fileLoc);
  builder_.setInsertionPointToEnd(module_->getBody());
  func_ = func::FuncOp::create(builder_, NameLoc::get(StringAttr::get(&ctx_, graph.name()), fileLoc),
                               "infer", builder_.getFunctionType({}, {}));
  Block *body = func_.addEntryBlock();
  builder_.setInsertionPointToEnd(body);

  // Graph inputs: arguments, or constants when bound by the caller.
  SmallVector<Type> argTypes;
  SmallVector<Attribute> argAttrs;
  for (const auto &vi : graph.input()) {
    if (initTypes_.count(vi.name()))
      continue; // an initializer listed as input (IR < 4 style)
    auto type = graphInputType(vi);
    if (failed(type)) {
      // A bound constant input needs no shape from the model.
      auto c = opts_.constantInputs.find(vi.name());
      if (c == opts_.constantInputs.end())
        return failure();
      error_.clear();
      Type elt = elementTypeFromOnnx(&ctx_, vi.type().tensor_type().elem_type());
      if (!elt)
        return fail("graph input '" + vi.name() + "' has an unsupported type");
      type = RankedTensorType::get(c->second.type.shape, elt);
    }
    Location loc = NameLoc::get(StringAttr::get(&ctx_, vi.name()), fileLoc);
    auto c = opts_.constantInputs.find(vi.name());
    if (c != opts_.constantInputs.end()) {
      const rt::HostTensor &t = c->second;
      auto dt = tc::toDType(type->getElementType());
      if (!dt || *dt != t.type.dtype)
        return fail("constant input '" + vi.name() + "' has dtype " +
                    rt::dtypeName(t.type.dtype) + " but the model declares " +
                    onnxTypeName(vi.type().tensor_type().elem_type()));
      RankedTensorType ct = RankedTensorType::get(t.type.shape, type->getElementType());
      if (ct.getRank() != type->getRank())
        return fail("constant input '" + vi.name() + "' has the wrong rank");
      for (int64_t d = 0; d < ct.getRank(); ++d) {
        const auto &dim = vi.type().tensor_type().shape().dim(d);
        if (dim.has_dim_value() && dim.dim_value() != ct.getDimSize(d))
          return fail("constant input '" + vi.name() + "' shape " + joinShape(ct.getShape()) +
                      " does not match the model's");
      }
      int64_t eb = t.type.dtype == rt::DType::I1 ? 1 : (ct.getElementTypeBitWidth() + 7) / 8;
      if ((int64_t)t.data.size() != ct.getNumElements() * eb)
        return fail("constant input '" + vi.name() + "' has " + std::to_string(t.data.size()) +
                    " bytes, its shape needs " + std::to_string(ct.getNumElements() * eb));
      Value v = tc::ConstantOp::create(builder_, loc, tc::fromHostTensor(ct, t));
      bind(vi.name(), OnnxValue{v});
      continue;
    }
    BlockArgument arg = body->addArgument(*type, loc);
    argTypes.push_back(*type);
    argNames_.push_back(vi.name());
    bind(vi.name(), OnnxValue{arg});
    argAttrs.push_back(builder_.getDictionaryAttr(
        builder_.getNamedAttr("tc.name", builder_.getStringAttr(vi.name()))));
  }
  func_.setType(builder_.getFunctionType(argTypes, {}));
  func_.setAllArgAttrs(argAttrs);
  for (const auto &[param, value] : opts_.dimParams) {
    if (usedDimParams_.count(param))
      continue;
    std::string names;
    for (const std::string &n : dimParamNames_)
      names += (names.empty() ? "'" : ", '") + n + "'";
    return fail("--dim " + param + "=" + std::to_string(value) +
                ": no dynamic input axis is named '" + param + "' (the named ones: " +
                (names.empty() ? std::string("none") : names) + ")");
  }

  // Initializers: float tensors with elements are trainable parameters; the
  // rest (integer/bool tables, scalars) are constants.
  // Tied weights that an exporter split (see transposedCopyOf) become a
  // tc.transpose of the one parameter, so that training keeps them tied.
  std::vector<std::pair<std::string, Value>> matrices; // 2-D parameters so far
  // Buffers: torch.export's graph signature, which the dynamo exporter writes
  // into the graph's metadata ("NAME: KIND target='FQN'" lines) and into each
  // initializer's value_info (InputSpec.kind), says which initializers were
  // module buffers (rotary inv_freq, ...): kind BUFFER or CONSTANT_TENSOR.
  // Likewise a constant that onnxscript's optimizer (dynamo, optimize=True)
  // folded (value_info pkg.onnxscript.optimizer.folded_from = "['a', ...]")
  // from no parameter at all: a static export's causal mask, rotary cos/sin
  // tables (from inv_freq), scalars. Both get the tc.buffer attribute:
  // tc-mark-trainable leaves them frozen unless --trainable names them, as
  // torch.optim never sees them. A constant folded from a parameter
  // (Transpose(W), the rows of a position embedding) stays trainable.
  std::vector<std::string> bufferParams, foldedParams;
  size_t restoredTransposes = 0;
  for (const auto &init : graph.initializer()) {
    RankedTensorType type = initTypes_[init.name()];
    Location loc = NameLoc::get(StringAttr::get(&ctx_, init.name()), fileLoc);
    bool isParam = isa<FloatType>(type.getElementType()) && type.getRank() >= 1 &&
                   type.getNumElements() >= 1;
    Value v;
    auto restored = transposedParams_.find(init.name());
    if (isParam && restored != transposedParams_.end()) {
      // W^T folded by the exporter: W is the parameter (torch's name and
      // layout), the folded constant its transpose.
      const std::string &w = restored->second;
      auto wType = RankedTensorType::get({type.getDimSize(1), type.getDimSize(0)},
                                         type.getElementType());
      auto data = initData_.find(init.name());
      if (data != initData_.end()) {
        rt::HostTensor t = data->second;
        int64_t rows = type.getDimSize(0), cols = type.getDimSize(1);
        size_t eb = t.data.size() / (size_t)(rows * cols);
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < cols; ++j)
            std::memcpy(t.data.data() + (size_t)(j * rows + i) * eb,
                        data->second.data.data() + (size_t)(i * cols + j) * eb, eb);
        t.type.shape = {cols, rows};
        initData_[w] = std::move(t);
        initData_.erase(init.name());
      }
      Location wLoc = NameLoc::get(StringAttr::get(&ctx_, w), fileLoc);
      Value param = tc::ParameterOp::create(builder_, wLoc, wType, builder_.getStringAttr(w),
                                            builder_.getUnitAttr());
      matrices.emplace_back(w, param);
      exportInits_.push_back({init.name(), w, true});
      v = tc::TransposeOp::create(builder_, loc, type, param, builder_.getDenseI64ArrayAttr({1, 0}));
      ++restoredTransposes;
    } else if (isParam) {
      if (type.getRank() == 2 && opts_.tieTransposedCopies && opts_.loadWeights) {
        for (auto &[name, param] : matrices) {
          if (!transposedCopyOf(init.name(), name))
            continue;
          v = tc::TransposeOp::create(builder_, loc, type, param,
                                      builder_.getDenseI64ArrayAttr({1, 0}));
          notes_.push_back("initializer '" + init.name() + "' holds the transpose of '" + name +
                           "' (a tied weight the exporter stored twice): using '" + name +
                           "' for both, so that they stay tied in training (--no-tie keeps "
                           "two parameters)");
          initData_.erase(init.name());
          exportInits_.push_back({init.name(), name, true});
          break;
        }
      }
      if (!v) {
        v = tc::ParameterOp::create(builder_, loc, type, builder_.getStringAttr(init.name()),
                                    builder_.getUnitAttr());
        exportInits_.push_back({init.name(), init.name(), false});
        if (buffers_.count(init.name()) || folded_.count(init.name())) {
          v.getDefiningOp()->setAttr("tc.buffer", builder_.getUnitAttr());
          (buffers_.count(init.name()) ? bufferParams : foldedParams).push_back(init.name());
        }
        if (nonPersistent_.count(init.name()) || folded_.count(init.name()))
          v.getDefiningOp()->setAttr("tc.not_in_state_dict", builder_.getUnitAttr());
        if (type.getRank() == 2)
          matrices.emplace_back(init.name(), v);
      }
    } else {
      v = tc::ConstantOp::create(builder_, loc, tc::fromHostTensor(type, initData_[init.name()]));
    }
    bind(init.name(), OnnxValue{v});
  }
  auto listNames = [](const std::vector<std::string> &names) {
    std::vector<std::string> quoted;
    for (const std::string &n : names)
      quoted.push_back("'" + n + "'");
    return listItems(quoted);
  };
  if (restoredTransposes > 0)
    notes_.push_back(std::to_string(restoredTransposes) + " weight" +
                     (restoredTransposes == 1 ? " was" : "s were") +
                     " stored transposed by the exporter's optimizer (folded Transpose of a "
                     "Linear weight): restored as the torch parameter" +
                     (restoredTransposes == 1 ? "" : "s") + " under " +
                     (restoredTransposes == 1 ? "its" : "their") + " own name and layout");
  bool one = bufferParams.size() == 1;
  if (!bufferParams.empty())
    notes_.push_back(std::to_string(bufferParams.size()) + " initializer" +
                     (one ? " is a torch buffer" : "s are torch buffers") +
                     " in the exporter's graph signature (" + listNames(bufferParams) +
                     "): not trainable unless --trainable names " + (one ? "it" : "them"));
  one = foldedParams.size() == 1;
  if (!foldedParams.empty())
    notes_.push_back(std::to_string(foldedParams.size()) + " initializer" +
                     (one ? " is a constant" : "s are constants") +
                     " the exporter folded from no parameter (" +
                     listNames(foldedParams) + "): not trainable unless --trainable names " +
                     (one ? "it" : "them"));
  return success();
}

bool Importer::transposedCopyOf(const std::string &b, const std::string &a) const {
  auto ta = initTypes_.find(a), tb = initTypes_.find(b);
  auto da = initData_.find(a), db = initData_.find(b);
  if (ta == initTypes_.end() || tb == initTypes_.end() || da == initData_.end() ||
      db == initData_.end())
    return false;
  RankedTensorType A = ta->second, B = tb->second;
  if (A.getElementType() != B.getElementType() || A.getRank() != 2 || B.getRank() != 2 ||
      A.getDimSize(0) != B.getDimSize(1) || A.getDimSize(1) != B.getDimSize(0))
    return false;
  int64_t rows = A.getDimSize(0), cols = A.getDimSize(1);
  const std::vector<uint8_t> &x = da->second.data, &y = db->second.data;
  if (rows * cols == 0 || x.size() != y.size() || x.size() % (size_t)(rows * cols) != 0)
    return false;
  size_t eb = x.size() / (size_t)(rows * cols);
  auto at = [&](const std::vector<uint8_t> &d, int64_t i) { return d.data() + (size_t)i * eb; };
  // B[j][i] == A[i][j] for all i, j (bitwise), checked column by column of A
  // so that a mismatch usually shows in the first few elements.
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t i = 0; i < rows; ++i)
      if (std::memcmp(at(y, j * rows + i), at(x, i * cols + j), eb) != 0)
        return false;
  // Not a coincidence of simple values: A must not be its own transpose
  // (then B would just be an equal copy, e.g. two identity-initialised
  // weights) and must hold at least two different values (all-zeros, ones).
  bool symmetric = rows == cols, distinct = false;
  for (int64_t i = 0; i < rows && (symmetric || !distinct); ++i)
    for (int64_t j = 0; j < cols; ++j) {
      if (symmetric && std::memcmp(at(x, i * cols + j), at(x, j * cols + i), eb) != 0)
        symmetric = false;
      if (!distinct && std::memcmp(at(x, i * cols + j), at(x, 0), eb) != 0)
        distinct = true;
    }
  return distinct && !symmetric;
}

void Importer::reportMergedParameters(const MergedParameters &m) {
  if (!m.merged.empty()) {
    std::vector<std::string> items;
    for (const auto &[param, kept] : m.merged)
      items.push_back("'" + param + "' (merged into '" + kept + "')");
    std::string how = llvm::join(m.kinds, " and ");
    size_t n = m.merged.size();
    std::string count = std::to_string(n) + " parameter" + (n == 1 ? "" : "s");
    if (opts_.restoreMerged)
      notes_.push_back("restored " + count + " that the exporter merged with an equal-valued "
                       "one (" + how + "): " + listItems(items) + "; each is trained on its "
                       "own, as in PyTorch (--keep-merged trains them as one shared tensor)");
    else
      notes_.push_back(count + (n == 1 ? " is" : " are") + " merged by the exporter with an "
                       "equal-valued one (" + how + "): " + listItems(items) + "; trained as "
                       "one shared tensor (--keep-merged)");
  }
  if (!m.unrestorable.empty())
    notes_.push_back(std::to_string(m.unrestorable.size()) + " merged parameter" +
                     (m.unrestorable.size() == 1 ? "" : "s") + " cannot be restored under "
                     "its own name, because the kept copy is a constant folded from another "
                     "parameter: " + listItems(m.unrestorable) + "; trained shared (export with "
                     "optimize=False to train them separately)");
  if (!m.dropped.empty()) {
    std::vector<std::string> items;
    for (const std::string &p : m.dropped)
      items.push_back("'" + p + "'");
    notes_.push_back(std::to_string(m.dropped.size()) + " parameter" +
                     (m.dropped.size() == 1 ? " of the torch module is" : "s of the torch module are") +
                     " not in the model: the exporter's optimizer removed " +
                     (m.dropped.size() == 1 ? "its consumer" : "their consumers") +
                     " as a no-op (a zero-valued bias or scale): " + listItems(items) +
                     "; the model computes the same, but cannot train " +
                     (m.dropped.size() == 1 ? "it" : "them"));
  }
}

std::vector<std::string> Importer::graphInputsOf(Value v) {
  std::vector<std::string> names;
  llvm::SetVector<Value> seen;
  SmallVector<Value> work{v};
  while (!work.empty()) {
    Value cur = work.pop_back_val();
    if (!seen.insert(cur))
      continue;
    if (auto arg = dyn_cast<BlockArgument>(cur)) {
      if (arg.getArgNumber() < argNames_.size())
        names.push_back(argNames_[arg.getArgNumber()]);
      continue;
    }
    if (Operation *def = cur.getDefiningOp())
      for (Value o : def->getOperands())
        work.push_back(o);
  }
  return names;
}

//===----------------------------------------------------------------------===//
// Nodes
//===----------------------------------------------------------------------===//

LogicalResult Importer::importNode(const onnx::NodeProto &node, const OpsetMap &opsets,
                                   const std::string &namePrefix) {
  std::string domain = canonicalDomain(node.domain());
  std::string label = namePrefix + nodeLabel(node);
  std::vector<const OnnxValue *> inputs;
  for (const auto &in : node.input()) {
    if (in.empty()) {
      inputs.push_back(nullptr);
      continue;
    }
    auto it = scope_->find(in);
    if (it == scope_->end()) {
      // A function's formal input left unbound by the caller (an omitted
      // optional input) reads as absent.
      if (inlineDepth_ > 0 && scope_->count("\x01" + in)) {
        inputs.push_back(nullptr);
        continue;
      }
      return fail("input '" + in + "' of node '" + label + "' is not defined");
    }
    inputs.push_back(&it->second);
  }

  auto fnIt = functions_.find({node.domain(), node.op_type()});
  if (fnIt != functions_.end())
    return inlineFunction(node, *fnIt->second, inputs, label + "/");

  auto opsetIt = opsets.find(domain);
  int64_t opset = opsetIt == opsets.end() ? -1 : opsetIt->second;
  const HandlerEntry *handler = nullptr;
  for (const auto &e : handlerTable())
    if (e.domain == domain && e.opType == node.op_type() && opset >= e.minOpset &&
        opset <= e.maxOpset) {
      handler = &e;
      break;
    }
  if (!handler)
    return fail("unsupported op: node '" + label + "' op_type '" + node.op_type() +
                "' domain '" + domainLabel(domain) + "' opset " + std::to_string(opset));

  Location loc = NameLoc::get(StringAttr::get(&ctx_, label),
                              FileLineColLoc::get(&ctx_, path_, 0, 0));
  onnx::NodeProto named = node;
  named.set_name(label);
  // Extra inputs / outputs of a fixed-arity op (the checker catches these,
  // but not for IR >= 9 models, which it does not read).
  int maxIn = 0, maxOut = 0;
  if (lib::schemaArity(domain, node.op_type(), (int)opset, &maxIn, &maxOut)) {
    if (node.input_size() > maxIn)
      return fail("node '" + label + "' (" + node.op_type() + ") has " +
                  std::to_string(node.input_size()) + " inputs; opset " + std::to_string(opset) +
                  " allows at most " + std::to_string(maxIn));
    if (node.output_size() > maxOut)
      return fail("node '" + label + "' (" + node.op_type() + ") has " +
                  std::to_string(node.output_size()) + " outputs; opset " + std::to_string(opset) +
                  " allows at most " + std::to_string(maxOut));
  }
  {
    std::set<std::string> seen;
    for (const auto &a : node.attribute())
      if (!seen.insert(a.name()).second)
        return fail("node '" + label + "' (" + node.op_type() + ") has attribute '" + a.name() +
                    "' twice");
  }
  NodeContext nc(*this, named, opset, loc, std::move(inputs));
  LogicalResult handled = handler->fn(nc);
  if (!nc.attrTypeError().empty()) {
    error_.clear(); // the attribute is the cause of whatever else failed
    return fail(nc.describe() + ": " + nc.attrTypeError());
  }
  if (failed(handled)) {
    // A node that fails on shapes the user set is reported at those inputs:
    // the export fixed a size inside the graph that they do not fit.
    if (!boundInputs_.empty() && !error_.empty() &&
        error_.rfind(kNeedsConstantInputPrefix, 0) != 0) {
      std::set<std::string> from;
      for (size_t i = 0; i < nc.numInputs(); ++i)
        if (const OnnxValue *in = nc.inputEntry(i); in && in->value)
          for (const std::string &g : graphInputsOf(in->value))
            if (boundInputs_.count(g))
              from.insert(g);
      if (!from.empty()) {
        std::string what;
        for (const std::string &g : from)
          what += (what.empty() ? "" : "; ") + ("input '" + g + "' is " + boundInputs_[g]);
        error_ = what + ", and with " + (from.size() > 1 ? "these shapes " : "this shape ") +
                 error_ +
                 " (where the export fixed sizes inside the graph, compile with the shape the "
                 "model was exported with, or re-export it with those axes dynamic)";
      }
    }
    return fail(nc.describe() + ": import failed");
  }
  for (int i = 0; i < node.output_size(); ++i)
    if (!node.output(i).empty() && !scope_->count(node.output(i)))
      return fail(nc.describe() + ": output #" + std::to_string(i) + " ('" + node.output(i) +
                  "') is not supported by tc's importer");
  return success();
}

LogicalResult Importer::inlineFunction(const onnx::NodeProto &node,
                                       const onnx::FunctionProto &fn,
                                       std::vector<const OnnxValue *> inputs,
                                       const std::string &namePrefix) {
  if (inlineDepth_ > 32)
    return fail("model-local function '" + fn.name() + "' is nested too deeply (recursive?)");
  Scope inner;
  for (int i = 0; i < fn.input_size(); ++i) {
    if (i < (int)inputs.size() && inputs[i])
      inner[fn.input(i)] = *inputs[i];
    else
      inner["\x01" + fn.input(i)] = OnnxValue{}; // marks an omitted optional input
  }
  OpsetMap opsets = modelOpsets_;
  for (const auto &imp : fn.opset_import())
    opsets[canonicalDomain(imp.domain())] = imp.version();
  std::map<std::string, const onnx::AttributeProto *> callerAttrs;
  for (const auto &a : node.attribute())
    callerAttrs[a.name()] = &a;

  Scope *outer = scope_;
  scope_ = &inner;
  ++inlineDepth_;
  LogicalResult result = success();
  for (const auto &inner_node : fn.node()) {
    onnx::NodeProto copy = inner_node;
    // Attribute references (ref_attr_name) take the caller's value or, when
    // the caller does not set it, are dropped (the op's default applies).
    copy.clear_attribute();
    for (const auto &a : inner_node.attribute()) {
      if (a.has_ref_attr_name() && !a.ref_attr_name().empty()) {
        auto it = callerAttrs.find(a.ref_attr_name());
        if (it == callerAttrs.end())
          continue;
        onnx::AttributeProto *b = copy.add_attribute();
        *b = *it->second;
        b->set_name(a.name());
      } else {
        *copy.add_attribute() = a;
      }
    }
    if (failed(importNode(copy, opsets, namePrefix))) {
      result = failure();
      break;
    }
  }
  --inlineDepth_;
  scope_ = outer;
  if (failed(result))
    return failure();
  for (int i = 0; i < node.output_size() && i < fn.output_size(); ++i) {
    if (node.output(i).empty())
      continue;
    auto it = inner.find(fn.output(i));
    if (it == inner.end())
      return fail("model-local function '" + fn.name() + "' does not produce output '" +
                  fn.output(i) + "'");
    bind(node.output(i), it->second);
  }
  return success();
}

LogicalResult Importer::finishFunction(const onnx::GraphProto &graph) {
  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  SmallVector<Attribute> resultAttrs;
  for (const auto &out : graph.output()) {
    auto it = mainScope_.find(out.name());
    if (it == mainScope_.end())
      return fail("graph output '" + out.name() + "' is not defined");
    if (it->second.isSequence)
      return fail("graph output '" + out.name() + "' is a sequence; tc functions return tensors");
    Value v = it->second.value;
    auto type = cast<RankedTensorType>(v.getType());
    // The model's declared type must agree with what tc computed (dims the
    // model leaves symbolic are free).
    if (out.has_type() && out.type().has_tensor_type()) {
      const auto &tt = out.type().tensor_type();
      Type declared = elementTypeFromOnnx(&ctx_, tt.elem_type());
      if (tt.elem_type() != 0 && declared && declared != type.getElementType())
        return fail("graph output '" + out.name() + "' is declared " +
                    onnxTypeName(tt.elem_type()) + " but computes " +
                    llvm::formatv("{0}", type.getElementType()).str());
      if (tt.has_shape()) {
        bool mismatch = tt.shape().dim_size() != type.getRank();
        for (int d = 0; !mismatch && d < tt.shape().dim_size(); ++d)
          if (tt.shape().dim(d).has_dim_value() &&
              tt.shape().dim(d).dim_value() != type.getDimSize(d))
            mismatch = true;
        if (mismatch)
          return fail("graph output '" + out.name() + "' is declared with another shape "
                      "than the computed " + joinShape(type.getShape()));
      }
    }
    results.push_back(v);
    resultTypes.push_back(type);
    resultAttrs.push_back(builder_.getDictionaryAttr(
        builder_.getNamedAttr("tc.name", builder_.getStringAttr(out.name()))));
  }
  func::ReturnOp::create(builder_, func_.getLoc(), results);
  func_.setType(builder_.getFunctionType(func_.getArgumentTypes(), resultTypes));
  func_.setAllResultAttrs(resultAttrs);

  // Drop what the outputs do not use (shape sub-graph leftovers, unused
  // optional outputs, initializers only used for shapes): tc ops are pure.
  Block &body = func_.getBody().front();
  for (Operation *op = body.getTerminator()->getPrevNode(); op;) {
    Operation *prev = op->getPrevNode();
    if (op->use_empty())
      op->erase();
    op = prev;
  }
  return success();
}

std::string Importer::exportModel(onnx::ModelProto model) const {
  std::set<std::string> removed;
  for (const ImportResult::ExportInit &e : exportInits_)
    removed.insert(e.initializer);
  onnx::GraphProto *g = model.mutable_graph();
  auto *inits = g->mutable_initializer();
  inits->erase(std::remove_if(inits->begin(), inits->end(),
                              [&](const onnx::TensorProto &t) { return removed.count(t.name()); }),
               inits->end());
  // What stays is constants: their data goes into the export model itself
  // (an external file's location means nothing beside the export).
  for (onnx::TensorProto &t : *inits) {
    auto data = initData_.find(t.name());
    if (t.data_location() != onnx::TensorProto::EXTERNAL || data == initData_.end() ||
        t.data_type() == 23 /* FLOAT4E2M1: tc unpacks it */)
      continue;
    t.clear_external_data();
    t.clear_data_location();
    t.set_raw_data(std::string(data->second.data.begin(), data->second.data.end()));
  }
  // Older exporters list initializers as graph inputs too; the export's
  // DequantizeLinear / Cast nodes define those names instead.
  auto *ins = g->mutable_input();
  ins->erase(std::remove_if(ins->begin(), ins->end(),
                            [&](const onnx::ValueInfoProto &v) { return removed.count(v.name()); }),
             ins->end());
  // The export declares the default domain at opset 23 or 24 (the runtime
  // appends that opset_import). From 13 on only the Reduce* ops other than
  // ReduceSum changed meaning on the way (opset 18: axes became an input),
  // so those are converted; an older model gets no export model.
  int64_t opset = -1;
  auto *imports = model.mutable_opset_import();
  for (auto it = imports->begin(); it != imports->end();) {
    if (it->domain().empty() || it->domain() == "ai.onnx") {
      opset = it->version();
      it = imports->erase(it);
    } else {
      ++it;
    }
  }
  if (opset < 13)
    return "";
  static const std::set<std::string> reduces = {
      "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
      "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};
  for (onnx::NodeProto &n : *g->mutable_node()) {
    if (opset >= 18 || !n.domain().empty() || !reduces.count(n.op_type()))
      continue;
    auto *attrs = n.mutable_attribute();
    for (auto it = attrs->begin(); it != attrs->end(); ++it) {
      if (it->name() != "axes")
        continue;
      onnx::TensorProto *axes = g->add_initializer();
      axes->set_name(n.output(0) + "__axes");
      axes->set_data_type(onnx::TensorProto::INT64);
      axes->add_dims(it->ints_size());
      for (int64_t a : it->ints())
        axes->add_int64_data(a);
      n.add_input(axes->name());
      attrs->erase(it);
      break;
    }
  }
  return model.SerializeAsString();
}

FailureOr<ImportResult> Importer::run() {
  ctx_.loadDialect<tc::TCDialect, func::FuncDialect>();
  onnx::ModelProto model;
  if (failed(readModel(model)) || failed(checkOpsets(model)) ||
      failed(checkAndSortGraph(*model.mutable_graph())))
    return failure();
  MergedParameters merged = restoreMergedParameters(*model.mutable_graph(), !opts_.restoreMerged);
  reportMergedParameters(merged);
  if (opts_.restoreMerged)
    for (const auto &[folded, param] : merged.transposed)
      transposedParams_[folded] = param;
  classifyInitializers(model.graph());
  if (failed(readInitializers(model.graph())))
    return failure();

  // libonnx 1.12's checker knows IR <= 8 and its own opsets only; for newer
  // models (torch's dynamo exporter: IR 10, opset 18) tc's own checks above
  // and the per-node checks below are all there is.
  bool checkerKnows = model.ir_version() <= 8;
  for (const auto &imp : model.opset_import()) {
    int known = lib::knownOpsetVersion(imp.domain());
    if (known < 0 || imp.version() > known)
      checkerKnows = false;
  }
  // The checker opens external data files, which may be absent without weights.
  if (!opts_.loadWeights)
    for (const auto &init : model.graph().initializer())
      if (init.data_location() == onnx::TensorProto::EXTERNAL)
        checkerKnows = false;
  if (checkerKnows) {
    std::string err = lib::checkModel(model, modelDir_);
    if (!err.empty())
      return fail("the ONNX checker rejects '" + path_ + "': " + err), failure();
  }

  if (failed(createFunction(model.graph())))
    return failure();
  for (const auto &node : model.graph().node())
    if (failed(importNode(node, modelOpsets_, "")))
      return failure();
  if (failed(finishFunction(model.graph())))
    return failure();

  {
    DiagnosticCapture diag(&ctx_);
    if (failed(mlir::verify(*module_)))
      return fail("internal error: the imported module does not verify: " + diag.messages()),
             failure();
  }

  ImportResult result;
  result.exportModel = exportModel(std::move(model)); // nothing reads the model after
  result.exportInits = std::move(exportInits_);
  func_.walk([&](tc::ParameterOp p) {
    ImportedWeight w;
    w.name = p.getName().str();
    auto it = initData_.find(w.name);
    if (it != initData_.end()) {
      w.tensor = std::move(it->second);
      initData_.erase(it);
    } else {
      auto t = p.getType();
      w.tensor.type.dtype = *tc::toDType(t.getElementType());
      w.tensor.type.shape.assign(t.getShape().begin(), t.getShape().end());
    }
    result.weights.push_back(std::move(w));
  });
  result.module = std::move(module_);
  result.notes = notes_;
  result.droppedParameters = merged.dropped;
  return result;
}

bool feedModelInputs(const std::string &path, const ImportOptions &opts, const InputFeed &feed,
                     std::string *error) {
  MLIRContext ctx; // for element types only; nothing is built in it
  Importer importer(ctx, path, opts);
  if (succeeded(importer.feedInputs(feed)))
    return true;
  *error = importer.error().empty() ? "cannot read the model" : importer.error();
  return false;
}

FailureOr<ImportResult> importOnnxFile(MLIRContext &ctx, const std::string &path,
                                       const ImportOptions &opts, std::string *error) {
  Importer importer(ctx, path, opts);
  auto result = importer.run();
  if (failed(result)) {
    if (error)
      *error = importer.error().empty() ? "import failed" : importer.error();
    return failure();
  }
  return result;
}

} // namespace tc::onnx_import
