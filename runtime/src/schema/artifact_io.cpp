//===- artifact_io.cpp - the artifact file: encode and decode -------------===//
//
// The byte format of artifact.h. Validation (run before every write and
// after every read) is artifact_validate.cpp.
//
//===----------------------------------------------------------------------===//
#include "runtime/src/schema/artifact.h"
#include "runtime/src/schema/version.h"

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
// The records, described once
//===----------------------------------------------------------------------===//
//
// Each `<record>Fields(v, record)` lists a record's fields in file order (the
// encodings of artifact.h). The Encoder (a const record) writes them and the
// Decoder (a record to fill) reads and checks them; the checks only a reader
// needs sit under `if constexpr (V::kDecoding)`.

/// Writes fields; never fails.
class Encoder {
public:
  static constexpr bool kDecoding = false;
  explicit Encoder(std::vector<uint8_t> *out) : w_(out) {}

  Status u8(uint8_t v, const char *) {
    w_.u8(v);
    return Status::ok();
  }
  Status u64(uint64_t v, const char *) {
    w_.u64(v);
    return Status::ok();
  }
  Status i32(int32_t v, const char *) {
    w_.i32(v);
    return Status::ok();
  }
  Status i64(int64_t v, const char *) {
    w_.i64(v);
    return Status::ok();
  }
  Status f64(double v, const char *) {
    w_.f64(v);
    return Status::ok();
  }
  Status str(const std::string &s, const char *) {
    w_.str(s);
    return Status::ok();
  }
  /// u64 n, then n bytes.
  Status blob(const std::vector<uint8_t> &b, const char *, const char *) {
    w_.u64(b.size());
    w_.bytes(b.data(), b.size());
    return Status::ok();
  }
  /// A u8 enumeration of at most `max`.
  template <class E> Status enumeration(E e, E, const char *, const std::string &) {
    return u8(static_cast<uint8_t>(e), nullptr);
  }
  /// u32 count, then each element.
  template <class T, class Each>
  Status list(const std::vector<T> &v, size_t, const char *, Each each) {
    w_.u32(static_cast<uint32_t>(v.size()));
    for (const T &x : v)
      TC_RETURN_IF_ERROR(each(x));
    return Status::ok();
  }
  /// u32 count, then (a[i], b[i]) for each i: two parallel vectors.
  template <class A, class B, class Each>
  Status zipped(const std::vector<A> &a, const std::vector<B> &b, size_t, const char *, Each each) {
    w_.u32(static_cast<uint32_t>(a.size()));
    for (size_t i = 0; i < a.size(); ++i)
      TC_RETURN_IF_ERROR(each(a[i], b[i]));
    return Status::ok();
  }
  /// u32 count, then (str key, value) per entry.
  template <class T, class Each, class Duplicate>
  Status map(const std::map<std::string, T> &m, size_t, const char *, const char *, Each each,
             Duplicate) {
    w_.u32(static_cast<uint32_t>(m.size()));
    for (const auto &[key, value] : m) {
      w_.str(key);
      TC_RETURN_IF_ERROR(each(value));
    }
    return Status::ok();
  }
  Status error(const std::string &) const { return Status::ok(); }

private:
  ByteWriter w_;
};

/// Reads fields, checking every count against the bytes left.
class Decoder {
public:
  static constexpr bool kDecoding = true;
  explicit Decoder(ByteReader &r) : r_(r) {}

