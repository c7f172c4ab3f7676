//===- json.h - a small JSON reader for tc's own files ----------*- C++ -*-===//
//
// Reads the JSON that tc writes and reads back: the artifact's
// reports["training"], checkpoint state files and safetensors headers.
// Strict RFC 8259 (no comments, no trailing commas), depth-limited, with
// error messages that give the byte offset. Numbers are kept as text too, so
// that 64-bit integers (RNG states) round-trip exactly.
//
//===----------------------------------------------------------------------===//
#ifndef TC_RUNTIME_BASE_JSON_H
#define TC_RUNTIME_BASE_JSON_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/src/base/status.h"

namespace tc::rt {

struct JsonValue {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool b = false;
  double num = 0;
  std::string str; // String: the value; Number: the literal text
  std::vector<JsonValue> array;
  std::vector<std::pair<std::string, JsonValue>> object; // in file order

  /// Member `key` of an object, or nullptr.
  const JsonValue *find(const std::string &key) const;
  bool isNumber() const { return kind == Kind::Number; }
  bool isString() const { return kind == Kind::String; }
  bool isObject() const { return kind == Kind::Object; }
  bool isArray() const { return kind == Kind::Array; }
};

/// Parses `text`. `what` names the document in error messages.
Status parseJson(const std::string &text, JsonValue *out, const std::string &what);

/// "..." with JSON escapes.
std::string jsonQuote(const std::string &s);

/// The shortest decimal that reads back as exactly `v` (15 to 17 digits);
/// "null" for NaN and infinities, which JSON cannot hold.
std::string shortestDecimal(double v);

} // namespace tc::rt

#endif // TC_RUNTIME_BASE_JSON_H
