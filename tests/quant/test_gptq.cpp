// GPTQ on synthetic matrices: with correlated inputs X = Z A, the output error
// ||X W^T - X Q^T|| of GPTQ is below the importance-weighted quantizer's, which is at most about
// the round-to-nearest one; with H = I GPTQ is exactly the weighted quantizer; a singular or zero
// Hessian is handled by dampening; the lazy-batch width does not change the result beyond
// rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "genperf/error.h"
#include "genperf/quantize.h"
#include "quant/quantize_internal.h"

using namespace genperf;

namespace {

struct Problem {
  int64_t N, K;
  std::vector<float> w;     // [N, K]
  ActivationStats stats;    // under the name "w"
};

// W ~ N(0, 0.02^2) with 1% outliers; X = Z A with Z [n, K] standard normal and A [K, K] a random
// mixing (identity plus a Gaussian with std mix/sqrt(K)) whose rows have log-normal scales, so that
// input channels are correlated and of unequal size. n < K makes the Gram matrix singular.
Problem make_problem(int64_t N, int64_t K, int64_t n, double mix, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> pick(0, 99);
  Problem p{N, K, std::vector<float>(size_t(N * K)), {}};
  for (auto& v : p.w) v = float((pick(rng) == 0 ? 8 : 1) * 0.02 * normal(rng));
  std::vector<double> a(size_t(K * K));
  for (int64_t i = 0; i < K; ++i) {
    const double s = std::exp(0.8 * normal(rng));
    for (int64_t j = 0; j < K; ++j) a[size_t(i * K + j)] = s * ((i == j ? 1.0 : 0.0) + mix * normal(rng) / std::sqrt(double(K)));
  }
  std::vector<double> x(static_cast<size_t>(n * K)), z(static_cast<size_t>(K));
  for (int64_t t = 0; t < n; ++t) {
    for (auto& v : z) v = normal(rng);
    for (int64_t j = 0; j < K; ++j) {
      double s = 0;
      for (int64_t i = 0; i < K; ++i) s += z[size_t(i)] * a[size_t(i * K + j)];
      x[size_t(t * K + j)] = s;
    }
  }
  std::vector<double> g(size_t(K * K), 0.0);
  for (int64_t t = 0; t < n; ++t) {
    const double* r = &x[size_t(t * K)];
    for (int64_t i = 0; i < K; ++i)
      for (int64_t j = 0; j < K; ++j) g[size_t(i * K + j)] += r[i] * r[j] / double(n);
  }
  std::vector<float> ms(static_cast<size_t>(K));
  for (int64_t i = 0; i < K; ++i) ms[size_t(i)] = float(g[size_t(i * K + i)]);
  p.stats.tokens = n;
  p.stats.mean_sq["w"] = ms;
  p.stats.gram["w"] = g;
  return p;
}

Tensor matrix(const Problem& p) {
  Tensor t = Tensor::zeros({p.N, p.K});
  std::copy(p.w.begin(), p.w.end(), t.data<float>());
  return t;
}

// sum over rows of (w - q) H (w - q)^T = ||X W^T - X Q^T||_F^2 / n, with H the true Gram matrix.
double output_error(const Problem& p, const Tensor& q) {
  const Tensor d = q.to(DType::F32);
  const std::vector<double>& h = p.stats.gram.at("w");
  double e = 0;
  std::vector<double> diff(size_t(p.K));
  for (int64_t r = 0; r < p.N; ++r) {
    for (int64_t k = 0; k < p.K; ++k) diff[size_t(k)] = double(p.w[size_t(r * p.K + k)]) - d.data<float>()[r * p.K + k];
    for (int64_t i = 0; i < p.K; ++i) {
      double s = 0;
      for (int64_t j = 0; j < p.K; ++j) s += h[size_t(i * p.K + j)] * diff[size_t(j)];
      e += diff[size_t(i)] * s;
    }
  }
  return e;
}

Tensor quantize(const Problem& p, DType f, QuantMethod m, int64_t block = 128, double damp = 0.01) {
  QuantizeOptions o;
  o.method = m;
  o.stats = &p.stats;
  o.gptq_block = block;
  o.gptq_damp = damp;
  return quantize_matrix(matrix(p), f, o, "w");
}

}  // namespace

