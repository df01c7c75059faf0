// AVX-512 quantized-weight kernels (qkernels.h): activation quantization, the integer GEMV and
// row dequantization. Two blocks of 32 share a 512-bit register. Bytes multiply with VNNI's
// vpdpbusd (unsigned x signed, four products summed into int32 without saturation) where the CPU
// has it, else with vpmaddubsw + vpmaddwd as on AVX2. Q8_0's signed weights become unsigned by
// flipping their top bit (u = w + 128) for vpdpbusd, with 128 * s taken off the block sum; the
// AVX-512BW variant uses the sign trick instead (|w| times x with w's sign), since
// 2 * 255 * 127 would saturate vpmaddubsw. Compiled with the AVX-512 flags (CMakeLists.txt).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include <cstddef>
#include <cstdint>

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
    return {ChunkWords<34>(c).f16s<0>(), _mm256_setzero_ps(), _mm_setzero_si128()};
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
    ChunkScales s{cw.template f16s<0>(), _mm256_setzero_ps(), _mm_setzero_si128()};
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
  GP_QINLINE static ChunkScales scales(const uint8_t* c, int nblk) { return F::scales(c, nblk); }
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

// ---------------------------------------------------------------------------------------------
// GEMV. Per weight row, chunk by chunk: unpack 8 blocks into 4 registers, then per activation
// row 4 byte products (16 int32 lanes: 8 per block) reduce to the 8 block sums in one 256-bit
// vector, offsets and Q6_K's sub-block scales apply in int32, one FMA scales them into f32.
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

template <class F, bool kVnni>
GP_QINLINE __m256i block_sums(const __m512i* up, const int8_t* xq, const int32_t* xs,
                              const int16_t* xh, const ChunkScales& sc) {
  constexpr bool kFlip = F::kSigned && kVnni;  // Q8_0 on VNNI: u = w + 128
  __m512i p[4];
  for (int i = 0; i < 4; ++i) {
    const __m512i xv = _mm512_loadu_si512(xq + 64 * i);
    __m512i uv = up[i];
    if constexpr (kVnni) {
      if constexpr (kFlip) uv = _mm512_xor_si512(uv, _mm512_set1_epi8(char(0x80)));
      p[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), uv, xv);
    } else {
      __m512i xs8 = xv;
      if constexpr (F::kSigned) {
        xs8 = _mm512_mask_sub_epi8(xv, _mm512_movepi8_mask(uv), _mm512_setzero_si512(), xv);
        uv = _mm512_abs_epi8(uv);
      }
      p[i] = _mm512_madd_epi16(_mm512_maddubs_epi16(uv, xs8), _mm512_set1_epi16(1));
    }
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
    const __m256i c = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc.sc16), loadu256(xh));
    r = _mm256_sub_epi32(r, _mm256_slli_epi32(c, 5));
  } else {
    r = reduce8(p);
  }
  constexpr int kOffset = kFlip ? 128 : F::kOffset;
  if constexpr (kOffset != 0) {
    constexpr int kShift = kOffset == 8 ? 3 : kOffset == 16 ? 4 : 7;
    r = _mm256_sub_epi32(r, _mm256_slli_epi32(loadu256(xs), kShift));
  }
  return r;
}

GP_QINLINE float hsum(__m256 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
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
        if constexpr (F::kMin) acc[t] = _mm256_fmadd_ps(sc.mw, _mm256_loadu_ps(a.ds + bi), acc[t]);
      }
    }
    for (int t = 0; t < TT; ++t)
      y[size_t(t0 + t) * ldy + size_t(n)] = hsum(acc[t]) + (bias ? bias[n] : 0.0f);
  }
}

