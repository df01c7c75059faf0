// Image ops (genperf/ops_image.h): forward against direct float64 formulas, backward against
// central finite differences in float64 or direct loops, the float kernels against the float64
// reference, at odd sizes (one pixel, one group, channels not a multiple of the SIMD width), bad
// shapes refused, and the sums (mse, the bias gradient) the same for any thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/image_ops.h"
#include "genperf/dtype.h"
#include "genperf/error.h"
#include "genperf/ops_image.h"
#include "genperf/rng.h"
#include "genperf/runtime.h"
#include "train/train_test_util.h"

using namespace genperf;
using namespace genperf::ops;
using namespace genperf::testing;

namespace {

constexpr uint64_t kSeed = 20261205;

struct GnCase {
  int64_t B, H, W, C, G;
};

TEST(ImageOps, GroupNorm) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  for (const GnCase k : {GnCase{1, 1, 1, 4, 1}, {2, 3, 5, 6, 3}, {2, 4, 4, 16, 4}, {1, 2, 3, 7, 7},
                          {2, 37, 29, 40, 8}}) {
    const int64_t HW = k.H * k.W, n = k.B * HW * k.C, Cg = k.C / k.G;
    Rng r(kSeed + uint64_t(n));
    auto x = randn(r, size_t(n), 2.0), gamma = randn(r, size_t(k.C)), beta = randn(r, size_t(k.C));
    for (double& v : x) v += 0.5;  // a non-zero mean
    const double eps = 1e-5;
    std::vector<double> y(static_cast<size_t>(n)), mean(static_cast<size_t>(k.B * k.G)), rstd(mean.size());
    group_norm_forward(y.data(), mean.data(), rstd.data(), x.data(), gamma.data(), beta.data(), k.B, HW, k.C,
                       k.G, eps);
    // Direct formula.
    std::vector<double> want(static_cast<size_t>(n));
    for (int64_t b = 0; b < k.B; ++b)
      for (int64_t g = 0; g < k.G; ++g) {
        double s = 0, ss = 0;
        for (int64_t p = 0; p < HW; ++p)
          for (int64_t c = g * Cg; c < (g + 1) * Cg; ++c) s += x[size_t((b * HW + p) * k.C + c)];
        const double mu = s / double(HW * Cg);
        for (int64_t p = 0; p < HW; ++p)
          for (int64_t c = g * Cg; c < (g + 1) * Cg; ++c) ss += std::pow(x[size_t((b * HW + p) * k.C + c)] - mu, 2);
        const double sd = std::sqrt(ss / double(HW * Cg) + eps);
        for (int64_t p = 0; p < HW; ++p)
          for (int64_t c = g * Cg; c < (g + 1) * Cg; ++c) {
            const size_t i = size_t((b * HW + p) * k.C + c);
            want[i] = (x[i] - mu) / sd * gamma[size_t(c)] + beta[size_t(c)];
          }
      }
    EXPECT_LT(rel_error(y, want), 1e-12);
    // Backward against finite differences of <G, y>.
    auto G = randn(r, size_t(n));
    std::vector<double> dx(static_cast<size_t>(n)), dg(size_t(k.C), 0.0), db(size_t(k.C), 0.0);
    group_norm_backward(dx.data(), dg.data(), db.data(), G.data(), x.data(), gamma.data(), mean.data(),
                        rstd.data(), k.B, HW, k.C, k.G);
    auto loss = [&] {
      std::vector<double> o(static_cast<size_t>(n)), m(mean.size()), s(mean.size());
      group_norm_forward(o.data(), m.data(), s.data(), x.data(), gamma.data(), beta.data(), k.B, HW, k.C, k.G,
                         eps);
      return dot(o, G);
    };
    const std::string what = "group_norm C=" + std::to_string(k.C) + " G=" + std::to_string(k.G);
    if (HW * Cg > 1) check_fd(what + " dx", x, dx, loss, r, 32);
    check_fd(what + " dgamma", gamma, dg, loss, r, 16);
    check_fd(what + " dbeta", beta, db, loss, r, 16);
    // The float kernel against the float64 reference.
    const auto xf = cast<float>(x), gf = cast<float>(gamma), bf = cast<float>(beta), Gf = cast<float>(G);
    std::vector<float> yf(static_cast<size_t>(n)), mf(mean.size()), sf(mean.size()), dxf(static_cast<size_t>(n)), dgf(size_t(k.C), 0.f),
        dbf(size_t(k.C), 0.f);
    group_norm_forward(yf.data(), mf.data(), sf.data(), xf.data(), gf.data(), bf.data(), k.B, HW, k.C, k.G, eps);
    group_norm_backward(dxf.data(), dgf.data(), dbf.data(), Gf.data(), xf.data(), gf.data(), mf.data(), sf.data(),
                        k.B, HW, k.C, k.G);
    EXPECT_LT(rel_error(yf, y), 1e-5);
    if (HW * Cg > 1) {
      EXPECT_LT(rel_error(dxf, dx), 1e-4);
    }
    EXPECT_LT(rel_error(dgf, dg), 1e-5);
    EXPECT_LT(rel_error(dbf, db), 1e-5);
  }
}

TEST(ImageOps, SiluAndResampling) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const int64_t B = 2, H = 4, W = 6, C = 3, n = B * H * W * C;
  Rng r(kSeed);
  auto x = randn(r, size_t(n), 3.0);
  // SiLU: forward against x sigmoid(x), backward against finite differences.
  std::vector<double> y(static_cast<size_t>(n)), dx(static_cast<size_t>(n));
  silu_forward(y.data(), x.data(), n);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[size_t(i)], x[size_t(i)] / (1 + std::exp(-x[size_t(i)])), 1e-15);
  auto G = randn(r, size_t(n));
  silu_backward(dx.data(), G.data(), x.data(), n);
  check_fd("silu dx", x, dx, [&] {
    std::vector<double> o(static_cast<size_t>(n));
    silu_forward(o.data(), x.data(), n);
    return dot(o, G);
  }, r, 32);
  // Up-sampling: each output pixel is its parent; backward sums the four children.
  std::vector<double> up(static_cast<size_t>(4 * n)), dup(static_cast<size_t>(n));
  upsample2x_forward(up.data(), x.data(), B, H, W, C);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t yo = 0; yo < 2 * H; ++yo)
      for (int64_t xo = 0; xo < 2 * W; ++xo)
        for (int64_t c = 0; c < C; ++c)
          ASSERT_EQ(up[size_t(((b * 2 * H + yo) * 2 * W + xo) * C + c)], x[size_t(((b * H + yo / 2) * W + xo / 2) * C + c)]);
  auto G4 = randn(r, size_t(4 * n));
  upsample2x_backward(dup.data(), G4.data(), B, H, W, C);
  check_fd("upsample2x dx", x, dup, [&] {
    std::vector<double> o(static_cast<size_t>(4 * n));
    upsample2x_forward(o.data(), x.data(), B, H, W, C);
    return dot(o, G4);
  }, r, 32);
  // Average pooling: the mean of each 2 x 2 block; backward spreads a quarter.
  std::vector<double> pool(static_cast<size_t>(n / 4)), dpool(static_cast<size_t>(n));
  avgpool2x_forward(pool.data(), x.data(), B, H, W, C);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t yo = 0; yo < H / 2; ++yo)
      for (int64_t xo = 0; xo < W / 2; ++xo)
        for (int64_t c = 0; c < C; ++c) {
          double s = 0;
          for (int64_t dy = 0; dy < 2; ++dy)
            for (int64_t dxx = 0; dxx < 2; ++dxx) s += x[size_t(((b * H + 2 * yo + dy) * W + 2 * xo + dxx) * C + c)];
          EXPECT_NEAR(pool[size_t(((b * H / 2 + yo) * W / 2 + xo) * C + c)], s / 4, 1e-14);
        }
  auto Gq = randn(r, size_t(n / 4));
  avgpool2x_backward(dpool.data(), Gq.data(), B, H, W, C);
  check_fd("avgpool2x dx", x, dpool, [&] {
    std::vector<double> o(static_cast<size_t>(n / 4));
    avgpool2x_forward(o.data(), x.data(), B, H, W, C);
    return dot(o, Gq);
  }, r, 32);
  // The float kernels against the float64 ones.
  const auto xf = cast<float>(x);
  std::vector<float> yf(static_cast<size_t>(n)), upf(static_cast<size_t>(4 * n)), poolf(static_cast<size_t>(n / 4));
  silu_forward(yf.data(), xf.data(), n);
  upsample2x_forward(upf.data(), xf.data(), B, H, W, C);
  avgpool2x_forward(poolf.data(), xf.data(), B, H, W, C);
  EXPECT_LT(rel_error(yf, y), 1e-6);
  EXPECT_LT(rel_error(upf, up), 1e-7);
  EXPECT_LT(rel_error(poolf, pool), 1e-6);
}

