// The op harness's training cases (ops_train.h), as families (op_harness_family.h).
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <type_traits>

#include "bench/op_harness_family.h"
#include "genperf/ops_train.h"

namespace genperf::bench::harness {
namespace {

struct Embedding : Projected<Embedding> {
  const char* fwd_op = "embedding_forward";
  const char* bwd_op = "embedding_backward";
  int64_t V = 11, C = 33, N = 9;
  std::vector<int32_t> tok = {3, 0, 10, 3, 5, 3, 7, 0, 9};
  double tol_fwd = 1e-7, tol_bwd = 1e-6;  // float rounding of the inputs: 2^-24 relative
  bool fd = true;
  std::vector<std::string> fd_inputs = {"wte"};
  bool has_fwd(const Backend& b) const { return b.train.embedding_forward; }
  bool has_bwd(const Backend& b) const { return b.train.embedding_backward; }
  Arrays make(Rng& r) const { return {{"wte", randn(r, size_t(V * C))}, {"G", randn(r, size_t(N * C))}}; }
  template <typename F>
  Arrays fwd(const Backend& b, const Arrays& in) const {
    auto wte = as<F>(at(in, "wte"));
    std::vector<F> o(static_cast<size_t>(N * C));
    GP_TRAIN(F, b, embedding_forward, o.data(), tok.data(), wte.data(), N, C, V);
    return {{"out", back(o)}};
  }
  template <typename F>
  Arrays bwd(const Backend& b, const Arrays& in, const Arrays&) const {
    auto G = as<F>(at(in, "G"));
    std::vector<F> d(static_cast<size_t>(V * C), F(0.5));
    GP_TRAIN(F, b, embedding_backward, d.data(), G.data(), tok.data(), N, C);
    auto r = back(d);
    for (auto& v : r) v -= 0.5;  // "+=": started from 0.5
    return {{"dwte", r}};
  }
};

struct RmsNorm : Projected<RmsNorm> {
  const char* fwd_op = "rmsnorm_forward";
  const char* bwd_op = "rmsnorm_backward";
  int64_t N = 5, C = 33;
  double tol_fwd = 1e-5, tol_bwd = 1e-5;
  bool fd = true;
  std::vector<std::string> fd_inputs = {"x", "w"};
  bool has_fwd(const Backend& b) const { return b.train.rmsnorm_forward; }
  bool has_bwd(const Backend& b) const { return b.train.rmsnorm_backward; }
  Arrays make(Rng& r) const {
    return {{"x", randn(r, size_t(N * C), 2.0)}, {"w", randn(r, size_t(C))}, {"G", randn(r, size_t(N * C))}};
  }
  template <typename F>
  Arrays fwd(const Backend& b, const Arrays& in) const {
    auto x = as<F>(at(in, "x")), w = as<F>(at(in, "w"));
    std::vector<F> o(static_cast<size_t>(N * C)), rstd(static_cast<size_t>(N));
    GP_TRAIN(F, b, rmsnorm_forward, o.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5);
    return {{"out", back(o)}, {"rstd", back(rstd)}};
  }
  template <typename F>
  Arrays bwd(const Backend& b, const Arrays& in, const Arrays& saved) const {
    auto x = as<F>(at(in, "x")), w = as<F>(at(in, "w")), G = as<F>(at(in, "G"));
    auto rstd = as<F>(at(saved, "rstd"));
    std::vector<F> dx(static_cast<size_t>(N * C), F(kNaN)), dw(static_cast<size_t>(C), F(0));
    GP_TRAIN(F, b, rmsnorm_backward, dx.data(), dw.data(), G.data(), x.data(), w.data(), rstd.data(), N, C);
    return {{"dx", back(dx)}, {"dw", back(dw)}};
  }
};

struct Rope : Projected<Rope> {
  const char* fwd_op = "rope_forward";
  const char* bwd_op = "rope_backward";
  RopeStyle style = RopeStyle::Neox;
  int64_t B = 2, T = 5, heads = 3, HS = 8, ld = 3 * 8 + 4;  // columns past the heads stay
  std::vector<float> inv_freq = {1.0f, 0.3f, 0.1f, 0.01f};
  double tol_fwd = 1e-5, tol_bwd = 1e-5;
  bool fd = true;
  std::vector<std::string> fd_inputs = {"x"};
  bool has_fwd(const Backend& b) const { return b.train.rope_forward; }
  bool has_bwd(const Backend& b) const { return b.train.rope_backward; }
  Arrays make(Rng& r) const { return {{"x", randn(r, size_t(B * T * ld))}, {"G", randn(r, size_t(B * T * ld))}}; }
  template <typename F>
  Arrays fwd(const Backend& b, const Arrays& in) const {
    const auto rt = ops::rope_table<F>(inv_freq, T);
    auto x = as<F>(at(in, "x"));
    GP_TRAIN(F, b, rope_forward, x.data(), ld, B * T, heads, HS, rt, style);
    return {{"out", back(x)}};
  }
  template <typename F>
  Arrays bwd(const Backend& b, const Arrays& in, const Arrays&) const {
    const auto rt = ops::rope_table<F>(inv_freq, T);
    auto d = as<F>(at(in, "G"));
    GP_TRAIN(F, b, rope_backward, d.data(), ld, B * T, heads, HS, rt, style);
    return {{"dx", back(d)}};
  }
};

struct Swiglu : Projected<Swiglu> {
  const char* fwd_op = "swiglu_forward";
  const char* bwd_op = "swiglu_backward";
  int64_t N = 4, FF = 33;
  double tol_fwd = 1e-6, tol_bwd = 1e-6;
  bool fd = true;
  std::vector<std::string> fd_inputs = {"gu"};
  bool has_fwd(const Backend& b) const { return b.train.swiglu_forward; }
  bool has_bwd(const Backend& b) const { return b.train.swiglu_backward; }
  Arrays make(Rng& r) const { return {{"gu", randn(r, size_t(N * 2 * FF), 2.0)}, {"G", randn(r, size_t(N * FF))}}; }
  template <typename F>
  Arrays fwd(const Backend& b, const Arrays& in) const {
    auto gu = as<F>(at(in, "gu"));
    std::vector<F> o(static_cast<size_t>(N * FF));
    GP_TRAIN(F, b, swiglu_forward, o.data(), gu.data(), N, FF);
    return {{"out", back(o)}};
  }
  template <typename F>
  Arrays bwd(const Backend& b, const Arrays& in, const Arrays&) const {
    auto gu = as<F>(at(in, "gu")), G = as<F>(at(in, "G"));
    std::vector<F> d(static_cast<size_t>(N * 2 * FF), F(kNaN));
    GP_TRAIN(F, b, swiglu_backward, d.data(), G.data(), gu.data(), N, FF);
    return {{"dgu", back(d)}};
  }
};

struct Matmul : Projected<Matmul> {
  const char* fwd_op = "matmul_forward";
  const char* bwd_op = "matmul_backward";
  int64_t N = 6, IC = 33, OC = 17;
  bool bias = true, bf16 = false;  // bf16: the float path rounds operands to bf16 (float only)
  double tol_fwd = 1e-5, tol_bwd = 1e-5;
  bool fd = true;
  std::vector<std::string> fd_inputs = {"x", "w", "b"};
  bool has_fwd(const Backend& b) const { return b.train.matmul_forward; }
  bool has_bwd(const Backend& b) const { return b.train.matmul_backward; }
  Arrays make(Rng& r) const {
    return {{"x", randn(r, size_t(N * IC))}, {"w", randn(r, size_t(OC * IC), 0.3)}, {"b", randn(r, size_t(OC))},
            {"G", randn(r, size_t(N * OC))}};
  }
  struct Scratch {
    std::vector<uint16_t> inp, dout, w;
    ops::Bf16Scratch s;
  };
  Scratch scratch() const {
    Scratch s{std::vector<uint16_t>(static_cast<size_t>(N * IC)), std::vector<uint16_t>(static_cast<size_t>(N * OC)),
              std::vector<uint16_t>(static_cast<size_t>(OC * IC)), {}};
    s.s = {s.inp, s.dout, s.w};
    return s;
  }
  template <typename F>
  Arrays fwd(const Backend& b, const Arrays& in) const {
    auto x = as<F>(at(in, "x")), w = as<F>(at(in, "w")), bv = as<F>(at(in, "b"));
    std::vector<F> o(static_cast<size_t>(N * OC));
    Scratch s = scratch();
    const ops::Bf16Scratch* sp = bf16 && std::is_same_v<F, float> ? &s.s : nullptr;
    GP_TRAIN(F, b, matmul_forward, o.data(), x.data(), w.data(), bias ? bv.data() : nullptr, N, IC, OC, sp);
    return {{"out", back(o)}};
  }
  template <typename F>
  Arrays bwd(const Backend& b, const Arrays& in, const Arrays&) const {
    auto x = as<F>(at(in, "x")), w = as<F>(at(in, "w")), G = as<F>(at(in, "G"));
    std::vector<F> dx(static_cast<size_t>(N * IC), F(kNaN)), dw(static_cast<size_t>(OC * IC), F(0)), db(static_cast<size_t>(OC), F(0));
    Scratch s = scratch();
    const ops::Bf16Scratch* sp = bf16 && std::is_same_v<F, float> ? &s.s : nullptr;
    GP_TRAIN(F, b, matmul_backward, dx.data(), dw.data(), bias ? db.data() : nullptr, G.data(), x.data(),
             w.data(), N, IC, OC, sp);
    Arrays r = {{"dx", back(dx)}, {"dw", back(dw)}};
    if (bias) r["db"] = back(db);
    return r;
  }
};

struct Lora : Projected<Lora> {
  const char* fwd_op = "lora_forward";
  const char* bwd_op = "lora_backward";
  ops::LoraShape s{6, 40, 24, 4, 2.0, 0.0, 0};
  int64_t ldy = 24 + 5;
  double tol_fwd = 1e-5, tol_bwd = 1e-5;
  bool fd = true;
  std::vector<std::string> fd_inputs = {"x", "A", "B"};
  bool has_fwd(const Backend& b) const { return b.train.lora_forward; }
  bool has_bwd(const Backend& b) const { return b.train.lora_backward; }
  Arrays make(Rng& r) const {
    return {{"x", randn(r, size_t(s.N * s.in))}, {"A", randn(r, size_t(s.r * s.in), 0.3)},
            {"B", randn(r, size_t(s.out * s.r), 0.3)}, {"y0", randn(r, size_t(s.N * ldy))},
            {"G", randn(r, size_t(s.N * ldy))}};
  }
  template <typename F>
  Arrays fwd(const Backend& b, const Arrays& in) const {
    auto x = as<F>(at(in, "x")), A = as<F>(at(in, "A")), B = as<F>(at(in, "B")), y = as<F>(at(in, "y0"));
    std::vector<F> v(static_cast<size_t>(s.N * s.r)), xd(static_cast<size_t>(s.N * s.in));
    GP_TRAIN(F, b, lora_forward, y.data(), ldy, v.data(), xd.data(), x.data(), A.data(), B.data(), s);
    return {{"out", back(y)}, {"v", back(v)}};
  }
  template <typename F>
  Arrays bwd(const Backend& b, const Arrays& in, const Arrays& saved) const {
    auto x = as<F>(at(in, "x")), A = as<F>(at(in, "A")), B = as<F>(at(in, "B")), G = as<F>(at(in, "G"));
    auto v = as<F>(at(saved, "v"));
    std::vector<F> dx(static_cast<size_t>(s.N * s.in), F(0.5)), dA(static_cast<size_t>(s.r * s.in), F(0)), dB(static_cast<size_t>(s.out * s.r), F(0));
    std::vector<F> xd(static_cast<size_t>(s.N * s.in)), dv(static_cast<size_t>(s.N * s.r));
    GP_TRAIN(F, b, lora_backward, dx.data(), dA.data(), dB.data(), G.data(), ldy, x.data(), v.data(), A.data(),
             B.data(), xd.data(), dv.data(), s);
    auto rx = back(dx);
    for (auto& e : rx) e -= 0.5;  // "+=": started from 0.5
    return {{"dx", rx}, {"dA", back(dA)}, {"dB", back(dB)}};
  }
};

struct CrossEntropy {
  const char* fwd_op = "crossentropy_forward";
  const char* bwd_op = "crossentropy_backward";
  int64_t N = 7, V = 37;
  std::vector<int32_t> tgt = {4, -1, 0, 36, -1, 7, 7};
  double tol_fwd = 1e-5, tol_bwd = 1e-5;
  bool fd = true;
  std::vector<std::string> fd_inputs = {"logits"};
  bool has_fwd(const Backend& b) const { return b.train.crossentropy_forward; }
  bool has_bwd(const Backend& b) const { return b.train.crossentropy_backward; }
  Arrays make(Rng& r) const { return {{"logits", randn(r, size_t(N * V), 3.0)}}; }
  template <typename F>
  Arrays fwd(const Backend& b, const Arrays& in) const {
    auto lg = as<F>(at(in, "logits"));
    std::vector<F> lse(static_cast<size_t>(N));
    int64_t count = 0;
    const double l = GP_TRAIN(F, b, crossentropy_forward, lse.data(), lg.data(), tgt.data(), N, V, &count);
    return {{"lse", back(lse)}, {"loss", {l, double(count)}}};
  }
  template <typename F>
  Arrays bwd(const Backend& b, const Arrays& in, const Arrays& saved) const {
    auto lg = as<F>(at(in, "logits")), lse = as<F>(at(saved, "lse"));
    const double count = at(saved, "loss")[1];
    std::vector<F> d(static_cast<size_t>(N * V), F(kNaN));
    GP_TRAIN(F, b, crossentropy_backward, d.data(), lg.data(), lse.data(), tgt.data(), N, V, 1.0 / count);
    return {{"dlogits", back(d)}};
  }
  double loss(const Backend& b, const Arrays& in) const {
    const auto l = fwd<double>(b, in).at("loss");
    return l[0] / l[1];
  }
};

struct Residual : Projected<Residual> {
  const char* fwd_op = "residual_forward";
  const char* bwd_op = "residual_backward";
  int64_t n = 1001;
  double tol_fwd = 2e-7, tol_bwd = 2e-7;  // float rounding of the inputs and of the sum
  bool fd = false;  // linear: its gradient is its definition
  std::vector<std::string> fd_inputs;
  bool has_fwd(const Backend& b) const { return b.train.residual_forward; }
  bool has_bwd(const Backend& b) const { return b.train.residual_backward; }
  Arrays make(Rng& r) const {
    return {{"a", randn(r, size_t(n))}, {"b", randn(r, size_t(n))}, {"G", randn(r, size_t(n))}};
  }
  template <typename F>
  Arrays fwd(const Backend& b, const Arrays& in) const {
    auto a = as<F>(at(in, "a")), c = as<F>(at(in, "b"));
    std::vector<F> o(static_cast<size_t>(n));
    GP_TRAIN(F, b, residual_forward, o.data(), a.data(), c.data(), n);
    return {{"out", back(o)}};
  }
  template <typename F>
  Arrays bwd(const Backend& b, const Arrays& in, const Arrays&) const {
    auto d = as<F>(at(in, "a")), G = as<F>(at(in, "G"));
    GP_TRAIN(F, b, residual_backward, d.data(), G.data(), n);
    return {{"dres", back(d)}};
  }
};

struct Attention : Projected<Attention> {
  bool flash = false;
  ops::AttnShape s;
  const char* fwd_op = "attention_forward_naive";
  const char* bwd_op = "attention_backward_naive";
  double tol_fwd = 1e-5, tol_bwd = 1e-5;
  bool fd = true;
  std::vector<std::string> fd_inputs = {"qkv"};
  Attention(bool fl, const ops::AttnShape& sh) : flash(fl), s(sh) {
    if (flash) fwd_op = "attention_forward_flash", bwd_op = "attention_backward_flash";
  }
  bool has_fwd(const Backend& b) const {
    return flash ? bool(b.train.attention_forward_flash) : bool(b.train.attention_forward_naive);
  }
  bool has_bwd(const Backend& b) const {
    return flash ? bool(b.train.attention_backward_flash) : bool(b.train.attention_backward_naive);
  }
  Arrays make(Rng& r) const {
    return {{"qkv", randn(r, size_t(s.rows() * s.qkv_cols()))}, {"G", randn(r, size_t(s.rows() * s.NH * s.HS))}};
  }
  template <typename F>
  Arrays fwd(const Backend& b, const Arrays& in) const {
    auto qkv = as<F>(at(in, "qkv"));
    std::vector<F> o(static_cast<size_t>(s.rows() * s.NH * s.HS));
    std::vector<F> stat(static_cast<size_t>(flash ? s.B * s.NH * s.T : s.B * s.NH * s.T * s.T));
    if (flash)
      GP_TRAIN(F, b, attention_forward_flash, o.data(), stat.data(), qkv.data(), s);
    else
      GP_TRAIN(F, b, attention_forward_naive, o.data(), stat.data(), qkv.data(), s);
    return {{"out", back(o)}, {flash ? "lse" : "probs", back(stat)}};
  }
  template <typename F>
  Arrays bwd(const Backend& b, const Arrays& in, const Arrays& saved) const {
    auto qkv = as<F>(at(in, "qkv")), G = as<F>(at(in, "G")), o = as<F>(at(saved, "out"));
    std::vector<F> d(qkv.size(), F(kNaN));
    if (flash) {
      auto lse = as<F>(at(saved, "lse"));
      GP_TRAIN(F, b, attention_backward_flash, d.data(), G.data(), qkv.data(), o.data(), lse.data(), s);
    } else {
      auto probs = as<F>(at(saved, "probs"));
      GP_TRAIN(F, b, attention_backward_naive, d.data(), G.data(), qkv.data(), probs.data(), s);
    }
    return {{"dqkv", back(d)}};
  }
};

// The optimizer's ops against plain double loops.
void add_optimizer(std::vector<Case>& out) {
  constexpr int64_t n = 1003;
  out.push_back({"adamw_step", "n=1003", [](const Backend& b) { return b.train.adamw_step != nullptr; },
                 [](const Backend& b, uint64_t seed) {
                   Rng r(seed);
                   auto p = randn(r, size_t(n)), g = randn(r, size_t(n)), m = randn(r, size_t(n), 0.1), v = randn(r, size_t(n), 0.1);
                   for (auto& e : v) e = e * e;
                   const ops::AdamWStep s{0.999f, 0.9f, 0.95f, 1e-3f, 1.2f, 1e-8f};
                   auto pf = as<float>(p), gf = as<float>(g), mf = as<float>(m), vf = as<float>(v);
                   ops::backend_kernel(b.train.adamw_step, "adamw_step", b)(pf.data(), gf.data(), mf.data(), vf.data(), n, s);
                   for (int64_t i = 0; i < n; ++i) {
                     const double gi = double(gf[size_t(i)]);
                     double& pi = p[size_t(i)];
                     double& mi = m[size_t(i)];
                     double& vi = v[size_t(i)];
                     pi = double(float(pi)) * s.keep;
                     mi = s.beta1 * double(float(mi)) + (1 - double(s.beta1)) * gi;
                     vi = s.beta2 * double(float(vi)) + (1 - double(s.beta2)) * gi * gi;
                     pi -= s.step_size * mi / (std::sqrt(vi) * s.inv_bc2_sqrt + s.eps);
                   }
                   return Checks{{"p", "atol+rtol", elementwise(back(pf), p, 1e-7, 1e-5), 1.0},
                                 {"m", "atol+rtol", elementwise(back(mf), m, 1e-7, 1e-5), 1.0},
                                 {"v", "atol+rtol", elementwise(back(vf), v, 1e-7, 1e-5), 1.0}};
                 }});
  out.push_back({"sum_squares", "n=4099", [](const Backend& b) { return b.train.sum_squares != nullptr; },
                 [](const Backend& b, uint64_t seed) {
                   Rng r(seed);
                   const auto x = as<float>(randn(r, 4099));
                   const double got = ops::backend_kernel(b.train.sum_squares, "sum_squares", b)(x.data(), 4099);
                   double want = 0;
                   for (float e : x) want += double(e) * double(e);
                   return Checks{{"sum", "rel", std::fabs(got - want) / want, 1e-6}};
                 }});
  out.push_back({"scale", "n=1001", [](const Backend& b) { return b.train.scale != nullptr; },
                 [](const Backend& b, uint64_t seed) {
                   Rng r(seed);
                   auto x = as<float>(randn(r, 1001));
                   std::vector<double> want(x.size());
                   for (size_t i = 0; i < x.size(); ++i) want[i] = double(x[i]) * double(0.37f);
                   ops::backend_kernel(b.train.scale, "scale", b)(x.data(), 1001, 0.37f);
                   return Checks{{"x", "max rel", rel_error(x, want), 1e-7}};
                 }});
}

ops::AttnShape attn(int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS, int64_t qt, int64_t kt, bool causal) {
  ops::AttnShape s;
  s.B = B, s.T = T, s.NH = NH, s.NKV = NKV, s.HS = HS, s.q_tile = qt, s.k_tile = kt, s.causal = causal;
  return s;
}

}  // namespace

void add_train_cases(std::vector<Case>& out) {
  add_family(out, "V=11 C=33 N=9 repeated ids", Embedding{});
  add_family(out, "N=5 C=33", RmsNorm{});
  {
    RmsNorm big;
    big.N = 67, big.C = 256, big.fd = false;
    add_family(out, "N=67 C=256", big);
  }
  for (RopeStyle st : {RopeStyle::Neox, RopeStyle::Interleaved}) {
    Rope r;
    r.style = st;
    add_family(out, std::string(st == RopeStyle::Neox ? "neox" : "interleaved") + " B=2 T=5 heads=3 HS=8 ld=28", r);
  }
  add_family(out, "N=4 FF=33", Swiglu{});
  for (bool bias : {false, true}) {
    Matmul m;
    m.bias = bias;
    if (!bias) m.fd_inputs = {"x", "w"};
    add_family(out, std::string("N=6 IC=33 OC=17") + (bias ? " +bias" : ""), m);
  }
  {
    Matmul m;
    m.N = 67, m.IC = 96, m.OC = 130, m.fd = false;
    add_family(out, "N=67 IC=96 OC=130 +bias", m);
    // The bf16 matmul needs AVX512-BF16 (genperf/ops_train.h): elsewhere oneDNN has none, and
    // the models fall back to f32 (effective_precision) without calling it.
    m.bf16 = true, m.tol_fwd = 1e-2, m.tol_bwd = 1e-2;
    if (effective_precision(Precision::Bf16) == Precision::Bf16)
      add_family(out, "N=67 IC=96 OC=130 +bias bf16 scratch", m);
  }
  for (double p : {0.0, 0.25}) {
    Lora l;
    l.s.p = p;
    l.s.key = ops::lora_key(7, 3, 1, 2, 4);
    add_family(out, std::string("N=6 in=40 out=24 r=4 ldy=29 dropout p=") + (p > 0 ? "0.25" : "0"), l);
  }
  add_family(out, "N=7 V=37 two ignored targets", CrossEntropy{});
  add_family(out, "n=1001", Residual{});
  struct S {
    ops::AttnShape s;
    const char* what;
  };
  const S shapes[] = {
      {attn(2, 7, 4, 2, 8, 4, 4, true), "B=2 T=7 NH=4 NKV=2 HS=8 tiles 4x4 causal (GQA, ragged)"},
      {attn(2, 7, 4, 2, 8, 4, 4, false), "B=2 T=7 NH=4 NKV=2 HS=8 tiles 4x4 non-causal (GQA, ragged)"},
      {attn(1, 37, 2, 2, 16, 16, 8, true), "B=1 T=37 NH=2 NKV=2 HS=16 tiles 16x8 causal (ragged)"},
      {attn(1, 37, 4, 1, 16, 64, 64, false), "B=1 T=37 NH=4 NKV=1 HS=16 tiles 64x64 non-causal (GQA)"},
  };
  for (const S& sh : shapes)
    for (bool flash : {false, true}) add_family(out, sh.what, Attention(flash, sh.s));
  add_optimizer(out);
}

}  // namespace genperf::bench::harness
