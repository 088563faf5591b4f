// ZeRO-1's split of the training state (core/comm/zero_shards.h) and its files
// (core/io/train_state.h): every rank's parts together cover each span exactly once, as does one
// rank's part with the others' parts (others_parts); re-sharding a
// state from K ranks to N puts every element where rank r of N keeps it, checked against packed
// arrays built here element by element from the definition (rank r owns shard_of(span, r, N) of
// each span, packed in flat order); a shard file reads back what was written and is refused, by
// name, when it is of another rank, world size or step, corrupt or cut short; a sharded state
// file holds the shards' checksums and no tensors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/comm/communicator.h"
#include "core/comm/zero_shards.h"
#include "core/io/train_state.h"
#include "core/model/config.h"
#include "core/model/parameters.h"
#include "core/util/file.h"
#include "simd/error.h"
#include "tests/common/temp_files.h"
#include "tests/common/tiny_config.h"

namespace llmcpu {
namespace {

using testing::Bytes;
using testing::expect_file_error;
using testing::read_bytes;
using testing::TempDirTest;
using testing::tiny_config;
using testing::write_bytes;

// The value every element of the flat arena holds in these tests: its index.
float value_at(size_t i) { return float(i); }

// Rank r of N's packed array, from the definition, element by element.
std::vector<float> packed_by_definition(const std::vector<ParameterSpan>& spans, int r, int N) {
  std::vector<float> out;
  for (const ParameterSpan& s : spans) {
    const size_t base = s.count / N, extra = s.count % N;
    const size_t begin = r * base + std::min<size_t>(r, extra);
    const size_t count = base + (size_t(r) < extra ? 1 : 0);
    for (size_t i = 0; i < count; ++i) out.push_back(value_at(s.offset + begin + i));
  }
  return out;
}

// A model shape with spans smaller than some worlds (C = 3: lnfw has 3 elements, 5 ranks).
ModelConfig small_spans() {
  ModelConfig c = tiny_config();
  c.num_heads = 1;
  c.channels = 3;
  return c;
}

TEST(ZeroShards, SpansTileTheArenaAndPartsTileEverySpan) {
  for (const ModelConfig& c : {tiny_config(), small_spans()}) {
    const ParameterLayout layout(c);
    const std::vector<ParameterSpan> spans = layout.spans();
    ASSERT_EQ(spans.size(), 4u + 12u * c.num_layers);
    size_t at = 0;
    for (const ParameterSpan& s : spans) {
      EXPECT_EQ(s.offset, at);
      at += s.count;
    }
    EXPECT_EQ(at, layout.total());
    for (int N = 1; N <= 5; ++N) {
      std::vector<int> owners(layout.total(), 0);
      size_t total = 0;
      for (int r = 0; r < N; ++r) {
        const std::vector<ParameterSpan> parts = owned_parts(spans, r, N);
        ASSERT_EQ(parts.size(), spans.size());
        for (size_t i = 0; i < parts.size(); ++i) {
          EXPECT_GE(parts[i].offset, spans[i].offset);
          EXPECT_LE(parts[i].offset + parts[i].count, spans[i].offset + spans[i].count);
          EXPECT_EQ(parts[i].layer, spans[i].layer);
          EXPECT_EQ(parts[i].tensor, spans[i].tensor);
          for (size_t k = 0; k < parts[i].count; ++k) ++owners[parts[i].offset + k];
        }
        total += packed_size(parts);
        // Its part and the others' parts cover the arena once.
        std::vector<int> covered(layout.total(), 0);
        const std::vector<ParameterSpan> others = others_parts(spans, parts);
        ASSERT_EQ(others.size(), 2 * spans.size());
        for (const auto* runs : {&parts, &others}) {
          for (const ParameterSpan& p : *runs) {
            for (size_t k = 0; k < p.count; ++k) ++covered[p.offset + k];
          }
        }
        EXPECT_EQ(std::count(covered.begin(), covered.end(), 1), long(layout.total()))
            << "rank " << r << " of " << N;
      }
      EXPECT_EQ(total, layout.total()) << N << " ranks";
      EXPECT_EQ(std::count(owners.begin(), owners.end(), 1), long(layout.total()))
          << N << " ranks: an element with no owner or two";
    }
  }
}

TEST(ZeroShards, RepackMovesAStateBetweenAnyTwoWorlds) {
  for (const ModelConfig& c : {tiny_config(), small_spans()}) {
    const std::vector<ParameterSpan> spans = ParameterLayout(c).spans();
    for (int K = 1; K <= 4; ++K) {
      for (int N = 1; N <= 5; ++N) {
        for (int r = 0; r < N; ++r) {
          const std::vector<float> want = packed_by_definition(spans, r, N);
          std::vector<float> got(want.size(), -1.0f);
          for (int k = 0; k < K; ++k) {
            const std::vector<float> from = packed_by_definition(spans, k, K);
            repack(spans, from.data(), k, K, got.data(), r, N);
          }
          EXPECT_EQ(got, want) << "from " << K << " ranks to rank " << r << " of " << N;
        }
      }
    }
  }
}

class StateShards : public TempDirTest {
 protected:
  StateShards() : spans_(ParameterLayout(tiny_config()).spans()) {
    P_ = ParameterLayout(tiny_config()).total();
    arena_.resize(P_);
    for (size_t i = 0; i < P_; ++i) arena_[i] = value_at(i);
  }
  // Writes rank r of N's shard (params from the arena, moments -x and x/2 of the packed params).
  uint64_t write(const std::string& name, int r, int N, int64_t step = 7) {
    const std::vector<ParameterSpan> parts = owned_parts(spans_, r, N);
    const std::vector<float> packed = packed_by_definition(spans_, r, N);
    std::vector<float> m(packed.size()), v(packed.size());
    for (size_t i = 0; i < packed.size(); ++i) m[i] = -packed[i], v[i] = packed[i] / 2;
    AtomicFileWriter out(path(name));
    const uint64_t sum = write_state_shard(out, header(r, N, step), arena_.data(), parts, m, v);
    out.commit();
    return sum;
  }
  StateShardHeader header(int r, int N, int64_t step = 7) const {
    return {step, uint32_t(r), uint32_t(N), P_, packed_size(owned_parts(spans_, r, N))};
  }

