// genperf's one error type. Messages start with the op or file in brackets and say what was
// expected and what was found: "[safetensors] model.safetensors: header length 9999 exceeds file size 120".
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace genperf {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Concatenates any streamable values into one string.
template <typename... Args>
std::string cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  throw Error(cat(std::forward<Args>(args)...));
}

}  // namespace genperf

// GP_CHECK(cond, "[op] message ", value, ...): throws genperf::Error when cond is false.
#define GP_CHECK(cond, ...)                       \
  do {                                            \
    if (!(cond)) ::genperf::fail(__VA_ARGS__);    \
  } while (0)
