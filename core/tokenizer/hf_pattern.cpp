// tokenizer.json's patterns, compiled in two steps and matched with PCRE2:
//   1. onig_rewrite.h: the Oniguruma source becomes the JavaScript RegExp source tokenizers.js
//      makes of it (its rewrite_oniguruma_to_js, with the same quirks);
//   2. hf_pattern_js.h: that JavaScript source (flags "gu") becomes a PCRE2 source with the same
//      meaning, or is refused by name;
// then PCRE2 compiles it (UTF mode, JIT where available). Every byte of both rewrites remembers
// the offset of the Oniguruma source it came from, so that errors name what the user wrote.
//
// Supported Oniguruma constructs: literals; . ^ $; \s \S \d \D \w \W \h \H \b \B \A \z \Z \a \e
// \G (dropped) \n \r \t \f \v \xHH \x{H..} \uHHHH \cX \0, escaped punctuation; \p{..} \P{..}
// (General_Category values, binary properties, scripts, \p{Word}); classes with ranges, negation,
// nested classes, && intersections and POSIX brackets; (...) (?:...) (?=...) (?!...) (?<=...)
// (?<!...) (?<name>...) (?>...) (as a plain group) (?i:...) (ASCII letters only); ? * + {n}
// {n,} {n,m} {,m}, lazy ?, possessive + (as greedy), {n,m}+ and {n,m}* (repeated).
// Refused, with the construct and its offset: what tokenizers.js's JavaScript rejects (inline
// options other than (?i:, comments, conditionals, \K \R \X \N \O \y and other unknown escapes,
// unknown property names), backreferences, a capturing group inside a group repeated more than
// once, a repeated group that can match the empty string, lookbehinds that are not of fixed
// length per alternative (PCRE2 10.42), repetition counts above 65535 and the properties PCRE2
// 10.42 lacks (Changes_When_NFKC_Casefolded, scripts added after Unicode 14).
//
// Matching follows JavaScript: after an empty match the search resumes one code point later.
// One difference with node remains, on purpose: V8 also tries, while it searches, the position
// between the two UTF-16 halves of an astral character (ECMAScript's "u" flag forbids it), so a
// pattern that matches the empty string there (^, $, \A, \z, \Z, \B can) cuts the character in
// two in tokenizers.js; UTF-8 has no such position, and here the character stays whole.
#include "core/tokenizer/hf_pattern.h"

#include <algorithm>
#include <memory>
#include <new>

#include "core/tokenizer/hf_pattern_fast.h"
#include "core/tokenizer/hf_pattern_js.h"
#include "core/tokenizer/hf_pattern_sets.h"
#include "core/tokenizer/onig_rewrite.h"
#include "core/tokenizer/unicode_text.h"
#include "simd/error.h"

