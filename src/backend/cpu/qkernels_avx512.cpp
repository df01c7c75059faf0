// AVX-512 quantized-weight kernels (qkernels.h): activation quantization, the integer GEMV and
// row dequantization. Two blocks of 32 share a 512-bit register. Bytes multiply with VNNI's
// vpdpbusd (unsigned x signed, four products summed into int32 without saturation) where the CPU
// has it, else with vpmaddubsw + vpmaddwd as on AVX2. Q8_0's signed weights become unsigned by
// flipping their top bit (u = w + 128) for vpdpbusd, with 128 * s taken off the block sum; the
// AVX-512BW variant uses the sign trick instead (|w| times x with w's sign), since
// 2 * 255 * 127 would saturate vpmaddubsw. Compiled with the AVX-512 flags (CMakeLists.txt).
#if defined(__GNUC__) && !defined(__clang__)  // clang has neither the bug nor -Wmaybe-uninitialized
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "backend/cpu/qkernels.h"

namespace genperf::cpu::avx512q {
namespace {

GP_QINLINE __m256i bits_to_16(uint32_t v) {
  return _mm256_maskz_mov_epi8(__mmask32(v), _mm256_set1_epi8(0x10));
}

}  // namespace

#include "backend/cpu/qkernels_formats.inc"

namespace {

// ---------------------------------------------------------------------------------------------
// Activation quantization (qkernels.h), 16 lanes at a time; the same bits as the scalar level.

void quantize_act(const float* x, const QAct& a, int64_t t) {
  int8_t* q = a.qs + t * a.Kp;
  float* d = a.d + t * a.nb;
  int32_t* s = a.s + t * a.nb;
  int16_t* h = a.h + t * 2 * a.nb;
  float* ds = a.ds + t * a.nb;
  const int64_t full = a.K / 32;
  const __m512 fmax = _mm512_set1_ps(3.40282347e38f);
  for (int64_t b = 0; b < a.nb; ++b) {
    if (b >= full) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * b), _mm256_setzero_si256());
      d[b] = ds[b] = 0.0f;
      s[b] = h[2 * b] = h[2 * b + 1] = 0;
      continue;
    }
    const __m512 v0 = _mm512_loadu_ps(x + 32 * b), v1 = _mm512_loadu_ps(x + 32 * b + 16);
    const __m512 a0 = _mm512_abs_ps(v0), a1 = _mm512_abs_ps(v1);
    const bool finite = (_mm512_cmp_ps_mask(a0, fmax, _CMP_LE_OQ) &
                         _mm512_cmp_ps_mask(a1, fmax, _CMP_LE_OQ)) == 0xFFFF;
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
    const float id = finite && amax > 0.0f ? 127.0f / amax : 0.0f;
    __m512i q0 = _mm512_setzero_si512(), q1 = _mm512_setzero_si512();
    if (id != 0.0f) {
      q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, _mm512_set1_ps(id)));
      q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, _mm512_set1_ps(id)));
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * b), _mm512_cvtsepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * b + 16), _mm512_cvtsepi32_epi8(q1));
    const int32_t s0 = _mm512_reduce_add_epi32(q0), s1 = _mm512_reduce_add_epi32(q1);
    d[b] = finite ? amax / 127.0f : NAN;
    s[b] = s0 + s1;
    h[2 * b] = int16_t(s0);
    h[2 * b + 1] = int16_t(s1);
    ds[b] = d[b] * float(s[b]);
  }
}

// ---------------------------------------------------------------------------------------------
// Unpacking straight into 512-bit registers, two blocks per register, where a layout allows it
// in fewer instructions than the 256-bit unpacking (qkernels_formats.inc) plus a join.

// The 256-bit unpacking, blocks joined in pairs.
template <class F>
GP_QINLINE void join_unpack(const uint8_t* c, int nblk, __m512i* up) {
  __m256i u[8];
  F::unpack(c, nblk, u);
  for (int i = 0; i < 4; ++i)
    up[i] = _mm512_inserti64x4(_mm512_castsi256_si512(u[2 * i]), u[2 * i + 1], 1);
}

template <class F>
struct Wide {
  GP_QINLINE static void unpack(const uint8_t* c, int nblk, __m512i* up) {
    join_unpack<F>(c, nblk, up);
  }
  GP_QINLINE static ChunkScales scales(const uint8_t* c, int nblk) { return F::scales(c, nblk); }
};

// The f16 fields at byte offset kOff of the 8 blocks of a full chunk (kBB bytes apart), picked
// out of the chunk's first bytes with 16-bit permutes (the offsets are even): a few loads of
// bytes the kernel reads anyway instead of eight scalar inserts.
template <int kBB>
struct ChunkWords {
  static constexpr int kBytes = 7 * kBB + 4;  // through the last block's second f16 field
  __m512i z[4];
  GP_QINLINE explicit ChunkWords(const uint8_t* c) {
    for (int j = 0; j < 4; ++j) {
      const int n = kBytes - 64 * j;
      z[j] = n >= 64 ? _mm512_loadu_si512(c + 64 * j)
             : n > 0 ? _mm512_maskz_loadu_epi8(~0ull >> (64 - n), c + 64 * j)
                     : _mm512_setzero_si512();
    }
  }
  template <int kOff>
  GP_QINLINE __m256 f16s() const {
    alignas(64) static constexpr int16_t idx[32] = {
        int16_t((0 * kBB + kOff) / 2 % 64), int16_t((1 * kBB + kOff) / 2 % 64),
        int16_t((2 * kBB + kOff) / 2 % 64), int16_t((3 * kBB + kOff) / 2 % 64),
        int16_t((4 * kBB + kOff) / 2 % 64), int16_t((5 * kBB + kOff) / 2 % 64),
        int16_t((6 * kBB + kOff) / 2 % 64), int16_t((7 * kBB + kOff) / 2 % 64)};
    const __m512i iv = _mm512_load_si512(idx);
    __m512i w = _mm512_permutex2var_epi16(z[0], iv, z[1]);
    if constexpr (7 * kBB + kOff >= 128) {  // the later fields lie in bytes 128..255
      __mmask32 hi = 0;
      for (int i = 0; i < 8; ++i) hi |= __mmask32((i * kBB + kOff) >= 128) << i;
      w = _mm512_mask_mov_epi16(w, hi, _mm512_permutex2var_epi16(z[2], iv, z[3]));
    }
    return _mm256_cvtph_ps(_mm512_castsi512_si128(w));
  }
};

template <>
struct Wide<FmtQ8_0> {
  GP_QINLINE static void unpack(const uint8_t* c, int nblk, __m512i* up) {
    if (nblk < 8) return join_unpack<FmtQ8_0>(c, nblk, up);
    for (int i = 0; i < 4; ++i)
      up[i] = _mm512_inserti64x4(_mm512_castsi256_si512(loadu256(c + 2 * i * 34 + 2)),
                                 loadu256(c + (2 * i + 1) * 34 + 2), 1);
  }
  GP_QINLINE static ChunkScales scales(const uint8_t* c, int nblk) {
    if (nblk < 8) return FmtQ8_0::scales(c, nblk);
    return {ChunkWords<34>(c).f16s<0>(), _mm256_setzero_ps(), _mm_setzero_si128(),
            _mm_setzero_si128()};
  }
};

