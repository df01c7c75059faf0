// Data-parallel training: the step that splits micro-batches across ranks, reduces gradient
// buckets while backward runs, and updates each rank's shard of the optimizer state
// (genperf/dist.h).
#include <algorithm>
#include <cmath>

#include "genperf/dist.h"
#include "genperf/error.h"
#include "genperf/ops_train.h"

namespace genperf {

const char* shard_mode_name(ShardMode m) { return m == ShardMode::Optimizer ? "optimizer" : "none"; }

ShardMode parse_shard_mode(std::string_view s) {
  if (s == "none") return ShardMode::None;
  if (s == "optimizer") return ShardMode::Optimizer;
  if (s == "grads" || s == "full")
    fail("[train] --shard ", s, " (ZeRO-", s == "grads" ? 2 : 3, ") is not built yet: use none or optimizer");
  fail("[train] unknown --shard '", s, "': expected none or optimizer");
}

Json ModelStateBytes::to_json() const {
  return Json::Object{{"params", int64_t(params)},
                      {"grads", int64_t(grads)},
                      {"optimizer", int64_t(optimizer)},
                      {"total", int64_t(total())}};
}

DataParallel::DataParallel(TrainModel& m, DistOptions o, int64_t grad_accum) : model_(m), o_(o) {
  if (!o_.comm) own_ = make_local_comm();
  comm_ = o_.comm ? o_.comm : own_.get();
  const int64_t n = comm_->size();
  GP_CHECK(grad_accum >= 1 && grad_accum % n == 0, "[train] --grad-accum ", grad_accum, " (micro-batches per step, ",
           "across all ranks) does not split evenly across ", n, " ranks: use a multiple of ", n);
  GP_CHECK(o_.bucket_bytes >= sizeof(float), "[train] the gradient bucket must hold at least one value");
  local_ = grad_accum / n;

  const size_t P = m.trainable_params().size();
  counts_.assign(size_t(n), 0);
  if (o_.shard == ShardMode::None || n == 1) {
    shard_lo_ = 0, shard_hi_ = P;
    counts_[0] = P;  // unused: no segments when nothing is sharded
  } else {
    const size_t S = (P + size_t(n) - 1) / size_t(n);
    for (size_t r = 0; r < size_t(n); ++r) counts_[r] = std::min(S, P - std::min(P, r * S));
    shard_lo_ = std::min(P, size_t(rank()) * S);
    shard_hi_ = shard_lo_ + counts_[size_t(rank())];
  }
  const size_t per = std::max<size_t>(1, o_.bucket_bytes / sizeof(float));
  for (size_t hi = P; hi > 0;) {
    const size_t lo = hi > per ? hi - per : 0;
    buckets_.emplace_back(lo, hi);
    hi = lo;
  }
}

void DataParallel::launch(size_t ready_from) {
  float* g = model_.trainable_grads().data();
  const bool sharded = o_.shard == ShardMode::Optimizer && ranks() > 1;
  for (; next_bucket_ < buckets_.size() && buckets_[next_bucket_].first >= ready_from; ++next_bucket_) {
    const auto [lo, hi] = buckets_[next_bucket_];
    if (!sharded) {
      pending_.push_back(comm_->all_reduce(g + lo, hi - lo));
      continue;
    }
    // Each owner's part of the bucket: its shard [r S, r S + counts[r]) cut to [lo, hi).
    std::vector<size_t> part(counts_.size());
    size_t begin = 0;
    for (size_t r = 0; r < counts_.size(); ++r) {
      const size_t a = std::max(lo, begin), b = std::min(hi, begin + counts_[r]);
      part[r] = b > a ? b - a : 0;
      begin += counts_[r];
    }
    pending_.push_back(comm_->reduce_scatter(g + lo, std::move(part)));
  }
}

StepResult DataParallel::step(AdamW& opt, std::span<const MicroBatch> micro, float lr, double max_grad_norm) {
  GP_CHECK(int64_t(micro.size()) == local_, "[train] rank ", rank(), " was given ", micro.size(),
           " micro-batches for a step of ", local_);
  GP_CHECK(opt.first_moment().size() == shard_size(), "[train] the optimizer holds ", opt.first_moment().size(),
           " parameters, this rank's shard ", shard_size());
  const double bytes0 = comm_->stats().bytes, wait0 = comm_->stats().wait_s;
  TrainModel& m = model_;
  m.zero_grad();
  m.set_lora_step(opt.step_count(), first_micro());  // dropout masks from the step: reproduced on resume
  const double count = double(local_) * double(ranks());
  double loss = 0;
  pending_.clear();
  next_bucket_ = 0;
  for (size_t i = 0; i < micro.size(); ++i) {
    const MicroBatch& mb = micro[i];
    loss += m.forward(mb.tokens, mb.targets, mb.B, mb.T);
    // Buckets are reduced during the last backward only (earlier ones accumulate locally).
    const bool last = i + 1 == micro.size();
    if (last && o_.overlap) m.set_grads_ready_hook([this](size_t from) { launch(from); });
    m.backward(float(1.0 / count));
    m.set_grads_ready_hook(nullptr);
  }
  launch(0);
  for (CommHandle& h : pending_) h.wait();
  pending_.clear();

  StepResult r;
  double sum[1] = {loss};
  comm_->all_reduce(sum, 1).wait();
  r.loss = sum[0] / count;
  r.lr = lr;
  const std::span<float> grads = m.trainable_grads(), params = m.trainable_params();
  const std::span<float> g = grads.subspan(shard_lo_, shard_size()), p = params.subspan(shard_lo_, shard_size());
  if (shard_size() == grads.size()) {
    r.grad_norm = clip_grad_norm(grads, max_grad_norm);
  } else {
    double sq[1] = {ops::sum_squares(g.data(), int64_t(g.size()))};
    comm_->all_reduce(sq, 1).wait();
    r.grad_norm = std::sqrt(sq[0]);
    GP_CHECK(std::isfinite(r.grad_norm), "[clip_grad_norm] the gradient norm is ", r.grad_norm,
             " (a NaN or infinity in the gradients)");
    if (max_grad_norm > 0 && r.grad_norm > max_grad_norm)
      ops::scale(g.data(), int64_t(g.size()), float(max_grad_norm / (r.grad_norm + 1e-6)));
  }
  // The shard's segments, rebased to its start.
  std::vector<ParamSegment> segs;
  for (const ParamSegment& s : m.trainable_segments()) {
    const size_t a = std::max(s.offset, shard_lo_), b = std::min(s.offset + s.count, shard_hi_);
    if (b > a) segs.push_back({a - shard_lo_, b - a, s.decay});
  }
  opt.step(p, g, segs, lr);
  if (shard_size() != params.size()) comm_->all_gather(params.data(), counts_).wait();
  step_bytes_ = comm_->stats().bytes - bytes0;
  step_wait_s_ = comm_->stats().wait_s - wait0;
  return r;
}

std::vector<float> DataParallel::gather(std::span<const float> shard) {
  GP_CHECK(shard.size() == shard_size(), "[train] gather of ", shard.size(), " values from a shard of ", shard_size());
  std::vector<float> full(model_.trainable_params().size());
  std::copy(shard.begin(), shard.end(), full.begin() + ptrdiff_t(shard_lo_));
  if (shard_size() != full.size()) comm_->all_gather(full.data(), counts_).wait();
  return full;
}

ModelStateBytes DataParallel::model_state(const AdamW& opt) const {
  ModelStateBytes b;
  b.params = model_.trainable_params().size() * sizeof(float);
  b.grads = model_.trainable_grads().size() * sizeof(float);
  b.optimizer = opt.state_bytes();
  return b;
}

}  // namespace genperf