TEST(ImageOps, RejectsBadShapes) {
  std::vector<float> f(64, 0.f);
  float* p = f.data();
  EXPECT_THROW(group_norm_forward(p, p, p, p, p, p, 1, 4, 6, 4, 1e-5), Error);  // 6 channels, 4 groups
  EXPECT_THROW(avgpool2x_forward(p, p, 1, 3, 4, 2), Error);                     // odd height
  EXPECT_THROW(upsample2x_forward(p, p, 1, 0, 4, 2), Error);                    // empty
}

}  // namespace

namespace {

// Direct float64 convolution: out[b, oy, ox, o] = bias[o] + sum over (ky, kx, c) inside the image.
std::vector<double> conv_direct(const std::vector<double>& x, const std::vector<double>& w,
                                const std::vector<double>& bias, const ConvShape& s) {
  std::vector<double> out(static_cast<size_t>(s.B * s.Ho() * s.Wo() * s.OC));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t oy = 0; oy < s.Ho(); ++oy)
      for (int64_t ox = 0; ox < s.Wo(); ++ox)
        for (int64_t o = 0; o < s.OC; ++o) {
          double acc = bias.empty() ? 0.0 : bias[size_t(o)];
          for (int64_t ky = 0; ky < s.K; ++ky)
            for (int64_t kx = 0; kx < s.K; ++kx) {
              const int64_t y = oy * s.stride - s.pad + ky, xx = ox * s.stride - s.pad + kx;
              if (y < 0 || y >= s.H || xx < 0 || xx >= s.W) continue;
              for (int64_t c = 0; c < s.IC; ++c)
                acc += x[size_t(((b * s.H + y) * s.W + xx) * s.IC + c)] *
                       w[size_t(((o * s.K + ky) * s.K + kx) * s.IC + c)];
            }
          out[size_t(((b * s.Ho() + oy) * s.Wo() + ox) * s.OC + o)] = acc;
        }
  return out;
}

ConvShape conv(int64_t B, int64_t H, int64_t W, int64_t IC, int64_t OC, int64_t K, int64_t stride, int64_t pad,
               bool bf16 = false) {
  ConvShape s;
  s.B = B, s.H = H, s.W = W, s.IC = IC, s.OC = OC, s.K = K, s.stride = stride, s.pad = pad, s.bf16 = bf16;
  return s;
}

// Sets the convolution path for a test; the path and the ISA level are restored as it ends.
struct ConvPathScope {
  explicit ConvPathScope(cpu::ConvPath p) { cpu::set_conv_path(p); }
  ~ConvPathScope() {
    cpu::set_conv_path(path);
    set_isa(level);
  }
  const Isa level = isa();
  const cpu::ConvPath path = cpu::conv_path();
};

constexpr cpu::ConvPath kConvPaths[] = {cpu::ConvPath::Winograd, cpu::ConvPath::OneDnn, cpu::ConvPath::Im2col};
const char* path_name(cpu::ConvPath p) {
  return p == cpu::ConvPath::Winograd ? " (Winograd)" : p == cpu::ConvPath::OneDnn ? " (oneDNN)" : " (im2col)";
}

}  // namespace

