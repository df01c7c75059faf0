// The op harness's perf mode (genperf/op_harness.h): each op at the Llama presets' shapes
// ("110m" and "default", src/models/llama/presets.cpp), timed through ops::X (the device's
// dispatch), median of the timed runs after a warm-up call, against the floor that applies: the
// GEMM peak of the op's compute type for compute-bound ops, the read bandwidth (from memory, or
// from cache where the working set fits the last-level cache) for memory-bound ones. Floors are
// measured in the same run (bench/peaks.h), each the best of readings taken beside the op's.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include "bench/op_harness_cases.h"
#include "backend/cpu/image_ops.h"
#include "bench/peaks.h"
#include "genperf/error.h"
#include "genperf/op_harness.h"
#include "genperf/ops.h"
#include "genperf/ops_cost.h"
#include "genperf/ops_image.h"
#include "genperf/ops_train.h"
#include "genperf/runtime.h"

namespace genperf::bench {
namespace {

using harness::random_tensor;
using Clock = std::chrono::steady_clock;

struct PerfCase {
  std::string op, name;
  bool compute;            // held to a GEMM peak (else to read bandwidth)
  GemmCompute type = GemmCompute::F32;
  ops::OpCost cost;
  std::function<std::function<void()>()> setup;  // allocates inputs, returns the call to time
  // Where the kernel does other arithmetic than the op's cost counts (a fast algorithm), the
  // FLOPs it does at the ISA level set, and the algorithm's name; the floor holds those.
  std::function<std::pair<double, std::string>()> executed = nullptr;
};

struct Dims {
  int64_t d, ffn, heads, kv_heads, vocab;
  const char* preset;
};

void add_linear(std::vector<PerfCase>& v, const Dims& m, bool tiny) {
  const std::vector<DType> types = tiny ? std::vector<DType>{DType::F32}
                                        : std::vector<DType>{DType::F32, DType::F16, DType::BF16, DType::Q8_0,
                                                             DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};
  for (DType wt : types)
    for (int64_t T : {int64_t(1), tiny ? int64_t(16) : int64_t(128)}) {
      const int64_t K = m.d, N = m.ffn;
      PerfCase c{"linear", std::string(m.preset) + " up w=" + dtype_name(wt) + " T=" + std::to_string(T) + " K=" +
                               std::to_string(K) + " N=" + std::to_string(N) + (T == 1 ? " (decode)" : " (prefill)"),
                 T > 1, GemmCompute::F32, ops::linear_cost(T, K, N, wt), nullptr};
      if (T > 1) c.type = gemm_compute_type(wt);
      c.setup = [=] {
        Rng rng(5);
        auto w = std::make_shared<Tensor>(ops::prepare_weight(random_tensor({N, K}, DType::F32, rng, 0.05).to(wt)));
        auto x = std::make_shared<Tensor>(random_tensor({T, K}, DType::F32, rng));
        auto y = std::make_shared<Tensor>(Tensor::zeros({T, N}));
        return std::function<void()>([=] { ops::linear(*x, *w, nullptr, *y); });
      };
      v.push_back(std::move(c));
    }
}

void add_rows(std::vector<PerfCase>& v, const Dims& m, int64_t T) {
  const std::string p = std::string(m.preset) + " T=" + std::to_string(T);
  v.push_back({"rms_norm", p + " K=" + std::to_string(m.d), false, {}, ops::rms_norm_cost(T, m.d), [=] {
                 Rng rng(6);
                 auto x = std::make_shared<Tensor>(random_tensor({T, m.d}, DType::F32, rng));
                 auto w = std::make_shared<Tensor>(random_tensor({m.d}, DType::F32, rng));
                 auto y = std::make_shared<Tensor>(Tensor::zeros({T, m.d}));
                 return std::function<void()>([=] { ops::rms_norm(*x, *w, 1e-5f, *y); });
               }});
  v.push_back({"silu_mul", p + " F=" + std::to_string(m.ffn), false, {}, ops::silu_mul_cost(T, m.ffn), [=] {
                 Rng rng(7);
                 auto g = std::make_shared<Tensor>(random_tensor({T, m.ffn}, DType::F32, rng));
                 auto u = std::make_shared<Tensor>(random_tensor({T, m.ffn}, DType::F32, rng));
                 auto o = std::make_shared<Tensor>(Tensor::zeros({T, m.ffn}));
                 return std::function<void()>([=] { ops::silu_mul(*g, *u, *o); });
               }});
  v.push_back({"add_inplace", p + " K=" + std::to_string(m.d), false, {}, ops::add_cost(T, m.d), [=] {
                 Rng rng(8);
                 auto x = std::make_shared<Tensor>(random_tensor({T, m.d}, DType::F32, rng));
                 auto y = std::make_shared<Tensor>(random_tensor({T, m.d}, DType::F32, rng, 1e-6));
                 return std::function<void()>([=] { ops::add_inplace(*x, *y); });
               }});
  const int64_t D = m.d / m.heads;
  v.push_back({"rope", p + " H=" + std::to_string(m.heads) + " D=" + std::to_string(D), false, {},
               ops::rope_cost(T, m.heads, D), [=] {
                 Rng rng(9);
                 auto x = std::make_shared<Tensor>(random_tensor({T, m.heads * D}, DType::F32, rng));
                 auto pos = std::make_shared<std::vector<int32_t>>();
                 for (int64_t t = 0; t < T; ++t) pos->push_back(int32_t(t));
                 auto inv = std::make_shared<std::vector<float>>();
                 for (int64_t i = 0; i < D / 2; ++i) inv->push_back(float(std::pow(1e4, -2.0 * double(i) / double(D))));
                 return std::function<void()>([=] { ops::rope(*x, m.heads, *pos, *inv, RopeStyle::Neox); });
               }});
}

void add_attention(std::vector<PerfCase>& v, const Dims& m, int64_t T, int64_t S, DType kv) {
  const int64_t D = m.d / m.heads, q_pos0 = S - T;
  v.push_back({"attention",
               std::string(m.preset) + " kv=" + dtype_name(kv) + " T=" + std::to_string(T) + " S=" + std::to_string(S) +
                   " H=" + std::to_string(m.heads) + " Hkv=" + std::to_string(m.kv_heads) +
                   (T == 1 ? " (decode)" : " (prefill)"),
               T > 1, GemmCompute::F32, ops::attention_cost(T, m.heads, m.kv_heads, D, q_pos0, kv), [=] {
                 Rng rng(10);
                 auto q = std::make_shared<Tensor>(random_tensor({T, m.heads * D}, DType::F32, rng));
                 auto k = std::make_shared<Tensor>(random_tensor({m.kv_heads, S, D}, DType::F32, rng).to(kv));
                 auto vv = std::make_shared<Tensor>(random_tensor({m.kv_heads, S, D}, DType::F32, rng).to(kv));
                 auto o = std::make_shared<Tensor>(Tensor::zeros({T, m.heads * D}));
                 const float sc = 1.0f / std::sqrt(float(D));
                 return std::function<void()>(
                     [=] { ops::attention(*q, *k, *vv, m.heads, m.kv_heads, q_pos0, sc, *o); });
               }});
}

void add_train(std::vector<PerfCase>& v, const Dims& m, int64_t N, int64_t T) {
  const std::string p = std::string(m.preset) + " N=" + std::to_string(N);
  for (bool bwd : {false, true}) {
    const int64_t IC = m.d, OC = m.ffn;
    v.push_back({bwd ? "matmul_backward" : "matmul_forward",
                 p + " IC=" + std::to_string(IC) + " OC=" + std::to_string(OC), true, GemmCompute::F32,
                 bwd ? ops::matmul_backward_cost(N, IC, OC, false) : ops::matmul_forward_cost(N, IC, OC, false), [=] {
                   Rng rng(11);
                   auto x = std::make_shared<std::vector<float>>(harness::to_float(harness::randn(rng, size_t(N * IC))));
                   auto w = std::make_shared<std::vector<float>>(harness::to_float(harness::randn(rng, size_t(OC * IC), 0.05)));
                   auto o = std::make_shared<std::vector<float>>(static_cast<size_t>(N * OC), 0.01f);
                   auto dx = std::make_shared<std::vector<float>>(static_cast<size_t>(N * IC));
                   auto dw = std::make_shared<std::vector<float>>(static_cast<size_t>(OC * IC));
                   return std::function<void()>([=] {
                     if (bwd)
                       ops::matmul_backward(dx->data(), dw->data(), static_cast<float*>(nullptr), o->data(), x->data(),
                                            w->data(), N, IC, OC);
                     else
                       ops::matmul_forward(o->data(), x->data(), w->data(), static_cast<const float*>(nullptr), N,
                                           IC, OC);
                   });
                 }});
  }
  ops::AttnShape s;
  s.B = N / T, s.T = T, s.NH = m.heads, s.NKV = m.kv_heads, s.HS = m.d / m.heads;
  for (bool bwd : {false, true}) {
    v.push_back({bwd ? "attention_backward_flash" : "attention_forward_flash",
                 p + " B=" + std::to_string(s.B) + " T=" + std::to_string(T) + " NH=" + std::to_string(s.NH) +
                     " HS=" + std::to_string(s.HS) + " causal",
                 true, GemmCompute::F32,
                 bwd ? ops::attention_backward_cost(s, true) : ops::attention_forward_cost(s, true), [=] {
                   Rng rng(12);
                   auto qkv = std::make_shared<std::vector<float>>(
                       harness::to_float(harness::randn(rng, size_t(s.rows() * s.qkv_cols()))));
                   auto out = std::make_shared<std::vector<float>>(static_cast<size_t>(s.rows() * s.NH * s.HS));
                   auto lse = std::make_shared<std::vector<float>>(static_cast<size_t>(s.B * s.NH * s.T));
                   auto dq = std::make_shared<std::vector<float>>(qkv->size());
                   ops::attention_forward_flash(out->data(), lse->data(), qkv->data(), s);
                   return std::function<void()>([=] {
                     if (bwd)
                       ops::attention_backward_flash(dq->data(), out->data(), qkv->data(), out->data(), lse->data(), s);
                     else
                       ops::attention_forward_flash(out->data(), lse->data(), qkv->data(), s);
                   });
                 }});
  }
  const int64_t V = m.vocab;
  v.push_back({"crossentropy_forward", p + " V=" + std::to_string(V), false, {}, ops::crossentropy_forward_cost(N, V),
               [=] {
                 Rng rng(13);
                 auto lg = std::make_shared<std::vector<float>>(harness::to_float(harness::randn(rng, size_t(N * V))));
                 auto lse = std::make_shared<std::vector<float>>(static_cast<size_t>(N));
                 auto tgt = std::make_shared<std::vector<int32_t>>(static_cast<size_t>(N), 1);
                 return std::function<void()>([=] {
                   int64_t c = 0;
                   ops::crossentropy_forward(lse->data(), lg->data(), tgt->data(), N, V, &c);
                 });
               }});
  const int64_t n = m.d * m.ffn;
  v.push_back({"adamw_step", std::string(m.preset) + " n=" + std::to_string(n) + " (one MLP matrix)", false, {},
               ops::adamw_cost(n), [=] {
                 auto p = std::make_shared<std::vector<float>>(static_cast<size_t>(4 * n), 0.01f);
                 const ops::AdamWStep st{0.999f, 0.9f, 0.95f, 1e-4f, 1.0f, 1e-8f};
                 return std::function<void()>([=] {
                   float* b = p->data();
                   ops::adamw_step(b, b + n, b + 2 * n, b + 3 * n, n, st);
                 });
               }});
}

// The SR UNet's convolutions: a 3 x 3 conv of C channels on B images of H x H, forward and backward;
// bf16: of operands rounded to bf16 (ConvShape::bf16, `--precision bf16`), against the bf16 GEMM's
// peak where oneDNN's bf16 primitives can run.
void add_conv(std::vector<PerfCase>& v, int64_t B, int64_t H, int64_t C, bool bf16 = false) {
  ops::ConvShape s;
  s.B = B, s.H = s.W = H, s.IC = s.OC = C, s.K = 3, s.stride = 1, s.pad = 1, s.bf16 = bf16;
  for (bool bwd : {false, true})
    v.push_back({bwd ? "conv2d_backward" : "conv2d_forward",
                 "unet " + (B > 1 ? std::to_string(B) + "x" : std::string()) + std::to_string(H) + "x" +
                     std::to_string(H) + " C=" + std::to_string(C) + " 3x3" + (bf16 ? " bf16" : ""),
                 true,
                 bf16 && cpu::conv2d_bf16_native() ? GemmCompute::BF16 : GemmCompute::F32,
                 bwd ? ops::conv2d_backward_cost(s) : ops::conv2d_forward_cost(s), [=] {
                   Rng rng(13);
                   const size_t nx = size_t(B * H * H * C), nw = size_t(C * s.filter());
                   auto x = std::make_shared<std::vector<float>>(harness::to_float(harness::randn(rng, nx)));
                   auto w = std::make_shared<std::vector<float>>(harness::to_float(harness::randn(rng, nw, 0.05)));
                   auto g = std::make_shared<std::vector<float>>(nx, 0.01f);
                   auto dx = std::make_shared<std::vector<float>>(nx), dw = std::make_shared<std::vector<float>>(nw);
                   return std::function<void()>([=] {
                     if (bwd)
                       ops::conv2d_backward(dx->data(), dw->data(), static_cast<float*>(nullptr), g->data(), x->data(),
                                            w->data(), s);
                     else
                       ops::conv2d_forward(g->data(), x->data(), w->data(), static_cast<const float*>(nullptr), s);
                   });
                 },
                 [=]() -> std::pair<double, std::string> {
                   // Winograd's forward; backward: its data and weights gradients, as many products.
                   if (!cpu::conv2d_uses_winograd(s)) return {0.0, ""};
                   const double w = ops::conv2d_winograd_forward_cost(s).flops;
                   return {bwd ? 2 * w : w, "Winograd F(4x4,3x3)"};
                 }});
}

// The SR UNet's group norm and SiLU on a batch of B images of H x H pixels and C channels
// (bench sr's default batch at one level of the default UNet), forward and backward.
void add_norm_act(std::vector<PerfCase>& v, int64_t B, int64_t H, int64_t C, int64_t G) {
  const int64_t HW = H * H, n = B * HW * C;
  const std::string p = "unet B=" + std::to_string(B) + " " + std::to_string(H) + "x" + std::to_string(H) +
                        " C=" + std::to_string(C);
  // x, dout, gamma, beta and the outputs of one case; x has a mean away from 0, as after a conv.
  struct Bufs {
    std::vector<float> x, g, gamma, beta, y, mean, rstd, dgamma, dbeta;
  };
  const auto make = [=] {
    Rng rng(14);
    auto b = std::make_shared<Bufs>();
    b->x = harness::to_float(harness::randn(rng, size_t(n), 2.0));
    for (float& e : b->x) e += 0.5f;
    b->g = harness::to_float(harness::randn(rng, size_t(n), 0.01));
    b->gamma = harness::to_float(harness::randn(rng, size_t(C)));
    b->beta = harness::to_float(harness::randn(rng, size_t(C)));
    b->y.resize(size_t(n));
    b->mean.resize(size_t(B * G)), b->rstd.resize(size_t(B * G));
    b->dgamma.resize(size_t(C)), b->dbeta.resize(size_t(C));
    return b;
  };
  for (bool bwd : {false, true}) {
    v.push_back({bwd ? "group_norm_backward" : "group_norm_forward", p + " G=" + std::to_string(G), false, {},
                 bwd ? ops::group_norm_backward_cost(B, HW, C) : ops::group_norm_forward_cost(B, HW, C), [=] {
                   auto b = make();
                   ops::group_norm_forward(b->y.data(), b->mean.data(), b->rstd.data(), b->x.data(), b->gamma.data(),
                                           b->beta.data(), B, HW, C, G, 1e-5);
                   return std::function<void()>([=] {
                     if (bwd)
                       ops::group_norm_backward(b->y.data(), b->dgamma.data(), b->dbeta.data(), b->g.data(),
                                                b->x.data(), b->gamma.data(), b->mean.data(), b->rstd.data(), B, HW,
                                                C, G);
                     else
                       ops::group_norm_forward(b->y.data(), b->mean.data(), b->rstd.data(), b->x.data(),
                                               b->gamma.data(), b->beta.data(), B, HW, C, G, 1e-5);
                   });
                 }});
  }
  for (bool bwd : {false, true}) {
    v.push_back({bwd ? "group_norm_silu_backward" : "group_norm_silu_forward", p + " G=" + std::to_string(G), false,
                 {}, bwd ? ops::group_norm_silu_backward_cost(B, HW, C) : ops::group_norm_silu_forward_cost(B, HW, C),
                 [=] {
                   auto b = make();
                   ops::group_norm_silu_forward(b->y.data(), b->mean.data(), b->rstd.data(), b->x.data(),
                                                b->gamma.data(), b->beta.data(), B, HW, C, G, 1e-5);
                   return std::function<void()>([=] {
                     if (bwd)
                       ops::group_norm_silu_backward(b->y.data(), b->dgamma.data(), b->dbeta.data(), b->g.data(),
                                                     b->x.data(), b->gamma.data(), b->beta.data(), b->mean.data(),
                                                     b->rstd.data(), B, HW, C, G);
                     else
                       ops::group_norm_silu_forward(b->y.data(), b->mean.data(), b->rstd.data(), b->x.data(),
                                                    b->gamma.data(), b->beta.data(), B, HW, C, G, 1e-5);
                   });
                 }});
  }
  for (bool bwd : {false, true}) {
    v.push_back({bwd ? "silu_backward" : "silu_forward", p, false, {},
                 bwd ? ops::silu_backward_cost(n) : ops::silu_forward_cost(n), [=] {
                   auto b = make();
                   return std::function<void()>([=] {
                     if (bwd)
                       ops::silu_backward(b->y.data(), b->g.data(), b->x.data(), n);
                     else
                       ops::silu_forward(b->y.data(), b->x.data(), n);
                   });
                 }});
  }
}

std::vector<PerfCase> perf_cases(bool tiny) {
  std::vector<PerfCase> v;
  if (tiny) {
    const Dims t{64, 128, 4, 2, 512, "tiny"};
    add_linear(v, t, true);
    add_rows(v, t, 4);
    add_attention(v, t, 8, 8, DType::F32);
    add_train(v, t, 32, 16);
    add_conv(v, 1, 8, 8);
    add_norm_act(v, 2, 8, 8, 4);
    return v;
  }
  const Dims small{256, 768, 8, 4, 4096, "default"}, big{768, 2048, 12, 12, 32000, "110m"};
  for (const Dims& m : {small, big}) {
    add_linear(v, m, false);
    add_rows(v, m, 128);
    add_attention(v, m, 128, 128, DType::F32);
    add_attention(v, m, 1, 512, DType::F32);
    add_attention(v, m, 1, 512, DType::Q8_0);
    add_train(v, m, 512, 256);
  }
  add_conv(v, 1, 64, 64);
  add_conv(v, 1, 32, 128);
  add_conv(v, 8, 64, 16);  // the default SR model's full-resolution level at bench sr's batch
  add_conv(v, 1, 64, 64, true);
  add_conv(v, 8, 64, 16, true);
  add_norm_act(v, 8, 64, 32, 8);
  add_norm_act(v, 8, 32, 64, 8);
  return v;
}

// The floors, measured lazily: a GEMM probe per compute type, the memory probe, cache probes by
// working-set size. Each reading is the best of a few taken right after the op's runs.
class Floors {
 public:
  explicit Floors(bool tiny) : tiny_(tiny), llc_(last_level_cache_bytes()) {}
  std::pair<double, std::string> compute(GemmCompute t) {
    auto& p = gemm_[int(t)];
    if (!p) p = std::make_unique<GemmPeakProbe>(t);
    double best = 0;
    for (int i = 0; i < 3; ++i) best = std::max(best, p->sample());
    double& b = gemm_best_[int(t)];
    b = std::max(b, best);
    return {b, std::string("gemm ") + gemm_compute_name(t)};
  }
  std::pair<double, std::string> bandwidth(double bytes) {
    const bool cache = tiny_ || fits_in_cache(bytes, llc_);
    if (cache) {
      const size_t sz = std::max<size_t>(static_cast<size_t>(bytes), 64 << 10);
      auto& p = cache_[sz];
      if (!p) p = std::make_unique<BandwidthProbe>(sz);
      double best = 0;
      for (int i = 0; i < 3; ++i) best = std::max(best, p->pass());
      // Where the cache reads slower than memory (a VM's LLC that its cores do not reach), the
      // memory floor is the higher one.
      if (tiny_) return {best, "read bandwidth (cache)"};
      const auto mem = bandwidth_memory();
      return best >= mem.first ? std::make_pair(best, std::string("read bandwidth (cache)")) : mem;
    }
    return bandwidth_memory();
  }

