// The tile transforms of Winograd's F(4 x 4, 3 x 3) (conv_winograd_avx2.cpp), written once over
// the vector width: V is a set of lane-wise float operations (Avx2Lanes, 8 floats, in
// conv_winograd_avx2.cpp; Avx512Lanes, 16 floats, in conv_winograd_avx512.cpp, each instantiated
// in its own translation unit, compiled for its ISA). Every lane runs the same chain of
// operations at either width, so the two give the same bits; the channel count must be a
// multiple of V::kLanes.
// ConvShape::bf16: the operands the transforms read (x, dY) are rounded to bf16 as they are
// loaded (V::round_bf16, f32_to_bf16's rounding to nearest even, NaN kept), so that the products
// are those of bf16 values, summed in f32, without a rounded copy of the activations.
//
// V provides: reg (the register type), kLanes, load(p), store(p, r), zero(), set1(f), add(a, b),
// sub(a, b), mul(a, b), fmadd(a, b, c) = a b + c, fnmadd(a, b, c) = c - a b, round_bf16(r).
#pragma once
#include <algorithm>
#include <cstdint>

#include "genperf/ops_image.h"

namespace genperf::cpu::winograd {

constexpr int kT = 6;  // transformed patch side (4 outputs + 3 - 1)
constexpr int kXi = kT * kT;

struct Tiling {
  int64_t ty, tx, per_image, total;
  explicit Tiling(const ops::ConvShape& s)
      : ty((s.H + 3) / 4), tx((s.W + 3) / 4), per_image(ty * tx), total(s.B * ty * tx) {}
};

// Lanes at p, rounded to bf16 where Round.
template <class V, bool Round>
inline typename V::reg load(const float* p) {
  if constexpr (Round) return V::round_bf16(V::load(p));
  return V::load(p);
}

// t = B^T d along one axis: six values at stride `in`, written at stride `out`.
template <class V>
inline void input_1d(const typename V::reg* d, int in, typename V::reg* t, int out) {
  using R = typename V::reg;
  const R d0 = d[0], d1 = d[in], d2 = d[2 * in], d3 = d[3 * in], d4 = d[4 * in], d5 = d[5 * in];
  const R four = V::set1(4.f), five = V::set1(5.f), two = V::set1(2.f);
  const R a = V::fnmadd(four, d2, d4);             // d4 - 4 d2
  const R b = V::fnmadd(four, d1, d3);             // d3 - 4 d1
  const R c = V::sub(d4, d2);                      // d4 - d2
  const R e = V::mul(two, V::sub(d3, d1));         // 2 (d3 - d1)
  t[0] = V::add(V::fnmadd(five, d2, V::mul(four, d0)), d4);
  t[out] = V::add(a, b);
  t[2 * out] = V::sub(a, b);
  t[3 * out] = V::add(c, e);
  t[4 * out] = V::sub(c, e);
  t[5 * out] = V::add(V::fnmadd(five, d3, V::mul(four, d1)), d5);
}

// y = A^T m along one axis: six values at stride `in` to four at stride `out`.
template <class V>
inline void output_1d(const typename V::reg* m, int in, typename V::reg* y, int out) {
  using R = typename V::reg;
  const R m0 = m[0], m1 = m[in], m2 = m[2 * in], m3 = m[3 * in], m4 = m[4 * in], m5 = m[5 * in];
  const R p12 = V::add(m1, m2), n12 = V::sub(m1, m2);
  const R p34 = V::add(m3, m4), n34 = V::sub(m3, m4);
  y[0] = V::add(V::add(m0, p12), p34);
  y[out] = V::fmadd(V::set1(2.f), n34, n12);
  y[2 * out] = V::fmadd(V::set1(4.f), p34, p12);
  y[3 * out] = V::add(V::fmadd(V::set1(8.f), n34, n12), m5);
}

// z = A y along one axis (the adjoint of output_1d): four values at stride `in` to six at stride
// `out`.
template <class V>
inline void output_grad_1d(const typename V::reg* y, int in, typename V::reg* z, int out) {
  using R = typename V::reg;
  const R y0 = y[0], y1 = y[in], y2 = y[2 * in], y3 = y[3 * in];
  const R p02 = V::add(y0, y2), p13 = V::add(y1, y3);
  const R q02 = V::fmadd(V::set1(4.f), y2, y0);
  const R q13 = V::fmadd(V::set1(4.f), y3, y1);  // y1 + 4 y3: times 2 below
  const R two = V::set1(2.f);
  z[0] = y0;
  z[out] = V::add(p02, p13);
  z[2 * out] = V::sub(p02, p13);
  z[3 * out] = V::fmadd(two, q13, q02);
  z[4 * out] = V::fnmadd(two, q13, q02);
  z[5 * out] = y3;
}

// V[xi][t][ic] for the tiles t0 .. t0 + n (rows of IC values, tile-major within each xi, slices of
// ld tiles).
template <class V, bool Round>
void transform_input_as(const float* x, const ops::ConvShape& s, const Tiling& tl, int64_t t0, int64_t n, int64_t ld,
                        float* out) {
  using R = typename V::reg;
  const int64_t IC = s.IC, stride_xi = ld * IC;
  R d[kXi], t[kXi];
  for (int64_t i = 0; i < n; ++i) {
    const int64_t tile = t0 + i, b = tile / tl.per_image, r = tile % tl.per_image;
    const int64_t y0 = r / tl.tx * 4 - 1, x0 = r % tl.tx * 4 - 1;
    const bool inside = y0 >= 0 && x0 >= 0 && y0 + kT <= s.H && x0 + kT <= s.W;
    const float* base = x + ((b * s.H + y0) * s.W + x0) * IC;  // the patch's corner (may lie outside)
    for (int64_t c = 0; c < IC; c += V::kLanes) {
      if (inside) {
        for (int u = 0; u < kT; ++u)
          for (int v = 0; v < kT; ++v) d[u * kT + v] = load<V, Round>(base + (u * s.W + v) * IC + c);
      } else {
        for (int u = 0; u < kT; ++u) {
          const int64_t y = y0 + u;
          for (int v = 0; v < kT; ++v) {
            const int64_t xx = x0 + v;
            d[u * kT + v] = y >= 0 && y < s.H && xx >= 0 && xx < s.W
                                ? load<V, Round>(x + ((b * s.H + y) * s.W + xx) * IC + c)
                                : V::zero();
          }
        }
      }
      for (int u = 0; u < kT; ++u) input_1d<V>(d + u, kT, t + u, kT);          // columns: B^T d
      for (int u = 0; u < kT; ++u) input_1d<V>(t + u * kT, 1, d + u * kT, 1);  // rows: (B^T d) B
      float* dst = out + i * IC + c;
      for (int xi = 0; xi < kXi; ++xi) V::store(dst + xi * stride_xi, d[xi]);
    }
  }
}
template <class V>
void transform_input(const float* x, const ops::ConvShape& s, const Tiling& tl, int64_t t0, int64_t n, int64_t ld,
                     float* out) {
  if (s.bf16) return transform_input_as<V, true>(x, s, tl, t0, n, ld, out);
  transform_input_as<V, false>(x, s, tl, t0, n, ld, out);
}

// out[4 x 4 block of tile t] = A^T M[:, t] A + bias, clipped to the image.
template <class V>
void transform_output(const float* M, const float* bias, const ops::ConvShape& s, const Tiling& tl, int64_t t0,
                      int64_t n, float* out) {
  using R = typename V::reg;
  const int64_t OC = s.OC, stride_xi = n * OC;
  R m[kXi], t[4 * kT], y[16];
  for (int64_t i = 0; i < n; ++i) {
    const int64_t tile = t0 + i, b = tile / tl.per_image, r = tile % tl.per_image;
    const int64_t y0 = r / tl.tx * 4, x0 = r % tl.tx * 4;
    const int64_t ny = std::min<int64_t>(4, s.H - y0), nx = std::min<int64_t>(4, s.W - x0);
    for (int64_t c = 0; c < OC; c += V::kLanes) {
      const float* src = M + i * OC + c;
      for (int xi = 0; xi < kXi; ++xi) m[xi] = V::load(src + xi * stride_xi);
      for (int v = 0; v < kT; ++v) output_1d<V>(m + v, kT, t + v, kT);        // columns: A^T m, 4 x 6
      for (int u = 0; u < 4; ++u) output_1d<V>(t + u * kT, 1, y + u * 4, 1);  // rows: (A^T m) A
      const R bv = bias ? V::load(bias + c) : V::zero();
      for (int64_t u = 0; u < ny; ++u)
        for (int64_t v = 0; v < nx; ++v)
          V::store(out + ((b * s.H + y0 + u) * s.W + x0 + v) * OC + c, V::add(y[u * 4 + v], bv));
    }
  }
}

// dM[xi][t][oc] = (A dY_t A^T)[xi], dY_t the output gradient's 4 x 4 block of tile t (zero
// outside the image): the gradient of the products' results, per tile (slices of ld tiles).
template <class V, bool Round>
void transform_output_grad_as(const float* dy, const ops::ConvShape& s, const Tiling& tl, int64_t t0, int64_t n,
                              int64_t ld, float* dM) {
  using R = typename V::reg;
  const int64_t OC = s.OC, stride_xi = ld * OC;
  R y[16], t[kT * 4], m[kXi];
  for (int64_t i = 0; i < n; ++i) {
    const int64_t tile = t0 + i, b = tile / tl.per_image, r = tile % tl.per_image;
    const int64_t y0 = r / tl.tx * 4, x0 = r % tl.tx * 4;
    const int64_t ny = std::min<int64_t>(4, s.H - y0), nx = std::min<int64_t>(4, s.W - x0);
    for (int64_t c = 0; c < OC; c += V::kLanes) {
      for (int64_t u = 0; u < 4; ++u)
        for (int64_t v = 0; v < 4; ++v)
          y[u * 4 + v] =
              u < ny && v < nx ? load<V, Round>(dy + ((b * s.H + y0 + u) * s.W + x0 + v) * OC + c) : V::zero();
      for (int v = 0; v < 4; ++v) output_grad_1d<V>(y + v, 4, t + v, 4);          // columns: A dY, 6 x 4
      for (int u = 0; u < kT; ++u) output_grad_1d<V>(t + u * 4, 1, m + u * kT, 1);  // rows: (A dY) A^T
      float* dst = dM + i * OC + c;
      for (int xi = 0; xi < kXi; ++xi) V::store(dst + xi * stride_xi, m[xi]);
    }
  }
}
template <class V>
void transform_output_grad(const float* dy, const ops::ConvShape& s, const Tiling& tl, int64_t t0, int64_t n,
                           int64_t ld, float* dM) {
  if (s.bf16) return transform_output_grad_as<V, true>(dy, s, tl, t0, n, ld, dM);
  transform_output_grad_as<V, false>(dy, s, tl, t0, n, ld, dM);
}

}  // namespace genperf::cpu::winograd
