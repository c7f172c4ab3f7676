//===- export.cpp - a trained model as standard ONNX / safetensors --------===//
//
// See export.h. The ONNX file is the stored ModelProto with, in its graph,
// first the DequantizeLinear / Cast nodes that rebuild each quantised weight
// under its original name (their inputs are initializers only, so the node
// list stays topologically sorted), then the stored graph, then the
// initializers. Protobuf merges repeated fields of a message written in
// pieces, which is what lets the stored graph bytes be reused as they are.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/session/export.h"

#include "runtime/src/base/file_io.h"
#include "runtime/src/base/float_format.h"
#include "runtime/src/base/init.h"
#include "runtime/src/base/json.h"
#include "runtime/src/base/proto_writer.h"
#include "runtime/src/base/safetensors.h"
#include "runtime/src/base/host_tensor.h"
#include "runtime/src/cpu/executor.h"
#include "runtime/src/cpu/kernel.h"
#include "runtime/src/session/run.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

namespace tc::rt {
namespace {

// ONNX TensorProto.DataType numbers.
enum : int64_t { kOnnxFloat = 1, kOnnxBf16 = 16, kOnnxF8E4M3FN = 17, kOnnxF4E2M1 = 23,
                 kOnnxF8E8M0 = 24 };

/// TensorProto: dims (1), data_type (2), name (8), raw_data (9).
std::vector<uint8_t> tensorProto(const std::string &name, const std::vector<int64_t> &dims,
                                 int64_t type, const std::vector<uint8_t> &raw) {
  std::vector<uint8_t> t;
  ProtoWriter w(&t);
  for (int64_t d : dims)
    w.varint(1, static_cast<uint64_t>(d));
  w.varint(2, static_cast<uint64_t>(type));
  w.str(8, name);
  w.bytes(9, raw.data(), raw.size());
  return t;
}

/// NodeProto: input (1), output (2), name (3), op_type (4), attribute (5) of
/// type INT (AttributeProto: name 1, i 3, type 20 = 2).
std::vector<uint8_t> nodeProto(const std::string &op, const std::vector<std::string> &ins,
                               const std::string &out,
                               const std::vector<std::pair<std::string, int64_t>> &attrs) {
  std::vector<uint8_t> n;
  ProtoWriter w(&n);
  for (const std::string &i : ins)
    w.str(1, i);
  w.str(2, out);
  w.str(3, out + "_" + op);
  w.str(4, op);
  for (const auto &[key, v] : attrs) {
    std::vector<uint8_t> a;
    ProtoWriter aw(&a);
    aw.str(1, key);
    aw.varint(3, static_cast<uint64_t>(v));
    aw.varint(20, 2);
    w.message(5, a);
  }
  return n;
}

/// The top-level fields of a ModelProto: `graph` (field 7) apart, every
/// other field but ir_version (1) and opset_import (8) copied into `rest`.
Status splitModel(const std::string &m, std::string *graph, std::vector<uint8_t> *rest) {
  size_t i = 0;
  auto varint = [&](uint64_t *v) {
    *v = 0;
    for (int shift = 0; i < m.size() && shift < 64; shift += 7) {
      uint8_t b = static_cast<uint8_t>(m[i++]);
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80))
        return true;
    }
    return false;
  };
  const Status bad = dataLoss("the artifact's export model (report export.onnx) is corrupted");
  while (i < m.size()) {
    size_t start = i;
    uint64_t key, v;
    if (!varint(&key))
      return bad;
    int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
    if (wire == 0) {
      if (!varint(&v))
        return bad;
    } else if (wire == 2) {
      if (!varint(&v) || v > m.size() - i)
        return bad;
      if (field == 7)
        *graph += m.substr(i, v);
      i += v;
    } else {
      return bad;
    }
    if (field != 1 && field != 7 && field != 8)
      rest->insert(rest->end(), m.begin() + start, m.begin() + i);
  }
  return Status::ok();
}

