// attention at every ISA level against the float64 reference: prefill tiles and decode rows,
// GQA ratios 1 and 4, queries after a cached prefix (q_pos0 > 0), caches longer than the
// queries need, strided rows, split key ranges (threads > kv heads), guard values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>

#include "genperf/error.h"
#include "genperf/ops.h"
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

// A cache of f16 or bf16 with row padding (strided rows), or of Q8_0 (whole rows: a block format
// has no column slices), holding src's values rounded or quantized.
Tensor half_cache(const Tensor& src, DType dt, int64_t pad) {
  if (dt == DType::Q8_0) pad = 0;
  Tensor t = Tensor::zeros({src.size(0), src.size(1) + 2 * pad}, dt).slice(1, pad, src.size(1));
  t.copy_from(src);
  return t;
}

// The cache head-major, [Hkv, S, D] of a larger capacity (strided heads), holding rows's values.
Tensor head_major(const Tensor& rows, int64_t Hkv, DType dt) {
  const int64_t S = rows.size(0), D = rows.size(1) / Hkv;
  Tensor t = Tensor::zeros({Hkv, S + 3, D}, dt).slice(1, 0, S);
  for (int64_t h = 0; h < Hkv; ++h) {
    Tensor dst = t.slice(0, h, 1).view({S, D});
    dst.copy_from(rows.slice(1, h * D, D));
  }
  return t;
}

