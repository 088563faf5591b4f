#include "core/tokenizer/hf_pattern_onig_class.h"

#include <vector>

#include "core/tokenizer/hf_pattern_js.h"

namespace llmcpu::hf::detail {

namespace {

constexpr int kMaxNesting = 256;  // tokenizers.js's limit

// What the operand's text ends with, which decides what a following '-' or set may do.
enum class Tail { kNone, kScalar, kSet, kRange, kCompleteRange };

// One side of an && intersection: a plain class body, and the atoms (nested classes, complements)
// that can only be joined to it by a lookahead union.
struct Operand {
  Mapped fragment;
  std::vector<Mapped> alternatives;
  Tail tail = Tail::kNone;
  bool complex = false;  // holds a set (property, POSIX class, shorthand, nested class)
};

[[noreturn]] void range_error(const Context& ctx, size_t origin) {
  ctx.fail(origin, "a class range with a set at one end",
           "a range is between two characters, not \\p{..}, \\d, \\w, \\s, \\h, a POSIX "
           "bracket or a nested class");
}

void add_atom(Operand& op, const Mapped& atom, size_t origin, bool complex, const Context& ctx) {
  if (op.tail == Tail::kRange) range_error(ctx, origin);
  op.alternatives.push_back(atom);
  op.tail = Tail::kSet;
  op.complex = op.complex || complex;
}

void add_atom(Operand& op, std::string_view atom, size_t origin, const Context& ctx) {
  Mapped m;
  m.add(atom, origin);
  add_atom(op, m, origin, true, ctx);
}

void append_fragment(Operand& op, std::string_view text, size_t origin, bool set_valued,
                     const Context& ctx) {
  if (set_valued && op.tail == Tail::kRange) range_error(ctx, origin);
  op.fragment.add(text, origin);
  if (op.tail == Tail::kRange) {
    op.tail = Tail::kCompleteRange;
    return;
  }
  op.tail = set_valued ? Tail::kSet : Tail::kScalar;
  op.complex = op.complex || set_valued;
}

// Several sets as one code point: (?:(?=(?:A|B|...))[\s\S]).
Mapped set_union(const std::vector<Mapped>& pieces) {
  if (pieces.size() == 1) return pieces[0];
  const size_t at = pieces[0].at(0);
  Mapped m;
  m.add("(?:(?=(?:", at);
  for (size_t k = 0; k < pieces.size(); ++k) {
    if (k) m.add("|", at);
    m.add(pieces[k]);
  }
  m.add("))", at);
  m.add(kAnyCodePoint, at);
  m.add(")", at);
  return m;
}

Mapped compile_operand(const Operand& op) {
  std::vector<Mapped> pieces;
  if (!op.fragment.empty()) {
    Mapped direct;
    direct.add("[", op.fragment.at(0));
    direct.add(op.fragment);
    direct.add("]", op.fragment.at(op.fragment.size() - 1));
    pieces.push_back(direct);
  }
  pieces.insert(pieces.end(), op.alternatives.begin(), op.alternatives.end());
  return set_union(pieces);
}

// The ASCII letters the class holds in one case only, in the other case (tokenizers.js's
// get_ascii_fold_additions: it tests the 52 letters against ^(?:class)$).
std::string ascii_fold_additions(const Mapped& positive_atom, const Context& ctx) {
  const size_t at = positive_atom.at(0);
  Mapped js;
  js.add("^(?:", at);
  js.add(positive_atom);
  js.add(")$", at);
  const Code code = compile_pcre2(js_to_pcre2(js, ctx), ctx);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code.get(), nullptr);
  auto member = [&](char c) {
    return pcre2_match(code.get(), reinterpret_cast<PCRE2_SPTR>(&c), 1, 0, 0, md, nullptr) >= 0;
  };
  std::string additions;
  for (char upper = 'A'; upper <= 'Z'; ++upper) {
    const char lower = static_cast<char>(upper | 0x20);
    const bool has_upper = member(upper), has_lower = member(lower);
    if (has_upper != has_lower) additions += has_upper ? lower : upper;
  }
  pcre2_match_data_free(md);
  return additions;
}

// The JavaScript texts of escapes inside classes; "" for the others.
std::string class_escape_rewrite(char c) {
  switch (c) {
    case 'h':
      return std::string(kHexDigitChars);
    case 'w':
      return std::string(kWordCharsInClass);
    case 'd':
      return "\\p{Nd}";
    case 'D':
      return "\\P{Nd}";
    case 's':
      return "\\p{White_Space}";
    case 'S':
      return "\\P{White_Space}";
    case 'a':
      return "\\x07";
    case 'e':
      return "\\x1B";
    default:
      return "";
  }
}

// The class escape at `index` (a backslash), added to `op`; returns where the escape ends.
size_t class_escape(const Mapped& in, size_t index, Operand& op, const Context& ctx) {
  const std::string_view s = in.text;
  const size_t at = in.at(index);
  char kind = 0;
  std::string_view body;
  size_t len = 0;
  if (braced_escape(s, index, &kind, &body, &len)) {
    if (kind == 'P' && body == "Word") {
      add_atom(op, "[^" + std::string(kWordCharsInClass) + "]", at, ctx);
    } else {
      const std::string text = kind == 'x'                     ? "\\u{" + std::string(body) + "}"
                               : kind == 'p' && body == "Word" ? std::string(kWordCharsInClass)
                                                               : std::string(s.substr(index, len));
      append_fragment(op, text, at, kind == 'p' || kind == 'P', ctx);
    }
    return index + len;
  }
  if (const size_t n = fixed_width_escape(s, index)) {
    append_fragment(op, s.substr(index, n), at, false, ctx);
    return index + n;
  }
  if (index + 1 >= s.size()) ctx.fail(at, "an unterminated escape in a character class");
  size_t next_len = 1;
  const char32_t next = code_point_at(s, index + 1, &next_len);
  const size_t end = index + 1 + next_len;
  if (next == 'W' || next == 'H') {  // tokenizers.js's CLASS_COMPLEMENT_ALTERNATIVES
    const std::string_view chars = next == 'W' ? kWordCharsInClass : kHexDigitChars;
    add_atom(op, "[^" + std::string(chars) + "]", at, ctx);
    return end;
  }
  std::string text(raw_whitespace_escape(next));
  bool set_valued = false;
  if (text.empty() && next < 0x80) {  // tokenizers.js's CLASS_ESCAPE_REWRITES
    text = class_escape_rewrite(static_cast<char>(next));
    set_valued = !text.empty() && next != 'a' && next != 'e';
  }
  if (text.empty()) {
    if (keeps_backslash(next, true)) text += '\\';
    text += s.substr(index + 1, next_len);
  }
  append_fragment(op, text, at, set_valued, ctx);
  return end;
}

// POSIX bracket expressions, as tokenizers.js maps them.
const char* posix_fragment(std::string_view name) {
  static const std::pair<const char*, const char*> kPosix[] = {
      {"alpha", "\\p{Alphabetic}"}, {"alnum", "\\p{Alphabetic}\\p{Nd}"},
      {"digit", "\\p{Nd}"},         {"lower", "\\p{Lowercase}"},
      {"upper", "\\p{Uppercase}"},  {"space", "\\p{White_Space}"},
      {"blank", "\\t\\p{Zs}"},      {"punct", "\\p{P}\\p{S}"},
      {"cntrl", "\\p{Cc}"},         {"word", "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}"},
      {"xdigit", "0-9A-Fa-f"}};
  for (const auto& [n, fragment] : kPosix) {
    if (name == n) return fragment;
  }
  return nullptr;
}

// [:name:] or [:^name:] at byte i (name: letters of \p{Alphabetic}); its length, 0 if none.
size_t posix_bracket(std::string_view s, size_t i, bool* negated, std::string_view* name) {
  static const Code code = [] {
    int err = 0;
    PCRE2_SIZE at = 0;
    const char* re = "\\[:(\\^?)(\\p{Alphabetic}+):\\]";
    return Code(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(re), PCRE2_ZERO_TERMINATED,
                              PCRE2_UTF | PCRE2_ANCHORED, &err, &at, nullptr));
  }();
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code.get(), nullptr);
  const int rc = pcre2_match(code.get(), reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), i,
                             PCRE2_NO_UTF_CHECK, md, nullptr);
  size_t len = 0;
  if (rc > 0) {
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    *negated = ov[3] > ov[2];
    *name = s.substr(ov[4], ov[5] - ov[4]);
    len = ov[1] - ov[0];
  }
  pcre2_match_data_free(md);
  return len;
}

