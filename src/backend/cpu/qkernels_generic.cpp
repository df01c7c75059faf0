// The scalar level of the quantized-weight kernels (qkernels.h), and the reference the SIMD levels
// are tested against: activation quantization in plain float arithmetic (the SIMD levels produce
// the same bits), exact integer sums per block, and their scaled sum in double.
#include <math.h>
#include <string.h>

#include <cstddef>
#include <cstdlib>
#include <cstdint>
#include <vector>

#include "backend/cpu/qkernels.h"
#include "backend/cpu/qpack.h"
#include "genperf/dtype.h"
#include "core/codec.h"

namespace genperf::cpu {

namespace {

// A thread's scratch buffer, kept between calls and freed at thread exit (OpenMP pools shrink
// when the thread count drops).
struct Scratch {
  uint8_t* p = nullptr;
  size_t bytes = 0;
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { free(p); }
};
thread_local Scratch tl_scratch[4];

}  // namespace

uint8_t* thread_scratch(int slot, size_t n) {
  Scratch& s = tl_scratch[slot];
  if (s.bytes < n) {
    free(s.p);
    s.bytes = (n + 4095) / 4096 * 4096;
    s.p = static_cast<uint8_t*>(aligned_alloc(64, s.bytes));
    if (!s.p) abort();  // out of memory
  }
  return s.p;
}

namespace {

size_t align64(size_t n) { return (n + 63) / 64 * 64; }
int64_t padded(int64_t K) { return (K + 255) / 256 * 256; }

}  // namespace

size_t qact_bytes(int64_t T, int64_t K) {
  const size_t Kp = size_t(padded(K)), nb = Kp / 32, t = size_t(T);
  return align64(t * Kp) + 3 * align64(t * nb * 4) + align64(t * nb * 4) + 64;
}

QAct qact_view(void* buf, int64_t T, int64_t K) {
  const size_t Kp = size_t(padded(K)), nb = Kp / 32, t = size_t(T);
  char* p = static_cast<char*>(buf);
  p += (64 - reinterpret_cast<uintptr_t>(p) % 64) % 64;
  QAct a;
  a.K = K;
  a.Kp = int64_t(Kp);
  a.nb = int64_t(nb);
  a.qs = reinterpret_cast<int8_t*>(p);
  p += align64(t * Kp);
  a.d = reinterpret_cast<float*>(p);
  p += align64(t * nb * 4);
  a.s = reinterpret_cast<int32_t*>(p);
  p += align64(t * nb * 4);
  a.h = reinterpret_cast<int16_t*>(p);
  p += align64(t * nb * 4);
  a.ds = reinterpret_cast<float*>(p);
  return a;
}

void quantize_act_generic(const float* x, const QAct& a, int64_t t) {
  int8_t* q = a.qs + t * a.Kp;
  float* d = a.d + t * a.nb;
  int32_t* s = a.s + t * a.nb;
  int16_t* h = a.h + t * 2 * a.nb;
  float* ds = a.ds + t * a.nb;
  const int64_t full = a.K / 32;
  for (int64_t b = 0; b < a.nb; ++b) {
    if (b >= full) {  // padding (K is a multiple of 32 for every format)
      memset(q + 32 * b, 0, 32);
      d[b] = ds[b] = 0.0f;
      s[b] = h[2 * b] = h[2 * b + 1] = 0;
      continue;
    }
    const float* xb = x + 32 * b;
    float amax = 0.0f;
    bool finite = true;
    for (int i = 0; i < 32; ++i) {
      const float ax = fabsf(xb[i]);
      finite = finite && ax <= 3.40282347e38f;
      amax = ax > amax ? ax : amax;
    }
    const float id = finite && amax > 0.0f ? 127.0f / amax : 0.0f;
    int32_t sum[2] = {0, 0};
    for (int i = 0; i < 32; ++i) {
      const int v = id != 0.0f ? int(nearbyintf(xb[i] * id)) : 0;
      q[32 * b + i] = int8_t(v);
      sum[i / 16] += v;
    }
    d[b] = finite ? amax / 127.0f : NAN;
    s[b] = sum[0] + sum[1];
    h[2 * b] = int16_t(sum[0]);
    h[2 * b + 1] = int16_t(sum[1]);
    ds[b] = d[b] * float(s[b]);
  }
}

namespace {

using namespace genperf::codec;

// One activation row of a QAct.
struct Row {
  const int8_t* q;
  const float* d;
  const int32_t* s;
  const int16_t* h;
};

double h2d(uint16_t h) { return double(f16_to_f32(h)); }

// sum of u[i] * q[i] for i < n, exact.
int64_t idot(const int32_t* u, const int8_t* q, int n) {
  int64_t s = 0;
  for (int i = 0; i < n; ++i) s += int64_t(u[i]) * q[i];
  return s;
}

// The stored unsigned values of a Q4_0/Q4_1 block (nibbles), and with the fifth bit of Q5_0/Q5_1.
void nibbles(const uint8_t* qs, int32_t* u) {
  for (int j = 0; j < 16; ++j) {
    u[j] = qs[j] & 0xF;
    u[j + 16] = qs[j] >> 4;
  }
}
void fifth_bits(const uint8_t* qh, int32_t* u) {
  uint32_t bits;
  memcpy(&bits, qh, 4);
  for (int j = 0; j < 32; ++j) u[j] |= int32_t((bits >> j) & 1u) << 4;
}

// Sub-block j's 6-bit scale and min of a Q4_K/Q5_K scales field.
void scale_min_k4(const uint8_t* s, int j, int* sc, int* mn) {
  if (j < 4) {
    *sc = s[j] & 63;
    *mn = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

double row_q8_0(const uint8_t* w, const Row& x, int64_t K) {
  double y = 0;
  for (int64_t i = 0; i < K / 32; ++i) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(w) + i;
    int32_t u[32];
    for (int j = 0; j < 32; ++j) u[j] = b->qs[j];
    y += h2d(b->d) * double(x.d[i]) * double(idot(u, x.q + 32 * i, 32));
  }
  return y;
}

template <class Block, bool kFifth>
double row_sym(const uint8_t* w, const Row& x, int64_t K) {  // Q4_0, Q5_0
  constexpr int kOffset = kFifth ? 16 : 8;
  double y = 0;
  for (int64_t i = 0; i < K / 32; ++i) {
    const auto* b = reinterpret_cast<const Block*>(w) + i;
    int32_t u[32];
    nibbles(b->qs, u);
    if constexpr (kFifth) fifth_bits(b->qh, u);
    const int64_t dot = idot(u, x.q + 32 * i, 32) - int64_t(kOffset) * x.s[i];
    y += h2d(b->d) * double(x.d[i]) * double(dot);
  }
  return y;
}

template <class Block, bool kFifth>
double row_affine(const uint8_t* w, const Row& x, int64_t K) {  // Q4_1, Q5_1
  double y = 0;
  for (int64_t i = 0; i < K / 32; ++i) {
    const auto* b = reinterpret_cast<const Block*>(w) + i;
    int32_t u[32];
    nibbles(b->qs, u);
    if constexpr (kFifth) fifth_bits(b->qh, u);
    const double dx = x.d[i];
    y += h2d(b->d) * dx * double(idot(u, x.q + 32 * i, 32)) + h2d(b->m) * dx * double(x.s[i]);
  }
  return y;
}

template <class Block, bool kFifth>
double row_k4(const uint8_t* w, const Row& x, int64_t K) {  // Q4_K, Q5_K
  double y = 0;
  for (int64_t sb = 0; sb < K / 256; ++sb) {
    const auto* b = reinterpret_cast<const Block*>(w) + sb;
    const double d = h2d(b->d), dmin = h2d(b->dmin);
    for (int i = 0; i < 8; ++i) {
      const int p = i / 2, hi = i % 2;
      int32_t u[32];
      for (int l = 0; l < 32; ++l) {
        const uint8_t byte = b->qs[32 * p + l];
        u[l] = hi ? byte >> 4 : byte & 0xF;
        if constexpr (kFifth) u[l] |= ((b->qh[l] >> (2 * p + hi)) & 1) << 4;
      }
      int sc, mn;
      scale_min_k4(b->scales, i, &sc, &mn);
      const int64_t blk = sb * 8 + i;
      const double dx = x.d[blk];
      y += d * sc * dx * double(idot(u, x.q + 32 * blk, 32)) - dmin * mn * dx * double(x.s[blk]);
    }
  }
  return y;
}

double row_q6_k(const uint8_t* w, const Row& x, int64_t K) {
  double y = 0;
  for (int64_t sb = 0; sb < K / 256; ++sb) {
    const auto* b = reinterpret_cast<const BlockQ6_K*>(w) + sb;
    const double d = h2d(b->d);
    for (int i = 0; i < 8; ++i) {
      const int half = i / 4, k = i % 4;
      const uint8_t* ql = b->ql + 64 * half + (k % 2) * 32;
      const uint8_t* qh = b->qh + 32 * half;
      int32_t u[32];
      for (int l = 0; l < 32; ++l)
        u[l] = (k < 2 ? ql[l] & 0xF : ql[l] >> 4) | (((qh[l] >> (2 * k)) & 3) << 4);
      const int64_t blk = sb * 8 + i;
      int64_t isum = 0;
      for (int j = 0; j < 2; ++j)
        isum += int64_t(b->scales[2 * i + j]) *
                (idot(u + 16 * j, x.q + 32 * blk + 16 * j, 16) - 32 * int64_t(x.h[2 * blk + j]));
      y += d * double(x.d[blk]) * double(isum);
    }
  }
  return y;
}

// Q2_K, Q3_K: per half of 128 (qs += 32), block 4h + k takes bits 2k..2k+1 of qs[0..31]; Q3_K's
// bit 2 of element l of block i is bit i of hmask[l]. Scales (Q2_K: and mins) per half-block j.
void bits2(const uint8_t* qs, int i, int32_t* u) {
  for (int l = 0; l < 32; ++l) u[l] = (qs[32 * (i / 4) + l] >> (2 * (i % 4))) & 3;
}

double row_q2_k(const uint8_t* w, const Row& x, int64_t K) {
  double y = 0;
  for (int64_t sb = 0; sb < K / 256; ++sb) {
    const auto* b = reinterpret_cast<const BlockQ2_K*>(w) + sb;
    const double d = h2d(b->d), dmin = h2d(b->dmin);
    for (int i = 0; i < 8; ++i) {
      int32_t u[32];
      bits2(b->qs, i, u);
      const int64_t blk = sb * 8 + i;
      int64_t isum = 0, msum = 0;
      for (int j = 0; j < 2; ++j) {
        const uint8_t sc = b->scales[2 * i + j];
        isum += int64_t(sc & 0xF) * idot(u + 16 * j, x.q + 32 * blk + 16 * j, 16);
        msum += int64_t(sc >> 4) * x.h[2 * blk + j];
      }
      const double dx = x.d[blk];
      y += d * dx * double(isum) - dmin * dx * double(msum);
    }
  }
  return y;
}

double row_q3_k(const uint8_t* w, const Row& x, int64_t K) {
  double y = 0;
  for (int64_t sb = 0; sb < K / 256; ++sb) {
    const auto* b = reinterpret_cast<const BlockQ3_K*>(w) + sb;
    const double d = h2d(b->d);
    for (int i = 0; i < 8; ++i) {
      int32_t u[32];
      bits2(b->qs, i, u);
      for (int l = 0; l < 32; ++l) u[l] |= ((b->hmask[l] >> i) & 1) << 2;
      const int64_t blk = sb * 8 + i;
      int64_t isum = 0;
      for (int j = 0; j < 2; ++j)
        isum += int64_t(unpack_scale_q3_k(b->scales, 2 * i + j)) *
                (idot(u + 16 * j, x.q + 32 * blk + 16 * j, 16) - 4 * int64_t(x.h[2 * blk + j]));
      y += d * double(x.d[blk]) * double(isum);
    }
  }
  return y;
}

using RowFn = double (*)(const uint8_t*, const Row&, int64_t);

template <RowFn F>
void qgemv(const QAct& a, int64_t T, const void* w, size_t ldw, int64_t n0, int64_t n1,
           const float* bias, float* y, size_t ldy) {
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* wr = static_cast<const uint8_t*>(w) + size_t(n) * ldw;
    for (int64_t t = 0; t < T; ++t) {
      const Row x{a.qs + t * a.Kp, a.d + t * a.nb, a.s + t * a.nb, a.h + t * 2 * a.nb};
      y[size_t(t) * ldy + size_t(n)] = float(F(wr, x, a.K) + (bias ? double(bias[n]) : 0.0));
    }
  }
}

// Packed weights (qpack.h): each row unpacked to the stored layout, then the row kernel.
template <DType W>
void qgemv_packed(const QAct& a, int64_t T, const void* w, size_t ldw, int64_t n0, int64_t n1,
                  const float* bias, float* y, size_t ldy) {
  thread_local std::vector<uint8_t> row;
  row.resize(ldw);
  const QGemvFn f = qgemv_generic(W);
  for (int64_t n = n0; n < n1; ++n) {
    unpack_row16(W, static_cast<const uint8_t*>(w), n, a.K, row.data());
    f(a, T, row.data(), ldw, 0, 1, bias ? bias + n : nullptr, y + n, ldy);
  }
}

}  // namespace

QGemvFn qgemv_packed_generic(DType wt) {
  switch (wt) {
    case DType::Q4_0: return qgemv_packed<DType::Q4_0>;
    case DType::Q8_0: return qgemv_packed<DType::Q8_0>;
    case DType::Q4_K: return qgemv_packed<DType::Q4_K>;
    case DType::Q5_K: return qgemv_packed<DType::Q5_K>;
    case DType::Q6_K: return qgemv_packed<DType::Q6_K>;
    default: return nullptr;
  }
}

QGemvFn qgemv_generic(DType wt) {
  switch (wt) {
    case DType::Q8_0: return qgemv<row_q8_0>;
    case DType::Q4_0: return qgemv<row_sym<BlockQ4_0, false>>;
    case DType::Q5_0: return qgemv<row_sym<BlockQ5_0, true>>;
    case DType::Q4_1: return qgemv<row_affine<BlockQ4_1, false>>;
    case DType::Q5_1: return qgemv<row_affine<BlockQ5_1, true>>;
    case DType::Q4_K: return qgemv<row_k4<BlockQ4_K, false>>;
    case DType::Q5_K: return qgemv<row_k4<BlockQ5_K, true>>;
    case DType::Q6_K: return qgemv<row_q6_k>;
    case DType::Q2_K: return qgemv<row_q2_k>;
    case DType::Q3_K: return qgemv<row_q3_k>;
    default: return nullptr;
  }
}

}  // namespace genperf::cpu