/// Runs tc.quantize (the CPU reference's kernel) on `x` with `block`,
/// giving the `elt` values and the `scaleType` scale_inv.
Status quantize(const HostTensor &x, const std::vector<int64_t> &block, DType elt,
                DType scaleType, HostTensor *q, HostTensor *scale) {
  Function fn;
  fn.name = "export_quantize";
  std::vector<int64_t> grid;
  for (size_t d = 0; d < block.size(); ++d)
    grid.push_back((x.type.shape[d] + block[d] - 1) / block[d]);
  fn.values = {x.type, {elt, x.type.shape}, {scaleType, grid}};
  fn.inputs = {0};
  fn.inputNames = {"x"};
  fn.outputs = {1, 2};
  fn.outputNames = {"q", "scale_inv"};
  Op op;
  op.name = "tc.quantize";
  op.operands = {0};
  op.results = {1, 2};
  Attr b;
  b.kind = Attr::Kind::Ints;
  b.ints = block;
  op.attrs["block"] = b;
  fn.ops.push_back(op);
  Artifact none;
  std::vector<HostTensor> outs;
  TC_RETURN_IF_ERROR(runFunction(none, fn, {x}, &outs));
  *q = std::move(outs[0]);
  *scale = std::move(outs[1]);
  return Status::ok();
}

/// One exported weight: the tensors that stand for it.
struct Exported {
  std::string name;
  std::vector<int64_t> dims;
  HostTensor value;           ///< the weight itself, or its quantised values
  HostTensor scale;           ///< empty dtype F32 with no data: none
  HostTensor scale2;          ///< nvfp4: the f32 per-tensor decode scale of `scale`
  bool quantized = false;
  int64_t axis = -1, block = 0; ///< the block axis and size (block scales)
};

/// NVFP4 of the 2-D weight `w` (f32) blocked along `axis`: quantizeNvfp4's
/// 16x16 weight blocks (Transformer Engine's recipe, bit for bit), each
/// block's E4M3 scale repeated over its 16 rows so that the scales are the
/// 1x16 blocks ONNX's DequantizeLinear takes, as Model Optimizer writes them.
void nvfp4(const HostTensor &w, int64_t axis, Exported *x) {
  std::vector<double> v = hostTensorToDoubles(w);
  int64_t d0 = w.type.shape[0], d1 = w.type.shape[1];
  // quantizeNvfp4 blocks along rows of [rows, cols]: K must be the columns.
  int64_t rows = axis == 1 ? d0 : d1, cols = axis == 1 ? d1 : d0;
  std::vector<double> m(v.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      m[r * cols + c] = axis == 1 ? v[r * d1 + c] : v[c * d1 + r];
  cpu::Nvfp4Tensor q = cpu::quantizeNvfp4(m, rows, cols, /*blocks2d=*/true);
  int64_t g = q.gridCols; // blocks along K
  std::vector<int64_t> sshape = axis == 1 ? std::vector<int64_t>{d0, g} : std::vector<int64_t>{g, d1};
  x->block = q.blockCols;
  x->value.type = {DType::F4E2M1FN, w.type.shape};
  x->value.data.resize(v.size());
  x->scale.type = {DType::F8E4M3FN, sshape};
  x->scale.data.resize(static_cast<size_t>(rows * g));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      int64_t at = axis == 1 ? r * d1 + c : c * d1 + r;
      x->value.data[at] = static_cast<uint8_t>(encodeFloat(q.values[r * cols + c], DType::F4E2M1FN));
    }
    for (int64_t b = 0; b < g; ++b) {
      int64_t at = axis == 1 ? r * g + b : b * d1 + r;
      x->scale.data[at] = static_cast<uint8_t>(
          encodeFloat(q.blockScale[(r / q.blockRows) * g + b], DType::F8E4M3FN));
    }
  }
  x->scale2.type = {DType::F32, {}};
  x->scale2.data.resize(4);
  std::memcpy(x->scale2.data.data(), &q.tensorDecode, 4);
}

