// linear for many rows (prefill): y[T,N] = x[T,K] · w[N,K]^T (+ bias) on oneDNN's matmul.
// The weight [N,K] buffer is described as a [K,N] matrix with strides (1, ldw): no copy.
//   f32 weights:  f32 matmul.
//   bf16 weights: x is rounded to bf16 (vectorized), bf16 x bf16 matmul into f32, where the CPU
//                 has AVX512-BF16 and the ISA level is AVX-512.
//   block formats (Q4_0, Q4_K, ...): each thread decodes panels of weight rows into its own
//                 1.5 MiB buffer, bf16 where the bf16 matmul runs (else f32), and multiplies them
//                 single-threaded (see matmul_quantized): the weights are read packed, once.
//   otherwise (f16: oneDNN 2.6 creates no f16 matmul on this Zen CPU, not even a reference one;
//   bf16 without AVX512-BF16; plain FP8): blocks of weight rows are converted to f32 into a
//   buffer of at most 16 MiB and multiplied with the f32 matmul, whatever N is.
// The training GEMMs of gemm.h run on the same engine: gemm_f32 on oneDNN's sgemm, gemm_bf16 on
// matmul primitives (the sum post-op gives C += A·B, which weight gradients and blocked input
// gradients need). Primitives are created once per shape and strides and kept in one cache.
// oneDNN runs on OpenMP; its thread count is set to genperf::num_threads() before each call.
// The engine and that execution are shared with the convolutions (onednn.h, conv_onednn.cpp).
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/onednn.h"
#include "genperf/error.h"
#include "genperf/runtime.h"
#include "ops/checks.h"

namespace genperf::cpu {
namespace {

using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;

dnnl::engine& engine() { return onednn_engine(); }

// Shape, strides (elements) and types of one matmul: dst[M, N] (+)= src[M, K] · wei[K, N]
// (+ bias). src and wei are described by both strides, so that either may be a transposed view
// (linear's weights [N, K] are wei with strides (1, ldw)); accumulate adds the sum post-op.
struct MatmulKey {
  int64_t M, N, K, src_s0, src_s1, wei_s0, wei_s1, ldc;
  dt src_t, wei_t;
  bool bias, accumulate;
  auto operator<=>(const MatmulKey&) const = default;
  dnnl::memory::desc src() const { return {{M, K}, src_t, dims{src_s0, src_s1}}; }
  dnnl::memory::desc wei() const { return {{K, N}, wei_t, dims{wei_s0, wei_s1}}; }
  dnnl::memory::desc dst() const { return {{M, N}, dt::f32, dims{ldc, 1}}; }
  dnnl::memory::desc bias_desc() const {
    return bias ? dnnl::memory::desc({1, N}, dt::f32, dims{N, 1}) : dnnl::memory::desc();
  }
};

// A primitive, or none (with oneDNN's reason) where oneDNN creates none for the key; reference:
// it is oneDNN's reference implementation, orders of magnitude slower than converting to f32.
struct Matmul {
  std::optional<dnnl::matmul> prim;
  bool reference = false;
  std::string why;
};

Matmul make_matmul(const MatmulKey& k) {
  dnnl::primitive_attr attr;
  if (k.accumulate) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  try {
    const dnnl::matmul::primitive_desc pd(
        dnnl::matmul::desc(k.src(), k.wei(), k.bias_desc(), k.dst()), attr, engine());
    return {dnnl::matmul(pd), onednn_is_reference(pd), ""};
  } catch (const dnnl::error& e) { return {std::nullopt, false, e.what()}; }
}

// The one cache of the backend's matmul primitives (linear and the training GEMMs).
Matmul cached_matmul(const MatmulKey& key) {
  static OnednnCache<MatmulKey, Matmul> cache(make_matmul);
  return cache.get(key);
}

void execute(const dnnl::matmul& prim, const MatmulKey& k, const void* src, const void* wei,
             const float* bias, float* dst) {
  auto& e = engine();
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, dnnl::memory(k.src(), e, const_cast<void*>(src))},
      {DNNL_ARG_WEIGHTS, dnnl::memory(k.wei(), e, const_cast<void*>(wei))},
      {DNNL_ARG_DST, dnnl::memory(k.dst(), e, dst)}};
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(k.bias_desc(), e, const_cast<float*>(bias)));
  onednn_execute(prim, args);
}

