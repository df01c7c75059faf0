// Shared by the tokenizer tests: running the Debian tools they compare against, temporary
// directories, and real text (the King James Bible of the bible-kjv package) split into training
// verses and held-out texts varied with digits, runs of spaces, non-ASCII words and newlines.
#pragma once
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "genperf/json.h"

namespace tokenizer_test {

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs `cmd` through the shell; its stdout and stderr go to `output`. Returns the exit status.
inline int run_command(const std::string& cmd, std::string* output = nullptr) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  if (output) *output = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A missing Debian package fails the test (never skips it) and says how to install it.
inline ::testing::AssertionResult have(const std::string& probe, const std::string& package) {
  std::string out;
  if (run_command(probe, &out) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "Debian package " << package << " is missing (`" << probe
                                       << "` failed: " << out << "): run scripts/deps.sh";
}

inline const char* python() { return GENPERF_PYTHON; }
inline std::string test_dir() { return std::string(GENPERF_TEST_DIR) + "/tokenizer"; }

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "genperf-tok-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void write_file(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary) << data;
}

// One verse a line; `refs` keeps the "Ge1:1" prefixes the bible program prints.
struct Corpus {
  std::vector<std::string> verses, refs;
};

// The whole KJV text; empty when the bible program is missing (the tests check `have` first).
inline const Corpus& kjv() {
  static const Corpus c = [] {
    Corpus out;
    std::string text;
    if (run_command("bible -f 'Gen1:1-Rev22:21'", &text) != 0) return out;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(pos, end - pos);
      pos = end + 1;
      const size_t sp = line.find(' ');
      if (sp == std::string::npos || sp + 1 >= line.size()) continue;
      out.refs.push_back(line.substr(0, sp));
      out.verses.push_back(line.substr(sp + 1));
    }
    return out;
  }();
  return c;
}

// Every 6th verse, up to `count`: the training text. Held-out texts use none of them.
inline std::vector<std::string> training_lines(size_t count) {
  std::vector<std::string> out;
  const auto& v = kjv().verses;
  for (size_t i = 0; i < v.size() && out.size() < count; i += 6) out.push_back(v[i]);
  return out;
}

// Non-ASCII words, all already in NFC: accents, Greek, Hebrew, CJK, Cyrillic, emoji, curly
// quotes, a ligature and full-width letters (NFKC changes both), numbers outside ASCII, a
// no-break and an ideographic space, and the long s that case-insensitive "'s" matches.
inline const std::vector<std::string>& unicode_words() {
  static const std::vector<std::string> w = {
      "caf\u00e9", "na\u00efve", "Stra\u00dfe", "\u1f00\u03c1\u03c7\u1fc7", "\u05d1\u05e8\u05d0\u05e9\u05d9\u05ea",
      "\u592a\u521d\u6709\u9053", "\u041f\u0440\u0438\u0432\u0435\u0442", "\U0001F600", "\U0001F44D\U0001F3FD",
      "\u201cquoted\u201d", "\u2014", "\ufb01ne", "\uff21\uff22\uff23", "\u0130stanbul", "\u01c5emal", "\u00bd",
      "\u2460", "\u0663\u0664\u0665", "\u216b", "x\u00b2+y\u00b2", "it'\u017f", "a\u00a0b", "\u3000gap",
      "DON'T", "we'LL", "I'm", "they're"};
  return w;
}

// `count` held-out texts, varied by a seeded generator; `specials` are spliced into some texts.
inline std::vector<std::string> held_out_texts(uint32_t seed, size_t count, bool multiline,
                                               const std::vector<std::string>& specials = {}) {
  const auto& c = kjv();
  std::mt19937 rng(seed);
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  auto pick = [&](size_t n) { return size_t(rng() % n); };
  auto at_space = [&](std::string& s, const std::string& what) {  // inserts " what" at a word boundary
    std::vector<size_t> spaces;
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i] == ' ') spaces.push_back(i);
    const size_t at = spaces.empty() ? s.size() : spaces[pick(spaces.size())];
    s.insert(at, " " + what);
  };
  static const char* kSeparators[] = {"\n", "\n\n", " \n", "\r\n", "\n  ", "\t\n"};
  std::vector<std::string> out;
  for (size_t i = 3; out.size() < count && i < c.verses.size(); i += 6) {  // never a training verse
    std::string s = c.verses[i];
    if (multiline && chance(0.25)) {
      for (size_t k = 1, extra = 1 + pick(3); k <= extra && i + k < c.verses.size(); ++k)
        s += kSeparators[pick(std::size(kSeparators))] + c.verses[i + k];
    }
    if (chance(0.15)) s = c.refs[i] + " " + s;
    if (chance(0.15)) at_space(s, std::to_string(rng() % 10000000));
    if (chance(0.15)) at_space(s, std::string(1 + pick(4), ' '));
    if (chance(0.08)) at_space(s, "\t");
    if (chance(0.25)) at_space(s, unicode_words()[pick(unicode_words().size())]);
    if (chance(0.05)) s = std::string(1 + pick(3), ' ') + s;
    if (chance(0.05)) s += std::string(1 + pick(3), ' ');
    if (!specials.empty() && chance(0.12)) {
      const std::string& t = specials[pick(specials.size())];
      const size_t at = pick(s.size() + 1);  // anywhere, also inside words
      if (at == s.size() || (uint8_t(s[at]) & 0xC0) != 0x80) s.insert(at, t);
    }
    out.push_back(s);
  }
  return out;
}

// Prints how many texts carry each feature, so a log shows what the comparison covered.
inline void describe(const std::vector<std::string>& texts, const std::vector<std::string>& specials = {}) {
  size_t newline = 0, non_ascii = 0, spaces = 0, digits = 0, special = 0, bytes = 0;
  for (const auto& t : texts) {
    bytes += t.size();
    newline += t.find('\n') != std::string::npos;
    spaces += t.find("  ") != std::string::npos;
    non_ascii += std::any_of(t.begin(), t.end(), [](char c) { return uint8_t(c) >= 0x80; });
    digits += std::any_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
    special += std::any_of(specials.begin(), specials.end(), [&](const std::string& s) { return t.find(s) != std::string::npos; });
  }
  std::printf("%zu held-out texts (%zu bytes): %zu multi-line, %zu non-ASCII, %zu with runs of spaces, %zu with digits, "
              "%zu with added tokens\n", texts.size(), bytes, newline, non_ascii, spaces, digits, special);
}

inline void write_texts(const std::string& path, const std::vector<std::string>& texts) {
  genperf::Json::Array a;
  for (const auto& t : texts) a.emplace_back(t);
  write_file(path, genperf::Json(std::move(a)).dump());
}

inline std::vector<std::vector<int32_t>> id_lists(const genperf::Json& j) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& row : j.as_array()) {
    out.emplace_back();
    for (const auto& id : row.as_array()) out.back().push_back(int32_t(id.as_int()));
  }
  return out;
}

inline std::string ids_str(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) {
    if (!s.empty()) s += ' ';
    s += std::to_string(id);
  }
  return s;
}

}  // namespace tokenizer_test