 private:
  std::pair<double, std::string> bandwidth_memory() {
    if (!mem_) mem_ = std::make_unique<BandwidthProbe>(memory_probe_bytes());
    mem_best_ = std::max(mem_best_, mem_->pass());
    return {mem_best_, "read bandwidth (memory)"};
  }
  bool tiny_;
  size_t llc_;
  std::unique_ptr<GemmPeakProbe> gemm_[3];
  double gemm_best_[3] = {0, 0, 0};
  std::map<size_t, std::unique_ptr<BandwidthProbe>> cache_;
  std::unique_ptr<BandwidthProbe> mem_;
  double mem_best_ = 0;
};

}  // namespace

std::vector<OpPerfResult> perf_ops(const OpPerfOptions& o) {
  GP_CHECK(o.reps >= 1, "[test-ops] --reps must be positive");
  std::vector<Isa> levels;
  const Isa saved = isa();
  for (Isa i : {Isa::Generic, Isa::Avx2, Isa::Avx512}) {
    if (o.isa != "all" && o.isa != isa_name(i)) continue;
    set_isa(i);
    if (isa() == i) levels.push_back(i);
  }
  set_isa(saved);
  Floors floors(o.tiny);
  std::vector<OpPerfResult> out;
  const auto cases = perf_cases(o.tiny);
  for (Isa level : levels) {
    set_isa(level);
    for (const PerfCase& c : cases) {
      if (!o.op_filter.empty() && c.op.find(o.op_filter) == std::string::npos) continue;
      std::function<void()> fn = c.setup();
      fn();  // warm-up (oneDNN primitives, packed weights, pages)
      std::vector<double> t;
      for (int r = 0; r < o.reps; ++r) {
        const auto t0 = Clock::now();
        fn();
        t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      }
      std::sort(t.begin(), t.end());
      OpPerfResult r;
      r.op = c.op, r.name = c.name, r.isa = isa_name(level);
      r.flops = c.cost.flops, r.bytes = c.cost.bytes;
      r.median_s = t[t.size() / 2], r.min_s = t.front(), r.max_s = t.back();
      r.gflops = r.flops / r.median_s / 1e9, r.gbs = r.bytes / r.median_s / 1e9;
      r.bound = c.compute ? "compute" : "memory";
      const auto fl = c.compute ? floors.compute(c.type) : floors.bandwidth(c.cost.bytes);
      r.floor = fl.first, r.floor_name = fl.second;
      double achieved = c.compute ? r.gflops : r.gbs;
      if (c.executed) {
        const auto [flops, algorithm] = c.executed();
        if (flops > 0) {
          r.executed_flops = flops, r.algorithm = algorithm;
          achieved = flops / r.median_s / 1e9;
        }
      }
      const FloorFraction f = against_floor(achieved, r.floor);
      r.fraction = f.fraction, r.floor_exceeded = f.exceeded;
      if (o.on_result) o.on_result(r);
      out.push_back(std::move(r));
    }
  }
  set_isa(saved);
  return out;
}

std::string format_perf_header() {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-24s %-8s %10s %10s %10s %9s %8s %8s  %-24s %s", "op", "isa", "median us",
                "min us", "max us", "GFLOP/s", "GB/s", "of peak", "floor", "case");
  return buf;
}

