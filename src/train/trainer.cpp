// The training loop and its resumable state (a safetensors file: the trainable parameters and
// AdamW moments as f32 tensors, step, data position and fingerprints in the metadata).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>

#include "genperf/error.h"
#include "genperf/trainer.h"
#include "io/safetensors.h"

namespace genperf {
namespace {

namespace fs = std::filesystem;

constexpr const char* kStateFormat = "genperf-train-state";
constexpr const char* kStateVersion = "1";

uint64_t fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// The model's shape as a string, to refuse a state written for another model.
std::string shape_key(const TrainModel& m) {
  const LlamaConfig& c = m.config();
  return cat("vocab ", c.vocab_size, " hidden ", c.hidden_size, " ffn ", c.intermediate_size, " layers ",
             c.num_hidden_layers, " heads ", c.num_attention_heads, "/", c.num_key_value_heads,
             " head_dim ", c.head_dim, " params ", m.num_params());
}

int64_t parse_i64(const std::map<std::string, std::string>& md, const char* key, const std::string& path) {
  auto it = md.find(key);
  GP_CHECK(it != md.end(), "[train] ", path, ": not a genperf training state (no '", key, "' in its metadata)");
  try {
    size_t used = 0;
    const long long v = std::stoll(it->second, &used);
    GP_CHECK(used == it->second.size(), "");
    return v;
  } catch (...) {
    fail("[train] ", path, ": metadata '", key, "' is not an integer: '", it->second, "'");
  }
}

}  // namespace

uint64_t data_fingerprint(const TokenSequences& d) {
  uint64_t h = 0xcbf29ce484222325ull;
  h = fnv1a(h, &d.T, sizeof d.T);
  h = fnv1a(h, d.tokens.data(), d.tokens.size() * sizeof(int32_t));
  h = fnv1a(h, d.targets.data(), d.targets.size() * sizeof(int32_t));
  return h;
}

Json StepRecord::to_json() const {
  return Json::Object{{"step", step},       {"loss", loss},
                      {"lr", double(lr)},   {"grad_norm", grad_norm},
                      {"tokens_per_s", tokens_per_s}, {"elapsed_s", elapsed_s},
                      {"comm_bytes", comm_bytes},     {"comm_wait_s", comm_wait_s}};
}

Trainer::Trainer(TrainModel& model, const TokenSequences& train, const TokenSequences& validation,
                 TrainerConfig config)
    : model_(model),
      train_(train),
      validation_(validation),
      config_(config),
      loader_(train, config.batch, config.seed),
      dp_(model, config.dist, config.grad_accum),
      opt_(dp_.shard_size(), config.adamw) {
  GP_CHECK(config_.grad_accum >= 1 && config_.steps >= 1, "[train] steps and gradient accumulation must be positive");
  GP_CHECK(train.T <= model.config().max_position_embeddings, "[train] sequence length ", train.T,
           " exceeds the model's context of ", model.config().max_position_embeddings);
  GP_CHECK(validation.size() == 0 || validation.T == train.T, "[train] validation sequences of ", validation.T,
           " tokens differ from training sequences of ", train.T);
  config_.schedule.total_steps = config_.steps;
  tok_.resize(size_t(config_.grad_accum));
  tgt_.resize(size_t(config_.grad_accum));
}

int64_t Trainer::tokens_per_step() const { return config_.batch * config_.grad_accum * train_.T; }

double Trainer::validation_loss() {
  const int64_t n = validation_.size() / config_.batch;
  GP_CHECK(n > 0, "[train] the validation set of ", validation_.size(), " sequences is smaller than one batch of ",
           config_.batch);
  const int64_t use = config_.eval_batches > 0 ? std::min(n, config_.eval_batches) : n;
  const int64_t T = validation_.T, B = config_.batch;
  // Weighted by scored tokens, so that padding-heavy batches count for what they score. Ranks
  // take batches in turn and sum their parts.
  double sum = 0, count = 0;
  // Evaluation mode: no LoRA dropout, and the dropout counters of training stay untouched.
  const bool was_training = model_.training();
  model_.set_training(false);
  // Every rank runs as many forwards (fully sharded ones gather parameters, a collective): a
  // rank past the end repeats batch 0 and does not count it.
  const int64_t rounds = (use + dp_.ranks() - 1) / dp_.ranks();
  for (int64_t k = 0; k < rounds; ++k) {
    const int64_t b = k * dp_.ranks() + dp_.rank();
    const int64_t at = b < use ? b : 0;
    const std::span<const int32_t> tok(validation_.tokens.data() + at * B * T, size_t(B * T));
    const std::span<const int32_t> tgt(validation_.targets.data() + at * B * T, size_t(B * T));
    const int64_t scored = std::count_if(tgt.begin(), tgt.end(), [](int32_t t) { return t >= 0; });
    const double loss = model_.forward(tok, tgt, B, T);
    if (b >= use) continue;
    sum += loss * double(scored);
    count += double(scored);
  }
  model_.set_training(was_training);
  double parts[2] = {sum, count};
  dp_.comm().all_reduce(parts, 2).wait();
  return parts[1] > 0 ? parts[0] / parts[1] : 0.0;
}

void Trainer::run(int64_t until, const std::string& state_path, const Callbacks& cb) {
  until = std::min(until, config_.steps);
  const int64_t T = train_.T;
  const auto start = std::chrono::steady_clock::now();
  // Every rank reads the step's micro-batches in the same order and keeps its own.
  const int64_t first = dp_.first_micro(), local = dp_.local_micro();
  std::vector<MicroBatch> micro(static_cast<size_t>(local));
  std::vector<int32_t> skip_tok, skip_tgt;
  while (step_ < until) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t a = 0; a < config_.grad_accum; ++a) {
      const bool mine = a >= first && a < first + local;
      if (!mine) {
        loader_.next(skip_tok, skip_tgt);
        continue;
      }
      const size_t i = size_t(a - first);
      loader_.next(tok_[i], tgt_[i]);
      micro[i] = {tok_[i], tgt_[i], config_.batch, T};
    }
    const StepResult r = dp_.step(opt_, micro, config_.schedule.at(step_), config_.clip);
    ++step_;
    const auto t1 = std::chrono::steady_clock::now();
    StepRecord rec;
    rec.step = step_;
    rec.loss = r.loss;
    rec.grad_norm = r.grad_norm;
    rec.lr = r.lr;
    rec.tokens_per_s = double(tokens_per_step()) / std::chrono::duration<double>(t1 - t0).count();
    rec.elapsed_s = std::chrono::duration<double>(t1 - start).count();
    rec.comm_bytes = dp_.step_comm_bytes();
    rec.comm_wait_s = dp_.step_comm_wait_s();
    if (cb.on_step) cb.on_step(rec);
    const bool last = step_ == config_.steps;
    if (validation_.size() >= config_.batch &&
        ((config_.eval_every > 0 && step_ % config_.eval_every == 0) || last)) {
      const double v = validation_loss();
      if (cb.on_eval) cb.on_eval(step_, v);
    }
    if (!state_path.empty() && ((config_.save_every > 0 && step_ % config_.save_every == 0) || step_ == until))
      save_state(state_path);
  }
}

