//===- name_regex.cpp - the one regex dialect of tc's flags ---------------===//
#include "runtime/src/schema/name_regex.h"

#include <regex.h>

namespace tc::rt {

struct NameRegex::Impl {
  regex_t re;
  bool compiled = false; // regcomp leaves nothing to free when it fails
  ~Impl() {
    if (compiled)
      ::regfree(&re);
  }
};

NameRegex::NameRegex() = default;
NameRegex::~NameRegex() = default;
NameRegex::NameRegex(NameRegex &&) noexcept = default;
NameRegex &NameRegex::operator=(NameRegex &&) noexcept = default;

Status NameRegex::compile(const std::string &pattern, const std::string &flag, NameRegex *out) {
  std::string prefix = flag + ": bad regex '" + pattern + "': ";
  if (pattern.find('\0') != std::string::npos)
    return invalidArgument(prefix + "it contains a NUL byte");
  for (size_t i = 0; i + 1 < pattern.size(); ++i) {
    if (pattern[i] != '\\')
      continue;
    char c = pattern[i + 1];
    if (c == 'd' || c == 'D')
      return invalidArgument(prefix + "\\" + std::string(1, c) + " is Perl syntax, not POSIX "
                             "extended (write " + (c == 'd' ? "[0-9]" : "[^0-9]") + ")");
    ++i; // skip the escaped character
  }
  auto impl = std::make_unique<Impl>();
  int rc = ::regcomp(&impl->re, pattern.c_str(), REG_EXTENDED | REG_NOSUB);
  if (rc != 0) {
    char why[256];
    ::regerror(rc, &impl->re, why, sizeof why);
    return invalidArgument(prefix + why);
  }
  impl->compiled = true;
  out->impl_ = std::move(impl);
  out->pattern_ = pattern;
  return Status::ok();
}

bool NameRegex::search(const std::string &name) const {
  return impl_ && ::regexec(&impl_->re, name.c_str(), 0, nullptr, 0) == 0;
}

} // namespace tc::rt
