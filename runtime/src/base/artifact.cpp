//===- artifact.cpp - the artifact file: read, write, validate ------------===//
#include "runtime/src/base/artifact.h"
#include "runtime/src/base/version.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <unistd.h>

#include "runtime/src/base/byte_io.h"
#include "runtime/src/base/file_io.h"
#include "runtime/src/base/host_tensor.h"

namespace tc::rt {

static const char *artifactFormatWriter(uint32_t version) {
  // Which tc versions wrote each artifact format (append one entry per bump).
  if (version == 4)
    return "tc 0.2.0 to 0.3.0";
  return "a tc before 0.2.0";
}

namespace {

const uint8_t kMagic[8] = {0x89, 'T', 'C', 'A', '\r', '\n', 0x1A, '\n'};
constexpr size_t kHeaderBytes = 32;
constexpr size_t kEntryBytes = 24;
constexpr uint32_t kMaxSections = 64;
constexpr uint64_t kAlign = 64;

enum SectionKind : uint32_t {
  kMeta = 1,
  kFunctions = 2,
  kParams = 3,
  kWeights = 4,
  kReports = 5,
  kKernels = 6,
  kDevice = 7,
};

const char *sectionName(uint32_t kind) {
  switch (kind) {
  case kMeta: return "META";
  case kFunctions: return "FUNCTIONS";
  case kParams: return "PARAMS";
  case kWeights: return "WEIGHTS";
  case kReports: return "REPORTS";
  case kKernels: return "KERNELS";
  case kDevice: return "DEVICE";
  default: return "UNKNOWN";
  }
}

uint64_t alignUp(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

//===----------------------------------------------------------------------===//
// Encoding
//===----------------------------------------------------------------------===//

void writeType(ByteWriter &w, const TensorType &t) {
  w.u8(static_cast<uint8_t>(t.dtype));
  w.u32(static_cast<uint32_t>(t.shape.size()));
  for (int64_t d : t.shape)
    w.i64(d);
}

void writeAttr(ByteWriter &w, const Attr &a) {
  w.u8(static_cast<uint8_t>(a.kind));
  switch (a.kind) {
  case Attr::Kind::Int: w.i64(a.i); break;
  case Attr::Kind::Float: w.f64(a.f); break;
  case Attr::Kind::String: w.str(a.s); break;
  case Attr::Kind::Ints:
    w.u32(static_cast<uint32_t>(a.ints.size()));
    for (int64_t v : a.ints)
      w.i64(v);
    break;
  case Attr::Kind::Floats:
    w.u32(static_cast<uint32_t>(a.floats.size()));
    for (double v : a.floats)
      w.f64(v);
    break;
  case Attr::Kind::Tensor:
    writeType(w, a.tensor.type);
    w.u64(a.tensor.data.size());
    w.bytes(a.tensor.data.data(), a.tensor.data.size());
    break;
  }
}

void writeFunction(ByteWriter &w, const Function &f) {
  w.str(f.name);
  w.u32(static_cast<uint32_t>(f.values.size()));
  for (const TensorType &t : f.values)
    writeType(w, t);
  w.u32(static_cast<uint32_t>(f.inputs.size()));
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    w.i32(f.inputs[i]);
    w.str(f.inputNames[i]);
  }
  w.u32(static_cast<uint32_t>(f.outputs.size()));
  for (size_t i = 0; i < f.outputs.size(); ++i) {
    w.i32(f.outputs[i]);
    w.str(f.outputNames[i]);
  }
  w.u32(static_cast<uint32_t>(f.ops.size()));
  for (const Op &op : f.ops) {
    w.str(op.name);
    w.u32(static_cast<uint32_t>(op.operands.size()));
    for (int32_t v : op.operands)
      w.i32(v);
    w.u32(static_cast<uint32_t>(op.results.size()));
    for (int32_t v : op.results)
      w.i32(v);
    w.u32(static_cast<uint32_t>(op.attrs.size()));
    for (const auto &[key, attr] : op.attrs) {
      w.str(key);
      writeAttr(w, attr);
    }
  }
}

void writeDeviceFunction(ByteWriter &w, const DeviceFunction &f) {
  w.str(f.name);
  w.u64(f.arenaBytes);
  w.u32(static_cast<uint32_t>(f.inputNames.size()));
  for (const std::string &n : f.inputNames)
    w.str(n);
  w.u32(static_cast<uint32_t>(f.outputNames.size()));
  for (size_t i = 0; i < f.outputNames.size(); ++i) {
    w.i32(f.outputs[i]);
    w.str(f.outputNames[i]);
  }
  w.u32(static_cast<uint32_t>(f.consts.size()));
  for (const HostTensor &t : f.consts) {
    writeType(w, t.type);
    w.u64(t.data.size());
    w.bytes(t.data.data(), t.data.size());
  }
  w.u32(static_cast<uint32_t>(f.buffers.size()));
  for (const DeviceBuffer &b : f.buffers) {
    w.u8(static_cast<uint8_t>(b.space));
    w.u64(b.offset);
    w.u64(b.bytes);
    writeType(w, b.type);
    w.str(b.name);
    w.i32(b.index);
  }
  w.u32(static_cast<uint32_t>(f.ops.size()));
  for (const DeviceOp &op : f.ops) {
    w.str(op.kind);
    w.str(op.name);
    w.u32(static_cast<uint32_t>(op.ins.size()));
    for (int32_t v : op.ins)
      w.i32(v);
    w.u32(static_cast<uint32_t>(op.outs.size()));
    for (int32_t v : op.outs)
      w.i32(v);
    w.u32(static_cast<uint32_t>(op.attrs.size()));
    for (const auto &[key, attr] : op.attrs) {
      w.str(key);
      writeAttr(w, attr);
    }
  }
}

struct Section {
  uint32_t kind;
  const uint8_t *data;
  size_t size;
};

/// Encodes everything but the weights into `storage` and describes the
/// sections (the WEIGHTS section points into the artifact itself).
void encodeSections(const Artifact &a, std::vector<std::vector<uint8_t>> *storage,
                    std::vector<Section> *sections) {
  storage->assign(6, {});
  {
    ByteWriter w(&(*storage)[0]);
    w.str(a.target);
    w.str(a.producer);
  }
  {
    ByteWriter w(&(*storage)[1]);
    w.u32(static_cast<uint32_t>(a.functions.size()));
    for (const Function &f : a.functions)
      writeFunction(w, f);
  }
  {
    ByteWriter w(&(*storage)[2]);
    w.u32(static_cast<uint32_t>(a.params.size()));
    for (const Parameter &p : a.params) {
      w.str(p.name);
      writeType(w, p.type);
      w.u8(static_cast<uint8_t>((p.trainable ? 1 : 0) | (p.hasData ? 2 : 0)));
      w.u8(static_cast<uint8_t>(p.kind));
      w.u8(static_cast<uint8_t>(p.init));
      w.f64(p.initArgs[0]);
      w.f64(p.initArgs[1]);
      w.u64(p.offset);
      w.u64(p.bytes);
    }
  }
  {
    ByteWriter w(&(*storage)[3]);
    w.u32(static_cast<uint32_t>(a.reports.size()));
    for (const auto &[k, v] : a.reports) {
      w.str(k);
      w.str(v);
    }
  }
  *sections = {
      {kMeta, (*storage)[0].data(), (*storage)[0].size()},
      {kFunctions, (*storage)[1].data(), (*storage)[1].size()},
      {kParams, (*storage)[2].data(), (*storage)[2].size()},
      {kWeights, a.weights.data(), a.weights.size()},
      {kReports, (*storage)[3].data(), (*storage)[3].size()},
  };
  // Only GPU artifacts carry kernels; CPU artifacts stay byte-identical to
  // what readers without this section expect.
  if (!a.kernels.empty()) {
    ByteWriter w(&(*storage)[4]);
    w.u32(static_cast<uint32_t>(a.kernels.size()));
    for (const KernelBinary &k : a.kernels) {
      w.str(k.name);
      w.str(k.arch);
      w.str(k.source);
      w.str(k.ptx);
      w.u64(k.cubin.size());
      w.bytes(k.cubin.data(), k.cubin.size());
    }
    sections->push_back({kKernels, (*storage)[4].data(), (*storage)[4].size()});
  }
  if (!a.deviceFunctions.empty()) {
    ByteWriter w(&(*storage)[5]);
    w.u32(static_cast<uint32_t>(a.deviceFunctions.size()));
    for (const DeviceFunction &f : a.deviceFunctions)
      writeDeviceFunction(w, f);
    sections->push_back({kDevice, (*storage)[5].data(), (*storage)[5].size()});
  }
}

/// CRC-32 of the header and the section table with the CRC field itself
/// (bytes 24..27) read as zero.
uint32_t headerCrc(const uint8_t *head, size_t size) {
  static const uint8_t zeros[4] = {0, 0, 0, 0};
  uint32_t c = crc32(head, 24);
  c = crc32(zeros, 4, c);
  return crc32(head + 28, size - 28, c);
}

/// The header and section table for `sections`, padded to the first payload.
std::vector<uint8_t> encodeHeader(const std::vector<Section> &sections,
                                  std::vector<uint64_t> *offsets,
                                  uint64_t *fileSize) {
  uint64_t pos = alignUp(kHeaderBytes + kEntryBytes * sections.size());
  offsets->clear();
  for (const Section &s : sections) {
    offsets->push_back(pos);
    pos = alignUp(pos + s.size);
  }
  *fileSize = pos;
  std::vector<uint8_t> head;
  ByteWriter w(&head);
  w.bytes(kMagic, 8);
  w.u32(Artifact::kFormatVersion);
  w.u32(static_cast<uint32_t>(sections.size()));
  w.u64(*fileSize);
  w.u32(0); // the header's CRC-32, filled in below
  w.u32(0); // reserved
  for (size_t i = 0; i < sections.size(); ++i) {
    w.u32(sections[i].kind);
    w.u32(crc32(sections[i].data, sections[i].size));
    w.u64((*offsets)[i]);
    w.u64(sections[i].size);
  }
  uint32_t crc = headerCrc(head.data(), head.size());
  for (int b = 0; b < 4; ++b)
    head[24 + b] = static_cast<uint8_t>(crc >> (8 * b));
  head.resize((*offsets)[0], 0);
  return head;
}

//===----------------------------------------------------------------------===//
// Decoding
//===----------------------------------------------------------------------===//

Status readType(ByteReader &r, TensorType *t) {
  uint8_t dt;
  TC_RETURN_IF_ERROR(r.u8(&dt, "dtype"));
  if (!dtypeIsValid(dt))
    return r.error("invalid dtype number " + std::to_string(dt));
  t->dtype = static_cast<DType>(dt);
  uint32_t rank;
  TC_RETURN_IF_ERROR(r.count(&rank, 8, "rank"));
  t->shape.resize(rank);
  for (uint32_t i = 0; i < rank; ++i)
    TC_RETURN_IF_ERROR(r.i64(&t->shape[i], "dimension"));
  int64_t n;
  Status st = checkedNumElements(t->shape, &n);
  if (!st.isOk())
    return r.error(st.message());
  return Status::ok();
}

Status readAttr(ByteReader &r, Attr *a) {
  uint8_t kind;
  TC_RETURN_IF_ERROR(r.u8(&kind, "attribute kind"));
  if (kind > static_cast<uint8_t>(Attr::Kind::Tensor))
    return r.error("invalid attribute kind " + std::to_string(kind));
  a->kind = static_cast<Attr::Kind>(kind);
  switch (a->kind) {
  case Attr::Kind::Int: return r.i64(&a->i, "int attribute");
  case Attr::Kind::Float: return r.f64(&a->f, "float attribute");
  case Attr::Kind::String: return r.str(&a->s, "string attribute");
  case Attr::Kind::Ints: {
    uint32_t n;
    TC_RETURN_IF_ERROR(r.count(&n, 8, "ints attribute"));
    a->ints.resize(n);
    for (uint32_t i = 0; i < n; ++i)
      TC_RETURN_IF_ERROR(r.i64(&a->ints[i], "ints attribute"));
    return Status::ok();
  }
  case Attr::Kind::Floats: {
    uint32_t n;
    TC_RETURN_IF_ERROR(r.count(&n, 8, "floats attribute"));
    a->floats.resize(n);
    for (uint32_t i = 0; i < n; ++i)
      TC_RETURN_IF_ERROR(r.f64(&a->floats[i], "floats attribute"));
    return Status::ok();
  }
  case Attr::Kind::Tensor: {
    TC_RETURN_IF_ERROR(readType(r, &a->tensor.type));
    uint64_t n;
    TC_RETURN_IF_ERROR(r.u64(&n, "tensor attribute size"));
    return r.bytes(&a->tensor.data, n, "tensor attribute data");
  }
  }
  return Status::ok();
}

Status readIdList(ByteReader &r, std::vector<int32_t> *ids, const char *what) {
  uint32_t n;
  TC_RETURN_IF_ERROR(r.count(&n, 4, what));
  ids->resize(n);
  for (uint32_t i = 0; i < n; ++i)
    TC_RETURN_IF_ERROR(r.i32(&(*ids)[i], what));
  return Status::ok();
}

Status readFunction(ByteReader &r, Function *f) {
  TC_RETURN_IF_ERROR(r.str(&f->name, "function name"));
  uint32_t n;
  TC_RETURN_IF_ERROR(r.count(&n, 5, "values"));
  f->values.resize(n);
  for (uint32_t i = 0; i < n; ++i)
    TC_RETURN_IF_ERROR(readType(r, &f->values[i]));
  TC_RETURN_IF_ERROR(r.count(&n, 8, "inputs"));
  f->inputs.resize(n);
  f->inputNames.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    TC_RETURN_IF_ERROR(r.i32(&f->inputs[i], "input id"));
    TC_RETURN_IF_ERROR(r.str(&f->inputNames[i], "input name"));
  }
  TC_RETURN_IF_ERROR(r.count(&n, 8, "outputs"));
  f->outputs.resize(n);
  f->outputNames.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    TC_RETURN_IF_ERROR(r.i32(&f->outputs[i], "output id"));
    TC_RETURN_IF_ERROR(r.str(&f->outputNames[i], "output name"));
  }
  TC_RETURN_IF_ERROR(r.count(&n, 16, "ops"));
  f->ops.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    Op &op = f->ops[i];
    TC_RETURN_IF_ERROR(r.str(&op.name, "op name"));
    TC_RETURN_IF_ERROR(readIdList(r, &op.operands, "operands"));
    TC_RETURN_IF_ERROR(readIdList(r, &op.results, "results"));
    uint32_t na;
    TC_RETURN_IF_ERROR(r.count(&na, 5, "attributes"));
    for (uint32_t j = 0; j < na; ++j) {
      std::string key;
      TC_RETURN_IF_ERROR(r.str(&key, "attribute name"));
      Attr a;
      TC_RETURN_IF_ERROR(readAttr(r, &a));
      if (!op.attrs.emplace(key, std::move(a)).second)
        return r.error("duplicate attribute '" + key + "' in op " + op.name);
    }
  }
  return Status::ok();
}

