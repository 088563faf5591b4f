// Sets of code points as PCRE2 is given them by hf_pattern_js.cpp: JavaScript's \d, \s and \w
// (which are not PCRE2's), ranges with their complements, and how a class or a single character
// is written in a PCRE2 source. Surrogates are left out everywhere: well-formed UTF-8 holds none,
// and PCRE2's UTF mode refuses them.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace llmcpu::hf::detail {

inline constexpr char32_t kMaxCodePoint = 0x10FFFF;

using Range = std::pair<char32_t, char32_t>;  // inclusive

inline bool is_surrogate(char32_t c) { return c >= 0xD800 && c <= 0xDFFF; }

// JavaScript's \d ('d'), \s ('s': WhiteSpace and LineTerminator, so U+FEFF in and U+0085 out)
// and \w ('w', without the i flag).
const std::vector<Range>& js_set(char kind);

// Sorted and merged, without the surrogates.
std::vector<Range> normalized(const std::vector<Range>& in);
std::vector<Range> complement(const std::vector<Range>& in);

// The members of a JavaScript character class: code point ranges and PCRE2 property items.
struct ClassSet {
  std::vector<Range> ranges;
  std::string properties;  // "\p{L}\P{sc:Han}..."
};

// `set` (or its complement) as a PCRE2 class; one that matches nothing or every character is
// written "(?:(?!))" or "(?s:.)" (PCRE2 has no empty class).
void append_class(std::string& out, const ClassSet& set, bool negated);

// A code point as a PCRE2 literal: ASCII letters and digits as they are, other printable ASCII
// escaped with a backslash, control characters as \x{..}, the rest as UTF-8.
void append_pcre2_literal(std::string& out, char32_t cp);

}  // namespace llmcpu::hf::detail