// y = x · w^T (+ bias) with a cached primitive; returns false when there is none for the types
// but the reference one.
bool run_matmul(const void* x, int64_t ldx, dt xt, const void* w, int64_t ldw, dt wt,
                const float* bias, float* y, int64_t ldy, int64_t T, int64_t K, int64_t N) {
  const MatmulKey key{T, N, K, ldx, 1, 1, ldw, ldy, xt, wt, bias != nullptr, false};
  const Matmul m = cached_matmul(key);
  if (!m.prim || m.reference) return false;
  execute(*m.prim, key, x, w, bias, y);
  return true;
}

// x [T, K] (row stride ldx) rounded to bf16 ([T, K] contiguous) into the calling thread's
// buffer, kept between calls (a fresh one per call is zeroed and faulted in) and valid until its
// next call.
const uint16_t* activations_bf16(const float* x, int64_t ldx, int64_t T, int64_t K) {
  thread_local std::vector<uint16_t> buf;
  buf.resize(size_t(T * K));
  round_to_bf16(x, ldx, T, K, buf.data());
  return buf.data();
}

// Rows of weights converted to f32 per block: about 16 MiB of buffer, at least 64 rows. Smaller
// blocks starve oneDNN at large T (2 MiB blocks ran T = K = N = 2048 at 0.44x the speed of
// 16 MiB ones, measured A/B on 2 threads; at T = 512 the size made no difference).
// Bytes of one thread's decoded panel of quantized weights. Narrow panels cost oneDNN
// efficiency (K = 2048: 0.78x of the bf16 GEMM with 96-row panels); 1.5 MiB came within 0.9-1.0x
// at T = 512 for the 110M model's shapes (thread CPU time, one thread; 0.77-0.97x at 384 KiB).
constexpr int64_t kPanelBytes = int64_t(1536) << 10;

int64_t convert_block_rows(int64_t K, int64_t N) {
  int64_t rows = (int64_t(16) << 20) / (4 * K);
  rows = rows < 64 ? 64 : rows / 64 * 64;
  return rows < N ? rows : N;
}

void matmul_converting(const float* x, int64_t ldx, const Tensor& w, const float* bias, float* y,
                       int64_t ldy, int64_t T, int64_t K, int64_t N) {
  const int64_t nb = convert_block_rows(K, N);
  thread_local std::vector<float> buf;  // kept between calls (a fresh one is zeroed and faulted in)
  buf.resize(static_cast<size_t>(nb * K));
  float* const wf = buf.data();  // the calling thread's buffer (buf names each thread's own)
  const auto& kr = kernels();
  const ToF32Fn conv =
      kr.to_f32[size_t(w.dtype())] ? kr.to_f32[size_t(w.dtype())] : traits(w.dtype()).to_f32;
  const int nt = num_threads();
  for (int64_t n0 = 0; n0 < N; n0 += nb) {
    const int64_t rows = nb < N - n0 ? nb : N - n0;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t r = 0; r < rows; ++r) conv(w.row(n0 + r), wf + r * K, K);
    const bool ok = run_matmul(x, ldx, dt::f32, wf, K, dt::f32, bias ? bias + n0 : nullptr,
                               y + n0, ldy, T, K, rows);
    GP_CHECK(ok, "[linear] oneDNN has no f32 matmul for x f32[", T, ", ", K, "] and w f32[", rows,
             ", ", K, "]");
  }
}

// Block-quantized weights (prefill): panels of weight rows decoded (kernels().to_f32, the
// vectorized dequantizers) to bf16 where the bf16 GEMM runs (else f32), each multiplied by x with
// oneDNN. Each thread decodes its own panels into its own buffer and multiplies them on its own
// (oneDNN runs single-threaded inside a parallel region), so no thread waits for another and
// the weights are read from memory in their packed form only.
// Rows per panel: at most kPanelBytes of decoded weights, in a number of panels that is a
// multiple of the thread count (so that the threads finish together), a multiple of 16 rows.
int64_t panel_rows(int64_t K, size_t elem_bytes, int64_t N, int nt) {
  const int64_t fit =
      std::max<int64_t>(16, int64_t(size_t(kPanelBytes) / (elem_bytes * size_t(K))));
  int64_t panels = (N + fit - 1) / fit;
  panels = (panels + nt - 1) / nt * nt;
  const int64_t rows = ((N + panels - 1) / panels + 15) / 16 * 16;
  return std::min(rows, N);
}

