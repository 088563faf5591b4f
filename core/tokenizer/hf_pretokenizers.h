// tokenizer.json's "pre_tokenizer": how a normalized part of the text is cut into pre-tokens (the
// words BPE runs on), as tokenizers.js does it. Implemented: ByteLevel (with and without GPT-2's
// pattern, add_prefix_space), Split (Regex or String, behaviors Isolated and Removed, invert),
// Digits, Metaspace, Whitespace, WhitespaceSplit and Sequence. Split's other behaviors
// (MergedWithPrevious, MergedWithNext, Contiguous) are applied as tokenizers.js applies them, as
// Isolated, with a note saying that Hugging Face's tokenizers would merge the pieces.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/tokenizer/hf_json.h"

namespace llmcpu::hf {

// A list of pieces: views into the text being pre-tokenized, or into `arena` for pieces made
// anew (a prefix space, Metaspace's replacement, GPT-2's byte alphabet). The arena belongs to the
// caller and keeps every string in place until it is cleared, so pieces are never copied.
struct Pieces {
  std::vector<std::string_view> list;
  std::deque<std::string>* arena;

  explicit Pieces(std::deque<std::string>* a) : arena(a) {}
  size_t size() const { return list.size(); }
  std::string_view operator[](size_t i) const { return list[i]; }
  void clear() { list.clear(); }
  // `piece` must stay valid as long as the arena does (a view into the input or the arena).
  void add(std::string_view piece) { list.push_back(piece); }
  void add_owned(std::string piece) {
    arena->push_back(std::move(piece));
    list.emplace_back(arena->back());
  }
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Appends the pre-tokens of `piece` (valid UTF-8) to `out`. `section` is the index of the part of
  // the text between added tokens that `piece` comes from (Metaspace's prepend_scheme "first").
  virtual void split(std::string_view piece, int section, Pieces& out) const = 0;
  // Asks the last stage, when it is a ByteLevel, to leave its pieces as the raw bytes (each byte
  // standing for its character of GPT-2's alphabet) so that the model maps them itself; true when
  // it does. Called once, before any split().
  virtual bool defer_byte_level() { return false; }
  // Applies split() to every piece of `in`.
  void split_all(const Pieces& in, int section, Pieces& out) const {
    for (size_t i = 0; i < in.size(); ++i) split(in[i], section, out);
  }
};

// nullptr for a null pre-tokenizer; throws FileError naming the file and node otherwise. Where
// tokenizers.js (followed here) and Hugging Face's tokenizers differ, a note is added to `notes`.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Node& node, std::vector<std::string>& notes);

}  // namespace llmcpu::hf
