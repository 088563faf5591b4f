// Batches of (inputs, targets) from a token shard, llm.c style: batch k covers the B*T + 1 tokens
// starting at its position; targets are the inputs shifted by one. Sequential (batch k starts at
// token k*B*T, wrapping at the end of the shard) or, by default, positions shuffled with a seeded
// RNG at the start of every epoch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/io/token_shard.h"
#include "core/util/rng.h"

namespace llmcpu {

class DataLoader {
 public:
  // Throws FileError if the shard holds fewer than B*T + 1 tokens or a token >= vocab_size.
  DataLoader(const std::string& shard_path, int B, int T, int vocab_size, bool shuffle, uint64_t seed);

  // Fills inputs and targets, B*T ints each, and moves to the next batch.
  void next_batch(int* inputs, int* targets);

  size_t batches_per_epoch() const { return num_batches_; }
  size_t epoch() const { return epoch_; }

 private:
  void start_epoch();

  TokenShard shard_;
  int B_, T_;
  bool shuffle_;
  Rng rng_;
  size_t num_batches_;
  std::vector<uint32_t> order_;  // batch indices of the current epoch
  size_t cursor_ = 0;
  size_t epoch_ = 0;
};

}  // namespace llmcpu
