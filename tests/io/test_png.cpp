// PNG images (include/genperf/png.h): 8- and 16-bit gray round trips within half a quantization
// step, every colour type and depth read as stored (files made here byte by byte with zlib, and
// by Pillow, Debian's python3-pil, as the independent writer and reader), the reader's errors on
// bad files, the writer leaving nothing behind, the luminance weights and the asinh stretch.
#include <gtest/gtest.h>
#include <zlib.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>

#include "common/test_util.h"
#include "genperf/error.h"
#include "genperf/png.h"
#include "io_test_util.h"

using namespace genperf;
using genperf::testing::TempDir;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string be32(uint32_t v) {
  std::string s;
  for (int b = 3; b >= 0; --b) s += char((v >> (8 * b)) & 0xff);
  return s;
}

// One chunk: length, type, data, CRC-32 of type and data.
std::string chunk(const std::string& type, const std::string& data) {
  const std::string body = type + data;
  const uLong crc = crc32(0, reinterpret_cast<const Bytef*>(body.data()), uInt(body.size()));
  return be32(uint32_t(data.size())) + body + be32(uint32_t(crc));
}

const std::string kSignature = "\x89PNG\r\n\x1a\n";

// A PNG by hand: IHDR, the `extra` chunks (PLTE, tRNS), one IDAT holding `scanlines` (each row a
// filter byte, then the packed samples) deflated by zlib, and IEND.
std::string png_file(uint32_t w, uint32_t h, int depth, int color_type, const std::string& scanlines,
                     const std::string& extra = "") {
  std::string ihdr = be32(w) + be32(h);
  ihdr += char(depth);
  ihdr += char(color_type);
  ihdr += std::string(3, '\0');  // deflate, adaptive filtering, no interlace
  uLongf n = compressBound(uLong(scanlines.size()));
  std::string z(n, '\0');
  if (compress2(reinterpret_cast<Bytef*>(z.data()), &n, reinterpret_cast<const Bytef*>(scanlines.data()),
                uLong(scanlines.size()), 9) != Z_OK)
    std::abort();
  z.resize(n);
  return kSignature + chunk("IHDR", ihdr) + extra + chunk("IDAT", z) + chunk("IEND", "");
}

// The message read_png throws for `bytes` written to dir/name; checks that it names the file.
std::string read_error(const TempDir& dir, const std::string& bytes, const std::string& name,
                       const PngReadOptions& options = {}) {
  const std::string path = dir / name;
  genperf::testing::write_bytes(path, bytes);
  try {
    read_png(path, options);
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), path)) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "read_png accepted " << path;
  return "";
}

PngImage read_back(const TempDir& dir, const std::string& bytes, const std::string& name) {
  genperf::testing::write_bytes(dir / name, bytes);
  PngImage img = read_png(dir / name);
  const PngImage mem = read_png_bytes(name, bytes.data(), bytes.size());
  EXPECT_EQ(mem.v, img.v);
  return img;
}

}  // namespace

