// Linear weights of the block formats repacked for the integer kernels (Layout::kRows16): Q4_0,
// Q8_0, Q4_K, Q5_K and Q6_K (the others stay in their row layout), rows
// interleaved in groups of 16, so that one 512-bit load holds the same 4 bytes of 16 rows and
// vpdpbusd sums each row's products in its own int32 lane. The GEMV then needs no reduction
// across lanes and no per-row work: per 16 rows it loads the packed bytes, unpacks them in
// registers (one AND, or a shift and an AND per nibble half) and multiplies them with 4
// activation bytes broadcast to every lane. The bytes are the stored ones, reordered: the
// weights stay as compressed as in the file (Q8_0's quants are stored with their top bit
// flipped, u = w + 128, the unsigned operand vpdpbusd takes). AVX2 reads the same layout, a
// 64-byte piece as two vectors of 8 rows, with vpmaddubsw + vpmaddwd in place of vpdpbusd (and
// Q8_0's bit flipped back, for the sign trick).
//
// Layout. A group of 16 rows holds 16 x (row bytes): its rows' units one after another (unit:
// two blocks of 32 for Q4_0 and Q8_0, a super-block of 256 for the K-quants), each unit as 16
// copies of the unit's bytes reordered field by field: a field of `len` bytes at offset `off`
// of the unit is cut into chunks of `gran` bytes, and chunk c of the 16 rows is stored as
// [16 rows][gran bytes], by default at 16 * off + 16 * gran * c within the packed unit:
//   Q4_K (144 bytes)  d 0,2,2     dmin 2,2,2   scales 4,12,1   qs 16,128,4   (offset, length, granule)
//   Q5_K (176 bytes)  d 0,2,2     dmin 2,2,2   scales 4,12,1   qh 16,32,4   qs 48,128,4
// Q4_0 and Q8_0 take blocks in pairs, so that every 64-byte load of a group (64-byte aligned
// when K is a multiple of 64) lies within one cache line: the two blocks' d at 0 and 32, then
// the first block's quants (chunks of 4 bytes at 64 + 64c), then the second's. Q8_0's quants are
// stored with their top bit flipped.
// Q6_K (210 bytes: ql 0,128,4  qh 128,64,4  scales 192,16,1  d 208,2,2) is placed in the order
// its kernel reads it, so that each thread's reads stay one ascending stream: d at 0, the
// scales at 32 (chunk c at 32 + 16c), then for half h = 0, 1 and step kk = 0..7 a 192-byte
// piece at 288 + 192 (8h + kk) holding ql chunks 16h + kk and 16h + 8 + kk and qh chunk
// 8h + kk. (The field-order layout, whose reads jump between ql, qh and the scales within each
// 3360-byte unit, ran at 16-23 GB/s from memory where the stored rows ran at 44-54.)
// The number of rows must be a multiple of 16 (other weights stay in their row layout).
#pragma once
#include <cstddef>
#include <cstdint>

#include "genperf/dtype.h"

namespace genperf::cpu {

constexpr int kPackRows = 16;

// True where the type has a packed layout for rows of K elements (K a multiple of its unit: 64
// for Q4_0 and Q8_0, 256 for Q4_K, Q5_K and Q6_K).
bool packable(DType wt, int64_t K);

// Packs rows [0, N) (N a multiple of 16) of K elements, ldw bytes apart, into `out`
// (N x row bytes, contiguous).
void pack_rows16(DType wt, const uint8_t* w, size_t ldw, int64_t N, int64_t K, uint8_t* out);

// Row n of a packed weight of N x K back in the stored layout (row bytes into `row`).
void unpack_row16(DType wt, const uint8_t* packed, int64_t n, int64_t K, uint8_t* row);

}  // namespace genperf::cpu
