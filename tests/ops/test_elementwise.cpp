// rms_norm, rope, silu_mul, add_inplace and embedding at every ISA level against the reference:
// boundary sizes, strided rows, aliasing where the op allows it, guard values around outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/kernels.h"
#include "genperf/error.h"
#include "genperf/ops.h"
#include "ops_test_util.h"

using namespace genperf;
using namespace genperf::testing;

namespace {

const int64_t kSizes[] = {1, 31, 32, 33, 4099};
const int64_t kRows[] = {1, 3, 17};

std::string label(const char* op, int64_t T, int64_t K) {
  return std::string(op) + " T=" + std::to_string(T) + " K=" + std::to_string(K);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) { return e.what(); }
  return "(no error)";
}

}  // namespace

TEST(RmsNorm, MatchesReference) {
  Rng rng(announce_seed(21, "RmsNorm.MatchesReference"));
  IsaLevels isas;
  for (DType wt : {DType::F32, DType::BF16})
    for (int64_t K : kSizes)
      for (int64_t T : kRows) {
        SCOPED_TRACE(label("rms_norm", T, K) + " w=" + dtype_name(wt));
        Guarded x(T, K);
        fill_normal(x.view(), rng, 3.0);
        const Tensor w = random_tensor({K}, wt, rng);
        Tensor yr = Tensor::zeros({T, K});
        ops::ref::rms_norm(x.view(), w, 1e-5f, yr);
        const auto ref = values(yr);
        std::vector<double> generic_out;
        for (Isa level : isas.levels()) {
          set_isa(level);
          SCOPED_TRACE(isa_name(level));
          Guarded y(T, K);
          ops::rms_norm(x.view(), w, 1e-5f, y.view());
          y.check_guards("y");
          const auto got = values(y.view());
          expect_close(got, ref, 1e-6, 1e-5, "rms_norm");
          if (level == Isa::Generic) generic_out = got;
          expect_close(got, generic_out, 1e-7, 1e-6, "rms_norm vs generic");
          // In place (y aliases x), on a copy.
          Guarded z(T, K);
          z.view().copy_from(x.view());
          ops::rms_norm(z.view(), w, 1e-5f, z.view());
          z.check_guards("in place");
          expect_close(values(z.view()), ref, 1e-6, 1e-5, "rms_norm in place");
        }
      }
}

TEST(Rope, BothStylesMatchReference) {
  Rng rng(announce_seed(22, "Rope.BothStylesMatchReference"));
  IsaLevels isas;
  for (RopeStyle style : {RopeStyle::Neox, RopeStyle::Interleaved})
    for (int64_t D : {2, 8, 34, 64, 128})
      for (int64_t H : {1, 3})
        for (int64_t T : {1, 5, 17}) {
          SCOPED_TRACE(label("rope", T, H * D) +
                       (style == RopeStyle::Neox ? " neox" : " interleaved") +
                       " D=" + std::to_string(D));
          std::vector<float> inv_freq(size_t(D / 2));
          for (int64_t i = 0; i < D / 2; ++i)
            inv_freq[size_t(i)] = float(std::pow(10000.0, -2.0 * double(i) / double(D)));
          std::vector<int32_t> pos(static_cast<size_t>(T));
          for (auto& p : pos) p = int32_t(rng.next() % 4096);
          Guarded x0(T, H * D);
          fill_normal(x0.view(), rng);
          Tensor xr = x0.view().clone();
          ops::ref::rope(xr, H, pos, inv_freq, style);
          const auto ref = values(xr);
          for (Isa level : isas.levels()) {
            set_isa(level);
            SCOPED_TRACE(isa_name(level));
            Guarded x(T, H * D);
            x.view().copy_from(x0.view());
            ops::rope(x.view(), H, pos, inv_freq, style);
            x.check_guards("x");
            // Same cos/sin as the reference; products may fuse into FMAs (1 ulp).
            expect_close(values(x.view()), ref, 1e-6 * rms(ref), 1e-6, "rope");
          }
        }
}

