// 3 x 3 convolution of stride 1 and padding 1 by Winograd's minimal filtering, F(4 x 4, 3 x 3)
// (Lavin and Gray 2016, "Fast algorithms for convolutional neural networks"): each 4 x 4 block of
// output pixels is A^T [ (G g G^T) . (B^T d B) ] A, with d the 6 x 6 input patch around the block
// and g the 3 x 3 filter, so one block takes 36 products per channel pair where the direct
// convolution takes 144 (4x fewer). The products over the input channels are 36 independent
// matrix products, one per position xi of the 6 x 6 transformed patch:
//   M[xi][tile, oc] = sum_ic V[xi][tile, ic] U[xi][ic, oc].
// Tiles are taken in blocks sized to stay in the core's L2 cache (the block's V and M), each
// block on one thread: input transform -> 36 products -> output transform and bias. Each output
// value is summed by one thread in a fixed order, so the bits do not depend on the thread count.
// The data gradient is this forward on the flipped, transposed filter; the
// weights' gradient (conv3x3_winograd_backward_weights_avx2) sums V[xi]^T (A dY A^T)[xi] over the
// tiles and maps it back through G^T . G.
// Interpolation points 0, +-1, +-2 (and infinity). The price is rounding: in float the largest
// error is 4-8e-6 of the output's largest value on the UNet's shapes, against 0.2-1.2e-6 for the
// direct sum (docs/SR.md, "Speed"); ImageOps.Conv2d holds every path to 1e-5 against float64.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/conv_winograd_transforms.h"
#include "backend/cpu/image_ops.h"
#include "genperf/runtime.h"

namespace genperf::cpu {
namespace {

using ops::ConvShape;
using winograd::kT;
using winograd::kXi;
using winograd::Tiling;
constexpr int kRows = 6;   // tiles per micro-kernel step (rows of the product)
// The filter's transform: U = G g G^T.
constexpr float G[kT][3] = {{1.f / 4, 0, 0},           {-1.f / 6, -1.f / 6, -1.f / 6}, {-1.f / 6, 1.f / 6, -1.f / 6},
                            {1.f / 24, 1.f / 12, 1.f / 6}, {1.f / 24, -1.f / 12, 1.f / 6},  {0, 0, 1}};

// Eight floats a register (conv_winograd_transforms.h's V).
struct Avx2Lanes {
  using reg = __m256;
  static constexpr int kLanes = 8;
  static reg load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, reg r) { _mm256_storeu_ps(p, r); }
  static reg zero() { return _mm256_setzero_ps(); }
  static reg set1(float f) { return _mm256_set1_ps(f); }
  static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm256_sub_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm256_mul_ps(a, b); }
  static reg fmadd(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  static reg fnmadd(reg a, reg b, reg c) { return _mm256_fnmadd_ps(a, b, c); }
  // f32_to_bf16 (dtype.h) lane-wise, as f32: add 0x7fff and the kept part's lowest bit, drop the
  // low 16 bits; a NaN keeps its top bits and is made quiet.
  static reg round_bf16(reg r) {
    const __m256i u = _mm256_castps_si256(r), top = _mm256_set1_epi32(int32_t(0xffff0000u));
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i near = _mm256_and_si256(_mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff))), top);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                           _mm256_set1_epi32(0x7f800000));
    const __m256i quiet = _mm256_and_si256(_mm256_or_si256(u, _mm256_set1_epi32(0x00400000)), top);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(near, quiet, nan));
  }
};

// The tile transforms at the widest lanes the CPU and the channel count allow (16 where both
// do: conv_winograd_avx512.cpp; the same bits).
bool wide(int64_t channels) { return isa() >= Isa::Avx512 && channels % 16 == 0; }
void transform_input(const float* x, const ConvShape& s, const Tiling& tl, int64_t t0, int64_t n, int64_t ld,
                     float* V) {
  if (wide(s.IC)) return winograd_transform_input_avx512(x, s, t0, n, ld, V);
  winograd::transform_input<Avx2Lanes>(x, s, tl, t0, n, ld, V);
}
void transform_output(const float* M, const float* bias, const ConvShape& s, const Tiling& tl, int64_t t0,
                      int64_t n, float* out) {
  if (wide(s.OC)) return winograd_transform_output_avx512(M, bias, s, t0, n, out);
  winograd::transform_output<Avx2Lanes>(M, bias, s, tl, t0, n, out);
}
void transform_output_grad(const float* dy, const ConvShape& s, const Tiling& tl, int64_t t0, int64_t n, int64_t ld,
                           float* dM) {
  if (wide(s.OC)) return winograd_transform_output_grad_avx512(dy, s, t0, n, ld, dM);
  winograd::transform_output_grad<Avx2Lanes>(dy, s, tl, t0, n, ld, dM);
}

