#include "core/tokenizer/pretokenizer.h"

#include <string>

#include "simd/error.h"

namespace llmcpu {

namespace {

// gpt-3-encoder's pattern, with JavaScript's \s written out (see the header).
#define LLMCPU_WS "\\t-\\r\\p{Z}\\x{FEFF}"
constexpr const char* kPattern =
    "'s|'t|'re|'ve|'m|'ll|'d"
    "| ?\\p{L}+"
    "| ?\\p{N}+"
    "| ?[^" LLMCPU_WS
    "\\p{L}\\p{N}]+"
    "|[" LLMCPU_WS "]+(?![^" LLMCPU_WS
    "])"
    "|[" LLMCPU_WS "]+";
#undef LLMCPU_WS

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

Pretokenizer::Pretokenizer() {
  int err = 0;
  PCRE2_SIZE err_at = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                        PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_at, nullptr);
  if (!code_) {
    throw Error("GPT-2 pre-tokenisation pattern does not compile with this PCRE2 (offset " +
                std::to_string(err_at) + "): " + pcre2_message(err));
  }
  jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
}

Pretokenizer::~Pretokenizer() { pcre2_code_free(code_); }

Pretokenizer::Cursor::Cursor(const Pretokenizer& p, std::string_view text) : p_(p), text_(text) {
  md_ = pcre2_match_data_create_from_pattern(p.code_, nullptr);
  if (!md_) throw std::bad_alloc();
}

Pretokenizer::Cursor::~Cursor() { pcre2_match_data_free(md_); }

bool Pretokenizer::Cursor::next(std::string_view& piece) {
  if (pos_ >= text_.size()) return false;
  if (!have_match_) {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text_.data());
    const int rc = p_.jit_ ? pcre2_jit_match(p_.code_, subject, text_.size(), pos_, 0, md_, nullptr)
                           : pcre2_match(p_.code_, subject, text_.size(), pos_, 0, md_, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) {
      // Only bytes that are not UTF-8 are left.
      piece = text_.substr(pos_);
      pos_ = text_.size();
      return true;
    }
    if (rc < 0)
      throw Error("pre-tokenisation failed at byte " + std::to_string(pos_) + ": " +
                  pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md_);
    match_start_ = ov[0];
    match_end_ = ov[1];
    have_match_ = true;
  }
  if (match_start_ > pos_) {
    // Invalid UTF-8 before the match: one piece of its own.
    piece = text_.substr(pos_, match_start_ - pos_);
    pos_ = match_start_;
    return true;
  }
  piece = text_.substr(match_start_, match_end_ - match_start_);
  pos_ = match_end_;
  have_match_ = false;
  return true;
}

}  // namespace llmcpu