TEST(Rope, PairsAsDocumented) {
  // One head of D = 4 at position 1 with inv_freq {1, 0.5}: Neox rotates (0, 2) and (1, 3),
  // Interleaved rotates (0, 1) and (2, 3).
  const std::vector<float> inv_freq = {1.0f, 0.5f};
  const std::vector<int32_t> pos = {1};
  for (RopeStyle style : {RopeStyle::Neox, RopeStyle::Interleaved}) {
    Tensor x = Tensor::zeros({1, 4});
    float* p = x.data<float>();
    p[0] = 1.0f, p[1] = 2.0f, p[2] = 3.0f, p[3] = 4.0f;
    ops::rope(x, 1, pos, inv_freq, style);
    const double c1 = std::cos(1.0), s1 = std::sin(1.0), c2 = std::cos(0.5), s2 = std::sin(0.5);
    if (style == RopeStyle::Neox) {
      EXPECT_NEAR(p[0], 1 * c1 - 3 * s1, 1e-6);
      EXPECT_NEAR(p[2], 3 * c1 + 1 * s1, 1e-6);
      EXPECT_NEAR(p[1], 2 * c2 - 4 * s2, 1e-6);
      EXPECT_NEAR(p[3], 4 * c2 + 2 * s2, 1e-6);
    } else {
      EXPECT_NEAR(p[0], 1 * c1 - 2 * s1, 1e-6);
      EXPECT_NEAR(p[1], 2 * c1 + 1 * s1, 1e-6);
      EXPECT_NEAR(p[2], 3 * c2 - 4 * s2, 1e-6);
      EXPECT_NEAR(p[3], 4 * c2 + 3 * s2, 1e-6);
    }
  }
}

TEST(SiluMul, MatchesReferenceIncludingExtremes) {
  Rng rng(announce_seed(23, "SiluMul.MatchesReferenceIncludingExtremes"));
  IsaLevels isas;
  for (int64_t K : kSizes)
    for (int64_t T : kRows) {
      SCOPED_TRACE(label("silu_mul", T, K));
      Guarded g(T, K), u(T, K);
      fill_normal(g.view(), rng, 4.0);
      fill_normal(u.view(), rng);
      // Saturated and overflowing arguments of exp.
      const float extremes[] = {-100.0f, -88.0f, -30.0f, 0.0f, 30.0f, 88.0f, 100.0f};
      for (int64_t i = 0; i < K && i < 7; ++i) g.view().row<float>(0)[i] = extremes[i];
      Tensor outr = Tensor::zeros({T, K});
      ops::ref::silu_mul(g.view(), u.view(), outr);
      const auto ref = values(outr);
      std::vector<double> generic_out;
      for (Isa level : isas.levels()) {
        set_isa(level);
        SCOPED_TRACE(isa_name(level));
        Guarded out(T, K);
        ops::silu_mul(g.view(), u.view(), out.view());
        out.check_guards("out");
        const auto got = values(out.view());
        expect_close(got, ref, 1e-6, 1e-5, "silu_mul");
        if (level == Isa::Generic) generic_out = got;
        expect_close(got, generic_out, 1e-7, 1e-6, "silu_mul vs generic");
        // out aliasing gate.
        Guarded g2(T, K);
        g2.view().copy_from(g.view());
        ops::silu_mul(g2.view(), u.view(), g2.view());
        expect_close(values(g2.view()), ref, 1e-6, 1e-5, "silu_mul in place");
      }
    }
}

