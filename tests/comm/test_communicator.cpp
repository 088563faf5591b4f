// The Communicator's collectives against a reference each rank computes on its own: every rank
// knows what every other rank contributes (a function of the rank and the index), so the expected
// sums, shards and gathered arrays need no communication. The contributions are small integers, so
// their fp32 sums are exact whatever order a reduction takes and results compare with ==. Sizes:
// empty, smaller than the world (empty shards), not divisible by it, and above MPI's eager limits.
// Run alone (a world of one process) and under mpirun at 1 to 4 ranks (tests/comm/CMakeLists.txt).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "core/comm/communicator.h"

namespace llmcpu {
namespace {

Communicator& world() {
  static std::unique_ptr<Communicator> w = world_communicator();
  return *w;
}

std::vector<size_t> sizes_under_test() {
  const size_t N = world().size();
  // The last one is above the 8 MB pieces the MPI world cuts large collectives into.
  return {0, 1, N - 1, N, 2 * N + 1, 1000, (size_t(1) << 20) + 3, (size_t(5) << 20) + 7};
}

// What rank r contributes at index i: an integer below 2^10, so sums over 4 ranks stay exact.
float contribution(int r, size_t i) { return float((i * 7 + size_t(r) * 131) % 1021); }

TEST(Shards, CoverTheArrayInOrderWithoutOverlap) {
  for (int size : {1, 2, 3, 4, 7}) {
    for (size_t n : {size_t(0), size_t(1), size_t(5), size_t(64), size_t(1001)}) {
      size_t next = 0;
      for (int r = 0; r < size; ++r) {
        const Shard s = shard_of(n, r, size);
        EXPECT_EQ(s.begin, next) << "n=" << n << " rank " << r << " of " << size;
        EXPECT_LE(s.count, n / size + 1);
        EXPECT_GE(s.count, n / size);
        next += s.count;
      }
      EXPECT_EQ(next, n);
    }
  }
}

TEST(World, RanksAreDistinctAndAgreeOnTheSize) {
  Communicator& w = world();
  ASSERT_GE(w.size(), 1);
  if (const char* n = std::getenv("OMPI_COMM_WORLD_SIZE")) {
    ASSERT_EQ(w.size(), std::atoi(n)) << "mpirun started " << n << " ranks: not one world";
  }
  ASSERT_LT(w.rank(), w.size());
  std::vector<double> seen(w.size(), 0.0);
  seen[w.rank()] = 1;
  w.all_reduce_sum(seen.data(), seen.size());
  for (int r = 0; r < w.size(); ++r) EXPECT_EQ(seen[r], 1.0) << "rank " << r;
  EXPECT_LE(w.local_size(), w.size());
  EXPECT_LT(w.local_rank(), w.local_size());
  if (w.size() > 1) {
    EXPECT_NE(w.describe().find(std::to_string(w.size()) + " ranks"), std::string::npos)
        << w.describe();
  }
}

TEST(World, AllReduceSums) {
  Communicator& w = world();
  for (size_t n : sizes_under_test()) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<float> f(n);
    std::vector<double> d(n);
    for (size_t i = 0; i < n; ++i) f[i] = contribution(w.rank(), i), d[i] = 0.5 * f[i];
    w.all_reduce_sum(f.data(), n);
    w.all_reduce_sum(d.data(), n);
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) {
      double want = 0;
      for (int r = 0; r < w.size(); ++r) want += contribution(r, i);
      wrong += f[i] != float(want) || d[i] != 0.5 * want;
    }
    EXPECT_EQ(wrong, 0u);
  }
}

TEST(World, ReduceScatterGivesEachRankItsShardOfTheSum) {
  Communicator& w = world();
  for (size_t n : sizes_under_test()) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<float> data(n + 1, NAN);  // one past the array: must stay untouched
    for (size_t i = 0; i < n; ++i) data[i] = contribution(w.rank(), i);
    const Shard s = shard_of(n, w.rank(), w.size());
    w.reduce_scatter_sum(data.data(), n);
    size_t wrong = 0;
    for (size_t k = 0; k < s.count; ++k) {
      double want = 0;
      for (int r = 0; r < w.size(); ++r) want += contribution(r, s.begin + k);
      wrong += data[s.begin + k] != float(want);
    }
    EXPECT_EQ(wrong, 0u);
    EXPECT_TRUE(std::isnan(data[n])) << "wrote past the array";
  }
}

