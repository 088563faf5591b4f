// The first step of hf_pattern.cpp's rewrite, its shared parts: the JavaScript texts tokenizers.js
// puts in place of Oniguruma's escapes, the scanners for \p{..}, \x{..}, \xHH, \uHHHH and \cX, and
// the character-class parser (tokenizers.js's parse_character_class): nested classes and &&
// intersections become lookahead unions, POSIX brackets become property sets, and inside (?i:...)
// a class gets the other case of each ASCII letter it holds in one case only.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/tokenizer/hf_pattern_text.h"

namespace llmcpu::hf::detail {

// Oniguruma's \w, as tokenizers.js defines it (with the superscript digits and vulgar fractions
// that are not in \p{Alphabetic} but that it adds to the word class outside brackets).
inline constexpr std::string_view kWordCharsInClass = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}";
inline constexpr std::string_view kWordClass =
    "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\u00B2\\u00B3\\u00B9\\u00BC-\\u00BE]";
inline constexpr std::string_view kNonWordClass =
    "[^\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\u00B2\\u00B3\\u00B9\\u00BC-\\u00BE]";
inline constexpr std::string_view kHexDigitChars = "0-9A-Fa-f";
inline constexpr std::string_view kAnyCodePoint = "[\\s\\S]";

// \p{..}, \P{..}, \x{..} or \u{..} at byte i of s: its letter, the text between the braces and
// its whole length; false if there is none.
bool braced_escape(std::string_view s, size_t i, char* kind, std::string_view* body, size_t* len);
// The length of \xHH, \uHHHH or \cX (X an ASCII letter) at byte i of s; 0 if there is none.
size_t fixed_width_escape(std::string_view s, size_t i);
// A raw line feed, carriage return, tab, form feed or vertical tab after a backslash, as the
// JavaScript escape ("\\n" ...); "" for other characters.
std::string_view raw_whitespace_escape(char32_t c);
// Whether an escaped character other than tokenizers.js's rewritten ones keeps its backslash:
// letters, digits and JavaScript's syntax characters ('-' too inside classes).
bool keeps_backslash(char32_t c, bool in_class);
// Inside (?i:...): "[aA]" for an escape whose hex digits name an ASCII letter, else "".
std::string ascii_folded_hex(std::string_view hex);

struct ClassParse {
  Mapped atom;     // the JavaScript text of the class
  size_t end = 0;  // just past its ']'
  bool negated = false;
  bool contains_complex_set = false;
  bool contains_nested_negated_complex_set = false;
};

// Parses the class that starts with the '[' at byte `start` of `in`. `ascii_fold`: inside
// (?i:...); `apply_ascii_fold`: add the other cases here (the outermost class only).
ClassParse parse_onig_class(const Mapped& in, size_t start, bool ascii_fold, bool apply_ascii_fold,
                            int depth, const Context& ctx);

}  // namespace llmcpu::hf::detail
