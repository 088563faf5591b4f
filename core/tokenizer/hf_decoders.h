// tokenizer.json's "decoder" (token strings -> text) and "post_processor" (the special tokens
// put around an encoded text), as tokenizers.js runs them. Decoders: ByteLevel, Metaspace,
// Replace, ByteFallback, Fuse, Strip and Sequence. Post-processors: TemplateProcessing (its
// "single" template), ByteLevel (nothing to add) and Sequence. Other types are refused by name.
#pragma once

#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/tokenizer/hf_json.h"

namespace llmcpu::hf {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // decode_chain: token strings in, strings out (joined by the caller).
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// `added`: the contents of the added tokens, which the ByteLevel decoder passes through as they
// are. nullptr for a null decoder.
std::unique_ptr<Decoder> make_decoder(const Node& node,
                                      std::shared_ptr<const std::unordered_set<std::string>> added);

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // The token strings of the encoded text with the special tokens around it; without
  // add_special_tokens the text's tokens as they are.
  virtual void process(std::vector<std::string>& before, std::vector<std::string>& after,
                       bool add_special_tokens) const = 0;
};

std::unique_ptr<PostProcessor> make_post_processor(const Node& node);

}  // namespace llmcpu::hf
