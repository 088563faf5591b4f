// llm.c token shards, in the two layouts llm.c's data scripts write (write_datafile in
// dev/data/data_common.py), both an int32[256] header, then ntok token ids, little-endian:
//   GPT-2:   {20240520, 1, ntok}, then uint16 ids (vocabularies of up to 65536 tokens);
//   Llama 3: {20240801, 7, ntok}, then uint32 ids (larger vocabularies, Llama 3's 128256).
// The tokens are memory-mapped, not copied; at() and copy() read either width. Not here: which
// width a tokenizer needs (shard_token_bytes() only says llm.c's rule), splitting a stream into
// shards (core/data/shard_writer.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/util/file.h"

namespace llmcpu {

inline constexpr int kShardMagic = 20240520;  // uint16 ids
inline constexpr int kShardVersion = 1;
inline constexpr int kShard32Magic = 20240801;  // uint32 ids
inline constexpr int kShard32Version = 7;

// The width of a shard's ids for a vocabulary of vocab_size tokens: 2 up to 65536 tokens, else 4.
inline int shard_token_bytes(int vocab_size) { return vocab_size > 65536 ? 4 : 2; }

class TokenShard {
 public:
  // Checks magic and version (exactly the two pairs above), the token count and the file length;
  // throws FileError naming the file.
  explicit TokenShard(const std::string& path);

  const std::string& path() const { return file_.path(); }
  size_t size() const { return num_tokens_; }
  int token_bytes() const { return token_bytes_; }  // 2 (uint16 ids) or 4 (uint32 ids)
  // Token i, for i < size() (not checked).
  uint32_t at(size_t i) const {
    return token_bytes_ == 2 ? reinterpret_cast<const uint16_t*>(ids())[i]
                             : reinterpret_cast<const uint32_t*>(ids())[i];
  }
  // out[0..n) = tokens [first, first + n), as ints; ShapeError if that runs past size(). Ids past
  // INT32_MAX (a uint32 shard may hold them; check_vocab refuses them) do not fit an int.
  void copy(size_t first, size_t n, int* out) const;
  // Throws FileError if any token id is >= vocab_size, naming the first offender and its position.
  void check_vocab(int vocab_size) const;

 private:
  const uint8_t* ids() const { return file_.data() + kLlmcHeaderBytes; }

  MappedFile file_;
  size_t num_tokens_ = 0;
  int token_bytes_ = 2;
};

// Writes n ids as a shard with token_bytes (2 or 4; UsageError otherwise) bytes per id, atomically,
// byte for byte as llm.c's write_datafile; `ids` holds them as the shard does (n little-endian
// uint16 or uint32).
void write_token_shard(const std::string& path, const void* ids, size_t n, int token_bytes);
// The same from ids as numbers: ShapeError naming the id for one that does not fit token_bytes.
void write_token_shard(const std::string& path, const std::vector<uint32_t>& tokens,
                       int token_bytes);
// A GPT-2 shard (uint16 ids).
void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens);

}  // namespace llmcpu
