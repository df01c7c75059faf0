// The SR model applied to maps (genperf/sr_model.h): units, training pairs, tiled upscaling.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "genperf/error.h"
#include "genperf/ops_image.h"
#include "genperf/sr_model.h"

namespace genperf::sr {

Units Units::of(const Map& lr, const std::string& transform, const std::string& what) {
  Units u;
  u.transform = transform;
  double lo = HUGE_VAL, hi = -HUGE_VAL;
  for (double x : lr.v)
    if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
  GP_CHECK(lo <= hi, "[sr] ", what, ": every pixel is blank (NaN)");
  GP_CHECK(hi > lo, "[sr] ", what, ": the map is constant");
  if (transform == "log") {
    if (lo <= 0) u.offset = -lo + 0.01 * (hi - lo);
    u.floor = lo > 0 ? 5e-4 * lo : 1e-6 * (hi - lo);
  }
  double s = 0, ss = 0;
  int64_t n = 0;
  for (double x : lr.v) {
    if (!std::isfinite(x)) continue;
    const double y = u.to(x);
    s += y, ss += y * y, ++n;
  }
  // to() standardized with mean 0, sd 1 so far: these are the transformed values' statistics.
  u.mean = s / double(n);
  u.sd = std::sqrt(std::max(0.0, ss / double(n) - u.mean * u.mean));
  GP_CHECK(u.sd > 1e-12 * std::max(1.0, std::abs(u.mean)), "[sr] ", what, ": the map is constant");
  return u;
}

double Units::to(double x) const {
  const double t = transform == "log" ? std::log(std::max(x + offset, floor)) : x;
  return (t - mean) / sd;
}

double Units::from(double y) const {
  const double t = y * sd + mean;
  return transform == "log" ? std::exp(t) - offset : t;
}

Map bicubic_up(const Map& m, int64_t scale) {
  Map out(m.h * scale, m.w * scale);
  ops::bicubic_up_forward<double>(out.v.data(), m.v.data(), 1, m.h, m.w, 1, scale);
  return out;
}

double back_project(Map& x, const Map& lr, const Degradation& d, int64_t iters, double tol) {
  Degradation clean = d;
  clean.noise = 0;
  GP_CHECK(x.h == lr.h * d.scale && x.w == lr.w * d.scale, "[sr back_project] a ", x.h, " x ", x.w,
           " map for a ", lr.h, " x ", lr.w, " input at scale ", d.scale);
  double den = 0;
  for (double v : lr.v)
    if (std::isfinite(v)) den += v * v;
  GP_CHECK(den > 0, "[sr back_project] the input is all zeros or blank");
  double rel = 0;
  for (int64_t it = 0;; ++it) {
    Map r = degrade(x, clean);
    double num = 0;
    for (size_t i = 0; i < r.v.size(); ++i) {
      r.v[i] = std::isfinite(lr.v[i]) ? lr.v[i] - r.v[i] : 0.0;
      num += r.v[i] * r.v[i];
    }
    rel = std::sqrt(num / den);
    if (rel <= tol || it == iters) return rel;
    const Map up = bicubic_up(r, d.scale);
    for (size_t i = 0; i < x.v.size(); ++i) x.v[i] += up.v[i];
  }
}

TrainingPair training_pair(const Map& hr, const UNetConfig& c, const Degradation& d, const std::string& what) {
  GP_CHECK(d.scale == c.scale, "[sr] ", what, ": degradation by ", d.scale, " for a model of scale ", c.scale);
  for (double x : hr.v) GP_CHECK(std::isfinite(x), "[sr] ", what, ": training maps must have no blank (NaN) pixels");
  const Map lr = degrade(hr, d);
  const Units u = Units::of(lr, c.transform, what);
  Map ylr = lr;
  for (double& x : ylr.v) x = u.to(x);
  TrainingPair p;
  p.cond = bicubic_up(ylr, c.scale);
  p.x0 = Map(hr.h, hr.w);
  for (size_t i = 0; i < hr.v.size(); ++i) p.x0.v[i] = (u.to(hr.v[i]) - p.cond.v[i]) / c.residual_std;
  return p;
}

namespace {

// Tile origins along an axis of n pixels: stride a multiple of `align` that keeps at least the
// overlap, the last tile ending at the edge.
std::vector<int64_t> origins(int64_t n, int64_t tile, double overlap, int64_t align) {
  int64_t stride = int64_t(std::floor(double(tile) * (1 - overlap))) / align * align;
  stride = std::max(stride, align);
  std::vector<int64_t> o;
  for (int64_t p = 0;; p += stride) {
    if (p + tile >= n) {
      o.push_back(n - tile);
      break;
    }
    o.push_back(p);
  }
  return o;
}

// Feathering weight of pixel i of a tile of side `tile` whose neighbours overlap it by `ramp`.
double feather(int64_t i, int64_t tile, int64_t ramp) {
  if (ramp <= 0) return 1;
  const double d = std::min(double(i) + 0.5, double(tile - i) - 0.5);
  return std::clamp(d / double(ramp), 1e-3, 1.0);
}

}  // namespace

Upscaled upscale(UNet<float>& net, const Map& lr, const UpscaleOptions& o, const std::string& what,
                 const std::function<void(int64_t, int64_t)>& progress) {
  const UNetConfig& c = net.config();
  const int64_t s = c.scale, H = lr.h * s, W = lr.w * s, P = o.tile;
  const int64_t align = std::lcm(s, c.multiple());
  GP_CHECK(P > 0 && P % align == 0, "[sr upscale] tile ", P, ": expected a positive multiple of ", align,
           " (the scale ", s, " and the network's ", c.multiple(), ")");
  GP_CHECK(c.channels == 1, "[sr upscale] ", what, ": a model of ", c.channels, " channels (maps have one)");
  GP_CHECK(o.overlap >= 0 && o.overlap <= 0.5, "[sr upscale] overlap ", o.overlap, ": expected 0 .. 0.5");
  GP_CHECK(o.samples >= 1 && o.batch >= 1, "[sr upscale] samples and batch must be positive");
  GP_CHECK(H >= P && W >= P, "[sr upscale] ", what, ": the ", lr.h, " x ", lr.w, " map is smaller than one tile (",
           P / s, " x ", P / s, " input pixels at scale ", s, "); use a smaller --tile");
  o.sampler.validate(c.timesteps);
  GP_CHECK(o.project == "none" || o.project == "end" || o.project == "every", "[sr upscale] project '", o.project,
           "': expected none, end or every");
  GP_CHECK(o.project == "none" || o.degradation.scale == s, "[sr upscale] projection onto a degradation by ",
           o.degradation.scale, " for a model of scale ", s);
  GP_CHECK(o.project_iters >= 0, "[sr upscale] project_iters ", o.project_iters, ": expected >= 0");

  // The condition of the whole map, blanks filled with the mean (0 in network units).
  const Units u = Units::of(lr, c.transform, what);
  Map ylr = lr;
  for (double& x : ylr.v) x = std::isfinite(x) ? u.to(x) : 0.0;
  const Map cond = bicubic_up(ylr, s);

  const std::vector<int64_t> ys = origins(H, P, o.overlap, align), xs = origins(W, P, o.overlap, align);
  const int64_t ramp_y = ys.size() > 1 ? P - (ys[1] - ys[0]) : 0, ramp_x = xs.size() > 1 ? P - (xs[1] - xs[0]) : 0;
  std::vector<double> wy(static_cast<size_t>(P)), wx(static_cast<size_t>(P));
  for (int64_t i = 0; i < P; ++i) wy[size_t(i)] = feather(i, P, ramp_y), wx[size_t(i)] = feather(i, P, ramp_x);
  struct Tile {
    int64_t y, x;
  };
  std::vector<Tile> tiles;
  for (int64_t y : ys)
    for (int64_t x : xs) tiles.push_back({y, x});
  const int64_t nt = int64_t(tiles.size()), nb = (nt + o.batch - 1) / o.batch, HW = H * W;
  const Schedule sched = Schedule::of(c);
  const std::vector<int64_t> steps = sampler_steps(c.timesteps, o.sampler.steps, o.sampler.spacing);
  const double eta = o.sampler.effective_eta();
  const bool v_pred = c.prediction == "v";

  // The tiles' weights summed over the map: each pixel's blended prediction is normalized by it.
  std::vector<double> den(static_cast<size_t>(HW));
  for (const Tile& t : tiles)
    for (int64_t y = 0; y < P; ++y)
      for (int64_t x = 0; x < P; ++x) den[size_t((t.y + y) * W + t.x + x)] += wy[size_t(y)] * wx[size_t(x)];

  Upscaled r;
  r.tiles = nt;
  r.mean = Map(H, W);
  r.sd = Map(H, W);
  std::vector<float> xt(static_cast<size_t>(HW)), pred(static_cast<size_t>(HW)), z, input, tt, x0_last;
  const bool dpm = o.sampler.multistep();
  std::vector<double> num(static_cast<size_t>(HW));
  int64_t done = 0;
  const int64_t total = o.samples * nb * o.sampler.steps;
  for (int64_t smp = 0; smp < o.samples; ++smp) {
    // One sample of the whole map: x_t is one map, its noise drawn in raster order from (seed,
    // sample) alone. At each step every tile's network sees its window of x_t and the condition,
    // the tiles' predictions are blended with the feathering weights, and the map takes one
    // sampler step. Overlapping tiles thus agree on one realization of the small scales, where
    // blending tiles sampled apart would average two realizations and lose their power.
    Rng rng(o.seed * 0x9e3779b97f4a7c15ull ^ (uint64_t(smp) << 32) ^ 0x5352u);
    for (float& v : xt) v = float(rng.normal());
    double h_last = 0;
    if (dpm) x0_last.assign(size_t(HW), 0.f);
    for (size_t k = 0; k < steps.size(); ++k) {
      std::fill(num.begin(), num.end(), 0.0);
      for (int64_t b0 = 0; b0 < nt; b0 += o.batch) {
        const int64_t B = std::min(o.batch, nt - b0);
        input.assign(size_t(2 * B * P * P), 0.f);  // concat(x_t, cond) per pixel
        tt.assign(size_t(B), float(steps[k]));
        for (int64_t b = 0; b < B; ++b) {
          const Tile& t = tiles[size_t(b0 + b)];
          for (int64_t y = 0; y < P; ++y)
            for (int64_t x = 0; x < P; ++x) {
              const size_t i = size_t((t.y + y) * W + t.x + x), j = size_t(2 * ((b * P + y) * P + x));
              input[j] = xt[i], input[j + 1] = float(cond.v[i]);
            }
        }
        const float* out = net.forward(input.data(), tt.data(), B, P, P, false);
        r.flops += net.last_forward_flops();
        for (int64_t b = 0; b < B; ++b) {
          const Tile& t = tiles[size_t(b0 + b)];
          for (int64_t y = 0; y < P; ++y)
            for (int64_t x = 0; x < P; ++x)
              num[size_t((t.y + y) * W + t.x + x)] +=
                  wy[size_t(y)] * wx[size_t(x)] * double(out[size_t((b * P + y) * P + x)]);
        }
        if (progress) progress(++done, total);
      }
      // The update is linear in the prediction, so blending predictions blends the estimates of x0.
      for (size_t i = 0; i < num.size(); ++i) pred[i] = float(num[i] / den[i]);
      const double a = sched.abar[size_t(steps[k])];
      const double a_prev = k + 1 < steps.size() ? sched.abar[size_t(steps[k + 1])] : 1.0;
      if (o.project == "every") {
        // The estimate of x0 in physical units, projected, and the prediction that gives it from x_t.
        const double sa = std::sqrt(a), sn = std::sqrt(1 - a);
        Map est(H, W);
        for (size_t i = 0; i < xt.size(); ++i)
          est.v[i] = u.from(cond.v[i] + c.residual_std * x0_estimate(xt[i], pred[i], sa, sn, v_pred));
        back_project(est, lr, o.degradation, o.project_iters, o.project_tol);
        for (size_t i = 0; i < xt.size(); ++i)
          pred[i] = float(prediction_for(xt[i], (u.to(est.v[i]) - cond.v[i]) / c.residual_std, sa, sn, v_pred));
      }
      const bool noisy = eta > 0 && a_prev < 1;
      if (noisy) {
        z.resize(size_t(HW));
        for (float& v : z) v = float(rng.normal());
      }
      const float* zp = noisy ? z.data() : nullptr;
      if (dpm)
        h_last = dpm2m_update(xt.data(), pred.data(), x0_last.data(), HW, a, a_prev, h_last, v_pred, eta, zp);
      else
        ddim_update(xt.data(), pred.data(), zp, HW, a, a_prev, eta, v_pred);
    }
    // Welford's running mean and variance over the samples, in physical units.
    Map one(H, W);
    for (size_t i = 0; i < xt.size(); ++i) one.v[i] = u.from(cond.v[i] + c.residual_std * double(xt[i]));
    if (o.project == "end") back_project(one, lr, o.degradation, o.project_iters, o.project_tol);
    for (size_t i = 0; i < xt.size(); ++i) {
      const double v = one.v[i], d = v - r.mean.v[i];
      r.mean.v[i] += d / double(smp + 1);
      r.sd.v[i] += d * (v - r.mean.v[i]);
    }
    if (smp == 0) r.first = one;
    if (o.keep_samples) r.samples.push_back(std::move(one));
  }
  for (size_t i = 0; i < r.sd.v.size(); ++i) {
    r.sd.v[i] = o.samples > 1 ? std::sqrt(r.sd.v[i] / double(o.samples - 1)) : 0.0;
    const int64_t y = int64_t(i) / W, x = int64_t(i) % W;
    if (std::isfinite(lr.at(y / s, x / s))) continue;
    r.mean.v[i] = r.sd.v[i] = r.first.v[i] = std::nan("");
    for (Map& one : r.samples) one.v[i] = std::nan("");
  }
  return r;
}

}  // namespace genperf::sr
