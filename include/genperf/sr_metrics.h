// How a super-resolved dust map is judged (docs/SR.md defines each): by pixels (PSNR), by the
// physics of the field (its power spectrum against the truth's, the distribution of its values)
// and by agreement with its own input (consistency under the degradation) and its stated
// uncertainty (coverage). Maps are genperf::sr::Map; spectra need sides that are powers of two.
#pragma once
#include <cstdint>
#include <vector>

#include "genperf/sr.h"

namespace genperf::sr {

// 10 log10(range^2 / mean squared error), range = max - min of ref; +inf when equal.
double psnr(const Map& x, const Map& ref);

// The azimuthally averaged power spectrum: the mean of |FFT|^2 over the modes with
// k <= |(kx, ky)| < k + 1, for k = 0 .. n/2 (in cycles per map side), of the map less its mean,
// tapered by a Hann window on both axes (edges would otherwise leak power into every band).
std::vector<double> power_spectrum(const Map& m);
// The cross spectrum's real part, averaged the same way: r(k) = P_xy / sqrt(P_x P_y).
std::vector<double> spectrum_correlation(const Map& a, const Map& b);

struct SpectrumScore {
  std::vector<double> ratio;  // R(k) = P_sr(k) / P_hr(k), k = 0 .. n/2
  double worst = 0;           // max |R - 1| over k_lr < k <= 0.8 k_Nyquist (the scales the input lacks)
  double min_corr = 0;        // min r(k) over 1 <= k <= k_lr / 2 (the scales the input holds)
};
// k_lr = n / (2 scale), the low-resolution map's Nyquist band.
SpectrumScore spectrum_score(const Map& sr, const Map& hr, int64_t scale);

// Wasserstein-1 distance between the value distributions of a and ref (equal sizes), over the
// standard deviation of ref.
double wasserstein1(const Map& a, const Map& ref);

// ||D(sr) - lr|| / ||lr|| (L2): how far the output strays from its input under the degradation.
double consistency(const Map& sr, const Map& lr, const Degradation& d);

// The fraction of pixels where |hr - mean| <= sd (ideally 0.68 for calibrated Gaussian errors).
double coverage(const Map& hr, const Map& mean, const Map& sd);

}  // namespace genperf::sr
