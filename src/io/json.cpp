// Strict RFC 8259 JSON: a recursive-descent parser with a depth limit and exact byte offsets in
// its errors, and a serializer whose output always parses back to the same value.
#include "genperf/json.h"

#include <locale.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "genperf/error.h"
#include "io/mmap_file.h"
#include "io/unicode.h"

namespace genperf {
namespace {

constexpr int kMaxDepth = 512;

// Length of the valid UTF-8 sequence starting at s[0] (at most n bytes available), or 0 when the
// bytes are not well-formed UTF-8 (overlong forms, surrogates and values past U+10FFFF included).
size_t utf8_sequence_length(const unsigned char* s, size_t n) {
  const unsigned c = s[0];
  if (c < 0x80) return 1;
  auto cont = [&](size_t i, unsigned lo = 0x80, unsigned hi = 0xBF) {
    return i < n && s[i] >= lo && s[i] <= hi;
  };
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(1) && cont(2) ? 3 : 0;
  if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
  if (c == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}


// strtod in the "C" locale, so that a program that set LC_NUMERIC still reads "1.5".
double parse_double_c_locale(const char* s) {
  static const locale_t c_locale = newlocale(LC_ALL_MASK, "C", locale_t(0));
  return strtod_l(s, nullptr, c_locale);
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& source) : s_(text), source_(source) {}

  Json document() {
    skip_ws();
    Json v = value(0);
    skip_ws();
    if (pos_ != s_.size()) error("unexpected ", describe_here(), " after the document");
    return v;
  }

 private:
  template <typename... Args>
  [[noreturn]] void error(Args&&... what) const {
    fail("[json] ", source_, ": ", std::forward<Args>(what)..., " at byte ", pos_);
  }

  std::string describe_here() const {
    if (pos_ >= s_.size()) return "end of input";
    const unsigned char c = static_cast<unsigned char>(s_[pos_]);
    if (c >= 0x20 && c < 0x7F) return cat("character '", char(c), "'");
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", c);
    return cat("byte ", hex);
  }

  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }

  void skip_ws() {
    while (!at_end() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }

  void expect(char c, const char* context) {
    if (peek() != c) error("expected '", c, "' ", context, ", found ", describe_here());
    ++pos_;
  }

  Json value(int depth) {
    switch (peek()) {
      case '{':
        return object(depth + 1);
      case '[':
        return array(depth + 1);
      case '"':
        return Json(string());
      case 't':
        literal("true");
        return Json(true);
      case 'f':
        literal("false");
        return Json(false);
      case 'n':
        literal("null");
        return Json(nullptr);
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return Json(number());
        error("expected a value, found ", describe_here());
    }
  }

  void literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) error("invalid literal (expected '", word, "')");
    pos_ += word.size();
  }

  void check_depth(int depth) const {
    if (depth > kMaxDepth) error("nesting deeper than ", kMaxDepth, " levels");
  }

