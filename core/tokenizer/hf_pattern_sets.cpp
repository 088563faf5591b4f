#include "core/tokenizer/hf_pattern_sets.h"

#include <algorithm>
#include <cstdio>

#include "core/tokenizer/hf_pattern_text.h"

namespace llmcpu::hf::detail {

// JavaScript's \d, \s (WhiteSpace and LineTerminator: U+FEFF in, U+0085 out) and \w (no i flag).
const std::vector<Range>& js_set(char kind) {
  static const std::vector<Range> digits = {{'0', '9'}};
  static const std::vector<Range> space = {
      {0x09, 0x0D},     {0x20, 0x20},     {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
      {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
  static const std::vector<Range> word = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
  return kind == 'd' ? digits : kind == 's' ? space : word;
}

// Sorted and merged, without the surrogates (well-formed UTF-8 holds none).
std::vector<Range> normalized(const std::vector<Range>& in) {
  std::vector<Range> r;
  for (auto [a, b] : in) {
    if (a < 0xD800 && b >= 0xD800) {
      r.push_back({a, 0xD7FF});
      a = 0xE000;
    } else if (is_surrogate(a)) {
      a = 0xE000;
    }
    if (a <= b) r.push_back({a, b});
  }
  std::sort(r.begin(), r.end());
  std::vector<Range> merged;
  for (const Range& x : r) {
    if (!merged.empty() && x.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, x.second);
    } else {
      merged.push_back(x);
    }
  }
  return merged;
}

std::vector<Range> complement(const std::vector<Range>& in) {
  std::vector<Range> out;
  char32_t next = 0;
  for (const Range& x : normalized(in)) {
    if (x.first > next) out.push_back({next, x.first - 1});
    next = x.second + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return normalized(out);
}

// A class that matches nothing or everything is written so (PCRE2 has no empty class).
void append_class(std::string& out, const ClassSet& set, bool negated) {
  const std::vector<Range> r = normalized(set.ranges);
  const bool all =
      r.size() == 2 && r[0] == Range{0, 0xD7FF} && r[1] == Range{0xE000, kMaxCodePoint};
  if (set.properties.empty() && (r.empty() || all)) {
    out += r.empty() != negated ? "(?:(?!))" : "(?s:.)";
    return;
  }
  out += negated ? "[^" : "[";
  for (const auto& [a, b] : r) {
    append_pcre2_literal(out, a);
    if (b > a + 1) out += '-';
    if (b > a) append_pcre2_literal(out, b);
  }
  out += set.properties;
  out += ']';
}

void append_pcre2_literal(std::string& out, char32_t cp) {
  if (cp < 0x80 && (is_ascii_letter(cp) || is_ascii_digit(cp))) {
    out += static_cast<char>(cp);
  } else if (cp > 0x20 && cp < 0x7F) {
    out += '\\';
    out += static_cast<char>(cp);
  } else if (cp < 0xA0) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "\\x{%X}", static_cast<unsigned>(cp));
    out += buf;
  } else {
    append_utf8(out, cp);
  }
}

}  // namespace llmcpu::hf::detail
