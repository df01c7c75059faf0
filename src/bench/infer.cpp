// `genperf bench infer`: prefill and decode speed of a model against this machine's floors,
// measured in the same run and interleaved with the timed repetitions: the GEMM peak of the
// weights' compute type for prefill, weight bytes over the read bandwidth for decode (from
// memory, or from cache where the weights and KV cache fit the last-level cache).
#include <algorithm>
#include <chrono>
#include <memory>

#include "bench/peaks.h"
#include "genperf/bench.h"
#include "genperf/error.h"
#include "genperf/llama.h"
#include "genperf/progress.h"
#include "genperf/rng.h"
#include "models/llama/names.h"

namespace genperf {
namespace {

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  Rng r(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = int32_t(r.next() % uint64_t(vocab));
  return t;
}

double seconds_since(std::chrono::steady_clock::time_point a) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
}

// Bytes a decode step must read: every weight except the embedding table, of which one row is
// read (unless the table doubles as the output head).
double decode_bytes(const LlamaModel& m) {
  const auto& c = m.config();
  double b = double(m.weight_bytes());
  if (!c.tie_word_embeddings) {
    const double row = double(m.weight_bytes_of(llama::kEmbed)) / double(c.vocab_size);
    b -= row * double(c.vocab_size - 1);
  }
  return b;
}

// The compute type of the model's prefill GEMMs: of every 2-D weight type it holds (weight_types
// reads "bf16" or "mixed: 84 q4_k, 12 q6_k"), the one with the highest peak.
bench::GemmCompute model_compute_type(const LlamaModel& m) {
  const std::string s = m.weight_types();
  std::vector<bench::GemmCompute> types;
  if (s.rfind("mixed:", 0) != 0) {
    types.push_back(bench::gemm_compute_type(parse_dtype(s)));
  } else {
    for (size_t i = 6; i < s.size();) {
      const size_t end = std::min(s.find(',', i), s.size());
      const std::string item = s.substr(i, end - i);  // " 84 q4_k"
      types.push_back(bench::gemm_compute_type(parse_dtype(item.substr(item.rfind(' ') + 1))));
      i = end + 1;
    }
  }
  return bench::fastest(types);
}

Json samples_json(const std::vector<double>& v) {
  const Stats s = Stats::of(v);
  return Json(Json::Object{{"best", s.max}, {"median", s.median}, {"min", s.min}, {"n", int64_t(v.size())}});
}

double best_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

}  // namespace

DecodeTimer::DecodeTimer(const LlamaModel& m, int64_t prompt, int64_t tokens, uint64_t seed)
    : m_(m), prompt_(random_tokens(prompt, m.config().vocab_size, seed)), tokens_(tokens) {
  GP_CHECK(prompt > 0 && tokens > 0, "[bench] decode needs a prompt and tokens to generate, got ", prompt, " and ", tokens);
  GP_CHECK(prompt + tokens <= m.config().max_position_embeddings, "[bench] decode needs ", prompt + tokens,
           " tokens of context; the model allows ", m.config().max_position_embeddings);
  s_ = std::make_unique<Session>(m, prompt + tokens);
}

DecodeTimer::~DecodeTimer() = default;

DecodeTimer::Times DecodeTimer::once() {
  const int64_t V = m_.config().vocab_size;
  s_->reset();
  auto t0 = std::chrono::steady_clock::now();
  Tensor logits = m_.forward(*s_, prompt_, LogitsFor::Last);
  Sampler greedy({0.f, 0, 1.f, 0});
  int32_t id = greedy.sample({logits.data<float>(), size_t(V)});
  Times t;
  t.first_token_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < tokens_; ++i) {
    logits = m_.forward(*s_, std::span<const int32_t>(&id, 1), LogitsFor::Last);
    id = greedy.sample({logits.data<float>(), size_t(V)});
  }
  t.per_token_s = seconds_since(t0) / double(tokens_);
  return t;
}

