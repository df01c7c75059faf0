// Diffusion super-resolution of dust maps: the problem's definitions, shared by training,
// sampling and evaluation. A map is one channel of float64 values, row-major.
//
// The degradation D that makes a low-resolution input from a high-resolution map, used
// everywhere (training pairs, the consistency metric, the tests): blur with a Gaussian point-
// spread function of sigma = blur_sigma high-resolution pixels (default 0.5 * scale; edges
// reflected), average each scale x scale block, then optionally add Gaussian noise of
// noise * (the low-resolution map's standard deviation). The map's sides must be multiples of
// the scale.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "genperf/fits.h"

namespace genperf::sr {

struct Map {
  int64_t h = 0, w = 0;
  std::vector<double> v;  // [h, w]
  Map() = default;
  Map(int64_t rows, int64_t cols, double fill = 0) : h(rows), w(cols), v(size_t(rows * cols), fill) {}
  double& at(int64_t y, int64_t x) { return v[size_t(y * w + x)]; }
  double at(int64_t y, int64_t x) const { return v[size_t(y * w + x)]; }
};

struct Degradation {
  int64_t scale = 4;
  double blur_sigma = -1;  // in high-resolution pixels; < 0: 0.5 * scale; 0: no blur
  double noise = 0;        // Gaussian noise, a fraction of the low-resolution map's std
  uint64_t seed = 0;       // the noise's
  double sigma() const { return blur_sigma < 0 ? 0.5 * double(scale) : blur_sigma; }
};
Map degrade(const Map& hr, const Degradation& d);

// A synthetic log-normal dust field of size x size (a power of two): a Gaussian random field g
// with power spectrum P(k) proportional to k^slope (k > 0; the mean mode is zero), scaled to unit
// variance, and the map exp(sigma_ln * g - sigma_ln^2 / 2) (mean 1). Its statistics are known
// exactly: ln(map) has the spectrum's slope and standard deviation sigma_ln.
struct DustFieldSpec {
  int64_t size = 256;
  double slope = -2.75;  // dust is observed at -2.5 to -3
  double sigma_ln = 0.5;
  uint64_t seed = 1;
};
Map dust_field(const DustFieldSpec& spec);

// A map from a file: FITS (the first 2-D image HDU; blanks NaN) or PNG (luminance in [0, 1]). fits, when
// not null, receives the FITS image (its WCS, unit and header cards; pixels moved out). Errors
// name the file.
Map read_map(const std::string& path, FitsImage* fits = nullptr);
// Named maps from a spec, a comma-separated list of: files; directories (their .fits, .fit,
// .fits.gz and .png files, sorted by name); synthetic:N[:size[:seed[:mixed]]] (N dust fields of seeds
// seed .. seed + N - 1, size 256 and seed 1 unless given; the default spectrum, or with "mixed"
// a slope in -3 .. -2.5 and sigma_ln in 0.3 .. 1 drawn from each seed).
std::vector<std::pair<std::string, Map>> read_maps(const std::string& spec);

}  // namespace genperf::sr
