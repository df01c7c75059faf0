// Budgeted allocation of formats to tensors: a multiple-choice knapsack (one option per tensor,
// minimize the summed predicted degradation under a byte budget, or the bytes under a
// degradation budget).
//
// Solved exactly by dynamic programming over bytes. That is cheap here because every option's
// size is (rows * row_len / block) * block_bytes, so the sizes share a large common divisor
// (512 bytes on the default model: ~7,000 cells for a 4-bpw budget; the table is tensors x cells).
// When the cells would exceed a limit the sizes are rounded up to a coarser unit, which keeps
// every answer within budget and optimal for the rounded sizes. The Lagrangian (LP) bound is
// computed beside it as a certificate of how close to optimal any answer is.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

#include "genperf/error.h"
#include "genperf/sensitivity.h"

namespace genperf {

const SensitivityTensor* SensitivityMap::find_tensor(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

int64_t SensitivityMap::quantizable_elements() const {
  int64_t n = 0;
  for (const auto& t : tensors) n += t.elements;
  return n;
}

int64_t SensitivityMap::quantizable_source_bytes() const {
  int64_t n = 0;
  for (const auto& t : tensors) n += t.source_bytes;
  return n;
}

std::string AllocationReport::summary() const {
  std::string counts;
  for (const auto& [f, n] : format_counts) counts += cat(counts.empty() ? "" : ", ", n, " ", f);
  char buf0[256], buf[128];
  std::snprintf(buf0, sizeof buf0, "%.4f bpw, %.3f MB total, predicted %s %.6g (dloss %+.6g; LP lower bound %.6g)",
                bpw, double(total_bytes) / 1e6, metric == "kl" ? "KL" : metric.c_str(), predicted, predicted_dloss,
                lagrangian_bound);
  std::string latency;
  if (predicted_seconds > 0) {
    std::snprintf(buf, sizeof buf, "; predicted decode step %.4g ms", predicted_seconds * 1e3);
    latency = buf;
    if (budget_seconds > 0) std::snprintf(buf, sizeof buf, " (budget %.4g ms)", budget_seconds * 1e3), latency += buf;
  }
  return cat(buf0, latency, "; ", counts, " [", method, "]");
}

double TensorSeconds::of(const std::string& tensor, DType format) const {
  const auto t = seconds.find(tensor);
  if (t != seconds.end())
    if (const auto f = t->second.find(format); f != t->second.end()) return f->second;
  fail("[allocate] no decode time for ", tensor, " in ", dtype_name(format));
}

namespace {

// The options of allocation_options, pruned to their Pareto front by `by_seconds` (decode time) or
// by bytes.
std::vector<std::vector<AllocationOption>> options_by(const SensitivityMap& m, const AllocationOptions& o,
                                                      bool by_seconds) {
  GP_CHECK(!m.tensors.empty(), "[allocate] the sensitivity map has no tensors");
  GP_CHECK(o.use_proxy || m.measured, "[allocate] the sensitivity map of ", m.model,
           " has no measured KL (proxy only): allocate with the proxy");
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < m.tensors.size(); ++i) index[m.tensors[i].name] = i;
  std::vector<std::vector<AllocationOption>> all(m.tensors.size());
  for (const auto& e : m.entries) {
    auto it = index.find(e.tensor);
    GP_CHECK(it != index.end(), "[allocate] entry for unknown tensor ", e.tensor);
    const double cost = o.use_proxy ? e.proxy : e.kl;
    GP_CHECK(std::isfinite(cost) && cost >= 0, "[allocate] ", e.tensor, " in ", dtype_name(e.format),
             ": predicted degradation ", cost, " is not a finite non-negative number");
    const double seconds = o.latency ? o.latency->of(e.tensor, e.format) : 0.0;
    all[it->second].push_back({e.format, e.bytes, cost, std::isfinite(e.dloss) ? e.dloss : 0.0, false, seconds});
  }
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const auto& t = m.tensors[i];
    if (o.allow_keep)
      all[i].push_back({t.source_dtype, t.source_bytes, 0.0, 0.0, true, o.latency ? o.latency->of(t.name, t.source_dtype) : 0.0});
    GP_CHECK(!all[i].empty(), "[allocate] tensor ", t.name, " has no candidate format (none of the map's formats fits its rows)");
    // Pareto front: by bytes (or seconds), then cost (keep first among equals: it is exact); an
    // option survives only when it is strictly better than every smaller (or faster) one.
    auto& v = all[i];
    std::sort(v.begin(), v.end(), [&](const AllocationOption& a, const AllocationOption& b) {
      if (by_seconds && a.seconds != b.seconds) return a.seconds < b.seconds;
      if (a.bytes != b.bytes) return a.bytes < b.bytes;
      if (a.cost != b.cost) return a.cost < b.cost;
      return a.keep > b.keep;
    });
    std::vector<AllocationOption> front;
    for (const auto& x : v)
      if (front.empty() || x.cost < front.back().cost) front.push_back(x);
    v = std::move(front);
  }
  return all;
}

}  // namespace