// [.x.] or [=x=] at byte i: collating elements and equivalence classes.
bool collating_bracket(std::string_view s, size_t i) {
  if (i + 1 >= s.size() || (s[i + 1] != '.' && s[i + 1] != '=')) return false;
  const size_t close = s.find(']', i + 2);
  return close != std::string_view::npos && close >= i + 3 && s[close - 1] == s[i + 1];
}

}  // namespace

bool braced_escape(std::string_view s, size_t i, char* kind, std::string_view* body, size_t* len) {
  if (i + 2 >= s.size() || s[i] != '\\' || s[i + 2] != '{') return false;
  const char k = s[i + 1];
  if (k != 'p' && k != 'P' && k != 'x' && k != 'u') return false;
  const size_t close = s.find('}', i + 3);
  if (close == std::string_view::npos) return false;
  *kind = k;
  *body = s.substr(i + 3, close - (i + 3));
  *len = close + 1 - i;
  return true;
}

size_t fixed_width_escape(std::string_view s, size_t i) {
  if (i + 2 >= s.size() || s[i] != '\\') return 0;
  auto hex_run = [&](size_t n) {
    if (i + 2 + n > s.size()) return false;
    for (size_t k = 0; k < n; ++k) {
      if (!is_hex_digit(static_cast<unsigned char>(s[i + 2 + k]))) return false;
    }
    return true;
  };
  switch (s[i + 1]) {
    case 'x':
      return hex_run(2) ? 4 : 0;
    case 'u':
      return hex_run(4) ? 6 : 0;
    case 'c':
      return is_ascii_letter(static_cast<unsigned char>(s[i + 2])) ? 3 : 0;
    default:
      return 0;
  }
}