Status readDeviceFunction(ByteReader &r, DeviceFunction *f) {
  TC_RETURN_IF_ERROR(r.str(&f->name, "device function name"));
  TC_RETURN_IF_ERROR(r.u64(&f->arenaBytes, "arena size"));
  uint32_t n;
  TC_RETURN_IF_ERROR(r.count(&n, 4, "device inputs"));
  f->inputNames.resize(n);
  for (uint32_t i = 0; i < n; ++i)
    TC_RETURN_IF_ERROR(r.str(&f->inputNames[i], "device input name"));
  TC_RETURN_IF_ERROR(r.count(&n, 8, "device outputs"));
  f->outputNames.resize(n);
  f->outputs.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    TC_RETURN_IF_ERROR(r.i32(&f->outputs[i], "device output buffer"));
    TC_RETURN_IF_ERROR(r.str(&f->outputNames[i], "device output name"));
  }
  // type (u8 + u32) and the u64 size.
  TC_RETURN_IF_ERROR(r.count(&n, 13, "device constants"));
  f->consts.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    TC_RETURN_IF_ERROR(readType(r, &f->consts[i].type));
    uint64_t bytes;
    TC_RETURN_IF_ERROR(r.u64(&bytes, "device constant size"));
    TC_RETURN_IF_ERROR(r.bytes(&f->consts[i].data, bytes, "device constant data"));
  }
  // u8 space, u64 offset, u64 bytes, type (5), str (4), i32 index.
  TC_RETURN_IF_ERROR(r.count(&n, 34, "device buffers"));
  f->buffers.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    DeviceBuffer &b = f->buffers[i];
    uint8_t space;
    TC_RETURN_IF_ERROR(r.u8(&space, "buffer space"));
    if (space > static_cast<uint8_t>(DeviceBuffer::Space::Output))
      return r.error("invalid buffer space " + std::to_string(space));
    b.space = static_cast<DeviceBuffer::Space>(space);
    TC_RETURN_IF_ERROR(r.u64(&b.offset, "buffer offset"));
    TC_RETURN_IF_ERROR(r.u64(&b.bytes, "buffer bytes"));
    TC_RETURN_IF_ERROR(readType(r, &b.type));
    TC_RETURN_IF_ERROR(r.str(&b.name, "buffer name"));
    TC_RETURN_IF_ERROR(r.i32(&b.index, "buffer index"));
  }
  // kind, name (4 + 4), ins, outs, attrs (4 each).
  TC_RETURN_IF_ERROR(r.count(&n, 20, "device ops"));
  f->ops.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    DeviceOp &op = f->ops[i];
    TC_RETURN_IF_ERROR(r.str(&op.kind, "device op kind"));
    TC_RETURN_IF_ERROR(r.str(&op.name, "device op name"));
    TC_RETURN_IF_ERROR(readIdList(r, &op.ins, "device op inputs"));
    TC_RETURN_IF_ERROR(readIdList(r, &op.outs, "device op outputs"));
    uint32_t na;
    TC_RETURN_IF_ERROR(r.count(&na, 5, "device op attributes"));
    for (uint32_t j = 0; j < na; ++j) {
      std::string key;
      TC_RETURN_IF_ERROR(r.str(&key, "attribute name"));
      Attr a;
      TC_RETURN_IF_ERROR(readAttr(r, &a));
      if (!op.attrs.emplace(key, std::move(a)).second)
        return r.error("duplicate attribute '" + key + "' in device op " + op.kind);
    }
  }
  return Status::ok();
}

