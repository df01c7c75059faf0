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
#include "genperf/dist.h"
#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/json.h"
#include "genperf/sr_model.h"
#include "genperf/sr_train.h"
#include "genperf/train.h"

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

std::string options_key(const UNetConfig& c, const SRTrainOptions& o) {
  // What must not change across a resume (steps may grow).
  Json j = unet_config_json(c);
  j["batch"] = o.batch, j["crop"] = o.crop, j["lr"] = double(o.lr), j["min_lr"] = double(o.min_lr);
  j["warmup"] = o.warmup, j["clip"] = o.clip, j["weight_decay"] = o.weight_decay, j["ema"] = o.ema;
  j["seed"] = std::to_string(o.seed), j["blur"] = o.degradation.blur_sigma, j["noise"] = o.degradation.noise;
  j["grad_accum"] = o.grad_accum;  // the micro-batches draw the noise (the rank count may change)
  if (o.bf16) j["precision"] = "bf16";  // (absent for f32, as before bf16 existed)
  return j.dump();
}

// The UNet as data-parallel training sees it.
class UNetDist final : public DistModel {
 public:
  explicit UNetDist(UNet<float>& n) : n_(n) {}
  std::span<float> params() override { return n_.weights(); }
  std::span<float> grads() override { return n_.grads(); }
  std::vector<ParamSegment> segments() const override { return segments_; }
  void zero_grad() override { n_.zero_grad(); }
  void set_grads_ready_hook(std::function<void(size_t)> hook) override { n_.set_grads_ready_hook(std::move(hook)); }
  std::vector<std::vector<std::pair<size_t, size_t>>> param_units() const override {
    std::vector<std::vector<std::pair<size_t, size_t>>> units;
    for (const auto& r : n_.param_units()) units.push_back({r});
    return units;
  }
  void set_params_hook(std::function<void(int64_t, bool, bool)> hook) override { n_.set_params_hook(std::move(hook)); }
  void adopt_buffers(Tensor params, Tensor grads) override { n_.adopt_buffers(std::move(params), std::move(grads)); }
  void set_decay(bool decay) { segments_ = {ParamSegment{0, n_.weights().size(), decay}}; }

 private:
  UNet<float>& n_;
  std::vector<ParamSegment> segments_;
};

}  // namespace

SRTraining::SRTraining(const UNetConfig& c, uint64_t seed, bool zero_out, const SRTrainOptions& o,
                       std::span<const float> init)
    : o_(o), net_(c), opt_(0), sched_(Schedule::of(c)) {
  net_.set_bf16(o.bf16);
  GP_CHECK(o.grad_accum >= 1 && o.batch % o.grad_accum == 0, "[sr train] --grad-accum ", o.grad_accum,
           " does not divide the batch of ", o.batch, " crops");
  if (init.empty()) {
    net_.init(seed, zero_out);
  } else {
    GP_CHECK(init.size() == net_.weights().size(), "[sr train] ", init.size(), " initial weights for a network of ",
             net_.weights().size());
    std::copy(init.begin(), init.end(), net_.weights().begin());
  }
  auto view = std::make_unique<UNetDist>(net_);
  view->set_decay(o.weight_decay > 0);
  view_ = std::move(view);
  dp_ = std::make_unique<DataParallel>(*view_, o.dist, o.grad_accum);
  opt_ = AdamW(dp_->shard_size(), AdamWOptions{0.9f, 0.999f, 1e-8f, float(o.weight_decay)});
  const std::span<const float> p = dp_->param_shard();
  ema_.assign(p.begin(), p.end());
}

StepResult SRTraining::step(const float* cond, const float* x0, int64_t P,
                            const std::function<uint64_t(int64_t)>& noise_seed, float lr) {
  const int64_t b = o_.batch / o_.grad_accum, per = P * P * net_.config().channels;
  flops_ = 0;
  const StepResult r = dp_->step(
      opt_,
      [&](int64_t i, float scale) {
        const int64_t k = dp_->first_micro() + i;  // the micro-batch's index in the step
        Rng rng(noise_seed(k));
        const double loss = diffusion_loss(net_, sched_, cond + k * b * per, x0 + k * b * per, b, P, P, rng, true, scale);
        flops_ += 3 * net_.last_forward_flops();
        return loss;
      },
      lr, o_.clip);
  // EMA with DDPM's warm-up, decay min(ema, (1 + k) / (10 + k)) after optimizer step k.
  const double k = double(opt_.step_count() - 1);
  const float e = float(std::min(o_.ema, (1 + k) / (10 + k)));
  const std::span<const float> p = dp_->param_shard();
  for (size_t i = 0; i < ema_.size(); ++i) ema_[i] = e * ema_[i] + (1 - e) * p[i];
  return r;
}

std::vector<float> SRTraining::ema() { return dp_->gather(ema_); }
std::vector<float> SRTraining::weights() { return dp_->gather(dp_->param_shard()); }