TEST(AddInplace, MatchesReference) {
  Rng rng(announce_seed(24, "AddInplace.MatchesReference"));
  IsaLevels isas;
  for (int64_t K : kSizes)
    for (int64_t T : kRows) {
      SCOPED_TRACE(label("add_inplace", T, K));
      Guarded x0(T, K), y(T, K);
      fill_normal(x0.view(), rng);
      fill_normal(y.view(), rng);
      Tensor xr = x0.view().clone();
      ops::ref::add_inplace(xr, y.view());
      for (Isa level : isas.levels()) {
        set_isa(level);
        Guarded x(T, K);
        x.view().copy_from(x0.view());
        ops::add_inplace(x.view(), y.view());
        x.check_guards(isa_name(level));
        expect_close(values(x.view()), values(xr), 0.0, 0.0, isa_name(level));
      }
    }
}

TEST(Embedding, RowsOfEveryType) {
  Rng rng(announce_seed(25, "Embedding.RowsOfEveryType"));
  IsaLevels isas;
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    for (int64_t K : {1, 33, 4099}) {
      SCOPED_TRACE(label("embedding", 5, K) + " " + dtype_name(dt));
      const Tensor table = random_tensor({50, K}, dt, rng);
      const std::vector<int32_t> ids = {0, 49, 7, 7, 23};
      const Tensor tf = table.to(DType::F32);
      for (Isa level : isas.levels()) {
        set_isa(level);
        Guarded out(5, K);
        ops::embedding(table, ids, out.view());
        out.check_guards(isa_name(level));
        for (size_t t = 0; t < ids.size(); ++t)
          for (int64_t k = 0; k < K; ++k)
            ASSERT_EQ(out.view().row<float>(int64_t(t))[k], tf.row<float>(ids[t])[k])
                << isa_name(level);
      }
    }
}

TEST(Elementwise, ErrorsNameTheOperands) {
  const Tensor table = Tensor::zeros({10, 4}, DType::BF16);
  Tensor out = Tensor::zeros({2, 4});
  const std::vector<int32_t> bad_ids = {3, 10};
  EXPECT_EQ(error_of([&] { ops::embedding(table, bad_ids, out); }),
            "[embedding] id 10 at position 1 is outside the table's 10 rows");
  Tensor x = Tensor::zeros({2, 8});
  const Tensor w = Tensor::zeros({7});
  EXPECT_EQ(error_of([&] { ops::rms_norm(x, w, 1e-5f, x); }),
            "[rms_norm] w f32[7]: expected 8 elements");
  const std::vector<float> inv_freq = {1.0f, 0.5f, 0.25f};
  const std::vector<int32_t> pos = {0, 1};
  EXPECT_EQ(error_of([&] { ops::rope(x, 1, pos, inv_freq, RopeStyle::Neox); }),
            "[rope] x f32[2, 8]: expected 1 heads of 6 (2 x 3 frequencies) per row");
  const Tensor y = Tensor::zeros({2, 9});
  EXPECT_EQ(error_of([&] { ops::add_inplace(x, y); }),
            "[add_inplace] x f32[2, 8] and y f32[2, 9]: shapes differ");
}

TEST(Embedding, EveryHalfPrecisionBitPattern) {
  // Rows of a [1024, 64] table hold all 65536 bit patterns: every level's conversion (normals,
  // subnormals, zeros, infinities, NaN) must equal the scalar reference in dtype.cpp.
  IsaLevels isas;
  for (DType dt : {DType::F16, DType::BF16}) {
    Tensor table = Tensor::zeros({1024, 64}, dt);
    for (uint32_t i = 0; i < 65536; ++i) table.data<uint16_t>()[i] = uint16_t(i);
    std::vector<int32_t> ids(1024);
    for (int32_t i = 0; i < 1024; ++i) ids[size_t(i)] = i;
    for (Isa level : isas.levels()) {
      set_isa(level);
      Tensor out = Tensor::zeros({1024, 64});
      ops::embedding(table, ids, out);
      int64_t bad = 0;
      for (uint32_t i = 0; i < 65536; ++i) {
        const float want = dt == DType::F16 ? f16_to_f32(uint16_t(i)) : bf16_to_f32(uint16_t(i));
        const float got = out.data<float>()[i];
        if (std::isnan(want) ? !std::isnan(got) : f32_bits(got) != f32_bits(want)) ++bad;
      }
      EXPECT_EQ(bad, 0) << dtype_name(dt) << " " << isa_name(level);
    }
  }
}