template <class F, bool kVnni>
void gemv(const QAct& a, int64_t T, const void* w, size_t ldw, int64_t n0, int64_t n1,
          const float* bias, float* y, size_t ldy) {
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  for (int64_t t = 0; t < T; t += 4) {
    switch (T - t < 4 ? T - t : 4) {
      case 1: gemv_rows<F, kVnni, 1>(a, t, wb, ldw, n0, n1, bias, y, ldy); break;
      case 2: gemv_rows<F, kVnni, 2>(a, t, wb, ldw, n0, n1, bias, y, ldy); break;
      case 3: gemv_rows<F, kVnni, 3>(a, t, wb, ldw, n0, n1, bias, y, ldy); break;
      default: gemv_rows<F, kVnni, 4>(a, t, wb, ldw, n0, n1, bias, y, ldy); break;
    }
  }
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
    // Scale and min of each group of 16 (Q6_K's sub-blocks; half a block of the others).
    alignas(64) float a[16], m[16];
    if constexpr (F::kHalfScales) {
      _mm512_store_ps(a, _mm512_mul_ps(_mm512_broadcastss_ps(_mm256_castps256_ps128(s.dw)),
                                       _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(s.sc16))));
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
      if constexpr (F::kHalfScales)
        q = _mm512_sub_epi32(q, _mm512_set1_epi32(32));
      else if constexpr (F::kOffset != 0)
        q = _mm512_sub_epi32(q, _mm512_set1_epi32(F::kOffset));
      __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(a[g]));
      if constexpr (F::kMin) v = _mm512_add_ps(v, _mm512_set1_ps(m[g]));
      const __m256bh h = _mm512_cvtneps_pbh(v);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 16 * g),
                          reinterpret_cast<const __m256i&>(h));
    }
  }
}

template <bool kVnni>
QGemvFn pick(DType wt) {
  switch (wt) {
    case DType::Q8_0: return gemv<FmtQ8_0, kVnni>;
    case DType::Q4_0: return gemv<FmtQ4_0, kVnni>;
    case DType::Q4_1: return gemv<FmtQ4_1, kVnni>;
    case DType::Q5_0: return gemv<FmtQ5_0, kVnni>;
    case DType::Q5_1: return gemv<FmtQ5_1, kVnni>;
    case DType::Q4_K: return gemv<FmtQ4_K, kVnni>;
    case DType::Q5_K: return gemv<FmtQ5_K, kVnni>;
    case DType::Q6_K: return gemv<FmtQ6_K, kVnni>;
    default: return nullptr;
  }
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

Bf16DequantFn dequant_bf16_avx512(DType wt) {
  using namespace avx512q;
  switch (wt) {
    case DType::Q8_0: return dequant_bf16<FmtQ8_0>;
    case DType::Q4_0: return dequant_bf16<FmtQ4_0>;
    case DType::Q4_1: return dequant_bf16<FmtQ4_1>;
    case DType::Q5_0: return dequant_bf16<FmtQ5_0>;
    case DType::Q5_1: return dequant_bf16<FmtQ5_1>;
    case DType::Q4_K: return dequant_bf16<FmtQ4_K>;
    case DType::Q5_K: return dequant_bf16<FmtQ5_K>;
    case DType::Q6_K: return dequant_bf16<FmtQ6_K>;
    default: return nullptr;
  }
}

DequantFn dequant_avx512(DType wt) {
  using namespace avx512q;
  switch (wt) {
    case DType::Q8_0: return dequant_row<FmtQ8_0>;
    case DType::Q4_0: return dequant_row<FmtQ4_0>;
    case DType::Q4_1: return dequant_row<FmtQ4_1>;
    case DType::Q5_0: return dequant_row<FmtQ5_0>;
    case DType::Q5_1: return dequant_row<FmtQ5_1>;
    case DType::Q4_K: return dequant_row<FmtQ4_K>;
    case DType::Q5_K: return dequant_row<FmtQ5_K>;
    case DType::Q6_K: return dequant_row<FmtQ6_K>;
    default: return nullptr;
  }
}

}  // namespace genperf::cpu
