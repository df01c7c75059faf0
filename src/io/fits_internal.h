// Shared by the FITS reader and writer (fits_read.cpp, fits_prescan.cpp, fits_tiles.cpp,
// fits_write.cpp): cfitsio errors turned into genperf::Error, header keywords read, which header
// keywords the FitsImage fields stand for, and the checks that run before cfitsio parses a
// header or decompresses a tile.
#pragma once
#include <fitsio.h>

#include <string>

namespace genperf::fits_detail {

// The message of a cfitsio status, with the first message of cfitsio's own error stack (which is
// cleared, so nothing is left for cfitsio to print later).
std::string cfitsio_text(int status);

// Throws "[fits] <path>: <what>: <cfitsio's text>".
[[noreturn]] void fail_status(const std::string& path, const std::string& what, int status);

// Throws the problem a cfitsio status stands for when reading, in the words of the reader's
// errors: "[fits] <path>: truncated file: it ends while <doing> (...)", "not a FITS file", ...
[[noreturn]] void fail_read(const std::string& path, const std::string& doing, int status);

// A keyword's value of the current HDU, or false (and `out` left as it was) when the header lacks
// it; any other problem (a value that is not of the type asked for, a bad card) is an error
// naming the keyword. Strings come without their trailing blanks.
bool read_key(fitsfile* f, const std::string& path, const char* key, double& out);
bool read_key(fitsfile* f, const std::string& path, const char* key, long long& out);
bool read_key(fitsfile* f, const std::string& path, const char* key, std::string& out);

// Keywords a FitsImage holds in its fields, or that describe the HDU's structure (and so are
// written by write_fits itself): not kept among its cards. `compressed`: the HDU is a
// tile-compressed image, whose binary-table keywords are structure too.
bool is_reserved_keyword(const std::string& key, bool compressed);

// The header of HDU `hdu`, which starts at byte `start`, read through cfitsio's byte I/O before
// cfitsio parses it, for the values that crash cfitsio 4.2 while it moves to the HDU: a
// tile-compressed image's ZTILEn or (RICE_1) ZVAL1 that is not a positive integer (it divides by
// them), a TTYPEn value longer than 69 characters (it overflows a 70-byte field). Throws
// "[fits] <path>: HDU <hdu>: ..." for those; checks nothing, and throws nothing, when the header
// is short or missing: cfitsio's move reports that.
void check_header_for_cfitsio(fitsfile* f, const std::string& path, int hdu, long long start);

// For the current HDU, a tile-compressed 2-D image of naxes[0] x naxes[1] pixels and ZBITPIX
// `zbitpix` (HDU number `hdu` in messages): when ZCMPTYPE is GZIP_1 or GZIP_2, inflates each
// tile's compressed stream with zlib, its output capped at the tile's size in bytes, and throws
// "[fits] <path>: HDU <hdu>, tile <k> of <n> (<w> x <h> pixels of ZBITPIX <b>, <type>): <problem>"
// when a stream is corrupt, ends early, or does not inflate to exactly that size. cfitsio's own
// gunzip grows its buffer for as long as zlib asks for more room or more input, without bound,
// so such a stream must not reach it.
void check_gzip_tiles(fitsfile* f, const std::string& path, int hdu, const long long naxes[2], int zbitpix);

}  // namespace genperf::fits_detail
