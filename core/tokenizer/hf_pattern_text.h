// What the steps of hf_pattern.cpp's rewrite share: text that remembers, byte by byte, which
// offset of the Oniguruma source it came from (so that an error found two rewrites later still
// names the construct the user wrote), UTF-8 helpers, and the context errors are reported in.
// Internal to core/tokenizer; nothing here is part of Pattern's interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/tokenizer/unicode_text.h"

namespace llmcpu::hf::detail {

// Text with, for each byte, the byte offset in the Oniguruma source it was made from.
struct Mapped {
  std::string text;
  std::vector<uint32_t> origin;  // origin.size() == text.size()

  size_t size() const { return text.size(); }
  bool empty() const { return text.empty(); }
  void add(std::string_view s, size_t at) {
    text += s;
    origin.insert(origin.end(), s.size(), static_cast<uint32_t>(at));
  }
  void add(const Mapped& m) {
    text += m.text;
    origin.insert(origin.end(), m.origin.begin(), m.origin.end());
  }
  // Bytes [begin, end) of this text.
  Mapped slice(size_t begin, size_t end) const {
    Mapped m;
    m.text = text.substr(begin, end - begin);
    m.origin.assign(origin.begin() + begin, origin.begin() + end);
    return m;
  }
  void truncate(size_t n) {
    text.resize(n);
    origin.resize(n);
  }
  // Where byte i came from; past the end, where the last byte came from.
  size_t at(size_t i) const {
    if (origin.empty()) return 0;
    return origin[i < origin.size() ? i : origin.size() - 1];
  }
};

// Where errors are reported: the pattern as the user wrote it and what names it.
struct Context {
  std::string_view source;  // the Oniguruma source
  std::string where;
  // Throws Error: "<where>: <construct> at byte <offset> of the pattern (`<excerpt>`) is not
  // supported[: <detail>]".
  [[noreturn]] void fail(size_t offset, const std::string& construct,
                         const std::string& detail = "") const;
};

// The length of the UTF-8 sequence that starts with byte b (1 for a byte that starts none).
inline size_t utf8_length(unsigned char b) {
  if (b < 0xC0) return 1;
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  return 4;
}

// The code point at byte i of valid UTF-8 text; its length in `len`.
inline char32_t code_point_at(std::string_view s, size_t i, size_t* len) {
  const auto b = static_cast<unsigned char>(s[i]);
  size_t n = utf8_length(b);
  if (i + n > s.size()) n = 1;
  *len = n;
  if (n == 1) return b;
  char32_t cp = b & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return cp;
}

using unicode::append_utf8;  // (unicode_text.h)

// Whether s is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool is_valid_utf8(std::string_view s);

inline bool is_ascii_letter(char32_t c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
inline bool is_ascii_digit(char32_t c) { return c >= '0' && c <= '9'; }
inline bool is_hex_digit(char32_t c) {
  return is_ascii_digit(c) || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f');
}

}  // namespace llmcpu::hf::detail
