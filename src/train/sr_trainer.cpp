// Training the SR diffusion model (genperf/sr_train.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <utility>

#include "genperf/diffusion.h"
#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/json.h"
#include "genperf/sr_model.h"
#include "genperf/sr_train.h"
#include "genperf/train.h"
#include "io/safetensors.h"

namespace genperf::sr {
namespace {

// Draws batches of aligned crops from training pairs, with one of the eight flips and rotations.
class Crops {
 public:
  Crops(std::vector<TrainingPair> pairs, int64_t crop, int64_t align) : pairs_(std::move(pairs)), P_(crop), align_(align) {
    for (const TrainingPair& p : pairs_) {
      GP_CHECK(p.x0.h >= P_ && p.x0.w >= P_, "[sr train] a ", p.x0.h, " x ", p.x0.w,
               " map is smaller than a ", P_, " x ", P_, " crop");
      total_ += double(p.x0.h * p.x0.w);
    }
  }
  // cond, x0: [B, P, P, 1].
  void draw(Rng& rng, int64_t B, std::vector<float>& cond, std::vector<float>& x0) const {
    cond.resize(size_t(B * P_ * P_));
    x0.resize(cond.size());
    for (int64_t b = 0; b < B; ++b) {
      double pick = rng.uniform() * total_;  // maps weighted by their area
      size_t m = 0;
      for (; m + 1 < pairs_.size(); ++m) {
        const double area = double(pairs_[m].x0.h * pairs_[m].x0.w);
        if (pick < area) break;
        pick -= area;
      }
      const TrainingPair& p = pairs_[m];
      const int64_t y0 = int64_t(rng.uniform() * double((p.x0.h - P_) / align_ + 1)) * align_;
      const int64_t x0_ = int64_t(rng.uniform() * double((p.x0.w - P_) / align_ + 1)) * align_;
      const int k = int(rng.uniform() * 8);
      for (int64_t y = 0; y < P_; ++y)
        for (int64_t x = 0; x < P_; ++x) {
          int64_t sy = k & 4 ? x : y, sx = k & 4 ? y : x;
          if (k & 1) sy = P_ - 1 - sy;
          if (k & 2) sx = P_ - 1 - sx;
          const size_t o = size_t((b * P_ + y) * P_ + x);
          cond[o] = float(p.cond.at(y0 + sy, x0_ + sx));
          x0[o] = float(p.x0.at(y0 + sy, x0_ + sx));
        }
    }
  }

