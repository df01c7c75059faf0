// How a super-resolved dust map is judged (docs/SR.md defines each): by pixels (PSNR), by the
// physics of the field (its power spectrum against the truth's, the distribution of its values)
// and by agreement with its own input (consistency under the degradation) and its stated
// uncertainty (coverage). Maps are genperf::sr::Map; spectra need sides that are powers of two.
#pragma once
#include <cstdint>
#include <span>
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
  std::vector<double> p_sr, p_hr;  // <P_sr(k)> over the samples scored, P_hr(k); k = 0 .. n/2
  std::vector<double> ratio;       // R(k) = <P_sr(k)> / P_hr(k)
  double worst = 0;     // max |R - 1| over k_lr < k <= 0.8 k_Nyquist (the scales the input lacks)
  double mean = 0;      // the mean of R(k) over those bands: the power missing or added there, which
                        // the truth's own scatter blurs far less than the worst band (docs/SR.md)
  double min_corr = 0;  // min over 1 <= k <= k_lr / 2 of <r(k)> (the scales the input holds)
  // The same ratio over wide bands: the integer bands k_lr < k <= 0.8 k_Nyquist grouped
  // kWideBandsPerOctave to an octave of k, (k_lr 2^(j/4), k_lr 2^((j+1)/4)], their modes' power
  // summed. A band of one k holds about pi k modes, too few to test R to 10% on a few maps even
  // for a perfect sampler; a wide band holds enough (docs/SR.md, "The spectrum score's floor").
  std::vector<std::pair<int64_t, int64_t>> wide_bands;  // the first and last integer k of each
  std::vector<double> wide_ratio;
  double worst_wide = 0;  // max |R - 1| over the wide bands
};
inline constexpr int kWideBandsPerOctave = 4;
// k_lr = n / (2 scale), the low-resolution map's Nyquist band. The spectrum of the samples srs
// (one or more realizations for one truth) is their mean power per band, R(k) = <P_sr> / P_hr as
// the ensemble average defines it, and r(k) the mean of each sample's cross-correlation.
SpectrumScore spectrum_score(std::span<const Map> srs, const Map& hr, int64_t scale);
inline SpectrumScore spectrum_score(const Map& sr, const Map& hr, int64_t scale) {
  return spectrum_score(std::span<const Map>(&sr, 1), hr, scale);
}
// The score of several truths' spectra pooled, R(k) = sum <P_sr> / sum P_hr, for maps of one side
// n (a single map's R is noisy: a band holds about pi k independent modes); min_corr is the mean
// of the scores'. An error for an empty list or sides that differ.
SpectrumScore pooled_spectrum_score(std::span<const SpectrumScore> scores, int64_t scale);

// Wasserstein-1 distance between the value distributions of a and ref (equal sizes), over the
// standard deviation of ref.
double wasserstein1(const Map& a, const Map& ref);

// ||D(sr) - lr|| / ||lr|| (L2): how far the output strays from its input under the degradation.
double consistency(const Map& sr, const Map& lr, const Degradation& d);

// The fraction of pixels where |hr - mean| <= sd (ideally 0.68 for calibrated Gaussian errors
// and many samples).
double coverage(const Map& hr, const Map& mean, const Map& sd);
// The same for the 68.27% predictive interval of N samples: |hr - mean| <= q sd with
// q = t_{N-1}(0.8413) sqrt(1 + 1/N) (Student's t). The truth is one more draw from the samples'
// distribution, whose mean and sd N samples only estimate; with q = 1 a calibrated model covers
// 0.62 at N = 8. Ideally 0.6827 for Gaussian errors at any N >= 2.
double predictive_coverage(const Map& hr, const Map& mean, const Map& sd, int64_t samples);
// The p-quantile of Student's t with nu degrees of freedom (nu > 0, 0 < p < 1).
double student_t_quantile(double p, double nu);

// Structural similarity (Wang et al. 2004): the mean over pixels of
// (2 mu_x mu_y + C1)(2 cov + C2) / ((mu_x^2 + mu_y^2 + C1)(var_x + var_y + C2)), local statistics
// under a Gaussian window of sigma 1.5 (truncated at 3.5 sigma, renormalized at the edges),
// C1 = (0.01 L)^2, C2 = (0.03 L)^2, L = max - min of ref.
double ssim(const Map& x, const Map& ref);

// Minkowski functionals of the excursion sets {u > nu} of u = (m - mean) / sd, mean and sd those of
// `scale_of` (the truth, so that a map of the wrong variance shows it), for each threshold nu in
// thresholds: the area fraction, the boundary length per pixel (edges between pixels in and out,
// 4-connected, the map's border not counted), and the Euler characteristic per pixel (vertices -
// edges + faces of the union of the pixels in, as closed unit squares).
struct Minkowski {
  std::vector<double> nu, area, perimeter, euler;
};
std::vector<double> minkowski_thresholds();  // -3 .. 3 in steps of 0.25
Minkowski minkowski(const Map& m, const Map& scale_of, const std::vector<double>& thresholds = minkowski_thresholds());
// How far a map's functionals are from the truth's, relative to another map's (bicubic's): the
// mean over the three functionals of RMS_nu(F_sr - F_hr) / RMS_nu(F_other - F_hr). Below 1:
// closer to the truth than the other map.
double minkowski_score(const Map& sr, const Map& hr, const Map& other);

}  // namespace genperf::sr
