// Writing FITS images through cfitsio: each image with its stored BITPIX and scaling (the raw
// values computed here, so that NaN becomes BLANK and a value that does not fit is an error),
// its unit, WCS and kept cards, into a temporary file that is renamed into place.
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "genperf/error.h"
#include "genperf/fits.h"
#include "io/fits_internal.h"

namespace genperf {
namespace {

using fits_detail::fail_status;

template <typename... Args>
[[noreturn]] void error(const std::string& path, Args&&... what) {
  fail("[fits] ", path, ": ", std::forward<Args>(what)...);
}

void check(const std::string& path, const std::string& what, int status) {
  if (status) fail_status(path, what, status);
}

void key_str(fitsfile* f, const std::string& path, const std::string& key, const std::string& value) {
  int st = 0;
  fits_write_key_str(f, key.c_str(), value.c_str(), nullptr, &st);
  check(path, "writing keyword " + key, st);
}

// 17 significant digits: doubles are read back bit for bit.
void key_dbl(fitsfile* f, const std::string& path, const std::string& key, double value) {
  int st = 0;
  fits_write_key_dbl(f, key.c_str(), value, -17, nullptr, &st);
  check(path, "writing keyword " + key, st);
}

void write_wcs(fitsfile* f, const std::string& path, const FitsWcs& w) {
  int st = 0;
  fits_write_key_lng(f, "WCSAXES", 2, nullptr, &st);  // must come before the other WCS keywords
  check(path, "writing keyword WCSAXES", st);
  for (int i = 0; i < 2; ++i) {
    const std::string n = std::to_string(i + 1);
    if (!w.ctype[i].empty()) key_str(f, path, "CTYPE" + n, w.ctype[i]);
    if (!w.cunit[i].empty()) key_str(f, path, "CUNIT" + n, w.cunit[i]);
    key_dbl(f, path, "CRPIX" + n, w.crpix[i]);
    key_dbl(f, path, "CRVAL" + n, w.crval[i]);
  }
  if (w.form == FitsWcs::Form::Cd) {
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) key_dbl(f, path, cat("CD", i + 1, "_", j + 1), w.cd[i][j]);
    return;
  }
  key_dbl(f, path, "CDELT1", w.cdelt[0]);
  key_dbl(f, path, "CDELT2", w.cdelt[1]);
  if (w.has_crota2) key_dbl(f, path, "CROTA2", w.crota2);
  if (w.has_pc)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) key_dbl(f, path, cat("PC", i + 1, "_", j + 1), w.pc[i][j]);
}

bool valid_key_name(const std::string& k) {
  if (k.empty() || k.size() > 8) return false;
  for (char c : k)
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_')) return false;
  return true;
}

// The raw integers of an integer image: round((v - bzero) / bscale), NaN as BLANK.
template <typename T>
std::vector<T> raw_integers(const std::string& path, size_t index, const FitsImage& img, int64_t blank) {
  std::vector<T> raw(img.pixels.size());
  const double lo = double(std::numeric_limits<T>::lowest()), hi = double(std::numeric_limits<T>::max());
  for (size_t k = 0; k < raw.size(); ++k) {
    const double v = img.pixels[k];
    if (std::isnan(v)) {
      raw[k] = T(blank);
      continue;
    }
    const double r = std::nearbyint((v - img.bzero) / img.bscale);
    // `hi` of int64 rounds up to 2^63, which is out of range: hence `<`.
    const bool fits = r >= lo && (sizeof(T) == 8 ? r < hi : r <= hi);
    if (!fits || (img.has_blank && int64_t(r) == blank) || !std::isfinite(v))
      error(path, "HDU ", index + 1, ": pixel (", k % size_t(img.width) + 1, ", ", k / size_t(img.width) + 1,
            ") = ", v, " cannot be stored as BITPIX ", img.bitpix, " with BSCALE ", img.bscale, " and BZERO ",
            img.bzero, fits ? " (it is the BLANK value)" : " (out of range)");
    raw[k] = T(r);
  }
  return raw;
}

template <typename T>
void write_pixels(fitsfile* f, const std::string& path, int type, std::vector<T>& raw) {
  int st = 0;
  long long first[2] = {1, 1};
  fits_write_pixll(f, type, first, (long long)raw.size(), raw.data(), &st);
  check(path, "writing the pixels", st);
}

