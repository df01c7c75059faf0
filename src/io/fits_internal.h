// Shared by the FITS reader and writer (fits_read.cpp, fits_write.cpp): cfitsio errors turned
// into genperf::Error, header keywords read, and which header keywords the FitsImage fields stand
// for.
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

}  // namespace genperf::fits_detail
