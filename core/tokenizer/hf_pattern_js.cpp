#include "core/tokenizer/hf_pattern_js.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "core/tokenizer/hf_pattern_props.h"
#include "core/tokenizer/hf_pattern_sets.h"
#include "simd/error.h"

namespace llmcpu::hf::detail {

namespace {

constexpr uint64_t kUnbounded = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kPcre2MaxRepeat = 65535;  // PCRE2's largest {n,m}
constexpr size_t kPcre2MaxNameLength = 32;
constexpr int kPcre2MaxNesting = 250;  // PCRE2's default limit on nested parentheses

char32_t hex_value(char h) {
  return static_cast<char32_t>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
}

// JavaScript's \b and \B: ASCII word characters.
constexpr const char* kJsWordBoundary =
    "(?:(?<![0-9A-Z_a-z])(?=[0-9A-Z_a-z])|(?<=[0-9A-Z_a-z])(?![0-9A-Z_a-z]))";
constexpr const char* kJsNonWordBoundary =
    "(?:(?<![0-9A-Z_a-z])(?![0-9A-Z_a-z])|(?<=[0-9A-Z_a-z])(?=[0-9A-Z_a-z]))";

// What the repetition rules need to know of an atom.
struct Shape {
  bool nullable = false;    // can match the empty string
  bool zero_width = false;  // can match nothing but the empty string
  bool capture = false;     // holds a capturing group
};

struct Quantifier {
  uint64_t min = 0, max = 0;
  bool lazy = false;
};

// A quantifier as PCRE2 writes it: * + ? {n} {n,} {n,m}, with ? when lazy.
std::string quantifier_text(const Quantifier& q) {
  std::string text;
  if (q.min == 0 && q.max == kUnbounded) {
    text += '*';
  } else if (q.min == 1 && q.max == kUnbounded) {
    text += '+';
  } else if (q.min == 0 && q.max == 1) {
    text += '?';
  } else {
    text += '{';
    text += std::to_string(q.min);
    if (q.max != q.min) text += ',';
    if (q.max != q.min && q.max != kUnbounded) text += std::to_string(q.max);
    text += '}';
  }
  if (q.lazy) text += '?';
  return text;
}

// A class member: a code point, or a set (written into `set`).
struct ClassAtom {
  bool is_set = false;
  char32_t cp = 0;
};

class JsParser {
 public:
  JsParser(const Mapped& in, const Context& ctx) : in_(in), ctx_(ctx) {}
  JsRegex run();

 private:
  bool at_end(size_t k = 0) const { return i_ + k >= in_.size(); }
  char peek(size_t k = 0) const { return at_end(k) ? '\0' : in_.text[i_ + k]; }
  [[noreturn]] void fail(size_t js_at, const std::string& construct,
                         const std::string& detail = "") const {
    ctx_.fail(in_.at(js_at), construct, detail);
  }
  void emit(std::string_view s, size_t js_at) { re_.pcre2.add(s, in_.at(js_at)); }

  Shape disjunction();
  Shape alternative();
  Shape term();
  Shape atom(bool* quantifiable);
  Shape group(bool* quantifiable);
  Shape escape(bool* quantifiable);
  bool quantifier(Quantifier* q);
  uint64_t decimal();
  void check_repeat(const Shape& a, const Quantifier& q, size_t js_at) const;
  void character_class();
  ClassAtom class_atom(ClassSet& set);
  char32_t character_escape(bool in_class);
  char32_t hex_digits(size_t count, size_t js_at);
  void property(ClassSet& set, bool negated, size_t js_at);
  void literal(char32_t cp, size_t js_at);

