// How n elements are split evenly over the ranks of a world: the gradient all-reduce's shards, the
// ZeRO-1 optimizer shards and each local rank's part of the machine's cores all follow shard_of.
// Not here: the collectives themselves (core/comm).
#pragma once

#include <algorithm>
#include <cstddef>

namespace llmcpu {

// The part of n elements that `rank` of `size` owns: [begin, begin + count). The first n % size
// ranks own one element more than the others; a shard may be empty.
struct Shard {
  size_t begin;
  size_t count;
};

inline Shard shard_of(size_t n, int rank, int size) {
  const size_t base = n / size, extra = n % size, r = rank;
  return {r * base + std::min(r, extra), base + (r < extra ? 1 : 0)};
}

}  // namespace llmcpu
