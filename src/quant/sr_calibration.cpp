// The SR UNet's calibration (genperf/sensitivity.h): how far a variant's prediction moves from the
// reference network's on noised crops of calibration maps. The crops, their diffusion steps and
// noise are drawn once from the seed; the reference's prediction is computed once, so each score
// is one forward pass of the variant.
//
//   rel_mse = sum (pred - ref)^2 / sum ref^2 over every crop's pixels (kl_max: the largest crop's)
//   nll     = the diffusion loss: the mean of (pred - target)^2, target v or eps (the model's)
//
// make_calibration is here too: it picks each family's calibration.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "genperf/diffusion.h"
#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/model_family.h"
#include "genperf/ops_image.h"
#include "genperf/rng.h"
#include "genperf/sensitivity.h"
#include "genperf/sr_model.h"

namespace genperf {
namespace {

using sr::UNet;

class SrCalibration final : public Calibration {
 public:
  SrCalibration(const Checkpoint& ck, const std::string& spec, const CalibrationOptions& opt)
      : ck_(ck.source, ck.tensors), source_(spec), crop_(opt.crop) {
    const char* op = "[calibration] ";
    UNet<float> net = sr::unet_from_checkpoint(ck);
    config_ = net.config();
    const sr::UNetConfig& c = config_;
    GP_CHECK(opt.crops > 0, op, "--crops must be positive, got ", opt.crops);
    GP_CHECK(crop_ >= c.multiple() && crop_ % c.multiple() == 0 && crop_ % c.scale == 0, op, "--crop ", crop_,
             " must be a multiple of the network's ", c.multiple(), " and of the scale ", c.scale);
    const auto maps = sr::read_maps(spec);
    GP_CHECK(!maps.empty(), op, spec, ": no maps");
    sr::Degradation d;
    d.scale = c.scale;
    std::vector<sr::TrainingPair> pairs;
    for (const auto& [name, m] : maps) {
      GP_CHECK(m.h >= crop_ && m.w >= crop_, op, name, ": ", m.h, "x", m.w, " is smaller than one crop of ", crop_);
      pairs.push_back(sr::training_pair(m, c, d, name));
    }
    const sr::Schedule sched = sr::Schedule::of(c);
    const bool v = c.prediction == "v";
    const int64_t P = crop_ * crop_, C = c.channels;
    GP_CHECK(C == 1, op, ck.source, ": calibration reads single-channel maps; the model has ", C, " channels");
    n_ = opt.crops;
    input_.resize(size_t(n_ * P * 2 * C));
    t_.resize(size_t(n_));
    target_.resize(size_t(n_ * P * C));
    Rng rng(opt.seed);
    for (int64_t i = 0; i < n_; ++i) {
      const sr::TrainingPair& p = pairs[size_t(i) % pairs.size()];
      const int64_t y0 = int64_t(rng.uniform() * double(p.x0.h - crop_ + 1));
      const int64_t x0 = int64_t(rng.uniform() * double(p.x0.w - crop_ + 1));
      // Steps spread evenly over the schedule (stratified), so every noise level is scored.
      const int64_t t = std::min<int64_t>(c.timesteps - 1, int64_t((double(i) + rng.uniform()) / double(n_) * double(c.timesteps)));
      t_[size_t(i)] = float(t);
      const double a = sched.abar[size_t(t)], sa = std::sqrt(a), sb = std::sqrt(1 - a);
      float* in = input_.data() + i * P * 2 * C;
      float* tg = target_.data() + i * P * C;
      for (int64_t y = 0; y < crop_; ++y)
        for (int64_t x = 0; x < crop_; ++x) {
          const int64_t q = y * crop_ + x;
          const double x0v = p.x0.at(y0 + y, x0 + x), e = rng.normal();
          in[q * 2 * C] = float(sa * x0v + sb * e);            // the noisy target (channels = 1)
          in[q * 2 * C + C] = float(p.cond.at(y0 + y, x0 + x));  // the condition
          tg[q * C] = float(v ? sa * e - sb * x0v : e);
        }
    }
    const auto t0 = std::chrono::steady_clock::now();
    ref_ = predict(net);
    seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double num = 0;
    for (size_t i = 0; i < ref_.size(); ++i) num += (double(ref_[i]) - target_[i]) * (double(ref_[i]) - target_[i]);
    ref_loss_ = num / double(ref_.size());
  }

