//===- npy.cpp - numpy .npy files -----------------------------------------===//
#include "runtime/src/base/npy.h"

#include <cstring>
#include <optional>

#include "runtime/src/base/file_io.h"
#include "runtime/src/base/host_tensor.h"

namespace tc::rt {

namespace {

const uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

struct DescrEntry {
  const char *descr; // canonical spelling, as numpy writes it
  DType type;
};
const DescrEntry kDescrs[] = {
    {"<f4", DType::F32}, {"<f8", DType::F64}, {"<f2", DType::F16},
    {"|b1", DType::I1},  {"|i1", DType::I8},  {"<i2", DType::I16},
    {"<i4", DType::I32}, {"<i8", DType::I64}, {"|u1", DType::U8},
    {"<u2", DType::U16}, {"<u4", DType::U32}, {"<u8", DType::U64},
};

/// A tiny parser for the header, a Python dict literal such as
/// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
public:
  HeaderParser(const std::string &text, const std::string &name)
      : s_(text), name_(name) {}

  Status parse(std::string *descr, bool *fortran, std::vector<int64_t> *shape) {
    bool haveDescr = false, haveFortran = false, haveShape = false;
    skipSpace();
    if (!eat('{'))
      return error("expected '{'");
    while (true) {
      skipSpace();
      if (eat('}'))
        break;
      std::string key;
      TC_RETURN_IF_ERROR(parseString(&key));
      skipSpace();
      if (!eat(':'))
        return error("expected ':' after '" + key + "'");
      skipSpace();
      if (key == "descr") {
        TC_RETURN_IF_ERROR(parseString(descr));
        haveDescr = true;
      } else if (key == "fortran_order") {
        if (word("True"))
          *fortran = true;
        else if (word("False"))
          *fortran = false;
        else
          return error("fortran_order must be True or False");
        haveFortran = true;
      } else if (key == "shape") {
        TC_RETURN_IF_ERROR(parseShape(shape));
        haveShape = true;
      } else {
        return error("unexpected key '" + key + "'");
      }
      skipSpace();
      if (eat(','))
        continue;
      skipSpace();
      if (eat('}'))
        break;
      return error("expected ',' or '}'");
    }
    if (!haveDescr || !haveFortran || !haveShape)
      return error("needs the keys 'descr', 'fortran_order' and 'shape'");
    return Status::ok();
  }

private:
  Status error(const std::string &msg) const {
    return dataLoss("'" + name_ + "': bad .npy header: " + msg);
  }
  void skipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' ||
                                s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool word(const char *w) {
    size_t n = std::strlen(w);
    if (s_.compare(pos_, n, w) == 0) {
      pos_ += n;
      return true;
    }
    return false;
  }
  Status parseString(std::string *out) {
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"'))
      return error("expected a quoted string");
    char q = s_[pos_++];
    size_t end = s_.find(q, pos_);
    if (end == std::string::npos)
      return error("unterminated string");
    *out = s_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return Status::ok();
  }
  Status parseShape(std::vector<int64_t> *shape) {
    shape->clear();
    if (!eat('('))
      return error("shape must be a tuple");
    while (true) {
      skipSpace();
      if (eat(')'))
        return Status::ok();
      if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9')
        return error("shape entries must be non-negative integers");
      int64_t v = 0;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        if (v > (int64_t{1} << 55))
          return error("shape entry too large");
        v = v * 10 + (s_[pos_++] - '0');
      }
      eat('L'); // Python 2 longs
      shape->push_back(v);
      skipSpace();
      if (eat(','))
        continue;
      skipSpace();
      if (eat(')'))
        return Status::ok();
      return error("expected ',' or ')' in shape");
    }
  }

  const std::string &s_;
  const std::string &name_;
  size_t pos_ = 0;
};

std::optional<DType> dtypeFromDescr(const std::string &d) {
  if (d.size() != 3)
    return std::nullopt;
  char order = d[0];
  std::string rest = d.substr(1);
  for (const DescrEntry &e : kDescrs) {
    if (rest != e.descr + 1)
      continue;
    bool oneByte = dtypeStorageBytes(e.type) == 1;
    if (order == '<' || (oneByte && (order == '|' || order == '=')))
      return e.type;
  }
  return std::nullopt;
}

} // namespace

const char *npyDescr(DType t) {
  for (const DescrEntry &e : kDescrs)
    if (e.type == t)
      return e.descr;
  return nullptr;
}