// 3 x 3 same and strided (odd sizes: a bottom and right padding below pad, or negative), valid
// (no padding), 1 x 1 pointwise (the matmul path) and strided, one input or output channel:
// forward against the direct sum, backward against finite differences (float64), the float
// kernel against the float64 one on each of its paths (Winograd's F(4 x 4, 3 x 3), oneDNN's
// primitives and im2col; Winograd's where it applies: 3 x 3 same, channels in multiples of 8,
// tiles cut by the image's edge, one pixel, OC not a multiple of 16; its products for 1 x 1
// convolutions of 8 to 64 output channels), with a
// second backward that must overwrite dx and add to dw and dbias; and images large enough that
// the patch matrix is built in several chunks, which span images.
TEST(ImageOps, Conv2d) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const cpu::ConvPath saved_path = cpu::conv_path();
  const ConvShape shapes[] = {conv(2, 5, 7, 3, 4, 3, 1, 1),  conv(2, 6, 5, 3, 4, 3, 2, 1),  conv(1, 5, 6, 2, 3, 3, 1, 0),
                              conv(2, 4, 3, 5, 6, 1, 1, 0),  conv(1, 5, 5, 4, 2, 1, 2, 0),  conv(1, 1, 1, 3, 2, 3, 1, 1),
                              conv(2, 7, 9, 1, 16, 3, 2, 1), conv(3, 9, 7, 16, 1, 3, 1, 1), conv(2, 4, 6, 3, 3, 1, 2, 0),
                              conv(1, 8, 6, 4, 5, 3, 2, 0),  conv(2, 9, 11, 16, 24, 3, 1, 1), conv(1, 1, 1, 8, 8, 3, 1, 1),
                              conv(1, 4, 4, 8, 16, 3, 1, 1), conv(2, 12, 16, 64, 32, 3, 1, 1),
                              conv(2, 5, 7, 24, 16, 1, 1, 0), conv(1, 9, 11, 48, 40, 1, 1, 0)};
  for (const ConvShape& s : shapes) {
    const std::string what = "conv2d B=" + std::to_string(s.B) + " " + std::to_string(s.H) + "x" + std::to_string(s.W) +
                             " IC=" + std::to_string(s.IC) + " OC=" + std::to_string(s.OC) + " K=" +
                             std::to_string(s.K) + " stride " + std::to_string(s.stride) + " pad " +
                             std::to_string(s.pad);
    Rng r(kSeed + uint64_t(s.H * 100 + s.K * 10 + s.stride));
    auto x = randn(r, static_cast<size_t>(s.B * s.H * s.W * s.IC)), w = randn(r, static_cast<size_t>(s.OC * s.filter()), 0.5),
         bias = randn(r, static_cast<size_t>(s.OC));
    const size_t n_out = static_cast<size_t>(s.B * s.Ho() * s.Wo() * s.OC);
    std::vector<double> y(n_out);
    conv2d_forward(y.data(), x.data(), w.data(), bias.data(), s);
    EXPECT_LT(rel_error(y, conv_direct(x, w, bias, s)), 1e-13) << what;
    auto G = randn(r, n_out);
    std::vector<double> dx(x.size(), 7.0), dw(w.size(), 0.0), db(bias.size(), 0.0);
    conv2d_backward(dx.data(), dw.data(), db.data(), G.data(), x.data(), w.data(), s);
    auto loss = [&] {
      std::vector<double> o(n_out);
      conv2d_forward(o.data(), x.data(), w.data(), bias.data(), s);
      return dot(o, G);
    };
    check_fd(what + " dx", x, dx, loss, r, 24);
    check_fd(what + " dw", w, dw, loss, r, 24);
    check_fd(what + " dbias", bias, db, loss, r, 8);
    const auto xf = cast<float>(x), wf = cast<float>(w), bf = cast<float>(bias), Gf = cast<float>(G);
    for (cpu::ConvPath cp : kConvPaths) {
      cpu::set_conv_path(cp);
      const std::string path = what + path_name(cp);
      std::vector<float> yf(n_out), dxf(x.size(), NAN), dwf(w.size(), 0.f), dbf(bias.size(), 0.f);
      conv2d_forward(yf.data(), xf.data(), wf.data(), bf.data(), s);
      conv2d_backward(dxf.data(), dwf.data(), dbf.data(), Gf.data(), xf.data(), wf.data(), s);
      EXPECT_LT(rel_error(yf, y), 1e-5) << path;
      EXPECT_LT(rel_error(dxf, dx), 1e-5) << path;
      EXPECT_LT(rel_error(dwf, dw), 1e-5) << path;
      EXPECT_LT(rel_error(dbf, db), 1e-5) << path;
      const std::vector<float> dx1 = dxf;
      conv2d_backward(dxf.data(), dwf.data(), dbf.data(), Gf.data(), xf.data(), wf.data(), s);
      std::vector<double> dw2(dw.size()), db2(db.size());
      for (size_t i = 0; i < dw.size(); ++i) dw2[i] = 2 * dw[i];
      for (size_t i = 0; i < db.size(); ++i) db2[i] = 2 * db[i];
      EXPECT_EQ(dxf, dx1) << path << ": dx is overwritten";
      EXPECT_LT(rel_error(dwf, dw2), 1e-5) << path << ": dw accumulates";
      EXPECT_LT(rel_error(dbf, db2), 1e-5) << path << ": dbias accumulates";
    }
  }
  // Chunks: 64 output rows of 128 pixels with 288 weights each make a patch matrix of 19 MB in
  // float64 (three chunks) and 9 MB in float (two); three images of 40 x 72 in chunks of 3600
  // pixels in float64 and 7272 in float, which end inside an image.
  for (const ConvShape& big : {conv(1, 64, 128, 32, 8, 3, 1, 1), conv(3, 40, 72, 32, 8, 3, 1, 1)}) {
    const std::string what = "conv2d B=" + std::to_string(big.B) + " " + std::to_string(big.H) + "x" + std::to_string(big.W);
    Rng r(kSeed);
    auto x = randn(r, static_cast<size_t>(big.B * big.H * big.W * big.IC)),
         w = randn(r, static_cast<size_t>(8 * big.filter()), 0.2);
    const std::vector<double> none;
    const auto want = conv_direct(x, w, none, big);
    std::vector<double> y(want.size());
    conv2d_forward(y.data(), x.data(), w.data(), static_cast<const double*>(nullptr), big);
    EXPECT_LT(rel_error(y, want), 1e-13) << what;
    auto G = randn(r, want.size());
    std::vector<double> dx(x.size()), dw(w.size(), 0.0);
    conv2d_backward(dx.data(), dw.data(), static_cast<double*>(nullptr), G.data(), x.data(), w.data(), big);
    const auto xf = cast<float>(x), wf = cast<float>(w), Gf = cast<float>(G);
    for (cpu::ConvPath cp : kConvPaths) {
      cpu::set_conv_path(cp);
      const std::string path = what + path_name(cp);
      std::vector<float> yf(want.size());
      conv2d_forward(yf.data(), xf.data(), wf.data(), static_cast<const float*>(nullptr), big);
      EXPECT_LT(rel_error(yf, want), 1e-5) << path;
      // Backward in chunks: float against float64 (each already checked on small shapes).
      std::vector<float> dxf(x.size()), dwf(w.size(), 0.f);
      conv2d_backward(dxf.data(), dwf.data(), static_cast<float*>(nullptr), Gf.data(), xf.data(), wf.data(), big);
      EXPECT_LT(rel_error(dxf, dx), 1e-5) << path;
      EXPECT_LT(rel_error(dwf, dw), 1e-5) << path;
    }
  }
  cpu::set_conv_path(saved_path);
  // Shapes the op refuses.
  std::vector<float> f(64, 0.f);
  float* p = f.data();
  EXPECT_THROW(conv2d_forward(p, p, p, p, conv(1, 2, 2, 1, 1, 5, 1, 1)), Error);  // kernel larger than the image
  EXPECT_THROW(conv2d_forward(p, p, p, p, conv(1, 4, 4, 1, 1, 3, 0, 1)), Error);  // stride 0
  EXPECT_THROW(conv2d_forward(p, p, p, p, conv(1, 4, 4, 1, 1, 3, 1, 3)), Error);  // padding >= kernel
}

