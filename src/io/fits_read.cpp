// Reading one 2-D FITS image through cfitsio. The checks cfitsio does not make, or makes with
// messages that do not say what is wrong with the file, come first: the file's first bytes, its
// size against the data the header promises, the image's dimensions and the pixel count.
#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "genperf/error.h"
#include "genperf/fits.h"
#include "io/fits_internal.h"

namespace genperf {
namespace {

using fits_detail::cfitsio_text;
using fits_detail::fail_read;
using fits_detail::read_key;

constexpr int kMaxHdus = 10000;  // HDUs searched for an image

template <typename... Args>
[[noreturn]] void error(const std::string& path, Args&&... what) {
  fail("[fits] ", path, ": ", std::forward<Args>(what)...);
}

// cfitsio's handle, closed however the reader leaves.
struct Handle {
  fitsfile* f = nullptr;
  ~Handle() {
    if (f) {
      int st = 0;
      fits_close_file(f, &st);
      fits_clear_errmsg();
    }
  }
};

// The first bytes of a FITS file are "SIMPLE  =". Compressed files (gzip, Unix compress, zip,
// bzip2) are left to cfitsio, which unpacks them.
void check_start(const std::string& path, const unsigned char* p, size_t n, uint64_t file_size) {
  if (file_size == 0) error(path, "empty file (0 bytes), not a FITS file");
  if (n >= 2 && ((p[0] == 0x1f && (p[1] == 0x8b || p[1] == 0x9d)) || (p[0] == 'P' && p[1] == 'K') ||
                 (p[0] == 'B' && p[1] == 'Z')))
    return;
  const char kSimple[] = "SIMPLE  =";
  if (n < 9 || std::memcmp(p, kSimple, 9) != 0)
    error(path, "not a FITS file: it does not begin with \"SIMPLE  =\"");
  if (file_size < 2880)
    error(path, "truncated file: ", file_size, " bytes, less than one 2880-byte header block");
}

bool read_wcs(fitsfile* f, const std::string& path, FitsWcs& w) {
  bool any = false;
  for (int i = 0; i < 2; ++i) {
    const std::string n = std::to_string(i + 1);
    any |= read_key(f, path, ("CTYPE" + n).c_str(), w.ctype[i]);
    any |= read_key(f, path, ("CUNIT" + n).c_str(), w.cunit[i]);
    any |= read_key(f, path, ("CRPIX" + n).c_str(), w.crpix[i]);
    any |= read_key(f, path, ("CRVAL" + n).c_str(), w.crval[i]);
    any |= read_key(f, path, ("CDELT" + n).c_str(), w.cdelt[i]);
  }
  w.has_crota2 = read_key(f, path, "CROTA2", w.crota2);
  any |= w.has_crota2;
  bool cd = false;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      const std::string ij = cat(i + 1, "_", j + 1);
      w.has_pc |= read_key(f, path, ("PC" + ij).c_str(), w.pc[i][j]);
      cd |= read_key(f, path, ("CD" + ij).c_str(), w.cd[i][j]);
    }
  w.form = cd ? FitsWcs::Form::Cd : FitsWcs::Form::Cdelt;
  return any || cd || w.has_pc;
}

// The two COMMENT cards cfitsio writes into every primary header it creates: not kept, or each
// round trip would add another pair.
bool cfitsio_boilerplate(const std::string& card) {
  return card.rfind("COMMENT   FITS (Flexible Image Transport System) format is", 0) == 0 ||
         card.rfind("COMMENT   and Astrophysics', volume 376, page 359", 0) == 0;
}

std::vector<std::string> read_cards(fitsfile* f, const std::string& path, bool compressed) {
  int st = 0, nkeys = 0, more = 0;
  fits_get_hdrspace(f, &nkeys, &more, &st);
  if (st) fail_read(path, "reading the header", st);
  std::vector<std::string> cards;
  for (int k = 1; k <= nkeys; ++k) {
    char card[FLEN_CARD] = {0};
    fits_read_record(f, k, card, &st);
    if (st) fail_read(path, cat("reading header card ", k), st);
    std::string c(card);
    c.resize(80, ' ');
    std::string key = c.substr(0, 8);
    key.erase(key.find_last_not_of(' ') + 1);
    if (fits_detail::is_reserved_keyword(key, compressed) || cfitsio_boilerplate(c)) continue;
    cards.push_back(c);
  }
  return cards;
}

int64_t bytes_per_pixel(int bitpix) { return std::abs(bitpix) / 8; }

FitsImage read_image(fitsfile* f, const std::string& path, int64_t file_size, const FitsReadOptions& opt) {
  int st = 0, hdutype = 0;
  int first_other = 0, first_other_naxis = 0;  // the first image HDU that was not 2-D
  for (int hdu = 1; hdu <= kMaxHdus; ++hdu) {
    if (hdu > 1) {
      // Some headers crash cfitsio as it moves to them (fits_prescan.cpp): checked first.
      long long head = 0, data = 0, next = 0;
      fits_get_hduaddrll(f, &head, &data, &next, &st);
      if (st) fail_read(path, cat("reading HDU ", hdu - 1), st);
      fits_detail::check_header_for_cfitsio(f, path, hdu, next);
      fits_movabs_hdu(f, hdu, &hdutype, &st);
      if (st == END_OF_FILE) {
        fits_clear_errmsg();
        break;
      }
      if (st) fail_read(path, cat("reading HDU ", hdu), st);
    } else {
      // cfitsio opened the primary HDU unharmed; what crashes it later is in genperf's reads.
      fits_detail::check_header_for_cfitsio(f, path, 1, 0);
    }
    fits_get_hdu_type(f, &hdutype, &st);
    if (st) fail_read(path, cat("reading HDU ", hdu), st);
    if (hdutype != IMAGE_HDU) continue;
    int naxis = 0;
    fits_get_img_dim(f, &naxis, &st);
    if (st) fail_read(path, cat("reading the dimensions of HDU ", hdu), st);
    if (naxis == 0) continue;
    if (naxis != 2) {
      if (!first_other) first_other = hdu, first_other_naxis = naxis;
      continue;
    }
    int bitpix = 0;
    long long naxes[2] = {0, 0};
    fits_get_img_type(f, &bitpix, &st);
    fits_get_img_sizell(f, 2, naxes, &st);
    if (st) fail_read(path, cat("reading the dimensions of HDU ", hdu), st);
    if (bitpix != 8 && bitpix != 16 && bitpix != 32 && bitpix != 64 && bitpix != -32 && bitpix != -64)
      error(path, "HDU ", hdu, ": unsupported BITPIX ", bitpix, ", expected 8, 16, 32, 64, -32 or -64");
    if (naxes[0] <= 0 || naxes[1] <= 0)
      error(path, "HDU ", hdu, ": the image is ", naxes[0], " x ", naxes[1], " pixels, it has no pixels");
    if (naxes[0] > opt.max_pixels / naxes[1])
      error(path, "HDU ", hdu, ": the image is ", naxes[0], " x ", naxes[1], " pixels, more than the limit of ",
            opt.max_pixels);
    const int compressed = fits_is_compressed_image(f, &st);
    if (st) fail_read(path, cat("reading HDU ", hdu), st);
    const int64_t n = naxes[0] * naxes[1];
    if (file_size >= 0) {
      long long head = 0, data = 0, end = 0;
      fits_get_hduaddrll(f, &head, &data, &end, &st);
      if (st) fail_read(path, cat("reading HDU ", hdu), st);
      const int64_t need = data + n * bytes_per_pixel(bitpix);
      if (!compressed && need > file_size)
        error(path, "truncated file: HDU ", hdu, "'s ", naxes[0], " x ", naxes[1], " image of BITPIX ", bitpix,
              " ends at byte ", need, ", the file has ", file_size);
      // cfitsio reads whole 2880-byte blocks, so it cannot read data whose last block is short
      // (tile-compressed data included: the table and its heap).
      if (end > file_size)
        error(path, "truncated file: ", file_size, " bytes, not a whole number of 2880-byte blocks (HDU ", hdu,
              "'s data ends at byte ", end, ")");
    }

    FitsImage img;
    img.width = naxes[0];
    img.height = naxes[1];
    img.bitpix = bitpix;
    read_key(f, path, "BSCALE", img.bscale);
    read_key(f, path, "BZERO", img.bzero);
    if (bitpix > 0) {
      long long raw = 0;
      img.has_blank = read_key(f, path, "BLANK", raw);
      if (img.has_blank) img.blank = raw;
    }
    read_key(f, path, "BUNIT", img.bunit);
    read_key(f, path, "EXTNAME", img.name);
    if (compressed && img.name == "COMPRESSED_IMAGE") img.name.clear();  // cfitsio's default name
    img.has_wcs = read_wcs(f, path, img.wcs);
    img.cards = read_cards(f, path, compressed != 0);

    // cfitsio's gunzip of a tile does not stop on a stream that lies about its size: checked first.
    if (compressed) fits_detail::check_gzip_tiles(f, path, hdu, naxes, bitpix);

    img.pixels.resize(size_t(n));
    long long first[2] = {1, 1};
    double nan = std::numeric_limits<double>::quiet_NaN();
    int anynul = 0;
    // Integer and tile-compressed images: BLANK (or the compressed null) becomes NaN. Plain float
    // images are read without null checking, so their NaNs keep their bits.
    double* nulval = (bitpix > 0 || compressed) ? &nan : nullptr;
    fits_read_pixll(f, TDOUBLE, first, n, nulval, img.pixels.data(), &anynul, &st);
    if (st) fail_read(path, cat("reading the pixels of HDU ", hdu), st);
    int64_t valid = 0;
    for (double v : img.pixels) valid += !std::isnan(v);
    if (valid == 0) error(path, "HDU ", hdu, ": all ", n, " pixels of the image are blank (NaN)");
    return img;
  }
  if (first_other)
    error(path, "no 2-D image: HDU ", first_other, " is a ", first_other_naxis, "-D image (NAXIS = ", first_other_naxis,
          "), expected NAXIS = 2");
  error(path, "no image HDU: no HDU holds a 2-D image");
}

}  // namespace

