//===- name_regex.h - the one regex dialect of tc's flags -------*- C++ -*-===//
//
// Every flag that takes a regex over tensor names (tc-compile --trainable,
// --freeze, --no-decay, --init-param, and later --keep-high-precision) reads
// it here: POSIX extended regular expressions, as `grep -E` reads them
// (glibc's regcomp with REG_EXTENDED), searched anywhere in the name (anchor
// with ^ and $). Perl's \d and \D are not ERE and glibc would read them as a
// plain 'd' without a word, so they are refused with the fix ([0-9]).
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_SCHEMA_NAME_REGEX_H
#define TC_RUNTIME_SCHEMA_NAME_REGEX_H

#include <memory>
#include <string>

#include "runtime/src/base/status.h"

namespace tc::rt {

class NameRegex {
public:
  NameRegex();
  ~NameRegex();
  NameRegex(NameRegex &&) noexcept;
  NameRegex &operator=(NameRegex &&) noexcept;

  /// Compiles `pattern`; InvalidArgument "FLAG: bad regex 'P': why" when it
  /// is not a valid ERE.
  static Status compile(const std::string &pattern, const std::string &flag, NameRegex *out);
  /// Whether the pattern matches anywhere in `name`.
  bool search(const std::string &name) const;
  const std::string &pattern() const { return pattern_; }

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string pattern_;
};

} // namespace tc::rt

#endif // TC_RUNTIME_SCHEMA_NAME_REGEX_H