// U[xi][ic][oc] = (G g G^T)[xi] for the filter g = w[oc, :, :, ic] (ohwi), eight input channels
// at a time (contiguous in w); bf16: g rounded to bf16 as it is read (ConvShape::bf16).
// flip: the filter of the data gradient instead, w'[ic, ky, kx, oc] = w[oc, 2 - ky, 2 - kx, ic] (a
// convolution of OC input and IC output channels), into U[xi][oc][ic], read straight from w.
void transform_weights(const float* w, int64_t IC, int64_t OC, bool flip, bool bf16, float* U) {
#pragma omp parallel for num_threads(IC * OC >= 4096 ? num_threads() : 1) schedule(static)
  for (int64_t oc = 0; oc < OC; ++oc)
    for (int64_t ic = 0; ic < IC; ic += 8) {
      __m256 g[3][3], gg[kT][3];
      for (int ky = 0; ky < 3; ++ky)
        for (int kx = 0; kx < 3; ++kx) {
          const int y = flip ? 2 - ky : ky, x = flip ? 2 - kx : kx;
          const __m256 v = _mm256_loadu_ps(w + ((oc * 3 + y) * 3 + x) * IC + ic);
          g[ky][kx] = bf16 ? Avx2Lanes::round_bf16(v) : v;
        }
      for (int i = 0; i < kT; ++i)
        for (int kx = 0; kx < 3; ++kx)
          gg[i][kx] = _mm256_fmadd_ps(_mm256_set1_ps(G[i][2]), g[2][kx],
                                      _mm256_fmadd_ps(_mm256_set1_ps(G[i][1]), g[1][kx],
                                                      _mm256_mul_ps(_mm256_set1_ps(G[i][0]), g[0][kx])));
      for (int i = 0; i < kT; ++i)
        for (int j = 0; j < kT; ++j) {
          const __m256 v = _mm256_fmadd_ps(_mm256_set1_ps(G[j][2]), gg[i][2],
                                           _mm256_fmadd_ps(_mm256_set1_ps(G[j][1]), gg[i][1],
                                                           _mm256_mul_ps(_mm256_set1_ps(G[j][0]), gg[i][0])));
          if (flip) {  // contiguous in ic
            _mm256_storeu_ps(U + ((i * kT + j) * OC + oc) * IC + ic, v);
            continue;
          }
          alignas(32) float u[8];
          _mm256_store_ps(u, v);
          float* dst = U + ((i * kT + j) * IC + ic) * OC + oc;
          for (int l = 0; l < 8; ++l) dst[l * OC] = u[l];
        }
    }
}

// The transformed filters of the calling thread's recent convolutions: a network's weights are
// the same at every sampling step. An entry is found by the weights' address and shape and used
// only while the weights are bit for bit those it was made from (training changes them in place),
// so a hit is exactly a recomputation; the forward's and the data gradient's (flip) transforms,
// and those of the weights rounded to bf16, are separate entries. Least recently used entries go
// beyond kCacheBytes.
constexpr size_t kCacheBytes = size_t(64) << 20;
// p advanced to the next 64-byte boundary (at most 15 floats: buffers are allocated 16 longer).
float* aligned64(float* p) {
  constexpr uintptr_t kAlign = 64 / sizeof(float);
  return p + (kAlign - reinterpret_cast<uintptr_t>(p) / sizeof(float) % kAlign) % kAlign;
}

const float* transformed_weights(const float* w, int64_t IC, int64_t OC, bool flip, bool bf16) {
  struct Entry {
    const float* key;
    int64_t IC, OC;
    bool flip, bf16;
    std::vector<float> w, U;  // U: 64-byte aligned from u()
    uint64_t used;
    float* u() { return aligned64(U.data()); }
  };
  thread_local std::vector<Entry> cache;
  thread_local uint64_t clock = 0;
  const size_t n = size_t(9 * IC * OC);
  for (Entry& e : cache)
    if (e.key == w && e.IC == IC && e.OC == OC && e.flip == flip && e.bf16 == bf16) {
      e.used = ++clock;
      if (std::memcmp(e.w.data(), w, n * sizeof(float)) != 0) {
        std::memcpy(e.w.data(), w, n * sizeof(float));
        transform_weights(w, IC, OC, flip, bf16, e.u());
      }
      return e.u();
    }
  size_t bytes = 0;
  for (const Entry& e : cache) bytes += (e.w.size() + e.U.size()) * sizeof(float);
  while (!cache.empty() && bytes + n * 5 * sizeof(float) > kCacheBytes) {
    auto lru = std::min_element(cache.begin(), cache.end(), [](const Entry& a, const Entry& b) { return a.used < b.used; });
    bytes -= (lru->w.size() + lru->U.size()) * sizeof(float);
    cache.erase(lru);
  }
  Entry& e = cache.emplace_back(
      Entry{w, IC, OC, flip, bf16, std::vector<float>(w, w + n), std::vector<float>(size_t(kXi) * n / 9 + 16),
            ++clock});
  transform_weights(w, IC, OC, flip, bf16, e.u());
  return e.u();
}