TEST(Png, GrayRoundTripWithinHalfAStep) {
  const unsigned seed = 4041;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  TempDir dir("png");
  const int64_t h = 17, w = 33;  // odd sizes: no row is a multiple of anything
  for (int depth : {8, 16}) {
    SCOPED_TRACE(cat("bit depth ", depth));
    const double top = depth == 8 ? 255.0 : 65535.0;
    std::vector<double> v(size_t(h * w));
    for (size_t i = 0; i < v.size(); ++i) v[i] = i % 3 == 0 ? std::round(u(rng) * top) / top : u(rng);
    v[0] = 0, v[1] = 1, v[2] = -0.25, v[3] = 1.5, v[4] = std::nan(""), v[5] = 0.75 / top;
    const std::string path = dir / cat("gray", depth, ".png");
    write_png_gray(path, h, w, v, depth);
    const PngImage r = read_png(path);
    EXPECT_EQ(r.h, h);
    EXPECT_EQ(r.w, w);
    EXPECT_EQ(r.channels, 1);
    EXPECT_EQ(r.bit_depth, depth);
    EXPECT_FALSE(r.has_alpha);
    ASSERT_EQ(r.v.size(), v.size());
    EXPECT_EQ(r.v[2], 0.0);  // clamped
    EXPECT_EQ(r.v[3], 1.0);
    EXPECT_EQ(r.v[4], 0.0);        // NaN
    EXPECT_EQ(r.v[5], 1.0 / top);  // to the nearest step
    for (size_t i = 0; i < v.size(); ++i) {
      if (i >= 2 && i <= 5) continue;
      EXPECT_LE(std::abs(r.v[i] - v[i]), 0.5 / top + 1e-15) << i;
      if (i % 3 == 0) {
        EXPECT_EQ(r.v[i], v[i]) << i;  // on the grid: exact
      }
      EXPECT_EQ(r.v[i], std::round(r.v[i] * top) / top) << i;
    }
    // Written again from what was read: the same file.
    write_png_gray(dir / "again.png", h, w, r.v, depth);
    EXPECT_EQ(genperf::testing::read_bytes(dir / "again.png"), genperf::testing::read_bytes(path));
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    EXPECT_FALSE(contains(entry.path().string(), ".tmp.")) << entry.path();  // no temporary left
}

TEST(Png, EveryColourTypeAndDepthAsStored) {
  TempDir dir("png");
  // 2-bit gray, two rows of 3 pixels: 0 1 2 / 3 2 1, packed from the high bits.
  PngImage g = read_back(dir, png_file(3, 2, 2, 0, std::string("\0\x18\0\xe4", 4)), "gray2.png");
  EXPECT_EQ(g.bit_depth, 2);
  EXPECT_EQ(g.v, (std::vector<double>{0, 1.0 / 3, 2.0 / 3, 1, 2.0 / 3, 1.0 / 3}));
  // 16-bit RGB, big-endian in the file: the byte order is libpng's to undo.
  const std::string rgb16("\0\x01\x02\xff\xff\x00\x00\x80\x00\x00\x01\x12\x34", 13);
  g = read_back(dir, png_file(2, 1, 16, 2, rgb16), "rgb16.png");
  EXPECT_EQ(g.channels, 3);
  EXPECT_EQ(g.bit_depth, 16);
  EXPECT_EQ(g.v, (std::vector<double>{0x0102 / 65535.0, 1, 0, 0x8000 / 65535.0, 1 / 65535.0, 0x1234 / 65535.0}));
  // 16-bit gray + alpha: the alpha is dropped and noted.
  g = read_back(dir, png_file(2, 1, 16, 4, std::string("\0\x12\x34\xff\xff\xab\xcd\x00\x00", 9)), "ga16.png");
  EXPECT_EQ(g.channels, 1);
  EXPECT_TRUE(g.has_alpha);
  EXPECT_EQ(g.v, (std::vector<double>{0x1234 / 65535.0, 0xabcd / 65535.0}));
  // A 1-bit palette of two colours, with transparency (tRNS): RGB, alpha noted.
  const std::string plte = chunk("PLTE", std::string("\x10\x20\x30\xf0\xe0\xd0", 6)) + chunk("tRNS", std::string("\x00", 1));
  g = read_back(dir, png_file(3, 1, 1, 3, std::string("\0\x40", 2), plte), "palette1.png");
  EXPECT_EQ(g.channels, 3);
  EXPECT_EQ(g.bit_depth, 8);
  EXPECT_TRUE(g.has_alpha);
  EXPECT_EQ(g.v, (std::vector<double>{0x10 / 255.0, 0x20 / 255.0, 0x30 / 255.0, 0xf0 / 255.0, 0xe0 / 255.0, 0xd0 / 255.0,
                                      0x10 / 255.0, 0x20 / 255.0, 0x30 / 255.0}));
  // Filtered rows (Sub, Up) are libpng's to undo too.
  g = read_back(dir, png_file(3, 2, 8, 0, std::string("\x01\x0a\x05\x05\x02\x01\x01\x01", 8)), "filtered.png");
  EXPECT_EQ(g.v, (std::vector<double>{10 / 255.0, 15 / 255.0, 20 / 255.0, 11 / 255.0, 16 / 255.0, 21 / 255.0}));
}

TEST(Png, BadFilesAreNamedErrors) {
  TempDir dir("png");
  std::string rows;
  for (int y = 0; y < 3; ++y) rows += std::string("\0\x07\x07\x07\x07", 5);  // filter None, 4 samples
  const std::string good = png_file(4, 3, 8, 0, rows);
  try {
    read_png(dir / "missing.png");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), dir / "missing.png")) << e.what();
    EXPECT_TRUE(contains(e.what(), "cannot open")) << e.what();
  }
  std::string m = read_error(dir, "", "empty.png");
  EXPECT_TRUE(contains(m, "empty file")) << m;
  m = read_error(dir, "GIF89a, not a PNG at all", "text.png");
  EXPECT_TRUE(contains(m, "not a PNG file")) << m;
  m = read_error(dir, good.substr(0, 5), "sig.png");
  EXPECT_TRUE(contains(m, "truncated file: 5 bytes")) << m;
  // Cut in the header, in the pixels, before IEND.
  for (size_t cut : {size_t(20), good.size() - 20, good.size() - 6}) {
    m = read_error(dir, good.substr(0, cut), cat("cut", cut, ".png"));
    EXPECT_TRUE(contains(m, "truncated file")) << m;
  }
  // A bad CRC on IHDR, and on IDAT.
  std::string crc = good;
  crc[8 + 8 + 13] ^= 1;
  m = read_error(dir, crc, "crc.png");
  EXPECT_TRUE(contains(m, "corrupt or unsupported PNG: IHDR: CRC error")) << m;
  crc = good;
  crc[crc.size() - 12 - 1] ^= 1;
  m = read_error(dir, crc, "idat_crc.png");
  EXPECT_TRUE(contains(m, "corrupt or unsupported PNG")) << m;
  // Too few pixels in IDAT.
  m = read_error(dir, png_file(4, 3, 8, 0, std::string(5, '\0')), "short_idat.png");
  EXPECT_TRUE(contains(m, "corrupt or unsupported PNG")) << m;
  // An invalid IHDR: 0 wide, depth 3.
  m = read_error(dir, png_file(0, 3, 8, 0, ""), "zero.png");
  EXPECT_TRUE(contains(m, "corrupt or unsupported PNG")) << m;
  m = read_error(dir, png_file(4, 3, 3, 0, std::string(15, '\0')), "depth3.png");
  EXPECT_TRUE(contains(m, "corrupt or unsupported PNG")) << m;
  // Too large: refused from the header, before any pixel is allocated (the IDAT is tiny).
  m = read_error(dir, png_file(70000, 1, 8, 0, ""), "wide.png");
  EXPECT_TRUE(contains(m, "the image is 70000 x 1 pixels, more than 65536 on a side")) << m;
  m = read_error(dir, png_file(60000, 60000, 8, 0, ""), "big.png");
  EXPECT_TRUE(contains(m, "the image is 60000 x 60000 pixels, more than the limit of 268435456")) << m;
  // A text chunk claiming 1.6 GB in a 90-byte file: skipped, not allocated (fuzz finding).
  const std::string ihdr_end = good.substr(0, 8 + 25);
  const auto t0 = std::chrono::steady_clock::now();
  m = read_error(dir, ihdr_end + be32(0x6000000b) + "tEXtTitle" + std::string(1, '\0') + "seed" + good.substr(33),
                 "huge_text.png");
  EXPECT_TRUE(contains(m, "truncated file")) << m;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
  PngReadOptions small;
  small.max_pixels = 11;
  m = read_error(dir, good, "limit.png", small);
  EXPECT_TRUE(contains(m, "more than the limit of 11")) << m;
  EXPECT_EQ(read_png_bytes("good", good.data(), good.size()).v, std::vector<double>(12, 7 / 255.0));
  EXPECT_THROW(read_png(dir.path()), Error);  // a directory
}

