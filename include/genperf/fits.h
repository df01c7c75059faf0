// FITS images in and out (through cfitsio): one 2-D image with its scaling, blank value, unit,
// celestial WCS and the rest of its header, for the super-resolution of astronomical maps.
//
// Pixel convention (FITS, 1-based): pixel (i, j) has its centre at the pixel coordinate (i, j),
// i = 1..width along NAXIS1, j = 1..height along NAXIS2, and covers [i-0.5, i+0.5] x [j-0.5, j+0.5].
// In memory, `pixels[(j-1) * width + (i-1)]` (row-major, NAXIS1 fastest). Blank pixels are NaN.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace genperf {

// The linear part of a 2-D celestial WCS, as the header states it. `form` says which of the two
// spellings the file used: CDELTi (with an optional CROTA2 or PCi_j matrix) or the CDi_j matrix.
struct FitsWcs {
  enum class Form { Cdelt, Cd };
  std::string ctype[2];     // CTYPE1/2, e.g. "GLON-CAR", "RA---TAN"
  std::string cunit[2];     // CUNIT1/2 ("" when absent: degrees for celestial axes)
  double crpix[2] = {0, 0};  // 1-based reference pixel
  double crval[2] = {0, 0};  // world coordinates of the reference pixel
  Form form = Form::Cdelt;
  double cdelt[2] = {1, 1};  // Form::Cdelt: the pixel spacing
  bool has_crota2 = false;   // Form::Cdelt: CROTA2 given (degrees)
  double crota2 = 0;
  bool has_pc = false;       // Form::Cdelt: PCi_j given (pc[i-1][j-1]; identity when absent)
  double pc[2][2] = {{1, 0}, {0, 1}};
  double cd[2][2] = {{0, 0}, {0, 0}};  // Form::Cd: cd[i-1][j-1] = CDi_j
};

// One 2-D image. `bitpix`, `bscale`, `bzero` and `blank` say how it is (or will be) stored:
// integer images hold raw * bscale + bzero, and the raw value `blank` (when has_blank) is NaN here.
struct FitsImage {
  int64_t width = 0, height = 0;  // NAXIS1, NAXIS2
  std::vector<double> pixels;     // width * height, row-major, NAXIS1 fastest; NaN where blank
  int bitpix = -32;               // 8, 16, 32, 64, -32, -64
  double bscale = 1, bzero = 0;
  bool has_blank = false;  // integer images: BLANK given
  int64_t blank = 0;
  std::string bunit;  // BUNIT ("" when absent)
  std::string name;   // EXTNAME ("" when absent)
  bool has_wcs = false;
  FitsWcs wcs;
  // The header's other cards (80 characters each, in order, COMMENT and HISTORY included), kept
  // for the round trip. Excluded: the structure (SIMPLE, XTENSION, BITPIX, NAXISn, EXTEND, PCOUNT,
  // GCOUNT, END, a tile-compressed HDU's table and Z* keywords), what the fields above hold
  // (BSCALE, BZERO, BLANK, BUNIT, EXTNAME, WCSAXES, CTYPEi, CUNITi, CRPIXi, CRVALi, CDELTi,
  // CROTA2, PCi_j, CDi_j) and CHECKSUM/DATASUM (no longer true once rewritten).
  std::vector<std::string> cards;
};

struct FitsReadOptions {
  int64_t max_pixels = int64_t(1) << 28;  // larger images are refused (2 GiB of doubles)
};

// Reads the first HDU that holds a 2-D image: the primary array or an IMAGE extension, plain or
// tile-compressed (gzip-compressed files too). BITPIX 8, 16, 32, 64 (scaled by BSCALE/BZERO, BLANK
// pixels NaN; 64-bit values exact within +-2^53), -32 and -64 (NaNs kept bit for bit). Throws
// genperf::Error "[fits] <path>: <problem>" for a missing or unreadable file, a truncated file, a
// file that is not FITS, one with no image HDU, an image that is not 2-D (naming its NAXIS), an
// unsupported BITPIX, and an image whose pixels are all blank.
FitsImage read_fits(const std::string& path, const FitsReadOptions& options = {});
// The same, on a FITS file held in memory; `name` is used in messages.
FitsImage read_fits_bytes(const std::string& name, const void* data, size_t size,
                          const FitsReadOptions& options = {});

// Provenance written into the primary header: HISTORY cards and string-valued keywords (names of
// up to 8 characters A-Z, 0-9, '-', '_'), e.g. {"GPMODEL", "dust-sr-v1"}.
struct FitsProvenance {
  std::vector<std::string> history;
  std::vector<std::pair<std::string, std::string>> keywords;
};

// Writes hdus[0] as the primary array and the rest as IMAGE extensions (EXTNAME from `name`), each
// with its own BITPIX (integer images: raw = round((value - bzero) / bscale), NaN written as BLANK,
// which is chosen as the type's smallest raw value when the image has none), unit, WCS and cards.
// The file is written to a temporary name in the same directory and renamed, so a failure leaves
// no partial output. Read -> write -> read is bit-exact for float images and value-exact for
// integer ones.
void write_fits(const std::string& path, const std::vector<FitsImage>& hdus, const FitsProvenance& provenance = {});

// The WCS of an image super-resolved by the factor s (each input pixel becomes s x s output
// pixels covering the same sky): CDELTi or CDi_j divided by s, CRPIXi' = s (CRPIXi - 0.5) + 0.5
// (the outer pixel edges, at 0.5 and N + 0.5, stay where they were), CRVALi, CROTA2 and PCi_j
// unchanged. Output pixel x' then sees the sky of input pixel coordinate (x' - 0.5) / s + 0.5.
FitsWcs scale_wcs(const FitsWcs& w, double s);

// Whether a BUNIT is per pixel: ends (case-insensitively, spaces ignored) in "/pixel", "/pix",
// "/px", or carries "pixel-1", "pix-1", "pixel**-1", "pixel^-1" (and the "pix" forms). Such
// values are divided by s^2 when the image is super-resolved by s; every other unit, e.g. surface
// brightness (MJy/sr), temperature (K_CMB, K), optical depth or column density, is kept.
bool bunit_per_pixel(const std::string& bunit);
// The factor the pixel values are multiplied by when super-resolved by s: 1 / s^2 or 1.
double bunit_scale_factor(const std::string& bunit, double s);

}  // namespace genperf