Status decodeSection(uint32_t kind, const uint8_t *data, size_t size,
                     const std::string &name, Artifact *out) {
  ByteReader r(data, size, "artifact '" + name + "' section " + sectionName(kind));
  switch (kind) {
  case kMeta:
    TC_RETURN_IF_ERROR(r.str(&out->target, "target"));
    TC_RETURN_IF_ERROR(r.str(&out->producer, "producer"));
    break;
  case kFunctions: {
    uint32_t n;
    TC_RETURN_IF_ERROR(r.count(&n, 20, "functions"));
    out->functions.resize(n);
    for (uint32_t i = 0; i < n; ++i)
      TC_RETURN_IF_ERROR(readFunction(r, &out->functions[i]));
    break;
  }
  case kParams: {
    uint32_t n;
    // name (4), type (5), flags/kind/init (3), 2 f64 init args, offset, bytes.
    TC_RETURN_IF_ERROR(r.count(&n, 44, "params"));
    out->params.resize(n);
    for (uint32_t i = 0; i < n; ++i) {
      Parameter &p = out->params[i];
      TC_RETURN_IF_ERROR(r.str(&p.name, "param name"));
      TC_RETURN_IF_ERROR(readType(r, &p.type));
      uint8_t flags;
      TC_RETURN_IF_ERROR(r.u8(&flags, "param flags"));
      p.trainable = flags & 1;
      p.hasData = flags & 2;
      if (flags & ~3u)
        return r.error("parameter '" + p.name + "' has unknown flags " +
                       std::to_string(flags));
      uint8_t kind, init;
      TC_RETURN_IF_ERROR(r.u8(&kind, "param kind"));
      TC_RETURN_IF_ERROR(r.u8(&init, "param initialiser"));
      if (kind > static_cast<uint8_t>(ParamKind::OptimizerState))
        return r.error("parameter '" + p.name + "' has unknown kind " +
                       std::to_string(kind));
      if (init > static_cast<uint8_t>(ParamInit::Uniform))
        return r.error("parameter '" + p.name + "' has unknown initialiser " +
                       std::to_string(init));
      p.kind = static_cast<ParamKind>(kind);
      p.init = static_cast<ParamInit>(init);
      TC_RETURN_IF_ERROR(r.f64(&p.initArgs[0], "param initialiser argument"));
      TC_RETURN_IF_ERROR(r.f64(&p.initArgs[1], "param initialiser argument"));
      TC_RETURN_IF_ERROR(r.u64(&p.offset, "param offset"));
      TC_RETURN_IF_ERROR(r.u64(&p.bytes, "param bytes"));
    }
    break;
  }
  case kReports: {
    uint32_t n;
    TC_RETURN_IF_ERROR(r.count(&n, 8, "reports"));
    for (uint32_t i = 0; i < n; ++i) {
      std::string k, v;
      TC_RETURN_IF_ERROR(r.str(&k, "report name"));
      TC_RETURN_IF_ERROR(r.str(&v, "report text"));
      out->reports[k] = std::move(v);
    }
    break;
  }
  case kKernels: {
    uint32_t n;
    // name, arch, source, ptx (u32 lengths) and the u64 cubin size.
    TC_RETURN_IF_ERROR(r.count(&n, 24, "kernels"));
    out->kernels.resize(n);
    for (KernelBinary &k : out->kernels) {
      TC_RETURN_IF_ERROR(r.str(&k.name, "kernel name"));
      TC_RETURN_IF_ERROR(r.str(&k.arch, "kernel arch"));
      TC_RETURN_IF_ERROR(r.str(&k.source, "kernel source"));
      TC_RETURN_IF_ERROR(r.str(&k.ptx, "kernel ptx"));
      uint64_t bytes;
      TC_RETURN_IF_ERROR(r.u64(&bytes, "kernel cubin size"));
      TC_RETURN_IF_ERROR(r.bytes(&k.cubin, bytes, "kernel cubin"));
    }
    break;
  }
  case kDevice: {
    uint32_t n;
    TC_RETURN_IF_ERROR(r.count(&n, 32, "device functions"));
    out->deviceFunctions.resize(n);
    for (DeviceFunction &f : out->deviceFunctions)
      TC_RETURN_IF_ERROR(readDeviceFunction(r, &f));
    break;
  }
  default:
    return Status::ok();
  }
  if (r.remaining() != 0)
    return r.error(std::to_string(r.remaining()) + " unexpected trailing bytes");
  return Status::ok();
}