TEST(Png, FailedWritesLeaveNoFile) {
  TempDir dir("png");
  const std::vector<double> v(6, 0.5);
  const std::string missing = dir / "no/such/dir/out.png";
  try {
    write_png_gray(missing, 2, 3, v, 8);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), missing)) << e.what();
    EXPECT_TRUE(contains(e.what(), "cannot create")) << e.what();
  }
  const std::string path = dir / "out.png";
  EXPECT_THROW(write_png_gray(path, 2, 3, v, 12), Error);
  EXPECT_THROW(write_png_gray(path, 2, 4, v, 8), Error);
  EXPECT_THROW(write_png_gray(path, 0, 3, {}, 8), Error);
  EXPECT_THROW(write_png_gray(path, 1, 70000, std::vector<double>(70000, 0.0), 8), Error);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(Png, LuminanceWeights) {
  PngImage rgb;
  rgb.h = 1, rgb.w = 2, rgb.channels = 3;
  rgb.v = {1, 0, 0, 0.2, 0.4, 0.8};
  const std::vector<double> y = png_luminance(rgb);
  ASSERT_EQ(y.size(), 2u);
  EXPECT_EQ(y[0], 0.2126);
  EXPECT_NEAR(y[1], 0.2126 * 0.2 + 0.7152 * 0.4 + 0.0722 * 0.8, 1e-15);
  PngImage gray;
  gray.h = 1, gray.w = 2, gray.channels = 1;
  gray.v = {0.25, 0.75};
  EXPECT_EQ(png_luminance(gray), gray.v);
  gray.v.pop_back();
  EXPECT_THROW(png_luminance(gray), Error);
}