// Q4_0, Q4_1, Q5_0, Q5_1: block a's 16 bytes of nibbles in quarters 0-1, block b's in 2-3,
// shifted by 0 or 4 per quarter; fifth bits added under a byte mask.
template <int kBB, int kQs, int kQh, int kM, int kOff>
struct Wide<FmtSimple<kBB, kQs, kQh, kM, kOff>> {
  using F = FmtSimple<kBB, kQs, kQh, kM, kOff>;
  GP_QINLINE static void unpack(const uint8_t* c, int nblk, __m512i* up) {
    const __m512i shift = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
    const __m512i m4 = _mm512_set1_epi8(0x0F), b4 = _mm512_set1_epi8(0x10);
    for (int i = 0; i < 4; ++i) {
      const uint8_t* a = c + 2 * i * kBB;
      const uint8_t* b = a + kBB;
      __m512i z;
      uint64_t hb = 0;
      if (2 * i + 1 < nblk) {
        z = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(loadu128(a + kQs)), 0xFF00,
                                        loadu128(b + kQs));
        if constexpr (kQh >= 0) hb = load_u32(a + kQh) | uint64_t(load_u32(b + kQh)) << 32;
      } else if (2 * i < nblk) {
        z = _mm512_maskz_broadcast_i32x4(0x00FF, loadu128(a + kQs));
        if constexpr (kQh >= 0) hb = load_u32(a + kQh);
      } else {
        z = _mm512_setzero_si512();
      }
      up[i] = _mm512_and_si512(_mm512_srlv_epi64(z, shift), m4);
      if constexpr (kQh >= 0) up[i] = _mm512_mask_add_epi8(up[i], __mmask64(hb), up[i], b4);
    }
  }
  GP_QINLINE static ChunkScales scales(const uint8_t* c, int nblk) {
    if (nblk < 8) return F::scales(c, nblk);
    const ChunkWords<kBB> cw(c);
    ChunkScales s{cw.template f16s<0>(), _mm256_setzero_ps(), _mm_setzero_si128(),
                  _mm_setzero_si128()};
    if constexpr (kM >= 0) s.mw = cw.template f16s<kM>();
    return s;
  }
};

// Q4_K, Q5_K: 32 bytes of nibbles are blocks 2p (low) and 2p+1 (high): one broadcast, a shift
// of the upper half, a mask; fifth bits tested per half with bit 2p and 2p+1 of qh.
template <bool kFifth>
struct Wide<FmtK4<kFifth>> {
  using F = FmtK4<kFifth>;
  GP_QINLINE static void unpack(const uint8_t* c, int, __m512i* up) {
    const __m512i shift = _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i qh = _mm512_setzero_si512();
    if constexpr (kFifth) qh = _mm512_broadcast_i64x4(loadu256(c + F::kQh));
    for (int p = 0; p < 4; ++p) {
      const __m512i z = _mm512_broadcast_i64x4(loadu256(c + F::kQs + 32 * p));
      up[p] = _mm512_and_si512(_mm512_srlv_epi64(z, shift), m4);
      if constexpr (kFifth) {
        const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8(char(1 << (2 * p))),
                                               _mm256_set1_epi8(char(2 << (2 * p))), 1);
        up[p] = _mm512_mask_add_epi8(up[p], _mm512_test_epi8_mask(qh, bit), up[p],
                                     _mm512_set1_epi8(0x10));
      }
    }
  }
  // The same values as F::scales: the 8 scales and 8 mins converted in one register and
  // multiplied by (d x 8, -dmin x 8) from one conversion of the two halves.
  GP_QINLINE static ChunkScales scales(const uint8_t* c, int) {
    const __m512 smf = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(scales_mins_k4(c + 4)));
    const __m128 dd = _mm_cvtph_ps(_mm_cvtsi32_si128(int(load_u32(c))));  // d, dmin, 0, 0
    const __m512 mul = _mm512_xor_ps(
        _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                              _mm512_castps128_ps512(dd)),
        _mm512_castsi512_ps(_mm512_inserti64x4(_mm512_setzero_si512(),
                                               _mm256_set1_epi32(int(0x80000000u)), 1)));
    const __m512 f = _mm512_mul_ps(smf, mul);
    return {_mm512_castps512_ps256(f), _mm512_extractf32x8_ps(f, 1), _mm_setzero_si128(),
            _mm_setzero_si128()};
  }
};

// Q6_K: per half of 128, ql[0..63] is one register (blocks 0 and 1 of the half take its low
// nibbles, 2 and 3 its high ones) and qh[0..31] fills both halves of another, shifted per half
// so that the right bit pair lands in bits 4-5.
template <>
struct Wide<FmtQ6_K> {
  GP_QINLINE static void unpack(const uint8_t* c, int, __m512i* up) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x30);
    for (int h = 0; h < 2; ++h) {
      const __m512i l = _mm512_loadu_si512(c + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(loadu256(c + 128 + 32 * h));
      const __m512i lo_bits = _mm512_sllv_epi64(qh, _mm512_setr_epi64(4, 4, 4, 4, 2, 2, 2, 2));
      const __m512i hi_bits = _mm512_srlv_epi64(qh, _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2));
      // a | (b & m2) in one ternary-logic op (truth table 0xF8 over a, b, m2).
      up[2 * h] = _mm512_ternarylogic_epi64(_mm512_and_si512(l, m4), lo_bits, m2, 0xF8);
      up[2 * h + 1] = _mm512_ternarylogic_epi64(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                                hi_bits, m2, 0xF8);
    }
  }
  GP_QINLINE static ChunkScales scales(const uint8_t* c, int nblk) {
    return FmtQ6_K::scales(c, nblk);
  }
};

// Q2_K, Q3_K: per half of 128, qs[0..31] fills both halves of a register, shifted per 64-bit
// lane by 0 | 2 (blocks 4h, 4h + 1) and 4 | 6 (4h + 2, 4h + 3); Q3_K's third bits (bit i of
// hmask[l] for block i) added under a byte mask, as Q5_K's fifth bits.
template <bool kThird>
struct Wide<FmtK2<kThird>> {
  using F = FmtK2<kThird>;
  GP_QINLINE static void unpack(const uint8_t* c, int, __m512i* up) {
    const __m512i m2 = _mm512_set1_epi8(3);
    const __m512i s0 = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2);
    const __m512i s1 = _mm512_setr_epi64(4, 4, 4, 4, 6, 6, 6, 6);
    __m512i hm = _mm512_setzero_si512();
    if constexpr (kThird) hm = _mm512_broadcast_i64x4(loadu256(c));
    for (int h = 0; h < 2; ++h) {
      const __m512i z = _mm512_broadcast_i64x4(loadu256(c + F::kQs + 32 * h));
      up[2 * h] = _mm512_and_si512(_mm512_srlv_epi64(z, s0), m2);
      up[2 * h + 1] = _mm512_and_si512(_mm512_srlv_epi64(z, s1), m2);
    }
    if constexpr (kThird) {
      for (int p = 0; p < 4; ++p) {  // blocks 2p and 2p + 1
        const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8(char(1 << (2 * p))),
                                               _mm256_set1_epi8(char(2 << (2 * p))), 1);
        up[p] = _mm512_mask_add_epi8(up[p], _mm512_test_epi8_mask(hm, bit), up[p],
                                     _mm512_set1_epi8(4));
      }
    }
  }
  GP_QINLINE static ChunkScales scales(const uint8_t* c, int nblk) { return F::scales(c, nblk); }
};

// ---------------------------------------------------------------------------------------------
// GEMV. Per weight row, chunk by chunk: unpack 8 blocks into 4 registers, then per activation
// row 4 byte products (16 int32 lanes: 8 per block) reduce to the 8 block sums in one 256-bit
// vector, offsets and the sub-block scales (Q2_K, Q3_K, Q6_K) apply in int32, one FMA scales
// them into f32 (a second one adds the mins).
// Rows are read one after another, a single sequential stream per thread, which the hardware
// prefetcher follows: software prefetches 512 to 2048 bytes ahead were slower (0.65x to 0.95x,
// Zen 5 core, 11008 x 4096 from memory).

