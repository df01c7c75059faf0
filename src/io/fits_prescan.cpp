// A header checked before cfitsio parses it, for what cfitsio 4.2 (Debian 12) mishandles while
// moving to an HDU, before any of genperf's checks could run (fuzz findings):
//   - a tile-compressed image (ZIMAGE = T) with ZTILEn = 0, or a RICE_1 one with ZVAL1 = 0:
//     cfitsio divides by them (imcomp_get_compressed_image_par), and SIGFPE kills the process;
//   - a table's TTYPEn value longer than 69 characters (only possible unquoted): cfitsio copies
//     it into a 70-byte field (ffgtbp's strcpy), and the fortified strcpy aborts;
//   - an extension whose mandatory keywords (XTENSION, BITPIX, NAXIS, NAXISn, PCOUNT, GCOUNT,
//     TFIELDS) are not in the standard's order with integer values: cfitsio reads them by position
//     and took a shifted card's blanks for TFIELDS, asking calloc for 2^61 x 160 bytes (ASan
//     aborts the fuzz target; without ASan cfitsio reports the failed allocation);
//   - a tile-compressed image whose table has no columns (TFIELDS = 0, or missing): cfitsio
//     reads the compressed data's descriptors through a column that does not exist (ffgdesll,
//     a segmentation fault);
//   - a keyword read as an integer (by cfitsio while it opens an HDU, or by genperf) whose value
//     of more than 28 characters is not an integer: ffc2j appends up to 30 of them to its
//     52-character message in an 81-byte buffer, and the fortified strncat aborts.
// The cards are read through cfitsio's own byte I/O (so gzip-compressed files are seen as cfitsio
// sees them) and parsed as cfitsio parses them: names end at the first blank or '='.
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "genperf/error.h"
#include "io/fits_internal.h"

// cfitsio's reader of raw bytes at the current position (set by ffmbyt): exported by the library,
// declared in its fitsio2.h without C linkage.
extern "C" int ffgbyt(fitsfile* fptr, LONGLONG nbytes, void* buffer, int* status);

namespace genperf::fits_detail {
namespace {

constexpr int kReportEof = 0;  // ffmbyt: a position past the end is an error (fitsio2.h's REPORT_EOF)
constexpr size_t kMaxColumnName = 69;  // cfitsio's tcolumn::ttype holds 70 bytes
constexpr size_t kMaxIntegerValue = 28;  // ffc2j's message: 52 characters + 28 + NUL fill 81 bytes

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
    size_t close = start + 1;  // the closing quote: one not doubled ('' stands for ')
    while ((close = v.find('\'', close)) != std::string::npos && close + 1 < v.size() && v[close + 1] == '\'')
      close += 2;
    return trim(v.substr(start, close == std::string::npos ? std::string::npos : close - start + 1));
  }
  return trim(v.substr(0, v.find('/')));
}

