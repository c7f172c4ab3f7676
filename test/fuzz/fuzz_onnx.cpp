//===- fuzz_onnx.cpp - libFuzzer target: the ONNX importer ----------------===//
//
// Any bytes as a binary ModelProto into importOnnxFile (parse, tc's
// structural checks, initializer data, libonnx's checker where it applies,
// every op handler, constant folding, the verifier): it must return the
// module or an error, never crash, leak, hit undefined behaviour or allocate
// without bound. The bytes go through a file, as in tc-compile: the real
// entry point, with the file's folder as the external-data folder (empty, so
// external data is always missing).
//
// Mutations are structure-aware three times in four (LLVMFuzzerCustomMutator
// below): the input is parsed as a ModelProto, one to three edits of the
// kinds that found the importer's bugs (an attribute's type changed or given
// twice, extreme integers and NaN/inf floats, huge or negative dims, a
// tensor's data type or data cut short, inputs rewired or dropped, other
// IR/opset versions) are made anywhere in the model, subgraphs included, and
// it is serialized again. The fourth time, and for bytes that do not parse,
// libFuzzer's byte mutations run.
//
// Built by the TC_SANITIZE CMake build (test/fuzz/CMakeLists.txt); tc's
// sources are instrumented, MLIR and libonnx are not.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Import.h"

#include "mlir/IR/MLIRContext.h"

#include "onnx/onnx_pb.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace {

using Rng = std::minstd_rand;

size_t pick(Rng &rng, size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }

/// An integer that breaks arithmetic: 0, ±1, the int32/int64 limits, 2^31, 2^62.
int64_t extremeInt(Rng &rng) {
  static const int64_t values[] = {0, 1, -1, 2, -2, INT32_MAX, INT32_MIN, (int64_t)1 << 31,
                                   (int64_t)1 << 62, INT64_MAX, INT64_MIN, INT64_MIN + 1};
  return values[pick(rng, std::size(values))];
}

float extremeFloat(Rng &rng) {
  static const float values[] = {0.0f, -0.0f, 1e30f, -1e30f, 3e9f, 9.3e18f, -9.3e18f,
                                 std::numeric_limits<float>::quiet_NaN(),
                                 std::numeric_limits<float>::infinity(),
                                 -std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::denorm_min()};
  return values[pick(rng, std::size(values))];
}

/// Every graph of the model: the main one and the bodies of If/Loop/Scan
/// attributes, at any depth.
void collectGraphs(onnx::GraphProto *g, std::vector<onnx::GraphProto *> &out) {
  out.push_back(g);
  for (auto &node : *g->mutable_node())
    for (auto &a : *node.mutable_attribute()) {
      if (a.has_g())
        collectGraphs(a.mutable_g(), out);
      for (auto &sub : *a.mutable_graphs())
        collectGraphs(&sub, out);
    }
}

/// Every tensor of a graph: initializers and TENSOR attributes (Constant).
std::vector<onnx::TensorProto *> tensorsOf(onnx::GraphProto &g) {
  std::vector<onnx::TensorProto *> out;
  for (auto &t : *g.mutable_initializer())
    out.push_back(&t);
  for (auto &node : *g.mutable_node())
    for (auto &a : *node.mutable_attribute())
      if (a.has_t())
        out.push_back(a.mutable_t());
  return out;
}

void mutateAttribute(onnx::NodeProto &node, Rng &rng) {
  if (node.attribute_size() == 0) {
    auto *a = node.add_attribute(); // an attribute the op may not have
    static const char *names[] = {"axis", "axes", "perm", "to", "value", "depth", "k", "alpha"};
    a->set_name(names[pick(rng, std::size(names))]);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(extremeInt(rng));
    return;
  }
  auto &a = *node.mutable_attribute((int)pick(rng, node.attribute_size()));
  switch (pick(rng, 6)) {
  case 0: // another type, the payload left as it is (or empty)
    a.set_type(static_cast<onnx::AttributeProto::AttributeType>(1 + pick(rng, 14)));
    break;
  case 1: // given twice, the second different
    *node.add_attribute() = a;
    node.mutable_attribute(node.attribute_size() - 1)->set_i(extremeInt(rng));
    break;
  case 2:
    a.set_i(extremeInt(rng));
    for (auto &v : *a.mutable_ints())
      if (pick(rng, 2))
        v = extremeInt(rng);
    break;
  case 3:
    a.set_f(extremeFloat(rng));
    for (auto &v : *a.mutable_floats())
      if (pick(rng, 2))
        v = extremeFloat(rng);
    break;
  case 4: // a list grown or emptied
    if (pick(rng, 2))
      a.add_ints(extremeInt(rng));
    else
      a.clear_ints();
    break;
  default:
    node.mutable_attribute()->DeleteSubrange((int)pick(rng, node.attribute_size()), 1);
    break;
  }
}

void mutateTensor(onnx::TensorProto &t, Rng &rng) {
  switch (pick(rng, 5)) {
  case 0:
    if (t.dims_size() && pick(rng, 2))
      t.set_dims((int)pick(rng, t.dims_size()), extremeInt(rng));
    else
      t.add_dims(pick(rng, 2) ? extremeInt(rng) : 1);
    break;
  case 1:
    t.set_data_type((int)pick(rng, 24));
    break;
  case 2: // data cut short or grown
    if (!t.raw_data().empty())
      t.mutable_raw_data()->resize(pick(rng, t.raw_data().size() * 2 + 1));
    else if (t.int64_data_size())
      t.mutable_int64_data()->RemoveLast();
    else
      t.add_float_data(extremeFloat(rng));
    break;
  case 3: // values that overflow the ops that read them (shapes, depths, steps)
    if (t.int64_data_size())
      t.set_int64_data((int)pick(rng, t.int64_data_size()), extremeInt(rng));
    else if (t.raw_data().size() >= 8) {
      int64_t v = extremeInt(rng);
      std::memcpy(t.mutable_raw_data()->data() + 8 * pick(rng, t.raw_data().size() / 8), &v, 8);
    } else if (t.float_data_size())
      t.set_float_data((int)pick(rng, t.float_data_size()), extremeFloat(rng));
    break;
  default: { // external data, with odd keys
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    auto *e = t.add_external_data();
    static const char *keys[] = {"location", "offset", "length", "checksum"};
    static const char *values[] = {"x.bin", "-1", "18446744073709551615", "", "/dev/zero", "..", "9e99"};
    e->set_key(keys[pick(rng, std::size(keys))]);
    e->set_value(values[pick(rng, std::size(values))]);
    break;
  }
  }
}

