// The FITS helpers both directions share, the WCS scaling rule and the per-pixel unit rule.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

#include "genperf/error.h"
#include "genperf/fits.h"
#include "io/fits_internal.h"

namespace genperf {
namespace fits_detail {

std::string cfitsio_text(int status) {
  char text[FLEN_STATUS] = {0};
  fits_get_errstatus(status, text);
  std::string out = text;
  char msg[FLEN_ERRMSG] = {0};
  bool first = true;
  while (fits_read_errmsg(msg)) {  // empties the stack; the oldest message says the most
    if (first && msg[0] != '\0' && out.find(msg) == std::string::npos) out += cat(" (", msg, ")");
    first = false;
  }
  return cat(out, ", cfitsio status ", status);
}

void fail_status(const std::string& path, const std::string& what, int status) {
  fail("[fits] ", path, ": ", what, ": ", cfitsio_text(status));
}

void fail_read(const std::string& path, const std::string& doing, int status) {
  const std::string text = cfitsio_text(status);
  const std::string where = cat("[fits] ", path, ": ");
  switch (status) {
    case END_OF_FILE:
    case READ_ERROR:
      fail(where, "truncated file: it ends while ", doing, " (", text, ")");
    case NO_END:
      fail(where, "truncated or corrupt header: no END card (", text, ")");
    case NO_SIMPLE:
    case UNKNOWN_REC:
      fail(where, "not a FITS file (", text, ")");
    case BAD_BITPIX:
      fail(where, "unsupported BITPIX, expected 8, 16, 32, 64, -32 or -64 (", text, ")");
    case BAD_NAXIS:
    case BAD_NAXES:
      fail(where, "bad image dimensions (", text, ")");
    case MEMORY_ALLOCATION:
      fail(where, "out of memory while ", doing, " (", text, ")");
    default:
      fail(where, doing, ": ", text);
  }
}

namespace {

// The one body of the read_key overloads: `value` points to a value of cfitsio's type `type`.
bool read_key_as(fitsfile* f, const std::string& path, const char* key, int type, void* value) {
  int st = 0;
  fits_read_key(f, type, key, value, nullptr, &st);
  if (st == KEY_NO_EXIST) {
    fits_clear_errmsg();
    return false;
  }
  if (st) fail_read(path, cat("reading keyword ", key), st);
  return true;
}

}  // namespace

bool read_key(fitsfile* f, const std::string& path, const char* key, double& out) {
  double v = 0;
  if (!read_key_as(f, path, key, TDOUBLE, &v)) return false;
  out = v;
  return true;
}

bool read_key(fitsfile* f, const std::string& path, const char* key, long long& out) {
  long long v = 0;
  if (!read_key_as(f, path, key, TLONGLONG, &v)) return false;
  out = v;
  return true;
}

bool read_key(fitsfile* f, const std::string& path, const char* key, std::string& out) {
  char v[FLEN_VALUE] = {0};
  if (!read_key_as(f, path, key, TSTRING, v)) return false;
  out = v;
  return true;
}

namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// `key` is `stem` followed by one or more digits (NAXIS1, TFORM12).
bool stem_digits(const std::string& key, const char* stem) {
  const size_t n = std::strlen(stem);
  if (key.size() <= n || key.compare(0, n, stem) != 0) return false;
  return std::all_of(key.begin() + long(n), key.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

bool is_reserved_keyword(const std::string& key, bool compressed) {
  static const char* const kExact[] = {"SIMPLE", "XTENSION", "BITPIX", "NAXIS", "EXTEND", "PCOUNT", "GCOUNT",
                                       "END",    "BSCALE",   "BZERO",  "BLANK", "BUNIT",  "EXTNAME", "WCSAXES",
                                       "CROTA2", "CHECKSUM", "DATASUM"};
  for (const char* k : kExact)
    if (key == k) return true;
  for (const char* stem : {"NAXIS", "CTYPE", "CUNIT", "CRPIX", "CRVAL", "CDELT"})
    if (stem_digits(key, stem)) return true;
  if (key.size() == 5 && (starts_with(key, "PC") || starts_with(key, "CD")) && key[3] == '_' &&
      (key[2] == '1' || key[2] == '2') && (key[4] == '1' || key[4] == '2'))
    return true;
  if (!compressed) return false;
  static const char* const kTable[] = {"TFIELDS", "THEAP",    "ZIMAGE",   "ZBITPIX",  "ZNAXIS",   "ZCMPTYPE",
                                       "ZMASKCMP", "ZSIMPLE", "ZTENSION", "ZEXTEND",  "ZBLOCKED", "ZPCOUNT",
                                       "ZGCOUNT",  "ZHECKSUM", "ZDATASUM", "ZQUANTIZ", "ZDITHER0", "ZBLANK",
                                       "ZSCALE",   "ZZERO"};
  for (const char* k : kTable)
    if (key == k) return true;
  for (const char* stem : {"TTYPE", "TFORM", "TUNIT", "TSCAL", "TZERO", "TNULL", "TDIM", "TDISP", "ZNAXIS",
                           "ZTILE", "ZNAME", "ZVAL"})
    if (stem_digits(key, stem)) return true;
  return false;
}

}  // namespace fits_detail

FitsWcs scale_wcs(const FitsWcs& w, double s) {
  GP_CHECK(std::isfinite(s) && s > 0, "[fits] scale_wcs: the scale factor must be finite and positive, got ", s);
  FitsWcs out = w;
  for (int i = 0; i < 2; ++i) {
    out.crpix[i] = s * (w.crpix[i] - 0.5) + 0.5;
    out.cdelt[i] = w.cdelt[i] / s;
    for (int j = 0; j < 2; ++j) out.cd[i][j] = w.cd[i][j] / s;
  }
  return out;
}

bool bunit_per_pixel(const std::string& bunit) {
  std::string u;
  for (char c : bunit)
    if (!std::isspace(static_cast<unsigned char>(c))) u += char(std::tolower(static_cast<unsigned char>(c)));
  auto ends = [&](const char* suffix) {
    const size_t n = std::strlen(suffix);
    return u.size() >= n && u.compare(u.size() - n, n, suffix) == 0;
  };
  for (const char* suffix : {"/pixel", "/pix", "/px"})
    if (ends(suffix)) return true;
  for (const char* word : {"pixel", "pix"})
    for (const char* power : {"-1", "**-1", "^-1", "^(-1)", "**(-1)"}) {
      const std::string p = cat(word, power);
      const size_t at = u.find(p);
      // The power is -1, not -10.
      if (at != std::string::npos && (at + p.size() == u.size() || !std::isdigit(static_cast<unsigned char>(u[at + p.size()]))))
        return true;
    }
  return false;
}

double bunit_scale_factor(const std::string& bunit, double s) {
  GP_CHECK(std::isfinite(s) && s > 0, "[fits] bunit_scale_factor: the scale factor must be finite and positive, got ", s);
  return bunit_per_pixel(bunit) ? 1.0 / (s * s) : 1.0;
}

}  // namespace genperf
