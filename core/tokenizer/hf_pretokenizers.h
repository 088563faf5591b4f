// tokenizer.json's "pre_tokenizer": how a normalized part of the text is cut into pre-tokens (the
// words BPE runs on), as tokenizers.js does it. Implemented: ByteLevel (with and without GPT-2's
// pattern, add_prefix_space), Split (Regex or String, behaviors Isolated and Removed, invert),
// Digits, Metaspace, Whitespace, WhitespaceSplit and Sequence. Split's other behaviors
// (MergedWithPrevious, MergedWithNext, Contiguous) are applied as tokenizers.js applies them, as
// Isolated, with a note saying that Hugging Face's tokenizers would merge the pieces.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/tokenizer/hf_json.h"

namespace llmcpu::hf {

// Receives pre-tokens one at a time, in order. A piece is valid only during the call (it may point
// into a stage's scratch: a prefix space, Metaspace's replacement, GPT-2's byte alphabet), so a
// receiver that keeps it copies it. Stages are chained through sinks, so that no list of the
// pieces of a text is ever built.
class PieceSink {
 public:
  virtual void piece(std::string_view p) = 0;

 protected:
  ~PieceSink() = default;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Passes the pre-tokens of `piece` (valid UTF-8) to `out`. `section` is the index of the part of
  // the text between added tokens that `piece` comes from (Metaspace's prepend_scheme "first").
  virtual void split(std::string_view piece, int section, PieceSink& out) const = 0;
  // Asks the last stage, when it is a ByteLevel, to leave its pieces as the raw bytes (each byte
  // standing for its character of GPT-2's alphabet) so that the model maps them itself; true when
  // it does. Called once, before any split().
  virtual bool defer_byte_level() { return false; }
  // Whether split() passes every piece on as it is (a deferred ByteLevel without its pattern): a
  // Sequence leaves such a stage out.
  virtual bool passes_through() const { return false; }
};

// nullptr for a null pre-tokenizer; throws FileError naming the file and node otherwise. Where
// tokenizers.js (followed here) and Hugging Face's tokenizers differ, a note is added to `notes`,
// unless the difference cannot show: `absent` is a character the normalized text never holds
// (character_removed_by), so a Split on it alone never matches.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Node& node, std::vector<std::string>& notes,
                                                 const std::string& absent = {});

}  // namespace llmcpu::hf
