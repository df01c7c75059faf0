// genperf CLI: parses arguments and calls the library; no logic of its own.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "common.h"
#include "genperf/bench.h"
#include "genperf/bench_train.h"
#include "bench/peaks.h"
#include "genperf/checkpoint.h"
#include "genperf/comm.h"
#include "genperf/error.h"
#include "genperf/eval.h"
#include "genperf/fileio.h"
#include "genperf/json.h"
#include "genperf/llama.h"
#include "genperf/runtime.h"

using namespace genperf;
using namespace genperf::cli;

namespace genperf::cli {
std::string g_command;

void check_record_path(const Args& a) {
  if (!a.has("out")) return;
  const std::filesystem::path out(a.str("out")), dir = out.parent_path();
  std::error_code ec;
  GP_CHECK(!out.filename().empty(), "[", a.verb(), "] --out ", out.string(), ": names a directory, not a file");
  GP_CHECK(dir.empty() || std::filesystem::is_directory(dir, ec), "[", a.verb(), "] --out ", out.string(),
           ": the directory ", dir.string(), " does not exist");
}

void write_record(const Args& a, Json& record) {
  record["provenance"] = provenance(g_command).to_json();
  if (a.has("out")) write_file_atomic(a.str("out"), record.dump(2) + "\n");
}
}  // namespace genperf::cli

