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

#include "bench/op_harness_family.h"
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

// max |a - b| / max |b|: an error relative to the tensor's scale, not fooled by tiny entries (the
// op harness's measure; infinite for different sizes or a NaN).
using bench::harness::rel_error;

// The op harness's finite-difference check (src/bench/op_harness_family.h) as a gtest expectation.
inline void check_fd(const std::string& what, std::vector<double>& x, const std::vector<double>& grad,
                     const std::function<double()>& loss, Rng& r, size_t max_probes = 48,
                     double h = 1e-5, double tol = 1e-5) {
  ASSERT_EQ(x.size(), grad.size()) << what;
  const bench::harness::Check c = bench::harness::fd_check(what, x, grad, loss, r, max_probes, h, tol);
  EXPECT_LT(c.error, tol) << what << ": largest relative difference from central differences";
  std::printf("  %-40s max rel. error %.2e\n", what.c_str(), c.error);
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
