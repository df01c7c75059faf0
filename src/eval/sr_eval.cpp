// Judging the SR model on held-out maps (genperf/sr_eval.h).
#include <algorithm>
#include <chrono>
#include <utility>

#include "genperf/error.h"
#include "genperf/sr_eval.h"

namespace genperf::sr {

std::vector<SRMapScore> evaluate_sr(UNet<float>& net, const std::vector<std::pair<std::string, Map>>& maps,
                                    const Degradation& d, const UpscaleOptions& o,
                                    const std::function<void(size_t, size_t)>& progress) {
  GP_CHECK(d.scale == net.config().scale, "[sr eval] degradation by ", d.scale, " for a model of scale ",
           net.config().scale);
  std::vector<SRMapScore> scores;
  for (size_t i = 0; i < maps.size(); ++i) {
    const auto& [name, full] = maps[i];
    int64_t n = 1;
    while (2 * n <= std::min(full.h, full.w)) n *= 2;
    GP_CHECK(n >= o.tile && n % d.scale == 0, "[sr eval] ", name, ": the ", full.h, " x ", full.w,
             " map holds no power-of-two square of at least one tile (", o.tile, ")");
    Map hr(n, n);
    const int64_t y0 = (full.h - n) / 2, x0 = (full.w - n) / 2;
    for (int64_t y = 0; y < n; ++y)
      for (int64_t x = 0; x < n; ++x) hr.at(y, x) = full.at(y0 + y, x0 + x);
    const Map lr = degrade(hr, d);
    Degradation clean = d;
    clean.noise = 0;
    const auto t0 = std::chrono::steady_clock::now();
    UpscaleOptions keep = o;
    keep.keep_samples = true;
    keep.degradation = d;  // a projection goes onto the degradation that made the input
    const Upscaled up = upscale(net, lr, keep, name);
    SRMapScore s;
    s.name = name, s.size = n;
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    s.flops = up.flops;
    const Map bic = bicubic_up(lr, d.scale);
    s.psnr_mean = psnr(up.mean, hr), s.psnr_one = psnr(up.first, hr), s.psnr_bicubic = psnr(bic, hr);
    s.spectrum = spectrum_score(up.samples, hr, d.scale), s.spectrum_bicubic = spectrum_score(bic, hr, d.scale);
    s.w1 = wasserstein1(up.first, hr), s.w1_bicubic = wasserstein1(bic, hr);
    s.consistency = consistency(up.mean, lr, clean), s.consistency_bicubic = consistency(bic, lr, clean);
    s.coverage = o.samples > 1 ? coverage(hr, up.mean, up.sd) : 0;
    s.coverage_predictive = o.samples > 1 ? predictive_coverage(hr, up.mean, up.sd, o.samples) : 0;
    s.ssim_mean = ssim(up.mean, hr), s.ssim_bicubic = ssim(bic, hr);
    s.minkowski = minkowski_score(up.first, hr, bic);
    scores.push_back(std::move(s));
    if (progress) progress(i + 1, maps.size());
  }
  return scores;
}

SRMapScore mean_score(const std::vector<SRMapScore>& scores, int64_t scale) {
  GP_CHECK(!scores.empty(), "[sr eval] no maps to average");
  SRMapScore m;
  m.name = "mean";
  for (const SRMapScore& s : scores) {
    m.size = std::max(m.size, s.size);
    for (auto [to, from] : {std::pair{&m.psnr_mean, s.psnr_mean}, {&m.psnr_one, s.psnr_one},
                            {&m.psnr_bicubic, s.psnr_bicubic}, {&m.spectrum.worst, s.spectrum.worst},
                            {&m.spectrum.mean, s.spectrum.mean}, {&m.spectrum.worst_wide, s.spectrum.worst_wide},
                            {&m.spectrum_bicubic.worst_wide, s.spectrum_bicubic.worst_wide},
                            {&m.spectrum_bicubic.mean, s.spectrum_bicubic.mean},
                            {&m.spectrum.min_corr, s.spectrum.min_corr}, {&m.spectrum_bicubic.worst, s.spectrum_bicubic.worst},
                            {&m.spectrum_bicubic.min_corr, s.spectrum_bicubic.min_corr}, {&m.w1, s.w1},
                            {&m.w1_bicubic, s.w1_bicubic}, {&m.consistency, s.consistency},
                            {&m.consistency_bicubic, s.consistency_bicubic}, {&m.coverage, s.coverage},
                            {&m.coverage_predictive, s.coverage_predictive},
                            {&m.ssim_mean, s.ssim_mean}, {&m.ssim_bicubic, s.ssim_bicubic}, {&m.minkowski, s.minkowski},
                            {&m.seconds, s.seconds}, {&m.flops, s.flops}})
      *to += from / double(scores.size());
  }
  // Maps of one side pool their spectra (R(k) as the ensemble average over maps and samples).
  if (std::all_of(scores.begin(), scores.end(), [&](const SRMapScore& s) { return s.size == scores[0].size; })) {
    std::vector<SpectrumScore> sr, bic;
    for (const SRMapScore& s : scores) sr.push_back(s.spectrum), bic.push_back(s.spectrum_bicubic);
    m.pooled = true;
    m.spectrum = pooled_spectrum_score(sr, scale);
    m.spectrum_bicubic = pooled_spectrum_score(bic, scale);
  }
  return m;
}

}  // namespace genperf::sr
