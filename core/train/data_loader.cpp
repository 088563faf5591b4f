#include "core/train/data_loader.h"

#include <numeric>

#include "core/util/error.h"

namespace llmcpu {

DataLoader::DataLoader(const std::string& shard_path, int B, int T, int vocab_size, bool shuffle,
                       uint64_t seed)
    : shard_(shard_path), B_(B), T_(T), shuffle_(shuffle), rng_(seed) {
  const size_t need = (size_t)B * T + 1;
  if (shard_.size() < need) {
    throw FileError(shard_path, "holds " + std::to_string(shard_.size()) +
                                    " tokens, fewer than one batch needs (B*T+1 = " +
                                    std::to_string(need) + ")");
  }
  shard_.check_vocab(vocab_size);
  num_batches_ = (shard_.size() - 1) / ((size_t)B * T);
  order_.resize(num_batches_);
  start_epoch();
}

void DataLoader::start_epoch() {
  std::iota(order_.begin(), order_.end(), 0u);
  if (shuffle_) {
    for (size_t i = order_.size() - 1; i > 0; --i) std::swap(order_[i], order_[rng_.below(i + 1)]);
  }
  cursor_ = 0;
}

void DataLoader::next_batch(int* inputs, int* targets) {
  if (cursor_ == num_batches_) {
    ++epoch_;
    start_epoch();
  }
  const size_t BT = (size_t)B_ * T_;
  const uint16_t* t = shard_.tokens() + (size_t)order_[cursor_++] * BT;
  for (size_t i = 0; i < BT; ++i) {
    inputs[i] = t[i];
    targets[i] = t[i + 1];
  }
}

}  // namespace llmcpu
