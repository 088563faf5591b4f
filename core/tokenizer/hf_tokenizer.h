// A Hugging Face tokenizer.json (with its tokenizer_config.json) as tokenizers.js, the reference
// the tests compare with, runs it. Encoding: the text (UTF-8, invalid bytes read as U+FFFD) is cut
// at the added tokens that are not normalized (longest first at each place; lstrip/rstrip take the
// whitespace beside them), each other part is normalized (hf_normalizers.h) and cut again at the
// normalized added tokens, then pre-tokenized (hf_pretokenizers.h) and run through the BPE model
// (hf_bpe.h); the post-processor adds special tokens when asked. Decoding: ids -> token strings ->
// the decoder (hf_decoders.h), then clean_up_tokenization_spaces as tokenizer_config.json says
// (true when it does not). Only BPE models are implemented; WordPiece and Unigram are refused.
// Where tokenizers.js and Hugging Face's tokenizers differ (an added token's single_word, Split's
// merging behaviors, continuing_subword_prefix), tokenizers.js is followed and notes() says so.
// Encoding is safe from several threads at once: each thread keeps its own cache of pre-token
// results.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace llmcpu::hf {

class HfTokenizer {
 public:
  // Reads tokenizer.json at `json_path` and, when `config_path` is not empty,
  // tokenizer_config.json. Throws FileError naming the file and the part of it that is malformed or
  // not implemented.
  static std::shared_ptr<const HfTokenizer> load(const std::string& json_path,
                                                 const std::string& config_path);

  // Appends the ids of `text`. With split_special_tokens the text of a special added token is
  // encoded as text (Hugging Face's split_special_tokens, which llm.c's data scripts use), so a
  // document cannot contain control tokens; the other added tokens are still matched.
  void encode(std::string_view text, bool add_special_tokens, std::vector<int>& out,
              bool split_special_tokens = false) const;
  // Throws ShapeError for an id outside the vocabulary.
  // `clean_up`: apply clean_up_tokenization_spaces as the config says (false: never, for text
  // shown while it grows, which the clean-up could change behind what was shown).
  std::string decode(const int* ids, size_t n, bool clean_up = true) const;

  int vocab_size() const;
  // What this tokenizer.json asks for that is done as tokenizers.js does it, where Hugging Face's
  // tokenizers would do otherwise: one sentence each, for the commands to print.
  const std::vector<std::string>& notes() const;
  int eos_token() const;  // -1 if none is known
  int bos_token() const;  // -1 if none is known
  // Whether `id` is an added token marked special (<|im_end|>, <|eot_id|>, <end_of_turn>, ...).
  bool is_special(int id) const;
  // Whether encoding with special tokens (or the config's add_bos_token) starts with bos_token().
  bool adds_bos() const;
  // The token before each document in token shards: BOS when the tokenizer adds one, else EOS
  // (as llm.c's data scripts do for Llama 3 and GPT-2). -1 if neither is known.
  int document_token() const { return adds_bos() && bos_token() >= 0 ? bos_token() : eos_token(); }

  ~HfTokenizer();
  struct Impl;

 private:
  explicit HfTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmcpu::hf
