// The first step of hf_pattern.cpp's rewrite: an Oniguruma pattern (tokenizer.json's "Regex") made
// into the JavaScript RegExp source that tokenizers.js (@huggingface/tokenizers 0.2.0) makes of
// it, by the same rules (its normalize_bloom_split_char_class, then rewrite_oniguruma_to_js):
//   - Bloom's class [^(\s|[.,!?…。，、।۔،])] is first rewritten to [^()|\s.,!?…。，、।۔،];
//   - escapes: \s \S \d \D \w \W \h \H \b \B \A \z \Z \a \e become JavaScript texts (\s is
//     \p{White_Space}, \d is \p{Nd}, \w is \p{Alphabetic}\p{M}\p{Nd}\p{Pc} plus ²³¹¼½¾, \h is
//     [0-9A-Fa-f]); \G is dropped; \x{..} becomes \u{..}; \p{Word} the word class;
//   - . is [^\n]; ^ and $ are line anchors written as lookarounds;
//   - (?i:...) folds ASCII letters only: a letter becomes [aA], a class gets the missing case of
//     each ASCII letter; (?>...) becomes (?:...);
//   - a '+' right after a quantifier is dropped (possessive becomes greedy); {n,m}+ and {n,m}* are
//     repeated: (?:atom{n,m})+;
//   - classes: see hf_pattern_onig_class.h.
// What it passes through unchanged (other escapes, group syntax) is judged by the second step
// (hf_pattern_js.h), as JavaScript judges it.
#pragma once

#include "core/tokenizer/hf_pattern_text.h"

namespace llmcpu::hf::detail {

// ctx.source is the Oniguruma pattern (valid UTF-8); the result maps back to its offsets.
Mapped onig_to_js(const Context& ctx);

}  // namespace llmcpu::hf::detail