FitsImage read_fits(const std::string& path, const FitsReadOptions& options) {
  struct stat sb;
  if (::stat(path.c_str(), &sb) != 0) error(path, "cannot open: ", std::strerror(errno));
  if (S_ISDIR(sb.st_mode)) error(path, "cannot open: it is a directory");
  unsigned char start[16] = {0};
  size_t got = 0;
  {
    std::ifstream in(path, std::ios::binary);
    if (!in.good()) error(path, "cannot open: ", std::strerror(errno));
    in.read(reinterpret_cast<char*>(start), sizeof start);
    got = size_t(in.gcount());
  }
  check_start(path, start, got, uint64_t(sb.st_size));
  const bool packed = !(got >= 1 && start[0] == 'S');  // gzip and the like: sizes are cfitsio's
  Handle h;
  int st = 0;
  // The disk-file entry takes the name as it is (no "[ext]" or "+n" syntax of cfitsio's own).
  fits_open_diskfile(&h.f, path.c_str(), READONLY, &st);
  if (st) {
    if (st == FILE_NOT_OPENED) {
      h.f = nullptr;
      error(path, "cannot open (", cfitsio_text(st), ")");
    }
    h.f = nullptr;
    fail_read(path, "opening", st);
  }
  return read_image(h.f, path, packed ? -1 : int64_t(sb.st_size), options);
}

FitsImage read_fits_bytes(const std::string& name, const void* data, size_t size, const FitsReadOptions& options) {
  check_start(name, static_cast<const unsigned char*>(data), size, size);
  const bool packed = static_cast<const unsigned char*>(data)[0] != 'S';
  // cfitsio's memory driver copies whole 2880-byte blocks, past the end of a buffer whose size is
  // not a multiple of 2880: it reads a copy padded with zeros (the checks use the true size).
  std::vector<unsigned char> padded((size + 2879) / 2880 * 2880, 0);
  std::memcpy(padded.data(), data, size);
  Handle h;
  int st = 0;
  void* p = padded.data();  // read only: cfitsio neither writes nor reallocates it
  size_t n = padded.size();
  fits_open_memfile(&h.f, "memory.fits", READONLY, &p, &n, 0, nullptr, &st);
  if (st) {
    h.f = nullptr;
    fail_read(name, "opening", st);
  }
  return read_image(h.f, name, packed ? -1 : int64_t(size), options);
}

}  // namespace genperf
