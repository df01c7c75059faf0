// A header checked before cfitsio parses it, for what cfitsio 4.2 (Debian 12) mishandles while
// moving to an HDU, before any of genperf's checks could run (fuzz findings):
//   - a tile-compressed image (ZIMAGE = T) with ZTILEn = 0, or a RICE_1 one with ZVAL1 = 0:
//     cfitsio divides by them (imcomp_get_compressed_image_par), and SIGFPE kills the process;
//   - a table's TTYPEn value longer than 69 characters (only possible unquoted): cfitsio copies
//     it into a 70-byte field (ffgtbp's strcpy), and the fortified strcpy aborts;
//   - a keyword with a byte that is not ASCII text (a corrupted NAXISn): cfitsio read the missing
//     axis length from blanks and asked calloc for 2^61 x 160 bytes (ASan aborts the fuzz target;
//     without it cfitsio reports the failed allocation);
//   - a tile-compressed image whose table has no columns (TFIELDS = 0, or missing): cfitsio
//     reads the compressed data's descriptors through a column that does not exist (ffgdesll,
//     a segmentation fault).
// The cards are read through cfitsio's own byte I/O (so gzip-compressed files are seen as cfitsio
// sees them) and parsed as cfitsio parses them: names end at the first blank or '='.
#include <algorithm>
#include <cctype>
#include <string>

#include "genperf/error.h"
#include "io/fits_internal.h"

// cfitsio's reader of raw bytes at the current position (set by ffmbyt): exported by the library,
// declared in its fitsio2.h without C linkage.
extern "C" int ffgbyt(fitsfile* fptr, LONGLONG nbytes, void* buffer, int* status);

namespace genperf::fits_detail {
namespace {

constexpr int kReportEof = 0;  // ffmbyt: a position past the end is an error (fitsio2.h's REPORT_EOF)
constexpr size_t kMaxColumnName = 69;  // cfitsio's tcolumn::ttype holds 70 bytes

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(' ');
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(' ') - a + 1);
}

// A card's keyword name as cfitsio reads it (ffgknm): the characters before the first blank,
// '=' or NUL, or for a HIERARCH card the name between "HIERARCH " and '='; in upper case, as cfitsio
// compares names.
std::string card_name(const std::string& card) {
  std::string name;
  if (card.compare(0, 9, "HIERARCH ") == 0) {
    const size_t eq = card.find('=');
    name = eq == std::string::npos ? "HIERARCH" : trim(card.substr(9, eq - 9));
  } else {
    name = card.substr(0, card.find_first_of(std::string(" =\0", 3)));
  }
  for (char& c : name) c = char(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

// A card's value as written (a string with its quotes) after its first '=', without a trailing
// comment; "" when the card has no '='.
std::string card_value(const std::string& card) {
  const size_t eq = card.find('=');
  if (eq == std::string::npos) return "";
  const std::string v = card.substr(eq + 1);
  const size_t start = v.find_first_not_of(' ');
  if (start != std::string::npos && v[start] == '\'') {
    const size_t close = v.find('\'', start + 1);
    return trim(v.substr(start, close == std::string::npos ? std::string::npos : close - start + 1));
  }
  return trim(v.substr(0, v.find('/')));
}

// A decimal integer of at most 18 digits (an optional '+'), greater than 0.
bool positive_integer(const std::string& v) {
  const size_t digits = v.size() - (!v.empty() && v[0] == '+');
  if (digits == 0 || digits > 18) return false;
  for (size_t i = v.size() - digits; i < v.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(v[i]))) return false;
  return std::stoll(v) > 0;
}

// The length of a value once cfitsio has taken off the quotes of a string ('' stands for ').
size_t unquoted_length(const std::string& v) {
  if (v.size() < 2 || v[0] != '\'') return v.size();
  size_t n = 0;
  for (size_t i = 1; i + 1 < v.size(); ++i, ++n)
    if (v[i] == '\'' && v[i + 1] == '\'') ++i;
  return n;
}

std::string hex_byte(unsigned char b) {
  const char* digits = "0123456789abcdef";
  return std::string("0x") + digits[b >> 4] + digits[b & 15];
}

bool digits_after(const std::string& key, const char* stem) {
  const size_t n = std::char_traits<char>::length(stem);
  return key.size() > n && key.compare(0, n, stem) == 0 &&
         std::all_of(key.begin() + long(n), key.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

void check_header_for_cfitsio(fitsfile* f, const std::string& path, int hdu, long long start) {
  bool zimage = false, rice = false;
  std::string bad_tile, bad_rice;  // the first offending card of each kind
  std::string tfields = "(missing)";
  char block[2880];
  for (long long pos = start;; pos += 2880) {
    int st = 0;
    ffmbyt(f, pos, kReportEof, &st);
    if (!st) ffgbyt(f, 2880, block, &st);
    if (st) {  // no (whole) header here: cfitsio's move says what is wrong
      fits_clear_errmsg();
      return;
    }
    for (int k = 0; k < 36; ++k) {
      const std::string card(block + 80 * k, 80);
      // A header is ASCII text (0x20-0x7E). A keyword with any other byte (its name ends at a blank
      // or '=' for cfitsio, so the byte becomes part of it) left cfitsio 4.2 reading a missing
      // NAXISn as blanks and asking calloc for 2^61 x 160 bytes (fuzz finding).
      for (int c = 0; c < 8; ++c)
        if (const unsigned char b = static_cast<unsigned char>(card[size_t(c)]); b < 0x20 || b > 0x7e)
          fail("[fits] ", path, ": HDU ", hdu, ": header card ", (pos - start) / 80 + k + 1, ": its keyword holds the byte ",
               hex_byte(b), ", which is not ASCII text");
      const std::string key = card_name(card);
      if (key == "END") {
        if (!zimage) return;
        if (!positive_integer(tfields))
          fail("[fits] ", path, ": HDU ", hdu, ": TFIELDS = ", tfields, ": a tile-compressed image's table has no ",
               "columns");
        if (!bad_tile.empty())
          fail("[fits] ", path, ": HDU ", hdu, ": ", bad_tile, ": a tile-compressed image's tile size must be a ",
               "positive integer");
        if (rice && !bad_rice.empty())
          fail("[fits] ", path, ": HDU ", hdu, ": ", bad_rice, ": a RICE_1 image's block size must be a positive ",
               "integer");
        return;
      }
      const std::string value = card_value(card);
      // Any TTYPE<text>: cfitsio takes the column number from the text as a number ("+1", "01").
      if (key.size() > 5 && key.compare(0, 5, "TTYPE") == 0 && unquoted_length(value) > kMaxColumnName)
        fail("[fits] ", path, ": HDU ", hdu, ": ", key, "'s value is ", unquoted_length(value),
             " characters long, more than the ", kMaxColumnName, " of a column name");
      // Conservative where cfitsio's choice among repeated cards is not obvious: any one counts.
      if (key == "ZIMAGE") zimage |= !value.empty() && value[0] == 'T';
      if (key == "TFIELDS") tfields = value;
      if (key == "ZCMPTYPE") rice |= value.rfind("'RICE", 0) == 0;
      if (digits_after(key, "ZTILE") && bad_tile.empty() && !positive_integer(value)) bad_tile = cat(key, " = ", value);
      if (key == "ZVAL1" && bad_rice.empty() && !positive_integer(value)) bad_rice = cat(key, " = ", value);
    }
  }
}

}  // namespace genperf::fits_detail