// C[R, 8 NV] (+)= A[R, K] B[K, 8 NV]: A[r, k] at A + r lda + k ldk, rows of B and C at stride
// ldb and ldc; Acc: C += (else C =). The accumulators are named, not an array: GCC 12 keeps an
// array of them in memory, storing each at every k (half the speed).
template <int R, int NV, bool Acc>
void micro(const float* A, int64_t lda, int64_t ldk, const float* B, int64_t ldb, float* C, int64_t ldc, int64_t K) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
         c40 = c00, c41 = c00, c50 = c00, c51 = c00;
#define GP_LOAD(r)                                                      \
  if constexpr (Acc && R > r) {                                         \
    c##r##0 = _mm256_loadu_ps(C + r * ldc);                             \
    if constexpr (NV > 1) c##r##1 = _mm256_loadu_ps(C + r * ldc + 8);   \
  }
  GP_LOAD(0) GP_LOAD(1) GP_LOAD(2) GP_LOAD(3) GP_LOAD(4) GP_LOAD(5)
#undef GP_LOAD
  for (int64_t k = 0; k < K; ++k) {
    const __m256 b0 = _mm256_loadu_ps(B + k * ldb);
    const __m256 b1 = NV > 1 ? _mm256_loadu_ps(B + k * ldb + 8) : b0;
    const float* ak = A + k * ldk;
#define GP_ROW(r)                                                    \
  if constexpr (R > r) {                                             \
    const __m256 a = _mm256_broadcast_ss(ak + r * lda);              \
    c##r##0 = _mm256_fmadd_ps(a, b0, c##r##0);                       \
    if constexpr (NV > 1) c##r##1 = _mm256_fmadd_ps(a, b1, c##r##1); \
  }
    GP_ROW(0) GP_ROW(1) GP_ROW(2) GP_ROW(3) GP_ROW(4) GP_ROW(5)
#undef GP_ROW
  }
