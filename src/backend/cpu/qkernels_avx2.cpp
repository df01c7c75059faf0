// AVX2 quantized-weight kernels (qkernels.h): activation quantization, the integer GEMV and
// GEMM, and row dequantization. Bytes multiply with vpmaddubsw (unsigned x signed, pairs summed
// to int16; no pair of these formats can saturate it: 2 * 63 * 127 for Q6_K, 2 * 128 * 127 for
// Q8_0 through the sign trick) and vpmaddwd widens to int32. Compiled with -mavx2 -mfma -mf16c.
//
// qkernels_avxvnni.cpp compiles this file a second time with GP_QK_AVXVNNI set and -mavxvnni:
// the same kernels in their own namespace, where one vpdpbusd (4 byte products per int32 lane,
// added to it) takes the place of each vpmaddubsw + vpmaddwd + add, and the int16 pair sums
// are not needed. Only the GEMM and packed-kernel entry points of that compilation are used.
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "backend/cpu/qkernels.h"

#ifndef GP_QK_AVXVNNI
#define GP_QK_AVXVNNI 0
#endif
#if GP_QK_AVXVNNI
#define GP_QK_NS avxvnniq
#else
#define GP_QK_NS avx2q
#endif

namespace genperf::cpu::GP_QK_NS {
namespace {

// Whether this compilation has vpdpbusd on 256-bit registers.
constexpr bool kVnni = GP_QK_AVXVNNI;

// acc + per int32 lane the sum of the 4 products of its unsigned bytes in u and signed bytes in
// x: one vpdpbusd, or without VNNI vpmaddubsw + vpmaddwd + add (exact where no pair of products
// saturates int16, which holds for every caller). Its callers sit in `if constexpr (kVnni)`
// branches, so the plain AVX2 compilation of this file does not use it.
[[maybe_unused]] GP_QINLINE __m256i dot4(__m256i acc, __m256i u, __m256i x) {
#if GP_QK_AVXVNNI
  return _mm256_dpbusd_avx_epi32(acc, u, x);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), _mm256_set1_epi16(1)));
#endif
}

// 32 bytes, byte i = 0x10 where bit i of v is set: byte k of v copied to bytes 8k..8k+7, each
// tested against its own bit.
GP_QINLINE __m256i bits_to_16(uint32_t v) {
  const __m256i rep = _mm256_shuffle_epi8(
      _mm256_set1_epi32(int(v)), _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101,
                                                    0x0202020202020202, 0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201ull));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(rep, bit), bit),
                          _mm256_set1_epi8(0x10));
}

}  // namespace

#include "backend/cpu/qkernels_formats.inc"

namespace {

GP_QINLINE float hsum(__m256 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
GP_QINLINE int32_t hsum_i32(__m256i a) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

// ---------------------------------------------------------------------------------------------
// Activation quantization (qkernels.h): the scalar level's arithmetic, 8 lanes at a time; the
// products x * (127 / amax) round to nearest even as nearbyintf does.

#if !GP_QK_AVXVNNI
void quantize_act(const float* x, const QAct& a, int64_t t) {
  int8_t* q = a.qs + t * a.Kp;
  float* d = a.d + t * a.nb;
  int32_t* s = a.s + t * a.nb;
  int16_t* h = a.h + t * 2 * a.nb;
  float* ds = a.ds + t * a.nb;
  const int64_t full = a.K / 32;
  const __m256 sign = _mm256_set1_ps(-0.0f), fmax = _mm256_set1_ps(3.40282347e38f);
  for (int64_t b = 0; b < a.nb; ++b) {
    if (b >= full) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * b), _mm256_setzero_si256());
      d[b] = ds[b] = 0.0f;
      s[b] = h[2 * b] = h[2 * b + 1] = 0;
      continue;
    }
    __m256 v[4], ax[4];
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + 32 * b + 8 * i);
      ax[i] = _mm256_andnot_ps(sign, v[i]);
    }
    const __m256 m = _mm256_max_ps(_mm256_max_ps(ax[0], ax[1]), _mm256_max_ps(ax[2], ax[3]));
    // Finite when every |x| <= FLT_MAX (false for NaN, whichever lane holds it).
    const __m256 ok = _mm256_and_ps(_mm256_and_ps(_mm256_cmp_ps(ax[0], fmax, _CMP_LE_OQ),
                                                  _mm256_cmp_ps(ax[1], fmax, _CMP_LE_OQ)),
                                    _mm256_and_ps(_mm256_cmp_ps(ax[2], fmax, _CMP_LE_OQ),
                                                  _mm256_cmp_ps(ax[3], fmax, _CMP_LE_OQ)));
    const bool finite = _mm256_movemask_ps(ok) == 0xFF;
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const float id = finite && amax > 0.0f ? 127.0f / amax : 0.0f;
    __m256i qi[4];
    for (int i = 0; i < 4; ++i) qi[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], _mm256_set1_ps(id)));
    if (id == 0.0f)
      for (int i = 0; i < 4; ++i) qi[i] = _mm256_setzero_si256();
    // int32 -> int8 in element order: packs work within 128-bit lanes, a permute restores it.
    const __m256i p16a = _mm256_packs_epi32(qi[0], qi[1]), p16b = _mm256_packs_epi32(qi[2], qi[3]);
    const __m256i p8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16a, p16b),
                                                   _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * b), p8);
    const int32_t s0 = hsum_i32(_mm256_add_epi32(qi[0], qi[1]));
    const int32_t s1 = hsum_i32(_mm256_add_epi32(qi[2], qi[3]));
    d[b] = finite ? amax / 127.0f : NAN;
    s[b] = s0 + s1;
    h[2 * b] = int16_t(s0);
    h[2 * b + 1] = int16_t(s1);
    ds[b] = d[b] * float(s[b]);
  }
}
#endif