TEST(Png, AsinhStretchOnKnownValues) {
  // 0, 1, ..., 200: the 0.5th percentile is at position 1 (value 1), the 99.5th at 199.
  std::vector<double> v(201);
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(i);
  const double soft = 0.1;
  std::vector<double> s = asinh_stretch(v, soft);
  ASSERT_EQ(s.size(), v.size());
  EXPECT_EQ(s[0], 0.0);  // below lo: clamped
  EXPECT_EQ(s[1], 0.0);
  EXPECT_NEAR(s[199], 1.0, 1e-15);
  EXPECT_EQ(s[200], 1.0);
  const double norm = std::asinh(1 / soft);
  EXPECT_NEAR(s[100], std::asinh(99 / (soft * 198)) / norm, 1e-15);
  EXPECT_NEAR(s[2], std::asinh(1 / (soft * 198)) / norm, 1e-15);
  for (size_t i = 1; i < s.size(); ++i) EXPECT_LE(s[i - 1], s[i]) << i;
  // Interpolated percentiles of {0, 10}: lo = 0.05, hi = 9.95; NaN and -inf become 0, +inf 1,
  // and they do not move the percentiles.
  const double inf = std::numeric_limits<double>::infinity();
  s = asinh_stretch(std::vector<double>{0, std::nan(""), 10, -inf, 5, inf}, 2.0);
  const double lo = 0.05, hi = 9.95, sc = 2.0 * (hi - lo);
  EXPECT_NEAR(s[4], std::asinh((5 - lo) / sc) / std::asinh((hi - lo) / sc), 1e-15);
  EXPECT_EQ(s[1], 0.0);
  EXPECT_EQ(s[3], 0.0);
  EXPECT_EQ(s[5], 1.0);
  // Constant, or no finite value: zeros.
  EXPECT_EQ(asinh_stretch(std::vector<double>{3, 3, 3}, 0.1), std::vector<double>(3, 0.0));
  EXPECT_EQ(asinh_stretch(std::vector<double>{std::nan(""), inf}, 0.1), std::vector<double>(2, 0.0));
  EXPECT_TRUE(asinh_stretch(std::vector<double>{}, 0.1).empty());
  EXPECT_THROW(asinh_stretch(v, 0), Error);
  EXPECT_THROW(asinh_stretch(v, std::nan("")), Error);
}

