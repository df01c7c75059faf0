// The gzip tiles of a tile-compressed image (ZCMPTYPE GZIP_1 or GZIP_2), checked with zlib before
// cfitsio decompresses them. cfitsio gunzips a tile into a buffer that it grows by realloc for as
// long as inflate asks for more room or for more input, so a stream that ends early (a gzip
// header whose extra field runs past the stream, say) makes it allocate without bound. Here each
// stream is read in chunks and inflated into a small scratch buffer, at most one byte past the
// tile's size: memory and work are bounded by the tile, whatever the stream says.
//
// Tiles (the FITS tiled-image convention): ZTILEi pixels along axis i (default: whole rows,
// ZTILE1 = ZNAXIS1, ZTILE2 = 1), the last tile of an axis cut to the image; row k of the table
// holds tile k, axis 1 fastest. A GZIP_1 tile inflates to its pixels as big-endian values of
// ZBITPIX's size (GZIP_2: the same bytes, shuffled), except that the quantized pixels of a float
// image (a ZSCALE column or keyword) are 4-byte integers.
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "genperf/error.h"
#include "io/fits_internal.h"

namespace genperf::fits_detail {
namespace {

constexpr long long kChunk = 1 << 16;  // compressed bytes read, and bytes inflated, at a time

// The number of the column named `name` (exactly, any case), or 0 when the table has none.
int column(fitsfile* f, const std::string& path, const char* name) {
  std::string templ = name;
  int st = 0, col = 0;
  fits_get_colnum(f, CASEINSEN, templ.data(), &col, &st);
  if (st == COL_NOT_FOUND) {
    fits_clear_errmsg();
    return 0;
  }
  if (st == COL_NOT_UNIQUE) {  // cfitsio itself takes the first of them
    fits_clear_errmsg();
    return col;
  }
  if (st) fail_read(path, cat("looking for the ", name, " column"), st);
  return col;
}

// zlib's stream, ended however the check leaves.
struct Inflater {
  z_stream zs{};
  bool open = false;
  ~Inflater() {
    if (open) inflateEnd(&zs);
  }
};

// What is wrong with the `length` compressed bytes of table row `row` (column `col`) as a gzip
// or zlib stream of exactly `want` bytes, or "" when nothing is.
std::string inflate_problem(fitsfile* f, const std::string& path, const std::string& where, int col,
                            long long row, long long length, long long want) {
  Inflater z;
  if (inflateInit2(&z.zs, 15 + 32) != Z_OK)  // 15 + 32: gzip or zlib header, detected
    fail("[fits] ", path, ": ", where, ": zlib could not start inflating (out of memory?)");
  z.open = true;
  std::vector<unsigned char> in(static_cast<size_t>(std::min(length, kChunk)));
  std::vector<unsigned char> out(static_cast<size_t>(kChunk));
  long long read = 0;
  for (;;) {
    if (z.zs.avail_in == 0 && read < length) {
      const long long n = std::min(kChunk, length - read);
      unsigned char nul = 0;
      int anynul = 0, st = 0;
      fits_read_col(f, TBYTE, col, row, read + 1, n, &nul, in.data(), &anynul, &st);
      if (st) fail_read(path, cat(where, ": reading its compressed bytes"), st);
      z.zs.next_in = in.data();
      z.zs.avail_in = uInt(n);
      read += n;
    }
    // Room for one byte more than the tile: a stream that goes on past it is caught there.
    z.zs.next_out = out.data();
    z.zs.avail_out = uInt(std::min(kChunk, want + 1 - (long long)z.zs.total_out));
    const int rc = inflate(&z.zs, Z_NO_FLUSH);
    const long long got = (long long)z.zs.total_out;
    if (got > want) return cat("the stream inflates to more than the tile's ", want, " bytes");
    if (rc == Z_STREAM_END) {
      if (got < want) return cat("the stream inflates to ", got, " bytes, the tile holds ", want);
      return "";
    }
    if (rc == Z_NEED_DICT) return "corrupt stream: it asks for a preset dictionary";
    if (rc == Z_DATA_ERROR)
      return cat("corrupt stream (zlib: ", z.zs.msg ? z.zs.msg : "invalid data", ") after ", got, " of ", want, " bytes");
    if (rc == Z_MEM_ERROR) fail("[fits] ", path, ": ", where, ": out of memory while inflating");
    // Z_OK or Z_BUF_ERROR: more input or more room wanted; with neither left, the stream is cut.
    if (rc == Z_BUF_ERROR && z.zs.avail_in == 0 && read == length)
      return cat("truncated stream: its ", length, " compressed bytes end before the stream does (", got, " of ",
                 want, " bytes inflated)");
  }
}

}  // namespace

void check_gzip_tiles(fitsfile* f, const std::string& path, int hdu, const long long naxes[2], int zbitpix) {
  std::string type;
  read_key(f, path, "ZCMPTYPE", type);
  if (type != "GZIP_1" && type != "GZIP_2") return;
  const int col = column(f, path, "COMPRESSED_DATA");
  if (col == 0) return;  // cfitsio refuses such a table itself
  const std::string hdu_text = cat("HDU ", hdu);
  int st = 0, typecode = 0;
  long long repeat = 0, width = 0;
  fits_get_coltypell(f, col, &typecode, &repeat, &width, &st);
  if (st) fail_read(path, cat("reading the COMPRESSED_DATA column of ", hdu_text), st);
  if (typecode != -TBYTE)
    fail("[fits] ", path, ": ", hdu_text, ": the COMPRESSED_DATA column of a ", type,
         " image is not a variable-length byte array (TFORM 1PB or 1QB)");

  long long tile[2] = {naxes[0], 1};
  for (int i = 0; i < 2; ++i) {
    const std::string key = cat("ZTILE", i + 1);
    read_key(f, path, key.c_str(), tile[i]);
    if (tile[i] < 1) fail("[fits] ", path, ": ", hdu_text, ": ", key, " = ", tile[i], ", a tile size must be positive");
  }
  // The heap: PCOUNT bytes after the table's rows, of which the first THEAP - NAXIS1 * NAXIS2 are a gap.
  long long row_bytes = 0, rows = 0, pcount = 0, table = 0;
  read_key(f, path, "NAXIS1", row_bytes);
  read_key(f, path, "NAXIS2", rows);
  read_key(f, path, "PCOUNT", pcount);
  if (row_bytes < 0 || rows < 0 || pcount < 0 || __builtin_mul_overflow(row_bytes, rows, &table))
    fail("[fits] ", path, ": ", hdu_text, ": bad table dimensions: NAXIS1 = ", row_bytes, ", NAXIS2 = ", rows,
         ", PCOUNT = ", pcount);
  long long theap = table;
  read_key(f, path, "THEAP", theap);
  if (theap < table || theap - table > pcount)
    fail("[fits] ", path, ": ", hdu_text, ": THEAP = ", theap, " puts the heap outside the table's data (", table,
         " bytes of rows, PCOUNT = ", pcount, ")");
  const long long heap = pcount - (theap - table);

  double scale = 0;
  const bool quantized = column(f, path, "ZSCALE") != 0 || read_key(f, path, "ZSCALE", scale);
  const long long bytes_per_pixel = zbitpix < 0 && quantized ? 4 : std::abs(zbitpix) / 8;
  const long long ntiles[2] = {(naxes[0] + tile[0] - 1) / tile[0], (naxes[1] + tile[1] - 1) / tile[1]};
  const long long count = ntiles[0] * ntiles[1];
  if (count > rows)
    fail("[fits] ", path, ": ", hdu_text, ": the table has ", rows, " rows for the image's ", count, " tiles");
  for (long long j = 0; j < ntiles[1]; ++j)
    for (long long i = 0; i < ntiles[0]; ++i) {
      const long long row = j * ntiles[0] + i + 1;
      const long long w = std::min(tile[0], naxes[0] - i * tile[0]), h = std::min(tile[1], naxes[1] - j * tile[1]);
      const std::string where = cat(hdu_text, ", tile ", row, " of ", count);
      long long length = 0, offset = 0;
      fits_read_descriptll(f, col, row, &length, &offset, &st);
      if (st) fail_read(path, cat(where, ": reading its descriptor"), st);
      // Stored otherwise (UNCOMPRESSED_DATA, or GZIP_COMPRESSED_DATA, which cfitsio gunzips into a
      // buffer of fixed size): nothing to check.
      if (length == 0) continue;
      if (length < 0 || offset < 0 || offset > heap || length > heap - offset)
        fail("[fits] ", path, ": ", where, ": its ", length, " compressed bytes at heap offset ", offset,
             " lie outside the table's ", heap, "-byte heap");
      const long long want = w * h * bytes_per_pixel;
      const std::string problem = inflate_problem(f, path, where, col, row, length, want);
      if (!problem.empty())
        fail("[fits] ", path, ": ", where, " (", w, " x ", h, " pixels of ZBITPIX ", zbitpix, ", ", type, "): ", problem);
    }
}

}  // namespace genperf::fits_detail
