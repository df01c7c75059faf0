// Helpers shared by the tests: temporary directories, running a command or the genperf binary,
// reading raw floats, token ids for a reference script's command line.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace genperf::testing {

// A fresh directory under /tmp, removed when the object goes out of scope.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    std::string tmpl = std::filesystem::temp_directory_path() / ("genperf-" + tag + "-XXXXXX");
    char* p = mkdtemp(tmpl.data());
    if (!p) std::abort();
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs a shell command; returns its exit status and captures standard output.
inline int run_command(const std::string& cmd, std::string* out = nullptr) {
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return -1;
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  const int status = pclose(f);
  if (out) *out = s;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The genperf binary of this build.
inline const std::string kGenperf = std::string(GENPERF_BINARY_DIR) + "/genperf";

// What a run of the genperf binary gave: its exit status, standard output and standard error.
struct CliResult {
  int code;
  std::string out, err;
};

// Runs `genperf args`, its standard error through tmp / "stderr.txt".
inline CliResult run_genperf(const std::string& args, const TempDir& tmp) {
  CliResult r;
  const std::string err_file = tmp / "stderr.txt";
  r.code = run_command(kGenperf + " " + args + " 2>" + err_file, &r.out);
  r.err = read_bytes(err_file);
  return r;
}

inline std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  std::vector<float> v(size_t(in.tellg()) / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
  return v;
}

// "1,2,3": ids as a reference script's command line takes them.
inline std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s;
}

}  // namespace genperf::testing