struct Entry {
  uint32_t kind, crc;
  uint64_t offset, size;
};

/// Parses and checks the header and the section table (`head` holds at least
/// the first kHeaderBytes, and the whole table once `*count` is known).
Status parseHeader(const uint8_t *head, size_t headSize, uint64_t fileSize,
                   const std::string &name, uint32_t *count,
                   std::vector<Entry> *table) {
  auto err = [&](const std::string &m) {
    return dataLoss("artifact '" + name + "': " + m);
  };
  if (headSize < kHeaderBytes || std::memcmp(head, kMagic, 8) != 0)
    return err(headSize < 8 ? "file too short to be an artifact (" +
                                  std::to_string(fileSize) + " bytes)"
                            : "not a tc artifact (bad magic)");
  ByteReader r(head + 8, headSize - 8, "artifact '" + name + "' header");
  uint32_t version;
  uint64_t declared;
  TC_RETURN_IF_ERROR(r.u32(&version, "version"));
  TC_RETURN_IF_ERROR(r.u32(count, "section count"));
  TC_RETURN_IF_ERROR(r.u64(&declared, "file size"));
  if (version != 0 && version < Artifact::kFormatVersion)
    return Status(StatusCode::Unimplemented,
                  "artifact '" + name + "': format version " + std::to_string(version) +
                      " is too old (written by " + artifactFormatWriter(version) +
                      "): this tc (" + kTcVersion + ") reads version " +
                      std::to_string(Artifact::kFormatVersion) +
                      " only; recompile the model with this tc-compile");
  if (version == 0 || version > Artifact::kFormatVersion)
    return Status(StatusCode::Unimplemented,
                  "artifact '" + name + "': format version " + std::to_string(version) +
                      " is not supported (written by a newer tc; this tc (" + kTcVersion +
                      ") reads version " + std::to_string(Artifact::kFormatVersion) + ")");
  if (declared != fileSize)
    return err("file is " + std::to_string(fileSize) + " bytes, header says " +
               std::to_string(declared) + " (truncated or corrupted)");
  if (*count == 0 || *count > kMaxSections)
    return err("bad section count " + std::to_string(*count));
  uint64_t tableEnd = kHeaderBytes + kEntryBytes * uint64_t{*count};
  if (tableEnd > fileSize)
    return err("section table runs past the end of the file");
  if (headSize < tableEnd)
    return Status::ok(); // the caller reads the table and calls again
  {
    uint32_t stored = static_cast<uint32_t>(head[24]) | static_cast<uint32_t>(head[25]) << 8 |
                      static_cast<uint32_t>(head[26]) << 16 | static_cast<uint32_t>(head[27]) << 24;
    if (headerCrc(head, tableEnd) != stored)
      return err("the header or section table fails its CRC-32 check (the file is corrupted)");
  }
  ByteReader t(head + kHeaderBytes, tableEnd - kHeaderBytes,
               "artifact '" + name + "' section table");
  table->assign(*count, {});
  std::set<uint32_t> seen;
  for (Entry &e : *table) {
    TC_RETURN_IF_ERROR(t.u32(&e.kind, "section kind"));
    TC_RETURN_IF_ERROR(t.u32(&e.crc, "section checksum"));
    TC_RETURN_IF_ERROR(t.u64(&e.offset, "section offset"));
    TC_RETURN_IF_ERROR(t.u64(&e.size, "section size"));
    if (!seen.insert(e.kind).second)
      return err("duplicate section kind " + std::to_string(e.kind));
    if (e.offset < tableEnd || e.offset > fileSize || e.size > fileSize - e.offset)
      return err(std::string("section ") + sectionName(e.kind) + " (offset " +
                 std::to_string(e.offset) + ", size " + std::to_string(e.size) +
                 ") lies outside the file");
  }
  std::vector<Entry> sorted = *table;
  std::sort(sorted.begin(), sorted.end(),
            [](const Entry &a, const Entry &b) { return a.offset < b.offset; });
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i - 1].offset + sorted[i - 1].size > sorted[i].offset)
      return err("sections overlap");
  for (uint32_t k : {kMeta, kFunctions, kParams, kWeights})
    if (!seen.count(k))
      return err(std::string("missing section ") + sectionName(k));
  return Status::ok();
}

