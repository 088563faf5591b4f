// llm.c token shards: int32[256] header {20240520, 1, ntok}, then ntok uint16 GPT-2 token ids.
// The tokens are memory-mapped, not copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/util/file.h"

namespace llmcpu {

inline constexpr int kShardMagic = 20240520;
inline constexpr int kShardVersion = 1;

class TokenShard {
 public:
  // Checks magic, version, token count and file length; throws FileError naming the file.
  explicit TokenShard(const std::string& path);

  const std::string& path() const { return file_.path(); }
  size_t size() const { return num_tokens_; }
  const uint16_t* tokens() const {
    return reinterpret_cast<const uint16_t*>(file_.data() + kLlmcHeaderBytes);
  }
  // Throws FileError if any token id is >= vocab_size, naming the first offender and its position.
  void check_vocab(int vocab_size) const;

 private:
  MappedFile file_;
  size_t num_tokens_ = 0;
};

// Writes tokens as a shard, atomically.
void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens);

}  // namespace llmcpu