// 4 vectors of two blocks each -> the 8 block sums in order.
GP_QINLINE __m256i reduce8(const __m512i* p) {
  // Gather the 128-bit quarters of blocks 0-3 (4-7) into one vector, a block per quarter.
  const __m512i s01 = _mm512_add_epi32(_mm512_shuffle_i64x2(p[0], p[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                       _mm512_shuffle_i64x2(p[0], p[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i s23 = _mm512_add_epi32(_mm512_shuffle_i64x2(p[2], p[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                       _mm512_shuffle_i64x2(p[2], p[3], _MM_SHUFFLE(3, 1, 3, 1)));
  // Quarter k: [block k, block 4+k, ...] after two interleaving adds.
  const __m512i u =
      _mm512_add_epi32(_mm512_unpacklo_epi32(s01, s23), _mm512_unpackhi_epi32(s01, s23));
  const __m512i v = _mm512_add_epi32(u, _mm512_shuffle_epi32(u, _MM_PERM_BADC));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, v));
}

// 4 vectors of two blocks each -> the 16 half-block sums, lane 4k + i holding half-block 4i + k
// (a 4 x 4 transpose of quarters).
GP_QINLINE __m512i reduce16(const __m512i* p) {
  const __m512i u0 =
      _mm512_add_epi32(_mm512_unpacklo_epi32(p[0], p[1]), _mm512_unpackhi_epi32(p[0], p[1]));
  const __m512i u1 =
      _mm512_add_epi32(_mm512_unpacklo_epi32(p[2], p[3]), _mm512_unpackhi_epi32(p[2], p[3]));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(u0, u1), _mm512_unpackhi_epi64(u0, u1));
}

// acc plus the products of unsigned bytes u and signed bytes x, summed per 4 into int32 lanes:
// vpdpbusd, or without VNNI vpmaddubsw then vpmaddwd (exact while the pair sums of vpmaddubsw
// stay below 2^15, which each caller's range of u guarantees).
template <bool kVnni>
GP_QINLINE __m512i dot4(__m512i acc, __m512i u, __m512i x) {
  if constexpr (kVnni)
    return _mm512_dpbusd_epi32(acc, u, x);
  else
    return _mm512_add_epi32(acc,
                            _mm512_madd_epi16(_mm512_maddubs_epi16(u, x), _mm512_set1_epi16(1)));
}

template <class F, bool kVnni>
GP_QINLINE __m256i block_sums(const __m512i* up, const int8_t* xq, const int32_t* xs,
                              const int16_t* xh, const ChunkScales& sc) {
  constexpr bool kFlip = F::kSigned && kVnni;  // Q8_0 on VNNI: u = w + 128
  __m512i p[4];
  for (int i = 0; i < 4; ++i) {
    const __m512i xv = _mm512_loadu_si512(xq + 64 * i);
    __m512i uv = up[i], xs8 = xv;
    if constexpr (kFlip) {
      uv = _mm512_xor_si512(uv, _mm512_set1_epi8(char(0x80)));
    } else if constexpr (F::kSigned) {  // without VNNI: |w| against x with w's sign
      xs8 = _mm512_mask_sub_epi8(xv, _mm512_movepi8_mask(uv), _mm512_setzero_si512(), xv);
      uv = _mm512_abs_epi8(uv);
    }
    p[i] = dot4<kVnni>(_mm512_setzero_si512(), uv, xs8);
  }
  __m256i r;
  if constexpr (F::kHalfScales) {
    const __m512i tr = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512i scl = _mm512_permutexvar_epi32(tr, _mm512_cvtepi8_epi32(sc.sc16));
    const __m512i t = _mm512_mullo_epi32(reduce16(p), scl);
    // Quarters 0+1 hold blocks 0 2 4 6, quarters 2+3 blocks 1 3 5 7.
    const __m512i u = _mm512_add_epi32(t, _mm512_shuffle_i64x2(t, t, _MM_SHUFFLE(2, 3, 0, 1)));
    const __m512i order = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 0, 0, 0, 0, 0, 0, 0, 0);
    r = _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, u));
    if constexpr (F::kOffset != 0) {  // - offset * (sc_2i h_2i + sc_2i+1 h_2i+1) per block i
      const __m256i c = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc.sc16), loadu256(xh));
      r = _mm256_sub_epi32(r, _mm256_slli_epi32(c, offset_shift(F::kOffset)));
    }
  } else {
    r = reduce8(p);
    constexpr int kOffset = kFlip ? 128 : F::kOffset;
    if constexpr (kOffset != 0)
      r = _mm256_sub_epi32(r, _mm256_slli_epi32(loadu256(xs), offset_shift(kOffset)));
  }
  return r;
}

GP_QINLINE float hsum(__m256 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The sum of a 512-bit and a 256-bit accumulator: its halves added first, then hsum.
GP_QINLINE float hsum(__m512 a, __m256 b) {
  const __m256 a2 = _mm256_add_ps(_mm512_castps512_ps256(a),
                                  _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
  return hsum(_mm256_add_ps(a2, b));
}

template <class F, bool kVnni, int TT>
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
      __m512i up[4];
      ChunkScales sc;
      if (nblk == 8) {
        Wide<F>::unpack(c, 8, up);
        sc = Wide<F>::scales(c, 8);
      } else {
        Wide<F>::unpack(c, nblk, up);
        sc = Wide<F>::scales(c, nblk);
      }
      for (int t = 0; t < TT; ++t) {
        const int64_t r = t0 + t, bi = r * a.nb + 8 * ci;
        const __m256i isum =
            block_sums<F, kVnni>(up, a.qs + r * a.Kp + 256 * ci, a.s + bi, a.h + 2 * bi, sc);
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

// Q4_0 and Q4_1 (nibbles without fifth bits): the 16 bytes of 4 blocks load into one register
// as stored; its low nibbles (elements 0..15 of each block, a block per 128-bit quarter) and its
// high nibbles (16..31) take the activation bytes in the same order, prepared once per call:
// per 4 blocks, x[0..15] of each block, x[16..31] of each block, and -offset * s in the first
// lane of each quarter (the starting value of the int32 sums, so these stay the exact block
// sums). Each quarter then holds one block in 4 int32 lanes, scaled per lane in f32: no
// reduction across lanes per chunk (the general path's reduce8), and 3 instructions of unpacking
// per 4 blocks. Q4_0, T = 1, weights in L2 (512 x 768 / 128 x 4096), thread CPU time on one
// core of a shared 2-core Zen 5 VM: 30 / 35 GB/s before, 43 / 45 after.
template <class F>
constexpr bool kNibbleOrder = false;
template <int kBB, int kQs, int kM, int kOff>
constexpr bool kNibbleOrder<FmtSimple<kBB, kQs, -1, kM, kOff>> = true;

// Bytes of the prepared activation per row: 3 x 64 per 4 blocks.
GP_QINLINE int64_t xnib_bytes(const QAct& a) { return a.Kp / 128 * 192; }

template <class F>
void prepare_xnib(const QAct& a, int64_t t, uint8_t* out) {
  const int8_t* q = a.qs + t * a.Kp;
  const int32_t* s = a.s + t * a.nb;
  const __m512i first = _mm512_setr_epi32(0, -1, -1, -1, 1, -1, -1, -1, 2, -1, -1, -1, 3, -1, -1, -1);
  for (int64_t g = 0; g < a.Kp / 128; ++g, out += 192, q += 128, s += 4) {
    const __m512i x0 = _mm512_loadu_si512(q), x1 = _mm512_loadu_si512(q + 64);
    _mm512_store_si512(out, _mm512_shuffle_i64x2(x0, x1, _MM_SHUFFLE(2, 0, 2, 0)));
    _mm512_store_si512(out + 64, _mm512_shuffle_i64x2(x0, x1, _MM_SHUFFLE(3, 1, 3, 1)));
    __m512i init = _mm512_setzero_si512();
    if constexpr (F::kOffset != 0) {
      constexpr int kShift = F::kOffset == 8 ? 3 : 4;
      const __m512i sv = _mm512_maskz_permutexvar_epi32(
          0x1111, first, _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s))));
      init = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sv, kShift));
    }
    _mm512_store_si512(out + 128, init);
  }
}

