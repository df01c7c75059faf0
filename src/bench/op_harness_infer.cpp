// The op harness's inference cases (ops.h): each op run from a backend table, after ops::X's own
// argument checks, against ops::ref::X on the same inputs; outputs are strided row views (a
// column slice of a wider buffer) with guard values around them.
#include <cmath>
#include <string>

#include "backend/cpu/cpu_ops.h"
#include "bench/op_harness_cases.h"
#include "genperf/ops.h"
#include "genperf/runtime.h"
#include "ops/checks.h"

namespace genperf::bench::harness {
namespace {

using ops::Backend;

// Runs b's linear on x, w as ops::linear does after its checks.
void run_linear(const Backend& b, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y) {
  const auto d = ops::detail::check_linear(x, w, bias, y);
  ops::backend_kernel(b.linear, "linear", b)(x, w, bias, y, d.T, d.K, d.N);
}

// NMSE allowed for linear against the reference: f32 sums (1e-10); x rounded to bf16 where
// oneDNN's bf16 GEMM may run (1e-5); activations quantized to 8 bits for the block formats'
// integer kernels (1e-3, as tests/ops/test_qlinear.cpp).
double linear_tolerance(DType wt, int64_t T) {
  if (!traits(wt).is_float) return 1e-3;
  const bool gemm = T > cpu::gemv_max_rows(wt);
  const bool bf16 = gemm && wt == DType::BF16 && isa() == Isa::Avx512 && cpu_features().avx512_bf16;
  return bf16 ? 1e-5 : 1e-10;
}

// Every weight type with a to_f32 conversion (linear decodes what has no dedicated kernel).
std::vector<DType> weight_types() {
  std::vector<DType> v;
  for (int i = 0; i < int(DType::COUNT); ++i) {
    const DType t = DType(i);
    if (t != DType::I32 && traits(t).to_f32) v.push_back(t);
  }
  return v;
}

void add_linear(std::vector<Case>& out) {
  for (DType wt : weight_types()) {
    const int64_t bs = traits(wt).block_size;
    const std::vector<int64_t> Ks = bs == 1 ? std::vector<int64_t>{33, 64} : std::vector<int64_t>{bs, 3 * bs};
    for (int64_t K : Ks)
      for (int64_t N : {15, 17})
        for (int64_t T : {1, 40})
          for (bool prepared : {false, true}) {
            if (prepared && (bs == 1 || N != 17)) continue;  // packing: block formats, N % 16 == 0
            const int64_t NN = prepared ? 32 : N;
            const bool bias = N == 17;
            std::string name = std::string("w=") + dtype_name(wt) + cat_shape("T", T) +
                               cat_shape("K", K) + cat_shape("N", NN) + (bias ? " +bias" : "") +
                               (prepared ? " prepared" : "") + " strided x,y";
            out.push_back({"linear", name,
                           [prepared](const Backend& b) { return b.linear && (!prepared || b.prepare_weight); },
                           [=](const Backend& b, uint64_t seed) {
                             Rng rng(seed);
                             Guarded x(T, K, 5), y(T, NN, 2);
                             fill_normal(x.view(), rng);
                             const Tensor w = random_tensor({NN, K}, DType::F32, rng, 0.1).to(wt);
                             const Tensor bv = random_tensor({NN}, DType::F32, rng);
                             const Tensor* bp = bias ? &bv : nullptr;
                             Tensor yr = Tensor::zeros({T, NN});
                             ops::ref::linear(x.view(), w, bp, yr);
                             const Tensor wk = prepared ? b.prepare_weight(w) : w;
                             run_linear(b, x.view(), wk, bp, y.view());
                             return Checks{{"y", "nmse", nmse(values(y.view()), values(yr)), linear_tolerance(wt, T)},
                                           y.guard_check("y")};
                           }});
          }
  }
  // The 1-D form of one row (decode's x and y vectors).
  for (DType wt : {DType::F32, DType::Q4_0, DType::Q6_K}) {
    out.push_back({"linear", std::string("w=") + dtype_name(wt) + " 1-D x,y K=512 N=48",
                   [](const Backend& b) { return b.linear != nullptr; },
                   [wt](const Backend& b, uint64_t seed) {
                     Rng rng(seed);
                     const Tensor x = random_tensor({512}, DType::F32, rng);
                     const Tensor w = random_tensor({48, 512}, DType::F32, rng, 0.1).to(wt);
                     Tensor y = Tensor::zeros({48}), yr = Tensor::zeros({48});
                     ops::ref::linear(x, w, nullptr, yr);
                     run_linear(b, x, w, nullptr, y);
                     return Checks{{"y", "nmse", nmse(values(y), values(yr)), linear_tolerance(wt, 1)}};
                   }});
  }
}

void add_linear_many(std::vector<Case>& out) {
  for (int64_t T : {1, 40}) {
    out.push_back(
        {"linear_many", "q4_0 N=32, q8_0 N=17 +bias, f32 N=15, bf16 N=16; K=256" + cat_shape("T", T) + " strided",
         [](const Backend& b) { return b.linear_many != nullptr; },
         [T](const Backend& b, uint64_t seed) {
           Rng rng(seed);
           const int64_t K = 256;
           const DType types[] = {DType::Q4_0, DType::Q8_0, DType::F32, DType::BF16};
           const int64_t Ns[] = {32, 17, 15, 16};
           Guarded x(T, K, 4);
           fill_normal(x.view(), rng);
           std::vector<Tensor> ws, bs;
           std::vector<Guarded> ys;
           ys.reserve(4);
           for (int i = 0; i < 4; ++i) {
             ws.push_back(random_tensor({Ns[i], K}, DType::F32, rng, 0.1).to(types[i]));
             bs.push_back(random_tensor({Ns[i]}, DType::F32, rng));
             ys.emplace_back(T, Ns[i], 2);
           }
           std::vector<ops::LinearOut> outs;
           for (int i = 0; i < 4; ++i) {
             ops::detail::check_linear(x.view(), ws[size_t(i)], i == 1 ? &bs[1] : nullptr, ys[size_t(i)].view());
             outs.push_back({&ws[size_t(i)], i == 1 ? &bs[1] : nullptr, &ys[size_t(i)].view()});
           }
           ops::backend_kernel(b.linear_many, "linear_many", b)(x.view(), outs, T, K);
           Checks c;
           for (int i = 0; i < 4; ++i) {
             Tensor yr = Tensor::zeros({T, Ns[i]});
             ops::ref::linear(x.view(), ws[size_t(i)], i == 1 ? &bs[1] : nullptr, yr);
             const std::string what = std::string("y[") + dtype_name(types[i]) + "]";
             c.push_back({what, "nmse", nmse(values(ys[size_t(i)].view()), values(yr)), linear_tolerance(types[i], T)});
             c.push_back(ys[size_t(i)].guard_check(what));
           }
           return c;
         }});
  }
}

void add_embedding(std::vector<Case>& out) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
    const int64_t K = traits(dt).block_size > 32 ? 256 : 96, V = 23;
    out.push_back({"embedding", std::string("table=") + dtype_name(dt) + cat_shape("V", V) + cat_shape("K", K) +
                                    " T=6 repeats, strided out",
                   [](const Backend& b) { return b.embedding != nullptr; },
                   [=](const Backend& b, uint64_t seed) {
                     Rng rng(seed);
                     const Tensor table = random_tensor({V, K}, DType::F32, rng).to(dt);
                     const std::vector<int32_t> ids = {0, 22, 5, 5, 11, 0};
                     Guarded o(6, K, 3);
                     Tensor ref = Tensor::zeros({6, K});
                     ops::ref::embedding(table, ids, ref);
                     ops::detail::check_embedding(table, ids, o.view());
                     ops::backend_kernel(b.embedding, "embedding", b)(table, ids, o.view());
                     return Checks{{"out", "max rel", rel_error(values(o.view()), values(ref)), 1e-6},
                                   o.guard_check("out")};
                   }});
  }
}

