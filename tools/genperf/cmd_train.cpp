// `genperf train` and `genperf finetune`: argument parsing and output files around the library's
// Trainer. An output directory holds the exported model (HF format), the resumable training state
// (train_state.safetensors), the loss log (train_log.jsonl, one JSON record a line) and the run's
// arguments and provenance (train_run.json).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "common.h"
#include "genperf/bench.h"
#include "genperf/checkpoint.h"
#include "genperf/comm.h"
#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/llama.h"
#include "genperf/plan.h"
#include "genperf/progress.h"
#include "genperf/trainer.h"

namespace genperf::cli {
namespace {

namespace fs = std::filesystem;

// Whether this process prints the verb's text: rank 0, without --json. Its lines start with
// rank_prefix() (empty for one rank).
bool talks(const Args& a) { return !a.flag("json") && world().rank() == 0; }

// Options both verbs take.
std::vector<OptionSpec> training_options(const char* lr, const char* steps, const char* val_fraction) {
  return {{"out", "output directory: model, train_state.safetensors, train_log.jsonl, train_run.json"},
          {"seq", "tokens per sequence", "256"},
          {"batch", "sequences per micro-batch", "8"},
          {"grad-accum", "micro-batches per optimizer step", "1"},
          {"steps", "optimizer steps", steps},
          {"lr", "peak learning rate", lr},
          {"min-lr", "final learning rate of the cosine decay (default: lr / 10)", "", false, true},
          {"warmup", "linear warm-up steps", "0"},
          {"weight-decay", "AdamW decoupled weight decay", "0.1"},
          {"beta2", "AdamW beta2", "0.95"},
          {"clip", "gradient clipping by global norm (0: none)", "1.0"},
          {"val-fraction", "fraction of sequences held out for validation", val_fraction},
          {"eval-every", "validation loss every N steps (0: only at the end)", "0"},
          {"eval-batches", "validation batches per evaluation (0: all)", "0"},
          {"save-every", "write the training state every N steps (0: only at the end)", "0"},
          {"stop-at", "stop after this step with the state saved (to split a run; --resume continues)", "", false, true},
          {"resume", "continue from <out>/train_state.safetensors", "", true},
          {"seed", "data order and validation split", "1"},
          {"attn", "attention: naive or flash", "flash"},
          {"precision", "compute precision: f32 or bf16 (bf16 needs AVX512-BF16; f32 otherwise)", "f32"},
          {"checkpoint-layers", "recompute each layer's forward in backward (less memory)", "", true},
          {"dtype", "weight type of the exported model (f32, f16, bf16)", "bf16"},
          kShard, kBucketMb, kCommOverlap,
          {"mem-gb", "memory per rank (GB): refuse a job the planner says does not fit, before it starts", "", false, true},
          {"log-every", "print a line every N steps", "10"},
          kThreads,
          kJson};
}

std::vector<OptionSpec> concat(std::vector<OptionSpec> a, const std::vector<OptionSpec>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TrainerConfig trainer_config(const Args& a) {
  TrainerConfig c;
  c.batch = a.integer("batch");
  c.grad_accum = a.integer("grad-accum");
  c.steps = a.integer("steps");
  c.schedule.max_lr = float(a.number("lr"));
  c.schedule.min_lr = a.has("min-lr") ? float(a.number("min-lr")) : c.schedule.max_lr / 10;
  c.schedule.warmup_steps = a.integer("warmup");
  c.adamw.weight_decay = float(a.number("weight-decay"));
  c.adamw.beta2 = float(a.number("beta2"));
  c.clip = a.number("clip");
  c.eval_every = a.integer("eval-every");
  c.eval_batches = a.integer("eval-batches");
  c.save_every = a.integer("save-every");
  c.seed = uint64_t(a.integer("seed"));
  c.dist = dist_options(a);
  GP_CHECK(c.batch > 0 && c.grad_accum > 0 && c.steps > 0, "[train] --batch, --grad-accum and --steps must be positive");
  GP_CHECK(c.schedule.max_lr > 0 && std::isfinite(c.schedule.max_lr), "[train] --lr must be positive");
  GP_CHECK(c.schedule.warmup_steps >= 0 && c.schedule.warmup_steps < c.steps, "[train] --warmup must be in [0, --steps)");
  return c;
}

// --mem-gb: the job's memory per rank as `genperf plan` counts it (model state of the shard
// mode, one micro-batch's activations, communication buffers); over the cap, the job is refused
// before anything is allocated, naming the modes that would fit.
void check_memory_cap(const Args& a, const LlamaConfig& c, const TrainOptions& t, int64_t seq,
                      const std::optional<LoraConfig>& lora) {
  if (!a.has("mem-gb")) return;
  const double cap = a.number("mem-gb") * 1e9;
  GP_CHECK(cap > 0, "[train] --mem-gb must be positive");
  PlanOptions o;
  o.ranks = world().size();
  o.batch = a.integer("batch");
  o.seq = seq;
  o.train = t;
  o.train.precision = effective_precision(t.precision);  // this machine's
  o.lora = lora;
  o.bucket_bytes = size_t(a.number("bucket-mb") * 1024 * 1024);
  const ShardMode mode = parse_shard_mode(a.str("shard"));
  const ShardPlan p = plan_memory(c, o, cap, mode, t.checkpoint_layers);
  if (p.fits) return;
  std::string fit;
  for (bool ck : {false, true})
    for (ShardMode m : kShardModes)
      if (plan_memory(c, o, cap, m, ck).fits && fit.empty())
        fit = cat("; --shard ", shard_mode_name(m), ck ? " --checkpoint-layers" : "", " would fit");
  fail("[train] --shard ", shard_mode_name(mode), " on ", o.ranks, " rank", o.ranks > 1 ? "s" : "", ": ", p.verdict,
       " per rank (--mem-gb; model state ", p.state.total(), " bytes, activations ", p.activations.total(),
       ", communication buffers ", p.comm_buffers, ")", fit.empty() ? "; no shard mode fits" : fit);
}

TrainOptions train_options(const Args& a) {
  TrainOptions o;
  o.attention = parse_attention_mode(a.str("attn"));
  o.precision = effective_precision(parse_precision(a.str("precision")));
  o.checkpoint_layers = a.flag("checkpoint-layers");
  return o;
}

// Runs the trainer in the output directory (genperf/trainer.h, run_training) with progress and a
// printed line every --log-every steps. Returns the summary record.
Json run_training(const Args& a, TrainModel& m, const TokenSequences& train, const TokenSequences& val,
                  const TrainRunFiles& files, const std::vector<std::string>& extra_files, Json run_info,
                  bool export_model = true) {
  const TrainerConfig tc = trainer_config(a);
  TrainRunOptions o;
  o.resume = a.flag("resume");
  o.stop_at = a.has("stop-at") ? a.integer("stop-at") : -1;
  o.export_model = export_model;
  o.export_dtype = parse_dtype(a.str("dtype"));
  o.extra_files = extra_files;
  run_info["command"] = g_command;
  run_info["provenance"] = provenance(g_command).to_json();
  // Rank 0 alone reports; its lines name it when there are several ranks.
  const bool lead = world().rank() == 0;
  const bool quiet = a.flag("json") || !lead;
  const std::string who = rank_prefix();
  const int64_t log_every = std::max<int64_t>(1, a.integer("log-every"));
  int64_t first = 0, until = tc.steps;
  std::unique_ptr<Progress> progress;
  o.on_start = [&](int64_t f, int64_t u) {
    first = f;
    until = u;
    if (o.resume && lead)
      std::fprintf(stderr, "%sresumed from %s at step %lld\n", who.c_str(), files.state.c_str(), (long long)first);
    if (lead) progress = std::make_unique<Progress>(a.str("out"), until - first);
  };
  o.callbacks.on_step = [&](const StepRecord& r) {
    const double eta = r.elapsed_s / double(r.step - first) * double(until - r.step);
    if (progress) progress->update(r.step - first, cat("loss ", r.loss, " ", int64_t(r.tokens_per_s), " tok/s"));
    if (!quiet && (r.step % log_every == 0 || r.step == until)) {
      progress->clear();
      std::printf("%sstep %lld/%lld  loss %.4f  lr %.2e  |g| %.3f  %.0f tok/s  elapsed %.0fs  ETA %.0fs\n",
                  who.c_str(), (long long)r.step, (long long)tc.steps, r.loss, double(r.lr), r.grad_norm,
                  r.tokens_per_s, r.elapsed_s, eta);
      std::fflush(stdout);
    }
  };
  o.callbacks.on_eval = [&](int64_t step, double v) {
    if (!quiet)
      std::printf("%sstep %lld  validation loss %.4f (ppl %.2f)\n", who.c_str(), (long long)step, v, std::exp(v));
  };
  Json summary = genperf::run_training(m, train, val, tc, files, o, std::move(run_info));
  if (progress) progress->finish();
  return summary;
}

void finish(const Args& a, const Json& summary) {
  if (world().rank() != 0) return;
  if (a.flag("json")) {
    print_json(summary);
    return;
  }
  if (const Json* m = summary.find("model"))
    std::printf("%swrote %s (%s weights)\n", rank_prefix().c_str(), m->as_string().c_str(),
                summary.find("dtype")->as_string().c_str());
  else
    std::printf("%sstopped at step %lld; continue with --resume\n", rank_prefix().c_str(),
                (long long)summary.find("step")->as_number());
}

}  // namespace

int cmd_train(int argc, char** argv) {
  Args a("train",
         concat({{"text", "training text, one document per line (comma-separated files)"},
                 {"tokenizer", "SentencePiece model to use (default: train one on --text)", "", false, true},
                 {"vocab-size", "vocabulary of the tokenizer trained on --text", "4096"},
                 {"shape", "model shape (default, tiny, 110m)", "default"},
                 {"ctx", "context length of the model (default: the shape's, at least --seq)", "", false, true},
                 {"init-seed", "weight initialization seed", "1"}},
                training_options("1e-3", "1000", "0.01")),
         argc, argv, 2);
  if (run_help(a)) return 0;
  apply_common(a);
  const TrainRunFiles files(a.str("out"));
  const bool lead = world().rank() == 0;
  if (lead) fs::create_directories(files.dir);
  const std::vector<std::string> texts = split(a.str("text"), ',');
  for (const auto& t : texts) GP_CHECK(fs::is_regular_file(t), "[train] ", t, ": no such text file");

  // The tokenizer: given, or trained on the text (kept in the output directory, reused on resume).
  // Rank 0 writes it; the others read it once it is there.
  const std::string tok_path = files.dir + "/tokenizer.model";
  const bool given = a.has("tokenizer");
  if (lead && given && fs::absolute(a.str("tokenizer")) != fs::absolute(tok_path))
    fs::copy_file(a.str("tokenizer"), tok_path, fs::copy_options::overwrite_existing);
  if (lead && !given && !(a.flag("resume") && fs::exists(tok_path))) {
    if (talks(a))
      std::printf("%straining a SentencePiece tokenizer (%lld pieces) on %s\n", rank_prefix().c_str(),
                  (long long)a.integer("vocab-size"), a.str("text").c_str());
    train_sentencepiece(texts, tok_path, int(a.integer("vocab-size")), uint64_t(a.integer("seed")));
  }
  world().barrier();
  const auto tok = load_sentencepiece(tok_path);

  LlamaConfig c = preset_config(a.str("shape"));
  c.vocab_size = tok->vocab_size();
  c.bos_token_ids = {tok->bos_id()};
  c.eos_token_ids = {tok->eos_id()};
  const int64_t T = a.integer("seq");
  c.max_position_embeddings = a.has("ctx") ? a.integer("ctx") : std::max(c.max_position_embeddings, T);
  c.torch_dtype = a.str("dtype") == "bf16" ? "bfloat16" : a.str("dtype") == "f16" ? "float16" : "float32";

  std::string text;
  for (const auto& t : texts) text += read_text_file(t) + "\n";
  const TokenSequences all = pack_text(*tok, text, T, a.str("text"));
  const DataSplit split = split_validation(all, a.number("val-fraction"), uint64_t(a.integer("seed")));
  if (talks(a))
    std::printf("%sdata: %lld sequences of %lld tokens (%lld for training, %lld for validation)\n", rank_prefix().c_str(), (long long)all.size(),
                (long long)T, (long long)split.train.size(), (long long)split.validation.size());

  check_memory_cap(a, c, train_options(a), T, std::nullopt);
  // Deferred: fully sharded, each rank writes only its shard of the weights (genperf/dist.h).
  TrainModel m(c, uint64_t(a.integer("init-seed")), train_options(a), RopeStyle::Neox, InitMode::Deferred);
  if (talks(a))
    std::printf("%smodel: %s shape, %.2fM parameters, %s attention, %s\n", rank_prefix().c_str(), a.str("shape").c_str(), double(m.num_params()) / 1e6,
                attention_mode_name(m.options().attention), precision_name(m.options().precision));
  Json info = Json::Object{{"verb", "train"},
                           {"text", a.str("text")},
                           {"shape", a.str("shape")},
                           {"init_seed", a.integer("init-seed")},
                           {"seed", a.integer("seed")},
                           {"config", Json::parse(hf_config_json(c))}};
  const Json summary = run_training(a, m, split.train, split.validation, files, {tok_path}, info);
  finish(a, summary);
  return 0;
}

int cmd_finetune(int argc, char** argv) {
  Args a("finetune",
         concat({{"model", "the model to fine-tune: HF directory or .gguf file"},
                 {"data", "prompt/response JSONL (loss on responses only)", "", false, true},
                 {"text", "or plain text, one document per line", "", false, true},
                 {"truncate", "cut records longer than --seq instead of failing", "", true},
                 {"lora-rank", "LoRA rank (0: full fine-tuning)", "0"},
                 {"lora-alpha", "LoRA alpha (the update is scaled by alpha / rank)", "16"},
                 {"lora-dropout", "LoRA dropout on the adapters' input", "0"},
                 lora_targets_option("comma-separated projections"),
                 {"adapter", "with LoRA: save the adapter (PEFT format) instead of merged weights", "", true}},
                training_options("1e-4", "200", "0")),
         argc, argv, 2);
  if (run_help(a)) return 0;
  apply_common(a);
  GP_CHECK(a.has("data") != a.has("text"), "[finetune] give exactly one of --data (JSONL) or --text");
  const TrainRunFiles files(a.str("out"));
  const std::string src = a.str("model");
  Checkpoint ck = load_checkpoint(src);
  GP_CHECK(ck.tokenizer, "[finetune] ", src, ": the model has no tokenizer");
  const int64_t T = a.integer("seq");
  GP_CHECK(T <= ck.config.max_position_embeddings, "[finetune] --seq ", T, " exceeds the model's context of ",
           ck.config.max_position_embeddings);
  const TokenSequences all = a.has("data") ? read_prompt_response(*ck.tokenizer, a.str("data"), T, a.flag("truncate"))
                                           : pack_text(*ck.tokenizer, read_text_file(a.str("text")), T, a.str("text"));
  const DataSplit split = split_validation(all, a.number("val-fraction"), uint64_t(a.integer("seed")));
  if (talks(a))
    std::printf("%sdata: %lld sequences of %lld tokens, %lld scored (%lld for validation)\n", rank_prefix().c_str(), (long long)all.size(),
                (long long)T, (long long)all.scored(), (long long)split.validation.size());
  if (world().rank() == 0) fs::create_directories(files.dir);
  world().barrier();
  // Tokenizer files travel with the fine-tuned model.
  std::vector<std::string> extra;
  if (fs::is_directory(src))
    for (const char* f : {"tokenizer.model", "tokenizer.json", "tokenizer_config.json"})
      if (fs::exists(fs::path(src) / f) && fs::absolute(fs::path(src) / f) != fs::absolute(fs::path(files.dir) / f))
        extra.push_back((fs::path(src) / f).string());
  const int64_t rank = a.integer("lora-rank");
  GP_CHECK(rank >= 0, "[finetune] --lora-rank must be >= 0, got ", rank);
  GP_CHECK(rank > 0 || !a.flag("adapter"), "[finetune] --adapter needs LoRA (--lora-rank > 0)");
  std::optional<LoraConfig> lora;
  if (rank > 0) {
    LoraConfig lc;
    lc.rank = int(rank);
    lc.alpha = float(a.number("lora-alpha"));
    lc.dropout = float(a.number("lora-dropout"));
    lc.targets = cli::split(a.str("lora-targets"), ',');
    lc.seed = uint64_t(a.integer("seed"));
    lc.validate();
    lora = lc;
  }
  check_memory_cap(a, ck.config, train_options(a), T, lora);
  TrainModel m(ck, train_options(a), InitMode::Deferred);  // fully sharded, each rank reads its shard
  Json info = Json::Object{{"verb", "finetune"},
                           {"model", src},
                           {"data", a.has("data") ? a.str("data") : a.str("text")},
                           {"seed", a.integer("seed")}};
  if (lora) {
    const LoraConfig& lc = *lora;
    m.enable_lora(lc);
    info["lora"] = Json::Object{{"rank", rank}, {"alpha", double(lc.alpha)}, {"dropout", double(lc.dropout)},
                                {"targets", a.str("lora-targets")}, {"export", a.flag("adapter") ? "adapter" : "merged"}};
    if (talks(a))
      std::printf("%sLoRA rank %lld, alpha %g, dropout %g on %s: %.3fM trainable parameters of %.2fM\n", rank_prefix().c_str(), (long long)rank,
                  double(lc.alpha), double(lc.dropout), a.str("lora-targets").c_str(),
                  double(m.trainable_params().size()) / 1e6, double(m.num_params()) / 1e6);
  }
  if (a.flag("adapter")) {
    // Only the adapter is exported: the trainer writes no model; the adapter goes to --out.
    const Json summary = run_training(a, m, split.train, split.validation, files, extra, info, /*export_model=*/false);
    if (summary.find("step")->as_number() == double(a.integer("steps")) && world().rank() == 0) {
      m.save_lora_adapter(files.dir + "/adapter", src);
      if (talks(a))
        std::printf("%swrote %s/adapter (PEFT LoRA adapter for %s)\n", rank_prefix().c_str(), files.dir.c_str(), src.c_str());
    }
    if (a.flag("json") && world().rank() == 0) print_json(summary);
    return 0;
  }
  const Json summary = run_training(a, m, split.train, split.validation, files, extra, info);
  finish(a, summary);
  return 0;
}

}  // namespace genperf::cli