TEST(Kernels, F32ToBf16RoundsLikeTheReference) {
  // The activation conversion of the bf16 GEMM: round to nearest even, NaN stays NaN.
  Rng rng(announce_seed(26, "Kernels.F32ToBf16RoundsLikeTheReference"));
  std::vector<float> src(100003);
  for (auto& f : src) f = bits_f32(uint32_t(rng.next()));
  src[0] = INFINITY, src[1] = -INFINITY, src[2] = bits_f32(0x3f808000u),
  src[3] = bits_f32(0x3f818000u);
  IsaLevels isas;
  for (Isa level : isas.levels()) {
    set_isa(level);
    std::vector<uint16_t> got(src.size());
    cpu::kernels().f32_to_bf16(src.data(), got.data(), int64_t(src.size()));
    int64_t bad = 0;
    for (size_t i = 0; i < src.size(); ++i) {
      const uint16_t want = f32_to_bf16(src[i]);
      // AVX512-BF16's instruction reads f32 subnormals as zero (keeping the sign): fine for
      // activations, which lose nothing measurable below 1.2e-38.
      const bool flushed = std::fpclassify(src[i]) == FP_SUBNORMAL && (got[i] & 0x7fffu) == 0;
      if (std::isnan(src[i]) ? !std::isnan(bf16_to_f32(got[i])) : got[i] != want && !flushed) ++bad;
    }
    EXPECT_EQ(bad, 0) << isa_name(level);
  }
}

TEST(Kernels, SumRowMatchesDoubleSum) {
  // The bandwidth probe's sum (src/bench/peaks.cpp): full vectors and every tail length.
  Rng rng(announce_seed(27, "Kernels.SumRowMatchesDoubleSum"));
  IsaLevels isas;
  for (int64_t n : {1, 7, 31, 33, 64, 4099}) {
    std::vector<float> v(static_cast<size_t>(n));
    double want = 0, mag = 0;
    for (auto& f : v) {
      f = float(rng.normal());
      want += f;
      mag += std::fabs(f);
    }
    for (Isa level : isas.levels()) {
      set_isa(level);
      EXPECT_NEAR(cpu::kernels().sum_row(v.data(), n), want, 1e-6 * mag)
          << isa_name(level) << " n=" << n;
    }
  }
}

namespace {

// Rows of a collapsible N-D f32 tensor as doubles (row i at i times the row stride).
std::vector<double> rows_values(const Tensor& t) {
  const int64_t K = t.size(-1), rows = t.numel() / K;
  std::vector<double> v;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < K; ++c) v.push_back(t.row<float>(r)[c]);
  return v;
}

// A [2, 3, 4, K] view with padded rows (row stride K + 5 floats) filled from rng, and the same
// values as a contiguous [24, K] matrix.
std::pair<Tensor, Tensor> four_d(int64_t K, Rng& rng) {
  Tensor buf = Tensor::zeros({2, 3, 4, K + 5});
  fill_normal(buf, rng);
  Tensor v = buf.slice(3, 0, K), m = Tensor::zeros({24, K});
  for (int64_t r = 0; r < 24; ++r) std::copy_n(v.row<float>(r), K, m.row<float>(r));
  return {v, m};
}

}  // namespace