#define GP_STORE(r)                                                       \
  if constexpr (R > r) {                                                  \
    _mm256_storeu_ps(C + r * ldc, c##r##0);                               \
    if constexpr (NV > 1) _mm256_storeu_ps(C + r * ldc + 8, c##r##1);     \
  }
  GP_STORE(0) GP_STORE(1) GP_STORE(2) GP_STORE(3) GP_STORE(4) GP_STORE(5)
#undef GP_STORE
}

// C[rows, cols] (+)= A[rows, K] B[K, cols], cols a multiple of 8: micro-kernels of up to 6 x 16;
// where the CPU has AVX-512, its kernels take the columns in sixteens (the same bits).
template <bool Acc>
void product(int64_t rows, int64_t cols, int64_t K, const float* A, int64_t lda, int64_t ldk, const float* B,
             int64_t ldb, float* C, int64_t ldc) {
  int64_t j0 = 0;
  if (isa() >= Isa::Avx512 && cols >= 16) {
    j0 = cols / 16 * 16;
    winograd_product_avx512<Acc>(rows, j0, K, A, lda, ldk, B, ldb, C, ldc);
  }
  for (int64_t j = j0; j < cols; j += 16)
    for (int64_t r = 0; r < rows; r += kRows) {
      const float* a = A + r * lda;
      float* c = C + r * ldc + j;
      const bool wide = cols - j >= 16;
#define GP_CASE(R)                                                      \
  case R:                                                               \
    if (wide)                                                           \
      micro<R, 2, Acc>(a, lda, ldk, B + j, ldb, c, ldc, K);             \
    else                                                                \
      micro<R, 1, Acc>(a, lda, ldk, B + j, ldb, c, ldc, K);             \
    break;
      switch (std::min<int64_t>(kRows, rows - r)) {
        GP_CASE(1) GP_CASE(2) GP_CASE(3) GP_CASE(4) GP_CASE(5) GP_CASE(6)
      }
#undef GP_CASE
    }
}

// M[xi] = V[xi] U[xi] for each xi: [n, IC] x [IC, OC].
void multiply(const float* V, const float* U, int64_t n, int64_t IC, int64_t OC, float* M) {
  for (int xi = 0; xi < kXi; ++xi)
    product<false>(n, OC, IC, V + xi * n * IC, IC, 1, U + xi * IC * OC, OC, M + xi * n * OC, OC);
}

// dw[oc, :, :, ic] += G^T dU[:][ic][oc] G (the adjoint of transform_weights), eight output
// channels at a time (contiguous in dU).
void transform_weights_grad(const float* dU, int64_t IC, int64_t OC, float* dw) {
#pragma omp parallel for num_threads(IC * OC >= 4096 ? num_threads() : 1) schedule(static)
  for (int64_t ic = 0; ic < IC; ++ic)
    for (int64_t oc = 0; oc < OC; oc += 8) {
      __m256 gu[3][kT];  // G^T dU: 3 x 6
      for (int j = 0; j < kT; ++j) {
        __m256 col[kT];
        for (int i = 0; i < kT; ++i) col[i] = _mm256_loadu_ps(dU + ((i * kT + j) * IC + ic) * OC + oc);
        for (int ky = 0; ky < 3; ++ky) {
          __m256 acc = _mm256_setzero_ps();
          for (int i = 0; i < kT; ++i)
            if (G[i][ky] != 0.f) acc = _mm256_fmadd_ps(_mm256_set1_ps(G[i][ky]), col[i], acc);
          gu[ky][j] = acc;
        }
      }
      for (int ky = 0; ky < 3; ++ky)
        for (int kx = 0; kx < 3; ++kx) {
          __m256 acc = _mm256_setzero_ps();
          for (int j = 0; j < kT; ++j)
            if (G[j][kx] != 0.f) acc = _mm256_fmadd_ps(_mm256_set1_ps(G[j][kx]), gu[ky][j], acc);
          alignas(32) float g[8];
          _mm256_store_ps(g, acc);
          for (int l = 0; l < 8; ++l) dw[((oc + l) * 9 + ky * 3 + kx) * IC + ic] += g[l];
        }
    }
}

// The calling thread's buffer of at least n floats, kept between calls and only grown, aligned
// to 64 bytes: its rows of 16 channels are then whole cache lines (malloc's large blocks start
// 16 bytes into a page, so that each AVX-512 load and store of V and M crossed two lines).
float* scratch(int slot, size_t n) {
  thread_local std::vector<float> buf[4];
  if (buf[slot].size() < n + 16) {
    buf[slot].clear();
    buf[slot].resize(n + 16);
  }
  return aligned64(buf[slot].data());
}

// out = conv(x) + bias by the transformed filters U[xi][s.IC][s.OC].
void winograd_forward(float* out, const float* x, const float* U, const float* bias, const ConvShape& s) {
  const Tiling tl(s);
  // Tiles per block: V and M of the block in about 256 KiB, a whole number of micro-kernel steps.
  const int64_t fit = (int64_t(64) << 10) / (kXi * (s.IC + s.OC));
  const int64_t block = std::max<int64_t>(kRows, std::min<int64_t>(16 * kRows, fit / kRows * kRows));
  // Each thread takes an equal share of the tiles, in blocks (an equal count of blocks each would
  // leave a thread idle for a block where there are few: 3 blocks on 2 threads at 8 x 8 pixels).
  // A tile's outputs do not depend on the tiles beside it in its block, so the bits do not depend
  // on the thread count.
  const int nt = tl.total >= 2 * kRows ? num_threads() : 1;
#pragma omp parallel num_threads(nt)
  {
    const int id = omp_get_thread_num(), tn = omp_get_num_threads();
    const int64_t i0 = tl.total * id / tn, i1 = tl.total * (id + 1) / tn;
    float* V = scratch(0, size_t(kXi * block * s.IC));
    float* M = scratch(1, size_t(kXi * block * s.OC));
    for (int64_t t0 = i0; t0 < i1; t0 += block) {
      const int64_t n = std::min(block, i1 - t0);
      transform_input(x, s, tl, t0, n, n, V);
      multiply(V, U, n, s.IC, s.OC, M);
      transform_output(M, bias, s, tl, t0, n, out);
    }
  }
}

}  // namespace

bool conv1x1_narrow_applies(const ConvShape& s) {
  return s.K == 1 && s.stride == 1 && s.pad == 0 && s.OC % 8 == 0 && s.OC <= 64;
}

