// Data-parallel training: the step that splits micro-batches across ranks, reduces gradient
// buckets while backward runs, and updates each rank's shard of the optimizer state
// (genperf/dist.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "genperf/dist.h"
#include "genperf/error.h"
#include "genperf/json.h"
#include "genperf/ops_train.h"
#include "io/safetensors.h"
#include "train/paged.h"

namespace genperf {

namespace {

using train::page_floats;
using train::paged_zeros;
using train::resident_bytes;
using train::round_up;

// Each rank's count of n values split in contiguous shards of ceil(n / ranks) (the last ones
// shorter or empty).
std::vector<size_t> shard_counts_of(size_t n, size_t ranks) {
  const size_t S = (n + ranks - 1) / ranks;
  std::vector<size_t> counts(ranks);
  for (size_t r = 0; r < ranks; ++r) counts[r] = std::min(S, n - std::min(n, r * S));
  return counts;
}

// Each rank's part of [lo, hi) when rank r owns counts[r] values after those of ranks < r.
std::vector<size_t> parts_of(size_t lo, size_t hi, const std::vector<size_t>& counts) {
  std::vector<size_t> part(counts.size());
  size_t begin = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    const size_t a = std::max(lo, begin), b = std::min(hi, begin + counts[r]);
    part[r] = b > a ? b - a : 0;
    begin += counts[r];
  }
  return part;
}

}  // namespace

std::vector<std::pair<size_t, size_t>> gradient_buckets(size_t n, size_t bucket_bytes) {
  const size_t page = page_floats();
  const size_t per = std::max<size_t>(page, bucket_bytes / sizeof(float) / page * page);
  std::vector<std::pair<size_t, size_t>> buckets;
  for (size_t hi = n; hi > 0;) {
    const size_t lo = hi > per ? (hi - per) / page * page : 0;
    buckets.emplace_back(lo, hi);
    hi = lo;
  }
  return buckets;
}

const char* shard_mode_name(ShardMode m) {
  switch (m) {
    case ShardMode::Optimizer: return "optimizer";
    case ShardMode::Grads: return "grads";
    case ShardMode::Full: return "full";
    default: return "none";
  }
}

ShardMode parse_shard_mode(std::string_view s) {
  for (ShardMode m : {ShardMode::None, ShardMode::Optimizer, ShardMode::Grads, ShardMode::Full})
    if (s == shard_mode_name(m)) return m;
  fail("[train] unknown --shard '", s, "': expected none, optimizer (ZeRO-1), grads (ZeRO-2) or full (ZeRO-3, FSDP)");
}

CommOverlap parse_comm_overlap(std::string_view s) {
  if (s == "auto") return CommOverlap::Auto;
  if (s == "on") return CommOverlap::On;
  if (s == "off") return CommOverlap::Off;
  fail("[train] unknown --comm-overlap '", s, "': expected auto, on or off");
}

bool resolve_comm_overlap(CommOverlap o, ShardMode s, int local_ranks, int threads, int node_cores,
                          int affinity_cores) {
  if (o != CommOverlap::Auto) return o == CommOverlap::On;
  if (s == ShardMode::Grads || s == ShardMode::Full) return true;
  return int64_t(local_ranks) * threads < node_cores && affinity_cores > threads;
}

Json ModelStateBytes::to_json() const {
  return Json::Object{{"params", int64_t(params)},
                      {"grads", int64_t(grads)},
                      {"optimizer", int64_t(optimizer)},
                      {"frozen", int64_t(frozen)},
                      {"total", int64_t(total())},
                      {"comm_buffers", int64_t(comm_buffers)}};
}

