// CPU op drivers: split each op over OpenMP threads and call the kernels of the selected ISA
// level (kernels.h). Small ops stay on the calling thread, where a parallel region would cost
// more than the work. Arguments were checked by ops::X (src/ops/dispatch.cpp).
//
// Shape legend: T tokens, K input features, N output features, H query heads, Hkv key/value
// heads, D head dimension, S keys in the cache.
#include "backend/cpu/cpu_ops.h"

#include <float.h>
#include <math.h>
#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cpu/qkernels.h"
#include "backend/cpu/qpack.h"
#include "genperf/error.h"
#include "genperf/runtime.h"
#include "ops/checks.h"

namespace genperf::cpu {

const Kernels& kernels() {
  switch (isa()) {
    case Isa::Avx512: return kernels_avx512();
    case Isa::Avx2: return kernels_avx2();
    case Isa::Generic: break;
  }
  return kernels_generic();
}

namespace {

// Elements below which an elementwise op runs on one thread.
constexpr int64_t kParallelElems = int64_t(1) << 15;

using ops::detail::rows_of;
// Row stride in floats of an f32 activation (any value for a single row).
size_t ld_floats(const Tensor& t) { return ops::detail::ld_of(t) / 4; }
int threads_for(int64_t elems) { return elems >= kParallelElems ? num_threads() : 1; }

// The most rows for which block-quantized weights take the integer GEMV rather than the
// decoded-panel GEMM (gemm_onednn.cpp). GEMV/GEMM time at K=768, N=2048 (one thread, CPU time,
// Q4_0 Q8_0 Q4_K Q6_K alike): 0.6 at T=8, 0.9-0.96 at 16, 1.1-1.2 at 24.
// Beyond it, the integer GEMM (qkernels.h) where the level has one (AVX-512 and AVX2), at every
// T: it beat the decoded panels from T = 8 up to 512 (BM_LinearRows path 2 against 1, K=768,
// N=2048, one thread, CPU time, Zen 5; GEMV / panels / integer GEMM in us):
//   T=16   Q4_0 247/378/253  Q8_0 412/479/402  Q4_K 321/417/321
//   T=64   Q4_0 930/727/501  Q8_0 1712/904/721  Q4_K 1112/748/521
//   T=512  Q4_0 8917/4321/2896  Q8_0 13522/4699/3070  Q4_K 9665/4380/2882
// and Q6_K (two threads, real time, idle machine): T=16 219/263/210, T=64 833/466/396,
// T=512 6092/2389/2197.
// On AVX2 (GENPERF_ISA=avx2, two threads, real time) the integer GEMM crosses the GEMV at about
// T = 12 (Q4_0 126/143 us at T=8, 189/189 at 12, 251/224 at 16; Q4_K 196/201, 209/242,
// 267/243), so 16 costs it at most 10% over T = 13..16, and beats the panels 1.2x (Q8_0) to
// 1.7x (Q4_K) at T = 512.
// With AVX-VNNI the GEMM is 1.2-1.7x faster and crosses earlier: on prepared (packed) weights
// (BM_LinearRows paths 3 and 4, GENPERF_ISA=avxvnni, 3 rounds, GFLOP/s GEMV/GEMM) Q4_0 236/206 at
// T=4, 250/268 at 8, 261/404 at 12, 286/420 at 16; Q8_0 215/182, 245/255, 264/302, 269/324;
// Q4_K 330/236, 355/317, 367/374, 384/403. So GEMV up to 8 rows there.
// Without AVX-VNNI, on prepared weights (the same paths, GENPERF_ISA=avx2, 3 rounds, GFLOP/s
// GEMV/GEMM, median): Q4_0 179/190 at T=8, 191/216 at 12, 223/244 at 16; Q8_0 140/125, 118/153,
// 152/151; Q4_K 200/175, 185/264, 231/241; Q6_K 139/119, 128/143, 137/162. At 12 rows the GEMM
// led in all four formats in every round, at 8 the GEMV in three of four: GEMV up to 11 rows.
constexpr int64_t kQuantGemvMaxRows = 16, kQuantGemvMaxRowsAvx2 = 11, kQuantGemvMaxRowsAvxVnni = 8;

// f32 copy of a small vector (norm weight, bias) of any float type; `keep` owns converted data.
const float* as_f32(const Tensor& t, std::vector<float>& keep) {
  if (t.dtype() == DType::F32) return t.data<float>();
  keep.resize(size_t(t.numel()));
  traits(t.dtype()).to_f32(t.raw(), keep.data(), t.numel());
  return keep.data();
}

}  // namespace

// ------------------------------------------------------------------------------------------
// linear

// The most rows for which linear runs as GEMV. The GEMV kernels read the weights once for all
// rows, at close to the bandwidth floor while T is small; oneDNN packs the weights per call and,
// for bf16, rounds x (for f16 it has no kernel: weights are converted to f32 block by block).
// Crossovers measured with bench_kernels (BM_LinearRows, K=768, N=2048) on a Zen 5 core:
// bf16 8, f32 between 16 and 32, f16 beyond 32; FP8 with block scales 12 (GEMV 160 against
// 135 GFLOP/s at T = 8, 183 against 187 at 12, 169 against 200 at 16). The integer block formats:
// kQuantGemvMaxRows on AVX-512, kQuantGemvMaxRowsAvx2 or kQuantGemvMaxRowsAvxVnni (where the
// AVX2 level has AVX-VNNI) on AVX2.
int64_t gemv_max_rows(DType wt) {
  switch (wt) {
    case DType::F32: return 16;
    case DType::F16: return 32;
    case DType::BF16: return 8;
    case DType::F8_E4M3_B32:
    case DType::F8_E5M2_B32: return 12;
    default:
      if (traits(wt).block_size == 1) return 8;
      if (isa() != Isa::Avx2) return kQuantGemvMaxRows;
      return avx_vnni() ? kQuantGemvMaxRowsAvxVnni : kQuantGemvMaxRowsAvx2;
  }
}

namespace {

bool has_gemv(DType wt) {
  return kernels_generic().gemv[size_t(wt)] || kernels_generic().qgemv[size_t(wt)];
}

// Each thread takes a contiguous range of output rows, cut at multiples of 16 so that no two
// threads write the same cache line of y; fn(n0, n1) runs one range.
template <class Fn>
void split_rows(int64_t N, int64_t K, const Fn& fn, int64_t step = 16) {
  const int nt = int(std::min<int64_t>(threads_for(N * K), (N + step - 1) / step));
#pragma omp parallel num_threads(nt)
  {
    const int64_t id = omp_get_thread_num(), n = omp_get_num_threads();
    const int64_t blocks = (N + step - 1) / step;
    const int64_t n0 = std::min(N, blocks * id / n * step),
                  n1 = std::min(N, blocks * (id + 1) / n * step);
    if (n0 < n1) fn(n0, n1);
  }
}

bool packed(const Tensor& w) { return w.layout() == Layout::kRows16; }
// The packed kernels' level is selected: AVX-512 VNNI or AVX2 (AVX-512 without VNNI has none).
bool packed_level() {
  return (isa() == Isa::Avx512 && cpu_features().avx512_vnni) || isa() == Isa::Avx2;
}
// Whether prepare_weight packs weights of type wt at the selected level. On AVX2 not Q6_K: its
// packed GEMV (4 quant vectors of 6 bits per step, in 256-bit registers) ran at 0.77-0.87x of the
// row kernel (bench_kernels BM_QGemv, 2 threads, Zen 5 at GENPERF_ISA=avx2, 32000 x 768 and
// 11008 x 4096: 39.6 and 39.9 GB/s against 45.5 and 51.4; with AVX-VNNI 33.8 and 40.7 against
// 45.3 and 49.7). Q8_0 only with AVX-VNNI: without it, its packed GEMV ran at 0.84-0.97x (41.1
// against 48.7 GB/s at 11008 x 4096, 36.8 against 41.0 at 4096 x 11008); with it, one vpdpbusd
// reads the packed (flipped) bytes as they are, and from cache (one core, 512 x 768 and
// 128 x 4096) it ran 1.70-1.85x the rows (59.6 and 60.9 GB/s against 35.0 and 32.9).
// Their packed kernels still read a weight packed at AVX-512.
bool packs_at_level(DType wt) {
  if (!packed_level()) return false;
  if (isa() != Isa::Avx2) return true;
  return wt != DType::Q6_K && (wt != DType::Q8_0 || avx_vnni());
}

// The packed GEMV or GEMM of the selected level (both read the same layout, whichever level
// packed it), else the scalar packed kernel (which takes any number of rows).
QGemvFn packed_kernel(DType wt, bool gemm) {
  if (isa() == Isa::Avx2)
    return gemm ? qgemm_packed_avx2(wt, avx_vnni()) : qgemv_packed_avx2(wt, avx_vnni());
  if (packed_level()) return gemm ? qgemm_packed_avx512(wt) : qgemv_packed_avx512(wt);
  return qgemv_packed_generic(wt);
}

// The integer GEMM of the selected level for the weight (qkernels.h), null where none. A packed
// weight always has one, since the decoded panels cannot read it.
QGemvFn qgemm_for(const Tensor& w) {
  if (packed(w)) return packed_kernel(w.dtype(), true);
  if (isa() == Isa::Avx2) return qgemm_avx2(w.dtype(), avx_vnni());
  if (isa() != Isa::Avx512) return nullptr;
  return qgemm_avx512(w.dtype(), cpu_features().avx512_vnni);
}

// The GEMV kernel of the selected level for weights of type wt, else the scalar one: the integer
// GEMV for the block formats (q), the float GEMV otherwise (f); exactly one is set.
struct GemvKernel {
  QGemvFn q = nullptr;
  GemvFn f = nullptr;
};
GemvKernel gemv_kernel(const Tensor& w) {
  const DType wt = w.dtype();
  const Kernels &kr = kernels(), &gen = kernels_generic();
  GemvKernel k;
  if (packed(w)) {  // a packed weight read at another level (a test's or GENPERF_ISA's)
    k.q = packed_kernel(wt, false);
    GP_CHECK(k.q, "[linear] no kernel for packed weights of type ", dtype_name(wt));
    return k;
  }
  if (gen.qgemv[size_t(wt)])
    k.q = kr.qgemv[size_t(wt)] ? kr.qgemv[size_t(wt)] : gen.qgemv[size_t(wt)];
  else
    k.f = kr.gemv[size_t(wt)] ? kr.gemv[size_t(wt)] : gen.gemv[size_t(wt)];
  GP_CHECK(k.q || k.f, "[linear] no GEMV kernel for weights of type ", dtype_name(wt));
  return k;
}

// x's rows quantized to 8-bit blocks for the integer kernels (qkernels.h), into the calling
// thread's buffer, kept between calls (valid until its next call).
QAct quantize_rows(const Tensor& x, int64_t T, int64_t K) {
  thread_local std::vector<char> act;
  act.resize(qact_bytes(T, K));
  const QAct a = qact_view(act.data(), T, K);
  const float* xp = x.data<float>();
  const size_t ldx = ld_floats(x);
  const auto quantize = kernels().quantize_act;
#pragma omp parallel for num_threads(threads_for(T * K)) schedule(static)
  for (int64_t t = 0; t < T; ++t) quantize(xp + size_t(t) * ldx, a, t);
  return a;
}

// Block-quantized weights: x rows quantized to 8-bit blocks once (qkernels.h), then the integer
// GEMV (gemm: the integer GEMM, whose panels are 32 rows). The activation buffer is the calling
// thread's, kept between calls.
void linear_qgemv(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, int64_t T,
                  int64_t K, int64_t N, QGemvFn gemm = nullptr) {
  const QGemvFn f = gemm ? gemm : gemv_kernel(w).q;
  if (T == 0 || N == 0) return;
  const QAct a = quantize_rows(x, T, K);
  std::vector<float> bias_keep;
  const float* b = bias ? as_f32(*bias, bias_keep) : nullptr;
  float* yp = y.data<float>();
  const size_t ldy = ld_floats(y), ldw = w.stride(0);
  split_rows(
      N, K, [&](int64_t n0, int64_t n1) { f(a, T, w.raw(), ldw, n0, n1, b, yp, ldy); },
      gemm ? 32 : 16);
}

}  // namespace

void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, int64_t T, int64_t K,
            int64_t N) {
  if (T <= gemv_max_rows(w.dtype()) && has_gemv(w.dtype()))
    linear_gemv(x, w, bias, y, T, K, N);
  else if (!linear_qgemm(x, w, bias, y, T, K, N))
    linear_gemm(x, w, bias, y, T, K, N);
}

