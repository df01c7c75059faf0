// AVX-512 quantized-weight kernels for many activation rows (qkernels.h): row dequantization
// (to bf16 for the prefill GEMM's decoded panels, and to f32), the integer GEMM on panels of 32
// weight rows, and the kernels for packed weights (qpack.h: the packed GEMV, and the packed
// GEMM's panel). What they share with qgemv_avx512.cpp (formats, unpacking, dot4) is in
// qkernels_avx512.inc.
#include "backend/cpu/qkernels_avx512.inc"

namespace genperf::cpu::avx512q {
namespace {

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
// Integer GEMM (prefill, many activation rows). The GEMV (qgemv_avx512.cpp) unpacks every weight
// block once per group of 4 rows and reduces each product to block sums across lanes; here a
// panel of 32 weight rows is unpacked once into a lane-per-row layout and reused by every
// activation row (pack_panel, qkernels_formats.inc; from packed weights pack_panel_packed, below).
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
// the weights is harmless). Unlike the row GEMV (qgemv_avx512.cpp), whose prefetches were
// slower, this one has compute to spare: Q4_K 2048 x 768 from memory (2 threads) 29 -> 44-48
// GB/s, 11008 x 4096 41-45 -> 70; Q8_0 and Q6_K 11008 x 4096 +15%; Q4_0 unchanged (one core:
// Q4_K 20 -> 32 GB/s). 1024 to 8192 bytes all helped; 4096 and 8192 no more than 2048.
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

}  // namespace
}  // namespace genperf::cpu::avx512q

namespace genperf::cpu {

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