// Bicubic up-sampling: a constant stays constant and a ramp stays a ramp away from the borders
// (Keys' kernel reproduces polynomials to degree 2), the 2-D result against a direct 4 x 4 sum,
// backward as the adjoint (<A x, g> = <x, A^T g>) and against finite differences.
TEST(ImageOps, BicubicUp) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const int64_t B = 2, H = 5, W = 7, C = 2;
  for (int64_t s : {1, 2, 4}) {
    const int64_t n = B * H * W * C, no = n * s * s;
    Rng r(kSeed + uint64_t(s));
    auto x = randn(r, static_cast<size_t>(n));
    std::vector<double> y(static_cast<size_t>(no));
    bicubic_up_forward(y.data(), x.data(), B, H, W, C, s);
    auto keys = [](double d) {
      const double a = -0.5, t = std::fabs(d);
      return t <= 1 ? ((a + 2) * t - (a + 3)) * t * t + 1 : t < 2 ? ((a * t - 5 * a) * t + 8 * a) * t - 4 * a : 0.0;
    };
    double worst = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t oy = 0; oy < H * s; ++oy)
        for (int64_t ox = 0; ox < W * s; ++ox)
          for (int64_t c = 0; c < C; ++c) {
            const double sy = (oy + 0.5) / double(s) - 0.5, sx = (ox + 0.5) / double(s) - 0.5;
            double acc = 0;
            for (int64_t iy = int64_t(std::floor(sy)) - 1; iy <= int64_t(std::floor(sy)) + 2; ++iy)
              for (int64_t ix = int64_t(std::floor(sx)) - 1; ix <= int64_t(std::floor(sx)) + 2; ++ix) {
                const int64_t cy = std::clamp<int64_t>(iy, 0, H - 1), cx = std::clamp<int64_t>(ix, 0, W - 1);
                acc += keys(sy - double(iy)) * keys(sx - double(ix)) * x[size_t(((b * H + cy) * W + cx) * C + c)];
              }
            worst = std::max(worst, std::fabs(acc - y[size_t(((b * H * s + oy) * W * s + ox) * C + c)]));
          }
    EXPECT_LT(worst, 1e-12) << "scale " << s;
    if (s == 1) {
      EXPECT_LT(rel_error(y, x), 1e-15);  // scale 1 is the identity
    }
    // Constants and ramps.
    std::vector<double> ramp(static_cast<size_t>(n)), up(static_cast<size_t>(no));
    for (int64_t i = 0; i < n; ++i) ramp[size_t(i)] = 3.0;
    bicubic_up_forward(up.data(), ramp.data(), B, H, W, C, s);
    for (double v : up) ASSERT_NEAR(v, 3.0, 1e-12);
    for (int64_t i = 0; i < n; ++i) ramp[size_t(i)] = double((i / C) % W);  // x coordinate
    bicubic_up_forward(up.data(), ramp.data(), B, H, W, C, s);
    for (int64_t ox = 2 * s; ox < (W - 2) * s; ++ox)
      EXPECT_NEAR(up[size_t(ox * C)], (ox + 0.5) / double(s) - 0.5, 1e-12) << "scale " << s << " column " << ox;
    // Backward: the adjoint, and finite differences.
    auto G = randn(r, static_cast<size_t>(no));
    std::vector<double> dx(static_cast<size_t>(n), 9.0);
    bicubic_up_backward(dx.data(), G.data(), B, H, W, C, s);
    EXPECT_NEAR(dot(y, G), dot(x, dx), 1e-10 * std::fabs(dot(y, G)) + 1e-12);
    check_fd("bicubic x" + std::to_string(s) + " dx", x, dx, [&] {
      std::vector<double> o(static_cast<size_t>(no));
      bicubic_up_forward(o.data(), x.data(), B, H, W, C, s);
      return dot(o, G);
    }, r, 24);
    const auto xf = cast<float>(x), Gf = cast<float>(G);
    std::vector<float> yf(static_cast<size_t>(no)), dxf(static_cast<size_t>(n));
    bicubic_up_forward(yf.data(), xf.data(), B, H, W, C, s);
    bicubic_up_backward(dxf.data(), Gf.data(), B, H, W, C, s);
    EXPECT_LT(rel_error(yf, y), 1e-6);
    EXPECT_LT(rel_error(dxf, dx), 1e-6);
  }
}

TEST(ImageOps, TimeEmbedding) {
  const std::vector<double> t = {0.0, 1.0, 37.5, 999.0};
  const int64_t dim = 8;
  std::vector<double> e(t.size() * dim);
  time_embedding(e.data(), t.data(), int64_t(t.size()), dim);
  for (size_t n = 0; n < t.size(); ++n)
    for (int64_t i = 0; i < dim / 2; ++i) {
      const double f = std::pow(10000.0, -double(i) / double(dim / 2));
      EXPECT_NEAR(e[n * dim + size_t(i)], std::sin(t[n] * f), 1e-12);
      EXPECT_NEAR(e[n * dim + size_t(dim / 2 + i)], std::cos(t[n] * f), 1e-12);
    }
  std::vector<float> tf(t.begin(), t.end()), ef(e.size());
  time_embedding(ef.data(), tf.data(), int64_t(t.size()), dim);
  EXPECT_LT(rel_error(ef, e), 1e-6);
  EXPECT_THROW(time_embedding(ef.data(), tf.data(), 1, 7), Error);
}

namespace {

// The message of the Error fn throws ("" if none).
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// Concatenation against a direct row-by-row copy, in float64 and float; backward splits dout back
// into the two blocks, each skipped when its pointer is null.
TEST(ImageOps, ConcatChannels) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  struct Sz {
    int64_t N, Ca, Cb;
  };
  for (const Sz k : {Sz{7, 3, 5}, Sz{1, 1, 1}, Sz{40, 16, 17}, Sz{3000, 5, 8}}) {
    const int64_t C = k.Ca + k.Cb;
    Rng r(kSeed + uint64_t(k.N * C));
    const auto a = randn(r, size_t(k.N * k.Ca)), b = randn(r, size_t(k.N * k.Cb)), G = randn(r, size_t(k.N * C));
    std::vector<double> want(size_t(k.N * C)), wa(a.size()), wb(b.size());
    for (int64_t i = 0; i < k.N; ++i) {
      for (int64_t c = 0; c < k.Ca; ++c) want[size_t(i * C + c)] = a[size_t(i * k.Ca + c)];
      for (int64_t c = 0; c < k.Cb; ++c) want[size_t(i * C + k.Ca + c)] = b[size_t(i * k.Cb + c)];
      for (int64_t c = 0; c < k.Ca; ++c) wa[size_t(i * k.Ca + c)] = G[size_t(i * C + c)];
      for (int64_t c = 0; c < k.Cb; ++c) wb[size_t(i * k.Cb + c)] = G[size_t(i * C + k.Ca + c)];
    }
    std::vector<double> out(want.size()), da(a.size(), 9.0), db(b.size(), 9.0);
    concat_channels_forward(out.data(), a.data(), b.data(), k.N, k.Ca, k.Cb);
    concat_channels_backward(da.data(), db.data(), G.data(), k.N, k.Ca, k.Cb);
    EXPECT_EQ(out, want);
    EXPECT_EQ(da, wa);
    EXPECT_EQ(db, wb);
    const auto af = cast<float>(a), bf = cast<float>(b), Gf = cast<float>(G);
    std::vector<float> outf(want.size()), daf(a.size(), 9.f), dbf(b.size(), 9.f);
    concat_channels_forward(outf.data(), af.data(), bf.data(), k.N, k.Ca, k.Cb);
    concat_channels_backward(daf.data(), dbf.data(), Gf.data(), k.N, k.Ca, k.Cb);
    EXPECT_EQ(outf, cast<float>(want));
    EXPECT_EQ(daf, cast<float>(wa));
    EXPECT_EQ(dbf, cast<float>(wb));
    // One gradient at a time.
    std::vector<float> only_a(a.size(), 9.f), only_b(b.size(), 9.f);
    concat_channels_backward(only_a.data(), static_cast<float*>(nullptr), Gf.data(), k.N, k.Ca, k.Cb);
    concat_channels_backward(static_cast<float*>(nullptr), only_b.data(), Gf.data(), k.N, k.Ca, k.Cb);
    EXPECT_EQ(only_a, cast<float>(wa));
    EXPECT_EQ(only_b, cast<float>(wb));
    std::vector<double> only_bd(b.size(), 9.0);
    concat_channels_backward(static_cast<double*>(nullptr), only_bd.data(), G.data(), k.N, k.Ca, k.Cb);
    EXPECT_EQ(only_bd, wb);
  }
  std::vector<float> f(64, 0.f);
  float* p = f.data();
  EXPECT_EQ(error_of([&] { concat_channels_forward(p, p, p, 4, 3, 0); }),
            "[concat_channels_forward] empty concatenation: N 4, Ca 3, Cb 0");
  EXPECT_EQ(error_of([&] { concat_channels_backward(p, p, p, 0, 3, 2); }),
            "[concat_channels_backward] empty concatenation: N 0, Ca 3, Cb 2");
}