// One parallel region for several GEMVs of one x. The outputs' rows are cut into units of 16
// (whole cache lines of y, as split_rows does) costed by their weight bytes; each thread takes a
// contiguous run of units of equal total cost and calls each output's kernel once on its part.
// A kernel computes each row the same way whatever range it is given, starting on a multiple of
// 16, so the values are those of separate linear calls.
void linear_many(const Tensor& x, std::span<const ops::LinearOut> outs, int64_t T, int64_t K) {
  bool fused = outs.size() > 1;
  for (const ops::LinearOut& o : outs)
    fused = fused && T <= gemv_max_rows(o.w->dtype()) && has_gemv(o.w->dtype());
  if (!fused) {
    for (const ops::LinearOut& o : outs) linear(x, *o.w, o.bias, *o.y, T, K, o.w->size(0));
    return;
  }
  if (T == 0) return;
  constexpr int64_t kUnit = 16;
  struct Job {
    GemvKernel k;  // over the quantized rows (k.q) or x (k.f)
    const void* w;
    size_t ldw;
    int64_t N;
    const float* bias;
    float* y;
    size_t ldy;
    std::vector<float> bias_keep;
  };
  std::vector<Job> jobs(outs.size());
  std::vector<int64_t> unit_job;  // the job of each unit
  std::vector<int64_t> job_unit0;  // the first unit of each job
  std::vector<double> cost_mid;    // cost of the units before u plus half of u's
  double total = 0;
  int64_t rows = 0;
  bool any_q = false;
  for (size_t j = 0; j < outs.size(); ++j) {
    const ops::LinearOut& o = outs[j];
    Job& jb = jobs[j];
    jb.k = gemv_kernel(*o.w);
    any_q = any_q || jb.k.q;
    jb.w = o.w->raw();
    jb.ldw = o.w->stride(0);
    jb.N = o.w->size(0);
    jb.bias = o.bias ? as_f32(*o.bias, jb.bias_keep) : nullptr;
    jb.y = o.y->data<float>();
    jb.ldy = ld_floats(*o.y);
    rows += jb.N;
    job_unit0.push_back(int64_t(unit_job.size()));
    for (int64_t n = 0; n < jb.N; n += kUnit) {
      const double c = double(std::min(kUnit, jb.N - n)) * double(jb.ldw);
      unit_job.push_back(int64_t(j));
      cost_mid.push_back(total + c / 2);
      total += c;
    }
  }
  const QAct a = any_q ? quantize_rows(x, T, K) : QAct{};
  const float* xp = x.data<float>();
  const size_t ldx = ld_floats(x);
  const int64_t units = int64_t(unit_job.size());
  if (units == 0) return;  // every output has zero rows
  const int nt = int(std::min<int64_t>(threads_for(rows * K), units));
#pragma omp parallel num_threads(nt)
  {
    const int id = omp_get_thread_num(), n = omp_get_num_threads();
    // Thread i takes the units whose middle falls in its share [i, i+1) * total / n.
    auto bound = [&](int i) {
      return int64_t(std::lower_bound(cost_mid.begin(), cost_mid.end(), total * i / n) - cost_mid.begin());
    };
    const int64_t u1 = id + 1 == n ? units : bound(id + 1);
    for (int64_t u = id == 0 ? 0 : bound(id); u < u1;) {
      const int64_t j = unit_job[size_t(u)];
      const int64_t v = std::min(u1, j + 1 < int64_t(jobs.size()) ? job_unit0[size_t(j + 1)] : units);
      const Job& jb = jobs[size_t(j)];
      const int64_t n0 = (u - job_unit0[size_t(j)]) * kUnit,
                    n1 = std::min(jb.N, (v - job_unit0[size_t(j)]) * kUnit);
      if (jb.k.q)
        jb.k.q(a, T, jb.w, jb.ldw, n0, n1, jb.bias, jb.y, jb.ldy);
      else
        jb.k.f(xp, ldx, T, jb.w, jb.ldw, K, n0, n1, jb.bias, jb.y, jb.ldy);
      u = v;
    }
  }
}