/// Reads the sections through `fetch(entry, dst)` (which fills dst with the
/// payload) and decodes them.
template <typename Fetch>
Status decodeAll(const std::vector<Entry> &table, const std::string &name,
                 Fetch fetch, Artifact *out) {
  *out = Artifact();
  std::vector<uint8_t> buf;
  for (const Entry &e : table) {
    bool known = e.kind >= kMeta && e.kind <= kDevice;
    if (!known)
      continue;
    std::vector<uint8_t> &dst = e.kind == kWeights ? out->weights : buf;
    TC_RETURN_IF_ERROR(fetch(e, &dst));
    if (crc32(dst.data(), dst.size()) != e.crc)
      return dataLoss("artifact '" + name + "': section " + sectionName(e.kind) +
                      " checksum mismatch (the file is corrupted)");
    if (e.kind != kWeights)
      TC_RETURN_IF_ERROR(decodeSection(e.kind, buf.data(), buf.size(), name, out));
  }
  return validateArtifact(*out).withPrefix("artifact '" + name + "'");
}

} // namespace

//===----------------------------------------------------------------------===//
// Public entry points
//===----------------------------------------------------------------------===//

Status serializeArtifact(const Artifact &artifact, std::vector<uint8_t> *out) {
  TC_RETURN_IF_ERROR(validateArtifact(artifact).withPrefix("cannot write artifact"));
  std::vector<std::vector<uint8_t>> storage;
  std::vector<Section> sections;
  encodeSections(artifact, &storage, &sections);
  std::vector<uint64_t> offsets;
  uint64_t fileSize;
  *out = encodeHeader(sections, &offsets, &fileSize);
  out->resize(fileSize, 0);
  for (size_t i = 0; i < sections.size(); ++i)
    if (sections[i].size)
      std::memcpy(out->data() + offsets[i], sections[i].data, sections[i].size);
  return Status::ok();
}