template <class F, bool kVnni, int TT>
void gemv_rows_nib(const QAct& a, int64_t t0, const uint8_t* xnib, const uint8_t* w, size_t ldw,
                   int64_t n0, int64_t n1, const float* bias, float* y, size_t ldy) {
  constexpr int kBB = int(F::kChunkBytes / 8);
  constexpr int kQs = kBB == 18 ? 2 : 4;
  const int64_t blocks = a.K / 32, full = blocks / 8, chunks = (blocks + 7) / 8;
  const int64_t xb = xnib_bytes(a);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i e0 = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  const __m512i e1 = _mm512_add_epi32(e0, _mm512_set1_epi32(4));
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = w + size_t(n) * ldw;
    __m512 acc[TT];
    __m256 acc8[TT];
    for (int t = 0; t < TT; ++t) {
      acc[t] = _mm512_setzero_ps();
      acc8[t] = _mm256_setzero_ps();
    }
    for (int64_t ci = 0; ci < full; ++ci) {
      const uint8_t* c = row + ci * F::kChunkBytes;
      __m512i lo[2], hi[2];
      for (int g = 0; g < 2; ++g) {
        const uint8_t* b = c + 4 * g * kBB + kQs;
        __m512i z = _mm512_castsi128_si512(loadu128(b));
        z = _mm512_inserti32x4(z, loadu128(b + kBB), 1);
        z = _mm512_inserti32x4(z, loadu128(b + 2 * kBB), 2);
        z = _mm512_inserti32x4(z, loadu128(b + 3 * kBB), 3);
        lo[g] = _mm512_and_si512(z, m4);
        hi[g] = _mm512_and_si512(_mm512_srli_epi16(z, 4), m4);
      }
      const ChunkScales sc = Wide<F>::scales(c, 8);
      for (int t = 0; t < TT; ++t) {
        const int64_t bi = (t0 + t) * a.nb + 8 * ci;
        const uint8_t* xp = xnib + t * xb + ci * 384;
        const __m256 s8 = _mm256_mul_ps(sc.dw, _mm256_loadu_ps(a.d + bi));
        for (int g = 0; g < 2; ++g) {
          const __m512i xl = _mm512_load_si512(xp + 192 * g),
                        xh = _mm512_load_si512(xp + 192 * g + 64),
                        init = _mm512_load_si512(xp + 192 * g + 128);
          __m512i p;
          if constexpr (kVnni) {
            p = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(init, lo[g], xl), hi[g], xh);
          } else {
            const __m512i one = _mm512_set1_epi16(1);
            p = _mm512_add_epi32(
                init, _mm512_madd_epi16(_mm512_add_epi16(_mm512_maddubs_epi16(lo[g], xl),
                                                         _mm512_maddubs_epi16(hi[g], xh)),
                                        one));
          }
          const __m512 sg = _mm512_permutexvar_ps(g ? e1 : e0, _mm512_castps256_ps512(s8));
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), sg, acc[t]);
        }
        if constexpr (F::kMin) acc8[t] = _mm256_fmadd_ps(sc.mw, _mm256_loadu_ps(a.ds + bi), acc8[t]);
      }
    }
    if (full < chunks) {  // the last, partial chunk: the general path
      const uint8_t* c = row + full * F::kChunkBytes;
      const int nblk = int(blocks - 8 * full);
      __m512i up[4];
      Wide<F>::unpack(c, nblk, up);
      const ChunkScales sc = Wide<F>::scales(c, nblk);
      for (int t = 0; t < TT; ++t) {
        const int64_t r = t0 + t, bi = r * a.nb + 8 * full;
        const __m256i isum =
            block_sums<F, kVnni>(up, a.qs + r * a.Kp + 256 * full, a.s + bi, a.h + 2 * bi, sc);
        acc8[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum),
                                  _mm256_mul_ps(sc.dw, _mm256_loadu_ps(a.d + bi)), acc8[t]);
        if constexpr (F::kMin)
          acc8[t] = _mm256_fmadd_ps(sc.mw, _mm256_loadu_ps(a.ds + bi), acc8[t]);
      }
    }
    for (int t = 0; t < TT; ++t)
      y[size_t(t0 + t) * ldy + size_t(n)] = hsum(acc[t], acc8[t]) + (bias ? bias[n] : 0.0f);
  }
}

// Q4_K and Q5_K the same way: 64 bytes of nibbles load as stored, their low nibbles are blocks
// 4q and 4q + 2 and their high nibbles blocks 4q + 1 and 4q + 3 (q = 0, 1), against the
// activation bytes prepared once per call in that order (per 4 blocks: x of blocks 0 and 2,
// then of 1 and 3). Two 128-bit shuffles and an add fold each pair of products into one
// register with a block per quarter in 4 lanes, scaled per lane in f32 (the K-quants have no
// offset: the int32 lanes sum to the exact block sums). Measured as for Q4_0: Q4_K 27 / 32 ->
// 31 / 35 GB/s, Q5_K 24 -> 31 GB/s (512 x 768). What remains is mostly the per-chunk scale
// decoding: with constant scales Q4_K ran at 49 GB/s.
template <class F>
constexpr bool kK4Order = false;
template <bool kFifth>
constexpr bool kK4Order<FmtK4<kFifth>> = true;

GP_QINLINE int64_t xk4_bytes(const QAct& a) { return a.Kp; }

void prepare_xk4(const QAct& a, int64_t t, uint8_t* out) {
  const int8_t* q = a.qs + t * a.Kp;
  for (int64_t g = 0; g < a.Kp / 128; ++g, out += 128, q += 128) {
    const __m512i x0 = _mm512_loadu_si512(q), x1 = _mm512_loadu_si512(q + 64);
    _mm512_store_si512(out, _mm512_shuffle_i64x2(x0, x1, _MM_SHUFFLE(1, 0, 1, 0)));
    _mm512_store_si512(out + 64, _mm512_shuffle_i64x2(x0, x1, _MM_SHUFFLE(3, 2, 3, 2)));
  }
}

template <class F, bool kVnni, int TT>
void gemv_rows_k4(const QAct& a, int64_t t0, const uint8_t* xk, const uint8_t* w, size_t ldw,
                  int64_t n0, int64_t n1, const float* bias, float* y, size_t ldy) {
  const int64_t chunks = a.K / 256, xb = xk4_bytes(a);
  const __m512i m4 = _mm512_set1_epi8(0x0F), b4 = _mm512_set1_epi8(0x10);
  // Lane -> block of the folded sums, per q: quarters hold blocks 4q, 4q + 2, 4q + 1, 4q + 3.
  const __m512i e0 = _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 1, 1, 1, 1, 3, 3, 3, 3);
  const __m512i e1 = _mm512_add_epi32(e0, _mm512_set1_epi32(4));
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = w + size_t(n) * ldw;
    __m512 acc[TT];
    __m256 acc8[TT];
    for (int t = 0; t < TT; ++t) {
      acc[t] = _mm512_setzero_ps();
      acc8[t] = _mm256_setzero_ps();
    }
    for (int64_t ci = 0; ci < chunks; ++ci) {
      const uint8_t* c = row + ci * F::kChunkBytes;
      __m512i lo[2], hi[2];
      __m512i qh = _mm512_setzero_si512();
      if constexpr (F::kQs != F::kQh) qh = _mm512_broadcast_i64x4(loadu256(c + F::kQh));
      for (int q = 0; q < 2; ++q) {
        const __m512i z = _mm512_loadu_si512(c + F::kQs + 64 * q);
        lo[q] = _mm512_and_si512(z, m4);
        hi[q] = _mm512_and_si512(_mm512_srli_epi16(z, 4), m4);
        if constexpr (F::kQs != F::kQh) {  // Q5_K: bit b of qh[l] is the fifth bit of block b
          const __m512i bl = _mm512_inserti64x4(_mm512_set1_epi8(char(1 << (4 * q))),
                                                _mm256_set1_epi8(char(4 << (4 * q))), 1);
          const __m512i bh = _mm512_inserti64x4(_mm512_set1_epi8(char(2 << (4 * q))),
                                                _mm256_set1_epi8(char(8 << (4 * q))), 1);
          lo[q] = _mm512_mask_add_epi8(lo[q], _mm512_test_epi8_mask(qh, bl), lo[q], b4);
          hi[q] = _mm512_mask_add_epi8(hi[q], _mm512_test_epi8_mask(qh, bh), hi[q], b4);
        }
      }
      const ChunkScales sc = Wide<F>::scales(c, 8);
      for (int t = 0; t < TT; ++t) {
        const int64_t bi = (t0 + t) * a.nb + 8 * ci;
        const uint8_t* xp = xk + t * xb + ci * 256;
        const __m256 s8 = _mm256_mul_ps(sc.dw, _mm256_loadu_ps(a.d + bi));
        for (int q = 0; q < 2; ++q) {
          const __m512i xa = _mm512_load_si512(xp + 128 * q), xh = _mm512_load_si512(xp + 128 * q + 64);
          const __m512i pa = dot4<kVnni>(_mm512_setzero_si512(), lo[q], xa),
                        pb = dot4<kVnni>(_mm512_setzero_si512(), hi[q], xh);
          const __m512i f = _mm512_add_epi32(_mm512_shuffle_i64x2(pa, pb, _MM_SHUFFLE(2, 0, 2, 0)),
                                             _mm512_shuffle_i64x2(pa, pb, _MM_SHUFFLE(3, 1, 3, 1)));
          const __m512 sq = _mm512_permutexvar_ps(q ? e1 : e0, _mm512_castps256_ps512(s8));
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(f), sq, acc[t]);
        }
        acc8[t] = _mm256_fmadd_ps(sc.mw, _mm256_loadu_ps(a.ds + bi), acc8[t]);
      }
    }
    for (int t = 0; t < TT; ++t)
      y[size_t(t0 + t) * ldy + size_t(n)] = hsum(acc[t], acc8[t]) + (bias ? bias[n] : 0.0f);
  }
}