bool linear_qgemm(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, int64_t T,
                  int64_t K, int64_t N) {
  const QGemvFn g = qgemm_for(w);
  if (g) linear_qgemv(x, w, bias, y, T, K, N, g);
  return g != nullptr;
}

void linear_gemv(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, int64_t T,
                 int64_t K, int64_t N) {
  const GemvFn f = gemv_kernel(w).f;
  if (!f) return linear_qgemv(x, w, bias, y, T, K, N);
  if (T == 0 || N == 0) return;
  std::vector<float> bias_keep;
  const float* b = bias ? as_f32(*bias, bias_keep) : nullptr;
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const size_t ldx = ld_floats(x), ldy = ld_floats(y), ldw = w.stride(0);
  split_rows(N, K,
             [&](int64_t n0, int64_t n1) { f(xp, ldx, T, w.raw(), ldw, K, n0, n1, b, yp, ldy); });
}

Tensor prepare_weight(const Tensor& w) {
  static const bool enabled = [] {
    const char* e = std::getenv("GENPERF_PACK");
    return !(e && std::string_view(e) == "0");
  }();
  if (!enabled || !packs_at_level(w.dtype()) || w.device() != Device::CPU || w.ndim() != 2 ||
      w.layout() != Layout::kRows || !packable(w.dtype(), w.size(1)) ||
      w.size(0) % kPackRows != 0 || w.size(0) == 0)
    return w;
  const int64_t N = w.size(0), K = w.size(1);
  Tensor p = Tensor::zeros({N, K}, w.dtype());
  p.storage()->layout = Layout::kRows16;
  const size_t group = size_t(kPackRows) * size_t(p.stride(0));
  const uint8_t* src = w.data<uint8_t>();
  uint8_t* dst = p.data<uint8_t>();
#pragma omp parallel for num_threads(threads_for(N * K)) schedule(static)
  for (int64_t g = 0; g < N / kPackRows; ++g)
    pack_rows16(w.dtype(), src + size_t(g) * kPackRows * w.stride(0), w.stride(0), kPackRows, K,
                dst + size_t(g) * group);
  // A file-backed weight's pages are no longer needed by this process's linear: drop them. The
  // mapping is private and weights from files are never written in place (LoRA merges and
  // quantization write new tensors), so any other reader of these bytes gets them back from the
  // file.
  if (w.storage()->file_backed) {
    const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    const uintptr_t b = (uintptr_t(src) + page - 1) / page * page,
                    e = (uintptr_t(src) + size_t(N) * w.stride(0)) / page * page;
    if (b < e) madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
  }
  return p;
}

