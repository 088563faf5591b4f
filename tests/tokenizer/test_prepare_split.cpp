// `llmcpu prepare --split-on` and the last train shard: documents cut as llm.c's tinyshakespeare
// preparation cuts them (checked against that rule run with the npm package gpt-3-encoder), every
// separator rule built here from its documented definition, and no train shard left too short to
// train on.
#include <gtest/gtest.h>

#include "core/data/document_split.h"
#include "core/data/prepare.h"
#include "core/data/shard_writer.h"
#include "core/io/token_shard.h"
#include "simd/error.h"
#include "tests/tokenizer/test_util.h"

namespace llmcpu {
namespace {

using namespace llmcpu::testing;

std::vector<uint16_t> read_shard(const std::string& path) {
  const TokenShard s(path);
  EXPECT_EQ(s.token_bytes(), 2) << path;  // GPT-2-sized vocabularies: uint16 ids
  std::vector<uint16_t> ids(s.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<uint16_t>(s.at(i));
  return ids;
}

// The stream of all shards a run wrote, val first.
std::vector<uint16_t> read_all(const PrepareResult& r) {
  std::vector<uint16_t> all;
  for (const auto* files : {&r.val_files, &r.train_files}) {
    for (const std::string& f : *files) {
      const std::vector<uint16_t> s = read_shard(f);
      all.insert(all.end(), s.begin(), s.end());
    }
  }
  return all;
}

// The documented rule for the train shards' sizes: full shards, except that a tail shorter than
// half a shard goes into the shard before it (and stays alone when there is none).
std::vector<size_t> expected_sizes(size_t total, size_t shard) {
  std::vector<size_t> sizes(total / shard, shard);
  const size_t tail = total % shard;
  if (tail == 0) return sizes;
  if (!sizes.empty() && tail < shard / 2) {
    sizes.back() += tail;
  } else {
    sizes.push_back(tail);
  }
  return sizes;
}

// A fresh folder per test (TempDirTest's), removed afterwards.
class ShardWriterTail : public TempDirTest {};

TEST_F(ShardWriterTail, NoTrainShardShorterThanHalfAShardUnlessAlone) {
  const std::string dir = dir_.string();
  for (size_t shard : {1u, 2u, 7u, 10u}) {
    for (size_t total = 1; total <= 5 * shard + 3; ++total) {
      SCOPED_TRACE("shard " + std::to_string(shard) + ", " + std::to_string(total) + " tokens");
      const std::string out = dir + "/" + std::to_string(shard) + "_" + std::to_string(total);
      fs::create_directories(out);
      std::vector<int> ids(total);
      for (size_t i = 0; i < total; ++i) ids[i] = static_cast<int>(i * 7 % 1000);
      ShardWriter w(out, "d", static_cast<int64_t>(shard), /*val_tokens=*/0, /*token_bytes=*/2);
      // In uneven pieces, as documents arrive.
      for (size_t at = 0; at < total;) {
        const size_t n = std::min(total - at, 1 + at % 4);
        w.add(ids.data() + at, n);
        at += n;
      }
      w.finish();
      std::vector<size_t> sizes;
      std::vector<int> back;
      for (const std::string& f : w.train_files()) {
        const std::vector<uint16_t> s = read_shard(f);
        sizes.push_back(s.size());
        back.insert(back.end(), s.begin(), s.end());
      }
      EXPECT_EQ(sizes, expected_sizes(total, shard));
      EXPECT_EQ(back, ids);
    }
  }
}

class PrepareSplit : public TinyPrepareTest {
 protected:
  PrepareResult run(const std::vector<std::string>& inputs, const std::string& split) {
    PrepareOptions o;
    o.inputs = inputs;
    o.out_dir = folder_ + "/out_" + std::to_string(++runs_);
    o.split_on = split;
    o.val_tokens = 5;
    o.shard_tokens = 8;
    return prepare_shards(*tok_, o);
  }
  int runs_ = 0;
};

TEST_F(PrepareSplit, EachRuleCutsAfterItsSeparator) {
  const std::string a = "the then\n\nthe the\n\n\nx  y\nthe\n\n", b = "then x\nthe";
  const std::vector<std::string> ins = {input("a.txt", a), input("b.txt", b)};
  // Written out from the rule: a document ends just after its separator (leftmost, not
  // overlapping); a text ending in a separator ends with an empty document.
  EXPECT_EQ(read_all(run(ins, "file")), expected({a, b}));
  EXPECT_EQ(read_all(run(ins, "blank-lines")),
            expected({"the then\n\n", "the the\n\n", "\nx  y\nthe\n\n", "", "then x\nthe"}));
  EXPECT_EQ(read_all(run(ins, "BLANK_LINES")), read_all(run(ins, "blank-lines")));
  EXPECT_EQ(read_all(run(ins, "lines")),
            expected({"the then\n", "\n", "the the\n", "\n", "\n", "x  y\n", "the\n", "\n", "",
                      "then x\n", "the"}));
  EXPECT_EQ(read_all(run(ins, "regex:th[a-z]+ ")),
            expected({"the ", "then\n\nthe ", "the\n\n\nx  y\nthe\n\n", "then ", "x\nthe"}));
}

TEST_F(PrepareSplit, BadRulesAreRefusedBeforeAnythingIsWritten) {
  const std::vector<std::string> ins = {input("a.txt", "the then\n\nthe")};
  for (const auto& [split, message] : std::vector<std::pair<std::string, std::string>>{
           {"paragraphs", "--split-on paragraphs: expected file, blank-lines, lines or regex:PATTERN"},
           {"regex:", "needs a pattern after 'regex:'"},
           {"regex:(th", "missing closing parenthesis"},
           {"regex:\\n*", "can match the empty string"},
           {"regex:x|", "can match the empty string"},
       }) {
    SCOPED_TRACE(split);
    const std::string out = folder_ + "/out_" + std::to_string(runs_ + 1);
    try {
      run(ins, split);
      ADD_FAILURE() << "no error";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(out));
  }
}

// llm.c's tinyshakespeare shards, made by that script's rule with the reference encoder, and by
// `llmcpu prepare --split-on blank-lines --val-tokens N` with GPT-2's tokenizer: the same ids, val
// and train split at the same place.
// A fresh folder per test (TempDirTest's), removed afterwards.
class PrepareLlmcParity : public TempDirTest {};

TEST_F(PrepareLlmcParity, TinyshakespeareShapedTextGivesLlmcTokens) {
  const Reference ref = find_reference();
  ASSERT_TRUE(ref.missing.empty()) << ref.missing;
  const std::string dir = dir_.string();
  // Speakers' sections separated by blank lines, one run of three newlines, no final blank line.
  const char* speakers[] = {"First Citizen", "All", "MENENIUS", "Second Citizen"};
  std::string text;
  for (int i = 0; i < 60; ++i) {
    text += std::string(speakers[i % 4]) + ":\n";
    for (int l = 0; l <= i % 3; ++l) {
      text += "Before we proceed any further, hear me speak " + std::to_string(i * 3 + l) +
              " times; 'tis   done.\n";
    }
    text += i == 17 ? "\n\n" : i == 59 ? "" : "\n";
  }
  write_file(dir + "/tiny.txt", text);
  const Outcome js = run_shell(shell_quote(ref.node) + " " +
                               shell_quote(LLMCPU_TOKENIZER_TEST_DIR "/llmc_split_reference.js") +
                               " " + shell_quote(ref.module_dir) + " " + shell_quote(dir + "/tiny.txt"));
  ASSERT_EQ(js.status, 0) << js.output;
  std::vector<uint16_t> want;
  for (size_t i = 0; i < js.output.size();) {
    if (js.output[i] < '0' || js.output[i] > '9') {
      ++i;
      continue;
    }
    size_t end = i;
    int v = 0;
    while (end < js.output.size() && js.output[end] >= '0' && js.output[end] <= '9')
      v = v * 10 + (js.output[end++] - '0');
    want.push_back(static_cast<uint16_t>(v));
    i = end;
  }
  ASSERT_GT(want.size(), 1000u);
  EXPECT_EQ(std::count(want.begin(), want.end(), 50256), 60);  // one <|endoftext|> per section

  const std::string out = dir + "/out";
  const Outcome r = run_shell(shell_quote(LLMCPU_BINARY) + " prepare --split-on blank-lines --val-tokens 256 -i " +
                              shell_quote(dir + "/tiny.txt") + " -o " + shell_quote(out) + " --name tiny_shakespeare 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::vector<uint16_t> val = read_shard(out + "/tiny_shakespeare_val_000000.bin");
  const std::vector<uint16_t> train = read_shard(out + "/tiny_shakespeare_train_000000.bin");
  EXPECT_FALSE(fs::exists(out + "/tiny_shakespeare_train_000001.bin"));
  EXPECT_EQ(val, std::vector<uint16_t>(want.begin(), want.begin() + 256));
  EXPECT_EQ(train, std::vector<uint16_t>(want.begin() + 256, want.end()));
}

}  // namespace
}  // namespace llmcpu
