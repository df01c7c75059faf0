// Budgeted allocation: the knapsack solvers against exhaustive enumeration on small random
// instances, the Lagrangian bound, Pareto pruning, and the errors for budgets no plan can meet.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>

#include "genperf/error.h"
#include "genperf/sensitivity.h"

namespace genperf {
namespace {

using Groups = std::vector<std::vector<AllocationOption>>;

// Random instance: G groups of 1..4 options; sizes are multiples of a random unit (so the exact
// DP has a gcd to find) plus, sometimes, odd sizes; costs are random, sometimes tied.
Groups random_groups(std::mt19937& rng, int G) {
  std::uniform_int_distribution<int> nopt(1, 4), unit(1, 64), mult(1, 40), odd(0, 3);
  std::uniform_real_distribution<double> cost(0.0, 1.0);
  const int u = unit(rng);
  Groups g(static_cast<size_t>(G));
  for (auto& opts : g) {
    const int n = nopt(rng);
    for (int i = 0; i < n; ++i) {
      AllocationOption o;
      o.format = DType::Q4_K;
      o.bytes = int64_t(mult(rng)) * u + (odd(rng) == 0 ? mult(rng) : 0);
      o.cost = odd(rng) == 0 ? 0.25 : cost(rng);  // some ties
      opts.push_back(o);
    }
  }
  return g;
}

// Every combination: the least cost within `budget` (and its bytes), or the fewest bytes within
// `max_cost`.
struct Brute {
  double best_cost = std::numeric_limits<double>::infinity();
  int64_t best_bytes = std::numeric_limits<int64_t>::max();
};
void enumerate(const Groups& g, size_t i, int64_t bytes, double cost, const std::function<void(int64_t, double)>& f) {
  if (i == g.size()) return f(bytes, cost);
  for (const auto& o : g[i]) enumerate(g, i + 1, bytes + o.bytes, cost + o.cost, f);
}

double cost_of(const Groups& g, const std::vector<int>& pick) {
  double c = 0;
  for (size_t i = 0; i < g.size(); ++i) c += g[i][size_t(pick[i])].cost;
  return c;
}
int64_t bytes_of(const Groups& g, const std::vector<int>& pick) {
  int64_t b = 0;
  for (size_t i = 0; i < g.size(); ++i) b += g[i][size_t(pick[i])].bytes;
  return b;
}

TEST(Allocate, MinCostMatchesBruteForce) {
  const unsigned seed = 20240611;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 400; ++trial) {
    const int G = 1 + trial % 8;
    const Groups g = random_groups(rng, G);
    int64_t lo = 0, hi = 0;
    for (const auto& opts : g) {
      int64_t a = INT64_MAX, b = 0;
      for (const auto& o : opts) a = std::min(a, o.bytes), b = std::max(b, o.bytes);
      lo += a;
      hi += b;
    }
    // Budgets at the boundaries (the smallest achievable, everything at its largest) and between.
    const int64_t budget = trial % 5 == 0 ? lo : trial % 5 == 1 ? hi : lo + int64_t(rng() % uint64_t(hi - lo + 1));
    Brute br;
    enumerate(g, 0, 0, 0.0, [&](int64_t b, double c) {
      if (b <= budget && c < br.best_cost) br.best_cost = c;
    });
    bool rounded = true;
    const std::vector<int> pick = knapsack_min_cost(g, budget, 1 << 22, &rounded);
    EXPECT_FALSE(rounded);
    ASSERT_EQ(pick.size(), g.size());
    EXPECT_LE(bytes_of(g, pick), budget) << "trial " << trial;
    EXPECT_NEAR(cost_of(g, pick), br.best_cost, 1e-12) << "trial " << trial << " G " << G << " budget " << budget;
    // The Lagrangian (LP) bound never exceeds the optimum.
    EXPECT_LE(lagrangian_lower_bound(g, budget), br.best_cost + 1e-12) << "trial " << trial;
  }
}

TEST(Allocate, MinBytesMatchesBruteForce) {
  const unsigned seed = 7;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 300; ++trial) {
    const int G = 1 + trial % 8;
    const Groups g = random_groups(rng, G);
    double lowest = 0, highest = 0;
    for (const auto& opts : g) {
      double a = INFINITY, b = 0;
      for (const auto& o : opts) a = std::min(a, o.cost), b = std::max(b, o.cost);
      lowest += a;
      highest += b;
    }
    // A KL budget equal to an achievable total (the lowest) must be feasible despite rounding of sums.
    const double max_cost = trial % 4 == 0 ? lowest : lowest + (highest - lowest) * double(rng() % 1000) / 1000.0;
    Brute br;
    enumerate(g, 0, 0, 0.0, [&](int64_t b, double c) {
      if (c <= max_cost * (1 + 1e-12) && b < br.best_bytes) br.best_bytes = b;
    });
    const std::vector<int> pick = knapsack_min_bytes(g, max_cost);
    EXPECT_EQ(bytes_of(g, pick), br.best_bytes) << "trial " << trial;
    EXPECT_LE(cost_of(g, pick), max_cost * (1 + 1e-12) + 1e-15) << "trial " << trial;
  }
}