  Status u8(uint8_t &v, const char *field) { return r_.u8(&v, field); }
  Status u64(uint64_t &v, const char *field) { return r_.u64(&v, field); }
  Status i32(int32_t &v, const char *field) { return r_.i32(&v, field); }
  Status i64(int64_t &v, const char *field) { return r_.i64(&v, field); }
  Status f64(double &v, const char *field) { return r_.f64(&v, field); }
  Status str(std::string &s, const char *field) { return r_.str(&s, field); }
  Status blob(std::vector<uint8_t> &b, const char *sizeField, const char *dataField) {
    uint64_t n;
    TC_RETURN_IF_ERROR(r_.u64(&n, sizeField));
    return r_.bytes(&b, n, dataField);
  }
  template <class E> Status enumeration(E &e, E max, const char *field, const std::string &bad) {
    uint8_t v;
    TC_RETURN_IF_ERROR(r_.u8(&v, field));
    if (v > static_cast<uint8_t>(max))
      return r_.error(bad + " " + std::to_string(v));
    e = static_cast<E>(v);
    return Status::ok();
  }
  /// `minBytes`: the fewest bytes one element takes (bounds the count).
  template <class T, class Each>
  Status list(std::vector<T> &v, size_t minBytes, const char *field, Each each) {
    uint32_t n;
    TC_RETURN_IF_ERROR(r_.count(&n, minBytes, field));
    v.resize(n);
    for (T &x : v)
      TC_RETURN_IF_ERROR(each(x));
    return Status::ok();
  }
  template <class A, class B, class Each>
  Status zipped(std::vector<A> &a, std::vector<B> &b, size_t minBytes, const char *field,
                Each each) {
    uint32_t n;
    TC_RETURN_IF_ERROR(r_.count(&n, minBytes, field));
    a.resize(n);
    b.resize(n);
    for (uint32_t i = 0; i < n; ++i)
      TC_RETURN_IF_ERROR(each(a[i], b[i]));
    return Status::ok();
  }
  /// `duplicate()`: the error text for a key given twice ("" keeps the last).
  template <class T, class Each, class Duplicate>
  Status map(std::map<std::string, T> &m, size_t minBytes, const char *field,
             const char *keyField, Each each, Duplicate duplicate) {
    uint32_t n;
    TC_RETURN_IF_ERROR(r_.count(&n, minBytes, field));
    for (uint32_t i = 0; i < n; ++i) {
      std::string key;
      TC_RETURN_IF_ERROR(r_.str(&key, keyField));
      T value;
      TC_RETURN_IF_ERROR(each(value));
      if (m.count(key)) {
        std::string why = duplicate(key);
        if (!why.empty())
          return r_.error(why);
      }
      m[key] = std::move(value);
    }
    return Status::ok();
  }
  Status error(const std::string &msg) const { return r_.error(msg); }

private:
  ByteReader &r_;
};

/// type: u8 dtype, u32 rank, i64 dim * rank.
template <class V, class R> Status typeFields(V &v, R &t) {
  uint8_t dt = static_cast<uint8_t>(t.dtype);
  TC_RETURN_IF_ERROR(v.u8(dt, "dtype"));
  if constexpr (V::kDecoding) {
    if (!dtypeIsValid(dt))
      return v.error("invalid dtype number " + std::to_string(dt));
    t.dtype = static_cast<DType>(dt);
  }
  TC_RETURN_IF_ERROR(v.list(t.shape, 8, "rank", [&](auto &d) { return v.i64(d, "dimension"); }));
  if constexpr (V::kDecoding) {
    int64_t n;
    Status st = checkedNumElements(t.shape, &n);
    if (!st.isOk())
      return v.error(st.message());
  }
  return Status::ok();
}

/// attr: u8 kind, then the value of that kind.
template <class V, class R> Status attrFields(V &v, R &a) {
  TC_RETURN_IF_ERROR(
      v.enumeration(a.kind, Attr::Kind::Tensor, "attribute kind", "invalid attribute kind"));
  switch (a.kind) {
  case Attr::Kind::Int:
    return v.i64(a.i, "int attribute");
  case Attr::Kind::Float:
    return v.f64(a.f, "float attribute");
  case Attr::Kind::String:
    return v.str(a.s, "string attribute");
  case Attr::Kind::Ints:
    return v.list(a.ints, 8, "ints attribute", [&](auto &x) { return v.i64(x, "ints attribute"); });
  case Attr::Kind::Floats:
    return v.list(a.floats, 8, "floats attribute",
                  [&](auto &x) { return v.f64(x, "floats attribute"); });
  case Attr::Kind::Tensor:
    TC_RETURN_IF_ERROR(typeFields(v, a.tensor.type));
    return v.blob(a.tensor.data, "tensor attribute size", "tensor attribute data");
  }
  return Status::ok();
}

/// u32 nattrs, (str key, attr) * nattrs; a key given twice is an error
/// naming `owner` ("op tc.add").
template <class V, class M>
Status attrMapFields(V &v, M &attrs, const char *field, const std::string &owner) {
  return v.map(
      attrs, 5, field, "attribute name", [&](auto &a) { return attrFields(v, a); },
      [&](const std::string &key) { return "duplicate attribute '" + key + "' in " + owner; });
}