Status exportInitializers(const Artifact &a, const ExportOptions &o, bool onnxLayout,
                          std::vector<Exported> *out) {
  auto rep = a.reports.find("export");
  auto onnx = a.reports.find("export.onnx");
  if (rep == a.reports.end() || onnx == a.reports.end())
    return invalidArgument(
        "the artifact holds no export records (compiled from a non-ONNX model, an ONNX "
        "opset below 13, or by a tc-compile before the export existed): compile it again "
        "from the ONNX model with this tc-compile");
  JsonValue root;
  TC_RETURN_IF_ERROR(parseJson(rep->second, &root, "the artifact's export report"));
  const JsonValue *inits = root.find("initializers");
  if (!inits || !inits->isArray())
    return dataLoss("the artifact's export report has no initializers list");
  for (const JsonValue &e : inits->array) {
    const JsonValue *init = e.find("initializer"), *param = e.find("param"),
                    *transposed = e.find("transposed"), *axis = e.find("linear_axis");
    if (!init || !param || !init->isString() || !param->isString())
      return dataLoss("the artifact's export report has a malformed entry");
    const Parameter *p = a.findParam(param->str);
    if (!p)
      return dataLoss("the artifact's export report names parameter '" + param->str +
                      "', which the artifact lacks");
    bool flip = transposed && transposed->b;
    if (!onnxLayout && std::any_of(out->begin(), out->end(),
                                   [&](const Exported &x) { return x.name == param->str; }))
      continue;
    HostTensor v;
    TC_RETURN_IF_ERROR(parameterValue(a, *p, o.seed, &v));
    if (flip && onnxLayout) {
      if (v.type.shape.size() != 2)
        return dataLoss("export: transposed parameter '" + param->str + "' is not 2-D");
      int64_t r = v.type.shape[0], c = v.type.shape[1];
      size_t eb = v.data.size() / static_cast<size_t>(r * c);
      HostTensor t = v;
      for (int64_t i = 0; i < r; ++i)
        for (int64_t j = 0; j < c; ++j)
          std::memcpy(t.data.data() + (j * r + i) * eb, v.data.data() + (i * c + j) * eb, eb);
      t.type.shape = {c, r};
      v = std::move(t);
    }
    Exported x;
    x.name = onnxLayout ? init->str : param->str;
    x.dims = v.type.shape;
    if (!axis || !axis->isNumber() || v.type.dtype != DType::F32) {
      x.value = std::move(v);
      out->push_back(std::move(x));
      continue;
    }
    x.quantized = true;
    x.axis = static_cast<int64_t>(axis->num);
    if (flip && !onnxLayout)
      x.axis = 1 - x.axis;
    if (o.precision == "bf16") {
      x.value.type = {DType::BF16, v.type.shape};
      x.value.data.resize(v.data.size() / 2);
      for (int64_t k = 0; k < v.type.numElements(); ++k) {
        float f;
        std::memcpy(&f, v.data.data() + 4 * k, 4);
        uint16_t bits = doubleToBf16Bits(f);
        std::memcpy(x.value.data.data() + 2 * k, &bits, 2);
      }
    } else if (o.precision == "fp8") {
      TC_RETURN_IF_ERROR(quantize(v, v.type.shape, DType::F8E4M3FN, DType::F32, &x.value, &x.scale));
    } else if (o.precision == "nvfp4") {
      nvfp4(v, x.axis, &x);
    } else {
      x.block = 32;
      std::vector<int64_t> block(2, 1);
      block[x.axis] = x.block;
      TC_RETURN_IF_ERROR(quantize(v, block, DType::F4E2M1FN, DType::F8E8M0FNU, &x.value, &x.scale));
    }
    out->push_back(std::move(x));
  }
  return Status::ok();
}

int64_t onnxType(DType t) {
  switch (t) {
  case DType::F32: return kOnnxFloat;
  case DType::F64: return 11;
  case DType::F16: return 10;
  case DType::BF16: return kOnnxBf16;
  case DType::F8E4M3FN: return kOnnxF8E4M3FN;
  case DType::F8E5M2: return 19;
  case DType::F4E2M1FN: return kOnnxF4E2M1;
  case DType::F8E8M0FNU: return kOnnxF8E8M0;
  default: return 0; // not reached: parameters are floats of the types above
  }
}

/// A tensor's ONNX raw_data (FLOAT4E2M1 packed).
std::vector<uint8_t> rawData(const HostTensor &t) {
  return t.type.dtype == DType::F4E2M1FN ? packFloat4(t.data) : t.data;
}