std::vector<std::vector<AllocationOption>> allocation_options(const SensitivityMap& m, const AllocationOptions& o) {
  return options_by(m, o, false);
}

namespace {

struct Discretized {
  std::vector<int64_t> base;                 // smallest bytes per group
  std::vector<std::vector<int64_t>> w;       // option weights in units, above the base
  int64_t unit = 1;
  bool rounded = false;
};

// Weights of the options above each group's smallest, in units of their gcd, or of a coarser unit
// (sizes rounded up) so that `span` bytes fit in at most max_cells cells.
Discretized discretize(const std::vector<std::vector<AllocationOption>>& groups, int64_t span, int64_t max_cells) {
  Discretized d;
  int64_t g = 0;
  for (const auto& opts : groups) {
    GP_CHECK(!opts.empty(), "[allocate] a tensor has no options");
    int64_t lo = std::numeric_limits<int64_t>::max();
    for (const auto& o : opts) {
      GP_CHECK(o.bytes >= 0, "[allocate] negative option size ", o.bytes);
      lo = std::min(lo, o.bytes);
    }
    d.base.push_back(lo);
    for (const auto& o : opts) g = std::gcd(g, o.bytes - lo);
  }
  d.unit = std::max<int64_t>(g, 1);
  // The choice table holds one byte per group and cell; keep it under ~256 MB.
  const int64_t cell_cap = std::max<int64_t>(1, std::min<int64_t>(max_cells, (int64_t(1) << 28) / int64_t(groups.size())));
  if (span / d.unit > cell_cap) {
    d.unit = (span + cell_cap - 1) / cell_cap;
    d.rounded = true;
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    std::vector<int64_t> w;
    for (const auto& o : groups[i]) w.push_back((o.bytes - d.base[i] + d.unit - 1) / d.unit);
    d.w.push_back(std::move(w));
  }
  return d;
}

// dp over groups: best[c] = the least cost with weight <= c (cells 0..C); returns the choices
// for capacity C_pick chosen by `pick` from the final table.
template <typename Pick>
std::vector<int> run_dp(const std::vector<std::vector<AllocationOption>>& groups, const Discretized& d, int64_t C,
                        Pick pick) {
  const size_t G = groups.size();
  for (const auto& opts : groups)
    GP_CHECK(opts.size() <= 255, "[allocate] at most 255 options per tensor, got ", opts.size());
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> best(size_t(C) + 1, 0.0), next(size_t(C) + 1);
  std::vector<uint8_t> choice(G * size_t(C + 1), 255);
  for (size_t g = 0; g < G; ++g) {
    uint8_t* ch = &choice[g * size_t(C + 1)];
    for (int64_t c = 0; c <= C; ++c) {
      double b = inf;
      uint8_t bo = 255;
      for (size_t o = 0; o < groups[g].size(); ++o) {
        const int64_t w = d.w[g][o];
        if (w > c) continue;
        const double v = best[size_t(c - w)] + groups[g][o].cost;
        if (v < b) b = v, bo = uint8_t(o);
      }
      next[size_t(c)] = b;
      ch[c] = bo;
    }
    best.swap(next);
  }
  int64_t c = pick(best);
  std::vector<int> out(G);
  for (size_t g = G; g-- > 0;) {
    const uint8_t o = choice[g * size_t(C + 1) + size_t(c)];
    GP_CHECK(o != 255, "[allocate] internal error: no choice at cell ", c);
    out[g] = o;
    c -= d.w[g][o];
  }
  return out;
}

int64_t sum_bytes(const std::vector<std::vector<AllocationOption>>& groups, const std::vector<int>& pick) {
  int64_t n = 0;
  for (size_t g = 0; g < groups.size(); ++g) n += groups[g][size_t(pick[g])].bytes;
  return n;
}

}  // namespace

std::vector<int> knapsack_min_cost(const std::vector<std::vector<AllocationOption>>& groups, int64_t budget,
                                   int64_t max_cells, bool* rounded) {
  GP_CHECK(!groups.empty(), "[allocate] no tensors to allocate");
  int64_t lo = 0, hi = 0;
  for (const auto& opts : groups) {
    GP_CHECK(!opts.empty(), "[allocate] a tensor has no options");
    int64_t a = std::numeric_limits<int64_t>::max(), b = 0;
    for (const auto& o : opts) a = std::min(a, o.bytes), b = std::max(b, o.bytes);
    lo += a;
    hi += b;
  }
  GP_CHECK(budget >= lo, "[allocate] a budget of ", budget, " bytes cannot be met: the smallest achievable is ", lo,
           " bytes (every tensor at its smallest option)");
  const int64_t span = std::min(budget, hi) - lo;
  const Discretized d = discretize(groups, span, max_cells);
  if (rounded) *rounded = d.rounded;
  const int64_t C = span / d.unit;
  std::vector<int> pick = run_dp(groups, d, C, [&](const std::vector<double>&) { return C; });
  GP_CHECK(sum_bytes(groups, pick) <= budget, "[allocate] internal error: allocation exceeds the budget");
  return pick;
}