template <class V, class R> Status idListFields(V &v, R &ids, const char *what) {
  return v.list(ids, 4, what, [&](auto &id) { return v.i32(id, what); });
}

/// function: name, values, inputs, outputs, ops (artifact.h).
template <class V, class R> Status functionFields(V &v, R &f) {
  TC_RETURN_IF_ERROR(v.str(f.name, "function name"));
  TC_RETURN_IF_ERROR(v.list(f.values, 5, "values", [&](auto &t) { return typeFields(v, t); }));
  TC_RETURN_IF_ERROR(v.zipped(f.inputs, f.inputNames, 8, "inputs", [&](auto &id, auto &name) {
    TC_RETURN_IF_ERROR(v.i32(id, "input id"));
    return v.str(name, "input name");
  }));
  TC_RETURN_IF_ERROR(v.zipped(f.outputs, f.outputNames, 8, "outputs", [&](auto &id, auto &name) {
    TC_RETURN_IF_ERROR(v.i32(id, "output id"));
    return v.str(name, "output name");
  }));
  return v.list(f.ops, 16, "ops", [&](auto &op) {
    TC_RETURN_IF_ERROR(v.str(op.name, "op name"));
    TC_RETURN_IF_ERROR(idListFields(v, op.operands, "operands"));
    TC_RETURN_IF_ERROR(idListFields(v, op.results, "results"));
    return attrMapFields(v, op.attrs, "attributes", "op " + op.name);
  });
}

/// param: name, type, flags, kind, initialiser, two f64 arguments, offset, bytes.
template <class V, class R> Status paramFields(V &v, R &p) {
  TC_RETURN_IF_ERROR(v.str(p.name, "param name"));
  TC_RETURN_IF_ERROR(typeFields(v, p.type));
  uint8_t flags = static_cast<uint8_t>((p.trainable ? 1 : 0) | (p.hasData ? 2 : 0));
  TC_RETURN_IF_ERROR(v.u8(flags, "param flags"));
  if constexpr (V::kDecoding) {
    p.trainable = flags & 1;
    p.hasData = flags & 2;
    if (flags & ~3u)
      return v.error("parameter '" + p.name + "' has unknown flags " + std::to_string(flags));
  }
  TC_RETURN_IF_ERROR(v.enumeration(p.kind, ParamKind::OptimizerState, "param kind",
                                   "parameter '" + p.name + "' has unknown kind"));
  TC_RETURN_IF_ERROR(v.enumeration(p.init, ParamInit::Uniform, "param initialiser",
                                   "parameter '" + p.name + "' has unknown initialiser"));
  TC_RETURN_IF_ERROR(v.f64(p.initArgs[0], "param initialiser argument"));
  TC_RETURN_IF_ERROR(v.f64(p.initArgs[1], "param initialiser argument"));
  TC_RETURN_IF_ERROR(v.u64(p.offset, "param offset"));
  return v.u64(p.bytes, "param bytes");
}

/// kernel: name, arch, CUDA source, PTX, cubin.
template <class V, class R> Status kernelFields(V &v, R &k) {
  TC_RETURN_IF_ERROR(v.str(k.name, "kernel name"));
  TC_RETURN_IF_ERROR(v.str(k.arch, "kernel arch"));
  TC_RETURN_IF_ERROR(v.str(k.source, "kernel source"));
  TC_RETURN_IF_ERROR(v.str(k.ptx, "kernel ptx"));
  return v.blob(k.cubin, "kernel cubin size", "kernel cubin");
}