// The bias added to every pixel of its image; backward the per-image sum over pixels, against
// direct loops (float64 and float).
TEST(ImageOps, AddImageBias) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  struct Sz {
    int64_t B, HW, C;
  };
  for (const Sz k : {Sz{2, 7, 3}, Sz{1, 1, 1}, Sz{3, 13, 37}, Sz{2, 1024, 20}}) {
    const int64_t n = k.B * k.HW * k.C;
    Rng r(kSeed + uint64_t(n));
    const auto x = randn(r, size_t(n)), e = randn(r, size_t(k.B * k.C)), G = randn(r, size_t(n));
    std::vector<double> want(x), wde(e.size(), 0.0);
    for (int64_t b = 0; b < k.B; ++b)
      for (int64_t p = 0; p < k.HW; ++p)
        for (int64_t c = 0; c < k.C; ++c) {
          want[size_t((b * k.HW + p) * k.C + c)] += e[size_t(b * k.C + c)];
          wde[size_t(b * k.C + c)] += G[size_t((b * k.HW + p) * k.C + c)];
        }
    std::vector<double> y(x), de(e.size(), 9.0);
    add_image_bias_forward(y.data(), e.data(), k.B, k.HW, k.C);
    add_image_bias_backward(de.data(), G.data(), k.B, k.HW, k.C);
    EXPECT_EQ(y, want);
    EXPECT_LT(rel_error(de, wde), 1e-14);
    auto yf = cast<float>(x);
    const auto ef = cast<float>(e), Gf = cast<float>(G);
    std::vector<float> def(e.size(), 9.f);
    add_image_bias_forward(yf.data(), ef.data(), k.B, k.HW, k.C);
    add_image_bias_backward(def.data(), Gf.data(), k.B, k.HW, k.C);
    EXPECT_LT(rel_error(yf, want), 2e-7);
    EXPECT_LT(rel_error(def, wde), 1e-6);
  }
  std::vector<float> f(64, 0.f);
  float* p = f.data();
  EXPECT_EQ(error_of([&] { add_image_bias_forward(p, p, 2, 4, 0); }),
            "[add_image_bias_forward] empty image: B 2, H 4, W 1, C 0");
  EXPECT_NE(error_of([&] { add_image_bias_backward(p, p, 0, 4, 2); }).find("[add_image_bias_backward]"),
            std::string::npos);
}

// The mean of squared differences against a direct sum, its gradient against the formula and
// finite differences (float64), the float kernels against both; backward in place (dpred = pred).
TEST(ImageOps, Mse) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const double dloss = 0.75;
  for (const int64_t n : {int64_t(1), int64_t(7), int64_t(1001), int64_t(150001)}) {
    Rng r(kSeed + uint64_t(n));
    auto pred = randn(r, size_t(n));
    const auto target = randn(r, size_t(n));
    double sum = 0;
    std::vector<double> wd(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const double d = pred[size_t(i)] - target[size_t(i)];
      sum += d * d;
      wd[size_t(i)] = dloss * 2 * d / double(n);
    }
    const double want = sum / double(n);
    EXPECT_NEAR(mse_forward(pred.data(), target.data(), n), want, 1e-13 * want) << "n " << n;
    std::vector<double> dp(size_t(n), 9.0);
    mse_backward(dp.data(), pred.data(), target.data(), n, dloss);
    EXPECT_LT(rel_error(dp, wd), 1e-14) << "n " << n;
    if (n <= 1001)
      check_fd("mse n=" + std::to_string(n) + " dpred", pred, dp,
               [&] { return dloss * mse_forward(pred.data(), target.data(), n); }, r, 32);
    // Float: inputs rounded to float, the sum still in double.
    const auto pf = cast<float>(pred), tf = cast<float>(target);
    double sumf = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double d = double(pf[size_t(i)]) - double(tf[size_t(i)]);
      sumf += d * d;
    }
    EXPECT_NEAR(mse_forward(pf.data(), tf.data(), n), sumf / double(n), 1e-13 * want) << "n " << n;
    EXPECT_NEAR(mse_forward(pf.data(), tf.data(), n), want, 1e-6 * want) << "n " << n;
    std::vector<float> dpf(size_t(n), 9.f), inplace(pf);
    mse_backward(dpf.data(), pf.data(), tf.data(), n, dloss);
    mse_backward(inplace.data(), inplace.data(), tf.data(), n, dloss);
    EXPECT_LT(rel_error(dpf, wd), 1e-6) << "n " << n;
    EXPECT_EQ(inplace, dpf) << "n " << n;
  }
  std::vector<float> f(8, 0.f);
  EXPECT_EQ(error_of([&] { mse_forward(f.data(), f.data(), 0); }), "[mse_forward] 0 values: expected at least one");
  EXPECT_NE(error_of([&] { mse_backward(f.data(), f.data(), f.data(), -1, 1.0); }).find("[mse_backward]"),
            std::string::npos);
}

// The convolution's output and input gradient (what sampling and its chain rule read) and its
// bias gradient give the same bits at any thread count, on both float paths, at shapes of the SR
// UNet (its levels, a strided down-sampling, the concatenated skips, one output channel). dw may
// differ (its sum over pixels is split among the threads).
// Winograd's path keeps each weights buffer's transformed filters: weights changed in place (a
// training step) must give what a fresh buffer with the same values gives, bit for bit, and the
// kept ones again after the change is undone.
TEST(ImageOps, WinogradFiltersFollowTheirWeights) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const cpu::ConvPath saved_path = cpu::conv_path();
  cpu::set_conv_path(cpu::ConvPath::Winograd);
  const ConvShape s = conv(2, 10, 12, 16, 24, 3, 1, 1);
  ASSERT_TRUE(isa() < Isa::Avx2 || cpu::conv2d_uses_winograd(s));
  Rng r(kSeed + 11);
  const auto x = cast<float>(randn(r, size_t(s.B * s.H * s.W * s.IC)));
  auto w = cast<float>(randn(r, size_t(s.OC * s.filter()), 0.3));
  const size_t n_out = size_t(s.B * s.H * s.W * s.OC);
  auto run = [&](const std::vector<float>& wt) {
    std::vector<float> y(n_out);
    conv2d_forward(y.data(), x.data(), wt.data(), static_cast<const float*>(nullptr), s);
    return y;
  };
  const auto y0 = run(w);
  const auto w0 = w;
  w[5] += 0.25f;  // one filter value changed in place
  const auto y1 = run(w);
  std::vector<float> fresh = w;
  EXPECT_EQ(y1, run(fresh)) << "in place vs a fresh buffer";
  EXPECT_NE(y1, y0);
  w = w0;
  EXPECT_EQ(run(w), y0) << "changed back";
  cpu::set_conv_path(saved_path);
}