// ---------------------------------------------------------------------------------------------
// GEMV. Per weight row, chunk by chunk: unpack 8 blocks, then per activation row the 8 block
// products (vpmaddubsw + vpmaddwd, 8 int32 lanes each) reduce to 8 block sums in one vector,
// offsets and the sub-block scales (Q2_K, Q3_K, Q6_K) apply in int32, and one FMA scales them
// into 8 f32 lanes (a second one adds the mins).
// Rows are read one after another: a single sequential stream for the hardware prefetcher.

// 8 vectors of 8 int32 -> a = [h(p0) h(p1) h(p2) h(p3) of lanes 0-3 | same of lanes 4-7] and the
// same for p4..p7 in b, with h the sum of the lanes of one 128-bit half.
GP_QINLINE void half_sums(const __m256i* p, __m256i* a, __m256i* b) {
  *a = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
  *b = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
}
// [a.lo + a.hi | b.lo + b.hi]: the 8 vectors' sums in order.
GP_QINLINE __m256i join_halves(__m256i a, __m256i b) {
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                          _mm256_permute2x128_si256(a, b, 0x31));
}

template <class F>
GP_QINLINE __m256i block_sums(const __m256i* u, const int8_t* xq, const int32_t* xs,
                              const int16_t* xh, const ChunkScales& sc) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i p[8];
  for (int i = 0; i < 8; ++i) {
    const __m256i xv = loadu256(xq + 32 * i);
    const __m256i m =
        F::kSigned ? _mm256_maddubs_epi16(_mm256_sign_epi8(u[i], u[i]), _mm256_sign_epi8(xv, u[i]))
                   : _mm256_maddubs_epi16(u[i], xv);
    p[i] = _mm256_madd_epi16(m, ones);
  }
  __m256i a, b;
  half_sums(p, &a, &b);
  if constexpr (F::kHalfScales) {
    // a holds the sums of the half-blocks 0 2 4 6 | 1 3 5 7, b those of 8 10 12 14 | 9 11 13 15.
    const __m128i order = _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15);
    const __m128i sp = _mm_shuffle_epi8(sc.sc16, order);
    a = _mm256_mullo_epi32(a, _mm256_cvtepi8_epi32(sp));
    b = _mm256_mullo_epi32(b, _mm256_cvtepi8_epi32(_mm_unpackhi_epi64(sp, sp)));
  }
  __m256i r = join_halves(a, b);
  if constexpr (F::kOffset != 0 && F::kHalfScales) {
    // - offset * (sc_2i h_2i + sc_2i+1 h_2i+1) per block i
    const __m256i c = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc.sc16), loadu256(xh));
    r = _mm256_sub_epi32(r, _mm256_slli_epi32(c, offset_shift(F::kOffset)));
  } else if constexpr (F::kOffset != 0) {
    r = _mm256_sub_epi32(r, _mm256_slli_epi32(loadu256(xs), offset_shift(F::kOffset)));
  }
  return r;
}

template <class F, int TT>
void gemv_rows(const QAct& a, int64_t t0, const uint8_t* w, size_t ldw, int64_t n0, int64_t n1,
               const float* bias, float* y, size_t ldy) {
  const int64_t blocks = a.K / 32, chunks = (blocks + 7) / 8;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = w + size_t(n) * ldw;
    __m256 acc[TT];
    for (int t = 0; t < TT; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t ci = 0; ci < chunks; ++ci) {
      const uint8_t* c = row + ci * F::kChunkBytes;
      const int nblk = ci + 1 < chunks ? 8 : int(blocks - 8 * ci);
      __m256i u[8];
      ChunkScales sc;
      if (nblk == 8) {
        F::unpack(c, 8, u);
        sc = F::scales(c, 8);
      } else {
        F::unpack(c, nblk, u);
        sc = F::scales(c, nblk);
      }
      for (int t = 0; t < TT; ++t) {
        const int64_t r = t0 + t, bi = r * a.nb + 8 * ci;
        const __m256i isum =
            block_sums<F>(u, a.qs + r * a.Kp + 256 * ci, a.s + bi, a.h + 2 * bi, sc);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum),
                                 _mm256_mul_ps(sc.dw, _mm256_loadu_ps(a.d + bi)), acc[t]);
        if constexpr (F::kMin)
          acc[t] = _mm256_fmadd_ps(sc.mw, min_factor<F>(sc, a.d + bi, a.ds + bi, a.h + 2 * bi),
                                   acc[t]);
      }
    }
    for (int t = 0; t < TT; ++t)
      y[size_t(t0 + t) * ldy + size_t(n)] = hsum(acc[t]) + (bias ? bias[n] : 0.0f);
  }
}


// ---------------------------------------------------------------------------------------------
// Integer GEMM (prefill, many activation rows): the AVX-512 file's design ("Integer GEMM" in
// qgemm_avx512.cpp) in 256-bit registers and without VNNI, on panels of 16 weight rows
// (pack_panel, qkernels_formats.inc). Per 4 k, the activation's 4 bytes broadcast to all lanes
// meet the two vectors of 8 rows in vpmaddubsw. Its int16 pair sums add up over kSum steps (as
// many as cannot leave int16: 2 * umax * 127 * kSum <= 32767) before one vpmaddwd widens them
// into the int32 sums. Q8_0's signed quants take the sign trick, |w| against x * sign(w), one
// step at a time. Each scale group's int32 sums start at -offset * s (or h), so they are the
// exact integer block sums of the scalar level, and end in one convert and one FMA by sw * dx.

constexpr int kPanelRows = 16;

