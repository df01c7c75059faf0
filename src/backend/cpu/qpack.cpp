// The packed layout of qpack.h, as a table of fields per format (and a placement function where
// the fields are not stored in order): packing and unpacking walk the same granules.
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
constexpr Field kQ5_K[] = {{0, 2, 2, 0}, {2, 2, 2, 0}, {4, 12, 1, 0}, {16, 32, 4, 0}, {48, 128, 4, 0}};
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
      q4_k{256, 144, kQ4_K}, q5_k{256, 176, kQ5_K}, q6_k{256, 210, kQ6_K, place_q6_k};
  switch (wt) {
    case DType::Q4_0: return &q4_0;
    case DType::Q8_0: return &q8_0;
    case DType::Q4_K: return &q4_k;
    case DType::Q5_K: return &q5_k;
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

// Calls fn(offset in the row's unit, offset in the packed unit for row r, bytes, flip) for every
// granule of a unit: packing and unpacking are the same moves in opposite directions.
template <class Fn>
void each_granule(const PackFormat& f, int r, const Fn& fn) {
  for (int fi = 0; fi < int(f.fields.size()); ++fi) {
    const Field& fd = f.fields[size_t(fi)];
    for (int c = 0; c < fd.len / fd.gran; ++c) {
      const int at = f.place ? f.place(fi, c) : 16 * fd.off + kPackRows * fd.gran * c;
      fn(fd.off + c * fd.gran, at + r * fd.gran, fd.gran, fd.flip);
    }
  }
}

void copy_flipped(uint8_t* dst, const uint8_t* src, int n, uint8_t flip) {
  for (int i = 0; i < n; ++i) dst[i] = uint8_t(src[i] ^ flip);
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
    for (int64_t u = 0; u < units; ++u) {
      const uint8_t* src = w + size_t(n) * ldw + size_t(u) * f.unit_bytes;
      uint8_t* dst = group + size_t(u) * kPackRows * f.unit_bytes;
      each_granule(f, int(n % kPackRows), [&](int from, int to, int bytes, uint8_t flip) {
        copy_flipped(dst + to, src + from, bytes, flip);
      });
    }
  }
}

void unpack_row16(DType wt, const uint8_t* packed, int64_t n, int64_t K, uint8_t* row) {
  const PackFormat& f = need_format(wt, K);
  const int64_t units = K / f.unit;
  const size_t row_bytes = size_t(units) * size_t(f.unit_bytes);
  const uint8_t* group = packed + size_t(n / kPackRows) * kPackRows * row_bytes;
  for (int64_t u = 0; u < units; ++u) {
    const uint8_t* src = group + size_t(u) * kPackRows * f.unit_bytes;
    uint8_t* dst = row + size_t(u) * f.unit_bytes;
    each_granule(f, int(n % kPackRows), [&](int to, int from, int bytes, uint8_t flip) {
      copy_flipped(dst + to, src + from, bytes, flip);
    });
  }
}

}  // namespace genperf::cpu
