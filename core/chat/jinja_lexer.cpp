// Preparing a template's text and cutting it into tokens, as @huggingface/jinja's lexer does (see
// jinja_lexer.h); its quirks are kept where they change what a template renders to.
#include "core/chat/jinja_lexer.h"

#include <algorithm>
#include <utility>

#include "core/chat/jinja_text.h"

namespace llmcpu::jinja {

const char* token_type_name(TokenType t) {
  static const char* const kNames[] = {"text",
                                       "number",
                                       "string",
                                       "identifier",
                                       "'='",
                                       "'('",
                                       "')'",
                                       "'{%'",
                                       "'%}'",
                                       "'{{'",
                                       "'}}'",
                                       "'['",
                                       "']'",
                                       "'{'",
                                       "'}'",
                                       "','",
                                       "'.'",
                                       "':'",
                                       "'|'",
                                       "additive operator",
                                       "multiplicative operator",
                                       "'**'",
                                       "comparison",
                                       "unary operator",
                                       "comment"};
  return kNames[static_cast<int>(t)];
}

namespace {

struct Prepared {
  std::string text;
  std::vector<size_t> from;
  void copy(const Prepared& in, size_t begin, size_t end) {
    text.append(in.text, begin, end - begin);
    from.insert(from.end(), in.from.begin() + begin, in.from.begin() + end);
  }
};

bool line_terminator_at(const std::string& s, size_t i, size_t* length) {
  *length = 1;
  if (s[i] == '\n' || s[i] == '\r') return true;
  if (s[i] == '\xE2' && i + 2 < s.size() && s[i + 1] == '\x80' &&
      (s[i + 2] == '\xA8' || s[i + 2] == '\xA9')) {
    *length = 3;
    return true;
  }
  return false;
}

// lstrip_blocks: spaces and tabs from a line's start up to a "{%", "{#" or "{-".
Prepared lstrip_blocks(const Prepared& in) {
  Prepared out;
  const std::string& s = in.text;
  bool line_start = true;
  for (size_t i = 0; i < s.size();) {
    if (line_start) {
      size_t j = i;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
      if (j + 1 < s.size() && s[j] == '{' &&
          (s[j + 1] == '#' || s[j + 1] == '%' || s[j + 1] == '-'))
        i = j;
      line_start = false;
      if (i >= s.size()) break;
    }
    size_t n = 1;
    line_start = line_terminator_at(s, i, &n);
    out.copy(in, i, i + n);
    i += n;
  }
  return out;
}

// trim_blocks: the newline right after "#}", "%}" or "-}".
Prepared trim_blocks(const Prepared& in) {
  Prepared out;
  const std::string& s = in.text;
  for (size_t i = 0; i < s.size();) {
    if (i + 2 < s.size() && (s[i] == '#' || s[i] == '%' || s[i] == '-') && s[i + 1] == '}' &&
        s[i + 2] == '\n') {
      out.copy(in, i, i + 2);
      i += 3;
    } else {
      out.copy(in, i, i + 1);
      ++i;
    }
  }
  return out;
}

size_t skip_space(const std::string& s, size_t i) {
  while (size_t n = js_space_at(s, i)) i += n;
  return i;
}

// The end of a {% generation %} or {% endgeneration %} tag that starts at s[k] ("{%"), or 0;
// `lstrip` and `rstrip` say whether it had "-" inside either end.
size_t generation_tag_end(const std::string& s, size_t k, bool* lstrip, bool* rstrip) {
  size_t i = k + 2;
  *lstrip = i < s.size() && s[i] == '-';
  if (*lstrip) ++i;
  i = skip_space(s, i);
  if (s.compare(i, 3, "end") == 0 && s.compare(i + 3, 10, "generation") == 0) i += 3;
  if (s.compare(i, 10, "generation") != 0) return 0;
  i = skip_space(s, i + 10);
  *rstrip = i < s.size() && s[i] == '-';
  if (*rstrip) ++i;
  return s.compare(i, 2, "%}") == 0 ? i + 2 : 0;
}

// {% generation %} / {% endgeneration %} (transformers' marks of the assistant's tokens) removed,
// with the white space around them unless the tag says "-" on that side.
Prepared drop_generation_tags(const Prepared& in) {
  Prepared out;
  const std::string& s = in.text;
  size_t cursor = 0;
  for (size_t k = s.find("{%"); k != std::string::npos; k = s.find("{%", k + 1)) {
    bool lstrip = false, rstrip = false;
    const size_t end = generation_tag_end(s, k, &lstrip, &rstrip);
    if (end == 0) continue;
    size_t before = k;
    while (before > cursor) {
      const size_t n = js_space_before(s, before);
      if (n == 0 || before - n < cursor) break;
      before -= n;
    }
    const size_t after = skip_space(s, end);
    out.copy(in, cursor, before);
    if (!lstrip) out.copy(in, before, k);
    if (!rstrip) out.copy(in, end, after);
    cursor = after;
    k = after - 1;
  }
  out.copy(in, cursor, s.size());
  return out;
}

}  // namespace

Source::Source(std::string origin, const std::string& text)
    : origin_(std::move(origin)), original_(text) {
  Prepared p;
  p.text = text;
  if (!p.text.empty() && p.text.back() == '\n') p.text.pop_back();
  p.from.resize(p.text.size());
  for (size_t i = 0; i < p.from.size(); ++i) p.from[i] = i;
  p = drop_generation_tags(trim_blocks(lstrip_blocks(p)));
  prepared_ = std::move(p.text);
  from_ = std::move(p.from);
}

TemplatePosition Source::position(size_t prepared_offset) const {
  const size_t at = prepared_offset < from_.size() ? from_[prepared_offset] : original_.size();
  TemplatePosition p{1, 1};
  for (size_t i = 0; i < at && i < original_.size(); ++i) {
    if (original_[i] == '\n') {
      ++p.line;
      p.column = 1;
    } else {
      ++p.column;
    }
  }
  return p;
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_';
}

// The operators and punctuation, longest first where one is the start of another.
struct Fixed {
  const char* text;
  TokenType type;
};
const Fixed kFixed[] = {{"{%", TokenType::kOpenStatement},  {"%}", TokenType::kCloseStatement},
                        {"{{", TokenType::kOpenExpression}, {"}}", TokenType::kCloseExpression},
                        {"(", TokenType::kOpenParen},       {")", TokenType::kCloseParen},
                        {"{", TokenType::kOpenCurly},       {"}", TokenType::kCloseCurly},
                        {"[", TokenType::kOpenSquare},      {"]", TokenType::kCloseSquare},
                        {",", TokenType::kComma},           {".", TokenType::kDot},
                        {":", TokenType::kColon},           {"|", TokenType::kPipe},
                        {"<=", TokenType::kComparison},     {">=", TokenType::kComparison},
                        {"==", TokenType::kComparison},     {"!=", TokenType::kComparison},
                        {"<", TokenType::kComparison},      {">", TokenType::kComparison},
                        {"+", TokenType::kAdditive},        {"-", TokenType::kAdditive},
                        {"~", TokenType::kAdditive},        {"**", TokenType::kPower},
                        {"*", TokenType::kMultiplicative},  {"//", TokenType::kMultiplicative},
                        {"/", TokenType::kMultiplicative},  {"%", TokenType::kMultiplicative},
                        {"=", TokenType::kEquals}};

class Lexer {
 public:
  explicit Lexer(const Source& source) : source_(source), src_(source.text()) {}
  std::vector<Token> run();

