// The CPU backend's op drivers, called by ops::X after the arguments were checked (sizes are
// passed along so they are not recomputed). Each driver splits the work over OpenMP threads
// (genperf::num_threads()) and calls the kernels of the ISA level genperf::isa() selects.
//
// Shape legend: T tokens, K input features, N output features, D head dimension, S keys.
#pragma once
#include <cstdint>
#include <span>

#include "genperf/ops.h"
#include "genperf/tensor.h"

namespace genperf::cpu {

void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, int64_t T, int64_t K,
            int64_t N);
// ops::linear_many: one parallel region over every output's rows when all take the GEMV.
void linear_many(const Tensor& x, std::span<const ops::LinearOut> outs, int64_t T, int64_t K);
void embedding(const Tensor& table, std::span<const int32_t> ids, Tensor& out);
void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& y);
void rope(Tensor& x, int64_t nheads, int64_t D, std::span<const int32_t> pos,
          std::span<const float> inv_freq, RopeStyle style);
void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out);
void add_inplace(Tensor& x, const Tensor& y);
void store_rows(const Tensor& src, Tensor& dst);
void attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t nheads, int64_t nkv_heads,
               int64_t q_pos0, float scale, Tensor& out, int64_t T, int64_t S, int64_t D);

// The paths of linear, exposed for benchmarks and tests that pin one:
// the bandwidth-bound GEMV kernels (any T, meant for few rows; for block-quantized weights the
// integer kernels of qkernels.h over x quantized to 8 bits) and the oneDNN GEMM (block-quantized
// weights decoded panel by panel).
void linear_gemv(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, int64_t T,
                 int64_t K, int64_t N);
void linear_gemm(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, int64_t T,
                 int64_t K, int64_t N);
// The integer GEMM of the block formats (qkernels.h: activation rows quantized to 8 bits,
// output rows split over the threads in 32-row panels); false, doing nothing, where the weight
// type and ISA level have none.
bool linear_qgemm(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, int64_t T,
                  int64_t K, int64_t N);
// The most rows T for which linear uses the GEMV kernels, for weights of type `wt`.
int64_t gemv_max_rows(DType wt);
// ops::prepare_weight.
Tensor prepare_weight(const Tensor& w);

}  // namespace genperf::cpu