 private:
  std::vector<TrainingPair> pairs_;
  int64_t P_, align_;
  double total_ = 0;
};

uint64_t step_seed(uint64_t seed, int64_t step, uint64_t stream) {
  return seed * 0x9e3779b97f4a7c15ull + uint64_t(step) * 0xbf58476d1ce4e5b9ull + stream;
}

std::vector<TrainingPair> pairs_of(const std::vector<Map>& maps, const UNetConfig& c, const Degradation& d,
                                   const char* set) {
  std::vector<TrainingPair> pairs;
  for (size_t i = 0; i < maps.size(); ++i)
    pairs.push_back(training_pair(maps[i], c, d, std::string(set) + " map " + std::to_string(i)));
  return pairs;
}

Tensor vec(std::span<const float> v) {
  Tensor t = Tensor::zeros({int64_t(v.size())}, DType::F32);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

void load_vec(const SafetensorsFile& f, const std::string& name, std::span<float> out, const std::string& path) {
  const auto it = f.tensors.find(name);
  GP_CHECK(it != f.tensors.end() && it->second.dtype() == DType::F32 && it->second.numel() == int64_t(out.size()),
           "[sr train] ", path, ": tensor ", name, " is missing or not f32[", out.size(), "]");
  std::copy_n(it->second.data<float>(), out.size(), out.data());
}

std::string options_key(const UNetConfig& c, const SRTrainOptions& o) {
  // What must not change across a resume (steps may grow).
  Json j = unet_config_json(c);
  j["batch"] = o.batch, j["crop"] = o.crop, j["lr"] = double(o.lr), j["min_lr"] = double(o.min_lr);
  j["warmup"] = o.warmup, j["clip"] = o.clip, j["weight_decay"] = o.weight_decay, j["ema"] = o.ema;
  j["seed"] = std::to_string(o.seed), j["blur"] = o.degradation.blur_sigma, j["noise"] = o.degradation.noise;
  return j.dump();
}

}  // namespace

void train_sr(UNetConfig c, const std::vector<Map>& train, const std::vector<Map>& val, const SRTrainOptions& o,
              const std::string& out_dir, bool resume, const std::function<void(const SRTrainLog&)>& on_log) {
  GP_CHECK(!train.empty(), "[sr train] no training maps");
  GP_CHECK(o.steps > 0 && o.batch > 0 && o.log_every > 0 && o.save_every > 0, "[sr train] steps, batch, log_every and save_every must be positive");
  GP_CHECK(o.ema >= 0 && o.ema < 1, "[sr train] ema ", o.ema, ": expected 0 <= ema < 1");
  Degradation d = o.degradation;
  GP_CHECK(d.scale == c.scale, "[sr train] degradation by ", d.scale, " for a model of scale ", c.scale);
  const int64_t align = std::lcm(c.scale, c.multiple());
  GP_CHECK(o.crop > 0 && o.crop % align == 0, "[sr train] crop ", o.crop, ": expected a positive multiple of ", align);
  std::filesystem::create_directories(out_dir);
  const std::string state_path = out_dir + "/state.safetensors", log_path = out_dir + "/log.jsonl";
  const bool resuming = resume && std::filesystem::exists(state_path);
  if (resuming) {
    // residual_std was measured by the run that wrote the state.
    c = unet_config_from_json(Json::parse_file(out_dir + "/model/config.json"), out_dir + "/model/config.json");
  } else {
    c.residual_std = 1;
  }
  std::vector<TrainingPair> train_pairs = pairs_of(train, c, d, "training");
  if (!resuming) {
    // Measured on the targets in units of 1, which then take its units: x / 1 / s has the bits
    // of x / s, the targets of pairs built at residual_std s.
    double ss = 0, n = 0;
    for (const TrainingPair& p : train_pairs)
      for (double x : p.x0.v) ss += x * x, n += 1;
    c.residual_std = std::sqrt(ss / n);
    GP_CHECK(c.residual_std > 0, "[sr train] the training maps have no detail below the input's resolution");
    for (TrainingPair& p : train_pairs)
      for (double& x : p.x0.v) x /= c.residual_std;
  }
  c.validate("sr train");
  const Crops crops(std::move(train_pairs), o.crop, align);
  const std::vector<TrainingPair> val_pairs = pairs_of(val, c, d, "validation");
  std::unique_ptr<Crops> val_crops;
  if (!val_pairs.empty()) val_crops = std::make_unique<Crops>(val_pairs, o.crop, align);

  UNet<float> net(c), ema(c);
  net.init(o.seed);
  const size_t n = net.weights().size();
  AdamW opt(n, AdamWOptions{0.9f, 0.999f, 1e-8f, float(o.weight_decay)});
  const std::vector<ParamSegment> segments = {ParamSegment{0, n, o.weight_decay > 0}};
  std::copy(net.weights().begin(), net.weights().end(), ema.weights().begin());
  int64_t step = 0;
  if (resuming) {
    const SafetensorsFile f = read_safetensors(state_path);
    const auto key = f.metadata.find("genperf.sr.options");
    GP_CHECK(key != f.metadata.end() && key->second == options_key(c, o), "[sr train] ", state_path,
             ": written by a run of another config or options; resume with the same ones");
    load_vec(f, "weights", net.weights(), state_path);
    load_vec(f, "ema", ema.weights(), state_path);
    load_vec(f, "adam.m", opt.first_moment(), state_path);
    load_vec(f, "adam.v", opt.second_moment(), state_path);
    step = std::stoll(f.metadata.at("genperf.sr.step"));
    opt.set_step_count(step);
    // Keep the log up to the state's step.
    std::ifstream in(log_path);
    std::string line, kept;
    while (std::getline(in, line))
      if (!line.empty() && Json::parse(line, log_path).at("step").as_int() <= step) kept += line + "\n";
    write_file_atomic(log_path, kept);
  } else {
    write_file_atomic(log_path, "");
  }

  const Schedule sched = Schedule::of(c);
  const LrSchedule lrs{o.lr, o.min_lr, o.warmup, o.steps};
  auto save = [&] {
    save_sr_model(out_dir + "/model", ema);
    const std::map<std::string, std::string> meta = {{"genperf.sr.step", std::to_string(step)},
                                                     {"genperf.sr.options", options_key(c, o)}};
    write_safetensors(state_path,
                      {{"weights", vec(net.weights())}, {"ema", vec(ema.weights())},
                       {"adam.m", vec(opt.first_moment())}, {"adam.v", vec(opt.second_moment())}},
                      meta);
  };
  auto val_loss = [&]() -> double {
    if (!val_crops) return -1;
    std::vector<float> cond, x0;
    double l = 0;
    for (int64_t k = 0; k < o.val_batches; ++k) {
      Rng rng(step_seed(o.seed, -1 - k, 7));
      val_crops->draw(rng, o.batch, cond, x0);
      l += diffusion_loss(ema, sched, cond.data(), x0.data(), o.batch, o.crop, o.crop, rng, false);
    }
    return l / double(o.val_batches);
  };

  std::vector<float> cond, x0;
  double loss_sum = 0, flops = 0, gnorm = 0;
  int64_t logged = step;
  auto t0 = std::chrono::steady_clock::now();
  std::ofstream log(log_path, std::ios::app);
  while (step < o.steps) {
    Rng rng(step_seed(o.seed, step, 1));
    crops.draw(rng, o.batch, cond, x0);
    net.zero_grad();
    loss_sum += diffusion_loss(net, sched, cond.data(), x0.data(), o.batch, o.crop, o.crop, rng);
    flops += 3 * net.last_forward_flops();
    gnorm = clip_grad_norm(net.grads(), o.clip);
    const float lr = lrs.at(step);
    opt.step(net.weights(), net.grads(), segments, lr);
    // EMA with DDPM's warm-up: decay min(ema, (1 + k) / (10 + k)).
    const float e = float(std::min(o.ema, double(1 + step) / double(10 + step)));
    std::span<float> w = net.weights(), ew = ema.weights();
    for (size_t i = 0; i < n; ++i) ew[i] = e * ew[i] + (1 - e) * w[i];
    ++step;
    if (step % o.log_every == 0 || step == o.steps) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      SRTrainLog l;
      l.step = step, l.loss = loss_sum / double(step - logged), l.lr = lr, l.grad_norm = gnorm;
      l.images_per_s = double((step - logged) * o.batch) / secs, l.flops_per_s = flops / secs;
      l.val_loss = val_loss();
      Json j = Json::Object{};
      j["step"] = step, j["loss"] = l.loss, j["val_loss"] = l.val_loss, j["lr"] = l.lr;
      j["grad_norm"] = l.grad_norm, j["images_per_s"] = l.images_per_s;
      log << j.dump() << "\n" << std::flush;
      if (on_log) on_log(l);
      loss_sum = flops = 0, logged = step;
      t0 = std::chrono::steady_clock::now();
    }
    if (step % o.save_every == 0 || step == o.steps || step == o.stop_at) save();
    if (step == o.stop_at) break;
  }
}

}  // namespace genperf::sr
