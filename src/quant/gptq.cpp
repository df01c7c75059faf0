// GPTQ (Frantar et al. 2022, "GPTQ: Accurate Post-Training Quantization for Generative
// Pre-trained Transformers") for genperf's block formats.
//
// Objective, per row w of W [N, K]: minimize (w - q) H (w - q)^T with H = X^T X / n, which sums
// to ||X W^T - X Q^T||^2 / n. GPTQ fixes columns left to right; after column j it moves the
// columns right of it to compensate: w_{>j} -= (w_j - q_j) / U_jj * U_{j,>j}, U the upper
// Cholesky factor of H^-1.
//
// Formats share scales over B consecutive elements of a row (32, or 256 for the K-quants), so a
// column cannot be quantized alone. Each block of B columns first gets its scales from its
// current (already compensated) values, with the format's own quantizer weighted by diag(H) (the
// imatrix search). Then its columns are walked one by one with those scales fixed: column j takes
// the code nearest to w_j (as updated by the columns before it) on the block's grid of values
// (core/codec.h, CodeGrid), err_j = (w_j - q_j) / U_jj moves every column right of j, those of the
// same block included, and the chosen codes are written into the block. On the default model's
// 256-wide rows a K-quant block is the whole row: without compensation inside the block, GPTQ
// would be the weighted quantizer. (A format without a grid keeps the quantizer's codes and
// compensates only the blocks after it.)
//
// Lazy batches (the paper's section 3.2): the walk updates only the columns of the current batch
// of `block` columns (a multiple of B); the rest get one rank-`block` update per batch. Rows are
// independent, so chunks of rows run in parallel, each through every batch.
//
// Dampening: H + damp * mean(diag H) * I keeps H positive definite when inputs are dead (zero
// columns) or collinear (fewer calibration tokens than columns); if the Cholesky factorization
// still fails, damp grows tenfold (from 1e-4 when it was 0), up to three times.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "genperf/error.h"
#include "core/codec.h"
#include "quant/quantize_internal.h"

