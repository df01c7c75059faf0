// Pieces of genperf/quantize.h shared between its source files and the tests: the GPTQ core
// (gptq.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "genperf/checkpoint.h"

namespace genperf::quant {

// U [n, n] (f32, row-major, upper) with U^T U = H^-1 for H = gram + damp * mean(diag(gram)) * I
// (gram [n, n] symmetric, row-major). When H is not positive definite, damp grows tenfold (from
// 1e-4 when it was 0) up to three times before it fails. See gptq.cpp.
std::vector<float> inverse_cholesky_upper(const std::vector<double>& gram, int64_t n, double damp);

// GPTQ of one matrix w [N, K] (f32, row-major) to `format` (a block format whose block divides
// K), written to dst (N rows of bytes_for(format, K)). gram is X^T X / n [K, K]; `block` the
// lazy-batch width in columns; damp the dampening fraction. See gptq.cpp.
void gptq_quantize(const float* w, int64_t N, int64_t K, DType format, const std::vector<double>& gram,
                   int64_t block, double damp, void* dst);

}  // namespace genperf::quant