TEST(Gptq, BeatsWeightedAndRtnOnCorrelatedInputs) {
  const unsigned seed = 20240601;
  std::printf("seed %u\n", seed);
  const Problem p = make_problem(64, 512, 2048, 3.0, seed);
  for (DType f : {DType::Q4_0, DType::Q4_K, DType::Q3_K}) {
    const double rtn = output_error(p, quantize(p, f, QuantMethod::Rtn));
    const double weighted = output_error(p, quantize(p, f, QuantMethod::Weighted));
    const double gptq = output_error(p, quantize(p, f, QuantMethod::Gptq));
    std::printf("%-5s output error  rtn %.4e  imatrix %.4e  gptq %.4e  (gptq/rtn %.3f)\n", dtype_name(f), rtn,
                weighted, gptq, gptq / rtn);
    EXPECT_LT(gptq, 0.9 * weighted) << dtype_name(f);
    EXPECT_LE(weighted, 1.05 * rtn) << dtype_name(f);
  }
}

// With H = I nothing propagates (U = I): each block is the weighted quantizer's, byte for byte.
// Rows of one block (256 wide, as the default model's hidden size, so one K-quant super-block
// per row): GPTQ must compensate inside the block, not only across blocks, to gain anything.
TEST(Gptq, CompensatesInsideOneBlock) {
  const unsigned seed = 20261203;
  std::printf("seed %u\n", seed);
  const Problem p = make_problem(48, 256, 1024, 3.0, seed);
  for (DType f : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_0, DType::Q4_0,
                  DType::Q4_1, DType::Q5_0, DType::Q5_1}) {
    const double weighted = output_error(p, quantize(p, f, QuantMethod::Weighted));
    const double gptq = output_error(p, quantize(p, f, QuantMethod::Gptq));
    std::printf("%-5s K = 256: imatrix %.4e  gptq %.4e  (gptq/imatrix %.3f)\n", dtype_name(f), weighted, gptq,
                gptq / weighted);
    EXPECT_LT(gptq, 0.8 * weighted) << dtype_name(f);
  }
}

TEST(Gptq, IdentityHessianIsTheWeightedQuantizer) {
  const unsigned seed = 7;
  std::printf("seed %u\n", seed);
  Problem p = make_problem(16, 512, 1, 0.0, seed);
  std::vector<double>& g = p.stats.gram["w"];
  std::fill(g.begin(), g.end(), 0.0);
  for (int64_t i = 0; i < p.K; ++i) g[size_t(i * p.K + i)] = 1.0;
  p.stats.mean_sq["w"].assign(size_t(p.K), 1.01f);  // diag(H) + 0.01 * mean(diag): GPTQ's block weights
  for (DType f : {DType::Q4_0, DType::Q5_1, DType::Q4_K, DType::Q6_K, DType::F8_E4M3_B32}) {
    const Tensor a = quantize(p, f, QuantMethod::Gptq), b = quantize(p, f, QuantMethod::Weighted);
    ASSERT_EQ(a.nbytes(), b.nbytes());
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << dtype_name(f);
  }
}

TEST(Gptq, SingularAndZeroHessians) {
  const unsigned seed = 99;
  std::printf("seed %u\n", seed);
  // 48 tokens for 256 columns: rank 48; column 5 dead.
  Problem p = make_problem(32, 256, 48, 3.0, seed);
  std::vector<double>& g = p.stats.gram["w"];
  for (int64_t i = 0; i < p.K; ++i) g[size_t(i * p.K + 5)] = g[size_t(5 * p.K + i)] = 0;
  p.stats.mean_sq["w"][5] = 0;
  for (double damp : {0.01, 0.0}) {
    const Tensor q = quantize(p, DType::Q4_0, QuantMethod::Gptq, 128, damp);
    const Tensor d = q.to(DType::F32);
    for (int64_t i = 0; i < d.numel(); ++i) ASSERT_TRUE(std::isfinite(d.data<float>()[i])) << i;
    const double rtn = output_error(p, quantize(p, DType::Q4_0, QuantMethod::Rtn));
    const double gptq = output_error(p, q);
    std::printf("rank-deficient H, damp %.2g: rtn %.4e  gptq %.4e\n", damp, rtn, gptq);
    EXPECT_LT(gptq, rtn);
  }
  // An all-zero Gram matrix (no signal at all): still a valid quantization.
  std::fill(g.begin(), g.end(), 0.0);
  const Tensor q = quantize(p, DType::Q4_K, QuantMethod::Gptq);
  const Tensor d = q.to(DType::F32);
  double err = 0;
  for (int64_t i = 0; i < d.numel(); ++i) err = std::max(err, std::fabs(double(d.data<float>()[i]) - p.w[size_t(i)]));
  EXPECT_LT(err, 0.2);
}

