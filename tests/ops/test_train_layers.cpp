// Training ops (genperf/ops_train.h): backward against central finite differences
// in float64, the invariant "parameter gradients +=, activation gradients =", and the float
// path (oneDNN GEMMs, SIMD) against the float64 one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "genperf/error.h"
#include "genperf/ops_train.h"
#include "train/train_test_util.h"

using namespace genperf;
using namespace genperf::ops;
using namespace genperf::testing;

namespace {

constexpr uint64_t kSeed = 20260301;
const double kNaN = std::numeric_limits<double>::quiet_NaN();

void print_seed(const char* test) { std::printf("%s: seed %llu\n", test, (unsigned long long)kSeed); }

TEST(TrainLayers, EmbeddingGradient) {
  print_seed("EmbeddingGradient");
  Rng r(kSeed);
  const int64_t V = 11, C = 7, N = 9;
  const std::vector<int32_t> tok = {3, 0, 10, 3, 5, 3, 7, 0, 9};  // repeats accumulate
  auto wte = randn(r, V * C), G = randn(r, N * C);
  auto loss = [&] {
    std::vector<double> out(N * C);
    embedding_forward(out.data(), tok.data(), wte.data(), N, C, V);
    return dot(out, G);
  };
  std::vector<double> dwte(V * C, 0.5);  // += : starts from 0.5
  embedding_backward(dwte.data(), G.data(), tok.data(), N, C);
  for (auto& g : dwte) g -= 0.5;
  check_fd("embedding dwte", wte, dwte, loss, r);
  const std::vector<int32_t> bad = {11};
  std::vector<double> out(C);
  EXPECT_THROW(embedding_forward(out.data(), bad.data(), wte.data(), 1, C, V), Error);
}

TEST(TrainLayers, RmsNormGradient) {
  print_seed("RmsNormGradient");
  Rng r(kSeed + 1);
  const int64_t N = 5, C = 13;
  auto x = randn(r, N * C), w = randn(r, C), G = randn(r, N * C);
  auto loss = [&] {
    std::vector<double> out(N * C), rstd(N);
    rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5);
    return dot(out, G);
  };
  std::vector<double> out(N * C), rstd(N), dx(N * C, kNaN), dw(C, 0.0);
  rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5);
  rmsnorm_backward(dx.data(), dw.data(), G.data(), x.data(), w.data(), rstd.data(), N, C);
  check_fd("rmsnorm dx", x, dx, loss, r);
  check_fd("rmsnorm dw", w, dw, loss, r);
}

TEST(TrainLayers, RopeGradientBothStyles) {
  print_seed("RopeGradientBothStyles");
  for (RopeStyle style : {RopeStyle::Neox, RopeStyle::Interleaved}) {
    Rng r(kSeed + 2);
    const int64_t B = 2, T = 5, N = B * T, heads = 3, HS = 8, ld = heads * HS + 4;
    const std::vector<float> inv_freq = {1.0f, 0.3f, 0.1f, 0.01f};
    const auto rt = rope_table<double>(inv_freq, T);
    auto x = randn(r, N * ld), G = randn(r, N * ld);
    auto loss = [&] {
      auto y = x;
      rope_forward(y.data(), ld, N, heads, HS, rt, style);
      return dot(y, G);
    };
    auto y = x;
    rope_forward(y.data(), ld, N, heads, HS, rt, style);
    for (int64_t n = 0; n < N; ++n)  // columns past the heads are left alone
      for (int64_t c = heads * HS; c < ld; ++c) EXPECT_EQ(y[n * ld + c], x[n * ld + c]);
    auto dx = G;
    rope_backward(dx.data(), ld, N, heads, HS, rt, style);
    check_fd(style == RopeStyle::Neox ? "rope (neox) dx" : "rope (interleaved) dx", x, dx, loss, r);
    // Position 0 is the identity.
    for (int64_t c = 0; c < heads * HS; ++c) EXPECT_DOUBLE_EQ(y[c], x[c]);
  }
}

TEST(TrainLayers, SwigluGradient) {
  print_seed("SwigluGradient");
  Rng r(kSeed + 3);
  const int64_t N = 4, FF = 9;
  auto gu = randn(r, N * 2 * FF, 2.0), G = randn(r, N * FF);
  auto loss = [&] {
    std::vector<double> out(N * FF);
    swiglu_forward(out.data(), gu.data(), N, FF);
    return dot(out, G);
  };
  std::vector<double> dgu(N * 2 * FF, kNaN);
  swiglu_backward(dgu.data(), G.data(), gu.data(), N, FF);
  check_fd("swiglu dgu", gu, dgu, loss, r);
}