// A decimal integer of at most 18 digits, with an optional sign.
bool integer(const std::string& v) {
  const size_t sign = !v.empty() && (v[0] == '+' || v[0] == '-');
  const size_t digits = v.size() - sign;
  return digits >= 1 && digits <= 18 &&
         std::all_of(v.begin() + long(sign), v.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool positive_integer(const std::string& v) { return integer(v) && std::stoll(v) > 0; }

// The length of a value once cfitsio has taken off the quotes of a string ('' stands for ').
size_t unquoted_length(const std::string& v) {
  if (v.size() < 2 || v[0] != '\'') return v.size();
  size_t n = 0;
  for (size_t i = 1; i + 1 < v.size(); ++i, ++n)
    if (v[i] == '\'' && v[i + 1] == '\'') ++i;
  return n;
}

bool digits_after(const std::string& key, const char* stem) {
  const size_t n = std::char_traits<char>::length(stem);
  return key.size() > n && key.compare(0, n, stem) == 0 &&
         std::all_of(key.begin() + long(n), key.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The keywords read as integers through ffc2j: by cfitsio 4.2 while it opens an HDU (ffgkyjj, and
// ffgky with an integer type in imcomp_get_compressed_image_par) and by genperf's readers.
bool read_as_integer(const std::string& key) {
  for (const char* k : {"BITPIX", "NAXIS", "PCOUNT", "GCOUNT", "THEAP", "BLANK", "ZBITPIX", "ZNAXIS", "ZBLANK",
                        "ZDITHER0", "ZVAL1", "ZVAL2"})
    if (key == k) return true;
  return digits_after(key, "NAXIS") || digits_after(key, "ZNAXIS") || digits_after(key, "ZTILE");
}

// An extension's mandatory keywords, in the standard's order and with integer values:
// XTENSION, BITPIX, NAXIS (0-999), NAXIS1 .. NAXISn (>= 0), PCOUNT (>= 0), GCOUNT (>= 1), and
// TFIELDS (0-999) for a table. cfitsio reads them by position, whatever the card's name says.
void check_mandatory(const std::string& path, int hdu, const std::vector<std::pair<std::string, std::string>>& cards) {
  size_t at = 1;  // card 0 is XTENSION
  auto want = [&](const std::string& key, long long lo, long long hi) {
    const auto& [k, v] = at < cards.size() ? cards[at] : std::pair<std::string, std::string>{"END", ""};
    const long long n = k == key && integer(v) ? std::stoll(v) : lo - 1;
    if (n < lo || n > hi)
      fail("[fits] ", path, ": HDU ", hdu, ": header card ", at + 1, " is ", k, v.empty() ? "" : " = ", v,
           " where the standard puts ", key, " (an integer from ", lo, " to ", hi, ")");
    ++at;
    return n;
  };
  constexpr long long kMax = 999'999'999'999'999'999;
  want("BITPIX", -64, 64);
  const long long naxis = want("NAXIS", 0, 999);
  for (long long i = 1; i <= naxis; ++i) want(cat("NAXIS", i), 0, kMax);
  want("PCOUNT", 0, kMax);
  want("GCOUNT", 1, kMax);
  const std::string& type = cards[0].second;
  if (type.rfind("'BINTABLE", 0) == 0 || type.rfind("'TABLE", 0) == 0) want("TFIELDS", 0, 999);
}

}  // namespace

void check_header_for_cfitsio(fitsfile* f, const std::string& path, int hdu, long long start) {
  bool zimage = false, rice = false;
  std::string bad_tile, bad_rice;  // the first offending card of each kind
  std::string tfields = "(missing)";
  std::vector<std::pair<std::string, std::string>> cards;  // the header's keywords and values, in order
  char block[2880];
  for (long long pos = start;; pos += 2880) {
    int st = 0;
    ffmbyt(f, pos, kReportEof, &st);
    if (!st) ffgbyt(f, 2880, block, &st);
    if (st) {  // no (whole) header here: cfitsio's move says what is wrong
      fits_clear_errmsg();
      // But an extension's first cards are read by position even where no END follows.
      if (!cards.empty() && cards[0].first == "XTENSION") check_mandatory(path, hdu, cards);
      return;
    }
    for (int k = 0; k < 36; ++k) {
      const std::string card(block + 80 * k, 80);
      const std::string key = card_name(card);
      if (key == "END") {
        if (!cards.empty() && cards[0].first == "XTENSION") check_mandatory(path, hdu, cards);  // (else not a header)
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
      if (cards.size() < 1010) cards.emplace_back(key, value);  // room for the mandatory ones
      // Any TTYPE<text>: cfitsio takes the column number from the text as a number ("+1", "01").
      if (key.size() > 5 && key.compare(0, 5, "TTYPE") == 0 && unquoted_length(value) > kMaxColumnName)
        fail("[fits] ", path, ": HDU ", hdu, ": ", key, "'s value is ", unquoted_length(value),
             " characters long, more than the ", kMaxColumnName, " of a column name");
      if (read_as_integer(key) && value.size() > kMaxIntegerValue && !integer(value))
        fail("[fits] ", path, ": HDU ", hdu, ": ", key, " = ", value, ": ", key, " is read as an integer, and this ",
             "value of ", value.size(), " characters is not one of at most 18 digits");
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
