// AVX-512 quantized-weight kernels for few activation rows (qkernels.h): activation
// quantization and the integer GEMV, weight rows read as stored. What they share with
// qgemm_avx512.cpp (formats, unpacking, dot4) is in qkernels_avx512.inc.
#include "backend/cpu/qkernels_avx512.inc"

namespace genperf::cpu::avx512q {
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

}  // namespace genperf::cpu