TEST(World, AllGatherAssemblesEveryShard) {
  Communicator& w = world();
  for (size_t n : sizes_under_test()) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<float> data(n, NAN);
    const Shard s = shard_of(n, w.rank(), w.size());
    for (size_t k = 0; k < s.count; ++k) data[s.begin + k] = contribution(0, s.begin + k);
    w.all_gather(data.data(), n);
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) wrong += data[i] != contribution(0, i);
    EXPECT_EQ(wrong, 0u);
  }
}

TEST(World, AllGatherOf16BitElementsAssemblesEveryShard) {
  Communicator& w = world();
  for (size_t n : sizes_under_test()) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<uint16_t> data(n, 0xFFFF);
    const Shard s = shard_of(n, w.rank(), w.size());
    for (size_t k = 0; k < s.count; ++k) data[s.begin + k] = uint16_t(contribution(0, s.begin + k));
    w.all_gather(data.data(), n);
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) wrong += data[i] != uint16_t(contribution(0, i));
    EXPECT_EQ(wrong, 0u);
  }
}

TEST(World, BroadcastFromTheLastRank) {
  Communicator& w = world();
  const int root = w.size() - 1;
  for (size_t bytes : {size_t(0), size_t(1), size_t(1000), size_t(3) << 20}) {
    std::vector<uint8_t> data(bytes, 0);
    if (w.rank() == root) {
      for (size_t i = 0; i < bytes; ++i) data[i] = uint8_t(i * 13 + 1);
    }
    w.broadcast(data.data(), bytes, root);
    size_t wrong = 0;
    for (size_t i = 0; i < bytes; ++i) wrong += data[i] != uint8_t(i * 13 + 1);
    EXPECT_EQ(wrong, 0u) << bytes << " bytes";
  }
  w.barrier();
}

// Memory shared by the ranks of one machine (every mpirun of these tests runs on one): blocks of
// different sizes per rank, each filled by its rank and read by all after a fence; then every rank
// writes into the next rank's block, which that rank reads after the next fence.
TEST(World, SharedMemoryShowsEveryRankTheOthersBlocks) {
  Communicator& w = world();
  const int N = w.size(), me = w.rank();
  const auto floats = [](int r) { return size_t(1001) * (r + 1) + (size_t(r) << 20); };
  std::unique_ptr<SharedMemory> shared = w.share_memory(floats(me) * sizeof(float), nullptr);
  const char* off = std::getenv("LLMCPU_SHARED_MEMORY");
  const bool expected = launched_by_mpirun() && !(off && std::string(off) == "0");
  ASSERT_EQ(shared != nullptr, expected) << "a world on one machine shares memory, unless "
                                            "LLMCPU_SHARED_MEMORY=0 or it is a single process";
  // What a memory plan made before the sharing assumes (plan_run_memory in core/train/run_memory.h).
  EXPECT_EQ(w.may_share_memory(), expected);
  if (!shared) GTEST_SKIP() << "no shared memory in this world (checked above)";
  float* mine = static_cast<float*>(shared->block(me));
  for (size_t i = 0; i < floats(me); ++i) mine[i] = contribution(me, i);
  shared->fence();
  for (int r = 0; r < N; ++r) {
    const float* theirs = static_cast<const float*>(shared->block(r));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(theirs) % 64, 0u) << "rank " << r << "'s block";
    size_t wrong = 0;
    for (size_t i = 0; i < floats(r); ++i) wrong += theirs[i] != contribution(r, i);
    EXPECT_EQ(wrong, 0u) << "rank " << r << "'s block, as rank " << me << " sees it";
  }
  shared->fence();  // everyone has read: the blocks may change
  float* next = static_cast<float*>(shared->block((me + 1) % N));
  for (size_t i = 0; i < floats(0); ++i) next[i] = contribution(me, i) + 1;
  shared->fence();
  const int previous = (me + N - 1) % N;
  size_t wrong = 0;
  for (size_t i = 0; i < floats(0); ++i) wrong += mine[i] != contribution(previous, i) + 1;
  EXPECT_EQ(wrong, 0u) << "rank " << previous << "'s writes into rank " << me << "'s block";
  shared->fence();
}

}  // namespace
}  // namespace llmcpu
