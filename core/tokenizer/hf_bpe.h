// tokenizer.json's "model" of type BPE, as tokenizers.js applies it to one pre-token: the word is
// cut into characters (end_of_word_suffix on the last), then the adjacent pair of lowest merge rank
// is merged, the leftmost first among equal ranks, one merge at a time until no pair has a rank
// (a heap over the pairs, so a word of a million characters takes well under a second); with
// ignore_merges a pre-token that is itself in the vocabulary is taken whole. A resulting token not
// in the vocabulary becomes its UTF-8 bytes as <0xXX> tokens (byte_fallback, when all 256 exist) or
// unk_token; without unk_token it is dropped, as there. merges may be "a b" strings or [a, b]
// pairs; a pair listed twice takes its last rank. continuing_subword_prefix is ignored, as
// tokenizers.js ignores it (with a note: Hugging Face's tokenizers applies it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/tokenizer/bpe.h"
#include "core/tokenizer/hf_json.h"
#include "core/tokenizer/piece_cache.h"
#include "core/util/string_hash.h"

namespace llmcpu::hf {

using StringIds = StringMap<int>;

class BpeModel {
 public:
  // Adds a note to `notes` where it follows tokenizers.js where Hugging Face's tokenizers differs.
  BpeModel(const Node& model, std::vector<std::string>& notes);

  // An added token: in the vocabulary under its content from now on (tokenizers.js sets
  // tokens_to_ids[content] = id). Call before finish(). Throws FileError (naming `where`) for an id
  // far beyond the number of tokens.
  void add_token(const std::string& content, int id, bool special, const Node& where);
  // Called once the added tokens are in. `output_ids` gives the id a token string finally gets
  // where that is not its vocabulary id (tokenizers.js looks the added tokens up first);
  // `plain_output_ids` the same without the special added tokens, for the plain view (below).
  void finish(const StringIds& output_ids, const StringIds& plain_output_ids);

  // One model output token: the id it is written as, and its vocabulary id (fuse_unk looks at
  // that).
  struct Token {
    int id;
    int vocab_id;
  };
  // Appends the tokens of one pre-token. `plain`: as if the special added tokens were not there
  // (their strings have only the model vocabulary's ids), for Hugging Face's split_special_tokens.
  // `raw_bytes`: the word is bytes that stand for their characters of GPT-2's byte alphabet (a
  // ByteLevel pre-tokenizer left the mapping to the model).
  // `whole`: whether ignore_merges may take the word whole (false for a part of a pre-token).
  void encode(std::string_view word, bool plain, bool raw_bytes, std::vector<Token>& out,
              bool whole = true) const;
  // Whether a word (not raw bytes) may be cut between the characters `left` and `right` without
  // changing its tokens: true when no merge joins a symbol that ends with `left` to one that starts
  // with `right` (so no merge can ever span that place, and the merges on either side go on as if
  // the other side were not there) and no suffix is set. A SentencePiece-style vocabulary without
  // a pre-tokenizer gives the model whole texts; cut there, their parts go through the cache like
  // words.
  bool may_cut_between(char32_t left, char32_t right) const {
    if (!cuts_) return false;
    const int l = small_index(left), r = small_index(right);
    if (l >= 0 && r >= 0) return !(small_junctions_[l][r >> 6] >> (r & 63) & 1);
    return !junctions_.count(uint64_t{left} << 32 | right);
  }
  bool ignores_merges() const { return ignore_merges_; }
  // The token the whole word is under ignore_merges (vocab_id -1: none).
  Token whole_word(std::string_view word, bool plain) const { return lookup(word, plain); }
  bool fuse_unk() const { return fuse_unk_; }
  int unk_vocab_id() const { return unk_id_; }

  // id -> token string (the vocabulary, added tokens over it); nullptr for a hole in the ids.
  const std::string* token_of(int id) const;
  int size() const { return static_cast<int>(id_text_.size()); }
  const std::string& end_of_word_suffix() const { return end_of_word_suffix_; }
  const StringIds& vocab() const { return vocab_; }

 private:
  void read_vocab(const Node& model);
  static void check_dense(const Node& where, int64_t max_id, size_t tokens);
  void read_merges(const Node& model);
  int symbol_of(std::string_view s);
  // The steps of finish().
  void add_merges();
  void assign_ids();
  void add_plain_view(const StringIds& plain_output_ids);
  void build_indexes();
  int output_of(const std::string& s, int vocab_id) const;  // output_ids_, else vocab_id
  int find_symbol(std::string_view s) const;
  // The symbol whose text GPT-2's byte alphabet makes of `bytes` (ignore_merges' whole word when
  // the pre-tokenizer left the bytes raw), or -1.
  int find_raw_symbol(std::string_view bytes) const;
  // The token a symbol is written as (vocab_id -1: not in the vocabulary).
  Token symbol_token(int sym, bool plain) const;
  void merge_word(std::vector<int>& symbols, std::vector<size_t>& order) const;
  void merge_short_word(std::vector<int>& symbols, std::vector<size_t>& order) const;
  static constexpr size_t kShortWord = 64;  // characters; longer words are merged on a heap
  void emit(std::string_view token, bool plain, std::vector<Token>& out) const;
  // The token a string is written as; vocab_id -1 when it is not in the vocabulary.
  Token lookup(std::string_view token, bool plain) const;

  StringIds vocab_;  // tokens_to_ids
  std::vector<std::string> id_text_;
  std::vector<uint8_t> id_known_;

  // Symbols: every string a merge can see or make, and every vocabulary string. symbols_ while
  // loading; symbol_index_ (and raw_symbol_index_, keyed by the bytes GPT-2's alphabet stands for,
  // with ignore_merges) once finished, the flat tables encoding looks them up in.
  StringIds symbols_;
  PieceCache<int> symbol_index_, raw_symbol_index_;
  std::vector<std::string> symbol_text_;
  std::vector<int> symbol_vocab_id_;   // -1: not in the vocabulary
  std::vector<int> symbol_output_id_;  // the id it is written as
  BpeMerges merges_;
  std::vector<std::pair<std::string, std::string>> merge_list_;  // until finish()

  std::string unk_token_, end_of_word_suffix_, continuing_subword_suffix_;
  bool has_unk_ = false, byte_fallback_ = false, fuse_unk_ = false, ignore_merges_ = false;
  bool cuts_ = false;  // may_cut_between may say yes (no suffixes)
  bool finished_ = false;
  // The (last character of left, first character of right) of every merge: pairs of ASCII
  // characters and "▁" as a bitmap (small_index), the others as left << 32 | right.
  static int small_index(char32_t c) { return c < 128 ? static_cast<int>(c) : c == 0x2581 ? 128 : -1; }
  uint64_t small_junctions_[129][3] = {};
  int small_symbol_[129];  // the symbol of each of those characters alone (-1: none)
  std::unordered_set<uint64_t> junctions_;
  int unk_id_ = -1, unk_output_id_ = -1;
  int byte_vocab_id_[256], byte_output_id_[256];
  StringIds output_ids_;
  std::string alphabet_[256];             // GPT-2's byte alphabet: byte b as UTF-8
  int byte_symbol_[256];                  // and its symbol (-1: none)
  StringIds special_model_ids_;           // special added contents -> their model id before, or -1
  std::unordered_map<int, Token> plain_;  // symbol -> its token in the plain view, where it differs
};

}  // namespace llmcpu::hf