 private:
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    throw TemplateSyntaxError(source_.origin(), source_.position(at), what);
  }
  TokenType last() const { return tokens_.empty() ? TokenType::kText : tokens_.back().type; }
  void push(TokenType t, std::string v, size_t at) { tokens_.push_back({t, std::move(v), at}); }
  void strip_trailing_space() {
    if (!tokens_.empty() && tokens_.back().type == TokenType::kText) {
      tokens_.back().value = trim_end(tokens_.back().value);
      if (tokens_.back().value.empty()) tokens_.pop_back();
    }
  }
  bool starts(const char* s) const {
    return src_.compare(i_, std::char_traits<char>::length(s), s) == 0;
  }
  bool text_next() const;
  void comment();
  std::string quoted(char quote);
  void escape(std::string& out);
  bool sign();
  void number();

  const Source& source_;
  const std::string& src_;
  size_t i_ = 0;
  int curly_depth_ = 0;
  std::vector<Token> tokens_;
};

bool Lexer::text_next() const {
  if (tokens_.empty()) return true;
  const TokenType t = tokens_.back().type;
  return t == TokenType::kCloseStatement || t == TokenType::kCloseExpression ||
         t == TokenType::kComment;
}

void Lexer::comment() {
  const size_t at = i_;
  i_ += 2;
  const bool strip_before = i_ < src_.size() && src_[i_] == '-';
  if (strip_before) ++i_;
  std::string text;
  while (!(src_[i_] == '#' && i_ + 1 < src_.size() && src_[i_ + 1] == '}')) {
    if (i_ + 2 >= src_.size()) fail(at, "a comment '{#' has no closing '#}'");
    text += src_[i_++];
  }
  const bool strip_after = !text.empty() && text.back() == '-';
  if (strip_before) strip_trailing_space();
  push(TokenType::kComment, text, at);
  i_ += 2;
  if (strip_after) i_ = skip_space(src_, i_);
}