// kv: the cache's type. An f16, bf16 or Q8_0 cache is compared with the reference on its own
// (rounded or quantized) values, which the reference reads exactly. Each case also runs on the
// same cache head-major ([Hkv, S, D], as LlamaModel keeps it).
void run_case(const Case& c, Rng& rng, DType kv = DType::F32) {
  SCOPED_TRACE(label(c) + " kv " + dtype_name(kv));
  const int64_t S = c.q_pos0 + c.T + c.extra_keys;
  Guarded q(c.T, c.H * c.D, 4), k32(S, c.Hkv * c.D, 2), v32(S, c.Hkv * c.D, 6);
  fill_normal(q.view(), rng);
  fill_normal(k32.view(), rng);
  fill_normal(v32.view(), rng);
  const Tensor k = kv == DType::F32 ? k32.view() : half_cache(k32.view(), kv, 2),
               v = kv == DType::F32 ? v32.view() : half_cache(v32.view(), kv, 5);
  const float scale = 1.0f / std::sqrt(float(c.D));
  Tensor outr = Tensor::zeros({c.T, c.H * c.D});
  ops::ref::attention(q.view(), k, v, c.H, c.Hkv, c.q_pos0, scale, outr);
  const auto ref = values(outr);
  // Per output, sum_j p_j |v_j|: the magnitude its rounding errors scale with.
  Tensor vabs = v.to(DType::F32), magt = Tensor::zeros({c.T, c.H * c.D});
  for (int64_t i = 0; i < vabs.numel(); ++i)
    vabs.data<float>()[i] = std::fabs(vabs.data<float>()[i]);
  ops::ref::attention(q.view(), k.to(DType::F32), vabs, c.H, c.Hkv, c.q_pos0, scale, magt);
  const auto mag = values(magt);
  IsaLevels isas;
  std::vector<double> generic_out;
  for (Isa level : isas.levels()) {
    set_isa(level);
    SCOPED_TRACE(isa_name(level));
    Guarded out(c.T, c.H * c.D, 3);
    ops::attention(q.view(), k, v, c.H, c.Hkv, c.q_pos0, scale, out.view());
    out.check_guards("out");
    const auto got = values(out.view());
    EXPECT_LE(nmse(got, ref), 1e-10);
    expect_within(got, ref, mag, 1e-5, "vs reference");
    if (level == Isa::Generic)
      generic_out = got;
    else
      expect_within(got, generic_out, mag, 1e-6, "vs generic");
    // Head-major: the same values, so the same sums in the same order.
    Guarded out_hm(c.T, c.H * c.D, 3);
    ops::attention(q.view(), head_major(k.to(DType::F32), c.Hkv, kv), head_major(v.to(DType::F32), c.Hkv, kv),
                   c.H, c.Hkv, c.q_pos0, scale, out_hm.view());
    out_hm.check_guards("out head-major");
    EXPECT_EQ(values(out_hm.view()), got) << "head-major";
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

TEST(Attention, HalfCachesMatchReference) {
  // f16, bf16 and Q8_0 caches: the prefill tiles read a key block's rows converted to f32, the
  // decode rows convert as they load, at every level, including split key ranges. Q8_0 takes
  // head dimensions that are multiples of 32.
  Rng rng(announce_seed(36, "Attention.HalfCachesMatchReference"));
  for (DType kv : {DType::F16, DType::BF16, DType::Q8_0}) {
    const bool q8 = kv == DType::Q8_0;
    for (int64_t ratio : {1, 4})
      for (int64_t D : {int64_t(64), q8 ? int64_t(32) : int64_t(33)})
        for (int64_t T : {1, 3, 17, 64})
          for (int64_t q_pos0 : {0, 100}) run_case({T, q_pos0, T % 2 ? 7 : 0, 2 * ratio, 2, D}, rng, kv);
    for (int64_t T : {8, 33}) run_case({T, 63, 1, 4, 1, q8 ? 32 : 16}, rng, kv);
    if (!q8) run_case({9, 0, 0, 1, 1, 1}, rng, kv);
    const int saved = num_threads();
    set_num_threads(5);
    run_case({1, 2000, 0, 4, 1, 64}, rng, kv);
    set_num_threads(saved);
  }
}

TEST(Attention, StoreRowsMatchTheReference) {
  // Rows of a KV cache: every level's f16 and bf16 rounding and Q8_0 quantization equal the
  // scalar reference's, bit for bit, at row lengths around the vector widths, into strided rows. f16 also gets
  // values that round to infinity, to the largest finite, and to subnormals.
  Rng rng(announce_seed(37, "Attention.StoreRowsMatchTheReference"));
  IsaLevels isas;
  for (DType dt : {DType::F16, DType::BF16, DType::Q8_0})
    for (int64_t N : {1, 7, 8, 9, 15, 16, 17, 33, 64, 100}) {
      if (dt == DType::Q8_0 && N % 32) continue;
      SCOPED_TRACE(std::string(dtype_name(dt)) + " N=" + std::to_string(N));
      Guarded src(3, N, 2);
      fill_normal(src.view(), rng);
      if (dt == DType::F16) {
        const float special[] = {70000.0f, 65519.0f, 65520.0f, -1e-6f, 3e-8f, 2.98e-8f, 0.0f, -0.0f};
        for (int64_t i = 0; i < N && i < 8; ++i) src.view().row<float>(1)[i] = special[i];
      }
      if (dt == DType::Q8_0) {
        // A block whose scale is 1, so that its codes are the values: ties at .5 go away from
        // zero, just below .5 toward it; and a block of zeros (scale 0).
        const float ties[] = {127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 1.5f, -1.5f, 0.49999997f, -0.49999997f, 126.5f, -126.5f};
        for (int64_t i = 0; i < 11; ++i) src.view().row<float>(1)[i] = ties[i];
        for (int64_t i = 0; i < 32; ++i) src.view().row<float>(2)[i] = 0.0f;
      }
      // Strided rows for f16 and bf16; whole rows of blocks for Q8_0.
      auto rows = [&] {
        return dt == DType::Q8_0 ? Tensor::zeros({3, N}, dt) : Tensor::zeros({3, N + 4}, dt).slice(1, 1, N);
      };
      Tensor want = rows();
      ops::ref::store_rows(src.view(), want);
      for (Isa level : isas.levels()) {
        set_isa(level);
        SCOPED_TRACE(isa_name(level));
        Tensor got = rows();
        ops::store_rows(src.view(), got);
        int64_t bad = 0;
        for (int64_t t = 0; t < 3; ++t)
          bad += std::memcmp(got.row(t), want.row(t), bytes_for(dt, N)) != 0;
        EXPECT_EQ(bad, 0);
      }
    }
}

TEST(Attention, StoreRowsIntoHeadMajorCaches) {
  // Rows [T, H*D] into positions 2..6 of a head-major cache [H, 8, D]: head h of row t lands at
  // [h, 2 + t], in every type, as the reference writes it; the positions around stay zero.
  Rng rng(announce_seed(38, "Attention.StoreRowsIntoHeadMajorCaches"));
  const int64_t T = 5, H = 2, D = 64;
  Guarded src(T, H * D, 2);
  fill_normal(src.view(), rng);
  IsaLevels isas;
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor want = Tensor::zeros({H, 8, D}, dt);
    Tensor want_rows = want.slice(1, 2, T);
    ops::ref::store_rows(src.view(), want_rows);
    for (Isa level : isas.levels()) {
      set_isa(level);
      SCOPED_TRACE(isa_name(level));
      Tensor got = Tensor::zeros({H, 8, D}, dt);
      Tensor rows = got.slice(1, 2, T);
      ops::store_rows(src.view(), rows);
      EXPECT_EQ(std::memcmp(got.raw(), want.raw(), got.nbytes()), 0);
    }
    // The reference itself: head h of row t, read back.
    const Tensor back = want.to(DType::F32);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < 8; ++t) {
        const float* r = back.data<float>() + (h * 8 + t) * D;
        const bool inside = t >= 2 && t < 2 + T;
        const float x = inside ? src.view().row<float>(t - 2)[h * D + 7] : 0.0f;
        EXPECT_NEAR(r[7], x, 0.02 * std::fabs(x) + 1e-6) << "head " << h << " position " << t;
      }
  }
  Tensor bad = Tensor::zeros({3, 8, D});
  Tensor bad_rows = bad.slice(1, 0, T);
  EXPECT_EQ(error_of([&] { ops::store_rows(src.view(), bad_rows); }),
            "[store_rows] dst f32[3, 5, 64]: expected [H, T, D] heads of src f32[5, 128]");
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
  const Tensor k16 = Tensor::zeros({10, 32}, DType::F16);
  EXPECT_EQ(error_of([&] { ops::attention(q, k16, v, 4, 2, 0, 0.25f, out); }),
            "[attention] k f16[10, 32] and v f32[10, 32]: the cache's keys and values must share one type");
  const Tensor k8 = Tensor::zeros({10, 32}, DType::F8_E4M3);
  EXPECT_EQ(error_of([&] { ops::attention(q, k8, k8, 4, 2, 0, 0.25f, out); }),
            "[attention] k f8_e4m3[10, 32]: expected f32, f16, bf16 or q8_0");
  const Tensor kq = Tensor::zeros({10, 32}, DType::Q8_0);
  EXPECT_EQ(error_of([&] { ops::attention(q, kq, kq, 4, 2, 0, 0.25f, out); }),
            "[attention] k q8_0[10, 32]: a q8_0 cache needs a head dimension that is a multiple of 32, not 16");
  const Tensor kh = Tensor::zeros({2, 12, 16}).slice(1, 0, 10), vh = Tensor::zeros({2, 10, 16});
  EXPECT_EQ(error_of([&] { ops::attention(q, kh, vh, 4, 2, 0, 0.25f, out); }),
            "[attention] head-major k f32[2, 10, 16] and v f32[2, 10, 16]: heads must be the same number of "
            "bytes apart");
  EXPECT_EQ(error_of([&] { ops::attention(q, vh, vh, 4, 1, 0, 0.25f, out); }),
            "[attention] k f32[2, 10, 16]: expected [1, S, 16] for q f32[4, 64] with 4 heads");
  const Tensor k2 = Tensor::zeros({10, 48});
  EXPECT_EQ(error_of([&] { ops::attention(q, k2, k2, 4, 2, 0, 0.25f, out); }),
            "[attention] k f32[10, 48]: expected rows of 2 x 16 for q f32[4, 64] with 4 heads");
}

TEST(Attention, FlopCount) {
  // T = 2 queries after 3 cached keys see 4 and 5 keys: 4 * H * D * 9.
  EXPECT_DOUBLE_EQ(ops::attention_flops(2, 3, 8, 3), 4.0 * 3 * 8 * 9);
}