  Json object(int depth) {
    check_depth(depth);
    ++pos_;  // '{'
    Json::Object members;
    skip_ws();
    if (peek() == '}') {
      ++pos_;
      return Json(std::move(members));
    }
    while (true) {
      skip_ws();
      if (peek() == '}') error("trailing comma in object");
      if (peek() != '"') error("expected a string key, found ", describe_here());
      std::string key = string();
      skip_ws();
      expect(':', "after an object key");
      skip_ws();
      members.emplace_back(std::move(key), value(depth));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}', "or ',' in object");
      return Json(std::move(members));
    }
  }

  Json array(int depth) {
    check_depth(depth);
    ++pos_;  // '['
    Json::Array items;
    skip_ws();
    if (peek() == ']') {
      ++pos_;
      return Json(std::move(items));
    }
    while (true) {
      skip_ws();
      if (peek() == ']') error("trailing comma in array");
      items.push_back(value(depth));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect(']', "or ',' in array");
      return Json(std::move(items));
    }
  }

  uint32_t hex4() {
    if (s_.size() - pos_ < 4) error("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_];
      uint32_t d;
      if (c >= '0' && c <= '9')
        d = uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f')
        d = uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        d = uint32_t(c - 'A' + 10);
      else
        error("invalid hex digit in \\u escape");
      v = v * 16 + d;
      ++pos_;
    }
    return v;
  }

  // After the 'u' of "\uXXXX": one code point, pairing surrogates; lone surrogates are errors.
  uint32_t unicode_escape() {
    const size_t start = pos_ - 2;
    const uint32_t hi = hex4();
    if (hi >= 0xDC00 && hi <= 0xDFFF) {
      pos_ = start;
      error("lone low surrogate \\u", std::string(s_.substr(start + 2, 4)));
    }
    if (hi < 0xD800 || hi > 0xDBFF) return hi;
    if (s_.substr(pos_, 2) != "\\u") {
      pos_ = start;
      error("high surrogate not followed by a low surrogate");
    }
    pos_ += 2;
    const uint32_t lo = hex4();
    if (lo < 0xDC00 || lo > 0xDFFF) {
      pos_ = start;
      error("high surrogate not followed by a low surrogate");
    }
    return 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
  }

  std::string string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      // Copy the plain run up to the next quote, backslash, control or non-ASCII byte at once.
      size_t run = pos_;
      while (run < s_.size()) {
        const unsigned char c = static_cast<unsigned char>(s_[run]);
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
        ++run;
      }
      out.append(s_.data() + pos_, run - pos_);
      pos_ = run;
      if (at_end()) error("unterminated string");
      const unsigned char c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) error("unescaped control character in string");
      if (c >= 0x80) {
        const size_t n =
            utf8_sequence_length(reinterpret_cast<const unsigned char*>(s_.data()) + pos_, s_.size() - pos_);
        if (n == 0) error("invalid UTF-8 in string");
        out.append(s_.data() + pos_, n);
        pos_ += n;
        continue;
      }
      escape(out);
    }
  }

  void escape(std::string& out) {
    ++pos_;  // backslash
    if (at_end()) error("unterminated string");
    const char e = s_[pos_++];
    switch (e) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case '/':
        out += '/';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u':
        unicode::append_utf8(out, unicode_escape());
        break;
      default:
        --pos_;
        error("invalid escape '\\", describe_here(), "'");
    }
  }

  size_t digits() {
    const size_t start = pos_;
    while (!at_end() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    return pos_ - start;
  }

  double number() {
    const size_t start = pos_;
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
      if (peek() >= '0' && peek() <= '9') error("leading zero in number");
    } else if (digits() == 0) {
      error("expected a digit, found ", describe_here());
    }
    if (peek() == '.') {
      ++pos_;
      if (digits() == 0) error("expected a digit after '.', found ", describe_here());
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (digits() == 0) error("expected a digit in the exponent, found ", describe_here());
    }
    // The grammar is checked above; strtod converts a bounded, NUL-terminated copy.
    const std::string token(s_.substr(start, pos_ - start));
    const double v = parse_double_c_locale(token.c_str());
    if (!std::isfinite(v)) {
      pos_ = start;
      error("number ", token.size() > 40 ? token.substr(0, 40) + "..." : token, " is out of range");
    }
    return v;
  }

  std::string_view s_;
  const std::string& source_;
  size_t pos_ = 0;
};

void dump_string(std::string& out, const std::string& s) {
  static const char* kHex = "0123456789abcdef";
  out += '"';
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = p[i];
    if (c >= 0x80) {
      // Invalid UTF-8 (a byte token, say) becomes U+FFFD so the output is always valid JSON.
      const size_t n = utf8_sequence_length(p + i, s.size() - i);
      if (n == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(s.data() + i, n);
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += char(c);
        }
    }
    ++i;
  }
  out += '"';
}

void dump_number(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";  // JSON has no NaN or infinity
    return;
  }
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) {  // 2^53: exact as an integer
    const auto r = std::to_chars(buf, buf + sizeof buf, int64_t(v));
    out.append(buf, r.ptr);
    return;
  }
  // Shortest representation that reads back to the same double (at most 17 digits).
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void newline(std::string& out, int indent, int level) {
  if (indent < 0) return;
  out += '\n';
  out.append(size_t(indent) * size_t(level), ' ');
}

}  // namespace

Json Json::parse(std::string_view text, const std::string& source) { return Parser(text, source).document(); }

