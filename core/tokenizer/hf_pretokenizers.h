// tokenizer.json's "pre_tokenizer": how a normalized part of the text is cut into pre-tokens (the
// words BPE runs on), as tokenizers.js does it. Implemented: ByteLevel (with and without GPT-2's
// pattern, add_prefix_space), Split (Regex or String, behaviors Isolated and Removed, invert),
// Digits, Metaspace, Whitespace, WhitespaceSplit and Sequence. Split's other behaviors
// (MergedWithPrevious, MergedWithNext, Contiguous) are refused: tokenizers.js treats them as
// Isolated where Hugging Face's tokenizers does not, so no answer would be exact to both.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/tokenizer/hf_json.h"

namespace llmcpu::hf {

// A list of strings in one buffer: piece i is text[spans[i].first, spans[i].second).
struct Pieces {
  std::string text;
  std::vector<std::pair<uint32_t, uint32_t>> spans;

  size_t size() const { return spans.size(); }
  std::string_view operator[](size_t i) const {
    return std::string_view(text).substr(spans[i].first, spans[i].second - spans[i].first);
  }
  void clear() {
    text.clear();
    spans.clear();
  }
  void add(std::string_view piece) {
    const auto begin = static_cast<uint32_t>(text.size());
    text.append(piece);
    spans.emplace_back(begin, static_cast<uint32_t>(text.size()));
  }
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Appends the pre-tokens of `piece` (valid UTF-8) to `out`. `section` is the index of the part of
  // the text between added tokens that `piece` comes from (Metaspace's prepend_scheme "first").
  virtual void split(std::string_view piece, int section, Pieces& out) const = 0;
  // Applies split() to every piece of `in`.
  void split_all(const Pieces& in, int section, Pieces& out) const {
    for (size_t i = 0; i < in.size(); ++i) split(in[i], section, out);
  }
};

// nullptr for a null pre-tokenizer; throws FileError naming the file and node otherwise.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Node& node);

// GPT-2's byte alphabet (tokenizers.js's BYTES_TO_UNICODE): byte b as a code point.
char32_t byte_level_char(unsigned char b);

}  // namespace llmcpu::hf