// ------------------------------------------------------------------------------------------
// Elementwise ops, parallel over rows.

void embedding(const Tensor& table, std::span<const int32_t> ids, Tensor& out) {
  const int64_t T = int64_t(ids.size()), K = table.size(1);
  ToF32Fn conv = kernels().to_f32[size_t(table.dtype())];
  if (!conv) conv = traits(table.dtype()).to_f32;
  float* op = out.data<float>();
  const size_t ld = ld_floats(out);
  const int nt = threads_for(T * K);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t t = 0; t < T; ++t) conv(table.row(ids[size_t(t)]), op + size_t(t) * ld, K);
}

void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& y) {
  const int64_t T = rows_of(x), K = x.size(-1);
  std::vector<float> keep;
  const float* wf = as_f32(w, keep);
  const auto fn = kernels().rms_norm_row;
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const size_t ldx = ld_floats(x), ldy = ld_floats(y);
  const int nt = threads_for(T * K);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t t = 0; t < T; ++t) fn(xp + size_t(t) * ldx, wf, K, eps, yp + size_t(t) * ldy);
}

// cos and sin in f32 of float(pos) * inv_freq, as the reference computes them (and PyTorch's
// rotary embedding in float32); the kernel rotates every head of the row with them.
void rope(Tensor& x, int64_t nheads, int64_t D, std::span<const int32_t> pos,
          std::span<const float> inv_freq, RopeStyle style) {
  const int64_t T = rows_of(x), half = D / 2;
  const bool inter = style == RopeStyle::Interleaved;
  const auto fn = kernels().rope_row;
  float* xp = x.data<float>();
  const size_t ld = ld_floats(x);
  const int nt = threads_for(T * nheads * D);
#pragma omp parallel num_threads(nt)
  {
    std::vector<float> cs(static_cast<size_t>(D)), sn(static_cast<size_t>(D));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = 0; i < half; ++i) {
        const float angle = float(pos[size_t(t)]) * inv_freq[size_t(i)];
        const float c = cosf(angle), s = sinf(angle);
        if (inter) {  // the layout rope_row expects for adjacent pairs
          cs[size_t(2 * i)] = cs[size_t(2 * i + 1)] = c;
          sn[size_t(2 * i)] = -s;
          sn[size_t(2 * i + 1)] = s;
        } else {
          cs[size_t(i)] = c;
          sn[size_t(i)] = s;
        }
      }
      fn(xp + size_t(t) * ld, nheads, D, cs.data(), sn.data(), inter);
    }
  }
}