template <class F>
struct GemmFmt : PanelFmt<F> {
  using PanelFmt<F>::kFold;
  static constexpr int kShift = F::kOffset != 0 ? offset_shift(F::kOffset) : -1;  // offset = s << kShift
  // The largest unpacked quant (Q8_0: |w|, up to 128) and the steps whose int16 pair sums
  // cannot overflow.
  static constexpr int kUMax = F::kSigned ? 128
                               : kFold    ? 45
                               : std::is_same_v<F, FmtQ6_K> ? 63
                               : std::is_same_v<F, FmtQ3_K> ? 7
                               : std::is_same_v<F, FmtQ5_0> || std::is_same_v<F, FmtQ5_1> ||
                                       std::is_same_v<F, FmtQ5_K>
                                   ? 31
                                   : 15;
  static constexpr int kSum = 2 * kUMax * 127 * 4 <= 32767 ? 4 : 2 * kUMax * 127 * 2 <= 32767 ? 2 : 1;
  static_assert(2 * kUMax * 127 * kSum <= 32767 && (PanelFmt<F>::kGroup / 4) % kSum == 0);
};

// The vector policy of begin_group and end_group (qkernels_formats.inc): 8 lanes.
struct QV {
  using Ri = __m256i;
  using Rf = __m256;
  static constexpr int kLanes = 8;
  static GP_QINLINE Rf load(const float* p) { return _mm256_load_ps(p); }
  static GP_QINLINE Rf set1(float v) { return _mm256_set1_ps(v); }
  static GP_QINLINE Ri set1i(int32_t v) { return _mm256_set1_epi32(v); }
  static GP_QINLINE Rf fma(Rf a, Rf b, Rf c) { return _mm256_fmadd_ps(a, b, c); }
  static GP_QINLINE Rf mul(Rf a, Rf b) { return _mm256_mul_ps(a, b); }
  static GP_QINLINE Rf cvt(Ri a) { return _mm256_cvtepi32_ps(a); }
};

// int16 pair sums of one step: u (unsigned quants, or Q8_0's signed ones) times the activation
// bytes broadcast in xb.
template <class F>
GP_QINLINE __m256i step_pairs(__m256i w, __m256i xb) {
  if constexpr (F::kSigned)
    return _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(xb, w));
  else
    return _mm256_maddubs_epi16(w, xb);
}

// Rows [t0, t0 + TT) of a against the panel; y gets columns [n, n + rows).
template <class F, int TT>
GP_QINLINE void gemm_tile(const Panel& p, const QAct& a, int64_t t0, int64_t n, int rows,
                          const float* bias, float* y, size_t ldy) {
  using G = GemmFmt<F>;
  constexpr int kSteps = G::kGroup / 4;
  const int64_t groups = a.Kp / G::kGroup;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[2][TT];
  for (int t = 0; t < TT; ++t) acc[0][t] = acc[1][t] = _mm256_setzero_ps();
  const int8_t* xq[TT];
  for (int t = 0; t < TT; ++t) xq[t] = a.qs + (t0 + t) * a.Kp;
  const uint8_t* wp = p.w;
  for (int64_t g = 0; g < groups; ++g) {
    __m256i ia[2][TT];
    begin_group<QV, F, G::kShift, TT>(a, t0, g, ia);
    if constexpr (kVnni) {
      for (int s = 0; s < kSteps; ++s, wp += 4 * kPanelRows) {
        const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(wp)),
                      w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(wp + 32));
        // Q8_0: |w| against x * sign(w), as below.
        const __m256i u0 = F::kSigned ? _mm256_sign_epi8(w0, w0) : w0,
                      u1 = F::kSigned ? _mm256_sign_epi8(w1, w1) : w1;
        for (int t = 0; t < TT; ++t) {
          int32_t xv;
          memcpy(&xv, xq[t] + g * G::kGroup + 4 * s, 4);
          const __m256i xb = _mm256_set1_epi32(xv);
          ia[0][t] = dot4(ia[0][t], u0, F::kSigned ? _mm256_sign_epi8(xb, w0) : xb);
          ia[1][t] = dot4(ia[1][t], u1, F::kSigned ? _mm256_sign_epi8(xb, w1) : xb);
        }
      }
    } else {
      for (int s = 0; s < kSteps; s += G::kSum) {
        __m256i m[2][TT];
        for (int k = 0; k < G::kSum; ++k, wp += 4 * kPanelRows) {
          const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(wp)),
                        w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(wp + 32));
          for (int t = 0; t < TT; ++t) {
            int32_t xv;
            memcpy(&xv, xq[t] + g * G::kGroup + 4 * (s + k), 4);
            const __m256i xb = _mm256_set1_epi32(xv);
            const __m256i p0 = step_pairs<F>(w0, xb), p1 = step_pairs<F>(w1, xb);
            m[0][t] = k == 0 ? p0 : _mm256_add_epi16(m[0][t], p0);
            m[1][t] = k == 0 ? p1 : _mm256_add_epi16(m[1][t], p1);
          }
        }
        for (int t = 0; t < TT; ++t) {
          ia[0][t] = _mm256_add_epi32(ia[0][t], _mm256_madd_epi16(m[0][t], ones));
          ia[1][t] = _mm256_add_epi32(ia[1][t], _mm256_madd_epi16(m[1][t], ones));
        }
      }
    }
    end_group<QV, F, TT>(p, a, t0, g, ia, acc);
  }
  // Lanes of rows past `rows` are not stored.
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i k0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(rows), lane),
                k1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(rows - 8), lane);
  __m256 b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
  if (bias) {
    b0 = _mm256_maskload_ps(bias + n, k0);
    b1 = _mm256_maskload_ps(bias + n + 8, k1);
  }
  for (int t = 0; t < TT; ++t) {
    float* yr = y + size_t(t0 + t) * ldy + size_t(n);
    _mm256_maskstore_ps(yr, k0, _mm256_add_ps(acc[0][t], b0));
    _mm256_maskstore_ps(yr + 8, k1, _mm256_add_ps(acc[1][t], b1));
  }
}

// Activation rows per tile: 2 x kTile int32 sums, int16 pair sums and f32 accumulators.
constexpr int kTile = 3;

