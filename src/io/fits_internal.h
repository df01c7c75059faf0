// Shared by the FITS reader and writer (fits_read.cpp, fits_write.cpp): cfitsio errors turned
// into genperf::Error, and which header keywords the FitsImage fields stand for.
#pragma once
#include <fitsio.h>

#include <string>

namespace genperf::fits_detail {

// The message of a cfitsio status, with the first message of cfitsio's own error stack (which is
// cleared, so nothing is left for cfitsio to print later).
std::string cfitsio_text(int status);

// Throws "[fits] <path>: <what>: <cfitsio's text>".
[[noreturn]] void fail_status(const std::string& path, const std::string& what, int status);

// Keywords a FitsImage holds in its fields, or that describe the HDU's structure (and so are
// written by write_fits itself): not kept among its cards. `compressed`: the HDU is a
// tile-compressed image, whose binary-table keywords are structure too.
bool is_reserved_keyword(const std::string& key, bool compressed);

}  // namespace genperf::fits_detail
