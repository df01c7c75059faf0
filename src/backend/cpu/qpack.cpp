// The packed layout of qpack.h, as a table of fields per format: packing and unpacking are the
// same byte moves in opposite directions.
#include "backend/cpu/qpack.h"

#include <cstring>
#include <span>

#include "genperf/error.h"

namespace genperf::cpu {
namespace {

struct Field {
  int off, len, gran;
  uint8_t flip;  // xor applied to every byte (Q8_0's quants: 0x80)
};

struct PackFormat {
  int unit;        // elements per unit
  int unit_bytes;  // bytes of one row's unit
  std::span<const Field> fields;
  // Offset in the packed unit of chunk c (gran bytes x 16 rows) of field i; null: the fields in
  // order, each [chunk][row][gran] (16 * off + 16 * gran * c).
  int (*place)(int i, int c) = nullptr;
};

// Q4_0 and Q8_0 in pairs of blocks: both blocks' d, then block 0's quants, then block 1's.
constexpr Field kQ4_0[] = {{0, 2, 2, 0}, {18, 2, 2, 0}, {2, 16, 4, 0}, {20, 16, 4, 0}};
constexpr Field kQ8_0[] = {{0, 2, 2, 0}, {34, 2, 2, 0}, {2, 32, 4, 0x80}, {36, 32, 4, 0x80}};
template <int kQsBytes>
int place_pair(int i, int c) {
  return i < 2 ? 32 * i : 64 + 16 * kQsBytes * (i - 2) + 64 * c;
}

constexpr Field kQ4_K[] = {{0, 2, 2, 0}, {2, 2, 2, 0}, {4, 12, 1, 0}, {16, 128, 4, 0}};
constexpr Field kQ6_K[] = {{208, 2, 2, 0}, {192, 16, 1, 0}, {0, 128, 4, 0}, {128, 64, 4, 0}};

// Q6_K in the order the kernels read it (qpack.h): d, the scales, then per half h and step kk
// the ql chunks 16h + kk and 16h + 8 + kk and the qh chunk 8h + kk, 192 bytes together.
int place_q6_k(int i, int c) {
  switch (i) {
    case 0: return 0;
    case 1: return 32 + 16 * c;
    case 2: return 288 + (8 * (c / 16) + c % 8) * 192 + 64 * (c % 16 / 8);
    default: return 288 + (8 * (c / 8) + c % 8) * 192 + 128;
  }
}

const PackFormat* format_of(DType wt) {
  static const PackFormat q4_0{64, 36, kQ4_0, place_pair<16>}, q8_0{64, 68, kQ8_0, place_pair<32>},
      q4_k{256, 144, kQ4_K}, q6_k{256, 210, kQ6_K, place_q6_k};
  switch (wt) {
    case DType::Q4_0: return &q4_0;
    case DType::Q8_0: return &q8_0;
    case DType::Q4_K: return &q4_k;
    case DType::Q6_K: return &q6_k;
    default: return nullptr;
  }
}

const PackFormat& need_format(DType wt, int64_t K) {
  const PackFormat* f = format_of(wt);
  GP_CHECK(f, "[qpack] no packed layout for ", dtype_name(wt));
  GP_CHECK(K % f->unit == 0, "[qpack] rows of ", K, " ", dtype_name(wt), " elements are not whole blocks");
  return *f;
}

// Moves the bytes of one row's unit (`block`) to or from its place in a packed unit (`pu`), row
// r of 16.
template <bool kPack>
void move_unit(const PackFormat& f, uint8_t* block, uint8_t* pu, int r) {
  for (int fi = 0; fi < int(f.fields.size()); ++fi) {
    const Field& fd = f.fields[size_t(fi)];
    for (int c = 0; c < fd.len / fd.gran; ++c) {
      const int at = f.place ? f.place(fi, c) : 16 * fd.off + kPackRows * fd.gran * c;
      uint8_t* p = pu + at + r * fd.gran;
      uint8_t* b = block + fd.off + c * fd.gran;
      for (int i = 0; i < fd.gran; ++i) {
        if constexpr (kPack)
          p[i] = uint8_t(b[i] ^ fd.flip);
        else
          b[i] = uint8_t(p[i] ^ fd.flip);
      }
    }
  }
}

}  // namespace

bool packable(DType wt, int64_t K) {
  const PackFormat* f = format_of(wt);
  return f && K > 0 && K % f->unit == 0;
}

void pack_rows16(DType wt, const uint8_t* w, size_t ldw, int64_t N, int64_t K, uint8_t* out) {
  const PackFormat& f = need_format(wt, K);
  GP_CHECK(N % kPackRows == 0, "[qpack] ", N, " rows are not a multiple of ", kPackRows);
  const int64_t units = K / f.unit;
  const size_t row_bytes = size_t(units) * size_t(f.unit_bytes);
  for (int64_t n = 0; n < N; ++n) {
    uint8_t* group = out + size_t(n / kPackRows) * kPackRows * row_bytes;
    for (int64_t u = 0; u < units; ++u)
      move_unit<true>(f, const_cast<uint8_t*>(w + size_t(n) * ldw + size_t(u) * f.unit_bytes),
                      group + size_t(u) * kPackRows * f.unit_bytes, int(n % kPackRows));
  }
}

void unpack_row16(DType wt, const uint8_t* packed, int64_t n, int64_t K, uint8_t* row) {
  const PackFormat& f = need_format(wt, K);
  const int64_t units = K / f.unit;
  const size_t row_bytes = size_t(units) * size_t(f.unit_bytes);
  const uint8_t* group = packed + size_t(n / kPackRows) * kPackRows * row_bytes;
  for (int64_t u = 0; u < units; ++u)
    move_unit<false>(f, row + size_t(u) * f.unit_bytes,
                     const_cast<uint8_t*>(group + size_t(u) * kPackRows * f.unit_bytes),
                     int(n % kPackRows));
}

}  // namespace genperf::cpu
