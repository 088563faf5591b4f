// GPT-2's pre-tokenisation: the text is cut into pieces by gpt-3-encoder's pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (contractions case-sensitive, as there), compiled once with PCRE2 (UTF, UCP, JIT when available).
// JavaScript's \s is not PCRE2's \s (JS adds U+FEFF, PCRE2 adds U+0085 and U+180E), so \s is
// spelled out as JavaScript defines it: [\t-\r\p{Z}\x{FEFF}]. \p{L} and \p{N} follow PCRE2's
// Unicode tables (Unicode 14 in PCRE2 10.42), so characters assigned in later Unicode versions may
// be cut differently. Bytes that are not valid UTF-8 never match the pattern; each maximal run of
// them is its own piece, so the pieces always cover the text exactly.
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string_view>

namespace llmcpu {

class Pretokenizer {
 public:
  Pretokenizer();  // throws Error if the pattern does not compile (a PCRE2 without Unicode support)
  ~Pretokenizer();
  Pretokenizer(const Pretokenizer&) = delete;
  Pretokenizer& operator=(const Pretokenizer&) = delete;

  bool jit() const { return jit_; }

  // Walks the pieces of one text. One cursor per thread; the Pretokenizer itself is shared.
  class Cursor {
   public:
    Cursor(const Pretokenizer& p, std::string_view text);
    ~Cursor();
    Cursor(const Cursor&) = delete;
    Cursor& operator=(const Cursor&) = delete;
    // Sets `piece` to the next piece and returns true, or returns false at the end of the text.
    bool next(std::string_view& piece);

   private:
    const Pretokenizer& p_;
    std::string_view text_;
    size_t pos_ = 0;
    size_t match_start_ = 0, match_end_ = 0;  // a match found beyond pos_ (after invalid bytes)
    bool have_match_ = false;
    pcre2_match_data* md_ = nullptr;
  };

 private:
  pcre2_code* code_ = nullptr;
  bool jit_ = false;
};

}  // namespace llmcpu