void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out) {
  const int64_t T = rows_of(gate), K = gate.size(-1);
  const auto fn = kernels().silu_mul_row;
  const float *g = gate.data<float>(), *u = up.data<float>();
  float* o = out.data<float>();
  const size_t lg = ld_floats(gate), lu = ld_floats(up), lo = ld_floats(out);
  const int nt = threads_for(T * K);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t t = 0; t < T; ++t) fn(g + size_t(t) * lg, u + size_t(t) * lu, o + size_t(t) * lo, K);
}

void add_inplace(Tensor& x, const Tensor& y) {
  const int64_t T = rows_of(x), K = x.size(-1);
  const auto fn = kernels().add_row;
  float* a = x.data<float>();
  const float* b = y.data<float>();
  const size_t la = ld_floats(x), lb = ld_floats(y);
  const int nt = threads_for(T * K);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t t = 0; t < T; ++t) fn(a + size_t(t) * la, b + size_t(t) * lb, K);
}

void store_rows(const Tensor& src, Tensor& dst) {
  // dst [T, N] row by row, or head-major [H, T, D]: head h of row t to dst[h, t].
  const bool heads = dst.ndim() == 3;
  const int64_t T = rows_of(src), H = heads ? dst.size(0) : 1;
  const int64_t D = heads ? dst.size(2) : src.size(-1);
  const size_t ls = ld_floats(src), lh = heads ? dst.stride(0) : 0,
               lt = heads ? dst.stride(1) : dst.ndim() == 1 ? 0 : dst.stride(0);
  const float* s = src.data<float>();
  char* d = static_cast<char*>(dst.raw());
  const auto& kr = kernels();
  // Rows to f32 or Q8_0 (fn), or to f16 / bf16 (half).
  void (*fn)(const float*, void*, int64_t) = nullptr;
  void (*half)(const float*, uint16_t*, int64_t) = nullptr;
  switch (dst.dtype()) {
    case DType::F32:
      fn = [](const float* x, void* y, int64_t n) { std::memcpy(y, x, size_t(n) * 4); };
      break;
    case DType::Q8_0: fn = kr.quantize_q8_0 ? kr.quantize_q8_0 : traits(DType::Q8_0).from_f32; break;
    case DType::F16: half = kr.f32_to_f16; break;
    default: half = kr.f32_to_bf16; break;
  }
  const int nt = threads_for(T * H * D);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < H * T; ++i) {
    const int64_t h = i / T, t = i % T;
    const float* x = s + size_t(t) * ls + size_t(h * D);
    char* y = d + size_t(h) * lh + size_t(t) * lt;
    if (fn) fn(x, y, D);
    else half(x, reinterpret_cast<uint16_t*>(y), D);
  }
}

