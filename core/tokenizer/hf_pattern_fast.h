// Hand-written matchers for the pre-tokenizer patterns that today's tokenizers share, so that the
// common case does not pay for a regex engine: Llama 3's Split pattern and Qwen2's (the same with
// one digit per piece instead of up to three). A matcher decides the match that starts at a
// position when the characters it has to look at are ASCII, exactly as the pattern (rewritten as
// tokenizers.js rewrites it, matched by PCRE2) would; where it meets a byte of a longer UTF-8
// character it says so, and the caller asks PCRE2 for that one match. These patterns match at every
// position of a text and never match the empty string.
#pragma once

#include <cstddef>
#include <string_view>

namespace llmcpu::hf::detail {

// The match that starts at `pos` (< text.size()) ends at `end`; false: undecided (not ASCII).
using HandMatcher = bool (*)(std::string_view text, size_t pos, size_t& end);

// The matcher for this Oniguruma source (as tokenizer.json writes it), or nullptr.
HandMatcher hand_matcher_for(std::string_view source);

}  // namespace llmcpu::hf::detail
