// `genperf bench infer`: prefill and decode speed of a model against this machine's measured
// floors (GEMM peak for prefill, weight bytes over memory bandwidth for decode).
#include <algorithm>
#include <chrono>

#include "bench/peaks.h"
#include "genperf/bench.h"
#include "genperf/error.h"
#include "genperf/llama.h"
#include "genperf/progress.h"
#include "genperf/rng.h"

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
    const double row = double(m.weight_bytes_of("model.embed_tokens.weight")) / double(c.vocab_size);
    b -= row * double(c.vocab_size - 1);
  }
  return b;
}

}  // namespace

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

  Json::Array prefill;
  for (int64_t L : o.prefill_lengths) {
    const auto toks = random_tokens(L, c.vocab_size, o.seed + uint64_t(L));
    Stats st = measure([&] { s.reset(); m.forward(s, toks, LogitsFor::Last); }, o.warmup, o.reps);
    const double flops = m.forward_flops(L, 0, LogitsFor::Last);
    Json r = Json::Object{{"tokens", L}, {"seconds", st.to_json()}, {"tokens_per_s", double(L) / st.median},
                          {"tokens_per_s_min", double(L) / st.max}, {"tokens_per_s_max", double(L) / st.min},
                          {"gflops", flops / st.median * 1e-9}};
    prefill.push_back(std::move(r));
    if (progress) bar.update(++step);
  }
  out["prefill"] = Json(std::move(prefill));

  // Decode: after an untimed prompt, time decode_tokens single-token steps (greedy).
  const auto prompt = random_tokens(o.decode_prompt, c.vocab_size, o.seed);
  std::vector<double> per_token, ttft;
  for (int rep = 0; rep < o.warmup + o.reps; ++rep) {
    s.reset();
    auto t0 = std::chrono::steady_clock::now();
    Tensor logits = m.forward(s, prompt, LogitsFor::Last);
    Sampler greedy({0.f, 0, 1.f, 0});
    int32_t id = greedy.sample({logits.data<float>(), size_t(c.vocab_size)});
    const double first = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < o.decode_tokens; ++i) {
      logits = m.forward(s, std::span<const int32_t>(&id, 1), LogitsFor::Last);
      id = greedy.sample({logits.data<float>(), size_t(c.vocab_size)});
    }
    if (rep >= o.warmup) {
      per_token.push_back(seconds_since(t0) / double(o.decode_tokens));
      ttft.push_back(first);
    }
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

  // The machine's floors are measured last, so that their buffers stay out of the peak RSS above.
  const size_t peak_rss = peak_rss_bytes();
  if (o.measure_peaks) {
    const double bw = bench::measure_bandwidth_gbs();
    const double peak_f32 = bench::measure_gemm_peak_gflops(DType::F32);
    const double peak_w = m.weight_dtype() == DType::F32 ? peak_f32 : bench::measure_gemm_peak_gflops(m.weight_dtype());
    out["machine"] = Json(Json::Object{{"bandwidth_gbs", bw},
                                       {"gemm_peak_gflops_f32", peak_f32},
                                       {"gemm_peak_gflops_weight_type", peak_w}});
    for (Json& r : out["prefill"].as_array()) {
      const double gflops = r.at("gflops").as_number();
      r["fraction_of_f32_gemm_peak"] = gflops / peak_f32;
      r["fraction_of_weight_type_gemm_peak"] = gflops / peak_w;
    }
    Json& d = out["decode"];
    const double bytes = d.at("weight_bytes_per_token").as_number();
    d["floor_seconds_per_token"] = bytes / (bw * 1e9);
    d["fraction_of_bandwidth_floor"] = bytes / (bw * 1e9) / d.at("seconds_per_token").at("median").as_number();
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
