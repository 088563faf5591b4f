// Conversations rendered through a chat template, with the characters that are trained
// (docs/formats.md). An assistant turn's characters: for assistant message i,
//   a = render(messages[:i], add_generation_prompt=true), b = render(messages[:i+1]),
// and full = render(messages); b must be a prefix of full and a of b, and the turn is the
// characters [len(a), len(b)) of full: its content and the template's end of turn. A template that
// renders earlier turns differently once later ones follow fails that test: the record is refused
// naming the turn. A conversational prompt-completion (trl's) trains on [len(render(prompt,
// add_generation_prompt=true)), len(full)). Not here: tokens (example_tokens.h).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/chat/chat_template.h"
#include "core/data/records.h"

namespace llmcpu {

// The characters [begin, end) of a rendered text.
struct CharSpan {
  size_t begin, end;
};

struct RenderedText {
  std::string text;
  std::vector<CharSpan> spans;  // sorted, non-empty, disjoint
};

class ChatRenderer {
 public:
  // Parses the template once (its errors: TemplateError naming the template).
  explicit ChatRenderer(const ChatTemplate& t);

  // The whole conversation and, with assistant_spans, the characters of each assistant turn.
  // RecordError naming `where` and the turn for a template error or a failed prefix test.
  RenderedText conversation(const Json& messages, bool assistant_spans,
                            const std::string& where) const;
  // The first `prompt_messages` messages are the prompt: the span is everything after the
  // prompt's render with add_generation_prompt.
  RenderedText prompt_completion(const Json& messages, size_t prompt_messages,
                                 const std::string& where) const;

 private:
  std::string render(const Json& messages, size_t n, bool generation_prompt,
                     const std::string& where) const;

  const ChatTemplate& template_;
  JinjaTemplate jinja_;
};

}  // namespace llmcpu