void matmul_quantized(const float* x, int64_t ldx, const Tensor& w, const float* bias, float* y,
                      int64_t ldy, int64_t T, int64_t K, int64_t N) {
  const auto& kr = kernels();
  const ToF32Fn conv =
      kr.to_f32[size_t(w.dtype())] ? kr.to_f32[size_t(w.dtype())] : traits(w.dtype()).to_f32;
  const bool bf16 = isa() == Isa::Avx512 && cpu_features().avx512_bf16;
  const int nt = num_threads();
  const void* xs = bf16 ? static_cast<const void*>(activations_bf16(x, ldx, T, K)) : x;
  const int64_t ldxs = bf16 ? K : ldx;
  const dt xt = bf16 ? dt::bf16 : dt::f32;
  const size_t eb = bf16 ? 2 : 4;
  const int64_t P = panel_rows(K, eb, N, nt), panels = (N + P - 1) / P;
  bool ok = true;
#pragma omp parallel num_threads(int(std::min<int64_t>(nt, panels))) reduction(&& : ok)
  {
    // Each thread's buffers are kept between calls: a fresh 1.5 MiB panel per call cost its
    // zeroing and a page fault per 4 KB (5% and 5% of FP8 prefill's samples in a perf profile).
    thread_local std::vector<float> row;
    thread_local std::vector<char> panel;
    row.resize(size_t(K));
    panel.resize(size_t(P * K) * eb);
#pragma omp for schedule(static)
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t n0 = p * P, rows = std::min(P, N - n0);
      for (int64_t r = 0; r < rows; ++r) {
        if (bf16 && kr.to_bf16[size_t(w.dtype())]) {
          kr.to_bf16[size_t(w.dtype())](w.row(n0 + r),
                                        reinterpret_cast<uint16_t*>(panel.data()) + r * K, K);
        } else if (bf16) {
          conv(w.row(n0 + r), row.data(), K);
          kr.f32_to_bf16(row.data(), reinterpret_cast<uint16_t*>(panel.data()) + r * K, K);
        } else {
          conv(w.row(n0 + r), reinterpret_cast<float*>(panel.data()) + r * K, K);
        }
      }
      ok = run_matmul(xs, ldxs, xt, panel.data(), K, xt, bias ? bias + n0 : nullptr, y + n0,
                      ldy, T, K, rows) && ok;
    }
  }
  GP_CHECK(ok, "[linear] oneDNN has no ", bf16 ? "bf16" : "f32", " matmul for x [", T, ", ", K,
           "] and a panel of ", P, " rows of w ", w.describe());
}

}  // namespace

dnnl::engine& onednn_engine() {
  static dnnl::engine e = [] {
    if (const char* s = std::getenv("GENPERF_ISA")) {
      std::optional<dnnl::cpu_isa> cap;
      if (!std::strcmp(s, "avx2")) cap = dnnl::cpu_isa::avx2;
      if (!std::strcmp(s, "avxvnni")) cap = dnnl::cpu_isa::avx2_vnni;
      if (!std::strcmp(s, "generic")) cap = dnnl::cpu_isa::sse41;
      // A cap that did not take would run a lower level's GEMMs, and its GEMM peak, at the best
      // level's ISA while its report says the lower one.
      const dnnl::status st = cap ? dnnl::set_max_cpu_isa(*cap) : dnnl::status::success;
      GP_CHECK(st == dnnl::status::success, "[onednn] GENPERF_ISA=", s, ": oneDNN's ISA could not be capped (status ",
               int(st), "): a oneDNN call ran before the engine was made, or this oneDNN was built without the cap");
    }
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return e;
}

const char* onednn_isa_name() {
  onednn_engine();  // the cap first: asking oneDNN fixes its ISA
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

void onednn_set_threads() {
  if (omp_get_max_threads() != num_threads()) omp_set_num_threads(num_threads());
}

void onednn_execute(const dnnl::primitive& prim, const std::unordered_map<int, dnnl::memory>& args) {
  onednn_set_threads();
  thread_local dnnl::stream stream(onednn_engine());
  prim.execute(stream, args);
  stream.wait();
}

bool onednn_is_reference(const dnnl::primitive_desc_base& pd) {
  return std::strncmp(pd.impl_info_str(), "ref", 3) == 0;
}

void round_to_bf16(const float* src, int64_t ld_src, int64_t rows, int64_t cols, uint16_t* dst) {
  const auto conv = kernels().f32_to_bf16;
  const int nt = rows * cols >= (int64_t(1) << 16) ? num_threads() : 1;
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t r = 0; r < rows; ++r) conv(src + r * ld_src, dst + r * cols, cols);
}

void gemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
              int64_t ldc, const char* what) {
  engine();  // applies the ISA cap before any other oneDNN call
  onednn_set_threads();
  const dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A,
                                      lda, B, ldb, beta, C, ldc);
  GP_CHECK(st == dnnl_success, "[", what, "] oneDNN sgemm failed (status ", int(st), ") for M ", M,
           ", N ", N, ", K ", K);
}

