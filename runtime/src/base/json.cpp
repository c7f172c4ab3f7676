//===- json.cpp - a small JSON reader -------------------------------------===//
#include "runtime/src/base/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tc::rt {

const JsonValue *JsonValue::find(const std::string &key) const {
  for (const auto &kv : object)
    if (kv.first == key)
      return &kv.second;
  return nullptr;
}

namespace {

class Parser {
public:
  Parser(const std::string &s, const std::string &what) : s(s), what(what) {}

  Status parseDocument(JsonValue *out) {
    TC_RETURN_IF_ERROR(value(out, 0));
    skipSpace();
    if (pos != s.size())
      return err("unexpected trailing characters");
    return Status::ok();
  }

private:
  const std::string &s;
  const std::string &what;
  size_t pos = 0;

  Status err(const std::string &m) const {
    return dataLoss(what + ": invalid JSON at byte " + std::to_string(pos) + ": " + m);
  }
  void skipSpace() {
    while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t' || s[pos] == '\n' || s[pos] == '\r'))
      ++pos;
  }
  bool literal(const char *lit) {
    size_t n = std::char_traits<char>::length(lit);
    if (s.compare(pos, n, lit) != 0)
      return false;
    pos += n;
    return true;
  }

  Status value(JsonValue *v, int depth) {
    if (depth > 64)
      return err("nested too deeply");
    skipSpace();
    if (pos >= s.size())
      return err("unexpected end");
    char c = s[pos];
    if (c == '{') {
      v->kind = JsonValue::Kind::Object;
      ++pos;
      skipSpace();
      if (pos < s.size() && s[pos] == '}') {
        ++pos;
        return Status::ok();
      }
      while (true) {
        skipSpace();
        std::string key;
        if (pos >= s.size() || s[pos] != '"')
          return err("expected a member name");
        TC_RETURN_IF_ERROR(string(&key));
        skipSpace();
        if (pos >= s.size() || s[pos] != ':')
          return err("expected ':'");
        ++pos;
        // A key given twice is ambiguous (readers differ on which one wins):
        // refuse it rather than pick one.
        for (const auto &kv : v->object)
          if (kv.first == key)
            return err("member '" + key + "' is given twice");
        JsonValue member;
        TC_RETURN_IF_ERROR(value(&member, depth + 1));
        v->object.emplace_back(std::move(key), std::move(member));
        skipSpace();
        if (pos < s.size() && s[pos] == ',') {
          ++pos;
          continue;
        }
        if (pos < s.size() && s[pos] == '}') {
          ++pos;
          return Status::ok();
        }
        return err("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v->kind = JsonValue::Kind::Array;
      ++pos;
      skipSpace();
      if (pos < s.size() && s[pos] == ']') {
        ++pos;
        return Status::ok();
      }
      while (true) {
        JsonValue item;
        TC_RETURN_IF_ERROR(value(&item, depth + 1));
        v->array.push_back(std::move(item));
        skipSpace();
        if (pos < s.size() && s[pos] == ',') {
          ++pos;
          continue;
        }
        if (pos < s.size() && s[pos] == ']') {
          ++pos;
          return Status::ok();
        }
        return err("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v->kind = JsonValue::Kind::String;
      return string(&v->str);
    }
    if (literal("true")) {
      v->kind = JsonValue::Kind::Bool;
      v->b = true;
      return Status::ok();
    }
    if (literal("false")) {
      v->kind = JsonValue::Kind::Bool;
      return Status::ok();
    }
    if (literal("null"))
      return Status::ok();
    if (c == '-' || (c >= '0' && c <= '9')) {
      size_t start = pos;
      if (s[pos] == '-')
        ++pos;
      while (pos < s.size() && std::string("0123456789.eE+-").find(s[pos]) != std::string::npos)
        ++pos;
      v->kind = JsonValue::Kind::Number;
      v->str = s.substr(start, pos - start);
      char *end = nullptr;
      v->num = std::strtod(v->str.c_str(), &end);
      if (!end || *end != '\0' || v->str == "-")
        return err("bad number '" + v->str + "'");
      return Status::ok();
    }
    return err(std::string("unexpected character '") + c + "'");
  }

  Status string(std::string *out) {
    ++pos; // opening quote
    while (true) {
      if (pos >= s.size())
        return err("unterminated string");
      unsigned char c = static_cast<unsigned char>(s[pos++]);
      if (c == '"')
        return Status::ok();
      if (c < 0x20)
        return err("control character in string");
      if (c != '\\') {
        out->push_back(static_cast<char>(c));
        continue;
      }
      if (pos >= s.size())
        return err("unterminated escape");
      char e = s[pos++];
      switch (e) {
      case '"': out->push_back('"'); break;
      case '\\': out->push_back('\\'); break;
      case '/': out->push_back('/'); break;
      case 'b': out->push_back('\b'); break;
      case 'f': out->push_back('\f'); break;
      case 'n': out->push_back('\n'); break;
      case 'r': out->push_back('\r'); break;
      case 't': out->push_back('\t'); break;
      case 'u': {
        if (pos + 4 > s.size())
          return err("short \\u escape");
        unsigned cp = 0;
        for (int k = 0; k < 4; ++k) {
          char h = s[pos++];
          cp <<= 4;
          if (h >= '0' && h <= '9') cp |= h - '0';
          else if (h >= 'a' && h <= 'f') cp |= h - 'a' + 10;
          else if (h >= 'A' && h <= 'F') cp |= h - 'A' + 10;
          else return err("bad \\u escape");
        }
        // UTF-8 encode (surrogate pairs are kept as two code points; tc
        // never writes them).
        if (cp < 0x80) {
          out->push_back(static_cast<char>(cp));
        } else if (cp < 0x800) {
          out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
          out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        } else {
          out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
          out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
          out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        }
        break;
      }
      default:
        return err(std::string("bad escape '\\") + e + "'");
      }
    }
  }
};

} // namespace

Status parseJson(const std::string &text, JsonValue *out, const std::string &what) {
  *out = JsonValue();
  return Parser(text, what).parseDocument(out);
}

std::string jsonQuote(const std::string &s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", ch);
      out += buf;
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out + "\"";
}

std::string shortestDecimal(double v) {
  if (!std::isfinite(v))
    return "null";
  char buf[40];
  for (int digits = 15; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  return buf;
}

} // namespace tc::rt