namespace {

// The LLM as data-parallel training sees it: its trainable buffers (LoRA's adapters when on,
// the base then frozen).
class LlamaDist final : public DistModel {
 public:
  explicit LlamaDist(TrainModel& m) : m_(m) {}
  std::span<float> params() override { return m_.trainable_params(); }
  std::span<float> grads() override { return m_.trainable_grads(); }
  std::vector<ParamSegment> segments() const override { return m_.trainable_segments(); }
  void zero_grad() override { m_.zero_grad(); }
  void set_grads_ready_hook(std::function<void(size_t)> hook) override { m_.set_grads_ready_hook(std::move(hook)); }
  std::vector<std::vector<std::pair<size_t, size_t>>> param_units() const override { return m_.trainable_units(); }
  void set_params_hook(std::function<void(int64_t, bool, bool)> hook) override { m_.set_params_hook(std::move(hook)); }
  void adopt_buffers(Tensor params, Tensor grads) override {
    m_.adopt_trainable_buffers(std::move(params), std::move(grads));
  }
  std::span<float> frozen() override { return m_.lora_enabled() ? m_.params() : std::span<float>(); }
  std::vector<std::vector<std::pair<size_t, size_t>>> frozen_units() const override {
    return m_.lora_enabled() ? m_.param_units() : std::vector<std::vector<std::pair<size_t, size_t>>>();
  }
  void adopt_frozen(Tensor params) override { m_.adopt_buffers(std::move(params), Tensor()); }
  // With LoRA the trainable parameters are the adapters (written when enabled), the base frozen.
  void init_params(size_t lo, size_t hi, float* dst) override {
    if (m_.lora_enabled()) return DistModel::init_params(lo, hi, dst);
    m_.init_params(lo, hi, dst);
  }
  void init_frozen(size_t lo, size_t hi, float* dst) override { m_.init_params(lo, hi, dst); }
  void materialize() override { m_.materialize(); }

 private:
  TrainModel& m_;
};

}  // namespace

DataParallel::DataParallel(TrainModel& m, DistOptions o, int64_t grad_accum)
    : adapter_(std::make_unique<LlamaDist>(m)), llm_(&m), model_(*adapter_), o_(o) {
  init(grad_accum);
}

DataParallel::DataParallel(DistModel& m, DistOptions o, int64_t grad_accum) : model_(m), o_(o) { init(grad_accum); }

void DataParallel::init(int64_t grad_accum) {
  DistModel& m = model_;
  if (!o_.comm) own_ = make_local_comm();
  comm_ = o_.comm ? o_.comm : own_.get();
  const int64_t n = comm_->size();
  GP_CHECK(grad_accum >= 1 && grad_accum % n == 0, "[train] --grad-accum ", grad_accum, " (micro-batches per step, ",
           "across all ranks) does not split evenly across ", n, " ranks: use a multiple of ", n);
  GP_CHECK(o_.bucket_bytes >= sizeof(float), "[train] the gradient bucket must hold at least one value");
  local_ = grad_accum / n;

  const size_t P = m.params().size();
  total_ = P;
  counts_.assign(size_t(n), 0);
  if (o_.shard == ShardMode::None || n == 1) {
    shard_lo_ = 0, shard_hi_ = P;
    counts_[0] = P;  // unused: no segments when nothing is sharded
  } else {
    counts_ = shard_counts_of(P, size_t(n));
    shard_lo_ = std::min(P, size_t(rank()) * counts_[0]);
    shard_hi_ = shard_lo_ + counts_[size_t(rank())];
  }
  buckets_ = gradient_buckets(P, o_.bucket_bytes);
  // Sharded initialization: fully sharded, a rank writes only its shards of the parameters
  // (and of LoRA's frozen base); in every other mode the model holds them all.
  const bool full = o_.shard == ShardMode::Full && n > 1;
  if (!full) m.materialize();
  if (!paged() || n == 1) return;
  grad_shard_.assign(shard_size(), 0.0f);
  grad_window_ = paged_zeros(P);
  if (full) {
    param_shard_.resize(shard_size());
    m.init_params(shard_lo_, shard_hi_, param_shard_.data());
    param_window_ = paged_zeros(P);
    units_ = m.param_units();
    gathers_.resize(units_.size());
    gathered_.assign(units_.size(), false);
    // Frozen parameters: sharded alike (over their own count) and gathered with each unit.
    const std::span<const float> f = m.frozen();
    if (!f.empty()) {
      const size_t F = f.size();
      frozen_counts_ = shard_counts_of(F, size_t(n));
      frozen_lo_ = std::min(F, size_t(rank()) * frozen_counts_[0]);
      frozen_shard_.resize(frozen_counts_[size_t(rank())]);
      m.init_frozen(frozen_lo_, frozen_lo_ + frozen_shard_.size(), frozen_shard_.data());
      frozen_units_ = m.frozen_units();
      GP_CHECK(frozen_units_.size() == units_.size(), "[train] internal: ", frozen_units_.size(),
               " units of frozen parameters for ", units_.size(), " units of trainable ones");
      frozen_window_ = paged_zeros(F);
      m.adopt_frozen(frozen_window_);  // the model's own copy is freed
    }
    m.set_params_hook([this](int64_t u, bool done, bool backward) { on_params(u, done, backward); });
  }
  m.adopt_buffers(param_window_, grad_window_);  // the model's own buffers are freed
}