// ------------------------------------------------------------------------------------------
// attention

namespace {

// Keys per split of a decode task: few enough splits that merging stays cheap.
constexpr int64_t kMinKeysPerSplit = 512;

AttentionTask base_task(const Tensor& q, const Tensor& k, const Tensor& v, int64_t D,
                        int64_t q_pos0, float scale) {
  AttentionTask a{};
  a.q = q.data<float>();
  a.ldq = ld_floats(q);
  // Rows of all heads [S, Hkv*D], or head-major [Hkv, S, D] (same strides for k and v).
  const bool head_major = k.ndim() == 3;
  a.kv = k.dtype();
  a.k = k.raw();
  a.ldk = k.stride(head_major ? 1 : 0);
  a.v = v.raw();
  a.ldv = v.stride(head_major ? 1 : 0);
  a.kv_head = head_major ? k.stride(0) : bytes_for(k.dtype(), D);
  a.D = D;
  a.q_pos0 = q_pos0;
  a.scale = scale;
  return a;
}

// Prefill: tasks of (head, tile of kAttnQueryBlock rows), heaviest (latest rows) first, handed
// out dynamically since causal tiles differ in work.
void attention_tiles(const AttentionTask& base, int64_t H, int64_t group, int64_t T, int64_t S,
                     float* out, size_t ldo, const Kernels& kr) {
  const int64_t tiles = (T + kAttnQueryBlock - 1) / kAttnQueryBlock, D = base.D;
#pragma omp parallel num_threads(num_threads())
  {
    std::vector<float> scratch(attention_scratch_floats(D) + 16);
    std::vector<float> stage(base.kv == DType::F32 ? 0 : size_t(2 * kAttnKeyBlock * D));
    std::vector<float> ml(static_cast<size_t>(2 * kAttnQueryBlock));
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < H * tiles; ++i) {
      const int64_t tile = tiles - 1 - i / H, h = i % H;
      AttentionTask a = base;
      a.hk = h / group;
      a.h0 = h;
      a.h1 = h + 1;
      a.t0 = tile * kAttnQueryBlock;
      a.t1 = std::min(T, a.t0 + kAttnQueryBlock);
      a.j0 = 0;
      a.j1 = S;
      a.acc = out + size_t(a.t0) * ldo + size_t(h * D);
      a.acc_ldt = ldo;
      a.acc_ldh = size_t(D);
      a.normalize = true;
      a.m = ml.data();
      a.l = ml.data() + kAttnQueryBlock;
      a.scratch = scratch.data();
      a.stage = stage.data();
      kr.attention(a);
    }
  }
}

