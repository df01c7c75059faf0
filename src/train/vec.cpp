// Portable row kernels and the run-time choice of their AVX-512 versions (vec.h).
#include "train/vec.h"

#include <cmath>

#include "genperf/runtime.h"

namespace genperf::train {
namespace {

bool use_avx512() { return isa() == Isa::Avx512; }

template <typename F>
F exp_sum_portable(const F* x, F* out, int64_t n, F shift) {
  F sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const F e = std::exp(x[i] - shift);
    if (out) out[i] = e;
    sum += e;
  }
  return sum;
}

template <typename F>
void exp_scale_portable(const F* x, F* out, int64_t n, F shift, F scale) {
  for (int64_t i = 0; i < n; ++i) out[i] = scale * std::exp(x[i] - shift);
}

template <typename F>
void swiglu_portable(const F* g, const F* u, F* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = g[i] / (F(1) + std::exp(-g[i])) * u[i];
}

template <typename F>
void swiglu_backward_portable(const F* g, const F* u, const F* d, F* dg, F* du, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const F s = F(1) / (F(1) + std::exp(-g[i]));
    du[i] = d[i] * g[i] * s;
    dg[i] = d[i] * u[i] * s * (F(1) + g[i] * (F(1) - s));
  }
}

}  // namespace

float exp_sum(const float* x, float* out, int64_t n, float shift) {
  return use_avx512() ? avx512::exp_sum(x, out, n, shift) : exp_sum_portable(x, out, n, shift);
}
double exp_sum(const double* x, double* out, int64_t n, double shift) {
  return exp_sum_portable(x, out, n, shift);
}

void exp_scale(const float* x, float* out, int64_t n, float shift, float scale) {
  if (use_avx512())
    avx512::exp_scale(x, out, n, shift, scale);
  else
    exp_scale_portable(x, out, n, shift, scale);
}
void exp_scale(const double* x, double* out, int64_t n, double shift, double scale) {
  exp_scale_portable(x, out, n, shift, scale);
}

void swiglu_row(const float* g, const float* u, float* out, int64_t n) {
  if (use_avx512())
    avx512::swiglu_row(g, u, out, n);
  else
    swiglu_portable(g, u, out, n);
}
void swiglu_row(const double* g, const double* u, double* out, int64_t n) {
  swiglu_portable(g, u, out, n);
}

void swiglu_backward_row(const float* g, const float* u, const float* d, float* dg, float* du, int64_t n) {
  if (use_avx512())
    avx512::swiglu_backward_row(g, u, d, dg, du, n);
  else
    swiglu_backward_portable(g, u, d, dg, du, n);
}
void swiglu_backward_row(const double* g, const double* u, const double* d, double* dg, double* du,
                         int64_t n) {
  swiglu_backward_portable(g, u, d, dg, du, n);
}

void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& s) {
  if (use_avx512()) return avx512::adamw_update(p, g, m, v, n, s);
  for (int64_t i = 0; i < n; ++i) {
    p[i] *= s.keep;
    m[i] = s.beta1 * m[i] + (1.0f - s.beta1) * g[i];
    v[i] = s.beta2 * v[i] + (1.0f - s.beta2) * g[i] * g[i];
    p[i] -= s.step_size * m[i] / (std::sqrt(v[i]) * s.inv_bc2_sqrt + s.eps);
  }
}

double sum_squares(const float* x, int64_t n) {
  if (use_avx512()) return avx512::sum_squares(x, n);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(x[i]) * double(x[i]);
  return s;
}

}  // namespace genperf::train