Status writeArtifact(const Artifact &artifact, const std::string &path) {
  TC_RETURN_IF_ERROR(
      validateArtifact(artifact).withPrefix("cannot write artifact '" + path + "'"));
  std::vector<std::vector<uint8_t>> storage;
  std::vector<Section> sections;
  encodeSections(artifact, &storage, &sections);
  std::vector<uint64_t> offsets;
  uint64_t fileSize;
  std::vector<uint8_t> head = encodeHeader(sections, &offsets, &fileSize);
  static const uint8_t kZeros[kAlign] = {};
  std::vector<std::pair<const uint8_t *, size_t>> chunks;
  chunks.push_back({head.data(), head.size()});
  for (size_t i = 0; i < sections.size(); ++i) {
    chunks.push_back({sections[i].data, sections[i].size});
    uint64_t end = offsets[i] + sections[i].size;
    uint64_t next = i + 1 < sections.size() ? offsets[i + 1] : fileSize;
    if (next > end)
      chunks.push_back({kZeros, static_cast<size_t>(next - end)});
  }
  return writeFileAtomic(path, chunks);
}

Status parseArtifact(const uint8_t *data, size_t size, Artifact *out,
                     const std::string &name) {
  uint32_t count = 0;
  std::vector<Entry> table;
  TC_RETURN_IF_ERROR(parseHeader(data, size, size, name, &count, &table));
  return decodeAll(
      table, name,
      [&](const Entry &e, std::vector<uint8_t> *dst) {
        dst->assign(data + e.offset, data + e.offset + e.size);
        return Status::ok();
      },
      out);
}

