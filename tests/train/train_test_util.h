// Helpers of the training tests: seeded random data and batches, a tiny model shape, the
// tolerance measure, and central finite differences in float64.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "genperf/llama_config.h"
#include "genperf/rng.h"

namespace genperf::testing {

inline std::vector<double> randn(Rng& r, size_t n, double scale = 1.0) {
  std::vector<double> v(n);
  for (auto& x : v) x = r.normal() * scale;
  return v;
}

template <typename To, typename From>
std::vector<To> cast(const std::vector<From>& v) {
  return std::vector<To>(v.begin(), v.end());
}

// max |a - b| / max |b|: an error relative to the tensor's scale, not fooled by tiny entries.
template <typename A, typename B>
double rel_error(const A* a, const B* b, size_t n) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}
template <typename A, typename B>
double rel_error(const std::vector<A>& a, const std::vector<B>& b) {
  EXPECT_EQ(a.size(), b.size());
  return rel_error(a.data(), b.data(), std::min(a.size(), b.size()));
}

// Indices to probe: all of them for small tensors, else the ends and a seeded sample.
inline std::vector<size_t> probe_indices(size_t n, size_t max_probes, Rng& r) {
  std::vector<size_t> idx;
  if (n <= max_probes) {
    for (size_t i = 0; i < n; ++i) idx.push_back(i);
    return idx;
  }
  idx = {0, n - 1};
  while (idx.size() < max_probes) idx.push_back(size_t(r.next() % n));
  return idx;
}

// Compares grad[i] with (loss(x + h e_i) - loss(x - h e_i)) / 2h for probed i; loss() reads x.
// Float64 central differences with h = 1e-5 are accurate to about 1e-9 here.
inline void check_fd(const std::string& what, std::vector<double>& x, const std::vector<double>& grad,
                     const std::function<double()>& loss, Rng& r, size_t max_probes = 48,
                     double h = 1e-5, double tol = 1e-5) {
  ASSERT_EQ(x.size(), grad.size()) << what;
  double worst = 0, gscale = 0;
  for (double g : grad) gscale = std::max(gscale, std::fabs(g));
  for (size_t i : probe_indices(x.size(), max_probes, r)) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double lp = loss();
    x[i] = x0 - h;
    const double lm = loss();
    x[i] = x0;
    const double fd = (lp - lm) / (2 * h);
    const double err = std::fabs(fd - grad[i]) / (1e-8 + std::max(std::fabs(fd), 1e-3 * gscale));
    worst = std::max(worst, err);
    EXPECT_LT(err, tol) << what << " [" << i << "]: analytic " << grad[i] << ", finite difference " << fd;
  }
  std::printf("  %-40s max rel. error %.2e\n", what.c_str(), worst);
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// A tiny Llama: vocabulary 50, hidden 32, MLP 40, two layers, NH query and NKV key/value heads.
inline LlamaConfig tiny(int64_t NH, int64_t NKV, bool tied, bool bias) {
  LlamaConfig c;
  c.vocab_size = 50;
  c.hidden_size = 32;
  c.intermediate_size = 40;
  c.num_hidden_layers = 2;
  c.num_attention_heads = NH;
  c.num_key_value_heads = NKV;
  c.head_dim = 32 / NH;
  c.max_position_embeddings = 128;
  c.rms_norm_eps = 1e-5;
  c.tie_word_embeddings = tied;
  c.attention_bias = bias;
  c.bos_token_ids = {1};
  c.eos_token_ids = {2};
  return c;
}

struct Batch {
  std::vector<int32_t> tokens, targets;
  int64_t B, T;
};

// Random tokens; targets are the next tokens, with every `ignore_every`-th one set to -1.
inline Batch make_batch(uint64_t seed, int64_t B, int64_t T, int64_t V, int ignore_every = 4) {
  Rng r(seed);
  Batch b{{}, {}, B, T};
  for (int64_t i = 0; i < B * (T + 1); ++i) b.tokens.push_back(int32_t(r.next() % uint64_t(V)));
  for (int64_t s = 0; s < B; ++s)
    for (int64_t t = 0; t < T; ++t)
      b.targets.push_back(ignore_every && (s * T + t) % ignore_every == 1 ? -1 : b.tokens[size_t(s * (T + 1) + t + 1)]);
  std::vector<int32_t> in;
  for (int64_t s = 0; s < B; ++s)
    for (int64_t t = 0; t < T; ++t) in.push_back(b.tokens[size_t(s * (T + 1) + t)]);
  b.tokens = in;
  return b;
}

}  // namespace genperf::testing