// ---------------------------------------------------------------------------------------------
// Packed weights (qpack.h): the AVX-512 VNNI file's packed kernels in 256-bit registers. Each
// 64-byte piece of a group (the same 4 bytes of 16 rows) is two vectors, rows 0-7 and 8-15;
// unpacked in registers, each meets 4 activation bytes broadcast to all lanes in vpmaddubsw,
// whose int16 pair sums add up over as many steps as cannot leave int16 before one vpmaddwd
// widens them into the row's int32 lane. No reduction across lanes (the row kernel's hadds per
// block were what held Q4_0 and Q4_K at 0.55-0.65 of memory bandwidth), 16 outputs per group.
// The int32 lanes start at -offset * s (or h), so they are the exact block sums of the scalar
// level. Q8_0's packed quants have their top bit flipped for vpdpbusd: here it is flipped back
// and the signed bytes take the sign trick, so no 128 * s correction.

GP_QINLINE __m256i bcast4(const int8_t* p) {
  int32_t v;
  memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
// 16 f16 at p, rows 0-7 and 8-15.
GP_QINLINE void f16x16(const uint8_t* p, __m256* v) {
  v[0] = _mm256_cvtph_ps(loadu128(p));
  v[1] = _mm256_cvtph_ps(loadu128(p + 16));
}
// 16 unsigned / signed bytes at p as f32, rows 0-7 and 8-15.
GP_QINLINE void u8x16(const uint8_t* p, __m256* v) {
  const __m128i b = loadu128(p);
  v[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
  v[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(b, b)));
}
GP_QINLINE void i8x16(const uint8_t* p, __m256* v) {
  const __m128i b = loadu128(p);
  v[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
  v[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(b, b)));
}
// 8 unsigned / signed bytes at p as f32 (the rows of one half of a group).
GP_QINLINE __m256 u8x8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
GP_QINLINE __m256 i8x8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
GP_QINLINE __m256i load32(const uint8_t* p) { return loadu256(p); }
// a | (b & m): AVX-512's ternary-logic 0xF8.
GP_QINLINE __m256i or_and(__m256i a, __m256i b, __m256i m) {
  return _mm256_or_si256(a, _mm256_and_si256(b, m));
}

// Q4_K's 6-bit scales and mins of 16 rows (packed bytes 4..15 of the super-block, byte i of row
// r at 16 i + r) as bytes: sc[16 j + r], mn[16 j + r] for sub-block j (scales_mins_k4's decoding,
// 16 rows at a time; the 16-bit shifts' spill across bytes is masked off).
GP_QINLINE void k4_scales16(const uint8_t* p, uint8_t* sc, uint8_t* mn) {
  const __m256i m6 = _mm256_set1_epi8(63), m4 = _mm256_set1_epi8(0x0F),
                m30 = _mm256_set1_epi8(0x30);
  for (int h = 0; h < 2; ++h) {
    const __m256i a = load32(p + 32 * h), b = load32(p + 64 + 32 * h), c = load32(p + 128 + 32 * h);
    auto st = [](uint8_t* d, __m256i v) { _mm256_store_si256(reinterpret_cast<__m256i*>(d), v); };
    st(sc + 32 * h, _mm256_and_si256(a, m6));
    st(mn + 32 * h, _mm256_and_si256(b, m6));
    st(sc + 64 + 32 * h, or_and(_mm256_and_si256(c, m4), _mm256_srli_epi16(a, 2), m30));
    st(mn + 64 + 32 * h,
       or_and(_mm256_and_si256(_mm256_srli_epi16(c, 4), m4), _mm256_srli_epi16(b, 2), m30));
  }
}

// The 4 Q6_K quant vectors of packed step kk of half h (elements 128h + 32i + 4kk.., i = 0..3),
// rows 8hr..8hr+7: low or high nibbles of ql with bit pair i of qh in bits 4-5.
GP_QINLINE void q6_quads(const uint8_t* g, int h, int kk, int hr, __m256i* e) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  const uint8_t* piece = g + 288 + 192 * (8 * h + kk) + 32 * hr;
  const __m256i l0 = load32(piece), l1 = load32(piece + 64), qh = load32(piece + 128);
  e[0] = or_and(_mm256_and_si256(l0, m4), _mm256_slli_epi16(qh, 4), m30);
  e[1] = or_and(_mm256_and_si256(l1, m4), _mm256_slli_epi16(qh, 2), m30);
  e[2] = or_and(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), qh, m30);
  e[3] = or_and(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_srli_epi16(qh, 2), m30);
}

// A packed Q4_K / Q5_K unit's super-block scales of 16 rows: d and dmin (rows 0-7, 8-15) and the
// sub-block scales and mins as bytes (k4_scales16).
GP_QINLINE void k4_unit_scales(const uint8_t* g, uint8_t* sc, uint8_t* mn, __m256* d, __m256* dmin) {
  k4_scales16(g + 64, sc, mn);
  f16x16(g, d);
  f16x16(g + 32, dmin);
}

// Q4_K (kFifth false) and Q5_K: the quants of packed step kk of sub-blocks 2p (lo) and 2p + 1
// (hi), rows 8hr..8hr+7; Q5_K's fifth bits are bits 2p and 2p + 1 of qh chunk kk, moved to bit 4
// (16-bit shifts by at most 4: what crosses a byte misses bit 4).
template <bool kFifth>
GP_QINLINE void k4_pair(const uint8_t* g, int p, int kk, int hr, __m256i& lo, __m256i& hi) {
  constexpr int kQs = kFifth ? 768 : 256;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i z = load32(g + kQs + 64 * (8 * p + kk) + 32 * hr);
  lo = _mm256_and_si256(z, m4);
  hi = _mm256_and_si256(_mm256_srli_epi16(z, 4), m4);
  if constexpr (kFifth) {
    const __m256i qh = load32(g + 256 + 64 * kk + 32 * hr), b4 = _mm256_set1_epi8(0x10);
    const auto to_bit4 = [&](int b) {
      return b <= 4 ? _mm256_slli_epi16(qh, 4 - b) : _mm256_srli_epi16(qh, b - 4);
    };
    lo = or_and(lo, to_bit4(2 * p), b4);
    hi = or_and(hi, to_bit4(2 * p + 1), b4);
  }
}

