// Parses a chat template's tokens into a syntax tree with @huggingface/jinja's grammar and
// operator precedence (ternary < or < and < not < comparison and `in` < + - ~ < * / // % < ** <
// `is` tests < | filters < unary sign < calls, members, literals). Statements: if/elif/else, for
// (with else and an inline `if`), set (also block set and namespace attributes), macro, filter
// blocks, break, continue. Refuses {% call %}, argument unpacking (* and **) and every other
// statement with TemplateUnsupported; malformed text with TemplateSyntaxError.
#pragma once

#include <vector>

#include "core/chat/jinja_ast.h"
#include "core/chat/jinja_lexer.h"

namespace llmcpu::jinja {

Program parse(const Source& source, const std::vector<Token>& tokens);

}  // namespace llmcpu::jinja
