// UTF-8 helpers and GPT-2's byte-level alphabet, shared by the tokenizers. The byte-level map
// gives each of the 256 byte values a printable code point, so that byte-level BPE vocabularies
// (GPT-2, Llama 3, Qwen2) can store any byte sequence as ordinary text.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace genperf::unicode {

// Appends the UTF-8 encoding of code point `cp` (must be <= 0x10FFFF).
void append_utf8(std::string& out, uint32_t cp);

// Decodes the code point starting at s[pos] and advances pos past it. Returns false (and
// advances by one byte) on an invalid, overlong or truncated sequence or a surrogate.
bool next_code_point(std::string_view s, size_t& pos, uint32_t& cp);

// GPT-2's bytes_to_unicode: printable bytes map to themselves, the other 68 to U+0100 upwards.
uint32_t byte_to_code_point(uint8_t b);
// The inverse: the byte a code point stands for, or -1 when it is not in the alphabet.
int code_point_to_byte(uint32_t cp);

// The byte-level text of raw bytes (each byte becomes its code point, UTF-8 encoded).
std::string bytes_to_byte_level(std::string_view bytes);
// Raw bytes of byte-level text. Code points outside the alphabet are copied as UTF-8, so text
// that was never byte-level encoded survives unchanged.
std::string byte_level_to_bytes(std::string_view text);

}  // namespace genperf::unicode
