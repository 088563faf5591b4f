// The patterns of tokenizer.json ({"Regex": "..."} and {"String": "..."} in Split, Replace and the
// Replace decoder), compiled so that they match exactly as tokenizers.js (the npm package
// @huggingface/tokenizers, the reference the tests compare with) matches them: a Regex is written
// in Oniguruma's syntax (HF tokenizers' engine) and tokenizers.js rewrites it into a JavaScript
// RegExp with the "gu" flags; here the same rewrite targets PCRE2 (UTF mode). What the rewrite
// means, construct by construct, is in hf_pattern.cpp; a construct it does not translate is refused
// by name, never approximated.
//
// Texts given to the matching calls must be valid UTF-8 (unicode_text.h's to_valid_utf8 makes
// them so), and positions are byte offsets into them. Matching semantics are JavaScript's: after
// an empty match the search goes on one character later. A Pattern may be used from several
// threads at once (each thread keeps its own match data).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace llmcpu::hf {

class Pattern {
 public:
  // {"Regex": source}. `where` names the pattern in errors ("tokenizer.json: pre_tokenizer.
  // pretokenizers[0].pattern.Regex"). Throws Error naming `where`, the construct and its offset.
  // With `hand_matching`, the pre-tokenizer patterns of Llama 3 and Qwen2 match ASCII text by hand
  // (hf_pattern_fast.h) and the rest with PCRE2; the matches are the same either way.
  static Pattern regex(std::string_view source, const std::string& where,
                       bool hand_matching = true);
  // {"String": text}: the text, matched literally. With `capture` the whole match is also a
  // capturing group, as tokenizers.js makes it for Split with invert false (split() then keeps
  // the separators).
  static Pattern literal(std::string_view text, bool capture);

  struct Span {
    size_t begin, end;  // byte offsets; begin == end for an empty match
  };
  // Every match, left to right, as String.prototype.matchAll (empty matches included); `out` is
  // cleared first.
  void matches(std::string_view text, std::vector<Span>& out) const;
  // The same matches, each given to f(Span) as it is found, without a list.
  template <typename F>
  void for_each_match(std::string_view text, F&& f) const {
    using Fn = std::remove_reference_t<F>;
    each_match(text, [](void* fn, Span m) { (*static_cast<Fn*>(fn))(m); }, &f);
  }
  // String.prototype.replaceAll(pattern, replacement), the replacement's $$, $&, $`, $' and $n /
  // $nn (capturing groups) expanded as JavaScript expands them.
  std::string replace_all(std::string_view text, std::string_view replacement) const;
  // text.split(pattern).filter(x => x): the pieces between matches, each followed by the text of
  // the match's capturing groups, without empty pieces and without groups that did not take part;
  // `out` is cleared first.
  void split(std::string_view text, std::vector<std::string>& out) const;

  // Whether matches()/for_each_match() use a hand-written matcher (for tests).
  bool hand_matched() const;
  // The PCRE2 pattern this compiled to (for messages and tests).
  const std::string& compiled_source() const;

  ~Pattern();
  Pattern(Pattern&&) noexcept;
  Pattern& operator=(Pattern&&) noexcept;

 private:
  struct Impl;
  explicit Pattern(std::unique_ptr<Impl> impl);
  void each_match(std::string_view text, void (*fn)(void*, Span), void* ctx) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmcpu::hf
