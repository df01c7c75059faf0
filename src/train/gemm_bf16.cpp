// bf16 GEMMs of mixed-precision training (gemm_bf16.h) on cached oneDNN matmul primitives; the
// sum post-op gives C += A·B, which weight gradients and blocked input gradients need.
#include "train/gemm_bf16.h"

#include <omp.h>

#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <unordered_map>

#include "backend/cpu/kernels.h"
#include "genperf/error.h"
#include "genperf/runtime.h"

namespace genperf::train {
namespace {

using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;

// Training's own engine, created on the first bf16 product (only where the CPU runs bf16, so
// GENPERF_ISA's cap on oneDNN, applied by the inference engine, never concerns it).
dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

struct Operands {
  dnnl::memory::desc a, b, c;
};

// (M, N, K, trans_a, trans_b, lda, ldb, ldc, accumulate)
using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, int64_t, int64_t, int64_t, bool>;

Operands descs(const Key& k) {
  const auto [M, N, K, ta, tb, lda, ldb, ldc, acc] = k;
  return {dnnl::memory::desc({M, K}, dt::bf16, ta ? dims{1, lda} : dims{lda, 1}),
          dnnl::memory::desc({K, N}, dt::bf16, tb ? dims{1, ldb} : dims{ldb, 1}),
          dnnl::memory::desc({M, N}, dt::f32, dims{ldc, 1})};
}

dnnl::matmul make_matmul(const Key& k, const char* what) {
  const Operands d = descs(k);
  dnnl::primitive_attr attr;
  if (std::get<8>(k)) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  try {
    return dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(d.a, d.b, d.c), attr, engine()));
  } catch (const dnnl::error& e) {
    fail("[", what, "] oneDNN has no bf16 matmul for M ", std::get<0>(k), ", N ", std::get<1>(k),
         ", K ", std::get<2>(k), ": ", e.what());
  }
}

const dnnl::matmul& cached_matmul(const Key& k, const char* what) {
  static std::mutex mu;
  static std::map<Key, dnnl::matmul> cache;  // shapes of one model: a few dozen entries
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(k);
  if (it == cache.end()) {
    if (cache.size() >= 256) cache.clear();  // bounds memory when shapes vary widely
    it = cache.emplace(k, make_matmul(k, what)).first;
  }
  return it->second;
}

}  // namespace

void round_to_bf16(const float* src, int64_t ld_src, int64_t rows, int64_t cols, uint16_t* dst) {
  const auto conv = cpu::kernels().f32_to_bf16;
  const int nt = rows * cols >= (int64_t(1) << 16) ? num_threads() : 1;
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t r = 0; r < rows; ++r) conv(src + r * ld_src, dst + r * cols, cols);
}

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const uint16_t* A,
               int64_t lda, const uint16_t* B, int64_t ldb, bool accumulate, float* C, int64_t ldc,
               const char* what) {
  if (M == 0 || N == 0) return;
  const Key k{M, N, K, trans_a, trans_b, lda, ldb, ldc, accumulate};
  const dnnl::matmul& prim = cached_matmul(k, what);
  if (omp_get_max_threads() != num_threads()) omp_set_num_threads(num_threads());
  const Operands d = descs(k);
  auto& e = engine();
  thread_local dnnl::stream stream(e);
  prim.execute(stream, {{DNNL_ARG_SRC, dnnl::memory(d.a, e, const_cast<uint16_t*>(A))},
                        {DNNL_ARG_WEIGHTS, dnnl::memory(d.b, e, const_cast<uint16_t*>(B))},
                        {DNNL_ARG_DST, dnnl::memory(d.c, e, C)}});
  stream.wait();
}

}  // namespace genperf::train
