#include "core/tokenizer/onig_rewrite.h"

#include <tuple>
#include <utility>
#include <vector>

#include "core/tokenizer/hf_pattern_onig_class.h"

namespace llmcpu::hf::detail {

namespace {

// Bloom's split pattern [^(\s|[.,!?…。，、।۔،])] (a class Oniguruma reads as nested) becomes
// [^()|\s.,!?…。，、।۔،], wherever "[^(\s|[" + one or more characters but ']' + "])]" occurs.
Mapped bloom_normalized(std::string_view source) {
  constexpr std::string_view kOpen = "[^(\\s|[";
  Mapped out;
  size_t i = 0;
  while (i < source.size()) {
    if (source.substr(i, kOpen.size()) == kOpen) {
      const size_t body = i + kOpen.size();
      const size_t close = source.find(']', body);
      if (close != std::string_view::npos && close > body && source.substr(close, 3) == "])]") {
        out.add("[^()|\\s", i);
        for (size_t k = body; k < close; ++k) out.add(source.substr(k, 1), k);
        out.add("]", close);
        i = close + 3;
        continue;
      }
    }
    out.add(source.substr(i, 1), i);
    ++i;
  }
  return out;
}

// JavaScript texts of the escapes outside classes (tokenizers.js's ESCAPE_REWRITES).
std::string escape_rewrite(char32_t c) {
  const std::string word(kWordClass);
  switch (c) {
    case 'A':
      return "(?<![\\s\\S])";
    case 'z':
      return "(?![\\s\\S])";
    case 'Z':
      return "(?=\\n?(?![\\s\\S]))";  // one optional final \n (not \r\n)
    case 'h':
      return "[" + std::string(kHexDigitChars) + "]";
    case 'H':
      return "[^" + std::string(kHexDigitChars) + "]";
    case 'w':
      return word;
    case 'W':
      return std::string(kNonWordClass);
    case 'd':
      return "\\p{Nd}";
    case 'D':
      return "\\P{Nd}";
    case 's':
      return "\\p{White_Space}";
    case 'S':
      return "\\P{White_Space}";
    case 'b':
      return "(?:(?<!" + word + ")(?=" + word + ")|(?<=" + word + ")(?!" + word + "))";
    case 'B':
      return "(?:(?<!" + word + ")(?!" + word + ")|(?<=" + word + ")(?=" + word + "))";
    case 'a':
      return "\\x07";
    case 'e':
      return "\\x1B";
    default:
      return "";
  }
}

class OnigRewriter {
 public:
  OnigRewriter(const Mapped& in, const Context& ctx) : in_(in), ctx_(ctx) {}
  Mapped run();

 private:
  void emit_atom(std::string_view text, size_t i) {
    atom_start_ = static_cast<ptrdiff_t>(out_.size());
    out_.add(text, in_.at(i));
    last_was_quantifier_ = false;
  }
  size_t escape(size_t i);
  size_t open_group(size_t i);
  size_t brace(size_t i);
  size_t special(size_t i, char c);

  const Mapped& in_;
  const Context& ctx_;
  Mapped out_;
  ptrdiff_t atom_start_ = -1;  // where the last atom starts in out_; -1 when there is none
  bool last_was_quantifier_ = false;
  bool ascii_fold_ = false;                         // inside (?i:...)
  std::vector<std::pair<ptrdiff_t, bool>> groups_;  // per open group: out_ offset, ascii_fold_
};

Mapped OnigRewriter::run() {
  const std::string_view s = in_.text;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '\\') {
      i = escape(i);
      continue;
    }
    if (const size_t next = special(i, c)) {
      i = next;
      continue;
    }
    size_t len = 1;
    const char32_t cp = code_point_at(s, i, &len);
    if (ascii_fold_ && is_ascii_letter(cp)) {
      emit_atom(std::string{'[', static_cast<char>(cp | 0x20), static_cast<char>(cp & ~0x20u), ']'},
                i);
    } else {
      emit_atom(s.substr(i, len), i);
    }
    i += len;
  }
  return std::move(out_);
}

// The characters with a meaning of their own; returns where the construct ends, 0 for others.
size_t OnigRewriter::special(size_t i, char c) {
  const size_t at = in_.at(i);
  switch (c) {
    case '[': {
      const ClassParse parsed = parse_onig_class(in_, i, ascii_fold_, true, 1, ctx_);
      atom_start_ = static_cast<ptrdiff_t>(out_.size());
      out_.add(parsed.atom);
      last_was_quantifier_ = false;
      return parsed.end;
    }
    case ']':
      emit_atom("\\]", i);
      return i + 1;
    case '.':
      emit_atom("[^\\n]", i);
      return i + 1;
    case '^':
      emit_atom("(?:(?<![\\s\\S])|(?<=\\n))", i);
      return i + 1;
    case '$':
      emit_atom("(?:(?=\\n)|(?![\\s\\S]))", i);
      return i + 1;
    case '(':
      return open_group(i);
    case ')': {
      out_.add(")", at);
      std::tie(atom_start_, ascii_fold_) =
          groups_.empty() ? std::pair<ptrdiff_t, bool>{-1, false} : groups_.back();
      if (!groups_.empty()) groups_.pop_back();
      last_was_quantifier_ = false;
      return i + 1;
    }
    case '|':
      out_.add("|", at);
      atom_start_ = -1;
      last_was_quantifier_ = false;
      return i + 1;
    case '{':
      return brace(i);
    case '}':
      emit_atom("\\}", i);
      return i + 1;
    case '+':
      if (!last_was_quantifier_) out_.add("+", at);
      last_was_quantifier_ = true;
      return i + 1;
    case '*':
    case '?':
      out_.add(std::string(1, c), at);
      last_was_quantifier_ = true;
      return i + 1;
    default:
      return 0;
  }
}