Json bench_infer(const LlamaModel& m, const InferBenchOptions& o, bool progress) {
  const auto& c = m.config();
  int64_t cap = o.decode_prompt + o.decode_tokens;
  for (int64_t L : o.prefill_lengths) cap = std::max(cap, L);
  GP_CHECK(cap <= c.max_position_embeddings, "[bench] the benchmark needs ", cap,
           " tokens of context; the model allows ", c.max_position_embeddings);
  Session s(m, cap);
  Json out = Json::Object{};
  Progress bar("bench infer", int64_t(o.prefill_lengths.size()) + 3);
  int64_t step = 0;

  std::vector<std::vector<int32_t>> prompts;
  for (int64_t L : o.prefill_lengths) prompts.push_back(random_tokens(L, c.vocab_size, o.seed + uint64_t(L)));
  auto prefill_once = [&](size_t i) {
    s.reset();
    m.forward(s, prompts[i], LogitsFor::Last);
  };
  DecodeTimer decoder(m, o.decode_prompt, o.decode_tokens, o.seed);
  auto decode_once = [&] {
    const DecodeTimer::Times t = decoder.once();
    return std::pair{t.first_token_s, t.per_token_s};
  };

  // Warm-up of every shape the timed runs take (at least once), so that all they allocate is
  // allocated here: the peak RSS read after it is the run's, and the floors' buffers, allocated
  // next, stay out of it.
  for (int w = 0; w < std::max(1, o.warmup); ++w) {
    for (size_t i = 0; i < prompts.size(); ++i) prefill_once(i);
    decode_once();
  }
  const size_t peak_rss = peak_rss_bytes();
  if (progress) bar.update(++step);

  // The floors, sampled between the timed repetitions; each floor is the best of its samples.
  const double weights_and_kv = double(m.weight_bytes() + s.kv_bytes());
  const size_t llc = bench::last_level_cache_bytes();
  const bool fits = bench::fits_in_cache(weights_and_kv, llc);
  std::unique_ptr<bench::BandwidthProbe> mem_probe, cache_probe;
  std::unique_ptr<bench::GemmPeakProbe> gemm_probe;
  bench::GemmCompute compute = bench::GemmCompute::F32;
  if (o.measure_peaks) {
    compute = model_compute_type(m);
    gemm_probe = std::make_unique<bench::GemmPeakProbe>(compute);
    mem_probe = std::make_unique<bench::BandwidthProbe>(o.memory_probe_bytes ? o.memory_probe_bytes
                                                                              : bench::memory_probe_bytes());
    if (fits) cache_probe = std::make_unique<bench::BandwidthProbe>(size_t(weights_and_kv));
  }
  std::vector<double> gemm_gflops, mem_gbs, cache_gbs;
  auto sample_gemm = [&] {
    if (gemm_probe) gemm_gflops.push_back(gemm_probe->sample());
  };
  auto sample_bandwidth = [&] {
    if (mem_probe)
      for (int i = 0; i < 2; ++i) mem_gbs.push_back(mem_probe->pass());
    if (cache_probe)
      for (int i = 0; i < 2; ++i) cache_gbs.push_back(cache_probe->pass());
  };

  Json::Array prefill;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const int64_t L = o.prefill_lengths[i];
    std::vector<double> t;
    sample_gemm();
    for (int rep = 0; rep < o.reps; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      prefill_once(i);
      t.push_back(seconds_since(t0));
      sample_gemm();
    }
    const Stats st = Stats::of(std::move(t));
    const double flops = m.forward_flops(L, 0, LogitsFor::Last);
    Json r = Json::Object{{"tokens", L}, {"seconds", st.to_json()}, {"tokens_per_s", double(L) / st.median},
                          {"tokens_per_s_min", double(L) / st.max}, {"tokens_per_s_max", double(L) / st.min},
                          {"gflops", flops / st.median * 1e-9}};
    prefill.push_back(std::move(r));
    if (progress) bar.update(++step);
  }
  out["prefill"] = Json(std::move(prefill));

  std::vector<double> per_token, ttft;
  sample_bandwidth();
  for (int rep = 0; rep < o.reps; ++rep) {
    const auto [first, tok] = decode_once();
    ttft.push_back(first);
    per_token.push_back(tok);
    sample_bandwidth();
  }
  if (progress) bar.update(++step);
  const Stats dec = Stats::of(per_token), first = Stats::of(ttft);
  const double bytes = decode_bytes(m);
  Json d = Json::Object{{"prompt_tokens", o.decode_prompt}, {"tokens_per_rep", o.decode_tokens},
                        {"seconds_per_token", dec.to_json()}, {"tokens_per_s", 1.0 / dec.median},
                        {"tokens_per_s_min", 1.0 / dec.max}, {"tokens_per_s_max", 1.0 / dec.min},
                        {"weight_bytes_per_token", bytes}, {"gbs", bytes / dec.median * 1e-9}};
  out["decode"] = std::move(d);
  out["time_to_first_token_s"] = first.to_json();

  if (o.measure_peaks) {
    if (gemm_gflops.empty()) sample_gemm();  // no prefill lengths
    Json::Array notes;
    bool exceeded = false;
    const double peak = best_of(gemm_gflops), mem_bw = best_of(mem_gbs);
    Json mc = Json::Object{{"bandwidth_gbs", mem_bw},
                           {"memory_probe", Json::Object{{"bytes", int64_t(mem_probe->bytes())}, {"gbs", samples_json(mem_gbs)}}},
                           {"llc_bytes", int64_t(llc)},
                           {"working_set_bytes", weights_and_kv},
                           {"working_set_fits_llc", fits},
                           {"gemm_peak", Json::Object{{"type", bench::gemm_compute_name(compute)}, {"how", gemm_probe->how()},
                                                      {"gflops", samples_json(gemm_gflops)}}},
                           {"gemm_peak_gflops", peak}};
    const std::string pname = bench::gemm_compute_name(compute);
    if (m.weight_types().rfind("mixed:", 0) == 0)
      notes.push_back(cat("weight types ", m.weight_types(), ": prefill is compared with the peak of the fastest "
                          "compute type among them, ", pname));
    else if (compute == bench::GemmCompute::Int8)
      notes.push_back(cat(m.weight_types(), " prefill runs the integer GEMM (activations quantized to 8 bits): compared with "
                          "the int8 GEMM peak"));
    for (Json& r : out["prefill"].as_array()) {
      const bench::FloorFraction f = bench::against_floor(r.at("gflops").as_number(), peak);
      r["gemm_peak_type"] = pname;
      r["fraction_of_gemm_peak"] = f.fraction;
      r["floor_exceeded"] = f.exceeded;
      if (f.exceeded) {
        exceeded = true;
        notes.push_back(cat("prefill ", r.at("tokens").as_int(), " ran at ", int64_t(100 * f.fraction + 0.5), "% of the ",
                            pname, " GEMM peak: the peak measured the wrong limit; this run is flagged"));
      }
    }
    // Decode's floor: the memory probe, or where the weights and KV cache fit the LLC, the
    // better of it and the read of a buffer of the working set's size.
    double floor = mem_bw;
    std::string kind = "memory";
    if (fits) {
      const double cache_bw = best_of(cache_gbs);
      mc["cache_probe"] = Json::Object{{"bytes", int64_t(cache_probe->bytes())}, {"gbs", samples_json(cache_gbs)}};
      notes.push_back(cat("weights and KV cache (", int64_t(weights_and_kv / 1e6 + 0.5), " MB) fit the last-level cache "
                          "the OS reports (", int64_t(double(llc) / 1e6 + 0.5), " MB): decode is compared with a read of a "
                          "buffer of that size in this run (", int64_t(cache_bw + 0.5), " GB/s; memory ",
                          int64_t(mem_bw + 0.5), " GB/s)"));
      if (cache_bw < 1.2 * mem_bw)
        notes.push_back("that read was not much faster than memory: the working set does not stay in cache on these "
                        "cores (the LLC the OS reports may be the whole socket's), or the machine was too busy to tell");
      if (cache_bw > floor) floor = cache_bw, kind = "cache";
    }
    Json& dj = out["decode"];
    const bench::FloorFraction f = bench::against_floor(dj.at("gbs").as_number(), floor);
    dj["bandwidth_floor"] = Json::Object{{"kind", kind}, {"gbs", floor}};
    dj["floor_seconds_per_token"] = bytes / (floor * 1e9);
    dj["fraction_of_bandwidth_floor"] = f.fraction;
    dj["floor_exceeded"] = f.exceeded;
    if (f.exceeded) {
      exceeded = true;
      notes.push_back(cat("decode read its weights at ", int64_t(100 * f.fraction + 0.5), "% of the ", kind,
                          " bandwidth floor: the floor measured the wrong limit; this run is flagged"));
    }
    const Stats ms = Stats::of(mem_gbs);
    if (ms.spread() > 0.10)
      notes.push_back(cat("the memory probe's readings spread by ", int64_t(100 * ms.spread() + 0.5), "% (",
                          int64_t(ms.min + 0.5), " to ", int64_t(ms.max + 0.5), " GB/s): the machine was noisy"));
    out["machine"] = std::move(mc);
    out["floor_exceeded"] = exceeded;
    out["notes"] = Json(std::move(notes));
  }
  if (progress) bar.update(++step);
  const MemoryAccount mem = m.memory(s);
  out["kv_type"] = dtype_name(s.kv_dtype());
  out["memory"] = Json(Json::Object{{"weights_bytes", int64_t(mem.weights)}, {"kv_cache_bytes", int64_t(mem.kv_cache)},
                                    {"scratch_bytes", int64_t(mem.scratch)}, {"total_bytes", int64_t(mem.total())},
                                    {"peak_rss_bytes", int64_t(peak_rss)}});
  bar.finish();
  return out;
}

}  // namespace genperf