void mutateNodeIO(onnx::GraphProto &g, onnx::NodeProto &node, Rng &rng) {
  std::vector<std::string> names;
  for (const auto &v : g.input())
    names.push_back(v.name());
  for (const auto &t : g.initializer())
    names.push_back(t.name());
  for (const auto &n : g.node())
    for (const auto &o : n.output())
      names.push_back(o);
  std::string other = names.empty() ? std::string("x") : names[pick(rng, names.size())];
  switch (pick(rng, 4)) {
  case 0:
    node.add_input(pick(rng, 4) ? other : std::string());
    break;
  case 1:
    if (node.input_size())
      node.mutable_input()->DeleteSubrange((int)pick(rng, node.input_size()), 1);
    break;
  case 2:
    if (node.input_size())
      node.set_input((int)pick(rng, node.input_size()), other);
    break;
  default:
    node.add_output(pick(rng, 2) ? other : node.name() + "_extra");
    break;
  }
}

void mutateValueInfo(onnx::GraphProto &g, Rng &rng) {
  auto *list = pick(rng, 2) ? g.mutable_input() : g.mutable_output();
  if (list->empty())
    return;
  auto &vi = *list->Mutable((int)pick(rng, list->size()));
  if (pick(rng, 5) == 0) { // listed twice
    *list->Add() = vi;
    return;
  }
  auto *tt = vi.mutable_type()->mutable_tensor_type();
  if (pick(rng, 3) == 0) {
    tt->set_elem_type((int)pick(rng, 24));
    return;
  }
  auto *shape = tt->mutable_shape();
  if (shape->dim_size() == 0 || pick(rng, 4) == 0)
    shape->add_dim()->set_dim_value(extremeInt(rng));
  else
    shape->mutable_dim((int)pick(rng, shape->dim_size()))->set_dim_value(extremeInt(rng));
}

void mutateModel(onnx::ModelProto &m, Rng &rng) {
  std::vector<onnx::GraphProto *> graphs;
  collectGraphs(m.mutable_graph(), graphs);
  onnx::GraphProto &g = *graphs[pick(rng, graphs.size())];
  switch (pick(rng, 7)) {
  case 0:
  case 1:
    if (g.node_size())
      mutateAttribute(*g.mutable_node((int)pick(rng, g.node_size())), rng);
    break;
  case 2:
    if (g.node_size())
      mutateNodeIO(g, *g.mutable_node((int)pick(rng, g.node_size())), rng);
    break;
  case 3:
  case 4: {
    auto tensors = tensorsOf(g);
    if (!tensors.empty())
      mutateTensor(*tensors[pick(rng, tensors.size())], rng);
    break;
  }
  case 5:
    mutateValueInfo(g, rng);
    break;
  default: // IR 3..11 (the checker runs for <= 8 only), another opset version
    if (pick(rng, 2) || m.opset_import_size() == 0)
      m.set_ir_version(3 + (int64_t)pick(rng, 9));
    else
      m.mutable_opset_import((int)pick(rng, m.opset_import_size()))
          ->set_version(1 + (int64_t)pick(rng, 30));
    break;
  }
}

/// The private temporary folder of this process and its model.onnx, made on
/// first use and removed at exit.
std::string tempDir, tempModel;

const std::string &modelPath() {
  if (tempModel.empty()) {
    const char *tmp = std::getenv("TMPDIR");
    tempDir = std::string(tmp && *tmp ? tmp : "/tmp") + "/tc-fuzz-onnx-XXXXXX";
    if (!mkdtemp(tempDir.data())) {
      std::perror("fuzz_onnx: mkdtemp");
      std::abort();
    }
    tempModel = tempDir + "/model.onnx";
    std::atexit([] {
      std::remove(tempModel.c_str());
      rmdir(tempDir.c_str());
    });
  }
  return tempModel;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &path = modelPath();
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
    std::perror("fuzz_onnx: cannot write the model file");
    std::abort();
  }
  // A fresh context per input: uniqued types and attributes would otherwise
  // accumulate over millions of inputs.
  mlir::MLIRContext ctx(mlir::MLIRContext::Threading::DISABLED);
  ctx.printOpOnDiagnostic(false);
  tc::onnx_import::ImportOptions opts;
  std::string error;
  (void)tc::onnx_import::importOnnxFile(ctx, path, opts, &error);
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t maxSize,
                                          unsigned int seed) {
  Rng rng(seed);
  onnx::ModelProto model;
  if (pick(rng, 4) == 0 || size > (size_t)INT32_MAX || !model.ParseFromArray(data, (int)size) ||
      !model.has_graph())
    return LLVMFuzzerMutate(data, size, maxSize);
  for (size_t i = 0, n = 1 + pick(rng, 3); i < n; ++i)
    mutateModel(model, rng);
  std::string out;
  if (!model.SerializeToString(&out) || out.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