size_t OnigRewriter::open_group(size_t i) {
  const std::string_view rest = std::string_view(in_.text).substr(i);
  const bool fold_group = rest.substr(0, 4) == "(?i:";
  size_t prefix = 1;  // "(" unless one of (?: (?= (?! (?> (?<= (?<! (?<name>
  if (fold_group) {
    prefix = 4;
  } else if (rest.size() >= 3 && rest[1] == '?') {
    const char k = rest[2];
    if (k == ':' || k == '=' || k == '!' || k == '>') {
      prefix = 3;
    } else if (k == '<' && rest.size() >= 4 && (rest[3] == '=' || rest[3] == '!')) {
      prefix = 4;
    } else if (k == '<' && rest.size() >= 4 && (is_ascii_letter(rest[3]) || rest[3] == '_')) {
      size_t e = 4;
      while (e < rest.size() &&
             (is_ascii_letter(rest[e]) || is_ascii_digit(rest[e]) || rest[e] == '_')) {
        ++e;
      }
      if (e < rest.size() && rest[e] == '>') prefix = e + 1;
    }
  }
  const std::string_view source_prefix = rest.substr(0, prefix);
  groups_.push_back({static_cast<ptrdiff_t>(out_.size()), ascii_fold_});
  if (fold_group) ascii_fold_ = true;
  out_.add(fold_group || source_prefix == "(?>" ? "(?:" : source_prefix, in_.at(i));
  last_was_quantifier_ = false;
  return i + prefix;
}

// '{': a quantifier {n} {n,} {n,m} {,m} after an atom, else a literal '{'.
size_t OnigRewriter::brace(size_t i) {
  const std::string_view s = in_.text;
  size_t e = i + 1;
  const size_t digits_at = e;
  while (e < s.size() && is_ascii_digit(s[e])) ++e;
  const bool has_min = e > digits_at;
  bool valid = false;
  if (e < s.size() && s[e] == ',') {
    const size_t max_at = ++e;
    while (e < s.size() && is_ascii_digit(s[e])) ++e;
    valid = has_min || e > max_at;
  } else {
    valid = has_min;
  }
  valid = valid && e < s.size() && s[e] == '}';
  if (!valid || atom_start_ < 0) {
    emit_atom("\\{", i);
    return i + 1;
  }
  std::string body(s.substr(i + 1, e - i - 1));
  if (!has_min) body.insert(body.begin(), '0');
  const size_t at = in_.at(i);
  size_t next = e + 1;
  if (next < s.size() && (s[next] == '+' || s[next] == '*')) {
    const Mapped atom = out_.slice(static_cast<size_t>(atom_start_), out_.size());
    out_.truncate(static_cast<size_t>(atom_start_));
    out_.add("(?:", at);
    out_.add(atom);
    out_.add("{" + body + "})" + s[next], at);
    ++next;
  } else {
    out_.add("{" + body + "}", at);
  }
  last_was_quantifier_ = true;
  return next;
}

// A backslash at i; returns where the escape ends.
size_t OnigRewriter::escape(size_t i) {
  const std::string_view s = in_.text;
  char kind = 0;
  std::string_view body;
  size_t len = 0;
  if (braced_escape(s, i, &kind, &body, &len)) {
    std::string text(s.substr(i, len));
    if (kind == 'x') {
      const std::string folded = ascii_fold_ ? ascii_folded_hex(body) : "";
      text = folded.empty() ? "\\u{" + std::string(body) + "}" : folded;
    } else if (body == "Word") {
      text = kind == 'p' ? kWordClass : kNonWordClass;
    }
    emit_atom(text, i);
    return i + len;
  }
  if (const size_t n = fixed_width_escape(s, i)) {
    const std::string folded =
        ascii_fold_ && s[i + 1] != 'c' ? ascii_folded_hex(s.substr(i + 2, n - 2)) : "";
    emit_atom(folded.empty() ? s.substr(i, n) : std::string_view(folded), i);
    return i + n;
  }
  if (i + 1 >= s.size()) {
    out_.add("\\", in_.at(i));  // JavaScript rejects the pattern; the second step says so
    return s.size();
  }
  size_t next_len = 1;
  const char32_t next = code_point_at(s, i + 1, &next_len);
  const size_t end = i + 1 + next_len;
  if (next == 'G') return end;
  std::string text(raw_whitespace_escape(next));
  if (text.empty() && next < 0x80) text = escape_rewrite(next);
  if (text.empty()) {
    if (keeps_backslash(next, false)) text += '\\';
    text += s.substr(i + 1, next_len);
  }
  emit_atom(text, i);
  return end;
}

}  // namespace

Mapped onig_to_js(const Context& ctx) {
  const Mapped in = bloom_normalized(ctx.source);
  return OnigRewriter(in, ctx).run();
}

}  // namespace llmcpu::hf::detail