// acc[t][hr] (rows 8hr..8hr+7 of the group, activation row t0 + t) += the products of packed
// unit g (unit index u). Each half of the group is done on its own: half the registers live.
template <class F, int TT>
GP_QINLINE void packed_unit(const uint8_t* g, int64_t u, const QAct& a, int64_t t0,
                            __m256 (*acc)[2]) {
  using G = GemmFmt<F>;
  const __m256i ones = _mm256_set1_epi16(1), m4 = _mm256_set1_epi8(0x0F);
  const int8_t* xq[TT];
  int64_t bi[TT];  // index of the unit's first block of 32 in the activation arrays
  constexpr int kBlocks = PackedUnit<F>::kElems / 32;
  for (int t = 0; t < TT; ++t) {
    xq[t] = a.qs + (t0 + t) * a.Kp + u * PackedUnit<F>::kElems;
    bi[t] = (t0 + t) * a.nb + u * kBlocks;
  }
  if constexpr (std::is_same_v<F, FmtQ4_0>) {
    // 8 steps per block (4 low-nibble, 4 high) of u <= 15, all summed in int16 before one
    // vpmaddwd: 2 * 15 * 127 * 8 = 30480 stays within it.
    static_assert(2 * 15 * 127 * 8 <= 32767);
    for (int b = 0; b < 2; ++b) {
      __m256 dw[2];
      f16x16(g + 32 * b, dw);
      const uint8_t* q = g + 64 + 256 * b;
      for (int hr = 0; hr < 2; ++hr) {
        __m256i w[8];
        for (int k = 0; k < 4; ++k) {
          const __m256i z = load32(q + 64 * k + 32 * hr);
          w[k] = _mm256_and_si256(z, m4);
          w[4 + k] = _mm256_and_si256(_mm256_srli_epi16(z, 4), m4);
        }
        for (int t = 0; t < TT; ++t) {
          const int8_t* x = xq[t] + 32 * b;
          if constexpr (kVnni) {  // two chains (alternate steps) for latency
            __m256i p0 = _mm256_set1_epi32(-(a.s[bi[t] + b] << 3)), p1 = _mm256_setzero_si256();
            for (int k = 0; k < 4; k += 2) {
              p0 = dot4(p0, w[k], bcast4(x + 4 * k));
              p1 = dot4(p1, w[k + 1], bcast4(x + 4 * k + 4));
              p0 = dot4(p0, w[4 + k], bcast4(x + 16 + 4 * k));
              p1 = dot4(p1, w[5 + k], bcast4(x + 20 + 4 * k));
            }
            acc[t][hr] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(p0, p1)),
                                         _mm256_mul_ps(dw[hr], _mm256_set1_ps(a.d[bi[t] + b])), acc[t][hr]);
          } else {
            __m256i m = _mm256_maddubs_epi16(w[0], bcast4(x));
            for (int k = 1; k < 4; ++k) m = _mm256_add_epi16(m, _mm256_maddubs_epi16(w[k], bcast4(x + 4 * k)));
            for (int k = 0; k < 4; ++k)
              m = _mm256_add_epi16(m, _mm256_maddubs_epi16(w[4 + k], bcast4(x + 16 + 4 * k)));
            const __m256i p = _mm256_add_epi32(_mm256_set1_epi32(-(a.s[bi[t] + b] << 3)),
                                               _mm256_madd_epi16(m, ones));
            acc[t][hr] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p),
                                         _mm256_mul_ps(dw[hr], _mm256_set1_ps(a.d[bi[t] + b])), acc[t][hr]);
          }
        }
      }
    }
  } else if constexpr (std::is_same_v<F, FmtQ8_0>) {
    // Signed w (the flip undone), |w| against x * sign(w): one step per vpmaddwd (2 * 128 * 127).
    const __m256i flip = _mm256_set1_epi8(char(0x80));
    for (int b = 0; b < 2; ++b) {
      __m256 dw[2];
      f16x16(g + 32 * b, dw);
      const uint8_t* q = g + 64 + 512 * b;
      for (int hr = 0; hr < 2; ++hr) {
        __m256i p0[TT], p1[TT];
        for (int t = 0; t < TT; ++t) p0[t] = p1[t] = _mm256_setzero_si256();
        if constexpr (kVnni) {
          // The packed bytes are w + 128 as unsigned: the sums start at -128 s.
          for (int t = 0; t < TT; ++t) p0[t] = _mm256_set1_epi32(-(a.s[bi[t] + b] << 7));
          for (int k = 0; k < 8; ++k) {
            const __m256i wf = load32(q + 64 * k + 32 * hr);
            for (int t = 0; t < TT; ++t) {
              const __m256i xb = bcast4(xq[t] + 32 * b + 4 * k);
              if (k % 2 == 0)
                p0[t] = dot4(p0[t], wf, xb);
              else
                p1[t] = dot4(p1[t], wf, xb);
            }
          }
        } else {
          for (int k = 0; k < 8; ++k) {
            const __m256i w = _mm256_xor_si256(load32(q + 64 * k + 32 * hr), flip);
            const __m256i aw = _mm256_sign_epi8(w, w);
            for (int t = 0; t < TT; ++t) {
              // Two chains (alternate steps) for latency.
              const __m256i pr = _mm256_madd_epi16(
                  _mm256_maddubs_epi16(aw, _mm256_sign_epi8(bcast4(xq[t] + 32 * b + 4 * k), w)), ones);
              if (k % 2 == 0)
                p0[t] = _mm256_add_epi32(p0[t], pr);
              else
                p1[t] = _mm256_add_epi32(p1[t], pr);
            }
          }
        }
        for (int t = 0; t < TT; ++t)
          acc[t][hr] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(p0[t], p1[t])),
                                       _mm256_mul_ps(dw[hr], _mm256_set1_ps(a.d[bi[t] + b])), acc[t][hr]);
      }
    }
  } else if constexpr (std::is_same_v<F, FmtQ4_K> || std::is_same_v<F, FmtQ5_K>) {
    constexpr bool kFifth = std::is_same_v<F, FmtQ5_K>;
    constexpr int kSum = G::kSum;  // steps per vpmaddwd: 4 for both (u <= 15, 31)
    alignas(32) uint8_t sc[128], mn[128];
    __m256 d[2], dmin[2];
    k4_unit_scales(g, sc, mn, d, dmin);
    for (int hr = 0; hr < 2; ++hr) {
      __m256 as[TT], am[TT];
      for (int t = 0; t < TT; ++t) as[t] = am[t] = _mm256_setzero_ps();
      for (int p = 0; p < 4; ++p) {  // sub-blocks 2p (low nibbles) and 2p + 1 (high)
        __m256i sl[TT], sh[TT];
        for (int t = 0; t < TT; ++t) sl[t] = sh[t] = _mm256_setzero_si256();
        if constexpr (kVnni) {
          for (int kk = 0; kk < 8; ++kk) {
            __m256i lo, hi;
            k4_pair<kFifth>(g, p, kk, hr, lo, hi);
            for (int t = 0; t < TT; ++t) {
              sl[t] = dot4(sl[t], lo, bcast4(xq[t] + 64 * p + 4 * kk));
              sh[t] = dot4(sh[t], hi, bcast4(xq[t] + 64 * p + 32 + 4 * kk));
            }
          }
        } else {
          for (int k0 = 0; k0 < 8; k0 += kSum) {
            __m256i ml[TT], mh[TT];
            for (int kk = k0; kk < k0 + kSum; ++kk) {
              __m256i lo, hi;
              k4_pair<kFifth>(g, p, kk, hr, lo, hi);
              for (int t = 0; t < TT; ++t) {
                const __m256i pl = _mm256_maddubs_epi16(lo, bcast4(xq[t] + 64 * p + 4 * kk)),
                              ph = _mm256_maddubs_epi16(hi, bcast4(xq[t] + 64 * p + 32 + 4 * kk));
                ml[t] = kk == k0 ? pl : _mm256_add_epi16(ml[t], pl);
                mh[t] = kk == k0 ? ph : _mm256_add_epi16(mh[t], ph);
              }
            }
            for (int t = 0; t < TT; ++t) {
              sl[t] = _mm256_add_epi32(sl[t], _mm256_madd_epi16(ml[t], ones));
              sh[t] = _mm256_add_epi32(sh[t], _mm256_madd_epi16(mh[t], ones));
            }
          }
        }
        // This half's rows only (8 of the 16 bytes of each sub-block).
        const __m256 sc0 = u8x8(sc + 32 * p + 8 * hr), sc1 = u8x8(sc + 32 * p + 16 + 8 * hr);
        const __m256 mn0 = u8x8(mn + 32 * p + 8 * hr), mn1 = u8x8(mn + 32 * p + 16 + 8 * hr);
        for (int t = 0; t < TT; ++t) {
          const int64_t b = bi[t] + 2 * p;
          as[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sl[t]), _mm256_mul_ps(sc0, _mm256_set1_ps(a.d[b])), as[t]);
          as[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sh[t]), _mm256_mul_ps(sc1, _mm256_set1_ps(a.d[b + 1])), as[t]);
          am[t] = _mm256_fmadd_ps(mn0, _mm256_set1_ps(a.ds[b]), am[t]);
          am[t] = _mm256_fmadd_ps(mn1, _mm256_set1_ps(a.ds[b + 1]), am[t]);
        }
      }
      for (int t = 0; t < TT; ++t)
        acc[t][hr] = _mm256_fnmadd_ps(dmin[hr], am[t], _mm256_fmadd_ps(d[hr], as[t], acc[t][hr]));
    }
  } else {  // Q6_K: per sub-block of 16 (4 steps), int16 sums over G::kSum = 2 steps
    static_assert(G::kSum == 2);
    __m256 d[2];
    f16x16(g, d);
    for (int hr = 0; hr < 2; ++hr) {
      __m256 as[TT];
      for (int t = 0; t < TT; ++t) as[t] = _mm256_setzero_ps();
      for (int h = 0; h < 2; ++h)
        for (int q = 0; q < 2; ++q) {  // sub-blocks 8h + 2i + q, i = 0..3
          __m256i s[TT][4];
          for (int t = 0; t < TT; ++t)
            for (int i = 0; i < 4; ++i)
              s[t][i] = _mm256_set1_epi32(-(int32_t(a.h[2 * bi[t] + 8 * h + 2 * i + q]) << 5));
          for (int kk = 4 * q; kk < 4 * q + 4; kk += 2) {
            // The piece's ql and qh loaded once per step for all 4 quant vectors.
            __m256i e0[4], e1[4];
            q6_quads(g, h, kk, hr, e0);
            q6_quads(g, h, kk + 1, hr, e1);
            for (int t = 0; t < TT; ++t)
              for (int i = 0; i < 4; ++i) {
                const int8_t* x = xq[t] + 128 * h + 32 * i + 4 * kk;
                if constexpr (kVnni) {
                  s[t][i] = dot4(dot4(s[t][i], e0[i], bcast4(x)), e1[i], bcast4(x + 4));
                } else {
                  const __m256i m = _mm256_add_epi16(_mm256_maddubs_epi16(e0[i], bcast4(x)),
                                                     _mm256_maddubs_epi16(e1[i], bcast4(x + 4)));
                  s[t][i] = _mm256_add_epi32(s[t][i], _mm256_madd_epi16(m, ones));
                }
              }
          }
          for (int i = 0; i < 4; ++i) {
            const int sb = 8 * h + 2 * i + q;
            const __m256 scf = i8x8(g + 32 + 16 * sb + 8 * hr);
            for (int t = 0; t < TT; ++t)
              as[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t][i]),
                                      _mm256_mul_ps(scf, _mm256_set1_ps(a.d[bi[t] + sb / 2])), as[t]);
          }
        }
      for (int t = 0; t < TT; ++t) acc[t][hr] = _mm256_fmadd_ps(d[hr], as[t], acc[t][hr]);
    }
  }
}

