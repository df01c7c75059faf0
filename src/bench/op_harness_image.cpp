// The op harness's image cases (ops_image.h), as families (op_harness_family.h): odd sizes, one
// pixel, channels that fill no SIMD register, every group count that divides them.
#include <algorithm>
#include <cmath>

#include "bench/op_harness_family.h"

namespace genperf::bench::harness {
namespace {

struct Conv2d : Projected<Conv2d> {
  const char* fwd_op = "conv2d_forward";
  const char* bwd_op = "conv2d_backward";
  ops::ConvShape s;
  double tol_fwd = 1e-5, tol_bwd = 1e-5;
  bool fd = true;
  std::vector<std::string> fd_inputs = {"x", "w", "b"};
  explicit Conv2d(const ops::ConvShape& sh) : s(sh) {}
  size_t nx() const { return size_t(s.B * s.H * s.W * s.IC); }
  size_t ny() const { return size_t(s.B * s.Ho() * s.Wo() * s.OC); }
  bool has_fwd(const Backend& b) const { return b.train.conv2d_forward; }
  bool has_bwd(const Backend& b) const { return b.train.conv2d_backward; }
  Arrays make(Rng& r) const {
    return {{"x", randn(r, nx())}, {"w", randn(r, size_t(s.OC * s.filter()), 0.5)}, {"b", randn(r, size_t(s.OC))},
            {"G", randn(r, ny())}};
  }
  template <typename F>
  Arrays fwd(const Backend& b, const Arrays& in) const {
    auto x = as<F>(at(in, "x")), w = as<F>(at(in, "w")), bias = as<F>(at(in, "b"));
    std::vector<F> o(ny());
    GP_TRAIN(F, b, conv2d_forward, o.data(), x.data(), w.data(), bias.data(), s);
    return {{"out", back(o)}};
  }
  template <typename F>
  Arrays bwd(const Backend& b, const Arrays& in, const Arrays&) const {
    auto x = as<F>(at(in, "x")), w = as<F>(at(in, "w")), G = as<F>(at(in, "G"));
    std::vector<F> dx(nx(), F(kNaN)), dw(size_t(s.OC * s.filter()), F(0)), db(size_t(s.OC), F(0));
    GP_TRAIN(F, b, conv2d_backward, dx.data(), dw.data(), db.data(), G.data(), x.data(), w.data(), s);
    return {{"dx", back(dx)}, {"dw", back(dw)}, {"db", back(db)}};
  }
};

// Group norm, or with silu group norm then SiLU fused (group_norm_silu_*).
struct GroupNorm : Projected<GroupNorm> {
  bool silu = false;
  const char* fwd_op = "group_norm_forward";
  const char* bwd_op = "group_norm_backward";
  int64_t B = 2, HW = 15, C = 12, G = 4;
  GroupNorm() = default;
  explicit GroupNorm(bool with_silu)
      : silu(with_silu), fwd_op(with_silu ? "group_norm_silu_forward" : "group_norm_forward"),
        bwd_op(with_silu ? "group_norm_silu_backward" : "group_norm_backward") {}
  double tol_fwd = 1e-5, tol_bwd = 1e-4;  // dx: differences of O(1) terms in float
  bool fd = true;
  std::vector<std::string> fd_inputs = {"x", "gamma", "beta"};
  bool has_fwd(const Backend& b) const {
    return silu ? b.train.group_norm_silu_forward != nullptr : b.train.group_norm_forward != nullptr;
  }
  bool has_bwd(const Backend& b) const {
    return silu ? b.train.group_norm_silu_backward != nullptr : b.train.group_norm_backward != nullptr;
  }
  Arrays make(Rng& r) const {
    auto x = randn(r, size_t(B * HW * C), 2.0);
    for (double& v : x) v += 1.0;  // a mean far from 0
    return {{"x", x}, {"gamma", randn(r, size_t(C))}, {"beta", randn(r, size_t(C))},
            {"G", randn(r, size_t(B * HW * C))}};
  }
  template <typename F>
  Arrays fwd(const Backend& b, const Arrays& in) const {
    auto x = as<F>(at(in, "x")), g = as<F>(at(in, "gamma")), be = as<F>(at(in, "beta"));
    std::vector<F> o(static_cast<size_t>(B * HW * C)), mean(static_cast<size_t>(B * G)), rstd(mean.size());
    if (silu)
      GP_TRAIN(F, b, group_norm_silu_forward, o.data(), mean.data(), rstd.data(), x.data(), g.data(), be.data(), B,
               HW, C, G, 1e-5);
    else
      GP_TRAIN(F, b, group_norm_forward, o.data(), mean.data(), rstd.data(), x.data(), g.data(), be.data(), B, HW,
               C, G, 1e-5);
    return {{"out", back(o)}, {"mean", back(mean)}, {"rstd", back(rstd)}};
  }
  template <typename F>
  Arrays bwd(const Backend& b, const Arrays& in, const Arrays& saved) const {
    auto x = as<F>(at(in, "x")), g = as<F>(at(in, "gamma")), be = as<F>(at(in, "beta")), G_ = as<F>(at(in, "G"));
    auto mean = as<F>(at(saved, "mean")), rstd = as<F>(at(saved, "rstd"));
    std::vector<F> dx(static_cast<size_t>(B * HW * C), F(kNaN)), dg(static_cast<size_t>(C), F(0)),
        db(static_cast<size_t>(C), F(0));
    if (silu)
      GP_TRAIN(F, b, group_norm_silu_backward, dx.data(), dg.data(), db.data(), G_.data(), x.data(), g.data(),
               be.data(), mean.data(), rstd.data(), B, HW, C, G);
    else
      GP_TRAIN(F, b, group_norm_backward, dx.data(), dg.data(), db.data(), G_.data(), x.data(), g.data(),
               mean.data(), rstd.data(), B, HW, C, G);
    return {{"dx", back(dx)}, {"dgamma", back(dg)}, {"dbeta", back(db)}};
  }
};

struct Silu : Projected<Silu> {
  const char* fwd_op = "silu_forward";
  const char* bwd_op = "silu_backward";
  int64_t n = 1001;
  double tol_fwd = 1e-6, tol_bwd = 1e-6;
  bool fd = true;
  std::vector<std::string> fd_inputs = {"x"};
  bool has_fwd(const Backend& b) const { return b.train.silu_forward; }
  bool has_bwd(const Backend& b) const { return b.train.silu_backward; }
  Arrays make(Rng& r) const { return {{"x", randn(r, size_t(n), 4.0)}, {"G", randn(r, size_t(n))}}; }
  template <typename F>
  Arrays fwd(const Backend& b, const Arrays& in) const {
    auto x = as<F>(at(in, "x"));
    std::vector<F> o(static_cast<size_t>(n));
    GP_TRAIN(F, b, silu_forward, o.data(), x.data(), n);
    return {{"out", back(o)}};
  }
  template <typename F>
  Arrays bwd(const Backend& b, const Arrays& in, const Arrays&) const {
    auto x = as<F>(at(in, "x")), G = as<F>(at(in, "G"));
    std::vector<F> d(static_cast<size_t>(n), F(kNaN));
    GP_TRAIN(F, b, silu_backward, d.data(), G.data(), x.data(), n);
    return {{"dx", back(d)}};
  }
};

// Up-sampling (up) or 2 x 2 average pooling (down) of a [B, H, W, C] image.
struct Resample : Projected<Resample> {
  bool up = true;
  const char* fwd_op;
  const char* bwd_op;
  int64_t B = 2, H = 4, W = 6, C = 5;
  double tol_fwd = 1e-7, tol_bwd = 1e-6;
  bool fd = true;
  std::vector<std::string> fd_inputs = {"x"};
  explicit Resample(bool u)
      : up(u), fwd_op(u ? "upsample2x_forward" : "avgpool2x_forward"),
        bwd_op(u ? "upsample2x_backward" : "avgpool2x_backward") {}
  int64_t in_n() const { return B * H * W * C; }
  int64_t out_n() const { return up ? 4 * in_n() : in_n() / 4; }
  bool has_fwd(const Backend& b) const { return up ? b.train.upsample2x_forward : b.train.avgpool2x_forward; }
  bool has_bwd(const Backend& b) const { return up ? b.train.upsample2x_backward : b.train.avgpool2x_backward; }
  Arrays make(Rng& r) const { return {{"x", randn(r, size_t(in_n()))}, {"G", randn(r, size_t(out_n()))}}; }
  template <typename F>
  Arrays fwd(const Backend& b, const Arrays& in) const {
    auto x = as<F>(at(in, "x"));
    std::vector<F> o(static_cast<size_t>(out_n()));
    if (up)
      GP_TRAIN(F, b, upsample2x_forward, o.data(), x.data(), B, H, W, C);
    else
      GP_TRAIN(F, b, avgpool2x_forward, o.data(), x.data(), B, H, W, C);
    return {{"out", back(o)}};
  }
  template <typename F>
  Arrays bwd(const Backend& b, const Arrays& in, const Arrays&) const {
    auto G = as<F>(at(in, "G"));
    std::vector<F> d(static_cast<size_t>(in_n()), F(kNaN));
    if (up)
      GP_TRAIN(F, b, upsample2x_backward, d.data(), G.data(), B, H, W, C);
    else
      GP_TRAIN(F, b, avgpool2x_backward, d.data(), G.data(), B, H, W, C);
    return {{"dx", back(d)}};
  }
};

struct Bicubic : Projected<Bicubic> {
  const char* fwd_op = "bicubic_up_forward";
  const char* bwd_op = "bicubic_up_backward";
  int64_t B = 2, H = 5, W = 7, C = 3, s = 4;
  double tol_fwd = 1e-6, tol_bwd = 1e-6;
  bool fd = true;
  std::vector<std::string> fd_inputs = {"x"};
  size_t nx() const { return size_t(B * H * W * C); }
  size_t ny() const { return nx() * size_t(s * s); }
  bool has_fwd(const Backend& b) const { return b.train.bicubic_up_forward; }
  bool has_bwd(const Backend& b) const { return b.train.bicubic_up_backward; }
  Arrays make(Rng& r) const { return {{"x", randn(r, nx())}, {"G", randn(r, ny())}}; }
  template <typename F>
  Arrays fwd(const Backend& b, const Arrays& in) const {
    auto x = as<F>(at(in, "x"));
    std::vector<F> o(ny());
    GP_TRAIN(F, b, bicubic_up_forward, o.data(), x.data(), B, H, W, C, s);
    return {{"out", back(o)}};
  }
  template <typename F>
  Arrays bwd(const Backend& b, const Arrays& in, const Arrays&) const {
    auto G = as<F>(at(in, "G"));
    std::vector<F> d(nx(), F(kNaN));
    GP_TRAIN(F, b, bicubic_up_backward, d.data(), G.data(), B, H, W, C, s);
    return {{"dx", back(d)}};
  }
};

// [N, Ca] and [N, Cb] rows concatenated; skip_b passes a null db (its gradient not wanted).
struct Concat : Projected<Concat> {
  const char* fwd_op = "concat_channels_forward";
  const char* bwd_op = "concat_channels_backward";
  int64_t N = 7, Ca = 3, Cb = 5;
  bool skip_b = false;
  double tol_fwd = 1e-7, tol_bwd = 1e-7;
  bool fd = true;
  std::vector<std::string> fd_inputs = {"a", "b"};
  bool has_fwd(const Backend& b) const { return b.train.concat_channels_forward; }
  bool has_bwd(const Backend& b) const { return b.train.concat_channels_backward; }
  Arrays make(Rng& r) const {
    return {{"a", randn(r, size_t(N * Ca))}, {"b", randn(r, size_t(N * Cb))}, {"G", randn(r, size_t(N * (Ca + Cb)))}};
  }
  template <typename F>
  Arrays fwd(const Backend& b, const Arrays& in) const {
    auto a = as<F>(at(in, "a")), c = as<F>(at(in, "b"));
    std::vector<F> o(static_cast<size_t>(N * (Ca + Cb)));
    GP_TRAIN(F, b, concat_channels_forward, o.data(), a.data(), c.data(), N, Ca, Cb);
    return {{"out", back(o)}};
  }
  template <typename F>
  Arrays bwd(const Backend& b, const Arrays& in, const Arrays&) const {
    auto G = as<F>(at(in, "G"));
    std::vector<F> da(static_cast<size_t>(N * Ca), F(kNaN)), db(static_cast<size_t>(N * Cb), F(kNaN));
    GP_TRAIN(F, b, concat_channels_backward, da.data(), skip_b ? static_cast<F*>(nullptr) : db.data(), G.data(), N,
             Ca, Cb);
    if (skip_b) return {{"da", back(da)}};
    return {{"da", back(da)}, {"db", back(db)}};
  }
};

// x[B, HW, C] += e[B, C] (in place on a copy of x).
struct ImageBias : Projected<ImageBias> {
  const char* fwd_op = "add_image_bias_forward";
  const char* bwd_op = "add_image_bias_backward";
  int64_t B = 2, HW = 15, C = 5;
  double tol_fwd = 2e-7, tol_bwd = 1e-6;  // float rounding of the inputs and of the sum
  bool fd = true;
  std::vector<std::string> fd_inputs = {"e"};
  bool has_fwd(const Backend& b) const { return b.train.add_image_bias_forward; }
  bool has_bwd(const Backend& b) const { return b.train.add_image_bias_backward; }
  Arrays make(Rng& r) const {
    return {{"x", randn(r, size_t(B * HW * C))}, {"e", randn(r, size_t(B * C))}, {"G", randn(r, size_t(B * HW * C))}};
  }
  // A sum can cancel to near zero; its float error is relative to the terms: 2^-24 for each
  // input's rounding and for the sum's, at most 1.2e-7 of max |x| + max |e|.
  double fwd_scale(const Arrays& in) const {
    double mx = 0, me = 0;
    for (double v : in.at("x")) mx = std::max(mx, std::fabs(v));
    for (double v : in.at("e")) me = std::max(me, std::fabs(v));
    return mx + me;
  }
  template <typename F>
  Arrays fwd(const Backend& b, const Arrays& in) const {
    auto x = as<F>(at(in, "x")), e = as<F>(at(in, "e"));
    GP_TRAIN(F, b, add_image_bias_forward, x.data(), e.data(), B, HW, C);
    return {{"out", back(x)}};
  }
  template <typename F>
  Arrays bwd(const Backend& b, const Arrays& in, const Arrays&) const {
    auto G = as<F>(at(in, "G"));
    std::vector<F> de(static_cast<size_t>(B * C), F(kNaN));
    GP_TRAIN(F, b, add_image_bias_backward, de.data(), G.data(), B, HW, C);
    return {{"de", back(de)}};
  }
};

// The loss is dloss times the mean squared error, so that backward's dloss is checked too.
struct Mse {
  const char* fwd_op = "mse_forward";
  const char* bwd_op = "mse_backward";
  int64_t n = 1001;
  double dloss = 0.5;
  double tol_fwd = 1e-6, tol_bwd = 1e-6;
  bool fd = true;
  std::vector<std::string> fd_inputs = {"pred"};
  bool has_fwd(const Backend& b) const { return b.train.mse_forward; }
  bool has_bwd(const Backend& b) const { return b.train.mse_backward; }
  Arrays make(Rng& r) const { return {{"pred", randn(r, size_t(n))}, {"target", randn(r, size_t(n))}}; }
  template <typename F>
  Arrays fwd(const Backend& b, const Arrays& in) const {
    auto p = as<F>(at(in, "pred")), t = as<F>(at(in, "target"));
    return {{"loss", {GP_TRAIN(F, b, mse_forward, p.data(), t.data(), n)}}};
  }
  template <typename F>
  Arrays bwd(const Backend& b, const Arrays& in, const Arrays&) const {
    auto p = as<F>(at(in, "pred")), t = as<F>(at(in, "target"));
    std::vector<F> d(static_cast<size_t>(n), F(kNaN));
    GP_TRAIN(F, b, mse_backward, d.data(), p.data(), t.data(), n, dloss);
    return {{"dpred", back(d)}};
  }
  double loss(const Backend& b, const Arrays& in) const { return dloss * fwd<double>(b, in).at("loss")[0]; }
};

}  // namespace

void add_image_cases(std::vector<Case>& out) {
  struct S {
    int64_t B, H, W, IC, OC, K, stride, pad;
    const char* what;
  };
  for (const S& c : {S{2, 5, 7, 3, 4, 3, 1, 1, "B=2 5x7 IC=3 OC=4 3x3 same"},
                     S{1, 6, 5, 17, 5, 3, 2, 1, "B=1 6x5 IC=17 OC=5 3x3 stride 2"},
                     S{1, 5, 6, 2, 3, 3, 1, 0, "B=1 5x6 IC=2 OC=3 3x3 valid"},
                     S{2, 4, 3, 5, 6, 1, 1, 0, "B=2 4x3 IC=5 OC=6 1x1 (matmul path)"},
                     S{1, 1, 1, 3, 2, 3, 1, 1, "B=1 1x1 IC=3 OC=2 3x3 same (one pixel)"},
                     S{2, 7, 9, 1, 16, 3, 2, 1, "B=2 7x9 IC=1 OC=16 3x3 stride 2 (odd sizes)"},
                     S{3, 9, 7, 16, 1, 3, 1, 1, "B=3 9x7 IC=16 OC=1 3x3 same (one output channel)"},
                     S{2, 4, 6, 3, 3, 1, 2, 0, "B=2 4x6 IC=3 OC=3 1x1 stride 2 (right padding -1)"},
                     S{1, 8, 6, 4, 5, 3, 2, 0, "B=1 8x6 IC=4 OC=5 3x3 stride 2 valid (right padding -1)"},
                     S{2, 8, 8, 32, 32, 3, 2, 1, "B=2 8x8 IC=32 OC=32 3x3 stride 2 (down-sampling)"},
                     S{3, 6, 10, 48, 16, 3, 1, 1, "B=3 6x10 IC=48 OC=16 3x3 same (concatenated skip)"}}) {
    ops::ConvShape s;
    s.B = c.B, s.H = c.H, s.W = c.W, s.IC = c.IC, s.OC = c.OC, s.K = c.K, s.stride = c.stride, s.pad = c.pad;
    add_family(out, c.what, Conv2d(s));
  }
  add_family(out, "B=2 HW=15 C=12 G=4", GroupNorm{});
  {
    GroupNorm one;
    one.B = 1, one.HW = 1, one.C = 7, one.G = 1;  // one pixel, one group
    add_family(out, "B=1 HW=1 C=7 G=1", one);
    GroupNorm per_channel;
    per_channel.B = 3, per_channel.HW = 9, per_channel.C = 6, per_channel.G = 6;
    add_family(out, "B=3 HW=9 C=6 G=6 (instance norm)", per_channel);
  }
  add_family(out, "n=1001", Silu{});
  add_family(out, "B=2 H=4 W=6 C=5", Resample(true));
  add_family(out, "B=2 H=4 W=6 C=5", Resample(false));
  add_family(out, "B=2 H=5 W=7 C=3 x4", Bicubic{});
  {
    Bicubic two;
    two.H = 1, two.W = 2, two.s = 2;  // every tap clamped
    add_family(out, "B=2 H=1 W=2 C=3 x2", two);
  }
  add_family(out, "N=7 Ca=3 Cb=5", Concat{});
  {
    Concat one, wide, skip;
    one.N = 1, one.Ca = 1, one.Cb = 1;
    add_family(out, "N=1 Ca=1 Cb=1", one);
    wide.N = 33, wide.Ca = 16, wide.Cb = 17;
    add_family(out, "N=33 Ca=16 Cb=17", wide);
    skip.skip_b = true;
    skip.fd_inputs = {"a"};
    add_family(out, "N=7 Ca=3 Cb=5 db null", skip);
  }
  add_family(out, "B=2 HW=15 C=5", ImageBias{});
  {
    ImageBias one, wide;
    one.B = 1, one.HW = 1, one.C = 1;
    add_family(out, "B=1 HW=1 C=1", one);
    wide.B = 3, wide.HW = 40, wide.C = 37;  // channels over several blocks of 16
    add_family(out, "B=3 HW=40 C=37", wide);
  }
  add_family(out, "n=1001", Mse{});
  {
    Mse one, chunks;
    one.n = 1;
    add_family(out, "n=1", one);
    chunks.n = (int64_t(1) << 16) + 3;  // two partial sums
    chunks.fd = false;  // differences of a loss this long drown in its rounding; n=1001 checks them
    add_family(out, "n=65539 (two chunks)", chunks);
  }
  // Last, so that the cases above keep their seeds (case_seed: the base seed and the position).
  GroupNorm blocks;  // several blocks of pixels per image, the last partial; 40 channels
  blocks.B = 2, blocks.HW = 307, blocks.C = 40, blocks.G = 8;
  add_family(out, "B=2 HW=307 C=40 G=8 (blocks of pixels)", blocks);
  Silu threads;
  threads.n = 40003;  // split among threads
  add_family(out, "n=40003", threads);
  add_family(out, "B=2 HW=15 C=12 G=4", GroupNorm(true));
  GroupNorm fused_blocks(true);
  fused_blocks.B = 2, fused_blocks.HW = 307, fused_blocks.C = 40, fused_blocks.G = 8;
  add_family(out, "B=2 HW=307 C=40 G=8 (blocks of pixels)", fused_blocks);
}

}  // namespace genperf::bench::harness