namespace {

bool have_pil() {
  return genperf::testing::run_command(cat(GENPERF_PYTHON, " -c 'import PIL.Image' 2>/dev/null")) == 0;
}

std::vector<double> read_doubles(const std::string& path) {
  const std::string b = genperf::testing::read_bytes(path);
  std::vector<double> v(b.size() / 8);
  std::memcpy(v.data(), b.data(), v.size() * 8);
  return v;
}

std::string ref_script() { return cat(GENPERF_PYTHON, " ", GENPERF_TEST_DIR, "/io/png_ref.py"); }

}  // namespace

TEST(Png, ReadsWhatPillowWrites) {
  if (!have_pil()) GTEST_SKIP() << "python3-pil is not installed for " << GENPERF_PYTHON << " (scripts/deps.sh)";
  const unsigned seed = 4042;
  std::printf("seed %u\n", seed);
  TempDir dir("png");
  std::string out;
  ASSERT_EQ(genperf::testing::run_command(cat(ref_script(), " write ", dir.path(), " ", seed, " 2>&1"), &out), 0) << out;
  struct Case {
    const char* name;
    int channels, bit_depth;
    bool alpha;
  };
  for (const Case& c : {Case{"rgb", 3, 8, false}, Case{"rgba", 3, 8, true}, Case{"la", 1, 8, true},
                        Case{"palette", 3, 8, true}, Case{"gray16", 1, 16, false}, Case{"gray1", 1, 1, false}}) {
    SCOPED_TRACE(c.name);
    const PngImage img = read_png(dir / cat(c.name, ".png"));
    EXPECT_EQ(img.h, 5);
    EXPECT_EQ(img.w, 7);
    EXPECT_EQ(img.channels, c.channels);
    EXPECT_EQ(img.bit_depth, c.bit_depth);
    EXPECT_EQ(img.has_alpha, c.alpha);
    EXPECT_EQ(img.v, read_doubles(dir / cat(c.name, ".values")));
  }
  const std::vector<double> luma = png_luminance(read_png(dir / "rgb.png"));
  const std::vector<double> want = read_doubles(dir / "rgb.luma");
  ASSERT_EQ(luma.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(luma[i], want[i], 1e-15) << i;
}

TEST(Png, PillowReadsWhatWeWrite) {
  if (!have_pil()) GTEST_SKIP() << "python3-pil is not installed for " << GENPERF_PYTHON << " (scripts/deps.sh)";
  const unsigned seed = 4043;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-0.1, 1.1);
  TempDir dir("png");
  std::vector<double> v(9 * 13);
  for (double& x : v) x = u(rng);
  for (int depth : {8, 16}) {
    SCOPED_TRACE(cat("bit depth ", depth));
    const double top = depth == 8 ? 255.0 : 65535.0;
    const std::string path = dir / cat("ours", depth, ".png");
    write_png_gray(path, 9, 13, v, depth);
    std::string out;
    ASSERT_EQ(genperf::testing::run_command(cat(ref_script(), " read ", path, " ", dir / "pil.values", " 2>&1"), &out), 0)
        << out;
    EXPECT_TRUE(contains(out, " 13 9")) << out;  // Pillow's size is (width, height)
    const std::vector<double> raw = read_doubles(dir / "pil.values");
    ASSERT_EQ(raw.size(), v.size());
    for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(raw[i], std::round(std::clamp(v[i], 0.0, 1.0) * top)) << i;
  }
}