DataParallel::~DataParallel() {
  if (paged() && ranks() > 1) model_.set_params_hook(nullptr);
}

std::span<float> DataParallel::param_shard() {
  if (params_sharded()) return param_shard_;
  return model_.params().subspan(shard_lo_, shard_size());
}

void DataParallel::note_resident() {
  if (measured_) return;
  size_t r = resident_bytes(grad_window_.data<float>(), size_t(grad_window_.numel()));
  for (const Tensor* w : {&param_window_, &frozen_window_})
    if (w->defined()) r += resident_bytes(w->data<float>(), size_t(w->numel()));
  resident_peak_ = std::max(resident_peak_, r);
}

// Issues the all-gather of a unit into the parameter window: this rank's part of each range is
// copied in from its shard first.
void DataParallel::gather_unit(size_t u) {
  if (!gathers_[u].empty()) return;
  float* w = param_window_.data<float>();
  for (const auto& [lo, hi] : units_[u]) {
    const size_t a = std::max(lo, shard_lo_), b = std::min(hi, shard_hi_);
    if (b > a) std::copy(param_shard_.begin() + ptrdiff_t(a - shard_lo_), param_shard_.begin() + ptrdiff_t(b - shard_lo_), w + a);
    gathers_[u].push_back(comm_->all_gather(w + lo, parts_of(lo, hi, counts_)));
  }
  if (frozen_units_.empty()) return;
  float* f = frozen_window_.data<float>();
  const size_t flo = frozen_lo_, fhi = frozen_lo_ + frozen_shard_.size();
  for (const auto& [lo, hi] : frozen_units_[u]) {
    const size_t a = std::max(lo, flo), b = std::min(hi, fhi);
    if (b > a) std::copy(frozen_shard_.begin() + ptrdiff_t(a - flo), frozen_shard_.begin() + ptrdiff_t(b - flo), f + a);
    gathers_[u].push_back(comm_->all_gather(f + lo, parts_of(lo, hi, frozen_counts_)));
  }
}

// Whether no unit but u that is gathered, being gathered or running has values in the page
// from page_lo.
bool DataParallel::page_free(const Units& units, size_t page_lo, size_t u) const {
  const size_t page_hi = page_lo + page_floats();
  for (size_t v = 0; v < units.size(); ++v) {
    if (v == u || (gathers_[v].empty() && !gathered_[v])) continue;
    for (const auto& [lo, hi] : units[v])
      if (lo < page_hi && hi > page_lo) return false;
  }
  return true;
}

// Gives back a unit's pages of a window once it is done: those inside its ranges, and those at
// their edges that it shares with other units when none of these is held (a page straddling two
// units would otherwise stay resident, one a unit boundary, all step). A unit not held has no
// values to keep: it is gathered whole again before it is read.
void DataParallel::release_unit(size_t u, float* window, const Units& units) {
  const size_t page = page_floats();
  for (const auto& [lo, hi] : units[u]) {
    const size_t a = lo / page * page, b = round_up(hi, page);
    train::release_pages(window, a < lo && page_free(units, a, u) ? a : lo,
                         b > hi && page_free(units, b - page, u) ? b : hi);
  }
}

void DataParallel::on_params(int64_t unit, bool done, bool backward) {
  const size_t u = size_t(unit), last = units_.size() - 1;
  if (done) {
    // Gathered in full by gather_all_params: kept until the next step.
    if (gathered_[u]) return;
    for (CommHandle& h : gathers_[u]) h.wait();
    gathers_[u].clear();
    if (backward) note_resident();  // the unit's gradients written, its parameters still held
    release_unit(u, param_window_.data<float>(), units_);
    if (!frozen_units_.empty()) release_unit(u, frozen_window_.data<float>(), frozen_units_);
    return;
  }
  gather_unit(u);
  for (CommHandle& h : gathers_[u]) h.wait();
  note_resident();
  // Prefetch the unit that runs next while this one computes: forward goes up to the head,
  // backward down from the last layer to the first (the embedding's gradient reads no weights).
  const size_t next = backward ? (u >= 2 ? u - 1 : 0) : (u < last ? u + 1 : 0);
  if (next != 0) gather_unit(next);
}

