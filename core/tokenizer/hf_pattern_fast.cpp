#include "core/tokenizer/hf_pattern_fast.h"

#include <array>
#include <cstdint>

namespace llmcpu::hf::detail {

namespace {

// Classes of the ASCII characters, as PCRE2 (UTF, UCP) sees them in the rewritten patterns:
// \p{L}, \p{N}, \p{White_Space} (tokenizers.js's \s) and [\r\n].
enum : uint8_t { kLetter = 1, kDigit = 2, kSpace = 4, kNewline = 8 };

constexpr std::array<uint8_t, 128> kClass = [] {
  std::array<uint8_t, 128> t{};
  for (int c = 'a'; c <= 'z'; ++c) t[c] = kLetter;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = kLetter;
  for (int c = '0'; c <= '9'; ++c) t[c] = kDigit;
  for (int c : {'\t', '\v', '\f', ' '}) t[c] = kSpace;
  for (int c : {'\n', '\r'}) t[c] = kSpace | kNewline;
  return t;
}();

constexpr int kNotAscii = -1;

class Text {
 public:
  explicit Text(std::string_view t) : t_(t) {}
  size_t size() const { return t_.size(); }
  // The class of the character at i, or kNotAscii.
  int cls(size_t i) const {
    const auto b = static_cast<unsigned char>(t_[i]);
    return b < 0x80 ? kClass[b] : kNotAscii;
  }
  char at(size_t i) const { return t_[i]; }
  char lower(size_t i) const { return static_cast<char>(t_[i] | 0x20); }

 private:
  std::string_view t_;
};

// (?i:'s|'t|'re|'ve|'m|'ll|'d), the ASCII case folding tokenizers.js's rewrite leaves.
bool contraction(const Text& t, size_t p, size_t& end) {
  if (t.at(p) != '\'' || p + 1 >= t.size()) return false;
  const char a = t.lower(p + 1);
  if (t.cls(p + 1) != kLetter) return false;
  if (a == 's' || a == 't' || a == 'm' || a == 'd') {
    end = p + 2;
    return true;
  }
  if (p + 2 >= t.size() || t.cls(p + 2) != kLetter) return false;
  const char b = t.lower(p + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
    end = p + 3;
    return true;
  }
  return false;
}

// The end of the run of characters that `in` accepts (by class) from q, which it accepts; 0 when a
// non-ASCII character is met first (it might belong to the run).
template <typename In>
size_t run_end(const Text& t, size_t q, In in) {
  size_t e = q + 1;
  for (; e < t.size(); ++e) {
    const int d = t.cls(e);
    if (d == kNotAscii) return 0;
    if (!in(d)) break;
  }
  return e;
}

// Llama 3:  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//           ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Qwen2: the same with \p{N} for \p{N}{1,3}. The alternatives are tried in order.
template <size_t kMaxDigits>
bool llama3_family(std::string_view text, size_t p, size_t& end) {
  const Text t(text);
  const size_t n = t.size();
  const int c = t.cls(p);
  if (c == kNotAscii) return false;
  if (contraction(t, p, end)) return true;
  // [^\r\n\p{L}\p{N}]?\p{L}+ : with the optional character when a letter follows it.
  size_t letters = n;  // where the letters start, if they do
  if (c & kLetter) {
    letters = p;
  } else if (!(c & (kDigit | kNewline)) && p + 1 < n) {
    const int d = t.cls(p + 1);
    if (d == kNotAscii) return false;
    if (d & kLetter) letters = p + 1;
  }
  if (letters < n) {
    end = run_end(t, letters, [](int d) { return (d & kLetter) != 0; });
    return end != 0;
  }
  // \p{N}{1,kMaxDigits}
  if (c & kDigit) {
    size_t e = p + 1;
    for (; e < n && e - p < kMaxDigits; ++e) {
      const int d = t.cls(e);
      if (d == kNotAscii) return false;
      if (!(d & kDigit)) break;
    }
    end = e;
    return true;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]* : the space taken when such a character follows it.
  constexpr int kWord = kLetter | kDigit | kSpace;
  size_t punct = n;
  if (!(c & kWord)) {
    punct = p;
  } else if (t.at(p) == ' ' && p + 1 < n) {
    const int d = t.cls(p + 1);
    if (d == kNotAscii) return false;
    if (!(d & kWord)) punct = p + 1;
  }
  if (punct < n) {
    size_t e = run_end(t, punct, [](int d) { return (d & kWord) == 0; });
    if (e == 0) return false;
    while (e < n && (t.at(e) == '\r' || t.at(e) == '\n')) ++e;
    end = e;
    return true;
  }
  // Whitespace (c is): \s*[\r\n]+ ends after the run's last line break; else \s+(?!\S) leaves
  // the run's last character to what follows (all of it at the end of the text); else \s+.
  size_t e = p, last_break = n;
  for (; e < n; ++e) {
    const int d = t.cls(e);
    if (d == kNotAscii) return false;
    if (!(d & kSpace)) break;
    if (d & kNewline) last_break = e;
  }
  if (last_break < n) {
    end = last_break + 1;
  } else if (e == n || e - p < 2) {
    end = e;
  } else {
    end = e - 1;
  }
  return true;
}

constexpr std::string_view kLlama3 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view kQwen2 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

}  // namespace

HandMatcher hand_matcher_for(std::string_view source) {
  if (source == kLlama3) return llama3_family<3>;
  if (source == kQwen2) return llama3_family<1>;
  return nullptr;
}

}  // namespace llmcpu::hf::detail