namespace {

// The model, with the KV cache type of --kv-type where the verb has it.
LlamaModel load_model(const std::string& spec, const Args& a) {
  auto model = [&] {
    if (spec.rfind("random:", 0) == 0) {
      const LlamaConfig c = preset_config(spec.substr(7));
      return LlamaModel(random_checkpoint(c, parse_dtype(a.str("dtype")), 1));
    }
    return LlamaModel(load_checkpoint(spec));
  };
  LlamaModel m = model();
  if (a.has("kv-type")) m.set_kv_dtype(parse_dtype(a.str("kv-type")));
  return m;
}


int cmd_generate(int argc, char** argv) {
  Args a("generate",
         {kModel, {"prompt", "text to continue"}, {"max-tokens", "tokens to generate", "64"},
          {"temperature", "sampling temperature; 0 is greedy", "0.8"}, {"top-k", "keep the k most likely tokens (0 = all)", "40"},
          {"top-p", "keep the smallest set reaching this probability", "0.95"}, {"seed", "sampling seed", "1"},
          kDtype, kKvType, kThreads, kJson},
         argc, argv, 2);
  if (run_help(a)) return 0;
  apply_common(a);
  LlamaModel m = load_model(a.str("model"), a);
  SamplingOptions o{float(a.number("temperature")), int(a.integer("top-k")), float(a.number("top-p")),
                    uint64_t(a.integer("seed"))};
  const bool json = a.flag("json");
  if (!json) {
    std::fprintf(stderr, "model %s (%s), seed %llu, temperature %g, top-k %d, top-p %g, %d threads\n",
                 m.source().c_str(), m.weight_types().c_str(), (unsigned long long)o.seed, o.temperature,
                 o.top_k, o.top_p, num_threads());
    std::printf("%s", a.str("prompt").c_str());
    std::fflush(stdout);
  }
  auto stream = [&](const std::string& piece) {
    if (json) return;
    std::fputs(piece.c_str(), stdout);
    std::fflush(stdout);
  };
  GenerationResult r = generate(m, a.str("prompt"), int(a.integer("max-tokens")), o, stream);
  if (json) {
    Json::Array ids;
    for (int32_t id : r.ids) ids.push_back(int64_t(id));
    print_json(Json::Object{{"text", r.text}, {"ids", Json(std::move(ids))}, {"prompt_tokens", int64_t(r.prompt_ids.size())},
                            {"seed", int64_t(o.seed)}, {"stopped_at_eos", r.stopped_at_eos},
                            {"prefill_seconds", r.prefill_seconds}, {"decode_seconds", r.decode_seconds}});
  } else {
    std::printf("\n");
    std::fflush(stdout);
    std::fprintf(stderr, "%zu prompt tokens in %.3f s, %zu tokens in %.3f s (%.1f tokens/s)\n", r.prompt_ids.size(),
                 r.prefill_seconds, r.ids.size(), r.decode_seconds,
                 r.decode_seconds > 0 ? double(r.ids.size()) / r.decode_seconds : 0.0);
  }
  return 0;
}

int cmd_eval(int argc, char** argv) {
  const std::string kind = argc > 2 ? argv[2] : "";
  if (kind != "ppl" && kind != "mc" && kind != "kl") {
    std::printf("usage: genperf eval ppl|mc|kl [options]   (each with --help)\n");
    return kind == "--help" || kind == "-h" ? 0 : 2;
  }
  std::vector<OptionSpec> specs = {kModel, kDtype, kKvType, kThreads, kJson, kOut};
  if (kind == "ppl" || kind == "kl") {
    specs.push_back({"text", "text file to score"});
    specs.push_back({"ctx", "tokens per window", "512"});
    specs.push_back({"max-bytes", "score only the text's first N bytes (cut at a line's end)", "", false, true});
  }
  if (kind == "kl") {
    specs.push_back({"ref", "the reference model (same forms as --model)"});
    specs.push_back({"ref-kv-type", "the reference's KV cache type", "f32"});
  }
  if (kind == "mc") {
    specs.push_back({"tasks", "JSONL file: {context, choices, gold} a line"});
    specs.push_back({"limit", "score only the first N tasks", "", false, true});
  }
  Args a("eval " + kind, specs, argc, argv, 3);
  if (run_help(a)) return 0;
  apply_common(a);
  check_record_path(a);
  const bool json = a.flag("json");
  LlamaModel m = load_model(a.str("model"), a);
  // The model's size beside its accuracy (the study's accuracy against size).
  Json out = Json::Object{{"model", m.source()},
                          {"eval", kind},
                          {"weight_types", m.weight_types()},
                          {"weights_bytes", int64_t(m.weight_bytes())},
                          {"parameters", int64_t(m.config().num_parameters())}};
  // The text scored, whole or its first --max-bytes up to a line's end.
  auto text = [&] {
    std::string t = read_text_file(a.str("text"));
    if (a.has("max-bytes")) {
      const int64_t n = a.integer("max-bytes");
      GP_CHECK(n > 0, "[eval] --max-bytes must be positive, got ", n);
      if (size_t(n) < t.size()) t.resize(t.rfind('\n', size_t(n)) == std::string::npos ? size_t(n) : t.rfind('\n', size_t(n)) + 1);
      out["max_bytes"] = n;
    }
    return t;
  };
  if (kind == "ppl") {
    const PerplexityResult r = perplexity(m, text(), a.integer("ctx"), !json);
    out["ppl"] = r.ppl;
    out["nll"] = r.nll;
    out["tokens"] = r.tokens;
    out["windows"] = r.windows;
    if (!json) std::printf("ppl %.4f  nll %.5f  tokens %lld  windows %lld\n", r.ppl, r.nll, (long long)r.tokens, (long long)r.windows);
  } else if (kind == "mc") {
    auto tasks = read_mc_tasks(a.str("tasks"));
    if (a.has("limit")) {
      const int64_t n = a.integer("limit");
      GP_CHECK(n > 0, "[eval] --limit must be positive, got ", n);
      if (size_t(n) < tasks.size()) tasks.resize(size_t(n));
    }
    const McResult r = multiple_choice(m, tasks, !json);
    out["acc"] = r.acc;
    out["acc_norm"] = r.acc_norm;
    out["acc_pmi"] = r.acc_pmi;
    out["n"] = r.n;
    if (!json)
      std::printf("acc %.4f  acc_norm %.4f  acc_pmi %.4f  tasks %lld\n", r.acc, r.acc_norm, r.acc_pmi, (long long)r.n);
  } else {
    LlamaModel ref = load_model(a.str("ref"), a);
    ref.set_kv_dtype(parse_dtype(a.str("ref-kv-type")));
    const KlResult r = kl_divergence(m, ref, text(), a.integer("ctx"), !json);
    out["ref"] = ref.source();
    out["kl_mean"] = r.kl_mean;
    out["kl_p99"] = r.kl_p99;
    out["kl_max"] = r.kl_max;
    out["top1_agreement"] = r.top1_agreement;
    out["ppl"] = r.ppl_model;
    out["ppl_ref"] = r.ppl_ref;
    out["ppl_delta"] = r.ppl_delta();
    out["tokens"] = r.tokens;
    if (!json)
      std::printf("KL mean %.6f  p99 %.6f  max %.6f  top-1 agreement %.4f  ppl %.4f vs %.4f (delta %+.4f)  tokens %lld\n",
                  r.kl_mean, r.kl_p99, r.kl_max, r.top1_agreement, r.ppl_model, r.ppl_ref, r.ppl_delta(), (long long)r.tokens);
  }
  write_record(a, out);
  if (json) print_json(out);
  return 0;
}

void print_bench_infer(const Json& r) {
  const Json& p = r.at("provenance");
  std::printf("model      %s (%s)\n", r.at("model").as_string().c_str(), r.at("weight_types").as_string().c_str());
  std::printf("machine    %s | isa %s | %lld threads | commit %s (%s)\n", p.at("cpu").as_string().c_str(),
              p.at("isa_path").as_string().c_str(), (long long)p.at("threads").as_int(),
              p.at("commit").as_string().c_str(), p.at("build_type").as_string().c_str());
  const Json* mc = r.find("machine");
  if (mc) {
    const Json &bw = mc->at("memory_probe").at("gbs"), &gp = mc->at("gemm_peak");
    std::printf("floors     memory read %.1f GB/s (best of %lld probes between the runs; median %.1f, min %.1f) | "
                "%s GEMM %.0f GFLOP/s (best of %lld; median %.0f)\n",
                bw.at("best").as_number(), (long long)bw.at("n").as_int(), bw.at("median").as_number(),
                bw.at("min").as_number(), gp.at("type").as_string().c_str(), gp.at("gflops").at("best").as_number(),
                (long long)gp.at("gflops").at("n").as_int(), gp.at("gflops").at("median").as_number());
    if (const Json* cp = mc->find("cache_probe"))
      std::printf("           cache read %.1f GB/s over %.1f MB, the weights and KV cache (best of %lld; median %.1f)\n",
                  cp->at("gbs").at("best").as_number(), cp->at("bytes").as_number() / 1e6,
                  (long long)cp->at("gbs").at("n").as_int(), cp->at("gbs").at("median").as_number());
  }
  // A fraction above 100% is printed only with the flag (BENCHMARKING.md, rule 8).
  auto fraction = [](const Json& x, const char* key, const std::string& of) {
    if (const Json* f = x.find(key))
      std::printf("  %.0f%% of %s%s", 100 * f->as_number(), of.c_str(),
                  x.at("floor_exceeded").as_bool() ? " [EXCEEDS THE FLOOR: see notes]" : "");
  };
  for (const Json& x : r.at("prefill").as_array()) {
    std::printf("prefill %4lld  %8.1f tok/s (min %.1f, max %.1f)  %6.1f GFLOP/s", (long long)x.at("tokens").as_int(),
                x.at("tokens_per_s").as_number(), x.at("tokens_per_s_min").as_number(), x.at("tokens_per_s_max").as_number(),
                x.at("gflops").as_number());
    if (const Json* t = x.find("gemm_peak_type")) fraction(x, "fraction_of_gemm_peak", "the " + t->as_string() + " GEMM peak");
    std::printf("\n");
  }
  const Json& d = r.at("decode");
  std::printf("decode      %8.1f tok/s (min %.1f, max %.1f)  %6.1f GB/s of weights", d.at("tokens_per_s").as_number(),
              d.at("tokens_per_s_min").as_number(), d.at("tokens_per_s_max").as_number(), d.at("gbs").as_number());
  if (const Json* b = d.find("bandwidth_floor"))
    fraction(d, "fraction_of_bandwidth_floor", "the " + b->at("kind").as_string() + " bandwidth floor");
  std::printf("\nTTFT        %.2f ms (prompt %lld tokens)\n", 1e3 * r.at("time_to_first_token_s").at("median").as_number(),
              (long long)d.at("prompt_tokens").as_int());
  const Json& mem = r.at("memory");
  std::printf("memory      weights %.1f MB | KV cache (%s) %.1f MB | scratch %.1f MB | peak RSS %.1f MB\n",
              mem.at("weights_bytes").as_number() / 1e6, r.at("kv_type").as_string().c_str(),
              mem.at("kv_cache_bytes").as_number() / 1e6,
              mem.at("scratch_bytes").as_number() / 1e6, mem.at("peak_rss_bytes").as_number() / 1e6);
  if (const Json* f = r.find("floor_exceeded"); f && f->as_bool())
    std::printf("FLAGGED     a figure exceeds its floor: the floor measured the wrong limit\n");
  if (const Json* notes = r.find("notes"))
    for (const Json& n : notes->as_array()) std::printf("note        %s\n", n.as_string().c_str());
}

int cmd_bench_train(int argc, char** argv) {
  Args a("bench train",
         {{"model", "random:<shape> (110m, default, tiny) or a HF directory (its config is used)", "random:110m"},
          {"attn", "attention: naive (scores materialized) or flash (tiled, memory linear in seq)", "flash"},
          {"seq", "sequence length", "512"}, {"batch", "sequences per step", "1"},
          {"precision", "compute precision: f32, or bf16 mixed precision (f32 master weights; needs AVX512-BF16)", "f32"},
          {"checkpoint-layers", "recompute each layer's forward in backward", "", true},
          {"lora-rank", "LoRA rank (0: full training)", "0"},
          lora_targets_option("projections with LoRA adapters"),
          {"reps", "timed steps after one warm-up step", "3"}, {"no-peaks", "skip measuring the GEMM peak (no MFU)", "", true},
          {"shard", "across ranks (mpirun -np N; --batch is per rank): none, optimizer, grads or full (ZeRO-1, 2, 3)", "none"},
          {"bucket-mb", "gradient bucket in MiB", "25"},
          kCommOverlap,
          {"inflight-buckets", "grads and full: buckets that may still be reducing while backward goes on "
           "(beyond them backward waits for the oldest); 0: no limit", "2"},
          kOut, kThreads, kJson},
         argc, argv, 3);
  if (run_help(a)) return 0;
  apply_common(a);
  check_record_path(a);
  const std::string spec = a.str("model");
  LlamaConfig c = spec.rfind("random:", 0) == 0 ? preset_config(spec.substr(7)) : read_hf_config(spec + "/config.json");
  // A random model's context stretches to the benchmarked length (RoPE has no learned limit), so
  // the attention sweep can run the default shape at 4096 tokens.
  if (spec.rfind("random:", 0) == 0) c.max_position_embeddings = std::max(c.max_position_embeddings, a.integer("seq"));
  const Precision requested = parse_precision(a.str("precision"));
  TrainBenchOptions o;
  o.batch = a.integer("batch");
  o.seq = a.integer("seq");
  o.reps = int(a.integer("reps"));
  o.train.attention = parse_attention_mode(a.str("attn"));
  o.train.checkpoint_layers = a.flag("checkpoint-layers");
  o.train.precision = effective_precision(requested);
  if (a.integer("lora-rank") > 0) {
    LoraConfig lc;
    lc.rank = int(a.integer("lora-rank"));
    lc.alpha = float(2 * lc.rank);
    lc.targets = split(a.str("lora-targets"), ',');
    o.lora = lc;
  }
  GP_CHECK(o.batch > 0 && o.seq > 0 && o.reps > 0, "[bench train] --batch, --seq and --reps must be positive");
  o.dist.comm = &world();
  o.dist.shard = parse_shard_mode(a.str("shard"));
  GP_CHECK(a.number("bucket-mb") > 0, "[bench train] --bucket-mb must be positive");
  o.dist.bucket_bytes = size_t(a.number("bucket-mb") * 1024 * 1024);
  o.dist.overlap = comm_overlap(a, o.dist.shard);
  GP_CHECK(a.integer("inflight-buckets") >= 0, "[bench train] --inflight-buckets must be 0 (no limit) or more, got ",
           a.str("inflight-buckets"));
  o.dist.inflight_buckets = a.integer("inflight-buckets") == 0 ? SIZE_MAX : size_t(a.integer("inflight-buckets"));
  const TrainBenchResult r = bench_train_step(c, o);
  // Rank 0 reports for the job (every rank ran the same steps in lockstep).
  if (world().rank() != 0) return 0;
  Json j = r.to_json();
  j["model"] = spec;
  j["parameters"] = c.num_parameters();
  j["precision"] = precision_name(o.train.precision);
  j["precision_requested"] = precision_name(requested);
  if (o.dist.shard == ShardMode::Grads || o.dist.shard == ShardMode::Full)
    j["inflight_buckets"] = a.integer("inflight-buckets");
  if (!a.flag("no-peaks")) {
    // MFU against the peak of the precision that ran: the f32 or the bf16 GEMM peak.
    const bool bf16 = o.train.precision == Precision::Bf16;
    // Per rank, measured by rank 0 alone (the others have finished); the job's peak is ranks x it.
    const double peak = bench::measure_gemm_peak_gflops(bf16 ? DType::BF16 : DType::F32);
    j[bf16 ? "gemm_peak_gflops_bf16" : "gemm_peak_gflops_f32"] = peak;
    const bench::FloorFraction f = bench::against_floor(r.gflops, peak * r.ranks);
    j["mfu"] = f.fraction;
    j["floor_exceeded"] = f.exceeded;  // BENCHMARKING.md, rule 8: never above 100% unflagged
  }
  write_record(a, j);
  if (a.flag("json")) {
    print_json(j);
    return 0;
  }
  if (r.ranks > 1)
    std::printf("ranks      %d (%s), shard %s, overlap %s: %.2f MB sent per step and rank, %.4f s waited (median)\n",
                r.ranks, world().backend(), shard_mode_name(r.shard), r.overlap ? "on" : "off",
                r.comm_bytes_per_step / 1e6, r.comm_wait_seconds.median);
  std::printf("model      %s (%.1fM parameters), batch %lld x seq %lld, %s attention, %s\n", spec.c_str(),
              double(c.num_parameters()) / 1e6, (long long)o.batch, (long long)o.seq, attention_mode_name(o.train.attention),
              precision_name(o.train.precision));
  std::printf("step       %.3f s median (min %.3f, max %.3f, %zu reps)  %.1f tokens/s  %.1f GFLOP/s",
              r.step_seconds.median, r.step_seconds.min, r.step_seconds.max, r.step_seconds.samples.size(),
              r.tokens_per_s, r.gflops);
  if (const Json* m = j.find("mfu"))
    std::printf("  MFU %.0f%% of the measured %s GEMM peak%s", 100 * m->as_number(), precision_name(o.train.precision),
                j.at("floor_exceeded").as_bool() ? " [EXCEEDS THE PEAK: the peak measured the wrong limit]" : "");
  std::printf("\nmemory     weights %.1f MB | grads %.1f MB | optimizer %.1f MB | activations %.1f MB (attention %.1f MB) | peak RSS %.1f MB\n",
              double(r.memory.weights) / 1e6, double(r.memory.grads) / 1e6, double(r.memory.optimizer) / 1e6,
              double(r.memory.activations.total()) / 1e6,
              double(r.memory.activations.attention + r.memory.activations.attention_scores) / 1e6, double(r.peak_rss) / 1e6);
  return 0;
}

int cmd_bench(int argc, char** argv) {
  const std::string kind = argc > 2 ? argv[2] : "";
  if (kind == "train") return cmd_bench_train(argc, argv);
  if (kind == "sr") return cmd_bench_sr(argc, argv);
  if (kind == "comm") return cmd_bench_comm(argc, argv);
  if (kind != "infer") {
    std::printf("usage: genperf bench infer|train|sr|comm [options]   (each with --help)\n");
    return kind == "--help" || kind == "-h" ? 0 : 2;
  }
  Args a("bench infer",
         {kModel, kDtype, kKvType, kThreads, kJson, {"reps", "timed repetitions (after warm-up)", "5"},
          {"decode-tokens", "tokens per decode repetition", "32"},
          {"prefill", "comma-separated prompt lengths for prefill", "128,512"},
          {"decode-prompt", "prompt tokens before decode is timed", "128"}, {"no-peaks", "skip measuring the machine's floors", "", true},
          kOut},
         argc, argv, 3);
  if (run_help(a)) return 0;
  apply_common(a);
  check_record_path(a);
  LlamaModel m = load_model(a.str("model"), a);
  InferBenchOptions o;
  o.reps = int(a.integer("reps"));
  o.decode_tokens = a.integer("decode-tokens");
  o.decode_prompt = a.integer("decode-prompt");
  o.prefill_lengths.clear();
  for (const std::string& x : split(a.str("prefill"), ',')) {
    char* end = nullptr;
    const long long v = std::strtoll(x.c_str(), &end, 10);
    GP_CHECK(!x.empty() && end && *end == 0 && v > 0, "[bench infer] --prefill expects positive integers, got '", x, "'");
    o.prefill_lengths.push_back(v);
  }
  GP_CHECK(o.decode_prompt > 0 && o.decode_tokens > 0, "[bench infer] --decode-prompt and --decode-tokens must be positive");
  o.measure_peaks = !a.flag("no-peaks");
  GP_CHECK(o.reps >= 1, "[bench infer] --reps must be at least 1");
  Json r = bench_infer(m, o, !a.flag("json"));
  r["model"] = m.source();
  r["weight_dtype"] = dtype_name(m.weight_dtype());
  r["weight_types"] = m.weight_types();
  r["parameters"] = m.config().num_parameters();
  write_record(a, r);
  if (a.flag("json")) print_json(r);
  else print_bench_infer(r);
  return 0;
}

int cmd_convert(int argc, char** argv) {
  Args a("convert", {kModel, {"out", "output: a .gguf file, or a directory for the HF format"}, kThreads}, argc, argv, 2);
  if (run_help(a)) return 0;
  Checkpoint ck = load_checkpoint(a.str("model"));
  const std::string out = a.str("out");
  if (out.size() > 5 && out.substr(out.size() - 5) == ".gguf") {
    save_gguf_checkpoint(out, ck);
    for (const std::string& n : gguf_llamacpp_notes(ck)) std::fprintf(stderr, "note: %s\n", n.c_str());
  } else {
    fail("[convert] only conversion to GGUF is supported: name the output *.gguf");
  }
  std::fprintf(stderr, "wrote %s\n", out.c_str());
  return 0;
}

int cmd_random_model(int argc, char** argv) {
  Args a("random-model",
         {{"shape", "built-in shape (110m, default, tiny)", "default"}, kDtype, {"seed", "weight seed", "1"},
          {"vocab", "vocabulary size (default: the tokenizer's, else the shape's)", "", false, true},
          {"tokenizer", "tokenizer file to copy in (tokenizer.model or tokenizer.json)", "", false, true},
          {"out", "output directory (HF format)"}},
         argc, argv, 2);
  if (run_help(a)) return 0;
  LlamaConfig c = preset_config(a.str("shape"));
  std::vector<std::string> extra;
  if (a.has("tokenizer")) {
    const std::string t = a.str("tokenizer");
    const auto name = std::filesystem::path(t).filename().string();
    auto tok = name == "tokenizer.json" ? load_bpe_json(t) : load_sentencepiece(t);
    c.vocab_size = tok->vocab_size();
    c.bos_token_ids = tok->bos_id() >= 0 ? std::vector<int32_t>{tok->bos_id()} : std::vector<int32_t>{};
    c.eos_token_ids = tok->eos_id() >= 0 ? std::vector<int32_t>{tok->eos_id()} : std::vector<int32_t>{};
    GP_CHECK(name == "tokenizer.json" || name == "tokenizer.model", "[random-model] the tokenizer file must be named tokenizer.model or tokenizer.json, got ", name);
    extra.push_back(t);
  }
  if (a.has("vocab")) c.vocab_size = a.integer("vocab");
  c.torch_dtype = a.str("dtype") == "bf16" ? "bfloat16" : a.str("dtype") == "f16" ? "float16" : "float32";
  const uint64_t seed = uint64_t(a.integer("seed"));
  Checkpoint ck = random_checkpoint(c, parse_dtype(a.str("dtype")), seed);
  save_hf_checkpoint(a.str("out"), c, ck.tensors, extra);
  std::fprintf(stderr, "wrote %s: RANDOM weights (seed %llu), shape %s, %.1fM parameters\n", a.str("out").c_str(),
               (unsigned long long)seed, a.str("shape").c_str(), double(c.num_parameters()) / 1e6);
  return 0;
}

int cmd_info(int argc, char** argv) {
  Args a("info", {kModel, kDtype, kKvType, kJson}, argc, argv, 2);
  if (run_help(a)) return 0;
  LlamaModel m = load_model(a.str("model"), a);
  const auto& c = m.config();
  Session s(m, std::min<int64_t>(c.max_position_embeddings, 2048));
  const MemoryAccount mem = m.memory(s);
  Json j = Json::Object{{"model", m.source()},
                        {"architecture", c.architecture},
                        {"parameters", c.num_parameters()},
                        {"weight_dtype", dtype_name(m.weight_dtype())},
                        {"weight_types", m.weight_types()},
                        {"weights_bytes", int64_t(mem.weights)},
                        {"kv_type", dtype_name(s.kv_dtype())},
                        {"kv_cache_bytes_per_token", int64_t(mem.kv_cache / size_t(s.capacity()))},
                        {"config", Json::parse(hf_config_json(c))},
                        {"tokenizer", m.tokenizer() ? Json(m.tokenizer()->kind()) : Json()}};
  if (a.flag("json")) {
    print_json(j);
    return 0;
  }
  std::printf("%s\n  %s, %.2fM parameters, %s weights (%.1f MB)\n", m.source().c_str(), c.architecture.c_str(),
              double(c.num_parameters()) / 1e6, m.weight_types().c_str(), double(mem.weights) / 1e6);
  std::printf("  d %lld, %lld layers, %lld heads (%lld kv), head_dim %lld, ffn %lld, vocab %lld, context %lld\n",
              (long long)c.hidden_size, (long long)c.num_hidden_layers, (long long)c.num_attention_heads,
              (long long)c.num_key_value_heads, (long long)c.head_dim, (long long)c.intermediate_size,
              (long long)c.vocab_size, (long long)c.max_position_embeddings);
  std::printf("  KV cache %.1f KB per token (%s); tokenizer %s\n", double(mem.kv_cache) / double(s.capacity()) / 1e3,
              dtype_name(s.kv_dtype()), m.tokenizer() ? m.tokenizer()->kind() : "none");
  return 0;
}

void usage(FILE* f) {
  std::fputs(
      "usage: genperf <verb> [options]      (every verb takes --help)\n\n"
      "  generate        continue a prompt (greedy, temperature, top-k, top-p sampling)\n"
      "  eval ppl|mc|kl  perplexity, multiple-choice accuracy, KL divergence from a reference\n"
      "  bench infer     prefill/decode speed and memory against this machine's floors\n"
      "  bench train     training step speed, MFU and memory (naive or flash attention)\n"
      "  bench sr        the SR diffusion model's training and sampler steps: images/s, MFU, memory\n"
      "  plan            memory per rank and predicted step time of a job per shard mode, here or on a catalogued device\n"
      "  train           train a model from scratch on text (and its SentencePiece tokenizer)\n"
      "  finetune        fine-tune a model (full or LoRA) on text or prompt/response JSONL\n"
      "  convert         write a checkpoint as GGUF\n"
      "  quantize        quantize a model (recipes, rtn/imatrix/gptq) to GGUF or safetensors\n"
      "  sensitivity     per-tensor quantization sensitivity map (CSV, JSON, SVG heatmap)\n"
      "  random-model    write a randomly initialized model (HF format) of a built-in shape\n"
      "  info            a model's configuration, size and memory\n"
      "  test-ops        every op on every backend against its reference (--mode perf: against the peak)\n"
      "  test-comm       the collectives across a job's ranks (mpirun -np N genperf test-comm)\n"
      "  sr train|upscale|eval|degrade  diffusion super-resolution of maps (FITS, PNG)\n"
      "  study import|merge|export|show  the results store: bench records in, stores of several machines merged, CSV/JSON out\n"
      "  report          the study's results store as one self-contained HTML page (charts, tables) and a Markdown summary\n",
      f);
}

}  // namespace