TEST(TrainLayers, MatmulGradient) {
  print_seed("MatmulGradient");
  for (bool with_bias : {false, true}) {
    Rng r(kSeed + 4);
    const int64_t N = 6, IC = 11, OC = 7;
    auto x = randn(r, N * IC), w = randn(r, OC * IC), b = randn(r, OC), G = randn(r, N * OC);
    auto loss = [&] {
      std::vector<double> out(N * OC);
      matmul_forward(out.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, N, IC, OC);
      return dot(out, G);
    };
    std::vector<double> dx(N * IC, kNaN), dw(OC * IC, 1.0), db(OC, -2.0);
    matmul_backward(dx.data(), dw.data(), with_bias ? db.data() : nullptr, G.data(), x.data(),
                    w.data(), N, IC, OC);
    for (auto& g : dw) g -= 1.0;
    for (auto& g : db) g += 2.0;
    check_fd("matmul dx", x, dx, loss, r);
    check_fd("matmul dw", w, dw, loss, r);
    if (with_bias) check_fd("matmul dbias", b, db, loss, r);
    // A null dinp skips the input gradient and still accumulates dw.
    std::vector<double> dw2(OC * IC, 0.0);
    matmul_backward(static_cast<double*>(nullptr), dw2.data(), static_cast<double*>(nullptr),
                    G.data(), x.data(), w.data(), N, IC, OC);
    EXPECT_LT(rel_error(dw2, dw), 1e-14);
  }
}

TEST(TrainLayers, CrossEntropyGradientWithIgnoredRows) {
  print_seed("CrossEntropyGradientWithIgnoredRows");
  Rng r(kSeed + 5);
  const int64_t N = 7, V = 13;
  const std::vector<int32_t> tgt = {4, -1, 0, 12, -1, 7, 7};
  auto logits = randn(r, N * V, 3.0);
  int64_t count = 0;
  auto loss = [&] {
    std::vector<double> lse(N);
    return crossentropy_forward(lse.data(), logits.data(), tgt.data(), N, V, &count) / double(count);
  };
  const double l0 = loss();
  EXPECT_EQ(count, 5);
  // Against a direct evaluation of the mean of -log softmax.
  double want = 0;
  for (int64_t n = 0; n < N; ++n) {
    if (tgt[n] < 0) continue;
    double s = 0;
    for (int64_t v = 0; v < V; ++v) s += std::exp(logits[n * V + v]);
    want += std::log(s) - logits[n * V + tgt[n]];
  }
  EXPECT_NEAR(l0, want / 5, 1e-12);
  std::vector<double> lse(N), d(N * V, kNaN);
  crossentropy_forward(lse.data(), logits.data(), tgt.data(), N, V, &count);
  crossentropy_backward(d.data(), logits.data(), lse.data(), tgt.data(), N, V, 1.0 / double(count));
  check_fd("crossentropy dlogits", logits, d, loss, r, 100);
  for (int64_t v = 0; v < V; ++v) EXPECT_EQ(d[1 * V + v], 0.0);  // ignored rows get no gradient
  // In place, as the model uses it.
  auto inplace = logits;
  crossentropy_backward(inplace.data(), inplace.data(), lse.data(), tgt.data(), N, V, 1.0 / double(count));
  EXPECT_LT(rel_error(inplace, d), 1e-15);
  const std::vector<int32_t> bad = {13};
  EXPECT_THROW(crossentropy_forward(lse.data(), logits.data(), bad.data(), 1, V, &count), Error);
}

TEST(TrainLayers, Residual) {
  std::vector<double> a = {1, 2, 3}, b = {10, 20, 30}, out(3), d = {1, 1, 1};
  residual_forward(out.data(), a.data(), b.data(), 3);
  EXPECT_EQ(out, (std::vector<double>{11, 22, 33}));
  residual_backward(d.data(), b.data(), 3);
  EXPECT_EQ(d, (std::vector<double>{11, 21, 31}));
}

