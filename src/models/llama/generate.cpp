// Sampling and the generation loop.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "genperf/error.h"
#include "genperf/llama.h"

namespace genperf {

Sampler::Sampler(SamplingOptions o) : opt_(o), rng_(o.seed) {
  GP_CHECK(o.top_k >= 0, "[sample] top_k must be >= 0, got ", o.top_k);
  GP_CHECK(o.top_p > 0.f && o.top_p <= 1.f, "[sample] top_p must be in (0, 1], got ", o.top_p);
  GP_CHECK(std::isfinite(o.temperature), "[sample] temperature must be finite");
}

int32_t Sampler::sample(std::span<const float> logits) {
  GP_CHECK(!logits.empty(), "[sample] empty logits");
  if (opt_.temperature <= 0.f) {  // greedy: first maximum
    return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  auto& c = scratch_;
  c.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) c[i] = {logits[i] / opt_.temperature, int32_t(i)};
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t n = c.size();
  if (opt_.top_k > 0 && size_t(opt_.top_k) < n) {
    n = size_t(opt_.top_k);
    std::partial_sort(c.begin(), c.begin() + ptrdiff_t(n), c.end(), by_logit);
  } else {
    std::sort(c.begin(), c.end(), by_logit);
  }
  // Softmax over the kept candidates (sorted, most likely first), then the top-p cut.
  const float mx = c[0].first;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += (c[i].first = std::exp(c[i].first - mx));
  if (opt_.top_p < 1.f) {
    double acc = 0;
    size_t keep = 0;
    while (keep < n) {
      acc += c[keep++].first / sum;
      if (acc >= opt_.top_p) break;
    }
    n = keep;
    sum = 0;
    for (size_t i = 0; i < n; ++i) sum += c[i].first;
  }
  const double r = rng_.uniform() * sum;
  double acc = 0;
  for (size_t i = 0; i < n; ++i) {
    acc += c[i].first;
    if (r < acc) return c[i].second;
  }
  return c[n - 1].second;
}

GenerationResult generate(const LlamaModel& m, const std::string& prompt, int max_tokens,
                          const SamplingOptions& opt,
                          const std::function<void(const std::string&)>& on_token) {
  const Tokenizer* tok = m.tokenizer();
  GP_CHECK(tok != nullptr, "[generate] ", m.source(), " has no tokenizer");
  GP_CHECK(max_tokens >= 0, "[generate] max_tokens must be >= 0");
  GenerationResult r;
  r.prompt_ids = tok->encode(prompt, true);
  GP_CHECK(!r.prompt_ids.empty(), "[generate] the prompt encodes to no tokens (and the tokenizer adds no BOS)");
  const int64_t need = int64_t(r.prompt_ids.size()) + max_tokens;
  GP_CHECK(need <= m.config().max_position_embeddings, "[generate] prompt (", r.prompt_ids.size(),
           " tokens) plus ", max_tokens, " new tokens exceed the model's context of ",
           m.config().max_position_embeddings);
  Session s(m, std::max<int64_t>(need, 1));
  Sampler sampler(opt);
  std::vector<int32_t> eos = m.config().eos_token_ids;
  if (tok->eos_id() >= 0 && std::find(eos.begin(), eos.end(), tok->eos_id()) == eos.end()) eos.push_back(tok->eos_id());
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  Tensor logits = m.forward(s, r.prompt_ids);
  r.prefill_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  t0 = clock::now();
  for (int i = 0; i < max_tokens; ++i) {
    const int32_t id = sampler.sample({logits.data<float>(), size_t(logits.size(1))});
    if (std::find(eos.begin(), eos.end(), id) != eos.end()) {
      r.stopped_at_eos = true;
      break;
    }
    r.ids.push_back(id);
    if (on_token) on_token(tok->piece(id));
    if (i + 1 < max_tokens) logits = m.forward(s, std::span<const int32_t>(&id, 1));
  }
  r.decode_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  r.text = tok->decode(r.ids);
  return r;
}

}  // namespace genperf
