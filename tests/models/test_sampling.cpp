#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "genperf/error.h"
#include "genperf/llama.h"

using namespace genperf;

TEST(Sampling, GreedyTakesFirstMaximum) {
  Sampler s({0.f, 0, 1.f, 1});
  std::vector<float> l = {0.f, 3.f, 1.f, 3.f};
  EXPECT_EQ(s.sample(l), 1);
}

// Empirical frequencies follow softmax(logits / T) restricted by top-k and top-p.
TEST(Sampling, FrequenciesMatchTruncatedSoftmax) {
  const uint64_t seed = 42;
  std::printf("seed %llu\n", (unsigned long long)seed);
  std::vector<float> logits = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f, 1.5f};
  struct Case { float temp; int k; float p; };
  for (Case cs : {Case{1.0f, 0, 1.0f}, Case{0.7f, 3, 1.0f}, Case{1.3f, 0, 0.8f}, Case{1.0f, 4, 0.6f}}) {
    // Expected distribution, computed independently in double.
    std::vector<std::pair<double, int>> p;
    for (size_t i = 0; i < logits.size(); ++i) p.push_back({std::exp(double(logits[i]) / cs.temp), int(i)});
    std::sort(p.begin(), p.end(), [](auto a, auto b) { return a.first > b.first; });
    if (cs.k > 0) p.resize(size_t(cs.k));
    double z = 0;
    for (auto& e : p) z += e.first;
    double acc = 0;
    size_t keep = 0;
    while (keep < p.size()) { acc += p[keep++].first / z; if (acc >= cs.p) break; }
    p.resize(keep);
    z = 0;
    for (auto& e : p) z += e.first;
    std::map<int, double> want;
    for (auto& e : p) want[e.second] = e.first / z;

    Sampler s({cs.temp, cs.k, cs.p, seed});
    const int n = 200000;
    std::map<int, int> got;
    for (int i = 0; i < n; ++i) ++got[s.sample(logits)];
    for (auto [id, cnt] : got) ASSERT_TRUE(want.count(id)) << "token " << id << " outside the top-k/top-p set";
    for (auto [id, pr] : want) {
      const double f = double(got[id]) / n, sd = std::sqrt(pr * (1 - pr) / n);
      EXPECT_NEAR(f, pr, 5 * sd + 1e-9) << "token " << id << " temp " << cs.temp << " k " << cs.k << " p " << cs.p;
    }
  }
}

TEST(Sampling, SameSeedSameTokens) {
  std::vector<float> logits(50);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float(std::sin(double(i)));
  Sampler a({0.9f, 10, 0.9f, 5}), b({0.9f, 10, 0.9f, 5});
  for (int i = 0; i < 100; ++i) ASSERT_EQ(a.sample(logits), b.sample(logits));
}

TEST(Sampling, RejectsBadOptions) {
  EXPECT_THROW(Sampler({1.f, -1, 1.f, 0}), Error);
  EXPECT_THROW(Sampler({1.f, 0, 0.f, 0}), Error);
  EXPECT_THROW(Sampler({1.f, 0, 1.5f, 0}), Error);
}