// The float path (oneDNN sgemm, vectorized loops, threads) against float64 on larger shapes.
TEST(TrainLayers, FloatMatchesDouble) {
  print_seed("FloatMatchesDouble");
  Rng r(kSeed + 6);
  const int64_t N = 67, IC = 96, OC = 130, V = 1000;
  auto x = randn(r, N * IC), w = randn(r, OC * IC, 0.1), b = randn(r, OC), G = randn(r, N * OC);
  auto xf = cast<float>(x), wf = cast<float>(w), bf = cast<float>(b), Gf = cast<float>(G);
  {  // matmul
    std::vector<double> out(N * OC), dx(N * IC), dw(OC * IC, 0.0), db(OC, 0.0);
    std::vector<float> outf(N * OC), dxf(N * IC), dwf(OC * IC, 0.0f), dbf(OC, 0.0f);
    matmul_forward(out.data(), x.data(), w.data(), b.data(), N, IC, OC);
    matmul_forward(outf.data(), xf.data(), wf.data(), bf.data(), N, IC, OC);
    matmul_backward(dx.data(), dw.data(), db.data(), G.data(), x.data(), w.data(), N, IC, OC);
    matmul_backward(dxf.data(), dwf.data(), dbf.data(), Gf.data(), xf.data(), wf.data(), N, IC, OC);
    EXPECT_LT(rel_error(outf, out), 1e-5);
    EXPECT_LT(rel_error(dxf, dx), 1e-5);
    EXPECT_LT(rel_error(dwf, dw), 1e-5);
    EXPECT_LT(rel_error(dbf, db), 1e-5);
  }
  {  // rmsnorm over [N, IC]
    auto nw = randn(r, IC), Gn = randn(r, N * IC);
    auto nwf = cast<float>(nw), Gnf = cast<float>(Gn);
    std::vector<double> out(N * IC), rs(N), dx(N * IC), dw(IC, 0.0);
    std::vector<float> outf(N * IC), rsf(N), dxf(N * IC), dwf(IC, 0.0f);
    rmsnorm_forward(out.data(), rs.data(), x.data(), nw.data(), N, IC, 1e-5);
    rmsnorm_forward(outf.data(), rsf.data(), xf.data(), nwf.data(), N, IC, 1e-5);
    rmsnorm_backward(dx.data(), dw.data(), Gn.data(), x.data(), nw.data(), rs.data(), N, IC);
    rmsnorm_backward(dxf.data(), dwf.data(), Gnf.data(), xf.data(), nwf.data(), rsf.data(), N, IC);
    EXPECT_LT(rel_error(outf, out), 1e-6);
    EXPECT_LT(rel_error(dxf, dx), 1e-5);
    EXPECT_LT(rel_error(dwf, dw), 1e-5);
  }
  {  // swiglu over [N, 48]
    const int64_t FF = 48;
    auto gu = randn(r, N * 2 * FF, 2.0), Gs = randn(r, N * FF);
    auto guf = cast<float>(gu), Gsf = cast<float>(Gs);
    std::vector<double> out(N * FF), d(N * 2 * FF);
    std::vector<float> outf(N * FF), df(N * 2 * FF);
    swiglu_forward(out.data(), gu.data(), N, FF);
    swiglu_forward(outf.data(), guf.data(), N, FF);
    swiglu_backward(d.data(), Gs.data(), gu.data(), N, FF);
    swiglu_backward(df.data(), Gsf.data(), guf.data(), N, FF);
    EXPECT_LT(rel_error(outf, out), 1e-6);
    EXPECT_LT(rel_error(df, d), 1e-6);
  }
  {  // cross-entropy over a larger vocabulary
    auto lg = randn(r, N * V, 3.0);
    auto lgf = cast<float>(lg);
    std::vector<int32_t> tgt(N);
    for (auto& t : tgt) t = int32_t(r.next() % V);
    tgt[3] = -1;
    std::vector<double> lse(N), d(N * V);
    std::vector<float> lsef(N), df(N * V);
    int64_t c1 = 0, c2 = 0;
    const double l = crossentropy_forward(lse.data(), lg.data(), tgt.data(), N, V, &c1);
    const double lf = crossentropy_forward(lsef.data(), lgf.data(), tgt.data(), N, V, &c2);
    EXPECT_EQ(c1, c2);
    EXPECT_NEAR(lf / l, 1.0, 1e-6);
    crossentropy_backward(d.data(), lg.data(), lse.data(), tgt.data(), N, V, 1.0 / double(c1));
    crossentropy_backward(df.data(), lgf.data(), lsef.data(), tgt.data(), N, V, 1.0 / double(c2));
    EXPECT_LT(rel_error(df, d), 1e-5);
  }
}

}  // namespace
