#include "core/data/example_tokens.h"

#include <algorithm>
#include <string_view>

namespace llmcpu {

namespace {

// The span boundaries strictly inside the text, sorted and distinct.
std::vector<size_t> inner_cuts(const RenderedText& r) {
  std::vector<size_t> cuts;
  for (const CharSpan& s : r.spans) {
    for (size_t c : {s.begin, s.end})
      if (c > 0 && c < r.text.size()) cuts.push_back(c);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  return cuts;
}

// Token index of each cut by encoding the pieces between cuts; empty when the pieces' ids differ
// from `whole`.
std::vector<size_t> piece_boundaries(const Tokenizer& tok, std::string_view text,
                                     const std::vector<size_t>& cuts,
                                     const std::vector<int>& whole) {
  std::vector<int> ids;
  std::vector<size_t> at;
  size_t from = 0;
  for (size_t c : cuts) {
    tok.encode_append(text.substr(from, c - from), ids);
    at.push_back(ids.size());
    from = c;
  }
  tok.encode_append(text.substr(from), ids);
  if (ids != whole) return {};
  return at;
}

// The m leading ids that encoding text[:c] alone shares with `whole`, for each cut c.
std::vector<size_t> common_prefix_boundaries(const Tokenizer& tok, std::string_view text,
                                             const std::vector<size_t>& cuts,
                                             const std::vector<int>& whole) {
  std::vector<size_t> at;
  for (size_t c : cuts) {
    const std::vector<int> prefix = tok.encode(text.substr(0, c));
    const auto diff = std::mismatch(prefix.begin(), prefix.end(), whole.begin(), whole.end());
    at.push_back(static_cast<size_t>(diff.first - prefix.begin()));
  }
  return at;
}

// Appends [begin, end) clipped to start at token 1; nothing when that leaves it empty.
void add_span(std::vector<TokenSpan>& spans, size_t begin, size_t end) {
  begin = std::max<size_t>(begin, 1);
  if (end > begin) spans.push_back({begin, end});
}

}  // namespace

std::vector<TokenSpan> all_but_first(size_t num_tokens) {
  std::vector<TokenSpan> spans;
  add_span(spans, 1, num_tokens);
  return spans;
}

TokenizedExample tokenize_rendered(const Tokenizer& tokenizer, const RenderedText& r) {
  TokenizedExample e;
  e.ids = tokenizer.encode(r.text);
  if (r.spans.empty()) return e;
  const std::vector<size_t> cuts = inner_cuts(r);
  std::vector<size_t> at = piece_boundaries(tokenizer, r.text, cuts, e.ids);
  if (at.empty() && !cuts.empty()) {
    e.exact = false;
    at = common_prefix_boundaries(tokenizer, r.text, cuts, e.ids);
  }
  const auto token_at = [&](size_t c) {
    if (c == 0) return size_t{0};
    if (c >= r.text.size()) return e.ids.size();
    return at[std::lower_bound(cuts.begin(), cuts.end(), c) - cuts.begin()];
  };
  for (const CharSpan& s : r.spans) {
    const size_t begin = std::max(token_at(s.begin), e.spans.empty() ? 0 : e.spans.back().end);
    add_span(e.spans, begin, token_at(s.end));
  }
  return e;
}

TokenizedExample tokenize_document(const Tokenizer& tokenizer, const std::string& text) {
  TokenizedExample e;
  e.ids.push_back(tokenizer.document_token());
  tokenizer.encode_document(text, e.ids);
  e.spans = all_but_first(e.ids.size());
  return e;
}

TokenizedExample tokenize_prompt_completion(const Tokenizer& tokenizer, const std::string& prompt,
                                            const std::string& completion, bool train_all) {
  TokenizedExample e;
  e.ids.push_back(tokenizer.document_token());
  tokenizer.encode_append(prompt, e.ids);
  const size_t prompt_end = e.ids.size();
  tokenizer.encode_append(completion, e.ids);
  if (train_all) {
    e.spans = all_but_first(e.ids.size());
  } else {
    add_span(e.spans, prompt_end, e.ids.size());
  }
  return e;
}

}  // namespace llmcpu
