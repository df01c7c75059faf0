#include "args.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "genperf/error.h"

namespace genperf::cli {

Args::Args(const std::string& verb, const std::vector<OptionSpec>& specs, int argc, char** argv, int first)
    : verb_(verb), specs_(specs) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      help_ = true;
      continue;
    }
    GP_CHECK(a.size() > 2 && a.rfind("--", 0) == 0, "[", verb_, "] unexpected argument '", a, "' (see --help)");
    std::string name = a.substr(2), value;
    const auto eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const OptionSpec& s = spec(name);
    if (s.is_flag) {
      GP_CHECK(!inline_value, "[", verb_, "] --", name, " takes no value");
      flags_.insert(name);
      continue;
    }
    if (!inline_value) {
      GP_CHECK(i + 1 < argc, "[", verb_, "] --", name, " needs a value");
      value = argv[++i];
    }
    values_[name] = value;
  }
  if (help_) return;
  for (const auto& s : specs_)
    GP_CHECK(s.is_flag || s.optional || !s.default_value.empty() || values_.count(s.name), "[", verb_,
             "] --", s.name, " is required (see --help)");
}

const OptionSpec& Args::spec(const std::string& name) const {
  for (const auto& s : specs_)
    if (s.name == name) return s;
  fail("[", verb_, "] unknown option --", name, " (see --help)");
}

std::string Args::usage() const {
  std::string u = cat("usage: genperf ", verb_, " [options]\n\noptions:\n");
  for (const auto& s : specs_) {
    std::string left = "  --" + s.name + (s.is_flag ? "" : " V");
    left.resize(std::max<size_t>(left.size() + 1, 26), ' ');
    u += left + s.help;
    if (!s.default_value.empty()) u += cat(" (default ", s.default_value, ")");
    else if (!s.is_flag && !s.optional) u += " (required)";
    u += "\n";
  }
  return u;
}

bool Args::flag(const std::string& name) const {
  spec(name);
  return flags_.count(name) > 0;
}

bool Args::has(const std::string& name) const { return values_.count(name) || !spec(name).default_value.empty(); }

std::string Args::str(const std::string& name) const {
  auto it = values_.find(name);
  if (it != values_.end()) return it->second;
  const auto& s = spec(name);
  GP_CHECK(!s.default_value.empty(), "[", verb_, "] --", name, " was not given");
  return s.default_value;
}

int64_t Args::integer(const std::string& name) const {
  const std::string v = str(name);
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  GP_CHECK(errno == 0 && end && *end == 0 && !v.empty(), "[", verb_, "] --", name, " expects an integer, got '", v, "'");
  return x;
}

double Args::number(const std::string& name) const {
  const std::string v = str(name);
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  GP_CHECK(end && *end == 0 && !v.empty() && std::isfinite(x), "[", verb_, "] --", name,
           " expects a number, got '", v, "'");
  return x;
}

}  // namespace genperf::cli