// Prefetch distance as in the AVX-512 packed GEMV (qgemm_avx512.cpp, kPackedPrefetch).
constexpr int kPackedPrefetch = 2048;

template <class F, int TT>
void gemv_packed_rows(const QAct& a, int64_t t0, const uint8_t* w, size_t ldw, int64_t n0,
                      int64_t n1, const float* bias, float* y, size_t ldy) {
  const int64_t units = a.K / PackedUnit<F>::kElems;
  for (int64_t n = n0; n < n1; n += 16) {
    const uint8_t* g = w + size_t(n) * ldw;  // the group of rows n .. n + 15
    __m256 acc[TT][2];
    for (int t = 0; t < TT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    for (int64_t u = 0; u < units; ++u, g += PackedUnit<F>::kBytes) {
      for (int l = 0; l < PackedUnit<F>::kBytes; l += 64)
        _mm_prefetch(reinterpret_cast<const char*>(g + kPackedPrefetch + l), _MM_HINT_T0);
      packed_unit<F, TT>(g, u, a, t0, acc);
    }
    for (int hr = 0; hr < 2; ++hr) {
      const __m256 b = bias ? _mm256_loadu_ps(bias + n + 8 * hr) : _mm256_setzero_ps();
      for (int t = 0; t < TT; ++t)
        _mm256_storeu_ps(y + size_t(t0 + t) * ldy + size_t(n + 8 * hr), _mm256_add_ps(acc[t][hr], b));
    }
  }
}

// Rows of activations in groups of up to 4 (by_row_groups): each weight row, or packed group
// (kPacked), is read from memory once and from L1 by the later groups.
template <class F, bool kPacked = false>
void gemv(const QAct& a, int64_t T, const void* w, size_t ldw, int64_t n0, int64_t n1,
          const float* bias, float* y, size_t ldy) {
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  by_row_groups(T, [&](auto tt, int64_t t) {
    if constexpr (kPacked)
      gemv_packed_rows<F, decltype(tt)::value>(a, t, wb, ldw, n0, n1, bias, y, ldy);
    else
      gemv_rows<F, decltype(tt)::value>(a, t, wb, ldw, n0, n1, bias, y, ldy);
  });
}

// The integer GEMM's panel (16 rows: one packed group) from packed weights: the GEMV's unpacking
// stored per 4-element step instead of multiplied (Q8_0 as its signed bytes, which the tile's
// sign trick takes), with the scales pack_panel computes from the stored rows. Far cheaper than
// pack_panel's per-row gathering, since a packed group is lane-per-row already.
template <class F>
void pack_panel_packed(const uint8_t* w, size_t ldw, int64_t n, int64_t Kp, int64_t K,
                       const Panel& p) {
  using G = GemmFmt<F>;
  constexpr int kE = PackedUnit<F>::kElems;
  const int64_t units = K / kE;
  if (K < Kp) {  // the padding's quants and scales
    memset(p.w, 0, size_t(Kp) * kPanelRows);
    memset(p.sw, 0, size_t(Kp / G::kGroup) * kPanelRows * 4);
    if constexpr (F::kMin) memset(p.mw, 0, size_t(Kp / G::kMinGroup) * kPanelRows * 4);
  }
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const auto put = [&](int64_t step, int hr, __m256i v) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(p.w + step * 4 * kPanelRows + 32 * hr), v);
  };
  const auto put_f = [&](float* dst, const __m256* v) {
    _mm256_store_ps(dst, v[0]);
    _mm256_store_ps(dst + 8, v[1]);
  };
  const uint8_t* g = w + size_t(n) * ldw;
  for (int64_t u = 0; u < units; ++u, g += PackedUnit<F>::kBytes) {
    if constexpr (std::is_same_v<F, FmtQ4_0> || std::is_same_v<F, FmtQ8_0>) {
      for (int b = 0; b < 2; ++b) {  // block 2u + b
        const int64_t blk = 2 * u + b;
        __m256 dw[2];
        f16x16(g + 32 * b, dw);
        put_f(p.sw + blk * kPanelRows, dw);
        for (int hr = 0; hr < 2; ++hr) {
          if constexpr (std::is_same_v<F, FmtQ4_0>) {
            for (int k = 0; k < 4; ++k) {
              const __m256i z = load32(g + 64 + 256 * b + 64 * k + 32 * hr);
              put(8 * blk + k, hr, _mm256_and_si256(z, m4));
              put(8 * blk + 4 + k, hr, _mm256_and_si256(_mm256_srli_epi16(z, 4), m4));
            }
          } else {  // the flip undone: the signed bytes
            for (int k = 0; k < 8; ++k)
              put(8 * blk + k, hr,
                  _mm256_xor_si256(load32(g + 64 + 512 * b + 64 * k + 32 * hr),
                                   _mm256_set1_epi8(char(0x80))));
          }
        }
      }
    } else if constexpr (std::is_same_v<F, FmtQ4_K> || std::is_same_v<F, FmtQ5_K>) {
      alignas(32) uint8_t sc[128], mn[128];
      __m256 d[2], dmin[2];
      k4_unit_scales(g, sc, mn, d, dmin);
      for (int j = 0; j < 8; ++j) {
        __m256 s[2], m[2];
        u8x16(sc + 16 * j, s);
        u8x16(mn + 16 * j, m);
        for (int hr = 0; hr < 2; ++hr) {
          s[hr] = _mm256_mul_ps(d[hr], s[hr]);
          m[hr] = _mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(dmin[hr], m[hr]));
        }
        put_f(p.sw + (8 * u + j) * kPanelRows, s);
        put_f(p.mw + (8 * u + j) * kPanelRows, m);
      }
      for (int q = 0; q < 4; ++q)
        for (int kk = 0; kk < 8; ++kk)
          for (int hr = 0; hr < 2; ++hr) {
            __m256i lo, hi;
            k4_pair<std::is_same_v<F, FmtQ5_K>>(g, q, kk, hr, lo, hi);
            put(64 * u + 16 * q + kk, hr, lo);
            put(64 * u + 16 * q + 8 + kk, hr, hi);
          }
    } else {  // Q6_K
      __m256 d[2];
      f16x16(g, d);
      for (int sb = 0; sb < 16; ++sb) {
        __m256 s[2];
        i8x16(g + 32 + 16 * sb, s);
        for (int hr = 0; hr < 2; ++hr) s[hr] = _mm256_mul_ps(d[hr], s[hr]);
        put_f(p.sw + (16 * u + sb) * kPanelRows, s);
      }
      for (int h = 0; h < 2; ++h)
        for (int kk = 0; kk < 8; ++kk)
          for (int hr = 0; hr < 2; ++hr) {
            __m256i e[4];
            q6_quads(g, h, kk, hr, e);
            for (int i = 0; i < 4; ++i) put(64 * u + 32 * h + 8 * i + kk, hr, e[i]);
          }
    }
  }
}

