// Fuzzes the GGUF reader on bytes held in an exactly sized buffer: every key is decoded whole and
// through the typed getters its type allows, and every readable tensor is read in full.
#include <cstddef>
#include <cstdint>

#include "genperf/error.h"
#include "io/gguf.h"

namespace {

void touch_key(const genperf::GgufFile& g, const std::string& key) {
  using genperf::GgufType;
  (void)g.value(key);
  const GgufType t = g.type(key);
  if (t == GgufType::STRING) (void)g.get_string(key);
  if (t == GgufType::BOOL) (void)g.get_bool(key);
  if (t == GgufType::F32 || t == GgufType::F64) (void)g.get_float(key);
  if (t != GgufType::ARRAY) return;
  const GgufType e = g.elem_type(key);
  if (e == GgufType::STRING)
    (void)g.get_string_array(key);
  else if (e != GgufType::ARRAY && e != GgufType::BOOL)
    (void)g.get_float_array(key);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const genperf::GgufFile g =
        genperf::GgufFile::parse(genperf::MmapFile::from_bytes("fuzz.gguf", data, size));
    for (const std::string& key : g.keys()) {
      try {
        touch_key(g, key);
      } catch (const genperf::Error&) {
      }
    }
    volatile uint8_t sum = 0;
    for (const auto& info : g.tensor_infos()) {
      try {
        const genperf::Tensor t = g.tensor(info.name);
        for (size_t i = 0; i < t.nbytes(); ++i) sum = uint8_t(sum + t.data<uint8_t>()[i]);
      } catch (const genperf::Error&) {
      }
    }
  } catch (const genperf::Error&) {
  }
  return 0;
}