// Activations may be N-dimensional (images: [B, H, W, C]): an op sees [..., K] as the matrix of
// its rows, so a 4-D view with padded rows gives, bit for bit, what its rows as a 2-D matrix give,
// and the reference agrees; leading dimensions that do not collapse into rows are refused by name.
TEST(Activations, FourDimensionalRows) {
  Rng rng(announce_seed(44, "Activations.FourDimensionalRows"));
  const int64_t K = 64, H = 4, D = 16;
  const Tensor w = random_tensor({K}, DType::F32, rng), wl = random_tensor({32, K}, DType::F32, rng);
  const std::vector<int32_t> pos = [] {
    std::vector<int32_t> p(24);
    for (int i = 0; i < 24; ++i) p[size_t(i)] = i % 7;
    return p;
  }();
  const std::vector<float> inv_freq = {1.0f, 0.5f, 0.25f, 0.125f, 0.0625f, 0.03f, 0.01f, 0.003f};
  auto [x4, x2] = four_d(K, rng);
  auto [u4, u2] = four_d(K, rng);
  using Op = std::function<void(const Tensor& x, const Tensor& u, Tensor& y, bool ref)>;
  const std::vector<std::pair<std::string, Op>> cases = {
      {"rms_norm", [&](const Tensor& x, const Tensor&, Tensor& y, bool ref) {
         ref ? ops::ref::rms_norm(x, w, 1e-5f, y) : ops::rms_norm(x, w, 1e-5f, y);
       }},
      {"silu_mul", [&](const Tensor& x, const Tensor& u, Tensor& y, bool ref) {
         ref ? ops::ref::silu_mul(x, u, y) : ops::silu_mul(x, u, y);
       }},
      {"add_inplace", [&](const Tensor& x, const Tensor& u, Tensor& y, bool ref) {
         y.copy_from(x);
         ref ? ops::ref::add_inplace(y, u) : ops::add_inplace(y, u);
       }},
      {"rope", [&](const Tensor& x, const Tensor&, Tensor& y, bool ref) {
         y.copy_from(x);
         ref ? ops::ref::rope(y, H, pos, inv_freq, RopeStyle::Neox)
             : ops::rope(y, H, pos, inv_freq, RopeStyle::Neox);
       }},
  };
  static_assert(H * D == K);
  for (const auto& [name, op] : cases) {
    SCOPED_TRACE(name);
    Tensor y4 = Tensor::zeros({2, 3, 4, K}), y2 = Tensor::zeros({24, K}), yr = Tensor::zeros({2, 3, 4, K});
    op(x4, u4, y4, false);
    op(x2, u2, y2, false);
    op(x4, u4, yr, true);
    EXPECT_EQ(rows_values(y4), rows_values(y2));
    expect_close(rows_values(y4), rows_values(yr), 1e-5, 1e-5, name);
  }
  for (DType wt : {DType::F32, DType::BF16, DType::Q8_0}) {  // the GEMM paths of each kind
    const Tensor wq = wl.to(wt);
    Tensor y4 = Tensor::zeros({2, 3, 4, 32}), y2 = Tensor::zeros({24, 32}), yr = Tensor::zeros({2, 3, 4, 32});
    ops::linear(x4, wq, nullptr, y4);
    ops::linear(x2, wq, nullptr, y2);
    ops::ref::linear(x4, wq, nullptr, yr);
    EXPECT_EQ(rows_values(y4), rows_values(y2)) << dtype_name(wt);
    // bf16 / int8 products (activations rounded) against the reference's f32 sums.
    if (wt == DType::F32)
      expect_close(rows_values(y4), rows_values(yr), 1e-4, 1e-4, "linear f32");
    else
      EXPECT_LT(nmse(rows_values(y4), rows_values(yr)), 1e-3) << dtype_name(wt);
  }
  // [2, 3, 3, K] of a [2, 3, 4, K] buffer: dimension 1's stride is 4 rows, not 3.
  const Tensor holes = Tensor::zeros({2, 3, 4, K}).slice(2, 0, 3);
  Tensor out = Tensor::zeros({2, 3, 3, K});
  try {
    ops::rms_norm(holes, w, 1e-5f, out);
    ADD_FAILURE() << "a non-collapsible view was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not collapse into rows"), std::string::npos) << e.what();
  }
}