TEST(Allocate, RoundedSizesStayWithinBudget) {
  const unsigned seed = 99;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 100; ++trial) {
    const Groups g = random_groups(rng, 8);
    int64_t lo = 0, hi = 0, gcd = 0;
    for (const auto& opts : g) {
      int64_t a = INT64_MAX, b = 0;
      for (const auto& o : opts) a = std::min(a, o.bytes), b = std::max(b, o.bytes);
      for (const auto& o : opts) gcd = std::gcd(gcd, o.bytes - a);
      lo += a, hi += b;
    }
    const int64_t budget = lo + (hi - lo) / 2;
    bool rounded = false;
    Brute br;
    enumerate(g, 0, 0, 0.0, [&](int64_t b, double c) {
      if (b <= budget && c < br.best_cost) br.best_cost = c;
    });
    const auto pick = knapsack_min_cost(g, budget, 8, &rounded);  // few cells: sizes rounded up
    EXPECT_LE(bytes_of(g, pick), budget);
    EXPECT_GE(cost_of(g, pick), br.best_cost - 1e-12);
    // Rounded exactly when the exact cells (in units of the gcd) would exceed the 8 allowed.
    EXPECT_EQ(rounded, (budget - lo) / std::max<int64_t>(gcd, 1) > 8) << "trial " << trial;
  }
}