// Elementwise ops over T rows of K at the vector widths' boundaries.
constexpr int64_t kWidths[] = {1, 31, 32, 33, 1000};

void add_rows(std::vector<Case>& out) {
  for (int64_t K : kWidths) {
    const int64_t T = 3;
    out.push_back({"rms_norm", cat_shape("T", T).substr(1) + cat_shape("K", K) + " strided x,y",
                   [](const Backend& b) { return b.rms_norm != nullptr; },
                   [=](const Backend& b, uint64_t seed) {
                     Rng rng(seed);
                     Guarded x(T, K), y(T, K, 2);
                     fill_normal(x.view(), rng, 3.0);
                     const Tensor w = random_tensor({K}, DType::F32, rng);
                     Tensor ref = Tensor::zeros({T, K});
                     ops::ref::rms_norm(x.view(), w, 1e-5f, ref);
                     ops::detail::check_rms_norm(x.view(), w, y.view());
                     ops::backend_kernel(b.rms_norm, "rms_norm", b)(x.view(), w, 1e-5f, y.view());
                     return Checks{{"y", "atol+rtol", elementwise(values(y.view()), values(ref), 1e-6, 1e-5), 1.0},
                                   y.guard_check("y")};
                   }});
    out.push_back({"silu_mul", cat_shape("T", T).substr(1) + cat_shape("F", K) + " strided",
                   [](const Backend& b) { return b.silu_mul != nullptr; },
                   [=](const Backend& b, uint64_t seed) {
                     Rng rng(seed);
                     Guarded g(T, K), u(T, K, 1), o(T, K, 2);
                     fill_normal(g.view(), rng, 4.0);
                     fill_normal(u.view(), rng);
                     Tensor ref = Tensor::zeros({T, K});
                     ops::ref::silu_mul(g.view(), u.view(), ref);
                     ops::detail::check_silu_mul(g.view(), u.view(), o.view());
                     ops::backend_kernel(b.silu_mul, "silu_mul", b)(g.view(), u.view(), o.view());
                     return Checks{{"out", "atol+rtol", elementwise(values(o.view()), values(ref), 1e-6, 1e-5), 1.0},
                                   o.guard_check("out")};
                   }});
    out.push_back({"add_inplace", cat_shape("T", T).substr(1) + cat_shape("K", K) + " strided",
                   [](const Backend& b) { return b.add_inplace != nullptr; },
                   [=](const Backend& b, uint64_t seed) {
                     Rng rng(seed);
                     Guarded x(T, K), y(T, K, 1);
                     fill_normal(x.view(), rng);
                     fill_normal(y.view(), rng);
                     Tensor ref = x.view().clone();
                     ops::ref::add_inplace(ref, y.view());
                     ops::detail::check_add(x.view(), y.view());
                     ops::backend_kernel(b.add_inplace, "add_inplace", b)(x.view(), y.view());
                     return Checks{{"x", "max abs", elementwise(values(x.view()), values(ref), 0, 0), 0.0},
                                   x.guard_check("x")};
                   }});
  }
}

