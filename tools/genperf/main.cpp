// genperf CLI: parses arguments and calls the library.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "genperf/error.h"
#include "genperf/runtime.h"

int main(int argc, char** argv) {
  try {
    if (argc < 2 || !std::strcmp(argv[1], "--help")) {
      std::printf("usage: genperf <verb> [options]\n");
      return argc < 2 ? 2 : 0;
    }
    std::fprintf(stderr, "genperf: unknown verb '%s'\n", argv[1]);
    return 2;
  } catch (const genperf::Error& e) {
    std::fprintf(stderr, "genperf: %s\n", e.what());
    return 1;
  }
}