template <class F, bool kVnni>
void gemv(const QAct& a, int64_t T, const void* w, size_t ldw, int64_t n0, int64_t n1,
          const float* bias, float* y, size_t ldy) {
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  if constexpr (kK4Order<F>) {
    const int64_t xb = xk4_bytes(a);
    uint8_t* xn = thread_scratch(1, size_t(xb * T));
    for (int64_t t = 0; t < T; ++t) prepare_xk4(a, t, xn + t * xb);
    by_row_groups(T, [&](auto tt, int64_t t) {
      gemv_rows_k4<F, kVnni, decltype(tt)::value>(a, t, xn + t * xb, wb, ldw, n0, n1, bias, y, ldy);
    });
    return;
  }
  if constexpr (kNibbleOrder<F>) {
    const int64_t xb = xnib_bytes(a);
    uint8_t* xn = thread_scratch(1, size_t(xb * T));
    for (int64_t t = 0; t < T; ++t) prepare_xnib<F>(a, t, xn + t * xb);
    by_row_groups(T, [&](auto tt, int64_t t) {
      gemv_rows_nib<F, kVnni, decltype(tt)::value>(a, t, xn + t * xb, wb, ldw, n0, n1, bias, y, ldy);
    });
    return;
  }
  by_row_groups(T, [&](auto tt, int64_t t) {
    gemv_rows<F, kVnni, decltype(tt)::value>(a, t, wb, ldw, n0, n1, bias, y, ldy);
  });
}

// ---------------------------------------------------------------------------------------------
// Row dequantization straight to bf16 (the decoded panels of the prefill GEMM), 16 elements per
// step: the f32 values of dequant_row, rounded to nearest even by the AVX512-BF16 instruction.
template <class F>
void dequant_bf16(const void* src, uint16_t* dst, int64_t n) {
  const uint8_t* c = static_cast<const uint8_t*>(src);
  const int64_t blocks = n / 32;
  for (int64_t b0 = 0; b0 < blocks; b0 += 8, c += F::kChunkBytes, dst += 256) {
    const int nblk = int(blocks - b0 < 8 ? blocks - b0 : 8);
    __m512i up[4];
    ChunkScales s;
    if (nblk == 8) {
      Wide<F>::unpack(c, 8, up);
      s = Wide<F>::scales(c, 8);
    } else {
      Wide<F>::unpack(c, nblk, up);
      s = Wide<F>::scales(c, nblk);
    }
    // Scale and min of each group of 16 (the sub-blocks of Q2_K, Q3_K and Q6_K; half a block of
    // the others).
    alignas(64) float a[16], m[16];
    if constexpr (F::kHalfScales) {
      _mm512_store_ps(a, _mm512_mul_ps(_mm512_broadcastss_ps(_mm256_castps256_ps128(s.dw)),
                                       _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(s.sc16))));
      if constexpr (F::kMin)
        _mm512_store_ps(m, _mm512_mul_ps(_mm512_broadcastss_ps(_mm256_castps256_ps128(s.mw)),
                                         _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(s.mn16))));
    } else {
      const __m512i twice = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
      _mm512_store_ps(a, _mm512_permutexvar_ps(twice, _mm512_castps256_ps512(s.dw)));
      _mm512_store_ps(m, _mm512_permutexvar_ps(twice, _mm512_castps256_ps512(s.mw)));
    }
    for (int g = 0; g < 2 * nblk; ++g) {
      __m128i b;
      switch (g % 4) {
        case 0: b = _mm512_extracti32x4_epi32(up[g / 4], 0); break;
        case 1: b = _mm512_extracti32x4_epi32(up[g / 4], 1); break;
        case 2: b = _mm512_extracti32x4_epi32(up[g / 4], 2); break;
        default: b = _mm512_extracti32x4_epi32(up[g / 4], 3); break;
      }
      __m512i q = F::kSigned ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b);
      if constexpr (F::kOffset != 0) q = _mm512_sub_epi32(q, _mm512_set1_epi32(F::kOffset));
      __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(a[g]));
      if constexpr (F::kMin) v = _mm512_add_ps(v, _mm512_set1_ps(m[g]));
      const __m256bh h = _mm512_cvtneps_pbh(v);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 16 * g),
                          reinterpret_cast<const __m256i&>(h));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Integer GEMM (prefill, many activation rows). The GEMV above unpacks every weight block once
// per group of 4 rows and reduces each product to block sums across lanes; here a panel of 32
// weight rows is unpacked once into a lane-per-row layout and reused by every activation row
// (pack_panel, qkernels_formats.inc; from packed weights pack_panel_packed, below).
// A tile of 2 x 16 rows by TT activation rows keeps 2 * TT int32 accumulators: per 4 k, one load
// of the activation's 4 bytes broadcast to all lanes and one vpdpbusd per 16 rows (no
// reduction across lanes). Each scale group starts its int32 sums at -offset * s (Q4_0 8 s,
// Q5_0 16 s, Q8_0 128 s for its flipped sign bit, Q3_K 4 h_j, Q6_K 32 h_j), so they are the
// exact integer block sums of the scalar level, and ends with one convert and one FMA by sw * dx.

constexpr int kPanelRows = 32;

template <class F, bool kVnni>
struct GemmFmt : PanelFmt<F> {
  static constexpr bool kFlip = F::kSigned;  // Q8_0: u = w + 128 (VNNI only)
  // offset = s << kShift (h << kShift for kHalfScales); -1: none
  static constexpr int kShift = kFlip ? 7 : F::kOffset != 0 ? offset_shift(F::kOffset) : -1;
};

// The vector policy of begin_group and end_group (qkernels_formats.inc): 16 lanes.
struct QV {
  using Ri = __m512i;
  using Rf = __m512;
  static constexpr int kLanes = 16;
  static GP_QINLINE Rf load(const float* p) { return _mm512_load_ps(p); }
  static GP_QINLINE Rf set1(float v) { return _mm512_set1_ps(v); }
  static GP_QINLINE Ri set1i(int32_t v) { return _mm512_set1_epi32(v); }
  static GP_QINLINE Rf fma(Rf a, Rf b, Rf c) { return _mm512_fmadd_ps(a, b, c); }
  static GP_QINLINE Rf mul(Rf a, Rf b) { return _mm512_mul_ps(a, b); }
  static GP_QINLINE Rf cvt(Ri a) { return _mm512_cvtepi32_ps(a); }
};