void add_rope(std::vector<Case>& out) {
  for (RopeStyle style : {RopeStyle::Neox, RopeStyle::Interleaved})
    for (int64_t D : {8, 64}) {
      const int64_t T = 5, H = 3;
      out.push_back({"rope", std::string(style == RopeStyle::Neox ? "neox" : "interleaved") + " T=5 H=3" +
                                 cat_shape("D", D) + " pos 17.. strided",
                     [](const Backend& b) { return b.rope != nullptr; },
                     [=](const Backend& b, uint64_t seed) {
                       Rng rng(seed);
                       Guarded x(T, H * D);
                       fill_normal(x.view(), rng);
                       std::vector<float> inv(size_t(D / 2));
                       for (size_t i = 0; i < inv.size(); ++i)
                         inv[i] = float(std::pow(10000.0, -2.0 * double(i) / double(D)));
                       const std::vector<int32_t> pos = {17, 18, 19, 40, 41};
                       Tensor ref = x.view().clone();
                       ops::ref::rope(ref, H, pos, inv, style);
                       const int64_t dd = ops::detail::check_rope(x.view(), H, pos, inv);
                       ops::backend_kernel(b.rope, "rope", b)(x.view(), H, dd, pos, inv, style);
                       const auto r = values(ref);
                       double rms = 0;
                       for (double v : r) rms += v * v;
                       rms = std::sqrt(rms / double(r.size()));
                       return Checks{{"x", "atol+rtol", elementwise(values(x.view()), r, 1e-6 * rms, 1e-5), 1.0},
                                     x.guard_check("x")};
                     }});
    }
}