Json Json::parse_file(const std::string& path) {
  auto file = MmapFile::open(path);
  return parse(file->view(), path);
}

const char* Json::type_name() const {
  static const char* kNames[] = {"null", "bool", "number", "string", "array", "object"};
  const size_t i = v_.index();
  return i < 6 ? kNames[i] : "valueless";
}

bool Json::as_bool() const {
  GP_CHECK(is_bool(), "[json] expected bool, found ", type_name());
  return std::get<bool>(v_);
}

double Json::as_number() const {
  GP_CHECK(is_number(), "[json] expected number, found ", type_name());
  return std::get<double>(v_);
}

int64_t Json::as_int() const {
  const double v = as_number();
  // [-2^63, 2^63): the doubles that convert to int64 without overflow.
  GP_CHECK(v == std::floor(v) && v >= -9223372036854775808.0 && v < 9223372036854775808.0,
           "[json] expected an integer, found ", dump());
  return int64_t(v);
}

const std::string& Json::as_string() const {
  GP_CHECK(is_string(), "[json] expected string, found ", type_name());
  return std::get<std::string>(v_);
}

const Json::Array& Json::as_array() const {
  GP_CHECK(is_array(), "[json] expected array, found ", type_name());
  return std::get<Array>(v_);
}

const Json::Object& Json::as_object() const {
  GP_CHECK(is_object(), "[json] expected object, found ", type_name());
  return std::get<Object>(v_);
}

Json::Array& Json::as_array() {
  GP_CHECK(is_array(), "[json] expected array, found ", type_name());
  return std::get<Array>(v_);
}

Json::Object& Json::as_object() {
  GP_CHECK(is_object(), "[json] expected object, found ", type_name());
  return std::get<Object>(v_);
}

const Json* Json::find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (const auto& [k, v] : std::get<Object>(v_))
    if (k == key) return &v;
  return nullptr;
}

const Json& Json::at(std::string_view key) const {
  GP_CHECK(is_object(), "[json] expected object, found ", type_name(), " (looking up '", std::string(key),
           "')");
  const Json* v = find(key);
  GP_CHECK(v != nullptr, "[json] missing key '", std::string(key), "'");
  return *v;
}

Json& Json::operator[](const std::string& key) {
  if (is_null()) v_ = Object{};
  auto& members = as_object();
  for (auto& [k, v] : members)
    if (k == key) return v;
  members.emplace_back(key, Json());
  return members.back().second;
}

void Json::push_back(Json v) {
  if (is_null()) v_ = Array{};
  as_array().push_back(std::move(v));
}

namespace {
void dump_value(std::string& out, const Json& j, int indent, int level);

void dump_array(std::string& out, const Json::Array& a, int indent, int level) {
  if (a.empty()) {
    out += "[]";
    return;
  }
  out += '[';
  for (size_t i = 0; i < a.size(); ++i) {
    if (i) out += ',';
    newline(out, indent, level + 1);
    dump_value(out, a[i], indent, level + 1);
  }
  newline(out, indent, level);
  out += ']';
}

void dump_object(std::string& out, const Json::Object& o, int indent, int level) {
  if (o.empty()) {
    out += "{}";
    return;
  }
  out += '{';
  for (size_t i = 0; i < o.size(); ++i) {
    if (i) out += ',';
    newline(out, indent, level + 1);
    dump_string(out, o[i].first);
    out += indent < 0 ? ":" : ": ";
    dump_value(out, o[i].second, indent, level + 1);
  }
  newline(out, indent, level);
  out += '}';
}

void dump_value(std::string& out, const Json& j, int indent, int level) {
  if (j.is_null())
    out += "null";
  else if (j.is_bool())
    out += j.as_bool() ? "true" : "false";
  else if (j.is_number())
    dump_number(out, j.as_number());
  else if (j.is_string())
    dump_string(out, j.as_string());
  else if (j.is_array())
    dump_array(out, j.as_array(), indent, level);
  else
    dump_object(out, j.as_object(), indent, level);
}
}  // namespace

std::string Json::dump(int indent) const {
  std::string out;
  dump_value(out, *this, indent, 0);
  return out;
}

}  // namespace genperf
