#include "core/io/token_shard.h"

#include "core/util/tokens.h"
#include "simd/error.h"

namespace llmcpu {

namespace {

// The magic and version pairs a token shard may have, for messages.
const char* const kShardPairs =
    "llm.c's token shards are magic 20240520 with version 1 (uint16 ids) or magic 20240801 with "
    "version 7 (uint32 ids)";

// The id width of a shard with this magic and version; FileError for any other pair.
int token_bytes_of(const std::string& path, int32_t magic, int32_t version) {
  if (magic != kShardMagic && magic != kShard32Magic) {
    throw FileError(path, "bad magic " + std::to_string(magic) + ", expected " +
                              std::to_string(kShardMagic) + " or " + std::to_string(kShard32Magic) +
                              " (" + kShardPairs + ")");
  }
  const int expected = magic == kShardMagic ? kShardVersion : kShard32Version;
  if (version != expected) {
    throw FileError(path, "unsupported token shard version " + std::to_string(version) +
                              " for magic " + std::to_string(magic) + ", expected " +
                              std::to_string(expected) + " (" + kShardPairs + ")");
  }
  return magic == kShardMagic ? 2 : 4;
}

void check_token_bytes(const std::string& path, int token_bytes) {
  if (token_bytes != 2 && token_bytes != 4) {
    throw UsageError(path + ": a token shard's ids are 2 or 4 bytes, not " +
                     std::to_string(token_bytes));
  }
}

}  // namespace

TokenShard::TokenShard(const std::string& path) : file_(path) {
  const int32_t* h = file_.llmc_header("token shard");
  token_bytes_ = token_bytes_of(path, h[0], h[1]);
  if (h[2] < 0) throw FileError(path, "negative token count " + std::to_string(h[2]) + " in header");
  num_tokens_ = static_cast<size_t>(h[2]);
  const size_t expected = kLlmcHeaderBytes + num_tokens_ * token_bytes_;
  file_.expect_size(expected, "its header says " + std::to_string(num_tokens_) + " tokens of " +
                                  std::to_string(token_bytes_) + " bytes, which");
}

void TokenShard::copy(size_t first, size_t n, int* out) const {
  if (first > num_tokens_ || n > num_tokens_ - first) {
    throw ShapeError("tokens " + std::to_string(first) + ".." + std::to_string(first + n) +
                     " run past the end of " + path() + " (" + std::to_string(num_tokens_) +
                     " tokens)");
  }
  if (token_bytes_ == 2) {
    const uint16_t* t = reinterpret_cast<const uint16_t*>(ids()) + first;
    for (size_t i = 0; i < n; ++i) out[i] = t[i];
  } else {
    const uint32_t* t = reinterpret_cast<const uint32_t*>(ids()) + first;
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<int>(t[i]);
  }
}

void TokenShard::check_vocab(int vocab_size) const {
  auto fail = [&](const std::string& problem) { throw FileError(path(), problem); };
  if (token_bytes_ == 2) {
    check_tokens_in_vocab(reinterpret_cast<const uint16_t*>(ids()), num_tokens_, vocab_size, fail);
  } else {
    check_tokens_in_vocab(reinterpret_cast<const uint32_t*>(ids()), num_tokens_, vocab_size, fail);
  }
}

void write_token_shard(const std::string& path, const void* ids, size_t n, int token_bytes) {
  check_token_bytes(path, token_bytes);
  if (n > INT32_MAX) throw FileError(path, "too many tokens for one shard");
  int32_t header[kLlmcHeaderInts] = {};
  header[0] = token_bytes == 2 ? kShardMagic : kShard32Magic;
  header[1] = token_bytes == 2 ? kShardVersion : kShard32Version;
  header[2] = static_cast<int32_t>(n);
  AtomicFileWriter out(path);
  out.write(header, sizeof(header));
  out.write(ids, n * token_bytes);
  out.commit();
}

void write_token_shard(const std::string& path, const std::vector<uint32_t>& tokens,
                       int token_bytes) {
  check_token_bytes(path, token_bytes);
  if (token_bytes == 4) return write_token_shard(path, tokens.data(), tokens.size(), 4);
  std::vector<uint16_t> narrow(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] > UINT16_MAX) {
      throw ShapeError(path + ": token " + std::to_string(tokens[i]) + " at position " +
                       std::to_string(i) + " does not fit a uint16 token shard (ids 0..65535)");
    }
    narrow[i] = static_cast<uint16_t>(tokens[i]);
  }
  write_token_shard(path, narrow);
}

void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens) {
  write_token_shard(path, tokens.data(), tokens.size(), 2);
}

}  // namespace llmcpu
