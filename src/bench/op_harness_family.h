// The op harness's families of forward/backward cases (ops_train.h, ops_image.h): the shared
// machinery of op_harness_train.cpp and op_harness_image.cpp. A family gives its inputs (float64),
// its forward and backward in both float types, and its loss (a random projection of the output);
// add_family registers three cases from it: the float forward from a backend table against the
// float64 reference on the same inputs; the float backward, fed the float64 forward's saved values
// so that it is judged alone; and the float64 backward against central finite differences of the
// loss (run once: it checks the reference, not a backend).
#pragma once
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "bench/op_harness_cases.h"
#include "genperf/ops_image.h"
#include "genperf/ops_train.h"

namespace genperf::bench::harness {

using ops::Backend;
using Arrays = std::map<std::string, std::vector<double>>;
inline const double kNaN = std::numeric_limits<double>::quiet_NaN();

// Calls b's float kernel for F = float, the float64 reference for F = double.
#define GP_TRAIN(F, b, op, ...)                                            \
  [&] {                                                                    \
    if constexpr (std::is_same_v<F, float>)                                \
      return ops::backend_kernel((b).train.op, #op, (b))(__VA_ARGS__);     \
    else                                                                   \
      return ops::op<double>(__VA_ARGS__);                                 \
  }()

template <typename F>
std::vector<F> as(const std::vector<double>& v) {
  return {v.begin(), v.end()};
}
template <typename F>
std::vector<double> back(const std::vector<F>& v) {
  return {v.begin(), v.end()};
}
inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) s += a[i] * b[i];
  return s;
}
inline const std::vector<double>& at(const Arrays& a, const std::string& k) { return a.at(k); }

// Compares each float output with the float64 one (max |diff| / max |ref|).
inline Checks compare(const Arrays& got, const Arrays& want, double tol, double floor = 0) {
  Checks c;
  for (const auto& [k, v] : want) c.push_back({k, "max rel", rel_error(got.at(k), v, floor), tol});
  return c;
}

// Indices to probe: all of them for small tensors, else the ends and a seeded sample.
inline std::vector<size_t> probe_indices(size_t n, size_t max_probes, Rng& r) {
  std::vector<size_t> idx;
  if (n <= max_probes) {
    for (size_t i = 0; i < n; ++i) idx.push_back(i);
    return idx;
  }
  idx = {0, n - 1};
  while (idx.size() < max_probes) idx.push_back(static_cast<size_t>(r.next() % n));
  return idx;
}

// Central differences (loss(x + h e_i) - loss(x - h e_i)) / 2h at probed entries of x against
// grad: the largest |fd - grad| / (1e-8 + max(|fd|, 1e-3 max |grad|)); loss() reads x. Float64
// differences with h = 1e-5 are accurate to about 1e-9. The harness's check and the tests' (train_test_util.h).
inline Check fd_check(const std::string& what, std::vector<double>& x, const std::vector<double>& grad,
                      const std::function<double()>& loss, Rng& r, size_t max_probes = 32, double h = 1e-5,
                      double tol = 1e-5) {
  double worst = x.size() == grad.size() ? 0 : INFINITY, gscale = 0;
  for (double g : grad) gscale = std::max(gscale, std::fabs(g));
  for (size_t i : probe_indices(std::min(x.size(), grad.size()), max_probes, r)) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double lp = loss();
    x[i] = x0 - h;
    const double lm = loss();
    x[i] = x0;
    const double fd = (lp - lm) / (2 * h);
    const double err = std::fabs(fd - grad[i]) / (1e-8 + std::max(std::fabs(fd), 1e-3 * gscale));
    worst = std::max(worst, std::isfinite(err) ? err : INFINITY);
  }
  return {what, "fd rel", worst, tol};
}

// Registers the three cases of a family. Fam: fwd_op, bwd_op, has_fwd(b), has_bwd(b),
// make(rng) -> inputs, fwd<F>(b, in) -> outputs, bwd<F>(b, in, saved) -> gradients (saved: the
// float64 forward's outputs), loss(in), fd_inputs (names x whose gradient is "d" + x), tolerances;
// optionally fwd_scale(in), the least scale the forward's error is relative to (for outputs that
// can cancel to near zero, the inputs' magnitude).
template <typename Fam>
void add_family(std::vector<Case>& out, const std::string& name, const Fam& f) {
  out.push_back({f.fwd_op, name, [f](const Backend& b) { return f.has_fwd(b); },
                 [f](const Backend& b, uint64_t seed) {
                   Rng r(seed);
                   const Arrays in = f.make(r);
                   double floor = 0;
                   if constexpr (requires { f.fwd_scale(in); }) floor = f.fwd_scale(in);
                   return compare(f.template fwd<float>(b, in), f.template fwd<double>(b, in), f.tol_fwd, floor);
                 }});
  out.push_back({f.bwd_op, name, [f](const Backend& b) { return f.has_bwd(b); },
                 [f](const Backend& b, uint64_t seed) {
                   Rng r(seed);
                   const Arrays in = f.make(r);
                   const Arrays saved = f.template fwd<double>(b, in);
                   return compare(f.template bwd<float>(b, in, saved), f.template bwd<double>(b, in, saved),
                                  f.tol_bwd);
                 }});
  if (!f.fd) return;
  Case fd{f.bwd_op, name + " (float64 vs finite differences)", [](const Backend&) { return true; },
          [f](const Backend& b, uint64_t seed) {
            Rng r(seed);
            Arrays in = f.make(r);
            const Arrays grads = f.template bwd<double>(b, in, f.template fwd<double>(b, in));
            Checks c;
            for (const std::string& x : f.fd_inputs)
              c.push_back(fd_check("d" + x, in.at(x), grads.at("d" + x), [&] { return f.loss(b, in); }, r));
            return c;
          }};
  fd.reference_only = true;
  out.push_back(std::move(fd));
}

// The loss of the families whose output is `out`: dot(out, G).
template <typename Self>
struct Projected {
  double loss(const Backend& b, const Arrays& in) const {
    return dot(static_cast<const Self*>(this)->template fwd<double>(b, in).at("out"), in.at("G"));
  }
};

}  // namespace genperf::bench::harness