// out[p, :] = x[p, :] w^T + bias as Winograd's products compute them (w^T [IC][OC] in the calling
// thread's buffer), in blocks of rows on the threads: oneDNN's 1 x 1 convolution and sgemm run
// these narrow products (16 to 64 columns, the UNet's skip connections) at a third of the GEMM
// peak. Each value is one thread's chain of fused multiply-adds over the input channels, so the
// bits do not depend on the thread count.
void conv1x1_narrow_avx2(float* out, const float* x, const float* w, const float* bias, const ConvShape& s) {
  const int64_t IC = s.IC, OC = s.OC, rows = s.B * s.H * s.W;
  float* wt = scratch(3, size_t(IC * OC));
  for (int64_t o = 0; o < OC; ++o)
    for (int64_t c = 0; c < IC; ++c) wt[c * OC + o] = w[o * IC + c];
  constexpr int64_t kBlock = 16 * kRows;
  const int64_t blocks = (rows + kBlock - 1) / kBlock;
#pragma omp parallel for num_threads(rows * IC * OC >= (1 << 18) ? num_threads() : 1) schedule(static)
  for (int64_t k = 0; k < blocks; ++k) {
    const int64_t r0 = k * kBlock, n = std::min(kBlock, rows - r0);
    float* c = out + r0 * OC;
    product<false>(n, OC, IC, x + r0 * IC, IC, 1, wt, OC, c, OC);
    if (bias)
      for (int64_t r = 0; r < n; ++r)
        for (int64_t o = 0; o < OC; ++o) c[r * OC + o] += bias[o];
  }
}

bool conv3x3_winograd_applies(const ConvShape& s) {
  return s.K == 3 && s.stride == 1 && s.pad == 1 && s.IC % 8 == 0 && s.OC % 8 == 0;
}

void conv3x3_winograd_avx2(float* out, const float* x, const float* w, const float* bias, const ConvShape& s) {
  winograd_forward(out, x, transformed_weights(w, s.IC, s.OC, false, s.bf16), bias, s);
}

// The data gradient of a 3 x 3 convolution of stride 1 and padding 1 is one itself, of the
// flipped, transposed filter: dx = conv(dout, w'), OC channels in and IC out.
void conv3x3_winograd_backward_data_avx2(float* dx, const float* dout, const float* w, const ConvShape& s) {
  ConvShape t = s;
  t.IC = s.OC, t.OC = s.IC;
  winograd_forward(dx, dout, transformed_weights(w, s.IC, s.OC, true, s.bf16), nullptr, t);
}


void conv3x3_winograd_backward_weights_avx2(float* dw, const float* dout, const float* x, const ConvShape& s) {
  const Tiling tl(s);
  // dU[xi] = sum over tiles of V[xi]^T dM[xi]. Blocks of tiles in turn: the threads transform the
  // block's tiles, then each adds the products of its share of the 36 positions into dU. Each
  // dU[xi] is summed by one thread in tile order, so the bits do not depend on the thread count.
  // The products' inner dimension is the tiles: blocks are long (each xi's slices of V and dM, not
  // the whole block, are what a product reads at once).
  const int64_t block = std::min<int64_t>(tl.total, 16 * kRows);
  const size_t nu = size_t(kXi * s.IC * s.OC);
  float* V = scratch(0, size_t(kXi * block * s.IC));
  float* dM = scratch(1, size_t(kXi * block * s.OC));
  float* part = scratch(2, nu);  // one block's sums
  thread_local std::vector<double> sum;  // the blocks' sums, added in double
  sum.assign(nu, 0.0);
  double* acc = sum.data();  // (the workers' thread_local would be their own)
  const int nt = num_threads();
  for (int64_t t0 = 0; t0 < tl.total; t0 += block) {
    const int64_t n = std::min(block, tl.total - t0);
#pragma omp parallel num_threads(n >= 2 * kRows ? nt : 1)
    {
      const int id = omp_get_thread_num(), tn = omp_get_num_threads();
      const int64_t i0 = n * id / tn, i1 = n * (id + 1) / tn;
      transform_input(x, s, tl, t0 + i0, i1 - i0, block, V + i0 * s.IC);
      transform_output_grad(dout, s, tl, t0 + i0, i1 - i0, block, dM + i0 * s.OC);
    }
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int xi = 0; xi < kXi; ++xi) {
      const size_t o = size_t(xi * s.IC * s.OC);
      product<false>(s.IC, s.OC, n, V + xi * block * s.IC, 1, s.IC, dM + xi * block * s.OC, s.OC, part + o, s.OC);
      for (size_t i = o; i < o + size_t(s.IC * s.OC); ++i) acc[i] += double(part[i]);
    }
  }
  for (size_t i = 0; i < nu; ++i) part[i] = float(acc[i]);
  transform_weights_grad(part, s.IC, s.OC, dw);
}

}  // namespace genperf::cpu
