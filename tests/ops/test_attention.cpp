// attention at every ISA level against the float64 reference: prefill tiles and decode rows,
// GQA ratios 1 and 4, queries after a cached prefix (q_pos0 > 0), caches longer than the
// queries need, strided rows, split key ranges (threads > kv heads), guard values.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "genperf/error.h"
#include "ops/ops.h"
#include "ops_test_util.h"

using namespace genperf;
using namespace genperf::testing;

namespace {

struct Case {
  int64_t T, q_pos0, extra_keys, H, Hkv, D;
};

std::string label(const Case& c) {
  return "attention T=" + std::to_string(c.T) + " q_pos0=" + std::to_string(c.q_pos0) +
         " S=" + std::to_string(c.q_pos0 + c.T + c.extra_keys) + " H=" + std::to_string(c.H) +
         " Hkv=" + std::to_string(c.Hkv) + " D=" + std::to_string(c.D);
}

// |got - want| <= rel * mag elementwise.
void expect_within(const std::vector<double>& got, const std::vector<double>& want,
                   const std::vector<double>& mag, double rel, const char* what) {
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= rel * mag[i])) {
      if (bad++ < 5)
        ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " want " << want[i];
    }
  EXPECT_EQ(bad, 0) << what;
}

void run_case(const Case& c, Rng& rng) {
  SCOPED_TRACE(label(c));
  const int64_t S = c.q_pos0 + c.T + c.extra_keys;
  Guarded q(c.T, c.H * c.D, 4), k(S, c.Hkv * c.D, 2), v(S, c.Hkv * c.D, 6);
  fill_normal(q.view(), rng);
  fill_normal(k.view(), rng);
  fill_normal(v.view(), rng);
  const float scale = 1.0f / std::sqrt(float(c.D));
  Tensor outr = Tensor::zeros({c.T, c.H * c.D});
  ops::ref::attention(q.view(), k.view(), v.view(), c.H, c.Hkv, c.q_pos0, scale, outr);
  const auto ref = values(outr);
  // Per output, sum_j p_j |v_j|: the magnitude its rounding errors scale with.
  Tensor vabs = v.view().clone(), magt = Tensor::zeros({c.T, c.H * c.D});
  for (int64_t i = 0; i < vabs.numel(); ++i)
    vabs.data<float>()[i] = std::fabs(vabs.data<float>()[i]);
  ops::ref::attention(q.view(), k.view(), vabs, c.H, c.Hkv, c.q_pos0, scale, magt);
  const auto mag = values(magt);
  IsaLevels isas;
  std::vector<double> generic_out;
  for (Isa level : isas.levels()) {
    set_isa(level);
    SCOPED_TRACE(isa_name(level));
    Guarded out(c.T, c.H * c.D, 3);
    ops::attention(q.view(), k.view(), v.view(), c.H, c.Hkv, c.q_pos0, scale, out.view());
    out.check_guards("out");
    const auto got = values(out.view());
    EXPECT_LE(nmse(got, ref), 1e-10);
    expect_within(got, ref, mag, 1e-5, "vs reference");
    if (level == Isa::Generic)
      generic_out = got;
    else
      expect_within(got, generic_out, mag, 1e-6, "vs generic");
  }
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) { return e.what(); }
  return "(no error)";
}

}  // namespace

TEST(Attention, PrefillAndDecodeMatchReference) {
  Rng rng(announce_seed(31, "Attention.PrefillAndDecodeMatchReference"));
  for (int64_t ratio : {1, 4})
    for (int64_t D : {64, 33})
      for (int64_t T : {1, 2, 3, 17, 64})
        for (int64_t q_pos0 : {0, 5, 100}) {
          const int64_t Hkv = 2;
          run_case({T, q_pos0, T % 2 ? 7 : 0, Hkv * ratio, Hkv, D}, rng);
        }
}

TEST(Attention, TileBoundaries) {
  // Row counts around the tile size and the tile/row switch, key counts around key blocks.
  Rng rng(announce_seed(32, "Attention.TileBoundaries"));
  for (int64_t T : {7, 8, 31, 32, 33, 65})
    for (int64_t q_pos0 : {0, 63, 64}) run_case({T, q_pos0, 1, 4, 1, 16}, rng);
  run_case({130, 0, 0, 2, 2, 128}, rng);
  run_case({9, 0, 0, 1, 1, 1}, rng);
  run_case({1, 0, 0, 3, 1, 2}, rng);
}

TEST(Attention, LongDecodeSplitsKeys) {
  // One query over 4096 keys with fewer kv heads than threads: key ranges split and merge.
  Rng rng(announce_seed(33, "Attention.LongDecodeSplitsKeys"));
  const int saved = num_threads();
  for (int nt : {1, 2, 5}) {
    set_num_threads(nt);
    SCOPED_TRACE("threads " + std::to_string(nt));
    run_case({1, 4095, 0, 4, 1, 64}, rng);
    run_case({2, 3000, 5, 8, 2, 64}, rng);
  }
  set_num_threads(saved);
}

TEST(Attention, LargeScoresStayFinite) {
  // Scores in the hundreds: softmax must subtract its running max.
  Rng rng(announce_seed(34, "Attention.LargeScoresStayFinite"));
  const int64_t T = 40, S = 40, D = 16;
  Tensor q = random_tensor({T, D}, DType::F32, rng, 30.0),
         k = random_tensor({S, D}, DType::F32, rng, 30.0);
  const Tensor v = random_tensor({S, D}, DType::F32, rng);
  Tensor out = Tensor::zeros({T, D}), outr = Tensor::zeros({T, D});
  ops::attention(q, k, v, 1, 1, 0, 1.0f, out);
  ops::ref::attention(q, k, v, 1, 1, 0, 1.0f, outr);
  EXPECT_LE(nmse(values(out), values(outr)), 1e-10);
}

TEST(Attention, ErrorsNameTheOperands) {
  const Tensor q = Tensor::zeros({4, 64}), k = Tensor::zeros({10, 32}), v = Tensor::zeros({10, 32});
  Tensor out = Tensor::zeros({4, 64});
  EXPECT_EQ(
      error_of([&] { ops::attention(q, k, v, 4, 2, 7, 0.25f, out); }),
      "[attention] queries at positions 7..10 need keys up to 11, cache k f32[10, 32] has 10");
  EXPECT_EQ(error_of([&] { ops::attention(q, k, v, 4, 3, 0, 0.25f, out); }),
            "[attention] 4 query heads is not a multiple of 3 key/value heads");
  const Tensor k2 = Tensor::zeros({10, 48});
  EXPECT_EQ(error_of([&] { ops::attention(q, k2, k2, 4, 2, 0, 0.25f, out); }),
            "[attention] k f32[10, 48]: expected rows of 2 x 16 for q f32[4, 64] with 4 heads");
}

TEST(Attention, FlopCount) {
  // T = 2 queries after 3 cached keys see 4 and 5 keys: 4 * H * D * 9.
  EXPECT_DOUBLE_EQ(ops::attention_flops(2, 3, 8, 3), 4.0 * 3 * 8 * 9);
}
