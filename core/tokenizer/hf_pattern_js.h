// The second step of hf_pattern.cpp's rewrite: a JavaScript RegExp source with the "u" flag (what
// tokenizers.js makes of an Oniguruma pattern) parsed by ECMAScript's grammar and written out for
// PCRE2 (UTF mode) so that it matches what the JavaScript RegExp matches. The constructs whose
// meaning differs between the two engines are spelled out: JavaScript's \s, \d, \w, \b, ., ^ and $
// become explicit sets and assertions, \p{...} names are checked against JavaScript's lists
// (hf_pattern_props.h). Constructs PCRE2 cannot match the same way are refused by name:
// backreferences, a capturing group inside a group repeated more than once (JavaScript clears
// it on each repetition), a repeated group that can match the empty string (JavaScript rejects an
// empty repetition and backtracks; PCRE2 ends the loop), and a lookbehind PCRE2 10.42 cannot
// match (one that is not of fixed length, reported when PCRE2 compiles it).
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/tokenizer/hf_pattern_text.h"

namespace llmcpu::hf::detail {

struct JsRegex {
  Mapped pcre2;  // the PCRE2 source, mapped to the Oniguruma source
  uint32_t captures = 0;
  bool named_groups = false;
  struct Lookbehind {
    size_t pcre2_offset;  // where "(?<=" or "(?<!" starts in pcre2.text
    size_t origin;        // its offset in the Oniguruma source
  };
  std::vector<Lookbehind> lookbehinds;
};

// Throws Error (through ctx) naming what it cannot translate.
JsRegex js_to_pcre2(const Mapped& js, const Context& ctx);

struct CodeFree {
  void operator()(pcre2_code* code) const { pcre2_code_free(code); }
};
using Code = std::unique_ptr<pcre2_code, CodeFree>;

// Compiles the PCRE2 source (UTF, invalid UTF-8 in subjects never matches); a compile error is
// reported at the Oniguruma offset it came from.
Code compile_pcre2(const JsRegex& re, const Context& ctx);

}  // namespace llmcpu::hf::detail
