#include "genperf/fileio.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "genperf/error.h"

namespace genperf {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  GP_CHECK(in.good(), "[io] cannot open ", path, ": ", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  GP_CHECK(!in.bad(), "[io] error reading ", path);
  return ss.str();
}

void write_file_atomic(const std::string& path, std::string_view content) {
  const std::string tmp = cat(path, ".tmp.", getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  GP_CHECK(f != nullptr, "[io] cannot create ", tmp, ": ", std::strerror(errno));
  const bool ok = std::fwrite(content.data(), 1, content.size(), f) == content.size();
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) {
    std::remove(tmp.c_str());
    fail("[io] error writing ", tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    fail("[io] cannot rename ", tmp, " to ", path, ": ", std::strerror(e));
  }
}

}  // namespace genperf
