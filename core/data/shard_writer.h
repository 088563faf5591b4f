// Splits a stream of token ids into llm.c token shards, as llm.c's data scripts do: the first
// val_tokens tokens go to DIR/NAME_val_000000.bin (more val files only if val_tokens exceeds one
// shard), the rest to DIR/NAME_train_000000.bin, NAME_train_000001.bin, ... of shard_tokens each,
// except the last, which holds what is left: a tail shorter than half a shard goes into the shard
// before it (the last train shard then holds up to a shard and a half), so that a glob over the
// train shards never catches a few stray tokens that no batch fits in. Every shard has ids of
// token_bytes bytes: 2 (uint16, GPT-2's shards) or 4 (uint32, llm.c's shards for vocabularies past
// 65536). With val_tokens unset, val is 10% of all tokens, at most one shard; until that is known
// (the end of the stream, or 10 shards' worth of tokens) the tokens wait in memory, token_bytes
// each. Examples (add_example, for chat and other JSON records) are never cut: every shard then
// starts and ends at an example boundary, val holds the first whole examples up to val_tokens (at
// least one), a shard holds the whole examples that fit shard_tokens (at least one, so an example
// longer than a shard makes a longer shard), the same tail rule applies, and every shard gets its
// spans sidecar (core/io/token_spans.h). Before a shard is written, a sidecar left beside its path
// by an earlier run is removed, so a shard never meets a sidecar that is not its own.
// Not here: tokenizing, reading inputs, choosing the width (prepare.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/io/token_spans.h"

namespace llmcpu {

class ShardWriter {
 public:
  static constexpr int64_t kAutoVal = -1;

  // Throws UsageError for shard_tokens outside 1..2^31-1, val_tokens < -1 or token_bytes other
  // than 2 and 4.
  ShardWriter(std::string dir, std::string name, int64_t shard_tokens, int64_t val_tokens,
              int token_bytes);

  // Throws ShapeError for an id that does not fit the shards' width (nothing of ids is added then).
  void add(const int* ids, size_t n);
  // Adds one example of n >= 1 tokens whose trained targets are `spans` (of its own tokens:
  // sorted, disjoint, begin >= 1). Not to be mixed with add(): UsageError. ShapeError for an id
  // that does not fit, or an example past an llm.c shard's 2^31-1 tokens.
  void add_example(const int* ids, size_t n, const std::vector<TokenSpan>& spans);
  // Writes what is left. Throws Error when no token is left for training.
  void finish();

  const std::vector<std::string>& val_files() const { return val_files_; }
  const std::vector<std::string>& train_files() const { return train_files_; }
  uint64_t val_tokens() const { return val_written_; }
  uint64_t train_tokens() const { return train_written_; }
  uint64_t total_tokens() const { return total_; }

  // DIR/NAME_SPLIT_NNNNNN.bin
  static std::string shard_path(const std::string& dir, const std::string& name, const char* split,
                                size_t index);

 private:
  size_t min_tail() const { return shard_tokens_ / 2; }
  void append(const int* ids, size_t n);
  void drain(bool final);
  bool drain_val(bool final);
  size_t fit(size_t want) const;
  void write_next(bool val, size_t n);
  void write_spans(const std::string& path, size_t n);
  uint64_t written() const { return val_written_ + train_written_; }

  std::string dir_, name_;
  size_t shard_tokens_;
  int token_bytes_;
  int64_t val_left_;              // tokens still owed to val; kAutoVal until decided
  std::vector<uint8_t> pending_;  // tokens not yet written, token_bytes_ each as in a shard, ...
  size_t head_ = 0;               // ... from token head_ on
  uint64_t total_ = 0, val_written_ = 0, train_written_ = 0;
  std::vector<std::string> val_files_, train_files_;
  // Examples (add_example): each pending example's first token and each pending span, as positions
  // in the whole stream; those before starts_head_ / spans_head_ are written.
  enum class Mode { kUnknown, kStream, kExamples } mode_ = Mode::kUnknown;
  bool val_snapped_ = false;  // val_left_ ends at an example boundary
  std::vector<uint64_t> starts_;
  std::vector<TokenSpan> spans_;
  size_t starts_head_ = 0, spans_head_ = 0;
};

}  // namespace llmcpu