  std::vector<ParameterSpan> spans_;
  size_t P_;
  std::vector<float> arena_;
};

TEST_F(StateShards, ReadBackWhatWasWritten) {
  for (int N : {1, 3}) {
    for (int r = 0; r < N; ++r) {
      const std::string name = "s" + std::to_string(r) + "of" + std::to_string(N) + ".bin";
      const uint64_t sum = write(name, r, N);
      const StateShardFile f(path(name), header(r, N));
      EXPECT_EQ(f.checksum(), sum);
      const std::vector<float> packed = packed_by_definition(spans_, r, N);
      std::vector<float> p(packed.size()), m(packed.size()), v(packed.size());
      std::memcpy(p.data(), f.tensor_bytes(0), p.size() * 4);
      std::memcpy(m.data(), f.tensor_bytes(1), m.size() * 4);
      std::memcpy(v.data(), f.tensor_bytes(2), v.size() * 4);
      EXPECT_EQ(p, packed);
      for (size_t i = 0; i < packed.size(); ++i) {
        ASSERT_EQ(m[i], -packed[i]);
        ASSERT_EQ(v[i], packed[i] / 2);
      }
      // The layout the format comment gives: 40 bytes of header, 3 Q floats, the checksum.
      EXPECT_EQ(read_bytes(path(name)).size(), 40 + 12 * packed.size() + 8);
    }
  }
}

TEST_F(StateShards, ShardsOfAnotherRankWorldOrStepAreRefusedByName) {
  write("s.bin", 1, 2);
  expect_file_error([&] { StateShardFile(path("s.bin"), header(0, 2)); }, path("s.bin"),
                    {"the part of rank 1, expected 0"});
  expect_file_error([&] { StateShardFile(path("s.bin"), header(1, 4)); }, path("s.bin"),
                    {"a part for a world of ranks 2, expected 4"});
  expect_file_error([&] { StateShardFile(path("s.bin"), header(1, 2, 9)); }, path("s.bin"),
                    {"the state of step 7, expected 9"});
  expect_file_error([&] { StateShardFile(path("missing.bin"), header(1, 2)); }, path("missing.bin"),
                    {"cannot open"});
}

TEST_F(StateShards, CorruptOrCutShardsAreRefused) {
  write("s.bin", 0, 2);
  const Bytes good = read_bytes(path("s.bin"));
  for (size_t at : {size_t(0), size_t(20), size_t(45), good.size() - 9, good.size() - 1}) {
    Bytes bad = good;
    bad[at] ^= 0x04;
    write_bytes(path("bad.bin"), bad);
    SCOPED_TRACE("byte " + std::to_string(at));
    expect_file_error([&] { StateShardFile(path("bad.bin"), header(0, 2)); }, path("bad.bin"),
                      {at == 0 ? "bad magic" : "checksum mismatch"});
  }
  for (size_t n : {size_t(0), size_t(7), size_t(30), good.size() / 2, good.size() - 1}) {
    write_bytes(path("cut.bin"), Bytes(good.begin(), good.begin() + n));
    SCOPED_TRACE(std::to_string(n) + " bytes");
    expect_file_error([&] { StateShardFile(path("cut.bin"), header(0, 2)); }, path("cut.bin"), {});
  }
}

TEST_F(StateShards, ShardedStateFileHoldsChecksumsNotTensors) {
  TrainState s;
  s.config = tiny_config();
  s.B = 2;
  s.T = 4;
  s.step = 7;
  s.adamw_t = 7;
  // A run in order over one shard, at its start (a state's data position must be one).
  s.shuffle = false;
  s.data.rng_state = 1;
  s.data.shard_order = {0};
  s.shard_checksums = {write("a.bin", 0, 2), write("b.bin", 1, 2)};
  save_train_state(path("state.bin"), s, {}, {}, {});
  const TrainStateFile f(path("state.bin"));
  EXPECT_EQ(f.state().shards(), 2u);
  EXPECT_EQ(f.state().shard_checksums, s.shard_checksums);
  EXPECT_EQ(f.num_parameters(), P_);
  std::vector<float> p(P_), m(P_), v(P_);
  EXPECT_THROW(f.read_tensors(p, m, v), Error);
  // A sharded state must not carry tensors, nor a whole one lack them.
  EXPECT_THROW(save_train_state(path("x.bin"), s, arena_, arena_, arena_), Error);
  s.shard_checksums.clear();
  EXPECT_THROW(save_train_state(path("y.bin"), s, {}, {}, {}), Error);
  EXPECT_EQ(state_shard_path("dir/state_00000007.bin", 1, 2), "dir/state_00000007.rank1-of-2.bin");
}

}  // namespace
}  // namespace llmcpu
