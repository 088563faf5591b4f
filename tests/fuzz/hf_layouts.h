// Small tokenizer.json files in the layouts of real tokenizers, for the tokenizer.json fuzz
// targets: fuzz_hf_encode's fixed tokenizers and fuzz_tokenizer_json's seeds (make_seeds.cpp). Each
// has a vocabulary of a few hundred tokens (the 256 bytes or byte tokens, a few dozen merges), so
// that loading and encoding take well under a millisecond. Not here: what the targets check.
#pragma once

#include <string>
#include <vector>

namespace llmcpu::fuzz {

struct HfLayout {
  std::string name;    // also the seed's file name
  std::string json;    // tokenizer.json
  std::string config;  // tokenizer_config.json beside it; empty: none
  bool clean_up;       // the config's clean_up_tokenization_spaces (true when it has none)
};

// GPT-2's byte-level tokenizer.json layout: ByteLevel pre-tokenizer with GPT-2's pattern, ByteLevel
// decoder and post-processor, <|endoftext|> as a special added token, merges as "a b" strings.
HfLayout gpt2_layout();
// Llama 3's: Split by Llama 3's pattern then ByteLevel without its pattern, ignore_merges, merges
// as [a, b] pairs, <|begin_of_text|> put before the text by TemplateProcessing.
HfLayout llama3_layout();
// Qwen2's: the NFC normalizer, Split by Qwen2's pattern (one digit per piece) then ByteLevel,
// three special added tokens.
HfLayout qwen2_layout();
// Llama 2's (SentencePiece converted): normalizer Prepend("▁") + Replace(" " -> "▁"), no
// pre-tokenizer, BPE with byte_fallback (<0x00>..<0xFF>) and fuse_unk, decoder Replace("▁" -> " "),
// ByteFallback, Fuse, Strip(" ", 1, 0); <s> before the text.
HfLayout sentencepiece_layout();
// A Metaspace pre-tokenizer and decoder (prepend_scheme "first"), no byte fallback: characters
// outside the vocabulary become <unk>, runs of them fused into one.
HfLayout metaspace_layout();
// A BERT-like normalizer (NFD, StripAccents, Lowercase), pre-tokenizers Whitespace and Digits
// (one digit per piece), a character vocabulary with end_of_word_suffix "</w>", no decoder.
HfLayout digits_layout();
// Added tokens of every kind on a byte-level vocabulary: lstrip (<mask>), rstrip ([SEP]), both
// (a non-special "ab"), a normalized one ("Hello", matched after the Lowercase normalizer), with
// ByteLevel's add_prefix_space and clean_up_tokenization_spaces left true.
HfLayout added_tokens_layout();

std::vector<HfLayout> hf_layouts();  // all of the above, in this order

}  // namespace llmcpu::fuzz
