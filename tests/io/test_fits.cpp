// FITS images (include/genperf/fits.h): round trips for each BITPIX, the reader's errors on bad
// files, the writer leaving nothing behind on failure, and astropy (Debian's python3-astropy) as
// the independent reader and WCS. Pixel coordinates are FITS's, 1-based: pixel i of N has its
// centre at i and covers [i - 0.5, i + 0.5]; output pixel x' of an image super-resolved by s sees
// the sky of input coordinate (x' - 0.5) / s + 0.5.
#include <gtest/gtest.h>
#include <zlib.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "common/test_util.h"
#include "genperf/error.h"
#include "genperf/fits.h"
#include "io_test_util.h"

using namespace genperf;
using genperf::testing::TempDir;

namespace {

std::string card(const std::string& text) {
  std::string c = text;
  c.resize(80, ' ');
  return c;
}

// A FITS file by hand: the header's cards (END added), padded to 2880 bytes, then `data` padded
// likewise (pass `pad_data = false` to leave it short).
std::string fits_file(const std::vector<std::string>& cards, const std::string& data, bool pad_data = true) {
  std::string s;
  for (const auto& c : cards) s += card(c);
  s += card("END");
  s.append((2880 - s.size() % 2880) % 2880, ' ');
  s += data;
  if (pad_data) s.append((2880 - s.size() % 2880) % 2880, '\0');
  return s;
}

std::string be_floats(const std::vector<float>& v) {
  std::string s;
  for (float x : v) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    for (int b = 3; b >= 0; --b) s += char((u >> (8 * b)) & 0xff);
  }
  return s;
}

std::vector<std::string> primary(int bitpix, std::vector<int> naxes) {
  std::vector<std::string> c = {"SIMPLE  =                    T", cat("BITPIX  = ", bitpix), cat("NAXIS   = ", naxes.size())};
  for (size_t i = 0; i < naxes.size(); ++i) c.push_back(cat("NAXIS", i + 1, "  = ", naxes[i]));
  return c;
}

// The message read_fits throws for `bytes` written to dir/name; checks that it names the file.
std::string read_error(const TempDir& dir, const std::string& bytes, const std::string& name = "bad.fits") {
  const std::string path = dir / name;
  genperf::testing::write_bytes(path, bytes);
  try {
    read_fits(path);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "read_fits accepted " << path;
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

// Values equal, NaN where NaN.
::testing::AssertionResult same_values(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " vs " << b.size() << " pixels";
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))))
      return ::testing::AssertionFailure() << "pixel " << i << ": " << a[i] << " vs " << b[i];
  return ::testing::AssertionSuccess();
}

FitsWcs cdelt_wcs() {
  FitsWcs w;
  w.ctype[0] = "GLON-CAR";
  w.ctype[1] = "GLAT-CAR";
  w.cunit[0] = w.cunit[1] = "deg";
  w.crpix[0] = 16.5, w.crpix[1] = 8.25;
  w.crval[0] = 120.0, w.crval[1] = -5.0;
  w.cdelt[0] = -0.05, w.cdelt[1] = 0.05;
  w.has_pc = true;
  const double a = 30 * M_PI / 180;
  w.pc[0][0] = std::cos(a), w.pc[0][1] = -std::sin(a), w.pc[1][0] = std::sin(a), w.pc[1][1] = std::cos(a);
  return w;
}

FitsWcs cd_wcs() {
  FitsWcs w;
  w.ctype[0] = "RA---TAN";
  w.ctype[1] = "DEC--TAN";
  w.crpix[0] = 10.0, w.crpix[1] = 12.5;
  w.crval[0] = 83.633, w.crval[1] = 22.0145;
  w.form = FitsWcs::Form::Cd;
  w.cd[0][0] = -0.002, w.cd[0][1] = 0.0007, w.cd[1][0] = 0.0005, w.cd[1][1] = 0.0021;
  return w;
}

void expect_same_wcs(const FitsWcs& a, const FitsWcs& b) {
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(a.ctype[i], b.ctype[i]);
    EXPECT_EQ(a.cunit[i], b.cunit[i]);
    EXPECT_EQ(a.crpix[i], b.crpix[i]);
    EXPECT_EQ(a.crval[i], b.crval[i]);
    EXPECT_EQ(a.cdelt[i], b.cdelt[i]);
    for (int j = 0; j < 2; ++j) {
      EXPECT_EQ(a.pc[i][j], b.pc[i][j]);
      EXPECT_EQ(a.cd[i][j], b.cd[i][j]);
    }
  }
  EXPECT_EQ(a.form, b.form);
  EXPECT_EQ(a.has_pc, b.has_pc);
  EXPECT_EQ(a.has_crota2, b.has_crota2);
  EXPECT_EQ(a.crota2, b.crota2);
}

