// Helpers of the tests of `prepare` on JSON records: shards and their spans sidecars read back as
// examples (ids and trained spans relative to each example), JSON Lines written from values, and a
// test fixture of the tiny tokenizer with a hand-written chat template.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/data/prepare.h"
#include "core/io/token_shard.h"
#include "core/io/token_spans.h"
#include "tests/tokenizer/test_util.h"

namespace llmcpu::testing {

struct ShardExample {
  std::vector<int> ids;
  std::vector<std::pair<uint64_t, uint64_t>> spans;  // relative to the example's first token
  bool operator==(const ShardExample&) const = default;
};

// The examples of the shards `files` in order; each shard must have its sidecar, whose examples
// must cover it from token 0 (so no example crosses a shard).
inline std::vector<ShardExample> read_examples(const std::vector<std::string>& files) {
  std::vector<ShardExample> out;
  for (const std::string& f : files) {
    const TokenShard shard(f);
    EXPECT_TRUE(std::filesystem::exists(spans_path(f))) << f << " has no sidecar";
    if (!std::filesystem::exists(spans_path(f))) continue;
    const TokenSpans s(spans_path(f), shard.size());
    EXPECT_EQ(s.example_start(0), 0u) << f;
    size_t k = 0;
    for (size_t e = 0; e < s.num_examples(); ++e) {
      ShardExample x;
      const uint64_t b = s.example_start(e), end = s.example_end(e);
      for (uint64_t j = b; j < end; ++j) x.ids.push_back(static_cast<int>(shard.at(j)));
      for (; k < s.num_spans() && s.span(k).begin < end; ++k) {
        x.spans.push_back({s.span(k).begin - b, s.span(k).end - b});
      }
      out.push_back(std::move(x));
    }
  }
  return out;
}

inline std::string jsonl(const std::vector<nlohmann::ordered_json>& records) {
  std::string text;
  for (const auto& r : records) text += r.dump() + "\n";
  return text;
}

// [role]content| per message, then [assistant] for a generation prompt.
inline constexpr const char* kBracketTemplate =
    "{% for m in messages %}[{{ m.role }}]{{ m.content }}|{% endfor %}"
    "{% if add_generation_prompt %}[assistant]{% endif %}";

// The tiny tokenizer's folder with kBracketTemplate as its chat_template.jinja; options() of a run
// on JSON records with no val split.
class RecordPrepareTest : public TinyPrepareTest {
 protected:
  void SetUp() override {
    TinyPrepareTest::SetUp();
    write_file(folder_ + "/tok/chat_template.jinja", kBracketTemplate);
  }
  PrepareOptions options(const std::string& format, const std::vector<std::string>& inputs) {
    PrepareOptions o;
    o.inputs = inputs;
    o.out_dir = folder_ + "/out";
    o.format = format;
    o.tokenizer_dir = folder_ + "/tok";
    o.val_tokens = 0;
    return o;
  }
};

}  // namespace llmcpu::testing