// Decode (few rows): tasks of (kv head, range of keys), each taking every query head of the
// group and every row, so that a block of keys is read once per group. Key ranges are split
// when there are fewer kv heads than threads; partial results then merge by their softmax
// statistics.
void attention_decode(const AttentionTask& base, int64_t Hkv, int64_t group, int64_t T, float* out,
                      size_t ldo, const Kernels& kr) {
  const int64_t D = base.D, nq = group * T, visible = base.q_pos0 + T;
  const int nt = num_threads();
  int64_t splits = std::min((2 * int64_t(nt) + Hkv - 1) / Hkv,
                            (visible + kMinKeysPerSplit - 1) / kMinKeysPerSplit);
  splits = std::max<int64_t>(splits, 1);
  // Split boundaries on whole key blocks.
  const int64_t blocks = (visible + kAttnKeyBlock - 1) / kAttnKeyBlock;
  splits = std::min(splits, blocks);
  std::vector<float> part_m, part_l, part_acc;
  if (splits > 1) {
    part_m.resize(size_t(Hkv * splits * nq));
    part_l.resize(size_t(Hkv * splits * nq));
    part_acc.resize(size_t(Hkv * splits * nq * D));
  }
  const int team = int(std::min<int64_t>(nt, Hkv * splits));
#pragma omp parallel num_threads(team)
  {
    std::vector<float> scratch(attention_scratch_floats(D) + 16);
    std::vector<float> ml(static_cast<size_t>(2 * nq));
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < Hkv * splits; ++i) {
      const int64_t hk = i / splits, s = i % splits;
      AttentionTask a = base;
      a.hk = hk;
      a.h0 = hk * group;
      a.h1 = a.h0 + group;
      a.t0 = 0;
      a.t1 = T;
      a.j0 = blocks * s / splits * kAttnKeyBlock;
      a.j1 = std::min(visible, blocks * (s + 1) / splits * kAttnKeyBlock);
      a.scratch = scratch.data();
      a.stage = nullptr;  // the row path reads the cache as it is
      if (splits == 1) {
        a.acc = out + size_t(a.h0 * D);
        a.acc_ldt = ldo;
        a.acc_ldh = size_t(D);
        a.normalize = true;
        a.m = ml.data();
        a.l = ml.data() + nq;
      } else {
        a.acc = part_acc.data() + size_t(i * nq * D);
        a.acc_ldt = size_t(group * D);
        a.acc_ldh = size_t(D);
        a.normalize = false;
        a.m = part_m.data() + size_t(i * nq);
        a.l = part_l.data() + size_t(i * nq);
      }
      kr.attention(a);
    }
  }
  if (splits == 1) return;
  // out = sum_s acc_s e^(m_s - M) / sum_s l_s e^(m_s - M), M = max_s m_s.
  for (int64_t hk = 0; hk < Hkv; ++hk)
    for (int64_t qi = 0; qi < nq; ++qi) {
      const int64_t t = qi / group, h = hk * group + qi % group;
      float M = -FLT_MAX;
      for (int64_t s = 0; s < splits; ++s)
        M = std::max(M, part_m[size_t((hk * splits + s) * nq + qi)]);
      float* o = out + size_t(t) * ldo + size_t(h * D);
      std::fill(o, o + D, 0.0f);
      double l = 0.0;
      for (int64_t s = 0; s < splits; ++s) {
        const size_t at = size_t((hk * splits + s) * nq + qi);
        const float e = expf(part_m[at] - M);
        if (e == 0.0f) continue;
        l += double(part_l[at]) * e;
        const float* acc = part_acc.data() + at * size_t(D);
        for (int64_t d = 0; d < D; ++d) o[d] += acc[d] * e;
      }
      const float inv = l > 0 ? float(1.0 / l) : 0.0f;
      for (int64_t d = 0; d < D; ++d) o[d] *= inv;
    }
}

}  // namespace

void attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t nheads, int64_t nkv_heads,
               int64_t q_pos0, float scale, Tensor& out, int64_t T, int64_t S, int64_t D) {
  if (T == 0) return;
  const AttentionTask base = base_task(q, k, v, D, q_pos0, scale);
  const auto& kr = kernels();
  const int64_t group = nheads / nkv_heads;
  if (T >= kAttnTileMinRows)
    attention_tiles(base, nheads, group, T, S, out.data<float>(), ld_floats(out), kr);
  else
    attention_decode(base, nkv_heads, group, T, out.data<float>(), ld_floats(out), kr);
}

}  // namespace genperf::cpu
