// Judging the SR model on held-out high-resolution maps (docs/SR.md defines each metric): each
// map is degraded, upscaled with N samples, and scored beside bicubic up-sampling of the same
// input.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "genperf/sr_metrics.h"
#include "genperf/sr_model.h"

namespace genperf::sr {

struct SRMapScore {
  std::string name;
  int64_t size = 0;  // the side of the square scored
  double psnr_mean = 0, psnr_one = 0, psnr_bicubic = 0;  // dB: the mean of the samples, one sample
  SpectrumScore spectrum, spectrum_bicubic;  // of the samples (a mean would smooth the small scales)
  double w1 = 0, w1_bicubic = 0;                         // Wasserstein-1 of one sample's values
  double consistency = 0, consistency_bicubic = 0;       // of the mean
  double coverage = 0;             // of the samples' mean and sd: |truth - mean| <= sd
  double coverage_predictive = 0;  // of their 68% predictive interval (sr_metrics.h)
  double ssim_mean = 0, ssim_bicubic = 0;                // of the mean
  double minkowski = 0;  // one sample's functionals' distance from the truth's, over bicubic's (< 1: closer)
  double seconds = 0, flops = 0;
  bool pooled = false;  // a mean over maps whose spectra were pooled (one side): R(k) of the set
};

// Scores each named map: its largest centred square whose side is a power of two (the spectra
// need one) is degraded by d, upscaled with o and compared with the truth. progress(i, n) after
// each map.
std::vector<SRMapScore> evaluate_sr(UNet<float>& net, const std::vector<std::pair<std::string, Map>>& maps,
                                    const Degradation& d, const UpscaleOptions& o,
                                    const std::function<void(size_t, size_t)>& progress = {});

// The mean over maps of each figure (the name "mean", the size the largest scored). Maps of one
// side pool their spectra instead (R(k) = the sum of <P_sr> over the sum of P_hr; pooled_spectrum_score):
// the set's R(k), less noisy than any map's. One score for a set of maps, as sr eval's record states it.
SRMapScore mean_score(const std::vector<SRMapScore>& scores, int64_t scale);

}  // namespace genperf::sr
