// PNG images through libpng's low-level API, which gives the stored samples as they are (the
// simplified API converts to and from sRGB and premultiplies alpha). libpng reports an error by
// a longjmp to the last setjmp, so every libpng call sits in one of three small functions
// (read_header, read_pixels, write_rows) that set it and whose frames, like those of the
// callbacks libpng calls, hold nothing with a destructor: the structures, buffers and files are
// owned by their callers, which turn a failure into a genperf::Error.
#include "genperf/png.h"

#include <png.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>

#include "genperf/error.h"

namespace genperf {
namespace {

constexpr uint32_t kMaxSide = 65536;              // pixels on a side, read or written
constexpr png_alloc_size_t kMaxChunk = 8u << 20;  // bytes of one chunk held in memory (a second bound)

template <typename... Args>
[[noreturn]] void error(const std::string& path, Args&&... what) {
  fail("[png] ", path, ": ", std::forward<Args>(what)...);
}

// Where libpng's reads come from, and the first error of a call. Plain data: it lives in the
// caller's frame, and libpng's callbacks reach it through their error and io pointers.
struct Io {
  std::FILE* file = nullptr;            // read from this file, or
  const unsigned char* data = nullptr;  // from these bytes
  size_t size = 0, at = 0;
  char message[256] = {0};
  bool own = false;  // the message is the reader's (a truncated file), not libpng's
};

// What went wrong, for an error message.
std::string problem(const Io& io) {
  return io.own ? std::string(io.message) : cat("corrupt or unsupported PNG: ", io.message);
}

void set_message(Io* io, const char* text) {
  if (io->message[0] == '\0') std::snprintf(io->message, sizeof io->message, "%s", text);
}

void on_error(png_structp png, png_const_charp text) {
  set_message(static_cast<Io*>(png_get_error_ptr(png)), text);
  png_longjmp(png, 1);
}

// Warnings (an ancillary chunk with a bad CRC, an unknown sRGB profile) change nothing read here.
void on_warning(png_structp, png_const_charp) {}

void on_read(png_structp png, png_bytep out, size_t n) {
  auto* io = static_cast<Io*>(png_get_io_ptr(png));
  size_t got = 0;
  if (io->file) {
    got = std::fread(out, 1, n, io->file);
    if (got != n && std::ferror(io->file)) {
      char text[200];
      std::snprintf(text, sizeof text, "cannot read: %s", std::strerror(errno));
      set_message(io, text);
      io->own = true;
      png_error(png, "read error");
    }
  } else {
    got = std::min(n, io->size - io->at);
    std::memcpy(out, io->data + io->at, got);
    io->at += got;
  }
  if (got != n) {
    if (io->message[0] == '\0') io->own = true;
    set_message(io, "truncated file: it ends before the PNG's last chunk (IEND) does");
    png_error(png, "truncated");
  }
}

struct ReadStructs {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~ReadStructs() {
    if (png) png_destroy_read_struct(&png, &info, nullptr);
  }
};

struct WriteStructs {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~WriteStructs() {
    if (png) png_destroy_write_struct(&png, &info);
  }
};

struct Header {
  png_uint_32 width = 0, height = 0;
  int bit_depth = 0, color_type = 0;
  bool trns = false;
};

// libpng's structures, then the chunks up to the pixels (the signature was read by the caller).
// False, with io.message, on an error.
bool read_header(ReadStructs& s, Io& io, Header& hdr) {
  s.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &io, on_error, on_warning);
  if (s.png) s.info = png_create_info_struct(s.png);
  if (!s.png || !s.info) {
    set_message(&io, "libpng could not start (out of memory)");
    return false;
  }
  if (setjmp(png_jmpbuf(s.png))) return false;
  png_set_read_fn(s.png, &io, on_read);
  png_set_sig_bytes(s.png, 8);
  // The size limits are the caller's (kMaxSide, max_pixels), checked before any row is allocated.
  png_set_user_limits(s.png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
  png_set_chunk_malloc_max(s.png, kMaxChunk);
  // Only IHDR, PLTE, tRNS, IDAT and IEND matter here; the others are skipped unread. libpng would
  // otherwise allocate a text chunk of the length it claims (a too-large length is only a
  // warning), 1.6 GB for a 90-byte file (fuzz finding).
  png_set_keep_unknown_chunks(s.png, PNG_HANDLE_CHUNK_NEVER, nullptr, -1);
  png_read_info(s.png, s.info);
  hdr.width = png_get_image_width(s.png, s.info);
  hdr.height = png_get_image_height(s.png, s.info);
  hdr.bit_depth = png_get_bit_depth(s.png, s.info);
  hdr.color_type = png_get_color_type(s.png, s.info);
  hdr.trns = png_get_valid(s.png, s.info, PNG_INFO_tRNS) != 0;
  return true;
}

// The transforms to read_png's layout (palette to RGB, 1/2/4-bit gray to 8 bits, no alpha,
// 16-bit samples in the machine's order), then the pixels into `rows` and the chunks after them.
// False, with io.message, on an error.
bool read_pixels(ReadStructs& s, Io& io, const Header& hdr, png_byte channels, size_t row_bytes, png_bytepp rows) {
  if (setjmp(png_jmpbuf(s.png))) return false;
  if (hdr.color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(s.png);
  if (hdr.color_type == PNG_COLOR_TYPE_GRAY && hdr.bit_depth < 8) png_set_expand_gray_1_2_4_to_8(s.png);
  png_set_strip_alpha(s.png);
  if (hdr.bit_depth == 16 && std::endian::native == std::endian::little) png_set_swap(s.png);
  png_set_interlace_handling(s.png);
  png_read_update_info(s.png, s.info);
  if (png_get_channels(s.png, s.info) != channels || png_get_rowbytes(s.png, s.info) != row_bytes) {
    set_message(&io, "libpng's rows do not have the expected layout (an unsupported combination of colour type and depth)");
    return false;
  }
  png_read_image(s.png, rows);
  png_read_end(s.png, nullptr);
  return true;
}

// One gray image of `depth` bits a sample, its rows in the machine's byte order.
bool write_rows(WriteStructs& s, Io& io, std::FILE* file, png_uint_32 w, png_uint_32 h, int depth, png_bytepp rows) {
  s.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &io, on_error, on_warning);
  if (s.png) s.info = png_create_info_struct(s.png);
  if (!s.png || !s.info) {
    set_message(&io, "libpng could not start (out of memory)");
    return false;
  }
  if (setjmp(png_jmpbuf(s.png))) return false;
  png_init_io(s.png, file);
  png_set_IHDR(s.png, s.info, w, h, depth, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(s.png, s.info);
  if (depth == 16 && std::endian::native == std::endian::little) png_set_swap(s.png);
  png_write_image(s.png, rows);
  png_write_end(s.png, nullptr);
  return true;
}

// The file's first bytes are the PNG signature, 89 50 4E 47 0D 0A 1A 0A.
void check_signature(const std::string& name, const unsigned char* p, size_t n, uint64_t file_size) {
  if (file_size == 0) error(name, "empty file (0 bytes), not a PNG file");
  if (n < 8 && png_sig_cmp(p, 0, n) == 0)
    error(name, "truncated file: ", file_size, " bytes, shorter than the 8-byte PNG signature");
  if (n < 8 || png_sig_cmp(p, 0, 8) != 0)
    error(name, "not a PNG file: it does not begin with the PNG signature (89 50 4E 47 0D 0A 1A 0A)");
}

PngImage decode(const std::string& name, Io& io, const PngReadOptions& opt) {
  ReadStructs s;
  Header hdr;
  if (!read_header(s, io, hdr)) error(name, problem(io));
  if (hdr.width > kMaxSide || hdr.height > kMaxSide)
    error(name, "the image is ", hdr.width, " x ", hdr.height, " pixels, more than ", kMaxSide, " on a side");
  const int64_t n = int64_t(hdr.width) * int64_t(hdr.height);
  if (n > opt.max_pixels)
    error(name, "the image is ", hdr.width, " x ", hdr.height, " pixels, more than the limit of ", opt.max_pixels);
  PngImage img;
  img.h = hdr.height;
  img.w = hdr.width;
  img.channels = (hdr.color_type & PNG_COLOR_MASK_COLOR) ? 3 : 1;  // palette images have the colour bit
  img.bit_depth = hdr.color_type == PNG_COLOR_TYPE_PALETTE ? 8 : hdr.bit_depth;
  img.has_alpha = (hdr.color_type & PNG_COLOR_MASK_ALPHA) != 0 || hdr.trns;
  const size_t sample_bytes = hdr.bit_depth == 16 ? 2 : 1;
  const size_t row_bytes = size_t(hdr.width) * size_t(img.channels) * sample_bytes;
  std::vector<unsigned char> buf(row_bytes * hdr.height);
  std::vector<png_bytep> rows(hdr.height);
  for (size_t y = 0; y < rows.size(); ++y) rows[y] = buf.data() + y * row_bytes;
  if (!read_pixels(s, io, hdr, png_byte(img.channels), row_bytes, rows.data())) error(name, problem(io));
  img.v.resize(size_t(n * img.channels));
  if (sample_bytes == 2) {
    for (size_t i = 0; i < img.v.size(); ++i) {
      uint16_t u;
      std::memcpy(&u, buf.data() + 2 * i, 2);
      img.v[i] = u / 65535.0;
    }
  } else {
    for (size_t i = 0; i < img.v.size(); ++i) img.v[i] = buf[i] / 255.0;
  }
  return img;
}

// The p-th percentile of x (which it reorders): linear between the order statistics around
// position p / 100 * (n - 1).
double percentile(std::vector<double>& x, double p) {
  const double pos = p / 100 * double(x.size() - 1);
  const size_t k = size_t(pos);
  std::nth_element(x.begin(), x.begin() + long(k), x.end());
  const double a = x[k];
  if (k + 1 >= x.size() || pos == double(k)) return a;
  const double b = *std::min_element(x.begin() + long(k) + 1, x.end());
  return a + (pos - double(k)) * (b - a);
}

}  // namespace

PngImage read_png(const std::string& path, const PngReadOptions& options) {
  struct stat sb;
  if (::stat(path.c_str(), &sb) != 0) error(path, "cannot open: ", std::strerror(errno));
  if (S_ISDIR(sb.st_mode)) error(path, "cannot open: it is a directory");
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!file) error(path, "cannot open: ", std::strerror(errno));
  unsigned char sig[8] = {0};
  const size_t got = std::fread(sig, 1, sizeof sig, file.get());
  check_signature(path, sig, got, uint64_t(sb.st_size));
  Io io;
  io.file = file.get();
  return decode(path, io, options);
}

PngImage read_png_bytes(const std::string& name, const void* data, size_t size, const PngReadOptions& options) {
  const auto* p = static_cast<const unsigned char*>(data);
  check_signature(name, p, std::min<size_t>(size, 8), size);
  Io io;
  io.data = p;
  io.size = size;
  io.at = 8;
  return decode(name, io, options);
}

std::vector<double> png_luminance(const PngImage& img) {
  const size_t n = size_t(img.h) * size_t(img.w);
  GP_CHECK(img.h > 0 && img.w > 0 && (img.channels == 1 || img.channels == 3) && img.v.size() == n * size_t(img.channels),
           "[png] png_luminance: ", img.v.size(), " values for ", img.h, " x ", img.w, " pixels of ", img.channels,
           " channels (1 or 3)");
  if (img.channels == 1) return img.v;
  std::vector<double> y(n);
  for (size_t i = 0; i < n; ++i) y[i] = 0.2126 * img.v[3 * i] + 0.7152 * img.v[3 * i + 1] + 0.0722 * img.v[3 * i + 2];
  return y;
}

void write_png_gray(const std::string& path, int64_t h, int64_t w, std::span<const double> v, int bit_depth) {
  if (bit_depth != 8 && bit_depth != 16) error(path, "bit depth ", bit_depth, ", expected 8 or 16");
  if (h <= 0 || w <= 0 || h > kMaxSide || w > kMaxSide)
    error(path, "cannot write an image of ", h, " x ", w, " pixels (1 to ", kMaxSide, " on a side)");
  if (v.size() != size_t(h * w)) error(path, v.size(), " values for an image of ", h, " x ", w, " pixels");
  const size_t bytes = bit_depth / 8;
  const double top = bit_depth == 8 ? 255.0 : 65535.0;
  std::vector<unsigned char> buf(v.size() * bytes);
  for (size_t i = 0; i < v.size(); ++i) {
    const double x = std::isnan(v[i]) ? 0.0 : std::clamp(v[i], 0.0, 1.0);
    const auto q = uint16_t(std::lround(x * top));
    if (bytes == 1) buf[i] = uint8_t(q);
    else std::memcpy(buf.data() + 2 * i, &q, 2);
  }
  std::vector<png_bytep> rows(static_cast<size_t>(h));
  for (size_t y = 0; y < rows.size(); ++y) rows[y] = buf.data() + y * size_t(w) * bytes;

  const std::string tmp = cat(path, ".tmp.", getpid());
  std::remove(tmp.c_str());
  std::FILE* file = std::fopen(tmp.c_str(), "wb");
  if (!file) error(path, "cannot create ", tmp, ": ", std::strerror(errno));
  Io io;
  bool ok = false;
  {
    WriteStructs s;
    ok = write_rows(s, io, file, png_uint_32(w), png_uint_32(h), bit_depth, rows.data());
  }
  // A full disk may show only when the last buffered bytes go out.
  if (ok && std::fflush(file) != 0) {
    set_message(&io, std::strerror(errno));
    ok = false;
  }
  if (std::fclose(file) != 0 && ok) {
    set_message(&io, std::strerror(errno));
    ok = false;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    error(path, "cannot write ", tmp, ": ", io.message);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    error(path, "cannot rename ", tmp, " to it: ", std::strerror(e));
  }
}

std::vector<double> asinh_stretch(std::span<const double> v, double soft) {
  GP_CHECK(std::isfinite(soft) && soft > 0, "[png] asinh_stretch: soft must be finite and positive, got ", soft);
  std::vector<double> out(v.size(), 0.0);
  std::vector<double> finite;
  finite.reserve(v.size());
  for (double x : v)
    if (std::isfinite(x)) finite.push_back(x);
  if (finite.empty()) return out;
  const double lo = percentile(finite, 0.5), hi = percentile(finite, 99.5);
  if (!(hi > lo)) return out;
  const double s = soft * (hi - lo), norm = std::asinh(1.0 / soft);
  for (size_t i = 0; i < v.size(); ++i) {
    const double x = v[i];
    if (std::isnan(x)) continue;
    out[i] = std::isinf(x) ? (x > 0 ? 1.0 : 0.0) : std::clamp(std::asinh((x - lo) / s) / norm, 0.0, 1.0);
  }
  return out;
}

}  // namespace genperf
