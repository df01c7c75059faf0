// UTF-8 helpers and GPT-2's byte-level alphabet (see unicode.h).
#include "io/unicode.h"

namespace genperf::unicode {
namespace {

// The byte-level alphabet, built once: byte -> code point and code point (< 324) -> byte.
struct ByteLevelTables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 512> to_byte{};

  ByteLevelTables() {
    to_byte.fill(-1);
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    uint32_t next = 256;  // non-printable bytes take U+0100, U+0101, ... in byte order
    for (int b = 0; b < 256; ++b) {
      to_cp[b] = printable(b) ? uint32_t(b) : next++;
      to_byte[to_cp[b]] = int16_t(b);
    }
  }
};

const ByteLevelTables& tables() {
  static const ByteLevelTables t;
  return t;
}

}  // namespace

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

bool next_code_point(std::string_view s, size_t& pos, uint32_t& cp) {
  const auto b0 = uint8_t(s[pos]);
  int len = 0;
  uint32_t min = 0;
  if (b0 < 0x80) {
    cp = b0;
    pos += 1;
    return true;
  } else if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    pos += 1;
    return false;
  }
  if (pos + len > s.size()) {
    pos += 1;
    return false;
  }
  for (int i = 1; i < len; ++i) {
    const auto b = uint8_t(s[pos + i]);
    if ((b & 0xC0) != 0x80) {
      pos += 1;
      return false;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) {
    pos += 1;
    return false;
  }
  pos += len;
  return true;
}

uint32_t byte_to_code_point(uint8_t b) { return tables().to_cp[b]; }

int code_point_to_byte(uint32_t cp) { return cp < 512 ? tables().to_byte[cp] : -1; }

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(out, byte_to_code_point(uint8_t(c)));
  return out;
}

std::string byte_level_to_bytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    uint32_t cp = 0;
    if (!next_code_point(text, pos, cp)) {
      out += text[start];  // not UTF-8: keep the raw byte
      continue;
    }
    const int b = code_point_to_byte(cp);
    if (b >= 0) {
      out += char(b);
    } else {
      out.append(text.substr(start, pos - start));
    }
  }
  return out;
}

}  // namespace genperf::unicode