void Trainer::save_state(const std::string& path) {
  TrainModel& m = model_;
  const DataPosition pos = loader_.position();
  std::map<std::string, std::string> md = {
      {"format", kStateFormat},
      {"version", kStateVersion},
      {"step", std::to_string(step_)},
      {"adam_step", std::to_string(opt_.step_count())},
      {"data_epoch", std::to_string(pos.epoch)},
      {"data_index", std::to_string(pos.index)},
      {"data_seed", std::to_string(config_.seed)},
      {"data_fingerprint", std::to_string(data_fingerprint(train_))},
      {"model", shape_key(model_)},
      {"trainable", std::to_string(m.trainable_params().size())},
  };
  // This rank's part of the parameters (all of them when nothing is sharded) and its moments.
  save_dist_state(dp_, path, step_,
                  {{"params", dp_.param_shard()}, {"adam.m", opt_.first_moment()}, {"adam.v", opt_.second_moment()}},
                  std::move(md));
}

void Trainer::load_state(const std::string& path) {
  DistState state(path);
  const auto& md = state.metadata();
  auto get = [&](const char* key) -> std::string {
    auto it = md.find(key);
    GP_CHECK(it != md.end(), "[train] ", path, ": not a genperf training state (no '", key, "' in its metadata)");
    return it->second;
  };
  GP_CHECK(get("format") == kStateFormat, "[train] ", path, ": not a genperf training state");
  GP_CHECK(get("version") == kStateVersion, "[train] ", path, ": state version ", get("version"),
           " is not supported (expected ", kStateVersion, ")");
  GP_CHECK(get("model") == shape_key(model_), "[train] ", path, ": the state is for another model (",
           get("model"), "), not this one (", shape_key(model_), ")");
  const int64_t n = int64_t(model_.trainable_params().size());
  GP_CHECK(parse_i64(md, "trainable", path) == n, "[train] ", path, ": the state has ", get("trainable"),
           " trainable parameters, this run has ", n, " (a different LoRA configuration?)");
  GP_CHECK(get("data_fingerprint") == std::to_string(data_fingerprint(train_)) &&
               parse_i64(md, "data_seed", path) == int64_t(config_.seed),
           "[train] ", path, ": the state was written for other training data or another --seed");
  const int64_t step = parse_i64(md, "step", path);
  GP_CHECK(step >= 0 && step <= config_.steps, "[train] ", path, ": the state is at step ", step,
           ", beyond this run's ", config_.steps, " steps");

  state.check(size_t(n), {"params", "adam.m", "adam.v"}, step);
  if (dp_.params_sharded()) {
    state.copy("params", dp_.shard_begin(), dp_.param_shard());
  } else {
    state.copy("params", 0, model_.trainable_params());
  }
  state.copy("adam.m", dp_.shard_begin(), opt_.first_moment());  // this rank's shard of the moments
  state.copy("adam.v", dp_.shard_begin(), opt_.second_moment());
  opt_.set_step_count(parse_i64(md, "adam_step", path));
  loader_.seek({parse_i64(md, "data_epoch", path), parse_i64(md, "data_index", path)});
  step_ = step;
}

}  // namespace genperf