// kPacked: the weights are packed (qpack.h; n0 and n1 multiples of 16, each panel one group).
template <class F, bool kPacked = false>
void gemm(const QAct& a, int64_t T, const void* w, size_t ldw, int64_t n0, int64_t n1,
          const float* bias, float* y, size_t ldy) {
  using G = GemmFmt<F>;
  const int64_t Kp = a.Kp, groups = Kp / G::kGroup;
  const size_t wbytes = size_t(Kp) * kPanelRows, sbytes = size_t(groups) * kPanelRows * 4,
               mbytes = F::kMin ? size_t(Kp / G::kMinGroup) * kPanelRows * 4 : 0;
  uint8_t* buf = thread_scratch(0, wbytes + sbytes + mbytes);
  const Panel p{buf, reinterpret_cast<float*>(buf + wbytes),
                reinterpret_cast<float*>(buf + wbytes + sbytes)};
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  for (int64_t n = n0; n < n1; n += kPanelRows) {
    const int rows = int(n1 - n < kPanelRows ? n1 - n : kPanelRows);
    if constexpr (kPacked)
      pack_panel_packed<F>(wb, ldw, n, Kp, a.K, p);
    else
      pack_panel<F, kPanelRows, false>(wb, ldw, n, rows, Kp, a.K, p);
    int64_t t = 0;
    for (; t + kTile <= T; t += kTile) gemm_tile<F, kTile>(p, a, t, n, rows, bias, y, ldy);
    for (; t < T; ++t) gemm_tile<F, 1>(p, a, t, n, rows, bias, y, ldy);
  }
}

}  // namespace

