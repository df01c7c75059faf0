// Fuzzes the JSON parser: any input parses or throws genperf::Error, and what dump() writes
// parses back to the same value (dump is a fixed point, compact and pretty).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "genperf/error.h"
#include "genperf/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  genperf::Json v;
  try {
    v = genperf::Json::parse(text, "fuzz.json");
  } catch (const genperf::Error&) {
    return 0;
  }
  const std::string once = v.dump();
  if (genperf::Json::parse(once).dump() != once) __builtin_trap();
  if (genperf::Json::parse(v.dump(2)).dump() != once) __builtin_trap();
  return 0;
}