// The lazy-batch width only regroups the same updates: results agree up to rounding, for widths
// below, at and above the format's block, not multiples of it, and wider than a row.
TEST(Gptq, BatchWidthDoesNotMatter) {
  const unsigned seed = 5;
  std::printf("seed %u\n", seed);
  const Problem p = make_problem(32, 512, 1024, 3.0, seed);
  for (DType f : {DType::Q4_0, DType::Q4_K}) {
    const double ref = output_error(p, quantize(p, f, QuantMethod::Gptq, 128));
    for (int64_t block : {1, 32, 100, 256, 512, 4096}) {
      const double e = output_error(p, quantize(p, f, QuantMethod::Gptq, block));
      EXPECT_NEAR(e, ref, 0.02 * ref) << dtype_name(f) << " block " << block;
    }
  }
}

// The factor GPTQ walks with: U upper and U^T U H = I, checked in float64 on random
// positive definite matrices whose sizes do not divide the factorization's panels (and one that
// is large enough to run it on several threads), and on one that needs the dampening.
TEST(Gptq, InverseCholeskyFactor) {
  const unsigned seed = 31;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int64_t n : {1, 7, 8, 9, 37, 300}) {
    // H = A A^T / n + 0.1 I, A [n, n] Gaussian with row scales over two decades.
    std::vector<double> a(size_t(n * n)), h(size_t(n * n), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      const double s = std::pow(10.0, double(i % 3) - 1);
      for (int64_t j = 0; j < n; ++j) a[size_t(i * n + j)] = s * normal(rng);
    }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double v = 0;
        for (int64_t k = 0; k < n; ++k) v += a[size_t(i * n + k)] * a[size_t(j * n + k)];
        h[size_t(i * n + j)] = v / double(n) + (i == j ? 0.1 : 0.0);
      }
    const std::vector<float> u = quant::inverse_cholesky_upper(h, n, 0.0);
    double worst = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < i; ++j) ASSERT_EQ(u[size_t(i * n + j)], 0.f) << "n " << n << " below the diagonal";
    // (U^T U H)[i][j] against the identity.
    std::vector<double> uh(size_t(n * n), 0.0);  // U H
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = i; k < n; ++k) {
        const double f = u[size_t(i * n + k)];
        for (int64_t j = 0; j < n; ++j) uh[size_t(i * n + j)] += f * h[size_t(k * n + j)];
      }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double v = 0;
        for (int64_t k = 0; k <= std::min(i, n - 1); ++k) v += double(u[size_t(k * n + i)]) * uh[size_t(k * n + j)];
        worst = std::max(worst, std::fabs(v - (i == j ? 1.0 : 0.0)));
      }
    std::printf("n %3lld: max |U^T U H - I| = %.2e\n", (long long)n, worst);
    EXPECT_LT(worst, 1e-4) << "n " << n;
  }
  // Not positive definite (rank 1): no factor without dampening; with the retries it succeeds.
  const int64_t n = 20;
  std::vector<double> h(size_t(n * n), 1.0);
  const std::vector<float> u = quant::inverse_cholesky_upper(h, n, 0.0);
  for (float v : u) EXPECT_TRUE(std::isfinite(v));
}

TEST(Gptq, ClearErrors) {
  const Problem p = make_problem(8, 64, 16, 1.0, 1);
  QuantizeOptions o;
  o.method = QuantMethod::Gptq;
  auto expect_error = [&](const std::string& what, auto&& f) {
    try {
      f();
      ADD_FAILURE() << "no error; expected " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_error("needs activation statistics", [&] { quantize_matrix(matrix(p), DType::Q4_0, o, "w"); });
  ActivationStats no_gram = p.stats;
  no_gram.gram.clear();
  o.stats = &no_gram;
  expect_error("GPTQ needs the Gram matrix", [&] { quantize_matrix(matrix(p), DType::Q4_0, o, "w"); });
  o.stats = &p.stats;
  expect_error("no activation statistics for other", [&] {
    QuantizeOptions w = o;
    w.method = QuantMethod::Weighted;
    quantize_matrix(matrix(p), DType::Q4_0, w, "other");
  });
  expect_error("do not split into q4_k blocks of 256", [&] { quantize_matrix(matrix(p), DType::Q4_K, o, "w"); });
}