namespace genperf::quant {
namespace {

// The factorization. U is computed without forming H^-1: with J the reversal of the indices
// and J H J = R^T R (R upper, Cholesky), H^-1 = J R^-1 R^-T J, so U = J R^-T J is upper and
// U^T U = H^-1. One Cholesky and one triangular inverse, K^3 / 2 multiply-adds in all. Both run
// on row-major upper triangles as sums of rows (axpys along contiguous rows: they vectorize,
// where dot products of doubles would not without reassociation), kPanel rows at a time so
// that each row of the trailing matrix is read and written once per panel, and with the rows
// (Cholesky) or the columns (inverse) split over the threads. The hot loops are compiled for
// AVX-512 and AVX2 as well and chosen at load time (target_clones), as the library itself is
// built for the baseline ISA.
constexpr int kPanel = 8;

// y[j] += sum_k f[k] * x[k][j] for j in [j0, j1), m <= kPanel rows x, in one pass over y: the
// factorization's row sums in double, the column walk's updates in f32 (with -err as f).
template <typename T>
[[gnu::always_inline]] inline void add_rows_impl(T* __restrict y, const T* const* x, const T* f, int m, int64_t j0,
                                                 int64_t j1) {
  if (m == kPanel) {
    const T *__restrict x0 = x[0], *__restrict x1 = x[1], *__restrict x2 = x[2], *__restrict x3 = x[3],
            *__restrict x4 = x[4], *__restrict x5 = x[5], *__restrict x6 = x[6], *__restrict x7 = x[7];
    const T f0 = f[0], f1 = f[1], f2 = f[2], f3 = f[3], f4 = f[4], f5 = f[5], f6 = f[6], f7 = f[7];
    for (int64_t j = j0; j < j1; ++j)
      y[j] += ((f0 * x0[j] + f1 * x1[j]) + (f2 * x2[j] + f3 * x3[j])) +
              ((f4 * x4[j] + f5 * x5[j]) + (f6 * x6[j] + f7 * x7[j]));
    return;
  }
  for (int k = 0; k < m; ++k) {
    const T* __restrict xk = x[k];
    const T fk = f[k];
    for (int64_t j = j0; j < j1; ++j) y[j] += fk * xk[j];
  }
}
__attribute__((target_clones("avx512f", "avx2", "default")))
void add_rows(double* y, const double* const* x, const double* f, int m, int64_t j0, int64_t j1) {
  add_rows_impl(y, x, f, m, j0, j1);
}
__attribute__((target_clones("avx512f", "avx2", "default")))
void add_rows(float* y, const float* const* x, const float* f, int m, int64_t j0, int64_t j1) {
  add_rows_impl(y, x, f, m, j0, j1);
}

// In place: the upper factor R of a [n, n] (row-major; upper triangle read, lower left as is),
// a = R^T R. False when a is not positive definite.
bool cholesky_upper(std::vector<double>& a, int64_t n) {
  double* const A = a.data();
  for (int64_t k0 = 0; k0 < n; k0 += kPanel) {
    const int64_t k1 = std::min(n, k0 + kPanel);
    // The panel's rows have every earlier panel's update: factor them.
    for (int64_t k = k0; k < k1; ++k) {
      double* rk = A + k * n;
      if (!(rk[k] > 0) || !std::isfinite(rk[k])) return false;
      const double d = std::sqrt(rk[k]), inv = 1 / d;
      rk[k] = d;
      for (int64_t j = k + 1; j < n; ++j) rk[j] *= inv;
      for (int64_t i = k + 1; i < k1; ++i) {
        const double f = -rk[i];
        const double* x[1] = {rk};
        add_rows(A + i * n, x, &f, 1, i, n);
      }
    }
    // Every row below the panel gets the panel's rows at once.
    const double* panel[kPanel];
    const int m = int(k1 - k0);
    for (int k = 0; k < m; ++k) panel[k] = A + (k0 + k) * n;
#pragma omp parallel for schedule(dynamic, 8) if ((n - k1) * (n - k1) > (1 << 16))
    for (int64_t i = k1; i < n; ++i) {
      double f[kPanel];
      for (int k = 0; k < m; ++k) f[k] = -panel[k][i];
      add_rows(A + i * n, panel, f, m, i, n);
    }
  }
  return true;
}

// V = R^-1 (upper, row-major) of the upper R: row i is -(sum_{k > i} R[i][k] V[k]) / R[i][i],
// built from the bottom, kPanel rows at a time (their sums over the rows below the panel in one
// pass, the columns split over the threads; then within the panel).
std::vector<double> inverse_upper(const std::vector<double>& r, int64_t n) {
  std::vector<double> v(size_t(n * n), 0.0);
  double* const V = v.data();
  const double* const R = r.data();
  for (int64_t i1 = n; i1 > 0; i1 -= kPanel) {
    const int64_t i0 = std::max<int64_t>(0, i1 - kPanel);
    const int m = int(i1 - i0);
    // acc_i = sum over k >= i1 of R[i][k] V[k], into rows i0..i1 of V (columns >= i1).
    const int64_t cols = n - i1;
    const int nt = cols * (n - i1) > (1 << 16) ? std::max(1, omp_get_max_threads()) : 1;
#pragma omp parallel num_threads(nt)
    {
      const int t = omp_get_thread_num(), T = omp_get_num_threads();
      const int64_t j0 = i1 + cols * t / T, j1 = i1 + cols * (t + 1) / T;
      for (int64_t k = i1; k < j1; ++k) {
        const double* vk = V + k * n;
        for (int i = 0; i < m; ++i) {
          const double f = R[(i0 + i) * n + k];
          const double* x[1] = {vk};
          add_rows(V + (i0 + i) * n, x, &f, 1, std::max(k, j0), j1);
        }
      }
    }
    // Within the panel, from its last row up.
    for (int64_t i = i1 - 1; i >= i0; --i) {
      double* vi = V + i * n;
      for (int64_t k = i + 1; k < i1; ++k) {
        const double f = R[i * n + k];
        const double* x[1] = {V + k * n};
        add_rows(vi, x, &f, 1, k, n);
      }
      const double inv = 1 / R[i * n + i];
      for (int64_t j = i + 1; j < n; ++j) vi[j] *= -inv;
      vi[i] = inv;
    }
  }
  return v;
}

}  // namespace

std::vector<float> inverse_cholesky_upper(const std::vector<double>& gram, int64_t n, double damp) {
  double mean_diag = 0;
  for (int64_t i = 0; i < n; ++i) mean_diag += gram[size_t(i * n + i)];
  mean_diag /= double(n);
  if (!(mean_diag > 0)) mean_diag = 1;  // all inputs dead: H is damp * I
  std::vector<double> r(size_t(n * n));
  bool ok = false;
  for (int attempt = 0; attempt < 4; ++attempt) {
    for (int64_t i = 0; i < n; ++i)  // J H J, upper triangle
      for (int64_t j = i; j < n; ++j) r[size_t(i * n + j)] = gram[size_t((n - 1 - i) * n + (n - 1 - j))];
    for (int64_t i = 0; i < n; ++i) r[size_t(i * n + i)] += damp * mean_diag;
    if ((ok = cholesky_upper(r, n))) break;
    if (attempt < 3) damp = damp > 0 ? damp * 10 : 1e-4;
  }
  GP_CHECK(ok, "[gptq] the Hessian (", n, " x ", n, ") is not positive definite even with dampening ", damp,
           " (are the statistics finite?)");
  const std::vector<double> v = inverse_upper(r, n);
  // U = J R^-T J: U[i][j] = V[n-1-j][n-1-i].
  std::vector<float> u(size_t(n * n), 0.f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i; j < n; ++j) u[size_t(i * n + j)] = float(v[size_t((n - 1 - j) * n + (n - 1 - i))]);
  return u;
}

void gptq_quantize(const float* w, int64_t N, int64_t K, DType format, const std::vector<double>& gram,
                   int64_t block, double damp, void* dst) {
  const TypeTraits& tr = traits(format);
  const int64_t B = tr.block_size;
  GP_CHECK(!tr.is_float && B > 1, "[gptq] ", tr.name, " is not a block format");
  GP_CHECK(K > 0 && K % B == 0, "[gptq] rows of ", K, " elements do not split into ", tr.name, " blocks of ", B);
  GP_CHECK(int64_t(gram.size()) == K * K, "[gptq] the Gram matrix has ", gram.size(), " entries, expected ", K,
           " x ", K);
  GP_CHECK(damp >= 0 && std::isfinite(damp), "[gptq] dampening ", damp, " must be a finite non-negative number");
  const std::vector<float> u = inverse_cholesky_upper(gram, K, damp);
  // Block quantizer weights: diag(H) with the same dampening (positive even for dead inputs).
  std::vector<float> importance(static_cast<size_t>(K));
  double mean_diag = 0;
  for (int64_t i = 0; i < K; ++i) mean_diag += gram[size_t(i * K + i)] / double(K);
  for (int64_t i = 0; i < K; ++i)
    importance[size_t(i)] = float(gram[size_t(i * K + i)] + std::max(damp, 1e-6) * std::max(mean_diag, 1e-30));

  const int64_t batch = std::max(B, (std::max<int64_t>(block, 1) + B - 1) / B * B);
  const size_t row_bytes = bytes_for(format, K), blk_bytes = tr.block_bytes;
  const codec::CodeGrid* grid = codec::code_grid(format);
  constexpr int64_t kRows = 16;  // rows per task: U's rows are reused across them
  const int64_t chunks = (N + kRows - 1) / kRows;
#pragma omp parallel for schedule(dynamic)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t r0 = ch * kRows, R = std::min(kRows, N - r0);
    std::vector<float> W(w + r0 * K, w + (r0 + R) * K);
    std::vector<float> err(size_t(R * batch)), cur(size_t(R * B)), deq(grid ? 0 : size_t(R * B));
    std::vector<float> step(grid ? size_t(R * B) : 0), offset(grid ? size_t(R * B) : 0);
    std::vector<uint8_t> packed(size_t(R) * blk_bytes), codes(grid ? size_t(R * B) : 0);
    for (int64_t i1 = 0; i1 < K; i1 += batch) {
      const int64_t i2 = std::min(K, i1 + batch);
      for (int64_t g = i1; g < i2; g += B) {
        for (int64_t r = 0; r < R; ++r)
          std::memcpy(&cur[size_t(r * B)], &W[size_t(r * K + g)], size_t(B) * sizeof(float));
        quantize_rows(format, cur.data(), packed.data(), R, B, &importance[size_t(g)]);
        if (grid) {
          for (int64_t r = 0; r < R; ++r)
            grid->grid(&packed[size_t(r) * blk_bytes], &step[size_t(r * B)], &offset[size_t(r * B)]);
        } else {
          tr.to_f32(packed.data(), deq.data(), R * B);
        }
        for (int64_t j = g; j < g + B; ++j) {
          const float* uj = &u[size_t(j * K)];
          for (int64_t r = 0; r < R; ++r) {
            float* wr = &W[size_t(r * K)];
            const size_t at = size_t(r * B + (j - g));
            float q;
            if (grid) {
              const float st = step[at], off = offset[at];
              const int c = st == 0 ? 0 : std::clamp(int(std::lrintf((wr[j] - off) / st)), 0, grid->levels - 1);
              codes[at] = uint8_t(c);
              q = off + st * float(c);
            } else {
              q = deq[at];
            }
            const float e = (wr[j] - q) / uj[j], minus_e = -e;
            err[size_t(r * batch + (j - i1))] = minus_e;
            add_rows(wr, &uj, &minus_e, 1, j + 1, i2);
          }
        }
        for (int64_t r = 0; r < R; ++r) {
          if (grid) grid->set_codes(&packed[size_t(r) * blk_bytes], &codes[size_t(r * B)]);
          std::memcpy(static_cast<uint8_t*>(dst) + size_t(r0 + r) * row_bytes + size_t(g / B) * blk_bytes,
                      &packed[size_t(r) * blk_bytes], blk_bytes);
        }
      }
      // The batch's errors move every column right of it: W[:, i2:] -= err * U[i1:i2, i2:] (err
      // is kept negated).
      for (int64_t r = 0; r < R; ++r)
        for (int64_t j = i1; j < i2; j += kPanel) {
          const int m = int(std::min<int64_t>(kPanel, i2 - j));
          const float* rows[kPanel];
          for (int k = 0; k < m; ++k) rows[k] = &u[size_t((j + k) * K)];
          add_rows(&W[size_t(r * K)], rows, &err[size_t(r * batch + (j - i1))], m, i2, K);
        }
    }
  }
}

}  // namespace genperf::quant