namespace llmcpu::hf {

namespace detail {

void Context::fail(size_t offset, const std::string& construct, const std::string& detail) const {
  const size_t begin = std::min(offset, source.size());
  size_t end = std::min(source.size(), begin + 16);
  while (end < source.size() && (static_cast<unsigned char>(source[end]) & 0xC0) == 0x80) ++end;
  std::string excerpt(source.substr(begin, end - begin));
  if (end < source.size()) excerpt += "...";
  throw Error(where + ": " + construct + " at byte " + std::to_string(offset) +
              " of the pattern (`" + excerpt + "`) is not supported" +
              (detail.empty() ? "" : ": " + detail));
}

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    size_t n = 0;
    char32_t min = 0;
    if (b >= 0xC2 && b <= 0xDF) {
      n = 2, min = 0x80;
    } else if (b >= 0xE0 && b <= 0xEF) {
      n = 3, min = 0x800;
    } else if (b >= 0xF0 && b <= 0xF4) {
      n = 4, min = 0x10000;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    size_t len = 0;
    const char32_t cp = code_point_at(s, i, &len);
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

}  // namespace detail

namespace {

struct Compiled {
  detail::Code code;
  std::string source;  // the PCRE2 source
  uint32_t captures = 0;
  bool named_groups = false;
  bool jit = false;
  detail::HandMatcher hand = nullptr;  // decides the ASCII matches of a known pattern
  std::string literal;  // a String pattern's text (empty for a Regex)
};

}  // namespace

struct Pattern::Impl : Compiled {};

namespace {

constexpr size_t kJitStackMax = 4 << 20;

// Per thread: match data large enough for the patterns matched on this thread, one per search in
// progress (a search may call out to code that searches again: a Split's pieces go on to the next
// pre-tokenizer while the Split's search is still open), and a JIT stack larger than PCRE2's
// default 32 KiB, which only a running match uses. (Pattern holds nothing that matching writes.)
class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    for (const Data& d : data_) pcre2_match_data_free(d.md);
    pcre2_match_context_free(context_);
    pcre2_jit_stack_free(stack_);
  }
  // Match data for one more open search, until release().
  pcre2_match_data* acquire(uint32_t pairs) {
    if (open_ == data_.size()) data_.push_back({});
    Data& d = data_[open_];
    if (pairs > d.pairs) {
      pcre2_match_data_free(d.md);
      d.md = pcre2_match_data_create(pairs, nullptr);
      if (!d.md) throw std::bad_alloc();
      d.pairs = pairs;
    }
    ++open_;
    return d.md;
  }
  void release() { --open_; }
  pcre2_match_context* context() {
    if (!context_) {
      context_ = pcre2_match_context_create(nullptr);
      stack_ = pcre2_jit_stack_create(32 << 10, kJitStackMax, nullptr);
      if (!context_ || !stack_) throw std::bad_alloc();
      pcre2_jit_stack_assign(context_, nullptr, stack_);
    }
    return context_;
  }

 private:
  struct Data {
    pcre2_match_data* md = nullptr;
    uint32_t pairs = 0;
  };
  std::vector<Data> data_;
  size_t open_ = 0;
  pcre2_match_context* context_ = nullptr;
  pcre2_jit_stack* stack_ = nullptr;
};

thread_local Scratch t_scratch;

// One text searched with one pattern: the matches at or after a position, with their groups.
class Search {
 public:
  Search(const Compiled& p, std::string_view text)
      : p_(p),
        text_(text),
        md_(t_scratch.acquire(std::max<uint32_t>(p.captures + 1, 16))),
        context_(t_scratch.context()) {}
  ~Search() { t_scratch.release(); }
  Search(const Search&) = delete;
  Search& operator=(const Search&) = delete;

  // The first match that starts at or after byte `from`; false if there is none.
  bool find(size_t from) {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text_.data());
    pcre2_match_context* context = context_;
    // pcre2_jit_match skips pcre2_match's checks of its arguments, which are valid here.
    int rc = p_.jit ? pcre2_jit_match(p_.code.get(), subject, text_.size(), from,
                                      PCRE2_NO_UTF_CHECK, md_, context)
                    : pcre2_match(p_.code.get(), subject, text_.size(), from, PCRE2_NO_UTF_CHECK,
                                  md_, context);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {  // the interpreter keeps its frames on the heap
      rc = pcre2_match(p_.code.get(), subject, text_.size(), from,
                       PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md_, context);
    }
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    if (rc < 0) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(rc, buf, sizeof buf);
      throw Error("matching the pattern " + p_.source + " from byte " + std::to_string(from) +
                  " of a text of " + std::to_string(text_.size()) +
                  " bytes failed: " + reinterpret_cast<const char*>(buf));
    }
    ov_ = pcre2_get_ovector_pointer(md_);
    return true;
  }
  size_t begin() const { return ov_[0]; }
  size_t end() const { return ov_[1]; }
  // Capturing group k (1-based); false if it did not take part in the match.
  bool group(uint32_t k, std::string_view* g) const {
    if (ov_[2 * k] == PCRE2_UNSET) return false;
    *g = text_.substr(ov_[2 * k], ov_[2 * k + 1] - ov_[2 * k]);
    return true;
  }
  // Where the next search starts after a match: its end, or one code point later if it is empty.
  size_t next() const {
    if (end() > begin()) return end();
    if (end() >= text_.size()) return text_.size() + 1;
    return std::min(text_.size(),
                    end() + detail::utf8_length(static_cast<unsigned char>(text_[end()])));
  }

 private:
  const Compiled& p_;
  std::string_view text_;
  pcre2_match_data* md_;
  pcre2_match_context* context_;
  const PCRE2_SIZE* ov_ = nullptr;
};