void train_sr(UNetConfig c, const std::vector<Map>& train, const std::vector<Map>& val, const SRTrainOptions& o,
              const std::string& out_dir, bool resume, const std::function<void(const SRTrainLog&)>& on_log) {
  GP_CHECK(!train.empty(), "[sr train] no training maps");
  GP_CHECK(o.steps > 0 && o.batch > 0 && o.log_every > 0 && o.save_every > 0, "[sr train] steps, batch, log_every and save_every must be positive");
  GP_CHECK(o.ema >= 0 && o.ema < 1, "[sr train] ema ", o.ema, ": expected 0 <= ema < 1");
  Degradation d = o.degradation;
  const std::string state_path = out_dir + "/state.safetensors", log_path = out_dir + "/log.jsonl";
  const bool resuming = resume && std::filesystem::exists(state_path);
  std::vector<float> init;
  if (resuming) {
    // residual_std was measured by the run that wrote the state (or kept from the model it tuned).
    c = unet_config_from_json(Json::parse_file(out_dir + "/model/config.json"), out_dir + "/model/config.json");
  } else if (!o.init.empty()) {
    const UNet<float> base = load_sr_model(o.init);
    c = base.config();
    init.assign(base.weights().begin(), base.weights().end());
  } else {
    c.residual_std = 1;
  }
  GP_CHECK(d.scale == c.scale, "[sr train] degradation by ", d.scale, " for a model of scale ", c.scale,
           o.init.empty() ? "" : " (--init " + o.init + ")");
  const int64_t align = std::lcm(c.scale, c.multiple());
  GP_CHECK(o.crop > 0 && o.crop % align == 0, "[sr train] crop ", o.crop, ": expected a positive multiple of ", align);
  Communicator& comm = o.dist.comm ? *o.dist.comm : world();
  const bool lead = comm.rank() == 0;  // writes the shared files
  if (lead) std::filesystem::create_directories(out_dir);
  comm.barrier();
  std::vector<TrainingPair> train_pairs = pairs_of(train, c, d, "training");
  if (!resuming && init.empty()) {
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

  SRTrainOptions oo = o;
  oo.dist.comm = &comm;
  SRTraining t(c, o.seed, true, oo, init);
  DataParallel& dp = t.dp();
  const size_t n = t.net().weights().size();
  int64_t step = 0;
  if (resuming) {
    DistState st(state_path);
    const auto& md = st.metadata();
    const auto key = md.find("genperf.sr.options");
    GP_CHECK(key != md.end() && key->second == options_key(c, o), "[sr train] ", state_path,
             ": written by a run of another config or options; resume with the same ones");
    const auto at = md.find("genperf.sr.step");
    GP_CHECK(at != md.end(), "[sr train] ", state_path, ": no step in its metadata");
    step = std::stoll(at->second);
    st.check(n, {"weights", "ema", "adam.m", "adam.v"}, step);
    if (dp.params_sharded()) {
      st.copy("weights", dp.shard_begin(), dp.param_shard());
    } else {
      st.copy("weights", 0, t.net().weights());
    }
    st.copy("ema", dp.shard_begin(), t.ema_shard());
    st.copy("adam.m", dp.shard_begin(), t.optimizer().first_moment());
    st.copy("adam.v", dp.shard_begin(), t.optimizer().second_moment());
    t.optimizer().set_step_count(step);
    // Keep the log up to the state's step.
    if (lead) {
      std::ifstream in(log_path);
      std::string line, kept;
      while (std::getline(in, line))
        if (!line.empty() && Json::parse(line, log_path).at("step").as_int() <= step) kept += line + "\n";
      write_file_atomic(log_path, kept);
    }
  } else if (lead) {
    write_file_atomic(log_path, "");
  }

  const LrSchedule lrs{o.lr, o.min_lr, o.warmup, o.steps};
  // The EMA model, whole on every rank (a collective), for validation and the saved model.
  auto ema_net = [&] {
    UNet<float> e(c);
    e.set_bf16(o.bf16);
    const std::vector<float> w = t.ema();
    std::copy(w.begin(), w.end(), e.weights().begin());
    return e;
  };
  auto save = [&] {
    UNet<float> e = ema_net();
    if (lead) save_sr_model(out_dir + "/model", e);
    // This rank's part of the weights (all of them when nothing is sharded), EMA and moments.
    save_dist_state(dp, state_path, step,
                    {{"weights", dp.param_shard()}, {"ema", t.ema_shard()}, {"adam.m", t.optimizer().first_moment()},
                     {"adam.v", t.optimizer().second_moment()}},
                    {{"genperf.sr.step", std::to_string(step)}, {"genperf.sr.options", options_key(c, o)}});
  };
  // Fixed validation batches, split across the ranks (each batch's loss is the same on any).
  auto val_loss = [&]() -> double {
    if (!val_crops) return -1;
    UNet<float> e = ema_net();
    const Schedule sched = Schedule::of(c);
    std::vector<float> cond, x0;
    double l[1] = {0};
    for (int64_t k = comm.rank(); k < o.val_batches; k += comm.size()) {
      Rng rng(step_seed(o.seed, -1 - k, 7));
      val_crops->draw(rng, o.batch, cond, x0);
      l[0] += diffusion_loss(e, sched, cond.data(), x0.data(), o.batch, o.crop, o.crop, rng, false);
    }
    comm.all_reduce(l, 1).wait();
    return l[0] / double(o.val_batches);
  };

  std::vector<float> cond, x0;
  double loss_sum = 0, flops = 0, gnorm = 0;
  int64_t logged = step;
  auto t0 = std::chrono::steady_clock::now();
  std::ofstream log;
  if (lead) log.open(log_path, std::ios::app);
  while (step < o.steps) {
    Rng rng(step_seed(o.seed, step, 1));
    crops.draw(rng, o.batch, cond, x0);
    const float lr = lrs.at(step);
    const StepResult r =
        t.step(cond.data(), x0.data(), o.crop, [&](int64_t k) { return step_seed(o.seed, step, 2 + uint64_t(k)); }, lr);
    loss_sum += r.loss, gnorm = r.grad_norm;
    flops += t.last_flops() * double(comm.size());
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
      if (lead) log << j.dump() << "\n" << std::flush;
      if (on_log) on_log(l);
      loss_sum = flops = 0, logged = step;
      t0 = std::chrono::steady_clock::now();
    }
    if (step % o.save_every == 0 || step == o.steps || step == o.stop_at) save();
    if (step == o.stop_at) break;
  }
}

}  // namespace genperf::sr