void Lexer::escape(std::string& out) {
  const size_t at = i_;
  ++i_;
  if (i_ >= src_.size()) fail(at, "a string ends inside an escape");
  const char e = src_[i_++];
  if (e == 'x' || e == 'u') {
    const size_t n = e == 'x' ? 2 : 4;
    const std::string hex = src_.substr(i_, n);
    if (hex.size() != n || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
      fail(at, "a bad \\" + std::string(1, e) + " escape (expected " + std::to_string(n) +
                   " hexadecimal digits)");
    i_ += n;
    uint32_t cp = static_cast<uint32_t>(std::stoul(hex, nullptr, 16));
    if (cp >= 0xD800 && cp <= 0xDBFF && src_.compare(i_, 2, "\\u") == 0) {  // a surrogate pair
      const std::string low = src_.substr(i_ + 2, 4);
      if (low.size() == 4 && low.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos) {
        const uint32_t lo = static_cast<uint32_t>(std::stoul(low, nullptr, 16));
        if (lo >= 0xDC00 && lo <= 0xDFFF) {
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          i_ += 6;
        }
      }
    }
    append_utf8(out, cp);
    return;
  }
  static const std::pair<char, char> kEscapes[] = {{'n', '\n'},  {'t', '\t'}, {'r', '\r'},
                                                   {'b', '\b'},  {'f', '\f'}, {'v', '\v'},
                                                   {'\'', '\''}, {'"', '"'},  {'\\', '\\'}};
  for (const auto& [from, to] : kEscapes) {
    if (e == from) {
      out += to;
      return;
    }
  }
  fail(at, std::string("an unknown escape '\\") + e + "' in a string");
}

std::string Lexer::quoted(char quote) {
  const size_t at = i_;
  ++i_;
  std::string out;
  while (i_ < src_.size() && src_[i_] != quote) {
    if (src_[i_] == '\\') {
      escape(out);
      continue;
    }
    out += src_[i_++];
  }
  if (i_ >= src_.size()) fail(at, "a string is not closed before the template ends");
  ++i_;
  return out;
}

// A '-' or '+': part of a binary operator after an operand, else a sign (of a number literal
// when digits follow). Returns whether it consumed something.
bool Lexer::sign() {
  const char c = src_[i_];
  if (tokens_.empty() || last() == TokenType::kText)
    fail(i_, std::string("unexpected '") + c + "'");
  switch (last()) {
    case TokenType::kIdentifier:
    case TokenType::kNumber:
    case TokenType::kString:
    case TokenType::kCloseParen:
    case TokenType::kCloseSquare:
      return false;
    default:
      break;
  }
  const size_t at = i_++;
  std::string num;
  while (i_ < src_.size() && is_digit(src_[i_])) num += src_[i_++];
  if (!num.empty() && i_ + 1 < src_.size() && src_[i_] == '.' && is_digit(src_[i_ + 1])) {
    num += src_[i_++];
    while (i_ < src_.size() && is_digit(src_[i_])) num += src_[i_++];
  }
  push(num.empty() ? TokenType::kUnary : TokenType::kNumber, std::string(1, c) + num, at);
  return true;
}

void Lexer::number() {
  const size_t at = i_;
  std::string num;
  while (i_ < src_.size() && is_digit(src_[i_])) num += src_[i_++];
  if (last() != TokenType::kDot && i_ + 1 < src_.size() && src_[i_] == '.' &&
      is_digit(src_[i_ + 1])) {
    num += src_[i_++];
    while (i_ < src_.size() && is_digit(src_[i_])) num += src_[i_++];
  }
  push(TokenType::kNumber, num, at);
}

std::vector<Token> Lexer::run() {
  while (i_ < src_.size()) {
    if (text_next()) {
      const size_t at = i_;
      while (i_ < src_.size() &&
             !(src_[i_] == '{' && i_ + 1 < src_.size() &&
               (src_[i_ + 1] == '%' || src_[i_ + 1] == '{' || src_[i_ + 1] == '#')))
        ++i_;
      if (i_ > at) {
        push(TokenType::kText, src_.substr(at, i_ - at), at);
        continue;
      }
    }
    if (starts("{#")) {
      comment();
      continue;
    }
    if (starts("{%-") || starts("{{-")) {
      strip_trailing_space();
      const bool statement = src_[i_ + 1] == '%';
      push(statement ? TokenType::kOpenStatement : TokenType::kOpenExpression,
           statement ? "{%" : "{{", i_);
      if (!statement) curly_depth_ = 0;
      i_ += 3;
      continue;
    }
    i_ = skip_space(src_, i_);
    if (i_ >= src_.size()) break;
    if (starts("-%}") || starts("-}}")) {
      const bool statement = src_[i_ + 1] == '%';
      push(statement ? TokenType::kCloseStatement : TokenType::kCloseExpression,
           statement ? "%}" : "}}", i_);
      i_ = skip_space(src_, i_ + 3);
      continue;
    }
    const char c = src_[i_];
    if ((c == '-' || c == '+') && sign()) continue;
    bool matched = false;
    for (const Fixed& f : kFixed) {
      if (f.type == TokenType::kCloseExpression && curly_depth_ > 0) continue;
      if (!starts(f.text)) continue;
      push(f.type, f.text, i_);
      if (f.type == TokenType::kOpenExpression) curly_depth_ = 0;
      if (f.type == TokenType::kOpenCurly) ++curly_depth_;
      if (f.type == TokenType::kCloseCurly) --curly_depth_;
      i_ += std::char_traits<char>::length(f.text);
      matched = true;
      break;
    }
    if (matched) continue;
    if (c == '\'' || c == '"') {
      const size_t at = i_;
      push(TokenType::kString, quoted(c), at);
    } else if (is_digit(c)) {
      number();
    } else if (is_word(c)) {
      const size_t at = i_;
      while (i_ < src_.size() && is_word(src_[i_])) ++i_;
      push(TokenType::kIdentifier, src_.substr(at, i_ - at), at);
    } else {
      fail(i_, "unexpected character '" + std::string(1, c) + "' inside a tag");
    }
  }
  return std::move(tokens_);
}

}  // namespace

std::vector<Token> tokenize(const Source& source) { return Lexer(source).run(); }

}  // namespace llmcpu::jinja