void add_store_rows(std::vector<Case>& out) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
    const int64_t T = 5, N = dt == DType::Q8_0 ? 96 : 33;
    out.push_back({"store_rows", std::string("dst=") + dtype_name(dt) + cat_shape("T", T) + cat_shape("N", N) +
                                     " strided src, rows of a wider cache",
                   [](const Backend& b) { return b.store_rows != nullptr; },
                   [=](const Backend& b, uint64_t seed) {
                     Rng rng(seed);
                     Guarded src(T, N, 3);
                     fill_normal(src.view(), rng);
                     // dst: T rows of a [T + 3, N] cache, starting at row 2.
                     Tensor cache = Tensor::zeros({T + 3, N}, dt), cref = Tensor::zeros({T + 3, N}, dt);
                     Tensor dst = cache.slice(0, 2, T), dref = cref.slice(0, 2, T);
                     ops::ref::store_rows(src.view(), dref);
                     ops::detail::check_store_rows(src.view(), dst);
                     ops::backend_kernel(b.store_rows, "store_rows", b)(src.view(), dst);
                     const auto got = values(cache.to(DType::F32)), ref = values(cref.to(DType::F32));
                     // Rounding is exact (the same nearest-even rule): the bytes decode equal.
                     return Checks{{"dst", "max abs", elementwise(got, ref, 0, 0), 0.0}, src.guard_check("src")};
                   }});
  }
}

void add_attention(std::vector<Case>& out) {
  struct A {
    DType kv;
    int64_t H, Hkv, D, T, q_pos0;
    bool head_major;
  };
  const A shapes[] = {
      {DType::F32, 4, 4, 32, 7, 0, false},  {DType::F32, 4, 2, 64, 1, 9, false},
      {DType::F32, 6, 2, 32, 9, 5, true},   {DType::F16, 4, 2, 32, 1, 20, false},
      {DType::F16, 4, 2, 64, 7, 3, true},   {DType::BF16, 4, 1, 32, 7, 4, false},
      {DType::BF16, 4, 2, 32, 1, 13, true}, {DType::Q8_0, 4, 2, 32, 7, 5, false},
      {DType::Q8_0, 4, 2, 64, 1, 30, true}, {DType::F32, 2, 1, 96, 70, 0, true},
  };
  for (const A& a : shapes) {
    const int64_t S = a.q_pos0 + a.T + 3;  // keys past the last query's position are ignored
    out.push_back(
        {"attention", std::string("kv=") + dtype_name(a.kv) + cat_shape("H", a.H) + cat_shape("Hkv", a.Hkv) +
                          cat_shape("D", a.D) + cat_shape("T", a.T) + cat_shape("q_pos0", a.q_pos0) +
                          cat_shape("S", S) + (a.head_major ? " head-major cache" : " row cache") + " strided q,out",
         [](const Backend& b) { return b.attention != nullptr; },
         [=](const Backend& b, uint64_t seed) {
           Rng rng(seed);
           Guarded q(a.T, a.H * a.D, 2), o(a.T, a.H * a.D, 3);
           fill_normal(q.view(), rng);
           const std::vector<int64_t> shape =
               a.head_major ? std::vector<int64_t>{a.Hkv, S, a.D} : std::vector<int64_t>{S, a.Hkv * a.D};
           const Tensor k = random_tensor(shape, DType::F32, rng).to(a.kv);
           const Tensor v = random_tensor(shape, DType::F32, rng).to(a.kv);
           const float scale = 1.0f / std::sqrt(float(a.D));
           Tensor ref = Tensor::zeros({a.T, a.H * a.D});
           ops::ref::attention(q.view(), k, v, a.H, a.Hkv, a.q_pos0, scale, ref);
           const auto d = ops::detail::check_attention(q.view(), k, v, a.H, a.Hkv, a.q_pos0, o.view());
           ops::backend_kernel(b.attention, "attention", b)(q.view(), k, v, a.H, a.Hkv, a.q_pos0, scale,
                                                           o.view(), d.T, d.S, d.D);
           return Checks{{"out", "nmse", nmse(values(o.view()), values(ref)), 1e-10}, o.guard_check("out")};
         }});
  }
}

}  // namespace

void add_infer_cases(std::vector<Case>& out) {
  add_linear(out);
  add_linear_many(out);
  add_embedding(out);
  add_rows(out);
  add_rope(out);
  add_store_rows(out);
  add_attention(out);
}

}  // namespace genperf::bench::harness
