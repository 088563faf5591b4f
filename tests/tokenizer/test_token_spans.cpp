// The spans sidecar (core/io/token_spans.h) against its spec: files are made here byte by byte from
// the layout (a 1024-byte header {20261207, 1, num_tokens, num_examples, num_spans}, then the
// example starts, then the {begin, end} pairs), read back, and broken one rule at a time; each
// broken file must be refused with a FileError naming it and the rule. The writer's files must
// equal the bytes made here, and the mask must equal one worked out token by token from the spans.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/io/token_spans.h"
#include "simd/error.h"
#include "tests/common/temp_files.h"

namespace llmcpu {
namespace {

using namespace llmcpu::testing;

struct Sidecar {
  int32_t magic = 20261207, version = 1;
  uint64_t num_tokens = 20;
  std::vector<uint64_t> starts = {0, 8, 15};
  std::vector<uint64_t> bounds = {2, 5, 6, 8, 9, 15, 16, 20};  // {begin, end} pairs
  // The header's counts; by default those of the arrays.
  int64_t num_examples = -1, num_spans = -1;

  Bytes bytes() const {
    const uint64_t ne = num_examples < 0 ? starts.size() : uint64_t(num_examples);
    const uint64_t ns = num_spans < 0 ? bounds.size() / 2 : uint64_t(num_spans);
    Bytes f(1024 + 8 * (starts.size() + bounds.size()), 0);
    std::memcpy(&f[0], &magic, 4);
    std::memcpy(&f[4], &version, 4);
    std::memcpy(&f[8], &num_tokens, 8);
    std::memcpy(&f[16], &ne, 8);
    std::memcpy(&f[24], &ns, 8);
    if (!starts.empty()) std::memcpy(&f[1024], starts.data(), 8 * starts.size());
    if (!bounds.empty())
      std::memcpy(&f[1024 + 8 * starts.size()], bounds.data(), 8 * bounds.size());
    return f;
  }
};

class TokenSpansTest : public TempDirTest {
 protected:
  std::string write(const Sidecar& s, const std::string& name = "s.spans") {
    write_bytes(path(name), s.bytes());
    return path(name);
  }
  // The sidecar `s` must be refused for a shard of shard_tokens tokens, naming all of `words`.
  void expect_refused(const Sidecar& s, std::initializer_list<std::string> words,
                      uint64_t shard_tokens = 20) {
    const std::string p = write(s);
    expect_file_error([&] { TokenSpans spans(p, shard_tokens); }, p, words);
  }
};

TEST(SpansPath, ReplacesBinOrAppends) {
  EXPECT_EQ(spans_path("d/data_train_000000.bin"), "d/data_train_000000.spans");
  EXPECT_EQ(spans_path("x.bin.bin"), "x.bin.spans");
  EXPECT_EQ(spans_path("shard"), "shard.spans");
  EXPECT_EQ(spans_path("a.binx"), "a.binx.spans");
  EXPECT_EQ(spans_path(".bin"), ".spans");
}

TEST_F(TokenSpansTest, ReadsWhatTheSpecLaysOut) {
  const Sidecar s;
  const TokenSpans spans(write(s), 20);
  EXPECT_EQ(spans.num_tokens(), 20u);
  ASSERT_EQ(spans.num_examples(), 3u);
  EXPECT_EQ(spans.example_start(1), 8u);
  EXPECT_EQ(spans.example_end(0), 8u);
  EXPECT_EQ(spans.example_end(2), 20u);
  ASSERT_EQ(spans.num_spans(), 4u);
  EXPECT_EQ(spans.span(2).begin, 9u);
  EXPECT_EQ(spans.span(2).end, 15u);
  EXPECT_EQ(std::vector<uint64_t>(spans.span_bounds().begin(), spans.span_bounds().end()),
            s.bounds);
  EXPECT_EQ(spans.example_of(0), 0u);
  EXPECT_EQ(spans.example_of(7), 0u);
  EXPECT_EQ(spans.example_of(8), 1u);
  EXPECT_EQ(spans.example_of(19), 2u);
}

TEST_F(TokenSpansTest, MaskMarksExactlyTheSpansTokens) {
  const Sidecar s;
  const TokenSpans spans(write(s), 20);
  // Token by token from the pairs.
  std::vector<uint8_t> expected(20, 0);
  for (size_t k = 0; k < s.bounds.size(); k += 2)
    for (uint64_t j = s.bounds[k]; j < s.bounds[k + 1]; ++j) expected[j] = 1;
  for (uint64_t first = 0; first <= 20; ++first) {
    for (size_t n = 0; first + n <= 20; ++n) {
      std::vector<uint8_t> mask(n + 1, 7);
      spans.fill_mask(first, n, mask.data());
      EXPECT_EQ(std::vector<uint8_t>(mask.begin(), mask.begin() + n),
                std::vector<uint8_t>(expected.begin() + first, expected.begin() + first + n))
          << "tokens [" << first << ", " << first + n << ")";
      EXPECT_EQ(mask[n], 7) << "wrote past n";
    }
  }
  std::vector<uint8_t> mask(2);
  EXPECT_THROW(spans.fill_mask(19, 2, mask.data()), ShapeError);
}

TEST_F(TokenSpansTest, WriterWritesTheSpecsBytes) {
  const Sidecar s;
  const std::vector<TokenSpan> pairs = {{2, 5}, {6, 8}, {9, 15}, {16, 20}};
  write_token_spans(path("w.spans"), 20, s.starts, pairs);
  EXPECT_EQ(read_bytes(path("w.spans")), s.bytes());
  EXPECT_EQ(listing(), std::vector<std::string>{"w.spans"});  // no temporary file left
  // One example, no span: legitimate (an example with nothing to train).
  write_token_spans(path("one.spans"), 3, std::vector<uint64_t>{0}, {});
  const TokenSpans one(path("one.spans"), 3);
  EXPECT_EQ(one.num_examples(), 1u);
  EXPECT_EQ(one.num_spans(), 0u);
}

TEST_F(TokenSpansTest, WriterRefusesBrokenRules) {
  const std::string p = path("w.spans");
  const std::vector<uint64_t> starts = {0, 8};
  expect_file_error(
      [&] {
        write_token_spans(p, 20, starts, std::vector<TokenSpan>{{8, 10}});
      },
      p, {"first token of example 1"});
  expect_file_error(
      [&] {
        write_token_spans(p, 20, starts, std::vector<TokenSpan>{{5, 9}});
      },
      p, {"crosses the end of example 0"});
  expect_file_error([&] { write_token_spans(p, 8, starts, {}); }, p, {"expected < num_tokens 8"});
  EXPECT_TRUE(listing().empty());
}

TEST_F(TokenSpansTest, RefusesBadHeaders) {
  Sidecar s;
  s.magic = 20240520;
  expect_refused(s, {"bad magic 20240520", "expected 20261207"});
  s = {};
  s.version = 2;
  expect_refused(s, {"unsupported spans sidecar version 2", "expected 1"});
  s = {};
  expect_refused(s, {"num_tokens is 20", "expected 21", "its shard"}, 21);
  Bytes f = Sidecar{}.bytes();
  f[600] = 1;
  write_bytes(path("s.spans"), f);
  expect_file_error([&] { TokenSpans t(path("s.spans"), 20); }, path("s.spans"),
                    {"header bytes 32..1023", "expected zero"});
  write_bytes(path("s.spans"), Bytes(f.begin(), f.begin() + 1000));
  expect_file_error([&] { TokenSpans t(path("s.spans"), 20); }, path("s.spans"),
                    {"too short for a spans sidecar", "1000 bytes"});
}

TEST_F(TokenSpansTest, RefusesCountsTheFileDoesNotHold) {
  Sidecar s;
  s.num_examples = 0;
  expect_refused(s, {"0 examples", "expected 1..20 examples"});
  s.num_examples = INT64_MAX;
  expect_refused(s, {"expected 1..20 examples"});
  s = {};
  s.num_spans = 5;  // one pair more than the file holds
  expect_refused(s, {"file is 1112 bytes", "5 spans", "1128 bytes", "truncated?"});
  s = {};
  s.num_spans = 3;  // one pair fewer: 16 bytes left over
  expect_refused(s, {"file is 1112 bytes", "3 spans", "1096 bytes"});
  Bytes f = Sidecar{}.bytes();
  write_bytes(path("s.spans"), Bytes(f.begin(), f.end() - 1));
  expect_file_error([&] { TokenSpans t(path("s.spans"), 20); }, path("s.spans"),
                    {"1111 bytes", "truncated?"});
}

TEST_F(TokenSpansTest, RefusesBadExampleStarts) {
  Sidecar s;
  s.starts = {1, 8, 15};
  expect_refused(s, {"example_start[0] is 1", "expected 0"});
  s.starts = {0, 8, 8};
  expect_refused(s, {"example_start[2] = 8 is not after example_start[1] = 8", "strictly"});
  s.starts = {0, 9, 8};
  expect_refused(s, {"example_start[2] = 8", "strictly increasing"});
  s.starts = {0, 8, 20};
  s.bounds = {2, 5};
  expect_refused(s, {"example_start[2] = 20", "expected < num_tokens 20"});
}

TEST_F(TokenSpansTest, RefusesBadSpans) {
  Sidecar s;
  s.bounds = {2, 2};
  expect_refused(s, {"span 0 [2, 2) is empty", "begin < end"});
  s.bounds = {2, 5, 4, 6};
  expect_refused(s, {"span 1 [4, 6) begins before the end 5", "non-overlapping"});
  s.bounds = {6, 7, 2, 5};
  expect_refused(s, {"span 1 [2, 5)", "sorted"});
  s.bounds = {0, 3};
  expect_refused(s, {"span 0 [0, 3) begins at the first token of example 0", "never a target"});
  s.bounds = {15, 17};
  expect_refused(s, {"span 0 [15, 17)", "first token of example 2"});
  s.bounds = {5, 10};
  expect_refused(s, {"span 0 [5, 10) crosses the end of example 0 [0, 8)", "inside one example"});
  s.bounds = {16, 21};
  expect_refused(s, {"span 0 [16, 21) runs past num_tokens 20"});
}

}  // namespace
}  // namespace llmcpu