  const char* metric() const override { return "rel_mse"; }

  CalibrationScore score(const Checkpoint& variant) const override {
    return score_net(sr::unet_from_checkpoint(variant));
  }

  CalibrationScore score_with(const std::map<std::string, Tensor>& replaced) const override {
    Checkpoint c;
    c.source = ck_.first;
    c.architecture = sr::kUNetArchitecture;
    c.config_json = sr::unet_config_json(config_);
    c.tensors = ck_.second;
    for (const auto& [n, t] : replaced) {
      GP_CHECK(c.tensors.count(n), "[calibration] ", c.source, " has no tensor ", n, " to replace");
      c.tensors[n] = t;
    }
    return score_net(sr::unet_from_checkpoint(c));
  }

  ActivationStats activation_stats(const Checkpoint&, bool) const override { return {}; }
  int64_t ctx() const override { return crop_; }
  int64_t tokens() const override { return int64_t(ref_.size()); }
  double reference_nll() const override { return ref_loss_; }
  double seconds_per_score() const override { return seconds_; }
  std::string describe() const override {
    return cat(source_, ": ", n_, " crops of ", crop_, "x", crop_, " at stratified diffusion steps, reference loss ",
               ref_loss_);
  }

 private:
  static constexpr int64_t kBatch = 8;  // crops per forward pass

  std::vector<float> predict(UNet<float>& net) const {
    const int64_t P = crop_ * crop_, C = config_.channels;
    std::vector<float> out(size_t(n_ * P * C));
    for (int64_t b0 = 0; b0 < n_; b0 += kBatch) {
      const int64_t B = std::min(kBatch, n_ - b0);
      const float* y = net.forward(input_.data() + b0 * P * 2 * C, t_.data() + b0, B, crop_, crop_, false);
      std::copy_n(y, size_t(B * P * C), out.data() + b0 * P * C);
    }
    return out;
  }

  CalibrationScore score_net(UNet<float> net) const {
    const std::vector<float> y = predict(net);
    const size_t per = y.size() / size_t(n_);
    CalibrationScore s;
    double num = 0, den = 0, loss = 0;
    for (int64_t i = 0; i < n_; ++i) {
      double n1 = 0, d1 = 0;
      for (size_t k = size_t(i) * per; k < size_t(i + 1) * per; ++k) {
        const double e = double(y[k]) - ref_[k], r = ref_[k], l = double(y[k]) - target_[k];
        n1 += e * e, d1 += r * r, loss += l * l;
      }
      num += n1, den += d1;
      s.kl_max = std::max(s.kl_max, d1 > 0 ? n1 / d1 : 0.0);
    }
    s.kl = den > 0 ? num / den : 0;
    s.nll = loss / double(y.size());
    s.dloss = s.nll - ref_loss_;
    s.top1 = std::nan("");
    s.tokens = int64_t(y.size());
    return s;
  }

  std::pair<std::string, std::map<std::string, Tensor>> ck_;  // the reference's source and tensors
  sr::UNetConfig config_;
  std::string source_;
  int64_t crop_ = 64, n_ = 0;
  std::vector<float> input_, t_, target_, ref_;
  double ref_loss_ = 0, seconds_ = 0;
};

}  // namespace

std::unique_ptr<Calibration> make_calibration(const Checkpoint& ck, const std::string& path,
                                              const CalibrationOptions& opt) {
  if (ck.arch() == sr::kUNetArchitecture) return std::make_unique<SrCalibration>(ck, path, opt);
  CalibrationOptions o = opt;
  o.source = path;
  return std::make_unique<CalibrationReference>(ck, read_text_file(path), o);
}

}  // namespace genperf
