// tokenizer.json's "normalizer": what is done to the text (each part between added tokens) before
// it is cut into pre-tokens, as tokenizers.js does it. Implemented: NFC, NFD, NFKC, NFKD,
// Lowercase, Prepend, Replace, Strip, StripAccents and Sequence. Any other type (BertNormalizer,
// Precompiled,
// ...) is refused by name.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/tokenizer/hf_json.h"
#include "core/tokenizer/hf_pattern.h"

namespace llmcpu::hf {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // `text` is valid UTF-8; so is the result.
  virtual std::string apply(std::string_view text) const = 0;
};

// nullptr for a null normalizer. Throws FileError naming the file and the node for a type it does
// not implement or a malformed field.
std::unique_ptr<Normalizer> make_normalizer(const Node& node);

// A character that the normalizer `node` leaves nowhere in its result, or "" where it cannot say:
// a Replace of one character's {"String": ...} by a content without it, alone or as the last part of
// a Sequence (Gemma's " " to U+2581).
std::string character_removed_by(const Node& node);

// The "pattern" member of `node` ({"Regex": ...} or {"String": ...}), compiled as tokenizers.js's
// create_pattern does: a String is captured as a group when `capture_string` (Split with invert
// false). Shared by the Replace normalizer, the Split pre-tokenizer and the Replace decoder.
Pattern make_pattern(const Node& node, bool capture_string);

}  // namespace llmcpu::hf
