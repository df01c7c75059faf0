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
// (formats.h, CodeGrid), err_j = (w_j - q_j) / U_jj moves every column right of j, those of the
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
#include <algorithm>
#include <cmath>
#include <cstring>

#include "genperf/error.h"
#include "quant/formats.h"
#include "quant/quantize_internal.h"

namespace genperf::quant {
namespace {

// In place: the lower Cholesky factor L of the symmetric a [n, n] (upper triangle ignored, set
// to zero). False when a is not positive definite.
bool cholesky_lower(std::vector<double>& a, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    double* rj = &a[size_t(j * n)];
    double s = rj[j];
    for (int64_t k = 0; k < j; ++k) s -= rj[k] * rj[k];
    if (!(s > 0) || !std::isfinite(s)) return false;
    const double d = std::sqrt(s);
    rj[j] = d;
    for (int64_t i = j + 1; i < n; ++i) {
      double* ri = &a[size_t(i * n)];
      double t = ri[j];
      for (int64_t k = 0; k < j; ++k) t -= ri[k] * rj[k];
      ri[j] = t / d;
    }
    for (int64_t k = j + 1; k < n; ++k) rj[k] = 0;
  }
  return true;
}

// U [n, n] (f32, upper) with U^T U = H^-1, for H = gram + damp * mean(diag) * I.
std::vector<float> inverse_cholesky_upper(const std::vector<double>& gram, int64_t n, double damp) {
  double mean_diag = 0;
  for (int64_t i = 0; i < n; ++i) mean_diag += gram[size_t(i * n + i)];
  mean_diag /= double(n);
  if (!(mean_diag > 0)) mean_diag = 1;  // all inputs dead: H is damp * I
  std::vector<double> l;
  bool ok = false;
  for (int attempt = 0; attempt < 4; ++attempt) {
    l = gram;
    for (int64_t i = 0; i < n; ++i) l[size_t(i * n + i)] += damp * mean_diag;
    if ((ok = cholesky_lower(l, n))) break;
    if (attempt < 3) damp = damp > 0 ? damp * 10 : 1e-4;
  }
  GP_CHECK(ok, "[gptq] the Hessian (", n, " x ", n, ") is not positive definite even with dampening ", damp,
           " (are the statistics finite?)");
  // L^-1, row by row: row i = (e_i - sum_{k<i} L[i][k] Linv[k]) / L[i][i].
  std::vector<double> inv(size_t(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    double* ri = &inv[size_t(i * n)];
    ri[i] = 1;
    for (int64_t k = 0; k < i; ++k) {
      const double f = l[size_t(i * n + k)];
      const double* rk = &inv[size_t(k * n)];
      for (int64_t c = 0; c <= k; ++c) ri[c] -= f * rk[c];
    }
    const double d = l[size_t(i * n + i)];
    for (int64_t c = 0; c <= i; ++c) ri[c] /= d;
  }
  // H^-1 = L^-T L^-1 = sum over k of outer(row k of L^-1, itself); lower triangle only.
  std::vector<double> hinv(size_t(n * n), 0.0);
  for (int64_t k = 0; k < n; ++k) {
    const double* rk = &inv[size_t(k * n)];
    for (int64_t a = 0; a <= k; ++a) {
      const double f = rk[a];
      if (f == 0) continue;
      double* ra = &hinv[size_t(a * n)];
      for (int64_t b = 0; b <= a; ++b) ra[b] += f * rk[b];
    }
  }
  GP_CHECK(cholesky_lower(hinv, n), "[gptq] the inverse Hessian lost positive definiteness (", n, " x ", n,
           "); raise the dampening");
  // The upper factor of H^-1 = L2 L2^T is L2^T.
  std::vector<float> u(size_t(n * n), 0.f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j <= i; ++j) u[size_t(j * n + i)] = float(hinv[size_t(i * n + j)]);
  return u;
}

}  // namespace

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
  const CodeGrid* grid = code_grid(format);
  constexpr int64_t kRows = 16;  // rows per task: U's rows are reused across them
  const int64_t chunks = (N + kRows - 1) / kRows;
#pragma omp parallel for schedule(dynamic)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t r0 = ch * kRows, R = std::min(kRows, N - r0);
    std::vector<float> W(w + r0 * K, w + (r0 + R) * K);
    std::vector<float> err(size_t(R * batch)), cur(size_t(R * B)), deq(size_t(R * B));
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
            float q = deq.empty() ? 0.f : deq[at];
            if (grid) {
              const float st = step[at], off = offset[at];
              const int c = st == 0 ? 0 : std::clamp(int(std::lrintf((wr[j] - off) / st)), 0, grid->levels - 1);
              codes[at] = uint8_t(c);
              q = off + st * float(c);
            }
            const float e = (wr[j] - q) / uj[j];
            err[size_t(r * batch + (j - i1))] = e;
            for (int64_t c = j + 1; c < i2; ++c) wr[c] -= e * uj[c];
          }
        }
        for (int64_t r = 0; r < R; ++r) {
          if (grid) grid->set_codes(&packed[size_t(r) * blk_bytes], &codes[size_t(r * B)]);
          std::memcpy(static_cast<uint8_t*>(dst) + size_t(r0 + r) * row_bytes + size_t(g / B) * blk_bytes,
                      &packed[size_t(r) * blk_bytes], blk_bytes);
        }
      }
      // The batch's errors move every column right of it: W[:, i2:] -= err * U[i1:i2, i2:].
      for (int64_t r = 0; r < R; ++r) {
        float* wr = &W[size_t(r * K)];
        for (int64_t j = i1; j < i2; ++j) {
          const float e = err[size_t(r * batch + (j - i1))];
          const float* uj = &u[size_t(j * K)];
          for (int64_t c = i2; c < K; ++c) wr[c] -= e * uj[c];
        }
      }
    }
  }
}

}  // namespace genperf::quant