// Compiles re; Pattern's constructor takes the result.
template <typename Impl>
std::unique_ptr<Impl> compiled(detail::JsRegex re, const detail::Context& ctx) {
  auto impl = std::make_unique<Impl>();
  impl->code = detail::compile_pcre2(re, ctx);
  impl->jit = pcre2_jit_compile(impl->code.get(), PCRE2_JIT_COMPLETE) == 0;  // else interpreted
  pcre2_pattern_info(impl->code.get(), PCRE2_INFO_CAPTURECOUNT, &impl->captures);
  impl->source = std::move(re.pcre2.text);
  impl->named_groups = re.named_groups;
  return impl;
}

}  // namespace

Pattern Pattern::regex(std::string_view source, const std::string& where, bool hand_matching) {
  const detail::Context ctx{source, where};
  if (!detail::is_valid_utf8(source)) throw Error(where + ": the pattern is not valid UTF-8");
  const detail::Mapped js = detail::onig_to_js(ctx);
  auto impl = compiled<Impl>(detail::js_to_pcre2(js, ctx), ctx);
  if (hand_matching) impl->hand = detail::hand_matcher_for(source);
  return Pattern(std::move(impl));
}

Pattern Pattern::literal(std::string_view text, bool capture) {
  const detail::Context ctx{text, "a String pattern"};
  if (!detail::is_valid_utf8(text)) throw Error("a String pattern is not valid UTF-8");
  detail::JsRegex re;
  std::string pcre2 = capture ? "(" : "";
  for (size_t i = 0, len = 0; i < text.size(); i += len) {
    detail::append_pcre2_literal(pcre2, detail::code_point_at(text, i, &len));
  }
  if (capture) pcre2 += ')';
  re.pcre2.add(pcre2, 0);
  auto impl = compiled<Impl>(std::move(re), ctx);
  impl->literal = text;
  return Pattern(std::move(impl));
}

void Pattern::each_match(std::string_view text, void (*fn)(void*, Span), void* ctx) const {
  Search search(*impl_, text);
  if (impl_->hand) {  // (such a pattern never matches the empty string)
    for (size_t pos = 0, end = 0; pos < text.size(); pos = end) {
      if (impl_->hand(text, pos, end)) {
        fn(ctx, {pos, end});
        continue;
      }
      if (!search.find(pos)) return;
      fn(ctx, {search.begin(), search.end()});
      end = search.next();
    }
    return;
  }
  for (size_t pos = 0; pos <= text.size() && search.find(pos); pos = search.next()) {
    fn(ctx, {search.begin(), search.end()});
  }
}

bool Pattern::hand_matched() const { return impl_->hand != nullptr; }

void Pattern::matches(std::string_view text, std::vector<Span>& out) const {
  out.clear();
  for_each_match(text, [&out](Span m) { out.push_back(m); });
}