void DataParallel::gather_all_params() {
  if (!params_sharded()) return;
  for (size_t u = 0; u < units_.size(); ++u) {
    gather_unit(u);
    for (CommHandle& h : gathers_[u]) h.wait();
    gathers_[u].clear();
    gathered_[u] = true;
  }
}

// Takes reduced buckets, in launch order, into the gradient shard and gives their pages back:
// those already reduced, then, waiting for them, the oldest until at most `keep` are in flight.
// Everything above a drained bucket is drained, so the pages from its lower edge up are free.
void DataParallel::drain(size_t keep) {
  float* g = grad_window_.data<float>();
  for (; drained_ < pending_.size(); ++drained_) {
    if (pending_.size() - drained_ <= keep && !pending_[drained_].done()) break;
    pending_[drained_].wait();
    const auto [lo, hi] = buckets_[drained_];
    const size_t a = std::max(lo, shard_lo_), b = std::min(hi, shard_hi_);
    for (size_t i = a; i < b; ++i) grad_shard_[i - shard_lo_] += g[i];
    train::release_pages(g, lo, freed_from_);
    freed_from_ = std::min(freed_from_, round_up(lo, page_floats()));
  }
}

void DataParallel::launch(size_t ready_from) {
  float* g = model_.grads().data();
  const bool sharded = o_.shard != ShardMode::None && ranks() > 1;
  for (; next_bucket_ < buckets_.size() && buckets_[next_bucket_].first >= ready_from; ++next_bucket_) {
    const auto [lo, hi] = buckets_[next_bucket_];
    if (!sharded) {
      pending_.push_back(comm_->all_reduce(g + lo, hi - lo));
      continue;
    }
    // Each owner's part of the bucket: its shard cut to [lo, hi).
    pending_.push_back(comm_->reduce_scatter(g + lo, parts_of(lo, hi, counts_)));
  }
  // The windows' high point: the gradients backward has just finished, before any is drained.
  // Backward goes on once at most inflight_buckets are left to reduce (a rate limit, as FSDP's
  // on its gathers): the window then holds a bounded number of buckets however slow the link.
  if (paged() && sharded) {
    note_resident();
    drain(o_.inflight_buckets);
  }
}

StepResult DataParallel::step(AdamW& opt, std::span<const MicroBatch> micro, float lr, double max_grad_norm) {
  GP_CHECK(llm_, "[train] internal: a step of micro-batches of tokens for a model that is not the LLM");
  GP_CHECK(int64_t(micro.size()) == local_, "[train] rank ", rank(), " was given ", micro.size(),
           " micro-batches for a step of ", local_);
  TrainModel& m = *llm_;
  m.set_lora_step(opt.step_count(), first_micro());  // dropout masks from the step: reproduced on resume
  return step(
      opt,
      [&](int64_t i, float scale) {
        const MicroBatch& mb = micro[size_t(i)];
        const double loss = m.forward(mb.tokens, mb.targets, mb.B, mb.T);
        m.backward(scale);
        return loss;
      },
      lr, max_grad_norm);
}

