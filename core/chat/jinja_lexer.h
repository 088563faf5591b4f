// The first stage of the chat-template interpreter: the template's text as @huggingface/jinja
// prepares it (one trailing newline dropped; lstrip_blocks and trim_blocks, which transformers and
// transformers.js both turn on; {% generation %} tags removed), then cut into tokens. Every token
// keeps its place in the original text, for error messages. Does not parse.
#pragma once

#include <string>
#include <vector>

#include "core/chat/jinja_error.h"

namespace llmcpu::jinja {

enum class TokenType {
  kText,
  kNumber,
  kString,
  kIdentifier,
  kEquals,
  kOpenParen,
  kCloseParen,
  kOpenStatement,
  kCloseStatement,
  kOpenExpression,
  kCloseExpression,
  kOpenSquare,
  kCloseSquare,
  kOpenCurly,
  kCloseCurly,
  kComma,
  kDot,
  kColon,
  kPipe,
  kAdditive,
  kMultiplicative,
  kPower,
  kComparison,
  kUnary,
  kComment
};

const char* token_type_name(TokenType t);

struct Token {
  TokenType type;
  std::string value;
  size_t at = 0;  // offset in the prepared text (Source::position turns it into line:column)
};

// A template's text, prepared, and where each prepared byte came from.
class Source {
 public:
  Source(std::string origin, const std::string& text);
  const std::string& origin() const { return origin_; }
  const std::string& text() const { return prepared_; }
  TemplatePosition position(size_t prepared_offset) const;

 private:
  std::string origin_, original_;
  std::string prepared_;
  std::vector<size_t> from_;  // prepared byte i came from original byte from_[i]
};

std::vector<Token> tokenize(const Source& source);

}  // namespace llmcpu::jinja
