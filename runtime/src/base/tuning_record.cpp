//===- tuning_record.cpp - choices a timing made, kept across processes ---===//
#include "runtime/src/base/tuning_record.h"

#include <cstdint>
#include <vector>

#include "runtime/src/base/file_io.h"

namespace tc::rt {

namespace {
constexpr const char kMagic[] = "tc-tuning 1";

bool plainField(const std::string &s) {
  return !s.empty() && s.find_first_of("\t\n\r") == std::string::npos;
}
} // namespace

TuningRecord::TuningRecord(std::string path, std::string identity)
    : path_(std::move(path)), identity_(std::move(identity)) {
  if (!path_.empty())
    choices_ = readFile();
}

std::map<std::string, std::string> TuningRecord::readFile() const {
  std::map<std::string, std::string> out;
  std::vector<uint8_t> bytes;
  if (!readFileBytes(path_, &bytes).isOk())
    return out;
  std::string text(bytes.begin(), bytes.end());
  size_t pos = 0;
  bool first = true;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos)
      break; // a line without its newline: cut short, not a choice
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    size_t tab = line.find('\t');
    if (first) {
      // Another format or identity: none of its lines are this record's.
      if (tab == std::string::npos || line.substr(0, tab) != kMagic ||
          line.substr(tab + 1) != identity_)
        return {};
      first = false;
      continue;
    }
    if (tab == std::string::npos || line.find('\t', tab + 1) != std::string::npos)
      continue;
    std::string key = line.substr(0, tab), value = line.substr(tab + 1);
    if (plainField(key) && plainField(value))
      out[key] = value;
  }
  return out;
}

std::optional<std::string> TuningRecord::get(const std::string &key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = choices_.find(key);
  if (it == choices_.end())
    return std::nullopt;
  return it->second;
}

Status TuningRecord::put(const std::string &key, const std::string &value) {
  if (!plainField(key) || !plainField(value))
    return invalidArgument("tuning record: a key or value is empty or holds a tab or newline ('" +
                           key + "')");
  std::lock_guard<std::mutex> lock(mu_);
  choices_[key] = value;
  if (path_.empty())
    return Status::ok();
  if (!plainField(identity_))
    return invalidArgument("tuning record '" + path_ + "': an identity with a tab or newline");
  std::map<std::string, std::string> merged = readFile();
  for (const auto &[k, v] : choices_)
    merged[k] = v;
  std::string text = std::string(kMagic) + "\t" + identity_ + "\n";
  for (const auto &[k, v] : merged)
    text += k + "\t" + v + "\n";
  size_t slash = path_.rfind('/');
  if (slash != std::string::npos && slash > 0)
    TC_RETURN_IF_ERROR(makeDirectories(path_.substr(0, slash)));
  return writeFileAtomic(path_, reinterpret_cast<const uint8_t *>(text.data()), text.size());
}

std::string TuningRecord::fileNameOf(const std::string &s) {
  std::string out = s;
  for (char &c : out)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-'))
      c = '_';
  return out;
}

} // namespace tc::rt