// A width x height image of BITPIX `bitpix`: random values, a few NaNs, a WCS and extra cards.
FitsImage random_image(int bitpix, int64_t width, int64_t height, std::mt19937& rng) {
  FitsImage img;
  img.width = width, img.height = height, img.bitpix = bitpix;
  img.bunit = "MJy/sr";
  img.has_wcs = true;
  img.wcs = cdelt_wcs();
  img.cards = {card("OBJECT  = 'Taurus  '           / the field"), card("EQUINOX =               2000.0"),
               card("COMMENT a comment card"), card("HISTORY made by test_fits")};
  std::normal_distribution<double> normal(0, 3);
  std::uniform_int_distribution<int64_t> raw_dist(
      bitpix == 8 ? 0 : bitpix == 16 ? -32767 : bitpix == 32 ? -2000000000 : -(int64_t(1) << 50),
      bitpix == 8 ? 254 : bitpix == 16 ? 32767 : bitpix == 32 ? 2000000000 : int64_t(1) << 50);
  if (bitpix > 0) {
    img.bscale = bitpix == 8 ? 0.5 : bitpix == 64 ? 1.0 : 0.01;
    img.bzero = bitpix == 8 ? -64 : bitpix == 16 ? 100.0 : bitpix == 32 ? 3.0 : 0.0;
    img.has_blank = true;
    img.blank = bitpix == 8 ? 255 : bitpix == 16 ? -32768 : bitpix == 32 ? INT32_MIN : INT64_MIN;
  }
  img.pixels.resize(size_t(width * height));
  for (double& v : img.pixels) {
    if (bitpix == -32) v = double(float(normal(rng)));
    else if (bitpix == -64) v = normal(rng);
    else v = double(raw_dist(rng)) * img.bscale + img.bzero;
  }
  img.pixels[3] = img.pixels[size_t(width * height - 1)] = std::nan("");
  return img;
}

}  // namespace

TEST(Fits, RoundTripEachBitpix) {
  const unsigned seed = 2323;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  TempDir dir("fits");
  for (int bitpix : {-32, -64, 8, 16, 32, 64}) {
    SCOPED_TRACE(cat("BITPIX ", bitpix));
    const FitsImage in = random_image(bitpix, 33, 17, rng);
    const std::string a = dir / cat("a", bitpix, ".fits"), b = dir / cat("b", bitpix, ".fits");
    write_fits(a, {in});
    const FitsImage r1 = read_fits(a);
    write_fits(b, {r1});
    const FitsImage r2 = read_fits(b);
    for (const FitsImage* r : {&r1, &r2}) {
      EXPECT_EQ(r->width, 33);
      EXPECT_EQ(r->height, 17);
      EXPECT_EQ(r->bitpix, bitpix);
      EXPECT_EQ(r->bscale, in.bscale);
      EXPECT_EQ(r->bzero, in.bzero);
      EXPECT_EQ(r->has_blank, in.has_blank);
      EXPECT_EQ(r->blank, in.blank);
      EXPECT_EQ(r->bunit, "MJy/sr");
      EXPECT_TRUE(r->has_wcs);
      expect_same_wcs(r->wcs, in.wcs);
      EXPECT_EQ(r->cards, in.cards);
      if (bitpix < 0) {
        EXPECT_TRUE(same_bits(r->pixels, in.pixels));
      }
      EXPECT_TRUE(same_values(r->pixels, in.pixels));
    }
    // The second file is the first, byte for byte.
    EXPECT_EQ(genperf::testing::read_bytes(a), genperf::testing::read_bytes(b));
  }
}

TEST(Fits, FloatNanPayloadsAndExtensions) {
  TempDir dir("fits");
  FitsImage img;
  img.width = 3, img.height = 2, img.bitpix = -32;
  img.pixels = {1, 2, 3, 4, 5, 6};
  uint32_t payload = 0x7fc01234;
  float nanf;
  std::memcpy(&nanf, &payload, 4);
  img.pixels[1] = double(nanf);
  FitsImage sd = img;
  sd.name = "STDDEV";
  sd.bitpix = -64;
  sd.pixels = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6};
  const std::string path = dir / "two.fits";
  write_fits(path, {img, sd}, {{"genperf super-resolution x4", "second line"}, {{"GPMODEL", "dust-sr"}}});
  const FitsImage r = read_fits(path);  // the first 2-D image: the primary
  EXPECT_TRUE(same_bits(r.pixels, img.pixels));
  EXPECT_TRUE(std::isnan(r.pixels[1]));
  uint32_t back;
  const float f = float(r.pixels[1]);
  std::memcpy(&back, &f, 4);
  EXPECT_EQ(back, payload);
  bool history = false, key = false;
  for (const auto& c : r.cards) {
    history |= c.rfind("HISTORY genperf super-resolution x4", 0) == 0;
    key |= c.rfind("GPMODEL = 'dust-sr", 0) == 0;
  }
  EXPECT_TRUE(history);
  EXPECT_TRUE(key);
  // The extension alone: an empty primary before it is skipped.
  write_fits(dir / "primary.fits", {img});
  EXPECT_THROW(write_fits(dir / "badkey.fits", {img}, {{}, {{"lower", "x"}}}), Error);
  EXPECT_FALSE(std::filesystem::exists(dir / "badkey.fits"));
}