TEST(Allocate, InfeasibleBudgetSaysTheSmallest) {
  Groups g = {{{DType::Q2_K, 100, 1.0, 0, false}, {DType::Q8_0, 300, 0.1, 0, false}},
              {{DType::Q2_K, 50, 2.0, 0, false}}};
  try {
    knapsack_min_cost(g, 149);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("smallest achievable is 150 bytes"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(knapsack_min_cost(g, 150));
  try {
    knapsack_min_bytes(g, 2.0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lowest predicted KL is 2.1"), std::string::npos) << e.what();
  }
}

// A map with two tensors of 256 x 256 and three formats; the second tensor is the sensitive one.
SensitivityMap synthetic_map() {
  SensitivityMap m;
  m.model = "synthetic";
  m.formats = {DType::Q2_K, DType::Q4_K, DType::Q8_0};
  const int64_t n = 256 * 256;
  for (int i = 0; i < 2; ++i) {
    SensitivityTensor t;
    t.name = cat("model.layers.0.mlp.", i ? "down" : "up", "_proj.weight");
    t.layer = 0;
    t.kind = i ? "down" : "up";
    t.elements = n;
    t.source_dtype = DType::BF16;
    t.source_bytes = 2 * n;
    m.tensors.push_back(t);
    const double scale = i ? 10.0 : 1.0;
    for (DType f : m.formats) {
      SensitivityEntry e;
      e.tensor = t.name;
      e.format = f;
      e.bytes = int64_t(bytes_for(f, n));
      e.bpw = double(e.bytes) * 8 / double(n);
      e.kl = scale * (f == DType::Q2_K ? 0.1 : f == DType::Q4_K ? 0.01 : 0.0001);
      e.dloss = e.kl / 2;
      e.proxy = e.kl * 3;
      m.entries.push_back(e);
    }
  }
  m.total_source_bytes = 4 * n + 1000;  // 1000 bytes of norms
  return m;
}

TEST(Allocate, PlanForBpwBudget) {
  const SensitivityMap m = synthetic_map();
  AllocationReport r;
  // 2.625 bpw (Q2_K) for one tensor and 4.5 (Q4_K) for the other average 3.5625: the sensitive
  // one must get the larger format.
  QuantPlan plan = plan_for_budget(m, Budget::bpw(3.6), &r);
  EXPECT_EQ(plan.at("model.layers.0.mlp.down_proj.weight"), DType::Q4_K);
  EXPECT_EQ(plan.at("model.layers.0.mlp.up_proj.weight"), DType::Q2_K);
  EXPECT_NEAR(r.bpw, 3.5625, 1e-9);
  EXPECT_NEAR(r.predicted, 0.1 + 0.1, 1e-12);
  EXPECT_NEAR(r.predicted_dloss, 0.1, 1e-12);
  EXPECT_EQ(r.total_bytes, r.quantizable_bytes + 1000);
  EXPECT_LE(r.lagrangian_bound, r.predicted + 1e-12);
  EXPECT_EQ(r.method, "dp");

  // A generous budget keeps the sensitive tensor unquantized (the keep option costs nothing).
  plan = plan_for_budget(m, Budget::bpw(16), &r);
  EXPECT_TRUE(plan.empty());
  EXPECT_EQ(r.predicted, 0.0);
  AllocationOptions no_keep;
  no_keep.allow_keep = false;
  plan = plan_for_budget(m, Budget::bpw(16), &r, no_keep);
  EXPECT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan.at("model.layers.0.mlp.down_proj.weight"), DType::Q8_0);
}

TEST(Allocate, PlanForSizeAndKlBudgets) {
  const SensitivityMap m = synthetic_map();
  const int64_t n = 256 * 256;
  AllocationReport r;
  // Total size: both tensors at Q4_K plus the norms.
  QuantPlan plan = plan_for_budget(m, Budget::bytes(double(2 * bytes_for(DType::Q4_K, n) + 1000)), &r);
  EXPECT_EQ(plan.at("model.layers.0.mlp.up_proj.weight"), DType::Q4_K);
  EXPECT_EQ(plan.at("model.layers.0.mlp.down_proj.weight"), DType::Q4_K);
  EXPECT_EQ(r.total_bytes, int64_t(2 * bytes_for(DType::Q4_K, n) + 1000));
  // KL budget 0.02: the fewest bytes are up at Q4_K (0.01) + down at Q8_0 (0.001).
  plan = plan_for_budget(m, Budget::max_kl(0.02), &r);
  EXPECT_EQ(plan.at("model.layers.0.mlp.up_proj.weight"), DType::Q4_K);
  EXPECT_EQ(plan.at("model.layers.0.mlp.down_proj.weight"), DType::Q8_0);
  EXPECT_NEAR(r.predicted, 0.011, 1e-12);
  // With the proxy as predictor (3x the KL here) the same plan needs a 3x budget.
  AllocationOptions po;
  po.use_proxy = true;
  plan = plan_for_budget(m, Budget::max_kl(0.06), &r, po);
  EXPECT_EQ(plan.at("model.layers.0.mlp.down_proj.weight"), DType::Q8_0);
  EXPECT_NEAR(r.predicted, 0.033, 1e-12);
}

TEST(Allocate, InfeasiblePlanNamesTheSmallestAchievable) {
  const SensitivityMap m = synthetic_map();
  try {
    plan_for_budget(m, Budget::bpw(2.0));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--target-bpw 2 cannot be met: the smallest achievable is 2.6250 bpw"),
              std::string::npos)
        << e.what();
  }
  try {
    plan_for_budget(m, Budget::bytes(1000));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(cat("smallest achievable is 2.6250 bpw, ", 2 * bytes_for(DType::Q2_K, 65536) + 1000,
                                             " bytes in all")),
              std::string::npos)
        << e.what();
  }
  AllocationOptions no_keep;
  no_keep.allow_keep = false;
  EXPECT_THROW(plan_for_budget(m, Budget::max_kl(0.0001), nullptr, no_keep), Error);  // lowest is 0.0011
  EXPECT_THROW(plan_for_budget(m, Budget::max_kl(-1)), Error);
  EXPECT_THROW(plan_for_budget(m, Budget::bpw(0)), Error);
}