StepResult DataParallel::step(AdamW& opt, const MicroStep& run, float lr, double max_grad_norm) {
  GP_CHECK(opt.first_moment().size() == shard_size(), "[train] the optimizer holds ", opt.first_moment().size(),
           " parameters, this rank's shard ", shard_size());
  const double bytes0 = comm_->stats().bytes, wait0 = comm_->stats().wait_s;
  DistModel& m = model_;
  const bool window = paged() && ranks() > 1;
  // The gradient window reads as zeros once every bucket of a backward is drained; a params
  // window gathered whole for export is given back.
  if (!window) m.zero_grad();
  if (window) {
    std::fill(grad_shard_.begin(), grad_shard_.end(), 0.0f);
    for (size_t u = 0; u < gathered_.size(); ++u)
      if (gathered_[u]) {
        gathered_[u] = false;
        on_params(int64_t(u), true, false);
      }
  }
  const double count = double(local_) * double(ranks());
  double loss = 0;
  for (int64_t i = 0; i < local_; ++i) {
    // Buckets are reduced during the last backward only (earlier ones accumulate locally), or,
    // with the gradients sharded, during every backward (the window holds one at a time).
    const bool last = i + 1 == local_;
    pending_.clear();
    next_bucket_ = drained_ = 0;
    freed_from_ = round_up(m.grads().size(), page_floats());
    if ((last || window) && o_.overlap) m.set_grads_ready_hook([this](size_t from) { launch(from); });
    loss += run(i, float(1.0 / count));
    m.set_grads_ready_hook(nullptr);
    if (last || window) launch(0);
    if (window) drain(0);
  }
  for (CommHandle& h : pending_) h.wait();
  pending_.clear();

  StepResult r;
  double sum[1] = {loss};
  comm_->all_reduce(sum, 1).wait();
  r.loss = sum[0] / count;
  r.lr = lr;
  const std::span<float> grads = m.grads(), params = m.params();
  const std::span<float> g = window ? std::span<float>(grad_shard_) : grads.subspan(shard_lo_, shard_size());
  const std::span<float> p = param_shard();
  if (!sharded()) {
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
  for (const ParamSegment& s : m.segments()) {
    const size_t a = std::max(s.offset, shard_lo_), b = std::min(s.offset + s.count, shard_hi_);
    if (b > a) segs.push_back({a - shard_lo_, b - a, s.decay});
  }
  opt.step(p, g, segs, lr);
  // Full gathers its units as they run; the others gather the updated parameters now.
  if (sharded() && !params_sharded()) comm_->all_gather(params.data(), counts_).wait();
  // The windows' resident pages are counted (mincore, at every unit and bucket) in the first
  // step only: every step repeats its pattern, and the count is not free at 110m.
  if (window) measured_ = true;
  step_bytes_ = comm_->stats().bytes - bytes0;
  step_wait_s_ = comm_->stats().wait_s - wait0;
  return r;
}

std::vector<float> DataParallel::gather(std::span<const float> shard) {
  GP_CHECK(shard.size() == shard_size(), "[train] gather of ", shard.size(), " values from a shard of ", shard_size());
  std::vector<float> full(model_.params().size());
  std::copy(shard.begin(), shard.end(), full.begin() + ptrdiff_t(shard_lo_));
  if (shard_size() != full.size()) comm_->all_gather(full.data(), counts_).wait();
  return full;
}

ModelStateBytes DataParallel::model_state(const AdamW& opt) const {
  ModelStateBytes b;
  const bool window = paged() && ranks() > 1;
  b.params = (params_sharded() ? shard_size() : model_.params().size()) * sizeof(float);
  b.grads = (window ? shard_size() : model_.grads().size()) * sizeof(float);
  b.optimizer = opt.state_bytes();
  b.frozen = (frozen_units_.empty() ? model_.frozen().size() : frozen_shard_.size()) * sizeof(float);
  b.comm_buffers = resident_peak_;
  return b;
}

// ---------------------------------------------------------------------------------------------
// Training states across ranks

namespace {

namespace fs = std::filesystem;
constexpr const char* kShardFormat = "genperf-train-state-shard";

// The state's path without ".safetensors": its shards are <stem>.step<S>.rank<r>-of-<N>.safetensors.
std::string state_stem(const std::string& path) {
  const std::string ext = ".safetensors";
  const bool has_ext = path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
  return has_ext ? path.substr(0, path.size() - ext.size()) : path;
}

std::string shard_path(const std::string& path, int64_t step, int rank, int ranks) {
  return cat(state_stem(path), ".step", step, ".rank", rank, "-of-", ranks, ".safetensors");
}

}  // namespace

void save_dist_state(DataParallel& dp, const std::string& path, int64_t step,
                     const std::vector<std::pair<std::string, std::span<const float>>>& tensors,
                     std::map<std::string, std::string> metadata) {
  auto wrap = [](std::span<const float> s) {
    return Tensor::wrap(const_cast<float*>(s.data()), {int64_t(s.size())}, DType::F32, nullptr);
  };
  std::vector<std::pair<std::string, Tensor>> mine;
  for (const auto& [name, values] : tensors) mine.emplace_back(name, wrap(values));
  if (!dp.sharded()) {  // every rank holds the whole state: rank 0 writes it
    if (dp.rank() == 0) write_safetensors(path, mine, metadata);
    return;
  }
  const size_t lo = dp.shard_begin(), count = dp.shard_size();
  for (const auto& [name, values] : tensors)
    GP_CHECK(values.size() == count, "[train] internal: ", name, " has ", values.size(), " values of a shard of ", count);
  write_safetensors(shard_path(path, step, dp.rank(), dp.ranks()), mine,
                    {{"format", kShardFormat}, {"step", std::to_string(step)}, {"offset", std::to_string(lo)},
                     {"count", std::to_string(count)}});
  dp.comm().barrier();  // every shard is complete
  if (dp.rank() != 0) return;
  Json::Array shards;
  size_t offset = 0;
  for (int r = 0; r < dp.ranks(); ++r) {
    const size_t c = dp.shard_counts()[size_t(r)];
    shards.push_back(Json::Object{{"file", fs::path(shard_path(path, step, r, dp.ranks())).filename().string()},
                                  {"offset", int64_t(offset)},
                                  {"count", int64_t(c)}});
    offset += c;
  }
  metadata["shards"] = Json(std::move(shards)).dump();
  write_safetensors(path, {}, metadata);
  // Shards of earlier states are no longer referenced.
  const fs::path stem(state_stem(path));
  const std::string prefix = stem.filename().string() + ".step", current = cat(prefix, step, ".");
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(stem.parent_path().empty() ? fs::path(".") : stem.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && name.rfind(current, 0) != 0) fs::remove(e.path(), ec);
  }
}