// Each path's output, data gradient and bias gradient have the same bits at 1-4 threads, and
// Winograd's weight gradient too (each of its 36 positions summed by one thread; it runs at the
// AVX2 level from 64 x 64 channel pairs, so a shape of those is checked there).
TEST(ImageOps, ConvIndependentOfThreadCount) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const cpu::ConvPath saved_path = cpu::conv_path();
  const int saved = num_threads();
  for (const ConvShape& s : {conv(2, 16, 16, 16, 32, 3, 1, 1), conv(2, 16, 16, 32, 32, 3, 2, 1),
                             conv(2, 12, 10, 48, 16, 3, 1, 1), conv(3, 9, 7, 16, 1, 3, 1, 1),
                             conv(2, 7, 9, 2, 16, 3, 1, 1)}) {
    Rng r(kSeed + uint64_t(s.IC * 100 + s.OC));
    const auto x = cast<float>(randn(r, size_t(s.B * s.H * s.W * s.IC))),
               w = cast<float>(randn(r, size_t(s.OC * s.filter()), 0.3)), bias = cast<float>(randn(r, size_t(s.OC)));
    const size_t n_out = size_t(s.B * s.Ho() * s.Wo() * s.OC);
    const auto G = cast<float>(randn(r, n_out));
    for (cpu::ConvPath cp : kConvPaths) {
      cpu::set_conv_path(cp);
      const std::string what = "IC=" + std::to_string(s.IC) + " OC=" + std::to_string(s.OC) + " stride " +
                               std::to_string(s.stride) + path_name(cp);
      std::vector<std::vector<float>> y, dx, db, dw;
      for (int nt : {1, 2, 3, 4}) {
        set_num_threads(nt);
        y.emplace_back(n_out), dx.emplace_back(x.size()), db.emplace_back(bias.size(), 0.f);
        dw.emplace_back(w.size(), 0.f);
        conv2d_forward(y.back().data(), x.data(), w.data(), bias.data(), s);
        conv2d_backward(dx.back().data(), dw.back().data(), db.back().data(), G.data(), x.data(), w.data(), s);
      }
      for (size_t i = 1; i < y.size(); ++i) {
        EXPECT_EQ(y[i], y[0]) << what << ", threads " << i + 1;
        EXPECT_EQ(dx[i], dx[0]) << what << ", threads " << i + 1;
        EXPECT_EQ(db[i], db[0]) << what << ", threads " << i + 1;
        // Winograd's weight gradient too (oneDNN's splits its sum by the thread count).
        if (cpu::conv2d_winograd_weights_gradient(s)) {
          EXPECT_EQ(dw[i], dw[0]) << what << ", threads " << i + 1;
        }
      }
    }
  }
  {
    const Isa saved_isa = isa();
    set_isa(Isa::Avx2);
    cpu::set_conv_path(cpu::ConvPath::Winograd);
    const ConvShape s = conv(2, 8, 12, 64, 64, 3, 1, 1);
    if (isa() == Isa::Avx2) {
      ASSERT_TRUE(cpu::conv2d_winograd_weights_gradient(s));
      Rng r(kSeed + 64);
      const auto x = cast<float>(randn(r, size_t(s.B * s.H * s.W * s.IC))),
                 w = cast<float>(randn(r, size_t(s.OC * s.filter()), 0.3)),
                 G = cast<float>(randn(r, size_t(s.B * s.Ho() * s.Wo() * s.OC)));
      std::vector<std::vector<float>> dw;
      for (int nt : {1, 2, 3, 4}) {
        set_num_threads(nt);
        dw.emplace_back(w.size(), 0.f);
        conv2d_backward(static_cast<float*>(nullptr), dw.back().data(), static_cast<float*>(nullptr), G.data(),
                        x.data(), w.data(), s);
      }
      for (size_t i = 1; i < dw.size(); ++i) EXPECT_EQ(dw[i], dw[0]) << "Winograd's dw, threads " << i + 1;
    }
    set_isa(saved_isa);
  }
  set_num_threads(saved);
  cpu::set_conv_path(saved_path);
}

// The direct kernel of convolutions with 1 to 4 output channels (the UNet's last layer), at each
// ISA level the CPU has: against the float64 op, at channel counts below, at and above the vector
// width, strides 1 and 2, with and without padding, images narrower than four pixels.
TEST(ImageOps, ConvFewOutputChannelsAtEachIsaLevel) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const ConvPathScope scope(cpu::ConvPath::Winograd);
  const Isa saved = scope.level;
  for (const ConvShape& s : {conv(2, 9, 11, 16, 1, 3, 1, 1), conv(1, 7, 10, 37, 3, 3, 2, 1), conv(2, 3, 2, 5, 4, 3, 1, 1),
                             conv(1, 12, 13, 8, 2, 3, 1, 0), conv(1, 6, 9, 20, 1, 1, 2, 0)}) {
    Rng r(kSeed + uint64_t(s.IC * 10 + s.OC));
    const auto x = randn(r, size_t(s.B * s.H * s.W * s.IC)), w = randn(r, size_t(s.OC * s.filter()), 0.4),
               bias = randn(r, size_t(s.OC));
    const size_t n_out = size_t(s.B * s.Ho() * s.Wo() * s.OC);
    std::vector<double> y(n_out);
    conv2d_forward(y.data(), x.data(), w.data(), bias.data(), s);
    const auto xf = cast<float>(x), wf = cast<float>(w), bf = cast<float>(bias);
    for (Isa level : {Isa::Generic, Isa::Avx2, Isa::Avx512}) {
      set_isa(level);
      if (isa() != level) continue;
      std::vector<float> yf(n_out);
      conv2d_forward(yf.data(), xf.data(), wf.data(), bf.data(), s);
      EXPECT_LT(rel_error(yf, y), 1e-5) << "IC=" << s.IC << " OC=" << s.OC << " stride " << s.stride << " at "
                                        << isa_name(level);
    }
    set_isa(saved);
  }
}