void write_hdu(fitsfile* f, const std::string& path, size_t index, const FitsImage& img, const FitsProvenance* prov) {
  const int b = img.bitpix;
  if (b != 8 && b != 16 && b != 32 && b != 64 && b != -32 && b != -64)
    error(path, "HDU ", index + 1, ": unsupported BITPIX ", b, ", expected 8, 16, 32, 64, -32 or -64");
  if (img.width <= 0 || img.height <= 0 || img.pixels.size() != size_t(img.width) * size_t(img.height))
    error(path, "HDU ", index + 1, ": ", img.pixels.size(), " pixels for a ", img.width, " x ", img.height, " image");
  if (!(std::isfinite(img.bscale) && img.bscale != 0 && std::isfinite(img.bzero)))
    error(path, "HDU ", index + 1, ": BSCALE ", img.bscale, " and BZERO ", img.bzero, " are not a valid scaling");
  int st = 0;
  long long naxes[2] = {img.width, img.height};
  fits_create_imgll(f, b, 2, naxes, &st);
  check(path, cat("creating HDU ", index + 1), st);
  if (!img.name.empty()) key_str(f, path, "EXTNAME", img.name);
  if (!img.bunit.empty()) key_str(f, path, "BUNIT", img.bunit);
  const bool scaled = img.bscale != 1 || img.bzero != 0;
  if (scaled) {
    key_dbl(f, path, "BSCALE", img.bscale);
    key_dbl(f, path, "BZERO", img.bzero);
  }
  // An integer image with NaNs and no BLANK gets the type's smallest raw value as BLANK.
  bool has_blank = img.has_blank;
  int64_t blank = img.blank;
  if (b > 0 && !has_blank) {
    for (double v : img.pixels)
      if (std::isnan(v)) {
        has_blank = true;
        blank = b == 8 ? 0 : b == 16 ? INT16_MIN : b == 32 ? INT32_MIN : INT64_MIN;
        break;
      }
  }
  if (b > 0 && has_blank) {
    fits_write_key_lng(f, "BLANK", (LONGLONG)blank, nullptr, &st);
    check(path, "writing keyword BLANK", st);
  }
  if (img.has_wcs) write_wcs(f, path, img.wcs);
  for (const std::string& card : img.cards) {
    fits_write_record(f, card.c_str(), &st);
    check(path, cat("writing header card \"", card, "\""), st);
  }
  if (prov) {
    for (const auto& [key, value] : prov->keywords) {
      if (!valid_key_name(key))
        error(path, "provenance keyword \"", key, "\" is not a FITS keyword name (1 to 8 of A-Z, 0-9, '-', '_')");
      key_str(f, path, key, value);
    }
    for (const std::string& h : prov->history) {
      fits_write_history(f, h.c_str(), &st);
      check(path, "writing HISTORY", st);
    }
  }
  // Parse the header now, then turn scaling off: the values written are the raw ones.
  fits_set_hdustruc(f, &st);
  fits_set_bscale(f, 1.0, 0.0, &st);
  check(path, cat("finishing the header of HDU ", index + 1), st);
  if (b == 8) {
    auto raw = raw_integers<uint8_t>(path, index, img, blank);
    write_pixels(f, path, TBYTE, raw);
  } else if (b == 16) {
    auto raw = raw_integers<int16_t>(path, index, img, blank);
    write_pixels(f, path, TSHORT, raw);
  } else if (b == 32) {
    auto raw = raw_integers<int32_t>(path, index, img, blank);
    write_pixels(f, path, TINT, raw);
  } else if (b == 64) {
    auto raw = raw_integers<int64_t>(path, index, img, blank);
    std::vector<long long> ll(raw.begin(), raw.end());
    write_pixels(f, path, TLONGLONG, ll);
  } else if (b == -32) {
    std::vector<float> raw(img.pixels.size());
    for (size_t k = 0; k < raw.size(); ++k)
      raw[k] = float(scaled ? (img.pixels[k] - img.bzero) / img.bscale : img.pixels[k]);
    write_pixels(f, path, TFLOAT, raw);
  } else {
    std::vector<double> raw(img.pixels.size());
    for (size_t k = 0; k < raw.size(); ++k) raw[k] = scaled ? (img.pixels[k] - img.bzero) / img.bscale : img.pixels[k];
    write_pixels(f, path, TDOUBLE, raw);
  }
}

}  // namespace

void write_fits(const std::string& path, const std::vector<FitsImage>& hdus, const FitsProvenance& provenance) {
  if (hdus.empty()) error(path, "nothing to write: no images");
  const std::string tmp = cat(path, ".tmp.", getpid());
  std::remove(tmp.c_str());
  fitsfile* f = nullptr;
  int st = 0;
  errno = 0;
  // The disk-file entry takes the name as it is (no cfitsio filename syntax).
  fits_create_diskfile(&f, tmp.c_str(), &st);
  if (st) {
    const int e = errno;
    fits_detail::cfitsio_text(st);  // clears cfitsio's messages
    error(path, "cannot create ", tmp, ": ", e ? std::strerror(e) : "cfitsio could not create it");
  }
  try {
    for (size_t i = 0; i < hdus.size(); ++i) write_hdu(f, path, i, hdus[i], i == 0 ? &provenance : nullptr);
    st = 0;
    fits_close_file(f, &st);
    f = nullptr;
    check(path, "closing " + tmp, st);
  } catch (...) {
    if (f) {
      int ignore = 0;
      fits_close_file(f, &ignore);
    }
    fits_clear_errmsg();
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    error(path, "cannot rename ", tmp, " to it: ", std::strerror(e));
  }
}

}  // namespace genperf