TEST(Fits, ReadsAnImageExtensionAfterAnEmptyPrimary) {
  TempDir dir("fits");
  std::vector<std::string> ext = {"XTENSION= 'IMAGE   '", "BITPIX  = -32", "NAXIS   = 2", "NAXIS1  = 2", "NAXIS2  = 2",
                                  "PCOUNT  = 0", "GCOUNT  = 1", "EXTNAME = 'DUST    '"};
  const std::string bytes =
      fits_file({"SIMPLE  =                    T", "BITPIX  = 8", "NAXIS   = 0", "EXTEND  = T"}, "") +
      fits_file(ext, be_floats({1.5f, -2.f, 3.f, 4.25f}));
  const std::string path = dir / "ext.fits";
  genperf::testing::write_bytes(path, bytes);
  const FitsImage r = read_fits(path);
  EXPECT_EQ(r.name, "DUST");
  EXPECT_EQ(r.pixels, (std::vector<double>{1.5, -2, 3, 4.25}));
  const FitsImage m = read_fits_bytes("mem", bytes.data(), bytes.size());
  EXPECT_EQ(m.pixels, r.pixels);
}

TEST(Fits, BadInputsAreNamedErrors) {
  TempDir dir("fits");
  const std::string ok = fits_file(primary(-32, {2, 2}), be_floats({1, 2, 3, 4}));
  // Missing, a directory, empty, not FITS.
  try {
    read_fits(dir / "missing.fits");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), dir / "missing.fits")) << e.what();
    EXPECT_TRUE(contains(e.what(), "cannot open")) << e.what();
  }
  EXPECT_TRUE(contains(read_error(dir, "", "empty.fits"), "empty file")) << read_error(dir, "", "empty.fits");
  std::string m = read_error(dir, std::string(4000, 'x'), "text.fits");
  EXPECT_TRUE(contains(m, "not a FITS file")) << m;
  // Truncated: in the header block, in the data.
  m = read_error(dir, ok.substr(0, 1000), "short_header.fits");
  EXPECT_TRUE(contains(m, "truncated")) << m;
  const std::string big = fits_file(primary(-32, {40, 40}), be_floats(std::vector<float>(1600, 1.f)));
  m = read_error(dir, big.substr(0, 2880 + 3000), "short_data.fits");
  EXPECT_TRUE(contains(m, "truncated")) << m;
  m = read_error(dir, fits_file(primary(-32, {2, 2}), be_floats({1, 2, 3, 4}), false), "unpadded.fits");
  EXPECT_TRUE(contains(m, "truncated file: 2896 bytes, not a whole number of 2880-byte blocks")) << m;
  // Header without END.
  std::string no_end;
  for (const auto& c : primary(-32, {2, 2})) no_end += card(c);
  no_end.append(2880 * 2 - no_end.size(), ' ');
  m = read_error(dir, no_end, "no_end.fits");
  EXPECT_TRUE(contains(m, "END") || contains(m, "truncated")) << m;
  // No image, 1-D, 3-D.
  m = read_error(dir, fits_file({"SIMPLE  =                    T", "BITPIX  = 8", "NAXIS   = 0"}, ""), "empty_primary.fits");
  EXPECT_TRUE(contains(m, "no image HDU")) << m;
  m = read_error(dir, fits_file(primary(-32, {4}), be_floats({1, 2, 3, 4})), "one_d.fits");
  EXPECT_TRUE(contains(m, "1-D image (NAXIS = 1)")) << m;
  m = read_error(dir, fits_file(primary(-32, {2, 2, 2}), be_floats({1, 2, 3, 4, 5, 6, 7, 8})), "three_d.fits");
  EXPECT_TRUE(contains(m, "3-D image (NAXIS = 3)")) << m;
  // Unsupported BITPIX.
  m = read_error(dir, fits_file(primary(12, {2, 2}), std::string(8, '\0')), "bitpix12.fits");
  EXPECT_TRUE(contains(m, "unsupported BITPIX")) << m;
  // All blank: float NaNs, and integers that are all BLANK.
  const float nan = std::nanf("");
  m = read_error(dir, fits_file(primary(-32, {2, 2}), be_floats({nan, nan, nan, nan})), "all_nan.fits");
  EXPECT_TRUE(contains(m, "all 4 pixels of the image are blank")) << m;
  auto blank16 = primary(16, {2, 1});
  blank16.push_back("BLANK   = -32768");
  m = read_error(dir, fits_file(blank16, std::string("\x80\x00\x80\x00", 4)), "all_blank.fits");
  EXPECT_TRUE(contains(m, "all 2 pixels of the image are blank")) << m;
  // An image larger than the limit is refused before anything is allocated.
  const std::string path = dir / "limit.fits";
  genperf::testing::write_bytes(path, ok);
  FitsReadOptions small;
  small.max_pixels = 3;
  EXPECT_THROW(read_fits(path, small), Error);
  EXPECT_EQ(read_fits(path).pixels, (std::vector<double>{1, 2, 3, 4}));
}

