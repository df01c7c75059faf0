// Generic kernels: portable scalar code for any x86-64 (and the baseline the SIMD levels are
// checked against). The kernels themselves are in kernels_impl.inc.
#include <float.h>
#include <math.h>
#include <string.h>

#include <cstddef>
#include <cstdint>

#include "backend/cpu/kernels.h"
#include "genperf/dtype.h"

namespace genperf::cpu::generic {
namespace {

// Eight lanes of plain floats: portable code that compilers map to SSE2, and partial sums in
// lanes as the SIMD levels keep them, so that all levels round alike (within 1e-6).
struct V {
  struct R {
    float v[8];
  };
  static constexpr int W = 8;
  static constexpr int kGemvT = 2;
  static constexpr int kScoreKeys = 1;
  template <class F>
  static R map(F f) {
    R r;
    for (int i = 0; i < W; ++i) r.v[i] = f(i);
    return r;
  }
  static R zero() { return set1(0.0f); }
  static R set1(float f) {
    return map([&](int) { return f; });
  }
  static R load(const float* p) {
    return map([&](int i) { return p[i]; });
  }
  static void store(float* p, R r) {
    for (int i = 0; i < W; ++i) p[i] = r.v[i];
  }
  static R load_n(const float* p, int n) {
    return map([&](int i) { return i < n ? p[i] : 0.0f; });
  }
  static void store_n(float* p, R r, int n) {
    for (int i = 0; i < n; ++i) p[i] = r.v[i];
  }
  static float bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  static float bf16(uint16_t h) { return bits(uint32_t(h) << 16); }
  // f16 -> f32 without branches for finite values: the bits shifted into place read as a float
  // 2^112 too small (exponent bias 127 vs 15), subnormals included; multiplying fixes it exactly.
  static float f16(uint16_t h) {
    const uint32_t em = h & 0x7fffu, sign = uint32_t(h & 0x8000u) << 16;
    const float mag = em >= 0x7c00u ? bits(0x7f800000u | (em & 0x3ffu) << 13)  // inf, NaN
                                    : bits(em << 13) * 0x1p112f;
    uint32_t u;
    memcpy(&u, &mag, 4);
    return bits(u | sign);
  }
  static R load_bf16(const uint16_t* p) {
    return map([&](int i) { return bf16(p[i]); });
  }
  static R load_bf16_n(const uint16_t* p, int n) {
    return map([&](int i) { return i < n ? bf16(p[i]) : 0.0f; });
  }
  static R load_f16(const uint16_t* p) {
    return map([&](int i) { return f16(p[i]); });
  }
  static R load_f16_n(const uint16_t* p, int n) {
    return map([&](int i) { return i < n ? f16(p[i]) : 0.0f; });
  }
  // FP8 codes through f16 as the SIMD levels read them (kernels_avx512.cpp): E4M3 as its value
  // times 2^-8, NaN codes as NaN; E5M2 as its value.
  static float e4m3(uint8_t c) {
    if ((c & 0x7f) == 0x7f) return NAN;
    return f16(uint16_t((c & 0x7fu) << 7 | (c & 0x80u) << 8));
  }
  static void load_e4m3(const uint8_t* p, R* out) {
    for (int v = 0; v < 4; ++v) out[v] = map([&](int i) { return e4m3(p[8 * v + i]); });
  }
  static void load_e5m2(const uint8_t* p, R* out) {
    for (int v = 0; v < 4; ++v)
      out[v] = map([&](int i) { return f16(uint16_t(p[8 * v + i] << 8)); });
  }
  static R load_i8(const int8_t* p) {
    R r;
    for (int i = 0; i < W; ++i) r.v[i] = float(p[i]);
    return r;
  }
  static R fma(R a, R b, R c) {
    return map([&](int i) { return a.v[i] * b.v[i] + c.v[i]; });
  }
  static R mul(R a, R b) {
    return map([&](int i) { return a.v[i] * b.v[i]; });
  }
  static R add(R a, R b) {
    return map([&](int i) { return a.v[i] + b.v[i]; });
  }
  static R sub(R a, R b) {
    return map([&](int i) { return a.v[i] - b.v[i]; });
  }
  static R div(R a, R b) {
    return map([&](int i) { return a.v[i] / b.v[i]; });
  }
  static R max(R a, R b) {
    return map([&](int i) { return a.v[i] > b.v[i] ? a.v[i] : b.v[i]; });
  }
  // Pairwise, as the SIMD levels reduce.
  static float hsum(R a) {
    return ((a.v[0] + a.v[4]) + (a.v[2] + a.v[6])) + ((a.v[1] + a.v[5]) + (a.v[3] + a.v[7]));
  }
  static void hsum4(R a, R b, R c, R d, float* out) {
    out[0] = hsum(a);
    out[1] = hsum(b);
    out[2] = hsum(c);
    out[3] = hsum(d);
  }
  static float hmax(R a) {
    float m = a.v[0];
    for (int i = 1; i < W; ++i) m = a.v[i] > m ? a.v[i] : m;
    return m;
  }
  // The SIMD levels' exp (kernels_avx2.cpp) lane by lane, so that all levels agree closely.
  static float exp1(float x) {
    if (!(x >= -87.33654f)) return x != x ? x : 0.0f;
    x = x < 88.0f ? x : 88.0f;
    // n = x log2(e) rounded to nearest even, as nearbyintf rounds it, by adding and taking away
    // 1.5 * 2^23 (|x log2(e)| < 2^22): SSE2 has no rounding instruction, and nearbyintf's libm
    // call took a fifth of SiLU's time at this level. The same bits for every float.
    const float t = x * 1.44269504088896341f;
    const float n = (t + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + (r + 1.0f);
    const uint32_t e = uint32_t(int32_t(n) + 127) << 23;
    float scale;
    memcpy(&scale, &e, 4);
    return p * scale;
  }
  static R exp(R a) {
    return map([&](int i) { return exp1(a.v[i]); });
  }
  static R swap_pairs(R a) {
    return map([&](int i) { return a.v[i ^ 1]; });
  }
  static R sqrt(R a) {
    return map([&](int i) { return sqrtf(a.v[i]); });
  }
  // Sums of squares in double (kernels_train.inc), lane by lane, reduced as hsum reduces.
  struct D {
    double v[8];
  };
  static D dzero() { return D{}; }
  static D add_squares(D d, R x) {
    for (int i = 0; i < W; ++i) d.v[i] += double(x.v[i]) * double(x.v[i]);
    return d;
  }
  static double dsum(D d) {
    return ((d.v[0] + d.v[4]) + (d.v[2] + d.v[6])) + ((d.v[1] + d.v[5]) + (d.v[3] + d.v[7]));
  }
};

}  // namespace

#include "backend/cpu/kernels_impl.inc"
#include "backend/cpu/kernels_train.inc"

}  // namespace genperf::cpu::generic

namespace genperf::cpu {

const Kernels& kernels_generic() {
  static const Kernels k = [] {
    Kernels t{};
    t.name = "generic";
    t.gemv[size_t(DType::F32)] = generic::gemv<generic::LoadF32>;
    t.gemv[size_t(DType::BF16)] = generic::gemv<generic::LoadBF16>;
    t.gemv[size_t(DType::F16)] = generic::gemv<generic::LoadF16>;
    t.to_f32[size_t(DType::F32)] = generic::to_f32_row<generic::LoadF32>;
    t.to_f32[size_t(DType::BF16)] = generic::to_f32_row<generic::LoadBF16>;
    t.to_f32[size_t(DType::F16)] = generic::to_f32_row<generic::LoadF16>;
    t.gemv[size_t(DType::F8_E4M3_B32)] = generic::gemv<generic::LoadE4M3B32>;
    t.gemv[size_t(DType::F8_E5M2_B32)] = generic::gemv<generic::LoadE5M2B32>;
    t.to_f32[size_t(DType::F8_E4M3_B32)] = generic::to_f32_row<generic::LoadE4M3B32>;
    t.to_f32[size_t(DType::F8_E5M2_B32)] = generic::to_f32_row<generic::LoadE5M2B32>;
    t.quantize_act = quantize_act_generic;
    for (size_t i = 0; i < size_t(DType::COUNT); ++i) t.qgemv[i] = qgemv_generic(DType(i));
    t.f32_to_bf16 = generic::f32_to_bf16_scalar;
    t.f32_to_f16 = [](const float* src, uint16_t* dst, int64_t n) {
      for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_f16(src[i]);
    };
    t.rms_norm_row = generic::rms_norm_row;
    t.rope_row = generic::rope_row;
    t.silu_mul_row = generic::silu_mul_row;
    t.add_row = generic::add_row;
    t.sum_row = generic::sum_row;
    t.attention = generic::attention;
    t.gemm_tile = gemm_tile_portable;
    t.exp_sum = generic::exp_sum;
    t.exp_scale = generic::exp_scale;
    t.silu_mul_backward_row = generic::silu_mul_backward_row;
    t.adamw_update = generic::adamw_update;
    t.sum_squares = generic::sum_squares;
    t.silu_row = generic::silu_row;
    t.silu_backward_row = generic::silu_backward_row;
    t.group_norm_moments = generic::group_norm_moments;
    t.group_norm_apply = generic::group_norm_apply;
    t.group_norm_grad_sums = generic::group_norm_grad_sums;
    t.group_norm_dx = generic::group_norm_dx;
    t.conv_few_oc_row = generic::conv_few_oc_row;
    return t;
  }();
  return k;
}

}  // namespace genperf::cpu