std::string format_perf_row(const OpPerfResult& r) {
  char buf[512], frac[48];
  std::snprintf(frac, sizeof frac, "%.1f%%%s", 100 * r.fraction, r.floor_exceeded ? " ABOVE FLOOR" : "");
  char floor[96];
  std::snprintf(floor, sizeof floor, "%s %.1f", r.floor_name.c_str(), r.floor);
  const std::string name = r.algorithm.empty() ? r.name
                                               : r.name + " [" + r.algorithm + ": " +
                                                     std::to_string(int(std::lround(r.executed_flops / r.median_s / 1e9))) +
                                                     " GFLOP/s done]";
  std::snprintf(buf, sizeof buf, "%-24s %-8s %10.1f %10.1f %10.1f %9.2f %8.2f %8s  %-24s %s", r.op.c_str(),
                r.isa.c_str(), r.median_s * 1e6, r.min_s * 1e6, r.max_s * 1e6, r.gflops, r.gbs, frac, floor,
                name.c_str());
  return buf;
}

Json to_json(const std::vector<OpPerfResult>& rs) {
  Json::Array rows;
  for (const auto& r : rs)
    rows.push_back(Json::Object{{"op", r.op}, {"case", r.name}, {"isa", r.isa}, {"flops", r.flops},
                                {"bytes", r.bytes}, {"median_s", r.median_s}, {"min_s", r.min_s},
                                {"max_s", r.max_s}, {"gflops", r.gflops}, {"gbs", r.gbs}, {"bound", r.bound},
                                {"floor_name", r.floor_name}, {"floor", r.floor}, {"fraction", r.fraction},
                                {"floor_exceeded", r.floor_exceeded}, {"algorithm", r.algorithm},
                                {"executed_flops", r.executed_flops}});
  return Json::Object{{"mode", "perf"}, {"results", Json(std::move(rows))}};
}

}  // namespace genperf::bench
