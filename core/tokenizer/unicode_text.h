// UTF-8 text as tokenizers.js sees it. tokenizers.js works on JavaScript strings, so bytes that are
// not UTF-8 reach it as U+FFFD (node's decoding replaces each maximal invalid subsequence, the
// WHATWG rule); to_valid_utf8 does the same here, so that every later stage works on valid UTF-8.
// Unicode normalisation and lower-casing are ICU's (the library behind JavaScript's normalize()
// and toLowerCase() in node), and the whitespace of trim() is JavaScript's, not Unicode's.
// Not here: regular expressions (hf_pattern.h), anything that depends on a tokenizer's files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace llmcpu::unicode {

// `text` with every maximal invalid UTF-8 subsequence replaced by U+FFFD (WHATWG "decode" with
// replacement). Returns a copy only when something had to change; `out` is left empty otherwise.
// Returns true when `text` was valid already.
bool to_valid_utf8(std::string_view text, std::string& out);

// The code point at `pos` of valid UTF-8 and its length in bytes.
struct CodePoint {
  char32_t cp;
  int bytes;
};
inline CodePoint decode_at(std::string_view s, size_t pos) {
  const auto byte = [&](size_t i) {
    return static_cast<char32_t>(static_cast<unsigned char>(s[i]));
  };
  const char32_t b = byte(pos);
  if (b < 0x80) return {b, 1};
  if (b < 0xE0) return {((b & 0x1F) << 6) | (byte(pos + 1) & 0x3F), 2};
  if (b < 0xF0) {
    return {((b & 0x0F) << 12) | ((byte(pos + 1) & 0x3F) << 6) | (byte(pos + 2) & 0x3F), 3};
  }
  return {((b & 0x07) << 18) | ((byte(pos + 1) & 0x3F) << 12) | ((byte(pos + 2) & 0x3F) << 6) |
              (byte(pos + 3) & 0x3F),
          4};
}
void append_utf8(std::string& out, char32_t cp);
// Number of code points of valid UTF-8.
size_t count_code_points(std::string_view text);

enum class Form { kNfc, kNfd, kNfkc, kNfkd };
// String.prototype.normalize(form) of valid UTF-8.
std::string normalize(std::string_view text, Form form);
// String.prototype.toLowerCase(): full Unicode lower-casing without a locale (final sigma
// included).
std::string to_lower(std::string_view text);

// JavaScript's WhiteSpace and LineTerminator characters: what trim() removes and what \s matches in
// a RegExp (tab, LF, VT, FF, CR, space, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F,
// U+205F, U+3000, U+FEFF).
bool is_js_space(char32_t cp);
std::string_view js_trim_start(std::string_view text);
std::string_view js_trim_end(std::string_view text);

bool is_ascii(std::string_view text);

// text.replaceAll(from, to) for a string `from`: every occurrence, left to right, without overlaps.
// An empty `from` leaves the text as it is.
std::string replace_all(std::string_view text, std::string_view from, std::string_view to);

}  // namespace llmcpu::unicode