Status writeOnnx(const Artifact &a, const ExportOptions &o, const std::vector<Exported> &ws) {
  std::string graph;
  std::vector<uint8_t> model;
  TC_RETURN_IF_ERROR(splitModel(a.reports.at("export.onnx"), &graph, &model));
  bool mx = o.precision == "mxfp4";
  std::vector<uint8_t> graphProto;
  ProtoWriter g(&graphProto);
  for (const Exported &w : ws) {
    if (!w.quantized)
      continue;
    std::string q = w.name + "_quantized", s = w.name + "_scale";
    if (o.precision == "bf16")
      g.message(1, nodeProto("Cast", {q}, w.name, {{"to", kOnnxFloat}}));
    else if (o.precision == "nvfp4") {
      // The E4M3 block scales are dequantised by the f32 tensor scale first.
      g.message(1, nodeProto("DequantizeLinear", {s, s + "_2"}, s + "_float", {}));
      g.message(1, nodeProto("DequantizeLinear", {q, s + "_float"}, w.name,
                              {{"axis", w.axis}, {"block_size", w.block}}));
    } else if (mx)
      g.message(1, nodeProto("DequantizeLinear", {q, s}, w.name,
                              {{"axis", w.axis}, {"block_size", w.block},
                               {"output_dtype", kOnnxFloat}}));
    else
      g.message(1, nodeProto("DequantizeLinear", {q, s}, w.name, {}));
  }
  graphProto.insert(graphProto.end(), graph.begin(), graph.end());
  for (const Exported &w : ws) {
    if (!w.quantized) {
      g.message(5, tensorProto(w.name, w.dims, onnxType(w.value.type.dtype), w.value.data));
      continue;
    }
    g.message(5, tensorProto(w.name + "_quantized", w.dims, onnxType(w.value.type.dtype),
                              rawData(w.value)));
    if (o.precision == "bf16")
      continue;
    // fp8: the per-tensor scale is a scalar (ONNX's per-tensor form).
    std::vector<int64_t> sdims = o.precision == "fp8" ? std::vector<int64_t>{} : w.scale.type.shape;
    g.message(5, tensorProto(w.name + "_scale", sdims, onnxType(w.scale.type.dtype),
                              w.scale.data));
    if (!w.scale2.data.empty())
      g.message(5, tensorProto(w.name + "_scale_2", {}, kOnnxFloat, w.scale2.data));
  }
  std::vector<uint8_t> file, opset;
  ProtoWriter f(&file);
  f.varint(1, mx ? 12 : 11); // the IR versions of opsets 24 and 23
  file.insert(file.end(), model.begin(), model.end());
  f.message(7, graphProto);
  ProtoWriter os(&opset);
  os.str(1, "");
  os.varint(2, mx ? 24 : 23);
  f.message(8, opset);
  return writeFileAtomic(o.onnxPath, file.data(), file.size());
}

/// safetensors: W (BF16 / F8_E4M3 / F4), W.scale (fp8: F32 [], the
/// dequantisation factor; mxfp4: F8_E8M0 with W's shape divided by 32 on the
/// block axis); metadata tc.export.precision and tc.export.axis.W.
Status writeSafetensorsExport(const ExportOptions &o, std::vector<Exported> &ws) {
  SafetensorsFile f;
  f.metadata["tc.export.precision"] = o.precision;
  for (Exported &w : ws) {
    if (w.quantized && o.precision != "bf16") {
      f.metadata["tc.export.axis." + w.name] = std::to_string(w.axis);
      if (o.precision == "fp8")
        w.scale.type.shape = {};
      f.tensors[w.name + ".scale"] = std::move(w.scale);
      if (!w.scale2.data.empty())
        f.tensors[w.name + ".scale_2"] = std::move(w.scale2);
    }
    f.tensors[w.name] = std::move(w.value);
  }
  return writeSafetensors(o.safetensorsPath, f);
}

} // namespace

Status exportModel(const Artifact &artifact, const ExportOptions &o) {
  if (o.precision != "bf16" && o.precision != "fp8" && o.precision != "mxfp4" &&
      o.precision != "nvfp4")
    return invalidArgument("--export-precision '" + o.precision + "' is unknown (" +
                           kExportPrecisions + ")");
  if (o.onnxPath.empty() && o.safetensorsPath.empty())
    return invalidArgument("--export-precision needs --export-onnx or --export-safetensors");
  Artifact a = artifact;
  int64_t step = -1;
  if (!o.init.empty())
    TC_RETURN_IF_ERROR(loadArtifactWeights(&a, o.init, &step));
  if (!o.onnxPath.empty()) {
    std::vector<Exported> ws;
    TC_RETURN_IF_ERROR(exportInitializers(a, o, /*onnxLayout=*/true, &ws));
    TC_RETURN_IF_ERROR(writeOnnx(a, o, ws));
  }
  if (!o.safetensorsPath.empty()) {
    std::vector<Exported> ws;
    TC_RETURN_IF_ERROR(exportInitializers(a, o, /*onnxLayout=*/false, &ws));
    TC_RETURN_IF_ERROR(writeSafetensorsExport(o, ws));
  }
  return Status::ok();
}

} // namespace tc::rt
