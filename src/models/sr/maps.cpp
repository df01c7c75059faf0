// Maps from files and specs (genperf/sr.h).
#include <algorithm>
#include <filesystem>

#include "genperf/error.h"
#include "genperf/fits.h"
#include "genperf/png.h"
#include "genperf/rng.h"
#include "genperf/sr.h"

namespace genperf::sr {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  if (s.size() < tail.size()) return false;
  return std::equal(tail.rbegin(), tail.rend(), s.rbegin(),
                    [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
}
bool is_fits(const std::string& p) { return ends_with(p, ".fits") || ends_with(p, ".fit") || ends_with(p, ".fits.gz"); }
bool is_png(const std::string& p) { return ends_with(p, ".png"); }

int64_t number(const std::string& spec, const std::string& field, const char* what) {
  try {
    size_t used = 0;
    const long long v = std::stoll(field, &used);
    if (used == field.size() && v > 0) return v;
  } catch (const std::exception&) {
  }
  fail("[sr] ", spec, ": ", what, " '", field, "' is not a positive integer");
}

// synthetic:N[:size[:seed[:mixed]]]: dust fields of seeds seed .. seed + N - 1.
void add_synthetic(const std::string& spec, std::vector<std::pair<std::string, Map>>& maps) {
  std::vector<std::string> f;
  for (size_t a = 10, b; a <= spec.size(); a = b + 1) {
    b = std::min(spec.find(':', a), spec.size());
    f.push_back(spec.substr(a, b - a));
  }
  const bool mixed = f.size() == 4 && f[3] == "mixed";
  GP_CHECK(f.size() <= 3 || mixed, "[sr] ", spec, ": expected synthetic:N[:size[:seed[:mixed]]]");
  DustFieldSpec d;
  const int64_t n = number(spec, f[0], "the count");
  if (f.size() > 1) d.size = number(spec, f[1], "the size");
  const uint64_t seed = f.size() > 2 ? uint64_t(number(spec, f[2], "the seed")) : 1;
  GP_CHECK(n <= 100000, "[sr] ", spec, ": at most 100000 synthetic maps");
  for (int64_t i = 0; i < n; ++i) {
    d.seed = seed + uint64_t(i);
    if (mixed) {  // the range of observed dust: slope -3 .. -2.5, sigma_ln 0.3 .. 1
      Rng r(d.seed ^ 0x5eedull);
      d.slope = -3 + 0.5 * r.uniform(), d.sigma_ln = 0.3 + 0.7 * r.uniform();
    }
    maps.emplace_back("synthetic-" + std::to_string(d.size) + "-seed" + std::to_string(d.seed) + (mixed ? "-mixed" : ""),
                      dust_field(d));
  }
}

}  // namespace

Map read_map(const std::string& path, FitsImage* fits) {
  if (is_fits(path)) {
    FitsImage img = read_fits(path);
    Map m;
    m.h = img.height, m.w = img.width;
    m.v = std::move(img.pixels);
    if (fits) *fits = std::move(img);
    return m;
  }
  if (is_png(path)) {
    const PngImage img = read_png(path);
    Map m;
    m.h = img.h, m.w = img.w;
    m.v = png_luminance(img);
    return m;
  }
  fail("[sr] ", path, ": not a map genperf reads (expected .fits, .fit, .fits.gz or .png)");
}

std::vector<std::pair<std::string, Map>> read_maps(const std::string& spec) {
  std::vector<std::pair<std::string, Map>> maps;
  for (size_t a = 0, b; a <= spec.size(); a = b + 1) {
    b = std::min(spec.find(',', a), spec.size());
    const std::string item = spec.substr(a, b - a);
    if (item.empty()) continue;
    if (item.rfind("synthetic:", 0) == 0) {
      add_synthetic(item, maps);
    } else if (std::filesystem::is_directory(item)) {
      std::vector<std::string> files;
      for (const auto& e : std::filesystem::directory_iterator(item)) {
        const std::string p = e.path().string();
        if (e.is_regular_file() && (is_fits(p) || is_png(p))) files.push_back(p);
      }
      std::sort(files.begin(), files.end());
      GP_CHECK(!files.empty(), "[sr] ", item, ": the directory holds no .fits or .png maps");
      for (const std::string& p : files) maps.emplace_back(p, read_map(p));
    } else {
      maps.emplace_back(item, read_map(item));
    }
  }
  GP_CHECK(!maps.empty(), "[sr] '", spec, "' names no maps");
  return maps;
}

}  // namespace genperf::sr