Status readArtifact(const std::string &path, Artifact *out) {
  // Read the header and table first, then each section straight into its
  // destination, so that the weights are not held twice.
  int fd = -1;
  TC_RETURN_IF_ERROR(openRegularFile(path, "artifact", &fd));
  std::FILE *f = ::fdopen(fd, "rb");
  if (!f) {
    ::close(fd);
    return ioError("cannot open artifact '" + path + "': " + std::strerror(errno));
  }
  struct Closer {
    std::FILE *f;
    ~Closer() { std::fclose(f); }
  } closer{f};
  if (std::fseek(f, 0, SEEK_END) != 0)
    return ioError("cannot seek in '" + path + "'");
  long end = std::ftell(f);
  if (end < 0)
    return ioError("cannot read '" + path + "' (is it a directory?)");
  uint64_t fileSize = static_cast<uint64_t>(end);
  auto readAt = [&](uint64_t offset, uint64_t n, uint8_t *dst) -> Status {
    if (std::fseek(f, static_cast<long>(offset), SEEK_SET) != 0 ||
        std::fread(dst, 1, n, f) != n)
      return ioError("cannot read " + std::to_string(n) + " bytes at offset " +
                     std::to_string(offset) + " of '" + path + "'");
    return Status::ok();
  };
  std::vector<uint8_t> head(std::min<uint64_t>(fileSize, kHeaderBytes));
  TC_RETURN_IF_ERROR(readAt(0, head.size(), head.data()));
  uint32_t count = 0;
  std::vector<Entry> table;
  TC_RETURN_IF_ERROR(parseHeader(head.data(), head.size(), fileSize, path, &count, &table));
  head.resize(kHeaderBytes + kEntryBytes * count);
  TC_RETURN_IF_ERROR(readAt(0, head.size(), head.data()));
  TC_RETURN_IF_ERROR(parseHeader(head.data(), head.size(), fileSize, path, &count, &table));
  return decodeAll(
      table, path,
      [&](const Entry &e, std::vector<uint8_t> *dst) -> Status {
        try {
          dst->resize(e.size);
        } catch (const std::bad_alloc &) {
          return Status(StatusCode::ResourceExhausted,
                        "cannot allocate " + std::to_string(e.size) +
                            " bytes for section " + sectionName(e.kind) + " of '" +
                            path + "'");
        }
        return readAt(e.offset, e.size, dst->data());
      },
      out);
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

Status validateFunction(const Function &fn) {
  std::string where = "function '" + fn.name + "'";
  int64_t nvalues = static_cast<int64_t>(fn.values.size());
  for (size_t i = 0; i < fn.values.size(); ++i) {
    const TensorType &t = fn.values[i];
    if (!dtypeIsValid(static_cast<uint8_t>(t.dtype)))
      return invalidArgument(where + ": value %" + std::to_string(i) + " has an invalid dtype");
    int64_t n;
    TC_RETURN_IF_ERROR(checkedNumElements(t.shape, &n)
                           .withPrefix(where + ": value %" + std::to_string(i)));
  }
  if (fn.inputNames.size() != fn.inputs.size() ||
      fn.outputNames.size() != fn.outputs.size())
    return invalidArgument(where + ": needs one name per input and per output");
  std::vector<bool> defined(fn.values.size(), false);
  auto check = [&](int32_t id, const std::string &what) -> Status {
    if (id < 0 || id >= nvalues)
      return invalidArgument(where + ": " + what + " refers to value %" +
                             std::to_string(id) + ", out of range [0, " +
                             std::to_string(nvalues) + ")");
    return Status::ok();
  };
  for (size_t i = 0; i < fn.inputs.size(); ++i) {
    TC_RETURN_IF_ERROR(check(fn.inputs[i], "input '" + fn.inputNames[i] + "'"));
    if (defined[fn.inputs[i]])
      return invalidArgument(where + ": value %" + std::to_string(fn.inputs[i]) +
                             " is defined twice");
    defined[fn.inputs[i]] = true;
  }
  for (size_t k = 0; k < fn.ops.size(); ++k) {
    const Op &op = fn.ops[k];
    std::string what = "op #" + std::to_string(k) + " (" + op.name + ")";
    for (int32_t id : op.operands) {
      TC_RETURN_IF_ERROR(check(id, what));
      if (!defined[id])
        return invalidArgument(where + ": " + what + " uses value %" +
                               std::to_string(id) + " before it is defined");
    }
    for (int32_t id : op.results) {
      TC_RETURN_IF_ERROR(check(id, what));
      if (defined[id])
        return invalidArgument(where + ": value %" + std::to_string(id) +
                               " is defined twice (by " + what + ")");
      defined[id] = true;
    }
    for (const auto &[key, attr] : op.attrs)
      if (attr.kind == Attr::Kind::Tensor)
        TC_RETURN_IF_ERROR(checkHostTensor(attr.tensor, where + ": " + what +
                                                            " attribute '" + key + "'"));
  }
  for (size_t i = 0; i < fn.outputs.size(); ++i) {
    TC_RETURN_IF_ERROR(check(fn.outputs[i], "output '" + fn.outputNames[i] + "'"));
    if (!defined[fn.outputs[i]])
      return invalidArgument(where + ": output '" + fn.outputNames[i] +
                             "' is never defined");
  }
  return Status::ok();
}

Status validateDeviceFunction(const DeviceFunction &f, const Artifact &a) {
  std::string where = "device function '" + f.name + "'";
  for (size_t i = 0; i < f.consts.size(); ++i)
    TC_RETURN_IF_ERROR(
        checkHostTensor(f.consts[i], where + ": constant #" + std::to_string(i)));
  for (size_t i = 0; i < f.buffers.size(); ++i) {
    const DeviceBuffer &b = f.buffers[i];
    std::string what = where + ": buffer #" + std::to_string(i) + " (" +
                       deviceSpaceName(b.space) + ")";
    if (!dtypeIsValid(static_cast<uint8_t>(b.type.dtype)))
      return invalidArgument(what + " has an invalid dtype");
    int64_t n;
    TC_RETURN_IF_ERROR(checkedNumElements(b.type.shape, &n).withPrefix(what));
    auto inside = [&](uint64_t size, const std::string &of) -> Status {
      if (b.offset > size || b.bytes > size - b.offset)
        return invalidArgument(what + " bytes [" + std::to_string(b.offset) + ", +" +
                               std::to_string(b.bytes) + ") lie outside the " +
                               std::to_string(size) + " bytes of " + of);
      return Status::ok();
    };
    switch (b.space) {
    case DeviceBuffer::Space::Arena:
      TC_RETURN_IF_ERROR(inside(f.arenaBytes, "the arena"));
      break;
    case DeviceBuffer::Space::Param: {
      // A parameter-table entry, or the persistent gradient "grad:<entry>"
      // (allocated by the runtime like the entry).
      const Parameter *p = a.findParam(b.name);
      if (!p && b.name.rfind("grad:", 0) == 0)
        p = a.findParam(b.name.substr(5));
      if (!p)
        return invalidArgument(what + " names unknown parameter '" + b.name + "'");
      int64_t pn;
      TC_RETURN_IF_ERROR(checkedNumElements(p->type.shape, &pn).withPrefix(what));
      TC_RETURN_IF_ERROR(inside(static_cast<uint64_t>(pn) * dtypeStorageBytes(p->type.dtype),
                                "parameter '" + b.name + "'"));
      break;
    }
    case DeviceBuffer::Space::Const:
      if (b.index < 0 || static_cast<size_t>(b.index) >= f.consts.size())
        return invalidArgument(what + " refers to constant #" + std::to_string(b.index) +
                               ", out of range [0, " + std::to_string(f.consts.size()) + ")");
      TC_RETURN_IF_ERROR(inside(f.consts[b.index].data.size(), "its constant"));
      break;
    case DeviceBuffer::Space::Input:
    case DeviceBuffer::Space::Output: {
      size_t count = b.space == DeviceBuffer::Space::Input ? f.inputNames.size()
                                                           : f.outputNames.size();
      if (b.index < 0 || static_cast<size_t>(b.index) >= count)
        return invalidArgument(what + " refers to position " + std::to_string(b.index) +
                               ", out of range [0, " + std::to_string(count) + ")");
      break;
    }
    }
  }
  if (f.outputs.size() != f.outputNames.size())
    return invalidArgument(where + ": needs one buffer per output name");
  for (size_t i = 0; i < f.outputs.size(); ++i)
    if (f.outputs[i] < 0 || static_cast<size_t>(f.outputs[i]) >= f.buffers.size())
      return invalidArgument(where + ": output '" + f.outputNames[i] + "' refers to buffer #" +
                             std::to_string(f.outputs[i]) + ", out of range [0, " +
                             std::to_string(f.buffers.size()) + ")");
  std::set<std::string> kernelNames;
  for (const KernelBinary &k : a.kernels)
    kernelNames.insert(k.name);
  int32_t nbuf = static_cast<int32_t>(f.buffers.size());
  for (size_t k = 0; k < f.ops.size(); ++k) {
    const DeviceOp &op = f.ops[k];
    std::string what = where + ": op #" + std::to_string(k) + " (" + op.kind + ")";
    static const std::set<std::string> kinds = {"launch", "library", "matmul", "copy",
                                                "fill",   "record",  "wait"};
    if (!kinds.count(op.kind))
      return invalidArgument(what + " has an unknown kind");
    for (const std::vector<int32_t> *ids : {&op.ins, &op.outs})
      for (int32_t id : *ids)
        if (id < 0 || id >= nbuf)
          return invalidArgument(what + " refers to buffer #" + std::to_string(id) +
                                 ", out of range [0, " + std::to_string(nbuf) + ")");
    // Artifacts compiled without cubins carry no kernels to check against;
    // a launch marked missing_kernel has none (the runtime refuses it).
    if (op.kind == "launch" && !a.kernels.empty() && !op.attrs.count("missing_kernel") &&
        !kernelNames.count(op.name))
      return invalidArgument(what + " launches unknown kernel '" + op.name + "'");
    for (const auto &[key, attr] : op.attrs)
      if (attr.kind == Attr::Kind::Tensor)
        TC_RETURN_IF_ERROR(checkHostTensor(attr.tensor, what + " attribute '" + key + "'"));
  }
  return Status::ok();
}

Status validateArtifact(const Artifact &a) {
  std::set<std::string> names;
  for (const Function &f : a.functions) {
    if (!names.insert(f.name).second)
      return invalidArgument("duplicate function '" + f.name + "'");
    TC_RETURN_IF_ERROR(validateFunction(f));
  }
  names.clear();
  for (const Parameter &p : a.params) {
    std::string where = "parameter '" + p.name + "'";
    if (!names.insert(p.name).second)
      return invalidArgument("duplicate " + where);
    if (!dtypeIsValid(static_cast<uint8_t>(p.type.dtype)))
      return invalidArgument(where + " has an invalid dtype");
    int64_t n;
    TC_RETURN_IF_ERROR(checkedNumElements(p.type.shape, &n).withPrefix(where));
    if (p.init != ParamInit::Data && p.hasData)
      return invalidArgument(where + " has data but a " + paramInitName(p.init) +
                             " initialiser");
    if (!std::isfinite(p.initArgs[0]) || !std::isfinite(p.initArgs[1]))
      return invalidArgument(where + " has a non-finite initialiser argument");
    if (p.init == ParamInit::Normal && p.initArgs[1] < 0)
      return invalidArgument(where + ": normal initialiser with std " +
                             std::to_string(p.initArgs[1]) + " < 0");
    if (p.init == ParamInit::Uniform && p.initArgs[0] > p.initArgs[1])
      return invalidArgument(where + ": uniform initialiser with low " +
                             std::to_string(p.initArgs[0]) + " > high " +
                             std::to_string(p.initArgs[1]));
    if (p.init != ParamInit::Data && p.init != ParamInit::Zeros &&
        !dtypeIsFloat(p.type.dtype))
      return invalidArgument(where + " (" + typeToString(p.type) + ") is not floating-point, "
                             "so it cannot have a " + paramInitName(p.init) + " initialiser");
    if (p.kind == ParamKind::OptimizerState && p.trainable)
      return invalidArgument(where + " is optimizer state and cannot be trainable");
    if (!p.hasData)
      continue;
    uint64_t want = static_cast<uint64_t>(n) * dtypeStorageBytes(p.type.dtype);
    if (p.bytes != want)
      return invalidArgument(where + " (" + typeToString(p.type) + ") has " +
                             std::to_string(p.bytes) + " bytes, needs " +
                             std::to_string(want));
    if (p.offset > a.weights.size() || p.bytes > a.weights.size() - p.offset)
      return invalidArgument(where + " bytes [" + std::to_string(p.offset) + ", +" +
                             std::to_string(p.bytes) + ") lie outside the " +
                             std::to_string(a.weights.size()) + " weight bytes");
  }
  // The program against the parameter table: every tc.parameter a function
  // reads is in the table with the type the program computes with, so that
  // an inconsistent (but checksum-valid) artifact fails when it is loaded,
  // not in the middle of a step.
  for (const Function &f : a.functions)
    for (const Op &op : f.ops) {
      if (op.name != "tc.parameter")
        continue;
      auto it = op.attrs.find("name");
      if (it == op.attrs.end() || it->second.kind != Attr::Kind::String || op.results.size() != 1)
        return invalidArgument("function '" + f.name + "': a tc.parameter without a name");
      const std::string &n = it->second.s;
      const Parameter *p = a.findParam(n);
      if (!p)
        return invalidArgument("function '" + f.name + "' reads parameter '" + n +
                               "', which is not in the parameter table");
      const TensorType &want = f.values[static_cast<size_t>(op.results[0])];
      if (p->type != want)
        return invalidArgument("function '" + f.name + "' reads parameter '" + n + "' as " +
                               typeToString(want) + ", the parameter table has " +
                               typeToString(p->type));
    }
  names.clear();
  for (const DeviceFunction &f : a.deviceFunctions) {
    if (!names.insert(f.name).second)
      return invalidArgument("duplicate device function '" + f.name + "'");
    TC_RETURN_IF_ERROR(validateDeviceFunction(f, a));
  }
  return Status::ok();
}

Parameter &appendParameter(Artifact *artifact, const std::string &name,
                           const HostTensor &t, bool trainable) {
  Parameter p;
  p.name = name;
  p.type = t.type;
  p.trainable = trainable;
  p.hasData = true;
  p.offset = alignUp(artifact->weights.size());
  p.bytes = t.data.size();
  artifact->weights.resize(p.offset, 0);
  artifact->weights.insert(artifact->weights.end(), t.data.begin(), t.data.end());
  artifact->params.push_back(std::move(p));
  return artifact->params.back();
}

} // namespace tc::rt