namespace {

// $n or $nn at byte i of the replacement (a digit follows the '$'), as JavaScript's
// GetSubstitution reads it: two digits when they name an existing group, else one; a number that
// names no group is kept as text. Returns where the reference ends.
size_t append_numbered(std::string& out, std::string_view rep, size_t i, const Search& search,
                       uint32_t captures) {
  uint32_t index = static_cast<uint32_t>(rep[i + 1] - '0');
  size_t digits = 1;
  if (i + 2 < rep.size() && detail::is_ascii_digit(static_cast<unsigned char>(rep[i + 2]))) {
    const uint32_t two = index * 10 + static_cast<uint32_t>(rep[i + 2] - '0');
    if (two <= captures) index = two, digits = 2;
  }
  std::string_view g;
  if (index >= 1 && index <= captures) {
    if (search.group(index, &g)) out += g;
  } else {
    out += rep.substr(i, 1 + digits);
  }
  return i + 1 + digits;
}

// $<name> at byte i (the pattern has named groups); returns where the reference ends.
size_t append_named(std::string& out, std::string_view rep, size_t i, const Search& search,
                    const pcre2_code* code) {
  const size_t close = rep.find('>', i + 2);
  if (close == std::string_view::npos) {
    out += "$<";
    return i + 2;
  }
  const std::string name(rep.substr(i + 2, close - i - 2));
  const int k = pcre2_substring_number_from_name(code, reinterpret_cast<PCRE2_SPTR>(name.c_str()));
  std::string_view g;
  if (k > 0 && search.group(static_cast<uint32_t>(k), &g)) out += g;
  return close + 1;
}

// JavaScript's GetSubstitution: the replacement with $$, $&, $`, $', $n, $nn and $<name> expanded.
void append_substitution(std::string& out, std::string_view rep, std::string_view text,
                         const Search& search, const Compiled& p) {
  for (size_t i = 0; i < rep.size();) {
    if (rep[i] != '$' || i + 1 == rep.size()) {
      out += rep[i++];
      continue;
    }
    const char c = rep[i + 1];
    if (c == '$') {
      out += '$';
    } else if (c == '&') {
      out += text.substr(search.begin(), search.end() - search.begin());
    } else if (c == '`') {
      out += text.substr(0, search.begin());
    } else if (c == '\'') {
      out += text.substr(search.end());
    } else if (detail::is_ascii_digit(static_cast<unsigned char>(c))) {
      i = append_numbered(out, rep, i, search, p.captures);
      continue;
    } else if (c == '<' && p.named_groups) {
      i = append_named(out, rep, i, search, p.code.get());
      continue;
    } else {
      out += '$';
      ++i;
      continue;
    }
    i += 2;
  }
}

}  // namespace

std::string Pattern::replace_all(std::string_view text, std::string_view replacement) const {
  // A String pattern with a replacement without '$' forms is a plain replacement of bytes (the same
  // in valid UTF-8); the empty String matches between characters, as a RegExp does.
  if (!impl_->literal.empty() && replacement.find('$') == std::string_view::npos) {
    return unicode::replace_all(text, impl_->literal, replacement);
  }
  std::string out;
  out.reserve(text.size());
  Search search(*impl_, text);
  size_t copied = 0;
  for (size_t pos = 0; pos <= text.size() && search.find(pos); pos = search.next()) {
    out += text.substr(copied, search.begin() - copied);
    append_substitution(out, replacement, text, search, *impl_);
    copied = search.end();
  }
  out += text.substr(copied);
  return out;
}

// JavaScript's RegExp.prototype[@@split]: a match is tried at each q from p on (a sticky match
// at q is the first match of a search from q, when it starts at q); one that ends at p (an empty
// match at p) is passed over.
void Pattern::split(std::string_view text, std::vector<std::string>& out) const {
  out.clear();
  Search search(*impl_, text);
  size_t p = 0, q = 0;
  auto keep = [&out](std::string_view piece) {
    if (!piece.empty()) out.emplace_back(piece);
  };
  while (q < text.size() && search.find(q) && search.begin() < text.size()) {
    if (search.end() == p) {
      q = search.begin() + detail::utf8_length(static_cast<unsigned char>(text[search.begin()]));
      continue;
    }
    keep(text.substr(p, search.begin() - p));
    for (uint32_t k = 1; k <= impl_->captures; ++k) {
      std::string_view g;
      if (search.group(k, &g)) keep(g);
    }
    p = q = search.end();
  }
  keep(text.substr(p));
}

const std::string& Pattern::compiled_source() const { return impl_->source; }

Pattern::Pattern(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Pattern::~Pattern() = default;
Pattern::Pattern(Pattern&&) noexcept = default;
Pattern& Pattern::operator=(Pattern&&) noexcept = default;

}  // namespace llmcpu::hf