// Rows [t0, t0 + TT) of a against the panel; y gets columns [n, n + rows).
template <class F, bool kVnni, int TT>
GP_QINLINE void gemm_tile(const Panel& p, const QAct& a, int64_t t0, int64_t n, int rows,
                          const float* bias, float* y, size_t ldy) {
  using G = GemmFmt<F, kVnni>;
  constexpr int kSteps = G::kGroup / 4;
  const int64_t groups = a.Kp / G::kGroup;
  __m512 acc[2][TT];
  for (int t = 0; t < TT; ++t) acc[0][t] = acc[1][t] = _mm512_setzero_ps();
  const int8_t* xq[TT];
  for (int t = 0; t < TT; ++t) xq[t] = a.qs + (t0 + t) * a.Kp;
  const uint8_t* wp = p.w;
  for (int64_t g = 0; g < groups; ++g) {
    __m512i ia[2][TT];
    begin_group<QV, F, G::kShift, TT>(a, t0, g, ia);
    for (int s = 0; s < kSteps; ++s, wp += 4 * kPanelRows) {
      const __m512i w0 = _mm512_load_si512(wp), w1 = _mm512_load_si512(wp + 64);
      for (int t = 0; t < TT; ++t) {
        int32_t xv;
        memcpy(&xv, xq[t] + g * G::kGroup + 4 * s, 4);
        const __m512i xb = _mm512_set1_epi32(xv);
        ia[0][t] = dot4<kVnni>(ia[0][t], w0, xb);  // u <= 63: no saturation without VNNI
        ia[1][t] = dot4<kVnni>(ia[1][t], w1, xb);
      }
    }
    end_group<QV, F, TT>(p, a, t0, g, ia, acc);
  }
  const __mmask16 k0 = __mmask16(rows >= 16 ? 0xFFFF : (1u << rows) - 1),
                  k1 = __mmask16(rows >= 32 ? 0xFFFF : rows <= 16 ? 0 : (1u << (rows - 16)) - 1);
  __m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
  if (bias) {
    b0 = _mm512_maskz_loadu_ps(k0, bias + n);
    b1 = _mm512_maskz_loadu_ps(k1, bias + n + 16);
  }
  for (int t = 0; t < TT; ++t) {
    float* yr = y + size_t(t0 + t) * ldy + size_t(n);
    _mm512_mask_storeu_ps(yr, k0, _mm512_add_ps(acc[0][t], b0));
    _mm512_mask_storeu_ps(yr + 16, k1, _mm512_add_ps(acc[1][t], b1));
  }
}

// ---------------------------------------------------------------------------------------------
// Packed weights (qpack.h), VNNI only. Per group of 16 rows, every 64-byte load is the same 4
// bytes of the 16 rows; unpacked in registers, it meets 4 activation bytes broadcast to all lanes
// in one vpdpbusd, each lane summing its row's products. The int32 lanes are the exact sums of
// the scalar level (each chain starts at -offset * s, as the integer GEMM's do) and are scaled
// per row in f32: no reduction across lanes, no per-row work, 16 outputs stored at once.

GP_QINLINE __m512i bcast4(const int8_t* p) {
  int32_t v;
  memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}
GP_QINLINE __m512 f16x16(const uint8_t* p) { return _mm512_cvtph_ps(loadu256(p)); }
GP_QINLINE __m512i load64(const uint8_t* p) { return _mm512_loadu_si512(p); }

// Q4_K's 6-bit scales and mins of 16 rows (packed bytes 4..15 of the super-block, byte i of row
// r at 16 i + r) as bytes: sc[16 j + r], mn[16 j + r] for sub-block j (the decoding of
// scales_mins_k4, 16 rows per instruction).
GP_QINLINE void k4_scales16(const uint8_t* p, uint8_t* sc, uint8_t* mn) {
  const __m512i a = load64(p), b = load64(p + 64), c = load64(p + 128);
  const __m512i m6 = _mm512_set1_epi8(63), m4 = _mm512_set1_epi8(0x0F),
                m30 = _mm512_set1_epi8(0x30);
  _mm512_store_si512(sc, _mm512_and_si512(a, m6));
  _mm512_store_si512(mn, _mm512_and_si512(b, m6));
  // a | (b & c) as one ternary-logic op (0xF8), as in Wide<FmtQ6_K>.
  _mm512_store_si512(sc + 64, _mm512_ternarylogic_epi64(_mm512_and_si512(c, m4),
                                                        _mm512_srli_epi16(a, 2), m30, 0xF8));
  _mm512_store_si512(mn + 64,
                     _mm512_ternarylogic_epi64(_mm512_and_si512(_mm512_srli_epi16(c, 4), m4),
                                               _mm512_srli_epi16(b, 2), m30, 0xF8));
}

GP_QINLINE __m512 u8x16(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(loadu128(p)));
}
GP_QINLINE __m512 i8x16(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(loadu128(p)));
}

// The 4 Q6_K quant vectors of packed step kk of half h: elements 128h + 32i + 4kk.. (i = 0..3).
GP_QINLINE void q6_quads(const uint8_t* g, int h, int kk, __m512i* e) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  const uint8_t* piece = g + 288 + 192 * (8 * h + kk);
  const __m512i l0 = load64(piece), l1 = load64(piece + 64), qh = load64(piece + 128);
  e[0] = _mm512_ternarylogic_epi64(_mm512_and_si512(l0, m4), _mm512_slli_epi16(qh, 4), m30, 0xF8);
  e[1] = _mm512_ternarylogic_epi64(_mm512_and_si512(l1, m4), _mm512_slli_epi16(qh, 2), m30, 0xF8);
  e[2] = _mm512_ternarylogic_epi64(_mm512_and_si512(_mm512_srli_epi16(l0, 4), m4), qh, m30, 0xF8);
  e[3] = _mm512_ternarylogic_epi64(_mm512_and_si512(_mm512_srli_epi16(l1, 4), m4),
                                   _mm512_srli_epi16(qh, 2), m30, 0xF8);
}

// Q4_K (kFifth false) and Q5_K: the quants of packed step kk of sub-blocks 2p (lo) and 2p + 1
// (hi), elements 64p + 4kk.. and 64p + 32 + 4kk..; Q5_K's fifth bits are bits 2p and 2p + 1 of
// qh chunk kk, moved to bit 4 (16-bit shifts by at most 4: what crosses a byte misses bit 4).
template <bool kFifth>
GP_QINLINE void k4_pair(const uint8_t* g, int p, int kk, __m512i& lo, __m512i& hi) {
  constexpr int kQs = kFifth ? 768 : 256;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i z = load64(g + kQs + 64 * (8 * p + kk));
  lo = _mm512_and_si512(z, m4);
  hi = _mm512_and_si512(_mm512_srli_epi16(z, 4), m4);
  if constexpr (kFifth) {
    const __m512i qh = load64(g + 256 + 64 * kk), b4 = _mm512_set1_epi8(0x10);
    const auto to_bit4 = [&](int b) {
      return b <= 4 ? _mm512_slli_epi16(qh, unsigned(4 - b)) : _mm512_srli_epi16(qh, unsigned(b - 4));
    };
    lo = _mm512_ternarylogic_epi64(lo, to_bit4(2 * p), b4, 0xF8);
    hi = _mm512_ternarylogic_epi64(hi, to_bit4(2 * p + 1), b4, 0xF8);
  }
}

