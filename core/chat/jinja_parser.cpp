// The recursive-descent parser of chat templates (see jinja_parser.h): one function per level of
// precedence, in @huggingface/jinja's order, so that a template groups the same way in both.
#include "core/chat/jinja_parser.h"

#include <cstdlib>
#include <set>
#include <utility>

namespace llmcpu::jinja {
namespace {

using T = TokenType;

class Parser {
 public:
  Parser(const Source& source, const std::vector<Token>& tokens)
      : source_(source), tokens_(tokens) {}

  Program run() {
    Program p;
    while (i_ < tokens_.size()) p.body.push_back(any());
    return p;
  }

 private:
  size_t here() const { return i_ < tokens_.size() ? tokens_[i_].at : source_.text().size(); }
  [[noreturn]] void fail(const std::string& what) const {
    throw TemplateSyntaxError(source_.origin(), source_.position(here()), what);
  }
  [[noreturn]] void unsupported(size_t at, const std::string& what) const {
    throw TemplateUnsupported(source_.origin(), source_.position(at), what);
  }
  std::string found() const {
    return i_ < tokens_.size()
               ? std::string(token_type_name(tokens_[i_].type)) + " '" + tokens_[i_].value + "'"
               : std::string("the end of the template");
  }
  bool is(T t, size_t ahead = 0) const {
    return i_ + ahead < tokens_.size() && tokens_[i_ + ahead].type == t;
  }
  bool is_word(const char* w, size_t ahead = 0) const {
    return is(T::kIdentifier, ahead) && tokens_[i_ + ahead].value == w;
  }
  bool is_statement(std::initializer_list<const char*> names) const {
    if (!is(T::kOpenStatement) || !is(T::kIdentifier, 1)) return false;
    for (const char* n : names) {
      if (tokens_[i_ + 1].value == n) return true;
    }
    return false;
  }
  const Token& expect(T t, const char* what) {
    if (!is(t)) fail(std::string("expected ") + what + ", found " + found());
    return tokens_[i_++];
  }
  void expect_word(const char* w) {
    if (!is_word(w)) fail(std::string("expected '") + w + "', found " + found());
    ++i_;
  }
  // Statements up to one of `ends` ({% name ...); fails at the end of the template.
  std::vector<NodePtr> block(std::initializer_list<const char*> ends, size_t opened,
                             const char* what) {
    std::vector<NodePtr> out;
    while (!is_statement(ends)) {
      if (i_ >= tokens_.size()) {
        throw TemplateSyntaxError(source_.origin(), source_.position(opened),
                                  std::string("this ") + what + " is never closed");
      }
      out.push_back(any());
    }
    return out;
  }
  void end_tag(const char* name) {
    expect(T::kOpenStatement, "'{%'");
    expect_word(name);
    expect(T::kCloseStatement, "'%}'");
  }
  NodePtr node(NodeKind k, size_t at) { return std::make_unique<Node>(k, at); }

  NodePtr any();
  NodePtr statement();
  NodePtr set_statement(size_t at);
  NodePtr if_statement(size_t at);
  NodePtr for_statement(size_t at);
  NodePtr macro_statement(size_t at);
  NodePtr filter_block(size_t at);
  NodePtr sequence(bool primary_only);
  NodePtr expression();
  NodePtr logical_or();
  NodePtr logical_and();
  NodePtr logical_not();
  NodePtr comparison();
  NodePtr additive();
  NodePtr multiplicative();
  NodePtr power();
  NodePtr test();
  NodePtr filter();
  NodePtr unary_sign();
  NodePtr call_member();
  NodePtr call(NodePtr callee);
  std::vector<NodePtr> arguments(bool parameters);
  NodePtr subscript();
  NodePtr member(NodePtr object);
  NodePtr primary();