std::vector<int> knapsack_min_bytes(const std::vector<std::vector<AllocationOption>>& groups, double max_cost,
                                    int64_t max_cells, bool* rounded) {
  GP_CHECK(!groups.empty(), "[allocate] no tensors to allocate");
  GP_CHECK(std::isfinite(max_cost), "[allocate] the KL budget must be finite, got ", max_cost);
  double lowest = 0;
  int64_t lo = 0, hi = 0;
  for (const auto& opts : groups) {
    GP_CHECK(!opts.empty(), "[allocate] a tensor has no options");
    double c = std::numeric_limits<double>::infinity();
    int64_t a = std::numeric_limits<int64_t>::max(), b = 0;
    for (const auto& o : opts) c = std::min(c, o.cost), a = std::min(a, o.bytes), b = std::max(b, o.bytes);
    lowest += c;
    lo += a;
    hi += b;
  }
  // Sums in another order may differ in the last bits; a relative slack keeps a budget equal to
  // an achievable total feasible.
  const double slack = 1e-12 * std::max(std::abs(max_cost), 1e-300);
  GP_CHECK(lowest <= max_cost + slack, "[allocate] a KL budget of ", max_cost,
           " cannot be met: the lowest predicted KL is ", lowest, " (every tensor at its most accurate option)");
  const Discretized d = discretize(groups, hi - lo, max_cells);
  if (rounded) *rounded = d.rounded;
  int64_t C = 0;
  for (const auto& w : d.w) C += *std::max_element(w.begin(), w.end());
  return run_dp(groups, d, C, [&](const std::vector<double>& best) {
    for (int64_t c = 0; c <= C; ++c)
      if (best[size_t(c)] <= max_cost + slack) return c;
    fail("[allocate] internal error: no capacity meets the KL budget");
  });
}

double lagrangian_lower_bound(const std::vector<std::vector<AllocationOption>>& groups, int64_t budget) {
  // The Lagrangian dual of the multiple-choice knapsack equals its LP relaxation: start every
  // group at its smallest option, walk each group's lower convex hull of (bytes, cost), and take
  // hull segments in order of cost saved per byte, the last one fractionally.
  struct Segment {
    double rate;  // cost saved per byte (positive)
    int64_t bytes;
    double saving;
  };
  std::vector<Segment> segs;
  double cost = 0;
  int64_t used = 0;
  for (const auto& opts : groups) {
    std::vector<AllocationOption> v = opts;
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
      return a.bytes != b.bytes ? a.bytes < b.bytes : a.cost < b.cost;
    });
    std::vector<AllocationOption> hull;  // bytes increasing, cost decreasing, convex
    for (const auto& x : v) {
      if (!hull.empty() && x.cost >= hull.back().cost) continue;
      while (hull.size() >= 2) {
        const auto& a = hull[hull.size() - 2];
        const auto& b = hull.back();
        // b lies on or above the segment a-x: drop it.
        const double lhs = (b.cost - a.cost) * double(x.bytes - a.bytes);
        const double rhs = (x.cost - a.cost) * double(b.bytes - a.bytes);
        if (lhs >= rhs) hull.pop_back();
        else break;
      }
      hull.push_back(x);
    }
    cost += hull.front().cost;
    used += hull.front().bytes;
    for (size_t i = 1; i < hull.size(); ++i) {
      const int64_t db = hull[i].bytes - hull[i - 1].bytes;
      const double dc = hull[i - 1].cost - hull[i].cost;
      segs.push_back({db > 0 ? dc / double(db) : std::numeric_limits<double>::infinity(), db, dc});
    }
  }
  if (used > budget) return std::numeric_limits<double>::infinity();  // infeasible
  std::sort(segs.begin(), segs.end(), [](const Segment& a, const Segment& b) { return a.rate > b.rate; });
  int64_t left = budget - used;
  for (const auto& s : segs) {
    if (s.bytes <= left) {
      cost -= s.saving;
      left -= s.bytes;
    } else {
      cost -= s.saving * double(left) / double(s.bytes);
      break;
    }
  }
  return cost;
}