  const Mapped& in_;
  const Context& ctx_;
  size_t i_ = 0;
  int depth_ = 0;  // groups open around i_
  JsRegex re_;
  std::vector<std::string> names_;
};

JsRegex JsParser::run() {
  disjunction();
  if (!at_end()) fail(i_, "an unmatched ')'");
  re_.named_groups = !names_.empty();
  return std::move(re_);
}

Shape JsParser::disjunction() {
  Shape all = alternative();
  while (peek() == '|') {
    emit("|", i_++);
    const Shape a = alternative();
    all.nullable |= a.nullable;
    all.zero_width &= a.zero_width;
    all.capture |= a.capture;
  }
  return all;
}

Shape JsParser::alternative() {
  Shape s{true, true, false};
  while (!at_end() && peek() != '|' && peek() != ')') {
    const Shape t = term();
    s.nullable &= t.nullable;
    s.zero_width &= t.zero_width;
    s.capture |= t.capture;
  }
  return s;
}

Shape JsParser::term() {
  bool quantifiable = true;
  const Shape a = atom(&quantifiable);
  const size_t at = i_;
  Quantifier q;
  if (!quantifier(&q)) return a;
  if (!quantifiable) fail(at, "a quantifier after an assertion", "JavaScript repeats no assertion");
  check_repeat(a, q, at);
  emit(quantifier_text(q), at);
  return Shape{a.nullable || q.min == 0, a.zero_width || q.max == 0, a.capture};
}

// JavaScript's repetition: every repetition beyond the minimum must consume a character (one
// that matches empty fails and backtracks into the group), and a repetition clears the group's
// captures. PCRE2 ends the loop on an empty repetition and keeps captures from earlier ones.
void JsParser::check_repeat(const Shape& a, const Quantifier& q, size_t js_at) const {
  if (q.max > 1 && a.capture) {
    fail(js_at, "a capturing group inside a repeated group",
         "JavaScript clears it on each repetition, PCRE2 keeps the last value; a non-capturing "
         "group (?:...) may be repeated");
  }
  if (q.min < q.max && a.nullable && !(a.zero_width && !a.capture)) {
    fail(js_at, "a repeated group that can match the empty string",
         "JavaScript fails an empty repetition and backtracks, PCRE2 ends the loop; groups that "
         "always consume a character, or only assert, may be repeated");
  }
  if (q.min > kPcre2MaxRepeat || (q.max != kUnbounded && q.max > kPcre2MaxRepeat)) {
    fail(js_at, "a repetition count above 65535", "PCRE2's limit");
  }
}

uint64_t JsParser::decimal() {
  uint64_t v = 0;
  while (is_ascii_digit(static_cast<unsigned char>(peek()))) {
    v = std::min<uint64_t>(v * 10 + static_cast<uint64_t>(peek() - '0'), kUnbounded - 1);
    ++i_;
  }
  return v;
}

bool JsParser::quantifier(Quantifier* q) {
  const size_t at = i_;
  switch (peek()) {
    case '*':
      *q = {0, kUnbounded};
      ++i_;
      break;
    case '+':
      *q = {1, kUnbounded};
      ++i_;
      break;
    case '?':
      *q = {0, 1};
      ++i_;
      break;
    case '{': {
      ++i_;
      if (!is_ascii_digit(static_cast<unsigned char>(peek()))) fail(at, "a lone '{'");
      q->min = q->max = decimal();
      if (peek() == ',') {
        ++i_;
        q->max = is_ascii_digit(static_cast<unsigned char>(peek())) ? decimal() : kUnbounded;
      }
      if (peek() != '}') fail(at, "a lone '{'");
      ++i_;
      if (q->max < q->min) fail(at, "a repetition {n,m} with n > m");
      break;
    }
    default:
      return false;
  }
  q->lazy = peek() == '?';
  if (q->lazy) ++i_;
  return true;
}

Shape JsParser::atom(bool* quantifiable) {
  const size_t at = i_;
  const char c = peek();
  switch (c) {
    case '^':
      ++i_;
      *quantifiable = false;
      emit("\\A", at);
      return {true, true, false};
    case '$':
      ++i_;
      *quantifiable = false;
      emit("\\z", at);
      return {true, true, false};
    case '.':
      ++i_;
      emit("[^\\n\\r\\x{2028}\\x{2029}]", at);
      return {};
    case '(':
      return group(quantifiable);
    case '[':
      character_class();
      return {};
    case '\\':
      return escape(quantifiable);
    case '*':
    case '+':
    case '?':
    case '{':
      fail(at, "a quantifier with nothing to repeat");
    case ']':
    case '}':
      fail(at, std::string("a lone '") + c + "'");
    default:
      break;
  }
  size_t len = 1;
  const char32_t cp = code_point_at(in_.text, i_, &len);
  i_ += len;
  literal(cp, at);
  return {};
}

void JsParser::literal(char32_t cp, size_t js_at) {
  std::string text;
  if (is_surrogate(cp)) {
    text = "(?:(?!))";  // a lone surrogate: never in well-formed UTF-8
  } else {
    append_pcre2_literal(text, cp);
  }
  emit(text, js_at);
}

Shape JsParser::group(bool* quantifiable) {
  const size_t at = i_++;
  std::string open = "(";
  bool lookaround = false, capture = true;
  if (peek() == '?') {
    capture = false;
    const char k = peek(1), k2 = peek(2);
    if (k == ':' || k == '=' || k == '!') {
      open = std::string("(?") + k;
      lookaround = k != ':';
      i_ += 2;
    } else if (k == '<' && (k2 == '=' || k2 == '!')) {
      open = std::string("(?<") + k2;
      lookaround = true;
      re_.lookbehinds.push_back({re_.pcre2.size(), in_.at(at)});
      i_ += 3;
    } else if (k == '<') {
      i_ += 2;
      const size_t name_at = i_;
      while (!at_end() && peek() != '>') ++i_;
      const std::string name = in_.text.substr(name_at, i_ - name_at);
      bool ok = !at_end() && !name.empty() && name.size() <= kPcre2MaxNameLength &&
                !is_ascii_digit(static_cast<unsigned char>(name[0]));
      for (char n : name) ok = ok && (is_ascii_letter(n) || is_ascii_digit(n) || n == '_');
      if (!ok) fail(at, "this group name", "names are [A-Za-z_][A-Za-z0-9_]*, up to 32 characters");
      if (std::find(names_.begin(), names_.end(), name) != names_.end()) {
        fail(at, "a group name used twice");
      }
      names_.push_back(name);
      open = "(?<" + name + ">";
      capture = true;
      ++i_;
    } else {
      fail(at, "this group syntax",
           "(...), (?:...), (?=...), (?!...), (?<=...), (?<!...), (?<name>...), (?>...) and "
           "(?i:...) are supported; inline options other than (?i:...), comments, conditionals "
           "and absent operators are not");
    }
  }
  if (capture) ++re_.captures;
  if (++depth_ > kPcre2MaxNesting) fail(at, "groups nested more than 250 deep", "PCRE2's limit");
  emit(open, at);
  Shape inner = disjunction();
  if (peek() != ')') fail(at, "a group without its ')'");
  emit(")", i_++);
  --depth_;
  if (lookaround) {
    *quantifiable = false;
    return {true, true, inner.capture};
  }
  inner.capture |= capture;
  return inner;
}

Shape JsParser::escape(bool* quantifiable) {
  const size_t at = i_++;
  if (at_end()) fail(at, "a '\\' at the end of the pattern");
  const char c = peek();
  ClassSet set;
  switch (c) {
    case 'b':
    case 'B':
      ++i_;
      *quantifiable = false;
      emit(c == 'b' ? kJsWordBoundary : kJsNonWordBoundary, at);
      return {true, true, false};
    case 'd':
    case 'D':
    case 's':
    case 'S':
    case 'w':
    case 'W': {
      ++i_;
      std::string text;
      append_class(text, ClassSet{js_set(static_cast<char>(c | 0x20)), ""}, c < 'a');
      emit(text, at);
      return {};
    }
    case 'p':
    case 'P': {
      ++i_;
      property(set, c == 'P', at);
      emit(set.properties, at);
      return {};
    }
    case 'k':
      fail(at, "a backreference \\k<name>", "backreferences are not supported");
    default:
      break;
  }
  if (c >= '1' && c <= '9') fail(at, "a backreference \\n", "backreferences are not supported");
  literal(character_escape(false), at);
  return {};
}

// \f \n \r \t \v, \cX, \0, \xHH, \uHHHH (a surrogate pair as one), \u{H...}, and the escaped
// syntax characters (and '-' in a class); i_ is just past the backslash.
char32_t JsParser::character_escape(bool in_class) {
  const size_t at = i_ - 1;
  const char c = peek();
  ++i_;
  switch (c) {
    case 'f':
      return 0x0C;
    case 'n':
      return 0x0A;
    case 'r':
      return 0x0D;
    case 't':
      return 0x09;
    case 'v':
      return 0x0B;
    case 'c':
      if (!is_ascii_letter(static_cast<unsigned char>(peek()))) fail(at, "a \\c without a letter");
      return static_cast<unsigned char>(in_.text[i_++]) % 32;
    case '0':
      if (is_ascii_digit(static_cast<unsigned char>(peek()))) fail(at, "an octal escape");
      return 0;
    case 'x':
      return hex_digits(2, at);
    case 'u': {
      if (peek() == '{') {
        ++i_;
        char32_t v = 0;
        size_t digits = 0;
        for (; is_hex_digit(static_cast<unsigned char>(peek())); ++i_, ++digits) {
          v = std::min<char32_t>(v * 16 + hex_value(peek()), kMaxCodePoint + 1);
        }
        if (digits == 0 || peek() != '}' || v > kMaxCodePoint) fail(at, "a malformed \\u{...}");
        ++i_;
        return v;
      }
      const char32_t v = hex_digits(4, at);
      if (v >= 0xD800 && v <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
        const size_t save = i_;
        i_ += 2;
        bool ok = true;
        for (size_t k = 0; k < 4; ++k) ok = ok && is_hex_digit(static_cast<unsigned char>(peek(k)));
        if (ok) {
          const char32_t lo = hex_digits(4, at);
          if (lo >= 0xDC00 && lo <= 0xDFFF) return 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
        }
        i_ = save;
      }
      return v;
    }
    default:
      break;
  }
  if (std::string_view("^$\\.*+?()[]{}|/").find(c) != std::string_view::npos ||
      (in_class && c == '-')) {
    return static_cast<unsigned char>(c);
  }
  size_t len = 1;
  code_point_at(in_.text, i_ - 1, &len);
  fail(at, "the escape \\" + in_.text.substr(i_ - 1, len),
       "tokenizers.js passes it to JavaScript, which rejects it");
}

char32_t JsParser::hex_digits(size_t count, size_t js_at) {
  char32_t v = 0;
  for (size_t k = 0; k < count; ++k) {
    const char h = peek();
    if (!is_hex_digit(static_cast<unsigned char>(h))) fail(js_at, "a malformed \\x or \\u escape");
    v = v * 16 + hex_value(h);
    ++i_;
  }
  return v;
}

// \p{...} or \P{...}; i_ is just past the p.
void JsParser::property(ClassSet& set, bool negated, size_t js_at) {
  if (peek() != '{') fail(js_at, "a \\p or \\P without {name}");
  const size_t begin = ++i_;
  while (!at_end() && peek() != '}') ++i_;
  if (at_end()) fail(js_at, "a \\p{ without its '}'");
  const std::string name = in_.text.substr(begin, i_ - begin);
  ++i_;
  Property p;
  switch (js_property(name, &p)) {
    case PropertyLookup::kFound:
      break;
    case PropertyLookup::kMissingInPcre2:
      fail(js_at, "the Unicode property " + name, "JavaScript knows it, PCRE2 10.42 does not");
    case PropertyLookup::kUnknown:
      fail(js_at, "the Unicode property " + name,
           "it is neither a property name of JavaScript nor a script of Unicode 14 (PCRE2 "
           "10.42's tables); General_Category values, binary properties such as White_Space and "
           "scripts such as Han or Script=Latin are supported");
  }
  set.properties += negated != p.invert ? "\\P{" : "\\p{";
  set.properties += p.pcre2;
  set.properties += '}';
}

void JsParser::character_class() {
  const size_t at = i_++;
  const bool negated = peek() == '^';
  if (negated) ++i_;
  ClassSet set;
  for (;;) {
    if (at_end()) fail(at, "a character class without its ']'");
    if (peek() == ']') break;
    const size_t item_at = i_;
    const ClassAtom a = class_atom(set);
    if (peek() == '-' && !at_end(1) && peek(1) != ']') {
      ++i_;
      const ClassAtom b = class_atom(set);
      if (a.is_set || b.is_set) fail(item_at, "a class range whose end is a set");
      if (a.cp > b.cp) fail(item_at, "a class range out of order");
      set.ranges.push_back({a.cp, b.cp});
    } else if (!a.is_set) {
      set.ranges.push_back({a.cp, a.cp});
    }
  }
  ++i_;
  std::string text;
  append_class(text, set, negated);
  emit(text, at);
}

ClassAtom JsParser::class_atom(ClassSet& set) {
  const size_t at = i_;
  if (at_end()) fail(at, "a character class without its ']'");
  if (peek() != '\\') {
    size_t len = 1;
    const char32_t cp = code_point_at(in_.text, i_, &len);
    i_ += len;
    return {false, cp};
  }
  ++i_;
  if (at_end()) fail(at, "a '\\' at the end of the pattern");
  const char c = peek();
  switch (c) {
    case 'b':
      ++i_;
      return {false, 0x08};
    case 'd':
    case 'D':
    case 's':
    case 'S':
    case 'w':
    case 'W': {
      ++i_;
      const auto& members = js_set(static_cast<char>(c | 0x20));
      const std::vector<Range> add = c < 'a' ? complement(members) : members;
      set.ranges.insert(set.ranges.end(), add.begin(), add.end());
      return {true, 0};
    }
    case 'p':
    case 'P':
      ++i_;
      property(set, c == 'P', at);
      return {true, 0};
    case 'B':
    case 'k':
      fail(at, std::string("the escape \\") + c + " in a character class");
    default:
      break;
  }
  if (c >= '1' && c <= '9') fail(at, "a backreference in a character class");
  const char32_t cp = character_escape(true);
  return {false, cp};
}

}  // namespace

JsRegex js_to_pcre2(const Mapped& js, const Context& ctx) { return JsParser(js, ctx).run(); }

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

Code compile_pcre2(const JsRegex& re, const Context& ctx) {
  int err = 0;
  PCRE2_SIZE err_at = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(re.pcre2.text.data()), re.pcre2.text.size(),
                    PCRE2_UTF | PCRE2_MATCH_INVALID_UTF, &err, &err_at, nullptr);
  if (code) return Code(code);
  if (err == PCRE2_ERROR_LOOKBEHIND_NOT_FIXED_LENGTH ||
      err == PCRE2_ERROR_LOOKBEHIND_TOO_COMPLICATED || err == PCRE2_ERROR_LOOKBEHIND_TOO_LONG) {
    size_t origin = re.pcre2.at(err_at);
    for (const JsRegex::Lookbehind& lb : re.lookbehinds) {
      if (lb.pcre2_offset <= err_at) origin = lb.origin;
    }
    ctx.fail(origin, "a lookbehind whose length is not fixed",
             "PCRE2 10.42 (" + pcre2_message(err) +
                 ") needs each alternative of (?<=...) or (?<!...) to match one fixed length");
  }
  ctx.fail(re.pcre2.at(err_at), "a construct PCRE2 cannot compile",
           "PCRE2 says: " + pcre2_message(err));
}

}  // namespace llmcpu::hf::detail