std::string_view raw_whitespace_escape(char32_t c) {
  switch (c) {
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    case '\f':
      return "\\f";
    case '\v':
      return "\\v";
    default:
      return "";
  }
}

bool keeps_backslash(char32_t c, bool in_class) {
  if (c >= 0x80) return false;
  if (is_ascii_letter(c) || is_ascii_digit(c) || (in_class && c == '-')) return true;
  return std::string_view("^$\\.*+?()[]{}|/").find(static_cast<char>(c)) != std::string_view::npos;
}

std::string ascii_folded_hex(std::string_view hex) {
  if (hex.empty() || hex.size() > 8) return "";
  uint32_t v = 0;
  for (char h : hex) {
    if (!is_hex_digit(static_cast<unsigned char>(h))) return "";
    v = v * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
  }
  if (v > 127 || !is_ascii_letter(v)) return "";
  return std::string{'[', static_cast<char>(v | 0x20), static_cast<char>(v & ~0x20u), ']'};
}

namespace {

// The class is closed at `close`: its operands become one JavaScript atom.
ClassParse close_class(std::vector<Operand>& operands, ClassParse r, size_t close, bool ascii_fold,
                       bool apply_ascii_fold, const Context& ctx, const Mapped& in) {
  const size_t at = in.at(close);
  bool complex = false;
  for (const Operand& op : operands) complex = complex || op.complex;
  if (r.negated && operands.size() > 1 && r.contains_nested_negated_complex_set) {
    ctx.fail(at,
             "a negated class intersection with a nested negated class that holds a property, "
             "POSIX class or shorthand");
  }
  Mapped positive = compile_operand(operands[0]);
  if (operands.size() > 1) {
    Mapped both;
    both.add("(?:", at);
    for (size_t j = 1; j < operands.size(); ++j) {
      both.add("(?=", at);
      both.add(compile_operand(operands[j]));
      both.add(")", at);
    }
    both.add(positive);
    both.add(")", at);
    positive = both;
  }
  const bool is_direct = operands.size() == 1 && operands[0].alternatives.empty();
  Mapped direct = operands[0].fragment;
  if (ascii_fold && apply_ascii_fold) {
    const std::string additions = ascii_fold_additions(positive, ctx);
    if (!additions.empty()) {
      Mapped extra;
      extra.add("[" + additions + "]", at);
      if (is_direct) {
        direct.add(additions, at);
        positive = Mapped();
        positive.add("[", at);
        positive.add(direct);
        positive.add("]", at);
      } else {
        positive = set_union({positive, extra});
      }
    }
  }
  if (!r.negated) {
    r.atom = positive;
  } else if (is_direct) {
    r.atom.add("[^", at);
    r.atom.add(direct);
    r.atom.add("]", at);
  } else {
    r.atom.add("(?:(?!", at);
    r.atom.add(positive);
    r.atom.add(")", at);
    r.atom.add(kAnyCodePoint, at);
    r.atom.add(")", at);
  }
  r.end = close + 1;
  r.contains_complex_set = complex;
  return r;
}

// A '[' inside a class: a POSIX bracket or a nested class; returns where it ends.
size_t class_bracket(const Mapped& in, size_t i, Operand& op, bool ascii_fold, int depth,
                     ClassParse& r, const Context& ctx) {
  const std::string_view s = in.text;
  const size_t at = in.at(i);
  if (s.substr(i, 5) == "[:^:]") ctx.fail(at, "an empty negated POSIX bracket [:^:]");
  bool negated = false;
  std::string_view name;
  if (const size_t len = posix_bracket(s, i, &negated, &name)) {
    const char* fragment = posix_fragment(name);
    if (!fragment) {
      ctx.fail(at, "the POSIX bracket [:" + std::string(name) + ":]",
               "alpha, alnum, digit, lower, upper, space, blank, punct, cntrl, word and xdigit "
               "are supported");
    }
    if (ascii_fold && negated && (name == "lower" || name == "upper")) {
      ctx.fail(at, "a negated POSIX " + std::string(name) + " bracket inside (?i:...)");
    }
    if (negated) {
      add_atom(op, "[^" + std::string(fragment) + "]", at, ctx);
    } else {
      append_fragment(op, fragment, at, true, ctx);
    }
    return i + len;
  }
  if (collating_bracket(s, i)) {
    ctx.fail(at, "a POSIX collating element [.x.] or equivalence class [=x=]");
  }
  const ClassParse nested = parse_onig_class(in, i, ascii_fold, false, depth + 1, ctx);
  add_atom(op, nested.atom, at, nested.contains_complex_set, ctx);
  r.contains_nested_negated_complex_set = r.contains_nested_negated_complex_set ||
                                          nested.contains_nested_negated_complex_set ||
                                          (nested.negated && nested.contains_complex_set);
  return nested.end;
}

// A '-' inside a class: a range, or a literal '-'.
void class_dash(const Mapped& in, size_t i, Operand& op, const Context& ctx) {
  const std::string_view s = in.text;
  const bool terminal = (i + 1 < s.size() && s[i + 1] == ']') || s.substr(i + 1, 2) == "&&";
  if (op.tail == Tail::kSet && !terminal) range_error(ctx, in.at(i));
  if (op.tail == Tail::kNone || op.tail == Tail::kRange || op.tail == Tail::kCompleteRange ||
      terminal) {
    append_fragment(op, "\\-", in.at(i), false, ctx);
  } else {
    op.fragment.add("-", in.at(i));
    op.tail = Tail::kRange;
  }
}

}  // namespace