TEST(Fits, FailedWritesLeaveNoFile) {
  TempDir dir("fits");
  std::mt19937 rng(7);
  const FitsImage img = random_image(-32, 8, 8, rng);
  const std::string missing = dir / "no/such/dir/out.fits";
  try {
    write_fits(missing, {img});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), missing)) << e.what();
    EXPECT_TRUE(contains(e.what(), "cannot create")) << e.what();
  }
  // A value that BITPIX 16 cannot hold: the error names the pixel; no output, no temporary.
  FitsImage ints = random_image(16, 8, 8, rng);
  ints.pixels[9] = 1e9;
  const std::string path = dir / "ints.fits";
  try {
    write_fits(path, {ints});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), path)) << e.what();
    EXPECT_TRUE(contains(e.what(), "pixel (2, 2)")) << e.what();
  }
  // A size mismatch.
  FitsImage wrong = img;
  wrong.pixels.pop_back();
  EXPECT_THROW(write_fits(path, {wrong}), Error);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  // An existing file is replaced only when the new one is complete.
  write_fits(path, {img});
  const std::string before = genperf::testing::read_bytes(path);
  EXPECT_THROW(write_fits(path, {ints}), Error);
  EXPECT_EQ(genperf::testing::read_bytes(path), before);
}

namespace {

std::string be_int16s(const std::vector<int16_t>& v) {
  std::string s;
  for (int16_t x : v) s += char((uint16_t(x) >> 8) & 0xff), s += char(uint16_t(x) & 0xff);
  return s;
}

std::string be_int32(int32_t v) {
  std::string s;
  for (int b = 3; b >= 0; --b) s += char((uint32_t(v) >> (8 * b)) & 0xff);
  return s;
}

// `raw` as one gzip member (zlib's deflate with a gzip wrapper).
std::string gzip(const std::string& raw) {
  z_stream zs{};
  if (deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::abort();
  std::string out(deflateBound(&zs, uLong(raw.size())) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  zs.avail_in = uInt(raw.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = uInt(out.size());
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) std::abort();
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// A GZIP_1 tile-compressed image (ZBITPIX 16, BLANK -32768) of width x height pixels in tiles of
// ZTILE1 x ZTILE2, after an empty primary HDU: the table's row k holds a descriptor (length,
// heap offset) of streams[k], which follow one another in the heap. `heap_extra` is added to a
// descriptor's length, to point past the heap.
std::string gzip_image(int width, int height, int ztile1, int ztile2, const std::vector<std::string>& streams,
                       int heap_extra = 0) {
  std::string rows, heap;
  size_t longest = 0;
  for (const auto& st : streams) {
    rows += be_int32(int32_t(st.size()) + heap_extra) + be_int32(int32_t(heap.size()));
    heap += st;
    longest = std::max(longest, st.size());
  }
  const std::vector<std::string> table = {"XTENSION= 'BINTABLE'",
                                          "BITPIX  = 8",
                                          "NAXIS   = 2",
                                          "NAXIS1  = 8",
                                          cat("NAXIS2  = ", streams.size()),
                                          cat("PCOUNT  = ", heap.size()),
                                          "GCOUNT  = 1",
                                          "TFIELDS = 1",
                                          "TTYPE1  = 'COMPRESSED_DATA'",
                                          cat("TFORM1  = '1PB(", longest, ")'"),
                                          "ZIMAGE  =                    T",
                                          "ZBITPIX = 16",
                                          "ZNAXIS  = 2",
                                          cat("ZNAXIS1 = ", width),
                                          cat("ZNAXIS2 = ", height),
                                          cat("ZTILE1  = ", ztile1),
                                          cat("ZTILE2  = ", ztile2),
                                          "ZCMPTYPE= 'GZIP_1  '",
                                          "BLANK   = -32768"};
  return fits_file({"SIMPLE  =                    T", "BITPIX  = 8", "NAXIS   = 0", "EXTEND  = T"}, "") +
         fits_file(table, rows + heap);
}

// The stream of the fuzz finding fits-tile-amplification.fits: the gzip member of the 3 x 2
// int16 tile {1, 2, -3, 4, 5, -32768}, its flags byte changed to FEXTRA | FNAME, so that the header
// announces an extra field of 0x6063 bytes, longer than the stream. cfitsio's gunzip grew its
// buffer without end on it.
const char kAmplifyingTile[] =
    "\x1f\x8b\x08\x0c\x00\x00\x00\x00\x02\x03\x63\x60\x64\x60\xfa\xff"
    "\x97\x81\x85\x81\xb5\x81\x01\x00\xb6\x90\x87\x7f\x0c\x00\x00\x00";

}  // namespace

TEST(Fits, AmplifyingGzipTileIsRefusedFast) {
  TempDir dir("fits");
  const auto t0 = std::chrono::steady_clock::now();
  const std::string m =
      read_error(dir, gzip_image(3, 2, 3, 2, {std::string(kAmplifyingTile, 32)}), "tile-amplification.fits");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(contains(m, "HDU 2, tile 1 of 1 (3 x 2 pixels of ZBITPIX 16, GZIP_1): truncated stream")) << m;
  EXPECT_LT(seconds, 5.0) << m;  // it is refused before cfitsio's unbounded gunzip, not after
}

TEST(Fits, GzipTilesAreCheckedOneByOne) {
  TempDir dir("fits");
  const std::string pixels = be_int16s({1, 2, -3, 4, 5, -32768});
  // One tile: it reads, NaN for BLANK.
  const std::string one = gzip_image(3, 2, 3, 2, {gzip(pixels)});
  const std::string path = dir / "good.fits";
  genperf::testing::write_bytes(path, one);
  const FitsImage img = read_fits(path);
  EXPECT_EQ(img.width, 3);
  EXPECT_EQ(img.height, 2);
  EXPECT_TRUE(same_values(img.pixels, {1, 2, -3, 4, 5, std::nan("")}));
  EXPECT_TRUE(same_values(read_fits_bytes("mem", one.data(), one.size()).pixels, img.pixels));

  // Tiles of 2 x 1 over 3 x 2 pixels: rows of tiles {2, 1} pixels wide, 4 tiles in all.
  auto tiles = [&](const std::vector<std::vector<int16_t>>& t) {
    std::vector<std::string> s;
    for (const auto& v : t) s.push_back(gzip(be_int16s(v)));
    return s;
  };
  const std::vector<std::string> four = tiles({{1, 2}, {-3}, {4, 5}, {-32768}});
  genperf::testing::write_bytes(dir / "tiles.fits", gzip_image(3, 2, 2, 1, four));
  EXPECT_TRUE(same_values(read_fits(dir / "tiles.fits").pixels, img.pixels));

  // The last tile holds 1 pixel: 2 bytes, no more, no fewer.
  std::string m = read_error(dir, gzip_image(3, 2, 2, 1, tiles({{1, 2}, {-3}, {4, 5}, {7, 7}})), "long.fits");
  EXPECT_TRUE(contains(m, "HDU 2, tile 4 of 4 (1 x 1 pixels of ZBITPIX 16, GZIP_1): the stream inflates to more "
                          "than the tile's 2 bytes")) << m;
  std::vector<std::string> short_tile = four;
  short_tile[2] = gzip(std::string("\x00\x04\x00", 3));
  m = read_error(dir, gzip_image(3, 2, 2, 1, short_tile), "short.fits");
  EXPECT_TRUE(contains(m, "tile 3 of 4 (2 x 1 pixels of ZBITPIX 16, GZIP_1): the stream inflates to 3 bytes, the "
                          "tile holds 4")) << m;
  // A bad CRC, a stream cut short, a stream that is not gzip at all.
  std::string crc = gzip(pixels);
  crc[crc.size() - 6] ^= 0x55;
  m = read_error(dir, gzip_image(3, 2, 3, 2, {crc}), "crc.fits");
  EXPECT_TRUE(contains(m, "tile 1 of 1 (3 x 2 pixels of ZBITPIX 16, GZIP_1): corrupt stream (zlib: incorrect data "
                          "check)")) << m;
  m = read_error(dir, gzip_image(3, 2, 3, 2, {gzip(pixels).substr(0, 20)}), "cut.fits");
  EXPECT_TRUE(contains(m, "tile 1 of 1 (3 x 2 pixels of ZBITPIX 16, GZIP_1): truncated stream")) << m;
  m = read_error(dir, gzip_image(3, 2, 3, 2, {std::string(24, 'x')}), "text.fits");
  EXPECT_TRUE(contains(m, "tile 1 of 1 (3 x 2 pixels of ZBITPIX 16, GZIP_1): corrupt stream")) << m;
  // A descriptor pointing past the heap.
  m = read_error(dir, gzip_image(3, 2, 3, 2, {gzip(pixels)}, 1000), "past_heap.fits");
  EXPECT_TRUE(contains(m, "lie outside the table's")) << m;
}

namespace {

// `bytes` with the first occurrence of `from` (the start of a card) replaced by `to`, padded to
// the same length with blanks.
std::string edit_card(std::string bytes, const std::string& from, const std::string& to) {
  const size_t at = bytes.find(from);
  if (at == std::string::npos || to.size() > 80) std::abort();
  bytes.replace(at, 80, card(to));
  return bytes;
}

}  // namespace

// cfitsio 4.2 divides by ZTILEn (and a RICE_1 image's ZVAL1) as it moves to the HDU: a 0 there
// killed the process with SIGFPE (fuzz finding), as a long TTYPEn did with an abort. The header
// is checked before the move.
TEST(Fits, HeadersThatCrashCfitsioAreRefusedBeforeItReadsThem) {
  TempDir dir("fits");
  const std::string good = gzip_image(3, 2, 3, 2, {gzip(be_int16s({1, 2, -3, 4, 5, -32768}))});
  std::string m = read_error(dir, edit_card(good, "ZTILE2  = 2", "ZTILE2  = 0"), "ztile0.fits");
  EXPECT_TRUE(contains(m, "HDU 2: ZTILE2 = 0: a tile-compressed image's tile size must be a positive integer")) << m;
  m = read_error(dir, edit_card(good, "ZTILE1  = 3", "ZTILE1  = 2%"), "ztile_text.fits");
  EXPECT_TRUE(contains(m, "HDU 2: ZTILE1 = 2%: a tile-compressed image's tile size")) << m;
  const std::string rice =
      edit_card(edit_card(good, "ZCMPTYPE= 'GZIP_1  '", "ZCMPTYPE= 'RICE_1  '"), "BLANK   = -32768", "ZVAL1   = 0");
  m = read_error(dir, rice, "rice0.fits");
  EXPECT_TRUE(contains(m, "HDU 2: ZVAL1 = 0: a RICE_1 image's block size must be a positive integer")) << m;
  // No columns: cfitsio 4.2 read the compressed data through a column that is not there (SIGSEGV
  // in ffgdesll; fuzz finding).
  m = read_error(dir, edit_card(good, "TFIELDS = 1", "TFIELDS = 0"), "tfields0.fits");
  EXPECT_TRUE(contains(m, "HDU 2: TFIELDS = 0: a tile-compressed image's table has no columns")) << m;
  // The mandatory keywords out of their order or not integers: cfitsio 4.2 reads them by position
  // and took blanks for TFIELDS, asking calloc for 2^61 x 160 bytes (fuzz findings).
  m = read_error(dir, edit_card(good, "NAXIS2  =", "NAXIS2  =DATASUM"), "naxis_text.fits");
  EXPECT_TRUE(contains(m, "HDU 2: header card 5 is NAXIS2 = DATASUM where the standard puts NAXIS2 (an integer")) << m;
  m = read_error(dir, edit_card(good, "NAXIS2  =", "NAXIS\xf5   = 1"), "naxis_missing.fits");
  EXPECT_TRUE(contains(m, "where the standard puts NAXIS2 (an integer from 0 to")) << m;
  m = read_error(dir, edit_card(good, "GCOUNT  =", "COMMENT shifted"), "gcount.fits");
  EXPECT_TRUE(contains(m, "HDU 2: header card 7 is COMMENT where the standard puts GCOUNT (an integer from 1 to")) << m;
  // A table's column name of 70 characters (possible unquoted only): cfitsio 4.2 copies it into a
  // 70-byte field, and the fortified strcpy aborts.
  m = read_error(dir, edit_card(good, "TTYPE1  = 'COMPRESSED_DATA'", cat("TTYPE1  = ", std::string(70, 'x'))),
                 "ttype70.fits");
  EXPECT_TRUE(contains(m, "HDU 2: TTYPE1's value is 70 characters long, more than the 69 of a column name")) << m;
  // A keyword read as an integer whose value of more than 28 characters is not one: cfitsio 4.2's
  // ffc2j appends 30 of them to a 52-character message in 81 bytes, and the fortified strncat
  // aborts (fuzz finding: genperf's read of BLANK; cfitsio's own of ZDITHER0 while it opens the HDU).
  const std::string long_text = cat("'", std::string(40, 'x'), "'");
  auto blank = primary(16, {2, 1});
  blank.push_back(cat("BLANK   = ", long_text));
  m = read_error(dir, fits_file(blank, std::string("\x00\x01\x00\x02", 4)), "blank_text.fits");
  EXPECT_TRUE(contains(m, cat("HDU 1: BLANK = ", long_text, ": BLANK is read as an integer, and this value of 42"))) << m;
  m = read_error(dir, edit_card(good, "BLANK   = -32768", cat("ZDITHER0= ", long_text)), "zdither_text.fits");
  EXPECT_TRUE(contains(m, "HDU 2: ZDITHER0 = 'xxx")) << m;
  // A quoted value's doubled quote is one character of it, not its end.
  m = read_error(dir, edit_card(good, "BLANK   = -32768", cat("ZDITHER0= 'a''", std::string(30, 'x'), "'")),
                 "zdither_quote.fits");
  EXPECT_TRUE(contains(m, "value of 35 characters")) << m;
  // A long value that is an integer is read.
  auto padded = primary(16, {2, 1});
  padded.push_back("BLANK   = -32768                                  / a comment of some length");
  const std::string padded_file = fits_file(padded, std::string("\x00\x01\x00\x02", 4));
  EXPECT_NO_THROW(read_fits_bytes("padded", padded_file.data(), padded_file.size()));
  // The same bytes from memory.
  const std::string zero = edit_card(good, "ZTILE2  = 2", "ZTILE2  = 0");
  EXPECT_THROW(read_fits_bytes("mem", zero.data(), zero.size()), Error);
}

TEST(Fits, ScaleWcsAndUnits) {
  const FitsWcs w = cdelt_wcs();
  const FitsWcs s = scale_wcs(w, 4);
  EXPECT_EQ(s.crpix[0], 4 * (16.5 - 0.5) + 0.5);
  EXPECT_EQ(s.crpix[1], 4 * (8.25 - 0.5) + 0.5);
  EXPECT_EQ(s.cdelt[0], -0.0125);
  EXPECT_EQ(s.crval[0], w.crval[0]);
  EXPECT_EQ(s.pc[0][1], w.pc[0][1]);
  const FitsWcs c = scale_wcs(cd_wcs(), 2);
  EXPECT_EQ(c.cd[0][1], 0.00035);
  EXPECT_THROW(scale_wcs(w, 0), Error);
  for (const char* u : {"Jy/pixel", "counts / pix", "MJY/PX", "Jy pixel-1", "erg/s/cm2/pixel", "Jy pix**-1"})
    EXPECT_TRUE(bunit_per_pixel(u)) << u;
  for (const char* u : {"MJy/sr", "K_CMB", "K", "", "Jy/beam", "mag", "Jy pixel-10", "1/cm2"})
    EXPECT_FALSE(bunit_per_pixel(u)) << u;
  EXPECT_EQ(bunit_scale_factor("Jy/pixel", 4), 1.0 / 16);
  EXPECT_EQ(bunit_scale_factor("MJy/sr", 4), 1.0);
}

namespace {

bool have_astropy() {
  return genperf::testing::run_command(cat(GENPERF_PYTHON, " -c 'import astropy.wcs' 2>/dev/null")) == 0;
}

std::vector<double> read_doubles(const std::string& path) {
  const std::string b = genperf::testing::read_bytes(path);
  std::vector<double> v(b.size() / 8);
  std::memcpy(v.data(), b.data(), v.size() * 8);
  return v;
}

std::string ref_script() { return cat(GENPERF_PYTHON, " ", GENPERF_TEST_DIR, "/io/fits_ref.py"); }

}  // namespace

TEST(Fits, ReadsWhatAstropyWrites) {
  if (!have_astropy()) GTEST_SKIP() << "python3-astropy is not installed for " << GENPERF_PYTHON << " (scripts/deps.sh)";
  const unsigned seed = 2324;
  std::printf("seed %u\n", seed);
  TempDir dir("fits");
  std::string out;
  ASSERT_EQ(genperf::testing::run_command(cat(ref_script(), " write ", dir.path(), " ", seed, " 2>&1"), &out), 0) << out;

  const FitsImage i16 = read_fits(dir / "int16.fits");
  EXPECT_EQ(i16.bitpix, 16);
  EXPECT_EQ(i16.bscale, 0.25);
  EXPECT_EQ(i16.bzero, 1000.0);
  EXPECT_TRUE(i16.has_blank);
  EXPECT_EQ(i16.blank, -32768);
  EXPECT_EQ(i16.bunit, "MJy/sr");
  EXPECT_EQ(i16.width, 11);
  EXPECT_EQ(i16.height, 7);
  const std::vector<double> want16 = read_doubles(dir / "int16.expected");
  EXPECT_TRUE(same_values(i16.pixels, want16));
  EXPECT_TRUE(std::isnan(i16.pixels[2 * 11 + 3]));
  // Written back with BITPIX 16, BSCALE, BZERO and BLANK, astropy still reads the same values.
  write_fits(dir / "int16_back.fits", {i16});
  const FitsImage back = read_fits(dir / "int16_back.fits");
  EXPECT_TRUE(same_values(back.pixels, want16));

  const FitsImage f32 = read_fits(dir / "float32_cd.fits");
  EXPECT_EQ(f32.bitpix, -32);
  EXPECT_EQ(f32.name, "DUST");
  EXPECT_EQ(f32.width, 13);
  EXPECT_EQ(f32.height, 9);
  EXPECT_TRUE(same_values(f32.pixels, read_doubles(dir / "float32_cd.expected")));
  ASSERT_TRUE(f32.has_wcs);
  EXPECT_EQ(f32.wcs.form, FitsWcs::Form::Cd);
  EXPECT_EQ(f32.wcs.ctype[0], "RA---TAN");
  EXPECT_EQ(f32.wcs.crpix[1], 4.25);
  EXPECT_EQ(f32.wcs.crval[0], 83.633);
  EXPECT_EQ(f32.wcs.cd[0][1], 0.0004);
  EXPECT_EQ(f32.wcs.cd[1][0], 0.0003);
  bool radesys = false;
  for (const auto& c : f32.cards) radesys |= c.rfind("RADESYS = 'ICRS", 0) == 0;
  EXPECT_TRUE(radesys);

  // Tile-compressed (RICE, GZIP_1 and GZIP_2, whose tiles genperf inflates first) and
  // gzip-compressed files, opened through cfitsio too.
  for (const char* name : {"rice.fits", "gzip1.fits", "gzip2.fits", "gzip.fits.gz"}) {
    SCOPED_TRACE(name);
    const FitsImage c = read_fits(dir / name);
    EXPECT_EQ(c.bitpix, 16);
    EXPECT_EQ(c.width, 11);
    EXPECT_TRUE(same_values(c.pixels, want16));
    for (const auto& card : c.cards) EXPECT_NE(card.substr(0, 1), "Z") << card;  // no compression keywords
  }
  // Quantized float64 tiles inflate to 4-byte integers, not 8-byte floats.
  const FitsImage q = read_fits(dir / "float64_gzip2.fits");
  EXPECT_EQ(q.bitpix, -64);
  const std::vector<double> want_q = read_doubles(dir / "float64_gzip2.expected");
  ASSERT_EQ(q.pixels.size(), want_q.size());
  for (size_t i = 0; i < want_q.size(); ++i) EXPECT_NEAR(q.pixels[i], want_q[i], 1e-9 * std::abs(want_q[i])) << i;
}

TEST(Fits, ScaledWcsMatchesAstropy) {
  if (!have_astropy()) GTEST_SKIP() << "python3-astropy is not installed for " << GENPERF_PYTHON << " (scripts/deps.sh)";
  const unsigned seed = 2325;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  TempDir dir("fits");
  const int s = 4;
  for (const FitsWcs& w : {cdelt_wcs(), cd_wcs()}) {
    SCOPED_TRACE(w.ctype[0]);
    FitsImage in = random_image(-32, 24, 18, rng);
    in.wcs = w;
    FitsImage out = in;
    out.width *= s, out.height *= s;
    out.pixels.assign(size_t(out.width * out.height), 1.0);
    out.wcs = scale_wcs(w, s);
    write_fits(dir / "in.fits", {in});
    write_fits(dir / "out.fits", {out});
    std::string msg;
    const int rc = genperf::testing::run_command(
        cat(ref_script(), " check ", dir / "in.fits", " ", dir / "out.fits", " ", s, " 2>&1"), &msg);
    std::printf("%s", msg.c_str());
    EXPECT_EQ(rc, 0) << msg;
  }
}
