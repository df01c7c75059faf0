// Importance-weighted (imatrix) quantization: for every format, quantizing with per-column
// weights never gives a larger weighted squared error than the unweighted quantizer, row by row,
// and usually a smaller one; null importance is the unweighted quantizer exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "genperf/dtype.h"
#include "genperf/error.h"
#include "core/codec.h"

using namespace genperf;

namespace {

const DType kAll[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K,
                      DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::F8_E4M3_B32, DType::F8_E5M2_B32};

double weighted_error(const float* x, const float* y, const float* w, int64_t n) {
  double e = 0;
  for (int64_t i = 0; i < n; ++i) e += double(w[i]) * (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
  return e;
}

// Weights as an imatrix looks: mean squares of activations, log-normal over columns, with a
// few columns 100x the rest.
std::vector<float> make_importance(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> w(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) w[size_t(i)] = std::exp(1.5f * normal(rng)) * (i % 61 == 7 ? 100.f : 1.f);
  return w;
}

}  // namespace

TEST(QuantImportance, NeverWorseThanUnweighted) {
  const unsigned seed = 1234;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 0.02f);
  std::uniform_int_distribution<int> pick(0, 99);
  const int64_t nrows = 48, row_len = 512;
  std::vector<float> x(size_t(nrows * row_len));
  for (auto& v : x) v = pick(rng) == 0 ? 10 * normal(rng) : normal(rng);  // Gaussian with outliers
  const std::vector<float> imp = make_importance(row_len, rng);
  for (DType t : kAll) {
    const auto& tr = traits(t);
    std::vector<uint8_t> qu(bytes_for(t, nrows * row_len)), qw(qu.size()), qn(qu.size());
    quantize_rows(t, x.data(), qu.data(), nrows, row_len);  // unweighted
    quantize_rows(t, x.data(), qw.data(), nrows, row_len, imp.data());
    // Null importance is exactly the traits' unweighted conversion.
    tr.from_f32(x.data(), qn.data(), nrows * row_len);
    EXPECT_EQ(qu, qn) << tr.name;
    std::vector<float> yu(x.size()), yw(x.size());
    tr.to_f32(qu.data(), yu.data(), nrows * row_len);
    tr.to_f32(qw.data(), yw.data(), nrows * row_len);
    double sum_u = 0, sum_w = 0;
    int better = 0;
    for (int64_t r = 0; r < nrows; ++r) {
      const int64_t o = r * row_len;
      const double eu = weighted_error(x.data() + o, yu.data() + o, imp.data(), row_len);
      const double ew = weighted_error(x.data() + o, yw.data() + o, imp.data(), row_len);
      EXPECT_LE(ew, eu * (1 + 1e-12)) << tr.name << " row " << r;
      sum_u += eu;
      sum_w += ew;
      better += ew < eu;
    }
    std::printf("%-12s weighted error with importance / without: %.4f (%d of %lld rows better)\n", tr.name,
                sum_w / sum_u, better, static_cast<long long>(nrows));
    EXPECT_LE(sum_w, sum_u) << tr.name;
    // The search has room in every format: on average the weighted error drops.
    EXPECT_LT(sum_w, 0.995 * sum_u) << tr.name;
  }
}

TEST(QuantImportance, PerChannelFp8) {
  const unsigned seed = 99;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_int_distribution<int> pick(0, 99);
  const int64_t nrows = 32, row_len = 256;
  std::vector<float> x(size_t(nrows * row_len));
  for (auto& v : x) v = pick(rng) == 0 ? 20 * normal(rng) : normal(rng);
  const std::vector<float> imp = make_importance(row_len, rng);
  for (DType t : {DType::F8_E4M3, DType::F8_E5M2}) {
    std::vector<uint8_t> cu(x.size()), cw(x.size());
    std::vector<float> su(static_cast<size_t>(nrows)), sw(static_cast<size_t>(nrows)), yu(x.size()), yw(x.size());
    codec::quantize_f8_per_channel(t, x.data(), nrows, row_len, cu.data(), su.data());
    codec::quantize_f8_per_channel(t, x.data(), nrows, row_len, cw.data(), sw.data(), imp.data());
    codec::dequantize_f8_per_channel(t, cu.data(), su.data(), nrows, row_len, yu.data());
    codec::dequantize_f8_per_channel(t, cw.data(), sw.data(), nrows, row_len, yw.data());
    double sum_u = 0, sum_w = 0;
    for (int64_t r = 0; r < nrows; ++r) {
      const int64_t o = r * row_len;
      const double eu = weighted_error(x.data() + o, yu.data() + o, imp.data(), row_len);
      const double ew = weighted_error(x.data() + o, yw.data() + o, imp.data(), row_len);
      EXPECT_LE(ew, eu) << dtype_name(t) << " row " << r;
      sum_u += eu;
      sum_w += ew;
    }
    std::printf("%s per-channel weighted error with importance / without: %.4f\n", dtype_name(t), sum_w / sum_u);
    EXPECT_LT(sum_w, sum_u) << dtype_name(t);
  }
}

TEST(QuantImportance, BadArguments) {
  std::vector<float> x(64, 1.f), imp(64, 1.f);
  std::vector<uint8_t> q(bytes_for(DType::Q4_0, 64));
  imp[5] = -1.f;
  EXPECT_THROW(quantize_rows(DType::Q4_0, x.data(), q.data(), 1, 64, imp.data()), Error);
  imp[5] = NAN;
  EXPECT_THROW(quantize_rows(DType::Q4_0, x.data(), q.data(), 1, 64, imp.data()), Error);
  imp[5] = 0.f;  // zero is a valid weight
  EXPECT_NO_THROW(quantize_rows(DType::Q4_0, x.data(), q.data(), 1, 64, imp.data()));
  try {
    quantize_rows(DType::Q4_K, x.data(), q.data(), 1, 64);
    ADD_FAILURE() << "q4_k row of 64 accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[quantize] q4_k: row length 64 is not a multiple of the block size 256");
  }
  // Plain types accept (and ignore) importance.
  std::vector<uint16_t> h(64);
  quantize_rows(DType::F16, x.data(), h.data(), 2, 32, imp.data());
  EXPECT_EQ(f16_to_f32(h[63]), 1.f);
}
