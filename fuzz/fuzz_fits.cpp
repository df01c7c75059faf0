// Fuzzes the FITS reader (read_fits_bytes: cfitsio's memory-file entry, then genperf's checks) on
// arbitrary bytes: every input either yields a 2-D image whose pixel count matches its size, or a
// genperf::Error; nothing else (no crash, leak, hang, or a huge allocation: images over 2^16
// pixels are refused, which keeps the runs fast).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "genperf/error.h"
#include "genperf/fits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  genperf::FitsReadOptions options;
  options.max_pixels = int64_t(1) << 16;
  try {
    const genperf::FitsImage img = genperf::read_fits_bytes("fuzz.fits", data, size, options);
    if (img.width <= 0 || img.height <= 0 || img.pixels.size() != size_t(img.width * img.height)) std::abort();
    volatile double sum = 0;
    for (double v : img.pixels) sum = sum + v;
  } catch (const genperf::Error&) {
  }
  return 0;
}