TEST(Allocate, ParetoPruning) {
  SensitivityMap m = synthetic_map();
  // Q4_0 is as large as Q4_K (4.5 bpw) but worse here, Q5_K is larger and worse than Q4_K: both
  // are dominated.
  for (int i = 0; i < 2; ++i) {
    SensitivityEntry e = m.entries[size_t(i * 3 + 1)];
    e.format = DType::Q4_0;
    e.kl *= 2;
    m.entries.push_back(e);
    e.format = DType::Q5_K;
    e.bytes = int64_t(bytes_for(DType::Q5_K, 65536));
    m.entries.push_back(e);
  }
  const auto groups = allocation_options(m, {});
  ASSERT_EQ(groups.size(), 2u);
  for (const auto& g : groups) {
    ASSERT_EQ(g.size(), 4u);  // q2_k, q4_k, q8_0, keep
    EXPECT_EQ(g[0].format, DType::Q2_K);
    EXPECT_EQ(g[1].format, DType::Q4_K);
    EXPECT_EQ(g[2].format, DType::Q8_0);
    EXPECT_TRUE(g[3].keep);
    for (size_t i = 1; i < g.size(); ++i) {
      EXPECT_GT(g[i].bytes, g[i - 1].bytes);
      EXPECT_LT(g[i].cost, g[i - 1].cost);
    }
  }
  // A proxy-only map cannot be allocated by measured KL.
  m.measured = false;
  EXPECT_THROW(allocation_options(m, {}), Error);
  AllocationOptions po;
  po.use_proxy = true;
  EXPECT_NO_THROW(allocation_options(m, po));
}

}  // namespace
}  // namespace genperf

