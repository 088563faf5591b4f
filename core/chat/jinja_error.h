// The errors of the chat-template interpreter (core/chat/): every one names the template (its
// origin: a tokenizer_config.json, a template file, the built-in default) and the line:column in
// it. A template is refused rather than rendered differently from @huggingface/jinja, the renderer
// that transformers.js uses, when it needs a construct this interpreter does not have.
#pragma once

#include <string>

#include "simd/error.h"

namespace llmcpu {

// A place in a template's source: 1-based line and column (columns count bytes).
struct TemplatePosition {
  int line = 0, column = 0;
  std::string str() const { return std::to_string(line) + ":" + std::to_string(column); }
};

// Any failure to parse or render a template.
class TemplateError : public Error {
 public:
  TemplateError(const std::string& origin, TemplatePosition at, const std::string& problem)
      : Error(origin + ":" + at.str() + ": " + problem), at_(at), problem_(problem) {}
  TemplatePosition position() const { return at_; }
  const std::string& problem() const { return problem_; }

 private:
  TemplatePosition at_;
  std::string problem_;
};

// The template's text is not valid Jinja (an unclosed block, a stray token, a bad string escape).
class TemplateSyntaxError : public TemplateError {
 public:
  using TemplateError::TemplateError;
};

// A construct the interpreter does not implement ({% call %}, {% include %}, a filter or test it
// does not know, ...): named, with its place, instead of a silently different rendering.
class TemplateUnsupported : public TemplateError {
 public:
  TemplateUnsupported(const std::string& origin, TemplatePosition at, const std::string& construct)
      : TemplateError(origin, at, "unsupported construct: " + construct), construct_(construct) {}
  const std::string& construct() const { return construct_; }

 private:
  std::string construct_;
};

// An operation that fails on the values it is given (a filter on the wrong type, adding undefined
// values, calling something that is not a function), as it fails in @huggingface/jinja.
class TemplateRuntimeError : public TemplateError {
 public:
  using TemplateError::TemplateError;
};

// The template called raise_exception(message): message() is the template's own text (Gemma's
// "System role not supported", Mistral's alternation check, ...).
class TemplateRaised : public TemplateError {
 public:
  TemplateRaised(const std::string& origin, TemplatePosition at, const std::string& message)
      : TemplateError(origin, at, "the template raised an exception: " + message),
        message_(message) {}
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

}  // namespace llmcpu
