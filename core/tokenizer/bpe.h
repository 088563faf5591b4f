// Byte-pair merges over token ids, applied in exactly gpt-3-encoder's order: repeatedly take the
// adjacent pair of lowest rank (the last such pair in the word when several pairs share that rank)
// and merge every non-overlapping occurrence of it, left to right, in one pass; stop when no pair
// has a rank. This file knows nothing of strings or files: the loader (tokenizer.cpp) fills the
// table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace llmcpu {

class BpeMerges {
 public:
  struct Merge {
    int rank;    // priority: lower merges first
    int result;  // token id of the merged pair
  };

  // Adds the pair (left, right) unless it is already there; returns false if it was.
  bool add(int left, int right, int rank, int result);
  // The merge of (left, right), or nullptr when the pair is not a merge.
  const Merge* find(int left, int right) const;
  size_t size() const { return count_; }

  // Reused buffers, so that applying merges does not allocate once they have grown.
  struct Scratch {
    std::vector<int> ranks;  // ranks[i]: rank of the pair (word[i], word[i+1]), kNoRank if none
    std::vector<uint8_t> merged;  // merged[i]: word[i] was made in the current pass
  };
  // Merges `word` (token ids, one per byte at first) in place.
  void apply(std::vector<int>& word, Scratch& scratch) const;

  static constexpr int kNoRank = INT32_MAX;

 private:
  struct Slot {
    uint64_t key = kEmpty;  // left << 32 | right
    Merge merge{};
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t key(int left, int right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  size_t slot_of(uint64_t key) const;
  void grow();

  std::vector<Slot> slots_;  // open addressing, linear probing, size a power of two
  size_t count_ = 0;
};

}  // namespace llmcpu