Status parseNpy(const uint8_t *data, size_t size, const std::string &name,
                HostTensor *out) {
  auto err = [&](const std::string &msg) {
    return dataLoss("'" + name + "': " + msg);
  };
  if (size < 10 || std::memcmp(data, kMagic, 6) != 0)
    return err("not a .npy file (bad magic)");
  uint8_t major = data[6];
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = data[8] | (static_cast<size_t>(data[9]) << 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12)
      return err("truncated .npy header");
    headerLen = data[8] | (static_cast<size_t>(data[9]) << 8) |
                (static_cast<size_t>(data[10]) << 16) |
                (static_cast<size_t>(data[11]) << 24);
    headerStart = 12;
  } else {
    return err("unsupported .npy version " + std::to_string(major) + "." +
               std::to_string(data[7]));
  }
  if (headerLen > size - headerStart)
    return err("truncated .npy header (" + std::to_string(headerLen) +
               " header bytes announced, " + std::to_string(size - headerStart) +
               " present)");
  std::string header(reinterpret_cast<const char *>(data + headerStart), headerLen);
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
  TC_RETURN_IF_ERROR(HeaderParser(header, name).parse(&descr, &fortran, &shape));
  if (fortran)
    return invalidArgument("'" + name +
                           "': Fortran-order arrays are not supported (save a "
                           "C-contiguous array, e.g. np.ascontiguousarray)");
  std::optional<DType> type = dtypeFromDescr(descr);
  if (!type) {
    if (!descr.empty() && descr[0] == '>')
      return invalidArgument("'" + name + "': big-endian dtype '" + descr +
                             "' is not supported (use '<')");
    return invalidArgument("'" + name + "': unsupported dtype '" + descr + "'");
  }
  int64_t n = 0;
  TC_RETURN_IF_ERROR(checkedNumElements(shape, &n).withPrefix("'" + name + "'"));
  uint64_t want = static_cast<uint64_t>(n) * dtypeStorageBytes(*type);
  size_t have = size - headerStart - headerLen;
  if (have != want)
    return err("data has " + std::to_string(have) + " bytes, " +
               typeToString({*type, shape}) + " needs " + std::to_string(want));
  out->type = {*type, shape};
  const uint8_t *p = data + headerStart + headerLen;
  out->data.assign(p, p + want);
  if (*type == DType::I1)
    for (uint8_t &b : out->data)
      b = b != 0;
  return Status::ok();
}

Status readNpy(const std::string &path, HostTensor *out) {
  std::vector<uint8_t> bytes;
  TC_RETURN_IF_ERROR(readFileBytes(path, &bytes));
  return parseNpy(bytes.data(), bytes.size(), path, out);
}

Status serializeNpy(const HostTensor &t, std::vector<uint8_t> *out) {
  const char *descr = npyDescr(t.type.dtype);
  if (!descr)
    return invalidArgument(std::string("dtype ") + dtypeName(t.type.dtype) +
                           " has no numpy equivalent (.npy)");
  TC_RETURN_IF_ERROR(checkHostTensor(t, "tensor"));
  std::string shape = "(";
  for (size_t i = 0; i < t.type.shape.size(); ++i)
    shape += std::to_string(t.type.shape[i]) + (t.type.shape.size() == 1 ? "," : (i + 1 < t.type.shape.size() ? ", " : ""));
  shape += ")";
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces and a final newline so that the data starts 64-aligned.
  bool v2 = header.size() + 1 + 10 > 65535;
  size_t prefix = v2 ? 12 : 10;
  size_t total = prefix + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  out->assign(kMagic, kMagic + 6);
  out->push_back(v2 ? 2 : 1);
  out->push_back(0);
  size_t len = header.size();
  out->push_back(static_cast<uint8_t>(len));
  out->push_back(static_cast<uint8_t>(len >> 8));
  if (v2) {
    out->push_back(static_cast<uint8_t>(len >> 16));
    out->push_back(static_cast<uint8_t>(len >> 24));
  }
  out->insert(out->end(), header.begin(), header.end());
  out->insert(out->end(), t.data.begin(), t.data.end());
  return Status::ok();
}

Status writeNpy(const std::string &path, const HostTensor &t) {
  std::vector<uint8_t> bytes;
  TC_RETURN_IF_ERROR(serializeNpy(t, &bytes).withPrefix("'" + path + "'"));
  return writeFileAtomic(path, bytes.data(), bytes.size());
}

} // namespace tc::rt
