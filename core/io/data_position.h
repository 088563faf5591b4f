// Where a DataLoader (core/train/data_loader.h) stands in its shards, as a value: a training-state
// file (train_state.h) carries it, so that a resumed run reads exactly the batches the
// uninterrupted run would have read. Not here: reading shards or drawing the orders (the loader
// does both).
#pragma once

#include <cstdint>
#include <vector>

namespace llmcpu {

struct DataPosition {
  uint64_t epoch = 0;
  uint64_t rng_state = 0;
  uint32_t shard = 0;   // index into shard_order
  uint64_t sample = 0;  // index into sample_order (or the sample itself when sequential)
  std::vector<uint32_t> shard_order;
  std::vector<uint32_t> sample_order;  // empty when sequential
};

}  // namespace llmcpu
