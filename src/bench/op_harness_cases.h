// The op harness's registry (genperf/op_harness.h): each case names its op and shape, says
// whether a backend table has the kernels it needs, and runs them from that table on CPU memory
// (after the same argument checks ops::X makes), returning one or more checks against its oracle.
// Shared helpers: seeded data, strided views with guard values, error measures.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "genperf/rng.h"
#include "genperf/tensor.h"
#include "ops/backend.h"

namespace genperf::bench::harness {

// One comparison: error (in `metric`) and the tolerance it must not pass.
struct Check {
  std::string what;
  std::string metric;
  double error = 0, tolerance = 0;
};
using Checks = std::vector<Check>;

struct Case {
  std::string op, name;
  std::function<bool(const ops::Backend&)> has_kernel;
  std::function<Checks(const ops::Backend&, uint64_t seed)> run;
  // A check of the float64 reference itself (finite differences): run once, not per backend
  // and ISA level.
  bool reference_only = false;
};

void add_infer_cases(std::vector<Case>& out);
void add_train_cases(std::vector<Case>& out);
void add_image_cases(std::vector<Case>& out);
// Every case, in registry order (built once).
const std::vector<Case>& registry();

// --- helpers ---
// Normal values times scale, as f32 then converted (any type, any strides).
void fill_normal(Tensor& t, Rng& rng, double scale = 1.0);
Tensor random_tensor(const std::vector<int64_t>& shape, DType dt, Rng& rng, double scale = 1.0);
std::vector<double> randn(Rng& r, size_t n, double scale = 1.0);
std::vector<float> to_float(const std::vector<double>& v);

// An f32 [rows, cols] view into a larger buffer: a guard row above and below and `pad` guard
// columns each side (row stride > row length), the guards holding a sentinel.
class Guarded {
 public:
  Guarded(int64_t rows, int64_t cols, int64_t pad = 3);
  Tensor& view() { return view_; }
  int64_t guards_overwritten() const;
  Check guard_check(const std::string& what) const {
    return {what + " guards", "overwritten", double(guards_overwritten()), 0.0};
  }

 private:
  Tensor buf_, view_;
  int64_t rows_, cols_, pad_;
};

// Values of a 1-D or 2-D f32 tensor as doubles, row-major, ignoring strides.
std::vector<double> values(const Tensor& t);
// sum (got - ref)^2 / sum ref^2; a NaN or Inf in got gives infinity.
double nmse(const std::vector<double>& got, const std::vector<double>& ref);
// max |got - ref| / max(max |ref|, floor); NaN in got gives infinity (train_test_util's rel_error).
template <typename A, typename B>
double rel_error(const A* got, const B* ref, size_t n, double floor = 0);
template <typename A, typename B>
double rel_error(const std::vector<A>& got, const std::vector<B>& ref, double floor = 0) {
  return got.size() != ref.size() ? INFINITY : rel_error(got.data(), ref.data(), got.size(), floor);
}
// max over i of |got - ref| / (atol + rtol |ref|), against tolerance 1 (STYLE.md's elementwise rule).
double elementwise(const std::vector<double>& got, const std::vector<double>& ref, double atol,
                   double rtol);

std::string cat_shape(const char* key, int64_t v);  // " key=v"

}  // namespace genperf::bench::harness
