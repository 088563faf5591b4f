// Rows of whole examples from shards with .spans sidecars (core/train/example_rows.h) and the
// DataLoader over them: the layout (packed greedily in order, or one example per row), the inputs,
// targets and starts of every row against a layout computed here from the definition, cutting and
// refusing long examples, the batches of a resumed loader, and the shards a loader refuses.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "core/io/token_shard.h"
#include "core/io/token_spans.h"
#include "core/train/data_loader.h"
#include "core/train/example_rows.h"
#include "simd/error.h"
#include "tests/common/temp_files.h"

namespace llmcpu {
namespace {

using testing::TempDirTest;

constexpr int kVocab = 311;

// Examples of the given lengths with tokens 1, 2, 3, ... (mod kVocab) and, per example, trained
// offsets [b, e) inside it.
struct Examples {
  std::vector<uint32_t> tokens;
  std::vector<uint64_t> starts;
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> spans;  // per example, offsets
};

Examples make(const std::vector<int>& lengths) {
  Examples x;
  for (size_t i = 0; i < lengths.size(); ++i) {
    x.starts.push_back(x.tokens.size());
    for (int j = 0; j < lengths[i]; ++j) x.tokens.push_back(uint32_t(x.tokens.size() % 300 + 1));
    const uint64_t n = uint64_t(lengths[i]);
    if (i % 3 == 1 || n < 2) {
      x.spans.push_back({});  // nothing trained
    } else if (n > 4) {
      x.spans.push_back({{1, 2}, {n / 2, n}});
    } else {
      x.spans.push_back({{1, n}});
    }
  }
  return x;
}

void write_examples(const std::string& shard, const Examples& x) {
  write_token_shard(shard, x.tokens, 2);
  std::vector<TokenSpan> spans;
  for (size_t i = 0; i < x.starts.size(); ++i) {
    for (auto [b, e] : x.spans[i]) spans.push_back({x.starts[i] + b, x.starts[i] + e});
  }
  write_token_spans(spans_path(shard), x.tokens.size(), x.starts, spans);
}

struct Row {
  std::vector<int> inputs, targets, starts;
};

// The rows by the definition: greedy in order (or one per example), cut at T, padding 0 / -1.
std::vector<Row> expected_rows(const Examples& x, int T, bool pack) {
  std::vector<Row> rows;
  Row cur;
  for (size_t i = 0; i < x.starts.size(); ++i) {
    const uint64_t begin = x.starts[i];
    const uint64_t end = i + 1 < x.starts.size() ? x.starts[i + 1] : x.tokens.size();
    const uint64_t len = std::min<uint64_t>(end - begin, uint64_t(T));
    if (!cur.inputs.empty() && (!pack || cur.inputs.size() + len > size_t(T))) {
      rows.push_back(cur);
      cur = {};
    }
    const int at = int(cur.inputs.size());
    for (uint64_t j = 0; j < len; ++j) {
      cur.inputs.push_back(int(x.tokens[begin + j]));
      bool trained = false;
      for (auto [b, e] : x.spans[i]) trained |= j + 1 >= b && j + 1 < e;
      cur.targets.push_back(trained && begin + j + 1 < end ? int(x.tokens[begin + j + 1]) : -1);
      cur.starts.push_back(at);
    }
  }
  rows.push_back(cur);
  for (Row& r : rows) {
    const int pad_start = int(r.inputs.size());
    while (r.inputs.size() < size_t(T)) {
      r.inputs.push_back(0), r.targets.push_back(-1), r.starts.push_back(pad_start);
    }
  }
  return rows;
}

class ExampleRowsTest : public TempDirTest {};

TEST_F(ExampleRowsTest, RowsFollowTheDefinitionPackedAndOnePerRow) {
  const Examples x = make({3, 5, 9, 2, 8, 1, 4, 4, 12, 7});
  const int T = 8;
  write_examples(path("d.bin"), x);
  const TokenShard shard(path("d.bin"));
  const TokenSpans spans(spans_path(path("d.bin")), shard.size());
  for (const bool pack : {true, false}) {
    SCOPED_TRACE(pack ? "packed" : "one per row");
    const ExampleRows rows(spans, T, {.pack = pack}, path("d.bin"));
    const std::vector<Row> want = expected_rows(x, T, pack);
    ASSERT_EQ(rows.rows(), want.size());
    EXPECT_EQ(rows.stats().truncated, 2u);  // the 9 and the 12
    EXPECT_EQ(rows.stats().examples, 10u);
    uint64_t targets = 0;
    for (size_t r = 0; r < want.size(); ++r) {
      Row got{std::vector<int>(T), std::vector<int>(T), std::vector<int>(T)};
      rows.fill(shard, spans, r, got.inputs.data(), got.targets.data(), got.starts.data());
      EXPECT_EQ(got.inputs, want[r].inputs) << "row " << r;
      EXPECT_EQ(got.targets, want[r].targets) << "row " << r;
      EXPECT_EQ(got.starts, want[r].starts) << "row " << r;
      for (int t = 0; t < T; ++t) targets += want[r].targets[t] >= 0;
    }
    EXPECT_EQ(rows.stats().targets, targets);
    const uint64_t placed = 3 + 5 + 8 + 2 + 8 + 1 + 4 + 4 + 8 + 7;  // each example, cut at 8
    EXPECT_EQ(rows.stats().tokens, placed);
    EXPECT_EQ(rows.stats().padding, rows.rows() * T - placed);
  }
  // The packed layout spelled out: [3 5] [9 cut] [2] [8] [1 4] [4] [12 cut] [7].
  EXPECT_EQ(ExampleRows(spans, T, {}, path("d.bin")).rows(), 8u);
}

TEST_F(ExampleRowsTest, LongExamplesAreRefusedByNameWhenAsked) {
  write_examples(path("d.bin"), make({3, 5, 9, 2}));
  const TokenShard shard(path("d.bin"));
  const TokenSpans spans(spans_path(path("d.bin")), shard.size());
  testing::expect_file_error(
      [&] { ExampleRows(spans, 8, {.long_examples = LongExamples::kRefuse}, path("d.bin")); },
      path("d.bin"), {"example 2", "holds 9 tokens", "8", "--max-len-policy"});
  EXPECT_NO_THROW(ExampleRows(spans, 9, {.long_examples = LongExamples::kRefuse}, path("d.bin")));
}

TEST_F(ExampleRowsTest, LoaderBatchesAreRowsAndResumeExactly) {
  std::vector<int> lengths;
  for (int i = 0; i < 60; ++i) lengths.push_back(1 + (i * 7) % 11);
  const Examples x = make(lengths);
  write_examples(path("train_000001.bin"), x);
  write_examples(path("train_000002.bin"), make({4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4}));
  const int B = 2, T = 10;
  const std::vector<Row> want = expected_rows(x, T, true);
  DataLoader in_order(path("train_*.bin"), B, T, kVocab, /*shuffle=*/false, 1);
  ASSERT_TRUE(in_order.masked());
  ASSERT_TRUE(in_order.packed());
  std::vector<int> inputs(B * T), targets(B * T), starts(B * T);
  for (size_t k = 0; k < want.size() / B; ++k) {
    in_order.next_batch(inputs.data(), targets.data(), starts.data());
    for (int b = 0; b < B; ++b) {
      const Row& w = want[k * B + b];
      EXPECT_EQ(std::vector<int>(inputs.begin() + b * T, inputs.begin() + (b + 1) * T), w.inputs);
      EXPECT_EQ(std::vector<int>(targets.begin() + b * T, targets.begin() + (b + 1) * T),
                w.targets);
      EXPECT_EQ(std::vector<int>(starts.begin() + b * T, starts.begin() + (b + 1) * T), w.starts);
    }
  }
  EXPECT_THROW(in_order.next_batch(inputs.data(), targets.data(), nullptr), Error);

  // Shuffled: a loader restored to a saved position reads what the first one reads next.
  DataLoader first(path("train_*.bin"), B, T, kVocab, /*shuffle=*/true, 7);
  for (int i = 0; i < 9; ++i) first.next_batch(inputs.data(), targets.data(), starts.data());
  DataLoader resumed(path("train_*.bin"), B, T, kVocab, /*shuffle=*/true, 99);
  resumed.restore(first.position());
  std::vector<int> i2(B * T), t2(B * T), s2(B * T);
  for (int i = 0; i < 40; ++i) {
    first.next_batch(inputs.data(), targets.data(), starts.data());
    resumed.next_batch(i2.data(), t2.data(), s2.data());
    ASSERT_EQ(inputs, i2) << "batch " << i;
    ASSERT_EQ(targets, t2) << "batch " << i;
    ASSERT_EQ(starts, s2) << "batch " << i;
  }
}

TEST_F(ExampleRowsTest, LoaderRefusesShardsOfWhichOnlySomeHaveSidecars) {
  write_examples(path("train_000001.bin"), make({4, 4, 4, 4, 4, 4}));
  std::vector<uint32_t> plain(100, 5);
  write_token_shard(path("train_000002.bin"), plain, 2);
  testing::expect_file_error(
      [&] { DataLoader(path("train_*.bin"), 1, 8, kVocab, false, 1); }, path("train_000002.bin"),
      {"only some shards", ".spans", "every shard needs one, or none"});
}

TEST_F(ExampleRowsTest, ShardsWithFewerRowsThanABatchAreSkipped) {
  write_examples(path("train_000001.bin"), make({4, 4, 4, 4, 4, 4, 4, 4}));  // 4 rows of 8
  write_examples(path("train_000002.bin"), make({4, 4}));                    // 1 row
  DataLoader loader(path("train_*.bin"), 2, 8, kVocab, false, 1);
  ASSERT_EQ(loader.skipped().size(), 1u);
  EXPECT_EQ(loader.skipped()[0].file, path("train_000002.bin"));
  EXPECT_NE(loader.skipped()[0].why.find("fill 1 rows"), std::string::npos)
      << loader.skipped()[0].why;
  EXPECT_EQ(loader.total_samples(), 2u);
}

TEST(RowFlags, WordsAreParsedOrRefusedByFlag) {
  RowOptions o;
  parse_row_flags("off", "refuse", &o);
  EXPECT_FALSE(o.pack);
  EXPECT_EQ(o.long_examples, LongExamples::kRefuse);
  EXPECT_THROW(parse_row_flags("yes", "truncate", &o), UsageError);
  try {
    parse_row_flags("on", "cut", &o);
    ADD_FAILURE() << "accepted --max-len-policy cut";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--max-len-policy"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("truncate or refuse"), std::string::npos);
  }
}

}  // namespace
}  // namespace llmcpu