// acc[t] (16 rows of activation row t0 + t) += the products of packed unit g (unit index u).
template <class F, int TT>
GP_QINLINE void packed_unit(const uint8_t* g, int64_t u, const QAct& a, int64_t t0, __m512* acc) {
  const int8_t* xq[TT];
  int64_t bi[TT];  // index of the unit's first block of 32 in the activation arrays
  constexpr int kBlocks = PackedUnit<F>::kElems / 32;
  for (int t = 0; t < TT; ++t) {
    xq[t] = a.qs + (t0 + t) * a.Kp + u * PackedUnit<F>::kElems;
    bi[t] = (t0 + t) * a.nb + u * kBlocks;
  }
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  if constexpr (std::is_same_v<F, FmtQ4_0> || std::is_same_v<F, FmtQ8_0>) {
    constexpr bool kNib = std::is_same_v<F, FmtQ4_0>;
    constexpr int kSteps = kNib ? 4 : 8, kShift = kNib ? 3 : 7;  // offset 8, or 128 (flip)
    for (int b = 0; b < 2; ++b) {  // the pair's blocks
      const uint8_t* q = g + 64 + b * 64 * kSteps;
      const __m512 dw = f16x16(g + 32 * b);
      __m512i w[2 * kSteps - (kNib ? 0 : kSteps)];
      for (int k = 0; k < kSteps; ++k) {
        const __m512i z = load64(q + 64 * k);
        if constexpr (kNib) {
          w[k] = _mm512_and_si512(z, m4);
          w[kSteps + k] = _mm512_and_si512(_mm512_srli_epi16(z, 4), m4);
        } else {
          w[k] = z;
        }
      }
      for (int t = 0; t < TT; ++t) {
        // Two chains (alternate steps) for latency; elements 4k.. of the block for step k, and
        // for Q4_0's high nibbles 16 + 4k.
        const int8_t* x = xq[t] + 32 * b;
        __m512i p0 = _mm512_set1_epi32(-(a.s[bi[t] + b] << kShift)), p1 = _mm512_setzero_si512();
        for (int k = 0; k < kSteps; ++k) {
          if constexpr (kNib) {
            p0 = _mm512_dpbusd_epi32(p0, w[k], bcast4(x + 4 * k));
            p1 = _mm512_dpbusd_epi32(p1, w[kSteps + k], bcast4(x + 16 + 4 * k));
          } else if (k % 2 == 0) {
            p0 = _mm512_dpbusd_epi32(p0, w[k], bcast4(x + 4 * k));
          } else {
            p1 = _mm512_dpbusd_epi32(p1, w[k], bcast4(x + 4 * k));
          }
        }
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(p0, p1)),
                                 _mm512_mul_ps(dw, _mm512_set1_ps(a.d[bi[t] + b])), acc[t]);
      }
    }
  } else if constexpr (std::is_same_v<F, FmtQ4_K> || std::is_same_v<F, FmtQ5_K>) {
    alignas(64) uint8_t sc[128], mn[128];
    k4_scales16(g + 64, sc, mn);
    __m512 as[TT], am[TT];
    for (int t = 0; t < TT; ++t) as[t] = am[t] = _mm512_setzero_ps();
    for (int p = 0; p < 4; ++p) {  // sub-blocks 2p (low nibbles) and 2p + 1 (high)
      __m512i sl[TT], sh[TT];
      for (int t = 0; t < TT; ++t) sl[t] = sh[t] = _mm512_setzero_si512();
      for (int kk = 0; kk < 8; ++kk) {
        __m512i lo, hi;
        k4_pair<std::is_same_v<F, FmtQ5_K>>(g, p, kk, lo, hi);
        for (int t = 0; t < TT; ++t) {
          sl[t] = _mm512_dpbusd_epi32(sl[t], lo, bcast4(xq[t] + 64 * p + 4 * kk));
          sh[t] = _mm512_dpbusd_epi32(sh[t], hi, bcast4(xq[t] + 64 * p + 32 + 4 * kk));
        }
      }
      const __m512 sc0 = u8x16(sc + 32 * p), sc1 = u8x16(sc + 32 * p + 16);
      const __m512 mn0 = u8x16(mn + 32 * p), mn1 = u8x16(mn + 32 * p + 16);
      for (int t = 0; t < TT; ++t) {
        const int64_t b = bi[t] + 2 * p;
        as[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sl[t]), _mm512_mul_ps(sc0, _mm512_set1_ps(a.d[b])), as[t]);
        as[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sh[t]), _mm512_mul_ps(sc1, _mm512_set1_ps(a.d[b + 1])), as[t]);
        am[t] = _mm512_fmadd_ps(mn0, _mm512_set1_ps(a.ds[b]), am[t]);
        am[t] = _mm512_fmadd_ps(mn1, _mm512_set1_ps(a.ds[b + 1]), am[t]);
      }
    }
    const __m512 d = f16x16(g), dmin = f16x16(g + 32);
    for (int t = 0; t < TT; ++t)
      acc[t] = _mm512_fnmadd_ps(dmin, am[t], _mm512_fmadd_ps(d, as[t], acc[t]));
  } else {  // Q6_K
    __m512 as[TT];
    for (int t = 0; t < TT; ++t) as[t] = _mm512_setzero_ps();
    for (int h = 0; h < 2; ++h) {
      for (int q = 0; q < 2; ++q) {  // sub-blocks 8h + 2i + q, i = 0..3
        __m512i s[TT][4];
        for (int t = 0; t < TT; ++t) {
          const int16_t* xh = a.h + 2 * bi[t] + 8 * h + q;  // half-block sums
          for (int i = 0; i < 4; ++i) s[t][i] = _mm512_set1_epi32(-(int32_t(xh[2 * i]) << 5));
        }
        for (int kk = 4 * q; kk < 4 * q + 4; ++kk) {
          __m512i e[4];
          q6_quads(g, h, kk, e);
          for (int t = 0; t < TT; ++t)
            for (int i = 0; i < 4; ++i)
              s[t][i] = _mm512_dpbusd_epi32(s[t][i], e[i], bcast4(xq[t] + 128 * h + 32 * i + 4 * kk));
        }
        for (int i = 0; i < 4; ++i) {
          const int sb = 8 * h + 2 * i + q;
          const __m512 scf = i8x16(g + 32 + 16 * sb);
          for (int t = 0; t < TT; ++t)
            as[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t][i]),
                                    _mm512_mul_ps(scf, _mm512_set1_ps(a.d[bi[t] + sb / 2])), as[t]);
        }
      }
    }
    const __m512 d = f16x16(g);
    for (int t = 0; t < TT; ++t) acc[t] = _mm512_fmadd_ps(d, as[t], acc[t]);
  }
}

// The packed GEMV prefetches this far ahead of the unit it reads (a prefetch past the end of
// the weights is harmless). Unlike the row kernels above, whose prefetches were slower, this one
// has compute to spare: Q4_K 2048 x 768 from memory (2 threads) 29 -> 44-48 GB/s, 11008 x 4096
// 41-45 -> 70; Q8_0 and Q6_K 11008 x 4096 +15%; Q4_0 unchanged (one core: Q4_K 20 -> 32 GB/s).
// 1024 to 8192 bytes all helped; 4096 and 8192 no more than 2048.
constexpr int kPackedPrefetch = 2048;

template <class F, int TT>
void gemv_packed_rows(const QAct& a, int64_t t0, const uint8_t* w, size_t ldw, int64_t n0,
                      int64_t n1, const float* bias, float* y, size_t ldy) {
  const int64_t units = a.K / PackedUnit<F>::kElems;
  for (int64_t n = n0; n < n1; n += 16) {
    const uint8_t* g = w + size_t(n) * ldw;  // the group of rows n .. n + 15
    __m512 acc[TT];
    for (int t = 0; t < TT; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t u = 0; u < units; ++u, g += PackedUnit<F>::kBytes) {
      for (int l = 0; l < PackedUnit<F>::kBytes; l += 64)
        _mm_prefetch(reinterpret_cast<const char*>(g + kPackedPrefetch + l), _MM_HINT_T0);
      packed_unit<F, TT>(g, u, a, t0, acc);
    }
    const __m512 b = bias ? _mm512_loadu_ps(bias + n) : _mm512_setzero_ps();
    for (int t = 0; t < TT; ++t) _mm512_storeu_ps(y + size_t(t0 + t) * ldy + size_t(n), _mm512_add_ps(acc[t], b));
  }
}