struct DistState::Piece {
  std::string file;
  size_t offset = 0, count = 0;
  std::shared_ptr<SafetensorsFile> data;
};

DistState::DistState(const std::string& path) : path_(path) {
  auto f = std::make_shared<SafetensorsFile>(read_safetensors(path));
  metadata_ = f->metadata;
  pieces_.push_back({path, 0, 0, std::move(f)});
}

DistState::~DistState() = default;

void DistState::check(size_t n, const std::vector<std::string>& names, int64_t step) {
  auto it = metadata_.find("shards");
  if (it == metadata_.end()) {
    pieces_.resize(1);
    pieces_[0].count = n;
  } else {
    // The shards the manifest lists, each checked against it, must cover [0, n) in order.
    std::vector<Piece> pieces;
    const Json list = Json::parse(it->second, path_);
    size_t expect = 0;
    for (const Json& e : list.as_array()) {
      Piece p{(fs::path(path_).parent_path() / e.at("file").as_string()).string(), size_t(e.at("offset").as_int()),
              size_t(e.at("count").as_int()), nullptr};
      GP_CHECK(p.offset == expect, "[train] ", path_, ": shard ", p.file, " starts at ", p.offset, ", expected ", expect);
      expect += p.count;
      GP_CHECK(fs::exists(p.file), "[train] ", path_, ": its shard ", p.file, " is missing");
      p.data = std::make_shared<SafetensorsFile>(read_safetensors(p.file));
      auto& md = p.data->metadata;
      GP_CHECK(md["format"] == kShardFormat && md["step"] == std::to_string(step) &&
                   md["offset"] == std::to_string(p.offset) && md["count"] == std::to_string(p.count),
               "[train] ", p.file, ": not the shard the manifest ", path_, " lists (step ", step, ", values ", p.offset,
               " + ", p.count, ")");
      pieces.push_back(std::move(p));
    }
    GP_CHECK(expect == n, "[train] ", path_, ": its shards hold ", expect, " values of ", n);
    pieces_ = std::move(pieces);
  }
  for (const Piece& p : pieces_)
    for (const std::string& name : names) {
      auto t = p.data->tensors.find(name);
      GP_CHECK(t != p.data->tensors.end(), "[train] ", p.file, ": missing tensor '", name, "'");
      GP_CHECK(t->second.dtype() == DType::F32 && t->second.numel() == int64_t(p.count), "[train] ", p.file,
               ": tensor '", name, "' is ", t->second.describe(), ", expected f32 [", p.count, "]");
    }
}

// Byte copies: the files' tensors need not be aligned.
void DistState::copy(const std::string& name, size_t from, std::span<float> dst) const {
  for (const Piece& p : pieces_) {
    const size_t a = std::max(from, p.offset), b = std::min(from + dst.size(), p.offset + p.count);
    if (b <= a) continue;
    const char* src = static_cast<const char*>(p.data->tensors.at(name).raw());
    std::memcpy(dst.data() + (a - from), src + (a - p.offset) * sizeof(float), (b - a) * sizeof(float));
  }
}

}  // namespace genperf