/// devfn: name, arena bytes, inputs, outputs, constants, buffers, devops.
template <class V, class R> Status deviceFunctionFields(V &v, R &f) {
  TC_RETURN_IF_ERROR(v.str(f.name, "device function name"));
  TC_RETURN_IF_ERROR(v.u64(f.arenaBytes, "arena size"));
  TC_RETURN_IF_ERROR(v.list(f.inputNames, 4, "device inputs",
                            [&](auto &n) { return v.str(n, "device input name"); }));
  TC_RETURN_IF_ERROR(
      v.zipped(f.outputs, f.outputNames, 8, "device outputs", [&](auto &id, auto &name) {
        TC_RETURN_IF_ERROR(v.i32(id, "device output buffer"));
        return v.str(name, "device output name");
      }));
  // type (u8 + u32) and the u64 size.
  TC_RETURN_IF_ERROR(v.list(f.consts, 13, "device constants", [&](auto &t) {
    TC_RETURN_IF_ERROR(typeFields(v, t.type));
    return v.blob(t.data, "device constant size", "device constant data");
  }));
  // u8 space, u64 offset, u64 bytes, type (5), str (4), i32 index.
  TC_RETURN_IF_ERROR(v.list(f.buffers, 34, "device buffers", [&](auto &b) {
    TC_RETURN_IF_ERROR(v.enumeration(b.space, DeviceBuffer::Space::Output, "buffer space",
                                     "invalid buffer space"));
    TC_RETURN_IF_ERROR(v.u64(b.offset, "buffer offset"));
    TC_RETURN_IF_ERROR(v.u64(b.bytes, "buffer bytes"));
    TC_RETURN_IF_ERROR(typeFields(v, b.type));
    TC_RETURN_IF_ERROR(v.str(b.name, "buffer name"));
    return v.i32(b.index, "buffer index");
  }));
  // kind, name (4 + 4), ins, outs, attrs (4 each).
  return v.list(f.ops, 20, "device ops", [&](auto &op) {
    TC_RETURN_IF_ERROR(v.str(op.kind, "device op kind"));
    TC_RETURN_IF_ERROR(v.str(op.name, "device op name"));
    TC_RETURN_IF_ERROR(idListFields(v, op.ins, "device op inputs"));
    TC_RETURN_IF_ERROR(idListFields(v, op.outs, "device op outputs"));
    return attrMapFields(v, op.attrs, "device op attributes", "device op " + op.kind);
  });
}

/// The payload of section `kind` (every kind but WEIGHTS, which is raw).
template <class V, class A> Status sectionFields(V &v, uint32_t kind, A &a) {
  switch (kind) {
  case kMeta:
    TC_RETURN_IF_ERROR(v.str(a.target, "target"));
    return v.str(a.producer, "producer");
  case kFunctions:
    return v.list(a.functions, 20, "functions", [&](auto &f) { return functionFields(v, f); });
  case kParams:
    // name (4), type (5), flags/kind/init (3), 2 f64 init args, offset, bytes.
    return v.list(a.params, 44, "params", [&](auto &p) { return paramFields(v, p); });
  case kReports:
    return v.map(
        a.reports, 8, "reports", "report name",
        [&](auto &text) { return v.str(text, "report text"); },
        [](const std::string &) { return std::string(); });
  case kKernels:
    // name, arch, source, ptx (u32 lengths) and the u64 cubin size.
    return v.list(a.kernels, 24, "kernels", [&](auto &k) { return kernelFields(v, k); });
  case kDevice:
    return v.list(a.deviceFunctions, 32, "device functions",
                  [&](auto &f) { return deviceFunctionFields(v, f); });
  default:
    return Status::ok();
  }
}

//===----------------------------------------------------------------------===//
// Encoding
//===----------------------------------------------------------------------===//

struct Section {
  uint32_t kind;
  const uint8_t *data;
  size_t size;
};

/// Encodes everything but the weights into `storage` and describes the
/// sections (the WEIGHTS section points into the artifact itself).
void encodeSections(const Artifact &a, std::vector<std::vector<uint8_t>> *storage,
                    std::vector<Section> *sections) {
  // Only GPU artifacts carry kernels and device functions; CPU artifacts
  // stay byte-identical to what readers without those sections expect.
  std::vector<uint32_t> kinds = {kMeta, kFunctions, kParams, kWeights, kReports};
  if (!a.kernels.empty())
    kinds.push_back(kKernels);
  if (!a.deviceFunctions.empty())
    kinds.push_back(kDevice);
  storage->assign(kinds.size(), {});
  sections->clear();
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (kinds[i] == kWeights) {
      sections->push_back({kWeights, a.weights.data(), a.weights.size()});
      continue;
    }
    Encoder e(&(*storage)[i]);
    (void)sectionFields(e, kinds[i], a);
    sections->push_back({kinds[i], (*storage)[i].data(), (*storage)[i].size()});
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

Status decodeSection(uint32_t kind, const uint8_t *data, size_t size,
                     const std::string &name, Artifact *out) {
  if (kind < kMeta || kind > kDevice || kind == kWeights)
    return Status::ok();
  ByteReader r(data, size, "artifact '" + name + "' section " + sectionName(kind));
  Decoder d(r);
  TC_RETURN_IF_ERROR(sectionFields(d, kind, *out));
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