// This compilation's GEMM and packed GEMV entry points (qkernels.h's, for one of the two). The
// row GEMV has one variant: its vpdpbusd form was no faster from cache (one core, Zen 5, 512 x 768
// and 128 x 4096, three alternating rounds: Q4_0 0.99-1.01x, Q4_K 1.02-1.04x, Q8_0 0.90-0.94x,
// Q6_K 0.88-0.95x).
QGemvFn gemm_for(DType wt) {
  return by_format<QGemvFn>(wt, [](auto f) -> QGemvFn { return gemm<decltype(f)>; });
}
QGemvFn gemv_packed_for(DType wt) {
  return by_packed_format<QGemvFn>(wt, [](auto f) -> QGemvFn { return gemv<decltype(f), true>; });
}
QGemvFn gemm_packed_for(DType wt) {
  return by_packed_format<QGemvFn>(wt, [](auto f) -> QGemvFn { return gemm<decltype(f), true>; });
}

}  // namespace genperf::cpu::GP_QK_NS

#if !GP_QK_AVXVNNI
namespace genperf::cpu {

namespace avxvnniq {  // qkernels_avxvnni.cpp
QGemvFn gemm_for(DType wt);
QGemvFn gemv_packed_for(DType wt);
QGemvFn gemm_packed_for(DType wt);
}  // namespace avxvnniq

void quantize_act_avx2(const float* x, const QAct& a, int64_t t) { avx2q::quantize_act(x, a, t); }

QGemvFn qgemv_avx2(DType wt) {
  return avx2q::by_format<QGemvFn>(wt, [](auto f) -> QGemvFn { return avx2q::gemv<decltype(f)>; });
}
QGemvFn qgemm_avx2(DType wt, bool vnni) {
  return vnni ? avxvnniq::gemm_for(wt) : avx2q::gemm_for(wt);
}
QGemvFn qgemv_packed_avx2(DType wt, bool vnni) {
  return vnni ? avxvnniq::gemv_packed_for(wt) : avx2q::gemv_packed_for(wt);
}
QGemvFn qgemm_packed_avx2(DType wt, bool vnni) {
  return vnni ? avxvnniq::gemm_packed_for(wt) : avx2q::gemm_packed_for(wt);
}

DequantFn dequant_avx2(DType wt) {
  return avx2q::by_format<DequantFn>(wt,
                                     [](auto f) -> DequantFn { return avx2q::dequant_row<decltype(f)>; });
}

}  // namespace genperf::cpu
#endif
