// Helpers of the op tests: the op harness's seeded random tensors, strided views with guard
// values and error measures; the ISA levels this CPU supports; the tolerance checks of STYLE.md
// (elementwise atol + rtol*|ref|; normalized MSE for linear and attention).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "genperf/rng.h"
#include "genperf/runtime.h"
#include "bench/op_harness_cases.h"
#include "genperf/tensor.h"

namespace genperf::testing {

// Seeded data, guarded strided views and the error measures are the op harness's own
// (src/bench/op_harness_cases.h), so that the tests and `genperf test-ops` measure alike.
using bench::harness::fill_normal;
using bench::harness::nmse;
using bench::harness::random_tensor;
using bench::harness::values;

// The harness's guarded view ([rows, cols] f32 inside guard rows and columns), with a gtest check.
class Guarded : public bench::harness::Guarded {
 public:
  using bench::harness::Guarded::Guarded;
  // A 1-D view of the single row (rows == 1), for the ops' 1-D form.
  Tensor row_view() { return view().view({view().size(1)}); }
  void check_guards(const char* what) const {
    const int64_t bad = guards_overwritten();
    EXPECT_EQ(bad, 0) << what << ": " << bad << " guard values overwritten";
  }
};

inline double rms(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return v.empty() ? 0 : std::sqrt(s / double(v.size()));
}

// Every element within atol + rtol * |ref|; reports the first few failures.
inline void expect_close(const std::vector<double>& got, const std::vector<double>& ref,
                         double atol, double rtol, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  int reported = 0;
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = atol + rtol * std::fabs(ref[i]);
    if (!(std::fabs(got[i] - ref[i]) <= tol)) {
      ++bad;
      if (reported++ < 5)
        ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " expected " << ref[i]
                      << " (tolerance " << tol << ")";
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

// The ISA levels this CPU runs, lowest first, up to the level in effect (so GENPERF_ISA=avx2
// limits the tests to generic and AVX2); restores the level on destruction.
class IsaLevels {
 public:
  IsaLevels() : saved_(isa()) {
    for (Isa i : {Isa::Generic, Isa::Avx2, Isa::Avx512}) {
      if (int(i) > int(saved_)) break;
      set_isa(i);
      if (isa() == i) levels_.push_back(i);
    }
    set_isa(saved_);
  }
  ~IsaLevels() { set_isa(saved_); }
  const std::vector<Isa>& levels() const { return levels_; }

 private:
  Isa saved_;
  std::vector<Isa> levels_;
};

inline uint64_t announce_seed(uint64_t seed, const char* test) {
  std::printf("[ seed     ] %s: %llu\n", test, static_cast<unsigned long long>(seed));
  return seed;
}

}  // namespace genperf::testing
