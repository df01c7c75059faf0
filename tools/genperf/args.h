// Command-line options: "--name value" or "--name=value" pairs and "--flag" switches, checked
// against the options a verb declares, so a typo is an error rather than a silent default.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

namespace genperf::cli {

struct OptionSpec {
  std::string name;  // without the leading dashes
  std::string help;
  std::string default_value{};  // "" = required unless is_flag or optional
  bool is_flag = false;
  bool optional = false;
};

class Args {
 public:
  // Parses argv[first..]; throws genperf::Error on unknown or malformed options.
  Args(const std::string& verb, const std::vector<OptionSpec>& specs, int argc, char** argv, int first);
  bool help() const { return help_; }
  const std::string& verb() const { return verb_; }
  std::string usage() const;
  bool flag(const std::string& name) const;
  bool has(const std::string& name) const;
  std::string str(const std::string& name) const;
  int64_t integer(const std::string& name) const;
  double number(const std::string& name) const;

 private:
  const OptionSpec& spec(const std::string& name) const;
  std::string verb_;
  std::vector<OptionSpec> specs_;
  std::map<std::string, std::string> values_;
  std::set<std::string> flags_;
  bool help_ = false;
};

}  // namespace genperf::cli
