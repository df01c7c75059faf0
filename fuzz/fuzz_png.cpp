// Fuzzes the PNG reader (read_png_bytes: libpng's low-level reader behind genperf's setjmp
// wrappers) on arbitrary bytes: every input either yields an image whose values fit its size and
// lie in [0, 1], or a genperf::Error; nothing else (no crash, leak, hang, or a huge allocation:
// images over 2^16 pixels are refused, which keeps the runs fast). What it reads also goes
// through png_luminance and asinh_stretch.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "genperf/error.h"
#include "genperf/png.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  genperf::PngReadOptions options;
  options.max_pixels = int64_t(1) << 16;
  try {
    const genperf::PngImage img = genperf::read_png_bytes("fuzz.png", data, size, options);
    if (img.h <= 0 || img.w <= 0 || (img.channels != 1 && img.channels != 3) ||
        img.v.size() != size_t(img.h * img.w * img.channels))
      std::abort();
    for (double v : img.v)
      if (!(v >= 0 && v <= 1)) std::abort();
    const std::vector<double> y = genperf::png_luminance(img);
    for (double v : genperf::asinh_stretch(y, 0.1))
      if (!(v >= 0 && v <= 1)) std::abort();
  } catch (const genperf::Error&) {
  }
  return 0;
}