// ConvShape::bf16: the products of x, w and dout rounded to bf16 (to nearest even), summed in f32.
// The reference rounds the operands here (f32_to_bf16) and runs the float64 op; the float op is
// held to it at 1e-5 (f32 sums) on each path: Winograd's, rounding as its transforms read (3 x 3
// same, channels by 8), oneDNN's bf16 primitives where the CPU has AVX512-BF16 (the rest), and
// the rounded operands on the f32 paths (forced by the AVX2 level) everywhere, at shapes of the
// UNet (3 x 3 same, stride 2, 1 x 1) and odd ones. Against the unrounded operands the results
// differ by far more (bf16 keeps 8 bits of mantissa): the test sees whether the operands were
// rounded at all. dbias sums dout unrounded.
TEST(ImageOps, Conv2dBf16) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const ConvPathScope scope(cpu::ConvPath::Winograd);
  auto bf16 = [](std::vector<double> v) {
    for (double& d : v) d = double(bf16_to_f32(f32_to_bf16(float(d))));
    return v;
  };
  std::vector<Isa> levels = {Isa::Avx2};
  set_isa(Isa::Avx512);
  if (isa() == Isa::Avx512 && cpu::conv2d_bf16_native()) levels.push_back(Isa::Avx512);
  else std::printf("no AVX512-BF16: the rounded operands on the f32 paths only\n");
  for (ConvShape s : {conv(2, 12, 10, 16, 32, 3, 1, 1), conv(2, 9, 11, 16, 24, 3, 2, 1), conv(1, 8, 8, 32, 16, 1, 1, 0),
                      conv(2, 5, 7, 3, 4, 3, 1, 1), conv(1, 16, 16, 64, 64, 3, 1, 1)}) {
    const std::string what = "conv2d bf16 " + std::to_string(s.H) + "x" + std::to_string(s.W) + " IC=" +
                             std::to_string(s.IC) + " OC=" + std::to_string(s.OC) + " K=" + std::to_string(s.K) +
                             " stride " + std::to_string(s.stride);
    Rng r(kSeed + uint64_t(s.IC * 1000 + s.OC * 10 + s.stride));
    const auto x = randn(r, size_t(s.B * s.H * s.W * s.IC)), w = randn(r, size_t(s.OC * s.filter()), 0.3),
               bias = randn(r, size_t(s.OC));
    const size_t n_out = size_t(s.B * s.Ho() * s.Wo() * s.OC);
    const auto G = randn(r, n_out);
    const auto xr = bf16(x), wr = bf16(w), Gr = bf16(G);
    std::vector<double> y(n_out), dx(x.size()), dw(w.size(), 0.0), db(bias.size(), 0.0), y_f32(n_out);
    conv2d_forward(y.data(), xr.data(), wr.data(), bias.data(), s);
    conv2d_forward(y_f32.data(), x.data(), w.data(), bias.data(), s);
    conv2d_backward(dx.data(), dw.data(), static_cast<double*>(nullptr), Gr.data(), xr.data(), wr.data(), s);
    conv2d_backward(static_cast<double*>(nullptr), static_cast<double*>(nullptr), db.data(), G.data(), x.data(),
                    w.data(), s);
    ASSERT_GT(rel_error(y_f32, y), 1e-3) << what << ": bf16 rounding should be visible";
    // The float64 op with s.bf16 rounds too (the reference path of the flag).
    ConvShape sb = s;
    sb.bf16 = true;
    std::vector<double> y64(n_out);
    conv2d_forward(y64.data(), x.data(), w.data(), bias.data(), sb);
    EXPECT_LT(rel_error(y64, y), 1e-12) << what << " (float64)";
    const auto xf = cast<float>(x), wf = cast<float>(w), bf = cast<float>(bias), Gf = cast<float>(G);
    for (Isa level : levels) {
      set_isa(level);
      const bool winograd = cpu::conv2d_uses_winograd(sb);
      const std::string path = what + (winograd                ? " (Winograd, rounded as read)"
                                       : level == Isa::Avx512 ? " (oneDNN bf16)"
                                                              : " (rounded, f32 paths)");
      std::vector<float> yf(n_out), dxf(x.size(), NAN), dwf(w.size(), 0.f), dbf(bias.size(), 0.f);
      conv2d_forward(yf.data(), xf.data(), wf.data(), bf.data(), sb);
      conv2d_backward(dxf.data(), dwf.data(), dbf.data(), Gf.data(), xf.data(), wf.data(), sb);
      EXPECT_LT(rel_error(yf, y), 1e-5) << path;
      EXPECT_LT(rel_error(dxf, dx), 1e-5) << path;
      EXPECT_LT(rel_error(dwf, dw), 1e-5) << path;
      EXPECT_LT(rel_error(dbf, db), 1e-5) << path;
      // The op took the paths named (not the fallback, which would pass the same checks): the
      // forward Winograd's where it applies, else oneDNN's; the backward oneDNN's where the CPU
      // has AVX512-BF16 (this level), else Winograd's data gradient where it applies.
      const bool native = level == Isa::Avx512;
      std::vector<float> y2(n_out), dx2(x.size()), dw2(w.size(), 0.f);
      if (winograd) {
        cpu::conv3x3_winograd_avx2(y2.data(), xf.data(), wf.data(), bf.data(), sb);
        EXPECT_EQ(y2, yf) << path;
        // The forward of the unrounded operands on the same weights: not the cached bf16 filters.
        std::vector<float> y3(n_out);
        conv2d_forward(y3.data(), xf.data(), wf.data(), bf.data(), s);
        EXPECT_LT(rel_error(y3, y_f32), 1e-5) << path << ", then f32";
      } else if (native) {
        ASSERT_TRUE(cpu::conv2d_forward_onednn(y2.data(), xf.data(), wf.data(), bf.data(), sb)) << path;
        EXPECT_EQ(y2, yf) << path;
      }
      if (native) {
        ASSERT_TRUE(cpu::conv2d_backward_data_onednn(dx2.data(), Gf.data(), wf.data(), sb)) << path;
        ASSERT_TRUE(cpu::conv2d_backward_weights_onednn(dw2.data(), Gf.data(), xf.data(), sb)) << path;
        EXPECT_EQ(dx2, dxf) << path;
        EXPECT_EQ(dw2, dwf) << path;
      } else if (winograd) {
        cpu::conv3x3_winograd_backward_data_avx2(dx2.data(), Gf.data(), wf.data(), sb);
        EXPECT_EQ(dx2, dxf) << path;
      }
    }
  }
}

// Winograd's path rounds its operands to bf16 as it reads them (ConvShape::bf16), with
// f32_to_bf16's rounding: inputs that are all ties (halfway between two bf16 values) round to the
// even one, so rounding half up or truncating would be far off the reference; a NaN input stays
// a NaN (an integer rounding of 0x7fffffff carries into the sign: -0), and so do the outputs it
// reaches, at each ISA level's lanes (8 and 16 channels).
TEST(ImageOps, WinogradBf16RoundsAsF32ToBf16) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const ConvPathScope scope(cpu::ConvPath::Winograd);
  Rng r(kSeed + 77);
  for (const ConvShape& s : {conv(1, 9, 10, 8, 8, 3, 1, 1, true), conv(2, 8, 8, 16, 32, 3, 1, 1, true)}) {
    // Ties: +-(1 + (2k + 1) / 256) 2^e, k < 128, e in -3..3: the 9th bit of the mantissa set, those
    // below it clear.
    std::vector<double> x(size_t(s.B * s.H * s.W * s.IC)), w(size_t(s.OC * s.filter()));
    for (double& v : x) {
      const double k = double(r.next() % 128), e = double(int(r.next() % 7) - 3);
      v = (r.next() % 2 ? -1 : 1) * (1 + (2 * k + 1) / 256) * std::exp2(e);
      ASSERT_EQ(f32_bits(float(v)) & 0xffffu, 0x8000u);
    }
    for (double& v : w) v = 0.3 * double(r.normal());
    std::vector<double> xr = x, wr = w;
    for (double& v : xr) v = double(bf16_to_f32(f32_to_bf16(float(v))));
    for (double& v : wr) v = double(bf16_to_f32(f32_to_bf16(float(v))));
    const size_t n_out = size_t(s.B * s.Ho() * s.Wo() * s.OC);
    ConvShape s64 = s;
    s64.bf16 = false;
    std::vector<double> y(n_out), y_up(n_out);
    conv2d_forward(y.data(), xr.data(), wr.data(), static_cast<const double*>(nullptr), s64);
    auto xf = cast<float>(x);
    const auto wf = cast<float>(w);
    for (Isa level : {Isa::Avx2, Isa::Avx512}) {
      set_isa(level);
      if (isa() != level) continue;
      ASSERT_TRUE(cpu::conv2d_uses_winograd(s));
      const std::string what = "IC=" + std::to_string(s.IC) + " at " + isa_name(level);
      std::vector<float> yf(n_out);
      conv2d_forward(yf.data(), xf.data(), wf.data(), static_cast<const float*>(nullptr), s);
      EXPECT_LT(rel_error(yf, y), 1e-5) << what;
      // A NaN at pixel (1, 1) of image 0, channel 3, with every mantissa bit set.
      auto xn = xf;
      const uint32_t nan_bits = 0x7fffffffu;
      std::memcpy(&xn[size_t((1 * s.W + 1) * s.IC + 3)], &nan_bits, 4);
      conv2d_forward(yf.data(), xn.data(), wf.data(), static_cast<const float*>(nullptr), s);
      for (int64_t oc = 0; oc < s.OC; ++oc) EXPECT_TRUE(std::isnan(yf[size_t((1 * s.W + 1) * s.OC + oc)])) << what;
      EXPECT_FALSE(std::isnan(yf[size_t(((s.H - 1) * s.W + s.W - 1) * s.OC)])) << what << ": far from the NaN";
    }
  }
}

