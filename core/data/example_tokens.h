// One training example as token ids and its trained spans of tokens (docs/formats.md), from a
// rendered text and its trained characters. The ids are the tokenizer's encode(text) of the whole
// text (special tokens written in it recognised: tokenizers.js's encode(text, {add_special_tokens:
// false})). A character boundary c of a span falls at a token boundary found thus: the text is cut
// at every span boundary and the pieces are encoded one by one; where their ids put together equal
// the whole's, c is the boundary between the pieces' tokens (exact). Where they differ (a
// pre-tokenizer joins characters across a cut), c falls after the m tokens that encoding the text
// before c alone has in common with the whole's: a token that straddles c goes with the part after
// c, so a token straddling a span's start is trained and one straddling its end is not.
// An example's first token is never a target (spans start at token 1 or later).
// Not here: rendering (chat_render.h), shards (shard_writer.h).
#pragma once

#include <string>
#include <vector>

#include "core/data/chat_render.h"
#include "core/io/token_spans.h"
#include "core/tokenizer/tokenizer.h"

namespace llmcpu {

struct TokenizedExample {
  std::vector<int> ids;
  std::vector<TokenSpan> spans;  // of ids: sorted, non-empty, disjoint, begin >= 1
  bool exact = true;             // the pieces' ids equalled the whole's
};

TokenizedExample tokenize_rendered(const Tokenizer& tokenizer, const RenderedText& rendered);

// [document token] + ids of `text` (encode_document: special tokens' text as text), all trained.
TokenizedExample tokenize_document(const Tokenizer& tokenizer, const std::string& text);

// [document token] + encode(prompt) + encode(completion); the completion's tokens trained, or all
// but the first with train_all.
TokenizedExample tokenize_prompt_completion(const Tokenizer& tokenizer, const std::string& prompt,
                                            const std::string& completion, bool train_all);

// The one span of every token but the first (nothing for fewer than two tokens).
std::vector<TokenSpan> all_but_first(size_t num_tokens);

}  // namespace llmcpu
