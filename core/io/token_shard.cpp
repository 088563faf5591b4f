#include "core/io/token_shard.h"

#include "core/util/tokens.h"
#include "simd/error.h"

namespace llmcpu {

TokenShard::TokenShard(const std::string& path) : file_(path) {
  const int32_t* h = file_.llmc_header("token shard");
  if (h[0] != kShardMagic) {
    throw FileError(path, "bad magic " + std::to_string(h[0]) + ", expected " +
                              std::to_string(kShardMagic) + " (an llm.c token shard)");
  }
  if (h[1] != kShardVersion) {
    throw FileError(path, "unsupported token shard version " + std::to_string(h[1]) +
                              ", expected " + std::to_string(kShardVersion));
  }
  if (h[2] < 0) throw FileError(path, "negative token count " + std::to_string(h[2]) + " in header");
  num_tokens_ = static_cast<size_t>(h[2]);
  const size_t expected = kLlmcHeaderBytes + num_tokens_ * sizeof(uint16_t);
  file_.expect_size(expected, "its header says " + std::to_string(num_tokens_) + " tokens, which");
}

void TokenShard::check_vocab(int vocab_size) const {
  check_tokens_in_vocab(tokens(), num_tokens_, vocab_size,
                        [&](const std::string& problem) { throw FileError(path(), problem); });
}

void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens) {
  if (tokens.size() > INT32_MAX) throw FileError(path, "too many tokens for one shard");
  int32_t header[kLlmcHeaderInts] = {};
  header[0] = kShardMagic;
  header[1] = kShardVersion;
  header[2] = static_cast<int32_t>(tokens.size());
  AtomicFileWriter out(path);
  out.write(header, sizeof(header));
  out.write(tokens.data(), tokens.size() * sizeof(uint16_t));
  out.commit();
}

}  // namespace llmcpu