// Winograd's products and tile transforms take 16 channels to a register where the CPU has
// AVX-512 and 8 with AVX2, in the same order of operations: the same bits at both levels, forward
// and data gradient, in f32 and with the operands rounded to bf16 as read, for channel counts
// that are and are not multiples of 16 (the AVX-512 kernels' channels, then AVX2's). (The weights'
// gradient runs on Winograd's path at the AVX2 level only: conv2d_winograd_weights_gradient.)
TEST(ImageOps, WinogradSameBitsAtEachIsaLevel) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  const Isa saved = isa();
  set_isa(Isa::Avx512);
  if (isa() != Isa::Avx512) {
    set_isa(saved);
    GTEST_SKIP() << "no AVX-512 on this CPU";
  }
  const cpu::ConvPath saved_path = cpu::conv_path();
  cpu::set_conv_path(cpu::ConvPath::Winograd);
  for (ConvShape s : {conv(2, 16, 16, 16, 32, 3, 1, 1), conv(1, 12, 10, 48, 24, 3, 1, 1), conv(2, 8, 8, 64, 72, 3, 1, 1),
                      conv(3, 9, 7, 8, 8, 3, 1, 1), conv(2, 16, 16, 16, 32, 3, 1, 1, true),
                      conv(1, 12, 10, 48, 24, 3, 1, 1, true)}) {
    ASSERT_TRUE(cpu::conv3x3_winograd_applies(s));
    Rng r(kSeed + uint64_t(s.IC * 100 + s.OC));
    const auto x = cast<float>(randn(r, size_t(s.B * s.H * s.W * s.IC))),
               w = cast<float>(randn(r, size_t(s.OC * s.filter()), 0.3)), bias = cast<float>(randn(r, size_t(s.OC)));
    const size_t n_out = size_t(s.B * s.Ho() * s.Wo() * s.OC);
    const auto G = cast<float>(randn(r, n_out));
    std::vector<std::vector<float>> y, dx, db, dw;
    for (Isa level : {Isa::Avx2, Isa::Avx512}) {
      set_isa(level);
      ASSERT_TRUE(cpu::conv2d_uses_winograd(s));
      y.emplace_back(n_out), dx.emplace_back(x.size()), db.emplace_back(bias.size(), 0.f);
      dw.emplace_back(w.size(), 0.f);
      if (s.bf16) {  // (the op's bf16 backward is oneDNN's where the CPU has AVX512-BF16)
        cpu::conv3x3_winograd_avx2(y.back().data(), x.data(), w.data(), bias.data(), s);
        cpu::conv3x3_winograd_backward_data_avx2(dx.back().data(), G.data(), w.data(), s);
        continue;
      }
      conv2d_forward(y.back().data(), x.data(), w.data(), bias.data(), s);
      conv2d_backward(dx.back().data(), dw.back().data(), db.back().data(), G.data(), x.data(), w.data(), s);
    }
    const std::string what = "IC=" + std::to_string(s.IC) + " OC=" + std::to_string(s.OC) + (s.bf16 ? " bf16" : "");
    EXPECT_EQ(y[1], y[0]) << what;
    EXPECT_EQ(dx[1], dx[0]) << what;
  }
  cpu::set_conv_path(saved_path);
  set_isa(saved);
}

// The loss and the bias gradient are sums: the same bits with one thread as with several.
TEST(ImageOps, SumsIndependentOfThreadCount) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  Rng r(kSeed + 3);
  const int64_t n = 300007, B = 2, HW = 4096, C = 40;
  const auto pred = cast<float>(randn(r, size_t(n))), target = cast<float>(randn(r, size_t(n)));
  const auto G = cast<float>(randn(r, size_t(B * HW * C)));
  const int saved = num_threads();
  std::vector<double> loss;
  std::vector<std::vector<float>> de;
  for (int nt : {1, 2, 3, 4}) {
    set_num_threads(nt);
    loss.push_back(mse_forward(pred.data(), target.data(), n));
    de.emplace_back(size_t(B * C));
    add_image_bias_backward(de.back().data(), G.data(), B, HW, C);
  }
  set_num_threads(saved);
  for (size_t i = 1; i < loss.size(); ++i) {
    EXPECT_EQ(std::memcmp(&loss[i], &loss[0], sizeof(double)), 0) << "threads " << i + 1;
    EXPECT_EQ(de[i], de[0]) << "threads " << i + 1;
  }
}

// Group norm (its statistics are sums over pixels) and SiLU give the same bits at any thread
// count: the UNet's first level, channels that fill no SIMD register with a partial last block of
// pixels, one image of few channels.
TEST(ImageOps, NormAndSiluIndependentOfThreadCount) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  for (const GnCase k : {GnCase{2, 64, 64, 32, 8}, {1, 37, 29, 40, 8}, {1, 70, 90, 6, 3}}) {
    const int64_t HW = k.H * k.W, n = k.B * HW * k.C;
    Rng r(kSeed + uint64_t(n));
    auto xd = randn(r, size_t(n), 2.0);
    for (double& v : xd) v += 0.5;
    const auto x = cast<float>(xd), gamma = cast<float>(randn(r, size_t(k.C))),
               beta = cast<float>(randn(r, size_t(k.C))), G = cast<float>(randn(r, size_t(n)));
    const int saved = num_threads();
    std::vector<std::vector<float>> got;  // per thread count: y, mean, rstd, dx, dgamma, dbeta, silu, dsilu
    for (int nt : {1, 2, 3, 4}) {
      set_num_threads(nt);
      const auto un = static_cast<size_t>(n);
      std::vector<float> y(un), mean(static_cast<size_t>(k.B * k.G)), rstd(mean.size()), dx(un),
          dg(size_t(k.C), 0.f), db(size_t(k.C), 0.f), s(un), ds(un);
      group_norm_forward(y.data(), mean.data(), rstd.data(), x.data(), gamma.data(), beta.data(), k.B, HW, k.C, k.G,
                         1e-5);
      group_norm_backward(dx.data(), dg.data(), db.data(), G.data(), x.data(), gamma.data(), mean.data(),
                          rstd.data(), k.B, HW, k.C, k.G);
      silu_forward(s.data(), x.data(), n);
      silu_backward(ds.data(), G.data(), x.data(), n);
      for (auto* v : {&y, &mean, &rstd, &dx, &dg, &db, &s, &ds}) got.push_back(std::move(*v));
    }
    set_num_threads(saved);
    const char* names[] = {"y", "mean", "rstd", "dx", "dgamma", "dbeta", "silu", "silu dx"};
    for (size_t t = 1; t < 4; ++t)
      for (size_t j = 0; j < 8; ++j)
        EXPECT_EQ(got[t * 8 + j], got[j]) << names[j] << " C=" << k.C << ", threads " << t + 1;
  }
}