ClassParse parse_onig_class(const Mapped& in, size_t start, bool ascii_fold, bool apply_ascii_fold,
                            int depth, const Context& ctx) {
  if (depth > kMaxNesting) ctx.fail(in.at(start), "character classes nested more than 256 deep");
  const std::string_view s = in.text;
  ClassParse r;
  size_t i = start + 1;
  r.negated = i < s.size() && s[i] == '^';
  if (r.negated) ++i;
  const size_t first = i;
  std::vector<Operand> operands(1);
  while (i < s.size()) {
    Operand& op = operands.back();
    const size_t at = in.at(i);
    const char c = s[i];
    if (c == '\\') {
      i = class_escape(in, i, op, ctx);
    } else if (c == ']' && i == first) {
      append_fragment(op, "\\]", at, false, ctx);
      ++i;
    } else if (c == ']') {
      if (op.tail == Tail::kNone) {
        ctx.fail(operands.size() > 1 ? at : in.at(start),
                 operands.size() > 1 ? "a class intersection with an empty operand"
                                     : "an empty character class");
      }
      return close_class(operands, std::move(r), i, ascii_fold, apply_ascii_fold, ctx, in);
    } else if (s.substr(i, 2) == "&&") {
      if (op.tail == Tail::kNone) ctx.fail(at, "a class intersection with an empty operand");
      operands.emplace_back();
      i += 2;
    } else if (c == '[') {
      i = class_bracket(in, i, op, ascii_fold, depth, r, ctx);
    } else if (c == '-') {
      class_dash(in, i, op, ctx);
      ++i;
    } else {
      size_t len = 1;
      code_point_at(s, i, &len);
      append_fragment(op, c == '^' && op.fragment.empty() ? "\\^" : s.substr(i, len), at, false,
                      ctx);
      i += len;
    }
  }
  ctx.fail(in.at(start), operands.size() > 1 ? "a class intersection without its ']'"
                                             : "a character class without its ']'");
}

}  // namespace llmcpu::hf::detail