QuantPlan plan_for_budget(const SensitivityMap& m, const Budget& b, AllocationReport* report,
                          const AllocationOptions& o) {
  const bool by_seconds = b.kind == Budget::Kind::Latency;
  GP_CHECK(!by_seconds || o.latency, "[allocate] a latency budget needs the decode time of each option");
  const auto groups = options_by(m, o, by_seconds);
  const int64_t elements = m.quantizable_elements();
  int64_t lo = 0;
  for (const auto& g : groups) lo += g.front().bytes;  // Pareto fronts are sorted by bytes (or seconds)
  auto bpw_of = [&](int64_t bytes) { return double(bytes) * 8.0 / double(elements); };
  char smallest[200];
  std::snprintf(smallest, sizeof smallest, "%.4f bpw, %lld bytes in all", bpw_of(lo), (long long)(lo + m.other_bytes()));

  std::vector<int> pick;
  bool rounded = false;
  int64_t budget_bytes = 0, budget_ns = 0;
  std::vector<std::vector<AllocationOption>> timed;  // Latency: the options with seconds as weights
  switch (b.kind) {
    case Budget::Kind::Bpw: {
      GP_CHECK(std::isfinite(b.value) && b.value > 0, "[allocate] --target-bpw must be positive, got ", b.value);
      budget_bytes = int64_t(std::floor(b.value * double(elements) / 8.0));
      GP_CHECK(budget_bytes >= lo, "[allocate] --target-bpw ", b.value, " cannot be met: the smallest achievable is ",
               smallest, " (every tensor at its smallest candidate format)");
      pick = knapsack_min_cost(groups, budget_bytes, 1 << 22, &rounded);
      break;
    }
    case Budget::Kind::Bytes: {
      GP_CHECK(std::isfinite(b.value) && b.value > 0, "[allocate] --target-size must be positive, got ", b.value);
      budget_bytes = int64_t(std::floor(b.value)) - m.other_bytes();
      GP_CHECK(budget_bytes >= lo, "[allocate] --target-size ", int64_t(b.value),
               " bytes cannot be met: the smallest achievable is ", smallest,
               " (every tensor at its smallest candidate format; ", m.other_bytes(), " bytes are unquantizable weights)");
      pick = knapsack_min_cost(groups, budget_bytes, 1 << 22, &rounded);
      break;
    }
    case Budget::Kind::MaxKl: {
      GP_CHECK(b.value >= 0, "[allocate] --max-kl must be non-negative, got ", b.value);
      pick = knapsack_min_bytes(groups, b.value, 1 << 22, &rounded);
      break;
    }
    case Budget::Kind::Latency: {
      // The same knapsack with each option's decode time, in nanoseconds, as its weight.
      GP_CHECK(std::isfinite(b.value) && b.value > 0, "[allocate] --target-latency must be positive, got ", b.value);
      timed = groups;
      int64_t fastest = 0;
      for (auto& g : timed)
        for (auto& x : g) x.bytes = std::llround(x.seconds * 1e9);
      for (const auto& g : timed) fastest += g.front().bytes;
      // (a budget that equals an achievable sum stays feasible despite the subtraction's rounding)
      budget_ns = int64_t(std::floor((b.value - o.latency->fixed) * 1e9 + 1e-6));
      GP_CHECK(budget_ns >= fastest, "[allocate] --target-latency ", b.value * 1e3, " ms cannot be met: the fastest "
               "achievable step is ", (o.latency->fixed + double(fastest) * 1e-9) * 1e3, " ms (", o.latency->fixed * 1e3,
               " ms of it outside the quantizable tensors; every tensor at its fastest candidate format)");
      pick = knapsack_min_cost(timed, budget_ns, 1 << 22, &rounded);
      break;
    }
  }

  QuantPlan plan;
  AllocationReport r;
  r.method = rounded ? "dp-rounded" : "dp";
  r.metric = o.use_proxy ? "proxy" : m.metric;
  for (size_t i = 0; i < groups.size(); ++i) {
    const AllocationOption& x = groups[i][size_t(pick[i])];
    r.predicted += x.cost;
    r.predicted_dloss += x.dloss;
    r.quantizable_bytes += x.bytes;
    r.predicted_seconds += x.seconds;
    r.format_counts[x.keep ? cat("keep(", dtype_name(x.format), ")") : std::string(dtype_name(x.format))]++;
    if (!x.keep) plan[m.tensors[i].name] = x.format;
  }
  r.total_bytes = r.quantizable_bytes + m.other_bytes();
  r.bpw = bpw_of(r.quantizable_bytes);
  r.budget_bytes = b.kind == Budget::Kind::MaxKl || by_seconds ? r.quantizable_bytes : budget_bytes;
  r.lagrangian_bound = by_seconds ? lagrangian_lower_bound(timed, budget_ns) : lagrangian_lower_bound(groups, r.budget_bytes);
  if (o.latency) r.predicted_seconds += o.latency->fixed;
  if (by_seconds) r.budget_seconds = b.value;
  if (report) *report = r;
  return plan;
}

}  // namespace genperf