  const Source& source_;
  const std::vector<Token>& tokens_;
  size_t i_ = 0;
};

NodePtr Parser::any() {
  const Token& t = tokens_[i_];
  switch (t.type) {
    case T::kComment:
      ++i_;
      return node(NodeKind::kComment, t.at);
    case T::kText: {
      NodePtr n = node(NodeKind::kText, t.at);
      n->text = t.value;
      ++i_;
      return n;
    }
    case T::kOpenStatement:
      return statement();
    case T::kOpenExpression: {
      ++i_;
      NodePtr e = expression();
      expect(T::kCloseExpression, "'}}'");
      return e;
    }
    default:
      fail("unexpected " + found());
  }
}

NodePtr Parser::statement() {
  const size_t at = tokens_[i_].at;
  expect(T::kOpenStatement, "'{%'");
  if (!is(T::kIdentifier)) fail("expected a statement's name after '{%', found " + found());
  const std::string name = tokens_[i_].value;
  const size_t name_at = tokens_[i_].at;
  ++i_;
  if (name == "set") return set_statement(at);
  if (name == "if") {
    NodePtr n = if_statement(at);
    end_tag("endif");
    return n;
  }
  if (name == "for") {
    NodePtr n = for_statement(at);
    end_tag("endfor");
    return n;
  }
  if (name == "macro") {
    NodePtr n = macro_statement(at);
    end_tag("endmacro");
    return n;
  }
  if (name == "filter") return filter_block(at);
  if (name == "break" || name == "continue") {
    expect(T::kCloseStatement, "'%}'");
    return node(name == "break" ? NodeKind::kBreak : NodeKind::kContinue, at);
  }
  static const std::set<std::string> kKnown = {"call",  "include", "import", "from", "extends",
                                               "block", "with",    "raw",    "do",   "autoescape"};
  if (kKnown.count(name)) unsupported(name_at, "the {% " + name + " %} statement");
  throw TemplateSyntaxError(source_.origin(), source_.position(name_at),
                            "unknown statement '" + name + "'");
}

NodePtr Parser::set_statement(size_t at) {
  NodePtr n = node(NodeKind::kSet, at);
  n->x = sequence(false);
  if (is(T::kEquals)) {
    ++i_;
    n->y = sequence(false);
  } else {
    expect(T::kCloseStatement, "'=' or '%}'");
    n->body = block({"endset"}, at, "{% set %} block");
    expect(T::kOpenStatement, "'{%'");
    expect_word("endset");
  }
  expect(T::kCloseStatement, "'%}'");
  return n;
}

NodePtr Parser::if_statement(size_t at) {
  NodePtr n = node(NodeKind::kIf, at);
  n->x = expression();
  expect(T::kCloseStatement, "'%}'");
  n->body = block({"elif", "else", "endif"}, at, "{% if %}");
  if (is_statement({"elif"})) {
    const size_t elif_at = tokens_[i_].at;
    i_ += 2;
    n->alt.push_back(if_statement(elif_at));
  } else if (is_statement({"else"})) {
    i_ += 2;
    expect(T::kCloseStatement, "'%}'");
    n->alt = block({"endif"}, at, "{% if %}");
  }
  return n;
}

NodePtr Parser::for_statement(size_t at) {
  NodePtr n = node(NodeKind::kFor, at);
  n->x = sequence(true);
  if (n->x->kind != NodeKind::kIdentifier && n->x->kind != NodeKind::kTuple)
    fail("expected a name or names for the loop variable");
  if (!is_word("in")) fail("expected 'in' after the loop variable, found " + found());
  ++i_;
  n->y = expression();
  if (is_word("recursive")) unsupported(here(), "a recursive loop ('{% for ... recursive %}')");
  expect(T::kCloseStatement, "'%}'");
  n->body = block({"endfor", "else"}, at, "{% for %}");
  if (is_statement({"else"})) {
    i_ += 2;
    expect(T::kCloseStatement, "'%}'");
    n->alt = block({"endfor"}, at, "{% for %}");
  }
  return n;
}

NodePtr Parser::macro_statement(size_t at) {
  NodePtr n = node(NodeKind::kMacro, at);
  NodePtr name = primary();
  if (name->kind != NodeKind::kIdentifier) fail("expected the macro's name");
  n->text = name->text;
  n->args = arguments(true);
  expect(T::kCloseStatement, "'%}'");
  n->body = block({"endmacro"}, at, "{% macro %}");
  return n;
}

NodePtr Parser::filter_block(size_t at) {
  NodePtr n = node(NodeKind::kFilterBlock, at);
  NodePtr f = primary();
  if (f->kind == NodeKind::kIdentifier && is(T::kOpenParen)) f = call(std::move(f));
  n->x = std::move(f);
  expect(T::kCloseStatement, "'%}'");
  n->body = block({"endfilter"}, at, "{% filter %}");
  end_tag("endfilter");
  return n;
}

NodePtr Parser::sequence(bool primary_only) {
  const size_t at = here();
  NodePtr first = primary_only ? primary() : expression();
  if (!is(T::kComma)) return first;
  NodePtr tuple = node(NodeKind::kTuple, at);
  tuple->args.push_back(std::move(first));
  while (is(T::kComma)) {
    ++i_;
    tuple->args.push_back(primary_only ? primary() : expression());
  }
  return tuple;
}

NodePtr Parser::expression() {
  const size_t at = here();
  NodePtr a = logical_or();
  if (!is_word("if")) return a;
  ++i_;
  NodePtr condition = logical_or();
  if (is_word("else")) {
    ++i_;
    NodePtr n = node(NodeKind::kTernary, at);
    n->x = std::move(condition);
    n->y = std::move(a);
    n->z = expression();
    return n;
  }
  NodePtr n = node(NodeKind::kSelect, at);
  n->x = std::move(a);
  n->y = std::move(condition);
  return n;
}

NodePtr Parser::logical_or() {
  NodePtr left = logical_and();
  while (is_word("or")) {
    NodePtr n = node(NodeKind::kBinary, tokens_[i_++].at);
    n->text = "or";
    n->x = std::move(left);
    n->y = logical_and();
    left = std::move(n);
  }
  return left;
}

NodePtr Parser::logical_and() {
  NodePtr left = logical_not();
  while (is_word("and")) {
    NodePtr n = node(NodeKind::kBinary, tokens_[i_++].at);
    n->text = "and";
    n->x = std::move(left);
    n->y = logical_not();
    left = std::move(n);
  }
  return left;
}

NodePtr Parser::logical_not() {
  if (!is_word("not")) return comparison();
  NodePtr n = node(NodeKind::kUnary, tokens_[i_++].at);
  n->text = "not";
  n->x = logical_not();
  return n;
}

NodePtr Parser::comparison() {
  NodePtr left = additive();
  while (true) {
    std::string op;
    const size_t at = here();
    if (is_word("not") && is_word("in", 1)) {
      op = "not in";
      i_ += 2;
    } else if (is_word("in") || is(T::kComparison)) {
      op = tokens_[i_++].value;
    } else {
      break;
    }
    NodePtr n = node(NodeKind::kBinary, at);
    n->text = op;
    n->x = std::move(left);
    n->y = additive();
    left = std::move(n);
  }
  return left;
}

NodePtr Parser::additive() {
  NodePtr left = multiplicative();
  while (is(T::kAdditive)) {
    NodePtr n = node(NodeKind::kBinary, tokens_[i_].at);
    n->text = tokens_[i_++].value;
    n->x = std::move(left);
    n->y = multiplicative();
    left = std::move(n);
  }
  return left;
}

NodePtr Parser::multiplicative() {
  NodePtr left = power();
  while (is(T::kMultiplicative)) {
    NodePtr n = node(NodeKind::kBinary, tokens_[i_].at);
    n->text = tokens_[i_++].value;
    n->x = std::move(left);
    n->y = power();
    left = std::move(n);
  }
  return left;
}

NodePtr Parser::power() {
  NodePtr left = test();
  while (is(T::kPower)) {
    NodePtr n = node(NodeKind::kBinary, tokens_[i_++].at);
    n->text = "**";
    n->x = std::move(left);
    n->y = test();
    left = std::move(n);
  }
  return left;
}

NodePtr Parser::test() {
  NodePtr operand = filter();
  while (is_word("is")) {
    NodePtr n = node(NodeKind::kTest, tokens_[i_++].at);
    if (is_word("not")) {
      n->negate = true;
      ++i_;
    }
    if (!is(T::kIdentifier)) fail("expected a test's name after 'is', found " + found());
    n->text = tokens_[i_++].value;
    if (is(T::kOpenParen) || is(T::kNumber) || is(T::kString))
      unsupported(here(), "a test with an argument ('is " + n->text + " ...')");
    n->x = std::move(operand);
    operand = std::move(n);
  }
  return operand;
}

NodePtr Parser::filter() {
  NodePtr operand = unary_sign();
  while (is(T::kPipe)) {
    NodePtr n = node(NodeKind::kFilter, tokens_[i_++].at);
    NodePtr f = primary();
    if (f->kind != NodeKind::kIdentifier) fail("expected a filter's name after '|'");
    if (is(T::kOpenParen)) f = call(std::move(f));
    n->x = std::move(operand);
    n->y = std::move(f);
    operand = std::move(n);
  }
  return operand;
}

NodePtr Parser::unary_sign() {
  if ((is(T::kUnary) || is(T::kAdditive)) &&
      (tokens_[i_].value == "-" || tokens_[i_].value == "+")) {
    NodePtr n = node(NodeKind::kUnary, tokens_[i_].at);
    n->text = tokens_[i_++].value;
    n->x = unary_sign();
    return n;
  }
  return call_member();
}

NodePtr Parser::call_member() {
  NodePtr m = member(primary());
  return is(T::kOpenParen) ? call(std::move(m)) : std::move(m);
}

NodePtr Parser::call(NodePtr callee) {
  NodePtr n = node(NodeKind::kCall, here());
  n->x = std::move(callee);
  n->args = arguments(false);
  NodePtr m = member(std::move(n));
  return is(T::kOpenParen) ? call(std::move(m)) : std::move(m);
}

// (a, b=c, ...): call arguments, or a macro's parameters (names, with defaults).
std::vector<NodePtr> Parser::arguments(bool parameters) {
  expect(T::kOpenParen, "'('");
  std::vector<NodePtr> args;
  std::set<std::string> names;
  bool keyword_seen = false;
  while (!is(T::kCloseParen)) {
    if (i_ >= tokens_.size()) fail("an argument list is not closed");
    if (is(T::kPower) || (is(T::kMultiplicative) && tokens_[i_].value == "*"))
      unsupported(here(), "argument unpacking ('" + tokens_[i_].value + "')");
    NodePtr a = expression();
    if (is(T::kEquals)) {
      ++i_;
      if (a->kind != NodeKind::kIdentifier) fail("expected a name before '='");
      NodePtr k = node(NodeKind::kKeyword, a->at);
      k->text = a->text;
      k->x = expression();
      a = std::move(k);
    }
    if (parameters) {
      if (a->kind != NodeKind::kIdentifier && a->kind != NodeKind::kKeyword)
        fail("expected a parameter's name");
      if (!names.insert(a->text).second) fail("the parameter '" + a->text + "' appears twice");
    }
    if (a->kind == NodeKind::kKeyword) {
      keyword_seen = true;
    } else if (keyword_seen) {
      fail(parameters ? "a parameter without a default follows one with a default"
                      : "a positional argument follows a keyword argument");
    }
    args.push_back(std::move(a));
    if (is(T::kComma)) ++i_;
  }
  ++i_;
  return args;
}

// The inside of [...]: an expression, or a slice start:stop:step with any part left out.
NodePtr Parser::subscript() {
  const size_t at = here();
  std::vector<NodePtr> parts;
  bool slice = false;
  while (!is(T::kCloseSquare)) {
    if (i_ >= tokens_.size()) fail("a '[' is not closed");
    if (is(T::kColon)) {
      parts.push_back(nullptr);
      ++i_;
      slice = true;
    } else {
      parts.push_back(expression());
      if (is(T::kColon)) {
        ++i_;
        slice = true;
      }
    }
  }
  if (parts.empty()) fail("expected an index or a slice inside '[]'");
  if (!slice) return std::move(parts[0]);
  if (parts.size() > 3) fail("a slice has at most three parts");
  NodePtr n = node(NodeKind::kSlice, at);
  parts.resize(3);
  n->x = std::move(parts[0]);
  n->y = std::move(parts[1]);
  n->z = std::move(parts[2]);
  return n;
}

NodePtr Parser::member(NodePtr object) {
  while (is(T::kDot) || is(T::kOpenSquare)) {
    NodePtr n = node(NodeKind::kMember, tokens_[i_].at);
    n->computed = tokens_[i_++].type == T::kOpenSquare;
    if (n->computed) {
      n->y = subscript();
      expect(T::kCloseSquare, "']'");
    } else {
      n->y = primary();
      if (n->y->kind != NodeKind::kIdentifier && n->y->kind != NodeKind::kInteger)
        fail("expected a name or an integer after '.'");
    }
    n->x = std::move(object);
    object = std::move(n);
  }
  return object;
}

NodePtr Parser::primary() {
  if (i_ >= tokens_.size()) fail("the template ends inside an expression");
  const Token& t = tokens_[i_++];
  switch (t.type) {
    case T::kNumber: {
      const bool is_float = t.value.find('.') != std::string::npos;
      NodePtr n = node(is_float ? NodeKind::kFloat : NodeKind::kInteger, t.at);
      n->number = std::strtod(t.value.c_str(), nullptr);
      return n;
    }
    case T::kString: {
      NodePtr n = node(NodeKind::kString, t.at);
      n->text = t.value;
      while (is(T::kString)) n->text += tokens_[i_++].value;  // adjacent strings join
      return n;
    }
    case T::kIdentifier: {
      NodePtr n = node(NodeKind::kIdentifier, t.at);
      n->text = t.value;
      return n;
    }
    case T::kOpenParen: {
      NodePtr e = sequence(false);
      expect(T::kCloseParen, "')'");
      return e;
    }
    case T::kOpenSquare:
    case T::kOpenCurly: {
      const bool array = t.type == T::kOpenSquare;
      NodePtr n = node(array ? NodeKind::kArray : NodeKind::kObject, t.at);
      const T close = array ? T::kCloseSquare : T::kCloseCurly;
      while (!is(close)) {
        if (i_ >= tokens_.size()) fail(array ? "a '[' is not closed" : "a '{' is not closed");
        n->args.push_back(expression());
        if (!array) {
          expect(T::kColon, "':' between a key and its value");
          n->args.push_back(expression());
        }
        if (is(T::kComma)) ++i_;
      }
      ++i_;
      return n;
    }
    default:
      --i_;
      fail("unexpected " + found() + " in an expression");
  }
}

}  // namespace

Program parse(const Source& source, const std::vector<Token>& tokens) {
  return Parser(source, tokens).run();
}

}  // namespace llmcpu::jinja