static int run_verb(const std::string& verb, int argc, char** argv) {
  if (verb == "generate") return cmd_generate(argc, argv);
  if (verb == "eval") return cmd_eval(argc, argv);
  if (verb == "bench") return cmd_bench(argc, argv);
  if (verb == "convert") return cmd_convert(argc, argv);
  if (verb == "random-model") return cmd_random_model(argc, argv);
  if (verb == "info") return cmd_info(argc, argv);
  if (verb == "train") return cmd_train(argc, argv);
  if (verb == "finetune") return cmd_finetune(argc, argv);
  if (verb == "quantize") return cmd_quantize(argc, argv);
  if (verb == "sensitivity") return cmd_sensitivity(argc, argv);
  if (verb == "test-ops") return cmd_test_ops(argc, argv);
  if (verb == "test-comm") return cmd_test_comm(argc, argv);
  if (verb == "plan") return cmd_plan(argc, argv);
  if (verb == "sr") return cmd_sr(argc, argv);
  if (verb == "study") return cmd_study(argc, argv);
  if (verb == "report") return cmd_report(argc, argv);
  std::fprintf(stderr, "genperf: unknown verb '%s'\n\n", verb.c_str());
  usage(stderr);
  return 2;
}

int main(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) g_command += cat(i ? " " : "", argv[i]);
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string verb = argv[1];
  int rc = 0;
  try {
    rc = run_verb(verb, argc, argv);
  } catch (const std::exception& e) {
    // Under a launcher, the error names its rank and ends every rank (no one waits forever on a
    // collective this rank will never join).
    const bool internal = dynamic_cast<const Error*>(&e) == nullptr;
    std::fprintf(stderr, "%sgenperf: %s%s\n", rank_prefix().c_str(), internal ? "internal error: " : "", e.what());
    std::fflush(stderr);
    if (world_started() && world().size() > 1) world().abort(internal ? 3 : 1);
    return internal ? 3 : 1;
  }
  finalize_world();
  return rc;
}
