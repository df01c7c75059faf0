// A small, strict JSON reader and writer (RFC 8259) for config.json, tokenizer.json,
// safetensors headers, JSONL tasks and genperf's own --json records. Parsing untrusted input
// never crashes: errors are genperf::Error naming the source and the byte offset. Nesting depth
// is limited (512) so hostile input cannot exhaust the stack.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace genperf {

class Json {
 public:
  using Array = std::vector<Json>;
  using Object = std::vector<std::pair<std::string, Json>>;  // keeps file order

  Json() = default;  // null
  Json(std::nullptr_t) {}
  Json(bool b) : v_(b) {}
  Json(int v) : v_(double(v)) {}
  Json(int64_t v) : v_(double(v)) {}
  Json(double v) : v_(v) {}
  Json(const char* s) : v_(std::string(s)) {}
  Json(std::string s) : v_(std::move(s)) {}
  Json(Array a) : v_(std::move(a)) {}
  Json(Object o) : v_(std::move(o)) {}

  // Parses a whole document; `source` (a file name) goes into error messages.
  static Json parse(std::string_view text, const std::string& source = "<json>");
  static Json parse_file(const std::string& path);

  bool is_null() const { return v_.index() == 0; }
  bool is_bool() const { return v_.index() == 1; }
  bool is_number() const { return v_.index() == 2; }
  bool is_string() const { return v_.index() == 3; }
  bool is_array() const { return v_.index() == 4; }
  bool is_object() const { return v_.index() == 5; }
  const char* type_name() const;

  // Typed access; throws genperf::Error "[json] expected X, found Y" on a type mismatch.
  bool as_bool() const;
  double as_number() const;
  int64_t as_int() const;  // the number must be integral and fit in int64
  const std::string& as_string() const;
  const Array& as_array() const;
  const Object& as_object() const;
  Array& as_array();
  Object& as_object();

  // Object lookup: nullptr when absent (or when this is not an object).
  const Json* find(std::string_view key) const;
  // Object lookup that throws "[json] missing key 'k'" when absent.
  const Json& at(std::string_view key) const;
  // Inserts or replaces (objects only; a null Json becomes an object).
  Json& operator[](const std::string& key);
  void push_back(Json v);  // arrays only; a null Json becomes an array

  // Compact serialization (indent < 0) or pretty with the given indent. Numbers that are
  // integral print without a fraction; others with 17 significant digits (round-trip exact).
  std::string dump(int indent = -1) const;

 private:
  std::variant<std::monostate, bool, double, std::string, Array, Object> v_;
};

}  // namespace genperf
