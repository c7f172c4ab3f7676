//===- cli.h - what every tool's command line shares -------------*- C++ -*-===//
//
// Header-only helpers for the tools' flag parsing: one wording for an unknown
// option, with the closest option the tool's own help text names.
//
//===----------------------------------------------------------------------===//
#ifndef TC_TOOLS_CLI_H
#define TC_TOOLS_CLI_H

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "runtime/include/tc/runtime.h"

namespace tc::cli {

/// The version every tool prints for --version (tc_version()).
inline const char *const kVersion = tc_version();

/// Every "--name" token of a help text (the options it documents).
inline std::vector<std::string> optionsIn(const std::string &usage) {
  std::vector<std::string> out;
  for (size_t p = usage.find("--"); p != std::string::npos; p = usage.find("--", p + 2)) {
    if (p > 0 && (std::isalnum((unsigned char)usage[p - 1]) || usage[p - 1] == '-'))
      continue;
    size_t e = p + 2;
    while (e < usage.size() && (std::isalnum((unsigned char)usage[e]) || usage[e] == '-'))
      ++e;
    if (e > p + 2) {
      std::string o = usage.substr(p, e - p);
      if (std::find(out.begin(), out.end(), o) == out.end())
        out.push_back(o);
    }
  }
  return out;
}

/// Levenshtein distance.
inline size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t prev = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cur = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1)});
      prev = cur;
    }
  }
  return row[b.size()];
}

/// "unknown option '--lrr' (did you mean '--lr'?); see --help": `arg` up to
/// an '=', the nearest option of `usage` within a third of its length.
inline std::string unknownOption(const std::string &arg, const std::string &usage) {
  std::string name = arg.substr(0, arg.find('='));
  std::string best;
  size_t bestD = std::max<size_t>(2, name.size() / 3) + 1;
  for (const std::string &o : optionsIn(usage)) {
    size_t d = editDistance(name, o);
    if (d < bestD) {
      bestD = d;
      best = o;
    }
  }
  return "unknown option '" + name + "'" + (best.empty() ? "" : " (did you mean '" + best + "'?)") +
         "; see --help";
}

} // namespace tc::cli

#endif // TC_TOOLS_CLI_H