void gemm_f32_serial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                     const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                     int64_t ldc, const char* what) {
  engine();  // applies the ISA cap before any other oneDNN call
  const int saved = omp_get_max_threads();  // of this task: restored for whatever runs next
  omp_set_num_threads(1);
  const dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A,
                                      lda, B, ldb, beta, C, ldc);
  omp_set_num_threads(saved);
  GP_CHECK(st == dnnl_success, "[", what, "] oneDNN sgemm failed (status ", int(st), ") for M ", M,
           ", N ", N, ", K ", K);
}

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const uint16_t* A,
               int64_t lda, const uint16_t* B, int64_t ldb, bool accumulate, float* C, int64_t ldc,
               const char* what) {
  if (M == 0 || N == 0) return;
  const MatmulKey key{M, N, K,
                      trans_a ? 1 : lda, trans_a ? lda : 1,
                      trans_b ? 1 : ldb, trans_b ? ldb : 1,
                      ldc, dt::bf16, dt::bf16, false, accumulate};
  const Matmul m = cached_matmul(key);
  if (m.prim) return execute(*m.prim, key, A, B, nullptr, C);
  // No bf16 matmul here: each stored operand widened to f32 (its rows of ld values, the last
  // one only as long as the product reads).
  const auto widen = [](const uint16_t* src, int64_t rows, int64_t cols, int64_t ld, std::vector<float>& dst) {
    const size_t n = rows > 0 && cols > 0 ? size_t((rows - 1) * ld + cols) : 0;
    dst.resize(std::max<size_t>(n, 1));
    traits(DType::BF16).to_f32(src, dst.data(), int64_t(n));
  };
  thread_local std::vector<float> a, b;
  widen(A, trans_a ? K : M, trans_a ? M : K, lda, a);
  widen(B, trans_b ? N : K, trans_b ? K : N, ldb, b);
  gemm_f32(trans_a, trans_b, M, N, K, 1.0f, a.data(), lda, b.data(), ldb, accumulate ? 1.0f : 0.0f, C, ldc, what);
}

void linear_gemm(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, int64_t T,
                 int64_t K, int64_t N) {
  GP_CHECK(w.layout() == Layout::kRows, "[linear] the oneDNN path reads stored rows, not the packed ",
           w.describe());
  if (T == 0 || N == 0) return;
  const auto* xp = static_cast<const float*>(x.raw());
  auto* yp = static_cast<float*>(y.raw());
  const int64_t ldx = x.ndim() >= 2 ? int64_t(ops::detail::ld_of(x) / 4) : K;
  const int64_t ldy = y.ndim() >= 2 ? int64_t(ops::detail::ld_of(y) / 4) : N;
  std::vector<float> bias_f32;
  const float* b = nullptr;
  if (bias) {
    if (bias->dtype() == DType::F32) {
      b = bias->data<float>();
    } else {
      bias_f32.resize(size_t(N));
      traits(bias->dtype()).to_f32(bias->raw(), bias_f32.data(), N);
      b = bias_f32.data();
    }
  }
  const DType wt = w.dtype();
  const int64_t ldw_elems = int64_t(w.stride(0) / traits(wt).block_bytes);
  engine();  // applies the ISA cap before any other oneDNN call
  if (wt == DType::F32 &&
      run_matmul(xp, ldx, dt::f32, w.raw(), ldw_elems, dt::f32, b, yp, ldy, T, K, N))
    return;
  if (wt == DType::BF16 && isa() == Isa::Avx512 && cpu_features().avx512_bf16) {
    // Activations to bf16; the product accumulates in f32.
    if (run_matmul(activations_bf16(xp, ldx, T, K), K, dt::bf16, w.raw(), ldw_elems, dt::bf16, b, yp,
                   ldy, T, K, N))
      return;
  }
  if (traits(wt).block_size > 1)
    matmul_quantized(xp, ldx, w, b, yp, ldy, T, K, N);
  else
    matmul_converting(xp, ldx, w, b, yp, ldy, T, K, N);
}

}  // namespace genperf::cpu
