// The GPTQ code grids of the block formats (codec.h, CodeGrid): each block's step and offset per
// element, and its codes written back into the block's quant fields (the scales untouched).
#include <algorithm>
#include <cstdint>

#include "core/codec.h"
#include "core/codec_internal.h"
#include "genperf/dtype.h"

namespace genperf::codec {

using namespace detail;

namespace {

// Element e of these blocks is offset[e] + step[e] * code[e].
void grid_q8_0(const void* blk, float* step, float* offset) {
  const float d = h2f(static_cast<const BlockQ8_0*>(blk)->d);
  std::fill(step, step + kQK, d);
  std::fill(offset, offset + kQK, -127 * d);  // codes 0..254 are q = -127..127
}
void codes_q8_0(void* blk, const uint8_t* L) {
  auto& b = *static_cast<BlockQ8_0*>(blk);
  for (int j = 0; j < kQK; ++j) b.qs[j] = int8_t(int(L[j]) - 127);
}

template <typename Block, int kHalf>
void grid_sym32(const void* blk, float* step, float* offset) {
  const float d = h2f(static_cast<const Block*>(blk)->d);
  std::fill(step, step + kQK, d);
  std::fill(offset, offset + kQK, -kHalf * d);
}
template <typename Block>
void grid_offset32(const void* blk, float* step, float* offset) {
  const auto& b = *static_cast<const Block*>(blk);
  std::fill(step, step + kQK, h2f(b.d));
  std::fill(offset, offset + kQK, h2f(b.m));
}
template <typename Block>
void codes_nibbles32(void* blk, const uint8_t* L) { pack_nibbles32(L, static_cast<Block*>(blk)->qs); }
template <typename Block>
void codes_q5_32(void* blk, const uint8_t* L) {
  auto& b = *static_cast<Block*>(blk);
  pack_q5_32(L, b.qs, b.qh);
}

void grid_q2_k(const void* blk, float* step, float* offset) {
  const auto& b = *static_cast<const BlockQ2_K*>(blk);
  const float d = h2f(b.d), dmin = h2f(b.dmin);
  for (int e = 0; e < kQK_K; ++e) {
    step[e] = d * float(b.scales[e / 16] & 0xF);
    offset[e] = -(dmin * float(b.scales[e / 16] >> 4));
  }
}
void codes_q2_k(void* blk, const uint8_t* L) { pack_2bit256(L, static_cast<BlockQ2_K*>(blk)->qs); }

void grid_q3_k(const void* blk, float* step, float* offset) {
  const auto& b = *static_cast<const BlockQ3_K*>(blk);
  const float d = h2f(b.d);
  for (int e = 0; e < kQK_K; ++e) {
    step[e] = d * float(unpack_scale_q3_k(b.scales, e / 16));
    offset[e] = -4 * step[e];
  }
}
void codes_q3_k(void* blk, const uint8_t* L) { pack_q3_k_codes(L, *static_cast<BlockQ3_K*>(blk)); }

template <typename Block>
void grid_k4(const void* blk, float* step, float* offset) {
  const auto& b = *static_cast<const Block*>(blk);
  const float d = h2f(b.d), dmin = h2f(b.dmin);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, mn;
    unpack_scale_min_k4(b.scales, j, &sc, &mn);
    std::fill(step + 32 * j, step + 32 * j + 32, d * float(sc));
    std::fill(offset + 32 * j, offset + 32 * j + 32, -(dmin * float(mn)));
  }
}
void codes_q4_k(void* blk, const uint8_t* L) { pack_q4_k_codes(L, *static_cast<BlockQ4_K*>(blk)); }
void codes_q5_k(void* blk, const uint8_t* L) { pack_q5_k_codes(L, *static_cast<BlockQ5_K*>(blk)); }

void grid_q6_k(const void* blk, float* step, float* offset) {
  const auto& b = *static_cast<const BlockQ6_K*>(blk);
  const float d = h2f(b.d);
  for (int e = 0; e < kQK_K; ++e) {
    step[e] = d * float(b.scales[e / 16]);
    offset[e] = -32 * step[e];
  }
}
void codes_q6_k(void* blk, const uint8_t* L) { pack_q6_k_codes(L, *static_cast<BlockQ6_K*>(blk)); }

constexpr CodeGrid kGridQ8_0{255, grid_q8_0, codes_q8_0};
constexpr CodeGrid kGridQ4_0{16, grid_sym32<BlockQ4_0, 8>, codes_nibbles32<BlockQ4_0>};
constexpr CodeGrid kGridQ4_1{16, grid_offset32<BlockQ4_1>, codes_nibbles32<BlockQ4_1>};
constexpr CodeGrid kGridQ5_0{32, grid_sym32<BlockQ5_0, 16>, codes_q5_32<BlockQ5_0>};
constexpr CodeGrid kGridQ5_1{32, grid_offset32<BlockQ5_1>, codes_q5_32<BlockQ5_1>};
constexpr CodeGrid kGridQ2_K{4, grid_q2_k, codes_q2_k};
constexpr CodeGrid kGridQ3_K{8, grid_q3_k, codes_q3_k};
constexpr CodeGrid kGridQ4_K{16, grid_k4<BlockQ4_K>, codes_q4_k};
constexpr CodeGrid kGridQ5_K{32, grid_k4<BlockQ5_K>, codes_q5_k};
constexpr CodeGrid kGridQ6_K{64, grid_q6_k, codes_q6_k};

}  // namespace

const CodeGrid* code_grid(DType t) {
  switch (t) {
    case DType::Q8_0: return &kGridQ8_0;
    case DType::Q4_0: return &kGridQ4_0;
    case DType::Q4_1: return &kGridQ4_1;
    case DType::Q5_0: return &kGridQ5_0;
    case DType::Q5_1: return &kGridQ5_1;
    case DType::Q2_K: return &kGridQ2_K;
    case DType::Q3_K: return &kGridQ3_K;
    case DType::Q4_K: return &kGridQ4_K;
    case DType::Q5_K: return &kGridQ5_K;
    case DType::Q6_K: return &kGridQ6_K;
    default: return nullptr;
  }
}

}  // namespace genperf::codec