namespace genperf {
namespace {

// Decode seconds for synthetic_map: q2_k is the smallest but slower than q4_k (its dequantization
// costs more than its bytes save), so by time it is dominated; bf16 (keep) is the slowest.
TensorSeconds synthetic_seconds() {
  TensorSeconds t;
  t.fixed = 3e-6;
  for (const char* n : {"model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.down_proj.weight"})
    t.seconds[n] = {{DType::Q2_K, 5.5e-6}, {DType::Q4_K, 5e-6}, {DType::Q8_0, 6e-6}, {DType::BF16, 10e-6}};
  return t;
}

TEST(Allocate, LatencyBudgetMinimizesKlUnderTheStepTime) {
  const SensitivityMap m = synthetic_map();
  const TensorSeconds ts = synthetic_seconds();
  AllocationOptions o;
  o.latency = &ts;
  AllocationReport r;
  // 14 us: fixed 3 + q4_k 5 + q8_0 6; the sensitive down_proj gets q8_0.
  QuantPlan plan = plan_for_budget(m, Budget::latency(14e-6), &r, o);
  EXPECT_EQ(plan.at("model.layers.0.mlp.up_proj.weight"), DType::Q4_K);
  EXPECT_EQ(plan.at("model.layers.0.mlp.down_proj.weight"), DType::Q8_0);
  EXPECT_NEAR(r.predicted, 0.01 + 0.001, 1e-12);
  EXPECT_NEAR(r.predicted_seconds, 14e-6, 1e-15);
  EXPECT_EQ(r.budget_seconds, 14e-6);
  EXPECT_LE(r.lagrangian_bound, r.predicted + 1e-12);
  EXPECT_NE(r.summary().find("predicted decode step 0.014 ms (budget 0.014 ms)"), std::string::npos) << r.summary();
  // 13 us: both at q4_k. The smallest format, q2_k, is never chosen: it is slower than q4_k and
  // less accurate, so a latency budget prunes it.
  plan = plan_for_budget(m, Budget::latency(13e-6), &r, o);
  EXPECT_EQ(plan.at("model.layers.0.mlp.up_proj.weight"), DType::Q4_K);
  EXPECT_EQ(plan.at("model.layers.0.mlp.down_proj.weight"), DType::Q4_K);
  // 23 us keeps both in bf16 (3 + 10 + 10).
  plan = plan_for_budget(m, Budget::latency(23e-6), &r, o);
  EXPECT_TRUE(plan.empty());
  EXPECT_EQ(r.predicted, 0.0);
  // 22 us: one must go; the least KL is up_proj at q8_0 (0.0001), down_proj kept.
  plan = plan_for_budget(m, Budget::latency(22e-6), &r, o);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan.at("model.layers.0.mlp.up_proj.weight"), DType::Q8_0);
  EXPECT_NEAR(r.predicted_seconds, 19e-6, 1e-15);
  // Under another budget the seconds are reported, not used.
  plan = plan_for_budget(m, Budget::bpw(3.6), &r, o);
  EXPECT_EQ(plan.at("model.layers.0.mlp.up_proj.weight"), DType::Q2_K);
  EXPECT_NEAR(r.predicted_seconds, 3e-6 + 5.5e-6 + 5e-6, 1e-15);
  EXPECT_EQ(r.budget_seconds, 0.0);
}

TEST(Allocate, LatencyBudgetErrors) {
  const SensitivityMap m = synthetic_map();
  const TensorSeconds ts = synthetic_seconds();
  AllocationOptions o;
  o.latency = &ts;
  try {
    plan_for_budget(m, Budget::latency(12e-6), nullptr, o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--target-latency 0.012 ms cannot be met: the fastest achievable step is 0.013 "
                                         "ms (0.003 ms of it outside the quantizable tensors"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(plan_for_budget(m, Budget::latency(1), nullptr, {}), Error);  // no seconds
  EXPECT_THROW(plan_for_budget(m, Budget::latency(0), nullptr, o), Error);
  TensorSeconds missing = ts;
  missing.seconds["model.layers.0.mlp.up_proj.weight"].erase(DType::Q8_0);
  o.latency = &missing;
  try {
    plan_for_budget(m, Budget::latency(1), nullptr, o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no decode time for model.layers.0.mlp.up_proj.weight in q8_0"),
              std::string::npos)
        << e.what();
  }
}

// Random maps of 4 tensors x 3 formats (+ keep) with random whole-microsecond times: the plan's
// KL is the least of every combination that meets the budget (exhaustive enumeration).
TEST(Allocate, LatencyBudgetMatchesBruteForce) {
  std::mt19937 rng(20261206);
  std::printf("seed 20261206\n");
  std::uniform_int_distribution<int> us(1, 30);
  std::uniform_real_distribution<double> kl(0.0, 1.0);
  const DType formats[] = {DType::Q2_K, DType::Q4_K, DType::Q8_0};
  for (int trial = 0; trial < 40; ++trial) {
    SensitivityMap m;
    m.model = "random";
    m.formats = {std::begin(formats), std::end(formats)};
    TensorSeconds ts;
    ts.fixed = 1e-6 * us(rng);
    std::vector<std::vector<std::pair<double, double>>> opts;  // per tensor: (seconds, kl), keep last
    for (int i = 0; i < 4; ++i) {
      SensitivityTensor t;
      t.name = cat("model.layers.", i, ".mlp.up_proj.weight");
      t.elements = 256 * 256;
      t.source_dtype = DType::BF16;
      t.source_bytes = 2 * t.elements;
      m.tensors.push_back(t);
      opts.emplace_back();
      for (DType f : formats) {
        SensitivityEntry e;
        e.tensor = t.name;
        e.format = f;
        e.bytes = int64_t(bytes_for(f, t.elements));
        e.kl = kl(rng);
        m.entries.push_back(e);
        ts.seconds[t.name][f] = 1e-6 * us(rng);
        opts.back().push_back({ts.seconds[t.name][f], e.kl});
      }
      ts.seconds[t.name][DType::BF16] = 1e-6 * us(rng);
      opts.back().push_back({ts.seconds[t.name][DType::BF16], 0.0});
    }
    const double budget = ts.fixed + 1e-6 * std::uniform_int_distribution<int>(4, 120)(rng);
    double best = std::numeric_limits<double>::infinity();
    for (int c = 0; c < 256; ++c) {
      double t = ts.fixed, k = 0;
      for (int i = 0; i < 4; ++i) {
        const auto& [s, q] = opts[size_t(i)][size_t((c >> (2 * i)) & 3)];
        t += s, k += q;
      }
      if (t <= budget + 1e-12) best = std::min(best, k);
    }
    AllocationOptions o;
    o.latency = &ts;
    AllocationReport r;
    if (!std::isfinite(best)) {
      EXPECT_THROW(plan_for_budget(m, Budget::latency(budget), &r, o), Error) << "trial " << trial;
      continue;
    }
    plan_for_budget(m, Budget::latency(budget), &r, o);
    EXPECT_NEAR(r.predicted, best, 1e-12) << "trial " << trial;
    EXPECT_LE(r.predicted_seconds, budget + 1e-12) << "trial " << trial;
  }
}

}  // namespace
}  // namespace genperf
