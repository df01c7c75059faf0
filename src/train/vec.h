// Row kernels of training that the compiler cannot vectorize on its own (exp, sqrt under
// math-errno) or that stream large buffers: a portable version and an AVX-512 one, chosen at run
// time with genperf::isa(). The double overloads (gradient-check path) are the portable loops.
//
// Shape legend: n elements of a row or buffer.
#pragma once
#include <cstdint>

namespace genperf::train {

// out[i] = exp(x[i] - shift) (out may be x, or null to only sum); returns the sum of the terms.
float exp_sum(const float* x, float* out, int64_t n, float shift);
double exp_sum(const double* x, double* out, int64_t n, double shift);
// out[i] = scale * exp(x[i] - shift) (out may be x).
void exp_scale(const float* x, float* out, int64_t n, float shift, float scale);
void exp_scale(const double* x, double* out, int64_t n, double shift, double scale);

// out = silu(g) * u; and its backward dg = d u s (1 + g (1 - s)), du = d g s with s = sigmoid(g).
void swiglu_row(const float* g, const float* u, float* out, int64_t n);
void swiglu_row(const double* g, const double* u, double* out, int64_t n);
void swiglu_backward_row(const float* g, const float* u, const float* d, float* dg, float* du, int64_t n);
void swiglu_backward_row(const double* g, const double* u, const double* d, double* dg, double* du,
                         int64_t n);

// One AdamW update of n elements: p *= keep; m, v moments; p -= step_size m / (sqrt(v) inv_bc2_sqrt + eps).
struct AdamWStep {
  float keep, beta1, beta2, step_size, inv_bc2_sqrt, eps;
};
void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& s);

// Sum of squares, accumulated in double.
double sum_squares(const float* x, int64_t n);

// The AVX-512 versions (vec_avx512.cpp); call only where the CPU has AVX-512.
namespace avx512 {
float exp_sum(const float* x, float* out, int64_t n, float shift);
void exp_scale(const float* x, float* out, int64_t n, float shift, float scale);
void swiglu_row(const float* g, const float* u, float* out, int64_t n);
void swiglu_backward_row(const float* g, const float* u, const float* d, float* dg, float* du, int64_t n);
void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& s);
double sum_squares(const float* x, int64_t n);
}  // namespace avx512

}  // namespace genperf::train