template <class F>
void gemv_packed(const QAct& a, int64_t T, const void* w, size_t ldw, int64_t n0, int64_t n1,
                 const float* bias, float* y, size_t ldy) {
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  by_row_groups(T, [&](auto tt, int64_t t) {
    gemv_packed_rows<F, decltype(tt)::value>(a, t, wb, ldw, n0, n1, bias, y, ldy);
  });
}

// The integer GEMM's panel (32 rows; rows 16..31 zero when rows = 16) from packed weights: the
// same unpacking as the GEMV, stored per 4-element step instead of multiplied. Far cheaper than
// pack_panel's per-row gathering, since the packed groups are lane-per-row already.
template <class F>
void pack_panel_packed(const uint8_t* w, size_t ldw, int64_t n, int rows, int64_t Kp, int64_t K,
                       const Panel& p) {
  using G = GemmFmt<F, true>;
  constexpr int kE = PackedUnit<F>::kElems;
  const int64_t units = K / kE;
  if (rows < kPanelRows || K < Kp) {
    memset(p.w, 0, size_t(Kp) * kPanelRows);
    memset(p.sw, 0, size_t(Kp / G::kGroup) * kPanelRows * 4);
    if constexpr (F::kMin) memset(p.mw, 0, size_t(Kp / G::kMinGroup) * kPanelRows * 4);
  }
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const auto put = [&](int64_t step, int gi, __m512i v) {
    _mm512_store_si512(p.w + step * 4 * kPanelRows + 64 * gi, v);
  };
  for (int gi = 0; gi < rows / 16; ++gi) {
    const uint8_t* g = w + size_t(n + 16 * gi) * ldw;
    float* sw = p.sw + 16 * gi;
    for (int64_t u = 0; u < units; ++u, g += PackedUnit<F>::kBytes) {
      if constexpr (std::is_same_v<F, FmtQ4_0> || std::is_same_v<F, FmtQ8_0>) {
        for (int b = 0; b < 2; ++b) {  // block 2u + b
          const int64_t blk = 2 * u + b;
          _mm512_store_ps(sw + blk * kPanelRows, f16x16(g + 32 * b));
          if constexpr (std::is_same_v<F, FmtQ4_0>) {
            for (int k = 0; k < 4; ++k) {
              const __m512i z = load64(g + 64 + 256 * b + 64 * k);
              put(8 * blk + k, gi, _mm512_and_si512(z, m4));
              put(8 * blk + 4 + k, gi, _mm512_and_si512(_mm512_srli_epi16(z, 4), m4));
            }
          } else {
            for (int k = 0; k < 8; ++k) put(8 * blk + k, gi, load64(g + 64 + 512 * b + 64 * k));
          }
        }
      } else if constexpr (std::is_same_v<F, FmtQ4_K> || std::is_same_v<F, FmtQ5_K>) {
        alignas(64) uint8_t sc[128], mn[128];
        k4_scales16(g + 64, sc, mn);
        const __m512 d = f16x16(g), ndmin = _mm512_sub_ps(_mm512_setzero_ps(), f16x16(g + 32));
        for (int j = 0; j < 8; ++j) {
          _mm512_store_ps(sw + (8 * u + j) * kPanelRows, _mm512_mul_ps(d, u8x16(sc + 16 * j)));
          _mm512_store_ps(p.mw + 16 * gi + (8 * u + j) * kPanelRows,
                          _mm512_mul_ps(ndmin, u8x16(mn + 16 * j)));
        }
        for (int q = 0; q < 4; ++q)
          for (int kk = 0; kk < 8; ++kk) {
            __m512i lo, hi;
            k4_pair<std::is_same_v<F, FmtQ5_K>>(g, q, kk, lo, hi);
            put(64 * u + 16 * q + kk, gi, lo);
            put(64 * u + 16 * q + 8 + kk, gi, hi);
          }
      } else {  // Q6_K
        const __m512 d = f16x16(g);
        for (int sb = 0; sb < 16; ++sb)
          _mm512_store_ps(sw + (16 * u + sb) * kPanelRows, _mm512_mul_ps(d, i8x16(g + 32 + 16 * sb)));
        for (int h = 0; h < 2; ++h)
          for (int kk = 0; kk < 8; ++kk) {
            __m512i e[4];
            q6_quads(g, h, kk, e);
            for (int i = 0; i < 4; ++i) put(64 * u + 32 * h + 8 * i + kk, gi, e[i]);
          }
      }
    }
  }
}

// Activation rows per tile: 2 x kTile int32 and f32 accumulators stay in registers.
constexpr int kTile = 6;

template <class F, bool kVnni, bool kPacked = false>
void gemm(const QAct& a, int64_t T, const void* w, size_t ldw, int64_t n0, int64_t n1,
          const float* bias, float* y, size_t ldy) {
  using G = GemmFmt<F, kVnni>;
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
      pack_panel_packed<F>(wb, ldw, n, rows, Kp, a.K, p);
    else
      pack_panel<F, kPanelRows, GemmFmt<F, kVnni>::kFlip>(wb, ldw, n, rows, Kp, a.K, p);
    int64_t t = 0;
    for (; t + kTile <= T; t += kTile) gemm_tile<F, kVnni, kTile>(p, a, t, n, rows, bias, y, ldy);
    switch (T - t) {
      case 1: gemm_tile<F, kVnni, 1>(p, a, t, n, rows, bias, y, ldy); break;
      case 2: gemm_tile<F, kVnni, 2>(p, a, t, n, rows, bias, y, ldy); break;
      case 3: gemm_tile<F, kVnni, 3>(p, a, t, n, rows, bias, y, ldy); break;
      case 4: gemm_tile<F, kVnni, 4>(p, a, t, n, rows, bias, y, ldy); break;
      case 5: gemm_tile<F, kVnni, 5>(p, a, t, n, rows, bias, y, ldy); break;
      default: break;
    }
  }
}

template <bool kVnni>
QGemvFn pick_gemm(DType wt) {
  if (wt == DType::Q8_0 && !kVnni) return nullptr;  // u = w + 128 > 63
  return by_format<QGemvFn>(wt, [](auto f) -> QGemvFn { return gemm<decltype(f), kVnni>; });
}

template <bool kVnni>
QGemvFn pick(DType wt) {
  return by_format<QGemvFn>(wt, [](auto f) -> QGemvFn { return gemv<decltype(f), kVnni>; });
}

}  // namespace
}  // namespace genperf::cpu::avx512q

namespace genperf::cpu {

void quantize_act_avx512(const float* x, const QAct& a, int64_t t) {
  avx512q::quantize_act(x, a, t);
}

QGemvFn qgemv_avx512(DType wt, bool vnni) {
  return vnni ? avx512q::pick<true>(wt) : avx512q::pick<false>(wt);
}

QGemvFn qgemm_avx512(DType wt, bool vnni) {
  return vnni ? avx512q::pick_gemm<true>(wt) : avx512q::pick_gemm<false>(wt);
}

QGemvFn qgemv_packed_avx512(DType wt) {
  return avx512q::by_packed_format<QGemvFn>(
      wt, [](auto f) -> QGemvFn { return avx512q::gemv_packed<decltype(f)>; });
}

QGemvFn qgemm_packed_avx512(DType wt) {
  return avx512q::by_packed_format<QGemvFn>(
      wt, [](auto f) -> QGemvFn { return avx512q::gemm<decltype(f), true, true>; });
}

Bf16DequantFn dequant_bf16_avx512(DType wt) {
  return avx512q::by_format<Bf16DequantFn>(
      wt, [](auto f) -> Bf16DequantFn { return avx512q::dequant_bf16<decltype(f)>; });
}

DequantFn dequant_avx512(DType wt) {
  return avx512q::by_format<DequantFn>(
      wt, [](auto f) -> DequantFn { return avx512q::dequant_row<decltype(f)>; });
}

}  // namespace genperf::cpu
