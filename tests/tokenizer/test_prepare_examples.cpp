// `prepare` on JSON records, the run as a whole: malformed records named by file:line (or array
// index) and field, --skip-bad's count, shards cut only between examples (val whole examples too),
// the same bytes on 1 and N threads, stale sidecars removed, a template that renders earlier turns
// differently refused, and the command line. The tiny tokenizer and a hand-written template.
#include <gtest/gtest.h>

#include <random>

#include "core/data/prepare.h"
#include "core/data/records.h"
#include "core/data/shard_writer.h"
#include "simd/error.h"
#include "tests/tokenizer/test_examples_util.h"

namespace llmcpu {
namespace {

using namespace llmcpu::testing;
using Json = nlohmann::ordered_json;

const char* const kGood =
    R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]})";

class PrepareExamples : public RecordPrepareTest {
 protected:
  // `count` chat records of 1..4 rounds with answers of random lengths (seeded).
  std::string many_records(int count) {
    std::mt19937 rng(7);
    std::vector<Json> records;
    for (int i = 0; i < count; ++i) {
      Json m = Json::array();
      for (int r = 0, rounds = 1 + int(rng() % 4); r < rounds; ++r) {
        std::string question = "q";  // appended: g++ 12 warns falsely on literal + string
        question.append(std::to_string(i)).append(".").append(std::to_string(r));
        m.push_back({{"role", "user"}, {"content", question}});
        m.push_back({{"role", "assistant"}, {"content", std::string(1 + rng() % 40, 'a' + r)}});
      }
      records.push_back({{"messages", m}});
    }
    return jsonl(records);
  }
};

TEST_F(PrepareExamples, MalformedRecordsNameFileLineAndField) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"{\"messages\": [", {"not valid JSON"}},
      {"[1, 2]", {"expected a JSON object, not an array"}},
      {"{\"text\": \"x\"}", {"messages: missing"}},
      {"{\"messages\": []}", {"messages: expected at least one message"}},
      {"{\"messages\": \"hi\"}", {"messages: expected a list of messages, not a string"}},
      {"{\"messages\": [{\"role\": \"user\"}]}", {"messages[0].content: missing"}},
      {"{\"messages\": [{\"role\": 3, \"content\": \"x\"}]}",
       {"messages[0].role: expected a string, not a number"}},
      {"{\"messages\": [{\"role\": \"user\", \"content\": 5}]}",
       {"messages[0].content: expected a string or a list of parts, not a number"}},
      {"{\"conversations\": [{\"from\": \"bot\", \"value\": \"x\"}]}",
       {"conversations[0].from: unknown role 'bot', expected human, user, gpt"}},
  };
  for (const auto& [line, words] : cases) {
    SCOPED_TRACE(line);
    const std::string file = input("bad.jsonl", std::string(kGood) + "\n\n" + line + "\n" + kGood);
    try {
      prepare_shards(*tok_, options("chat", {file}));
      ADD_FAILURE() << "no error";
    } catch (const RecordError& e) {
      EXPECT_EQ(e.where(), file + ":3");  // the line of the record, blank line 2 counted
      for (const std::string& w : words)
        EXPECT_NE(std::string(e.what()).find(file + ":3: " + w), std::string::npos) << e.what();
    }
  }
  // Alpaca and completion fields; an array's record by its index.
  const std::string arr = input("bad.json", R"([{"instruction": "a", "output": "b"},
    {"instruction": "a", "output": 7}])");
  try {
    prepare_shards(*tok_, options("instruction", {arr}));
    ADD_FAILURE() << "no error";
  } catch (const RecordError& e) {
    EXPECT_EQ(std::string(e.what()), arr + ": record [1]: output: expected a string, not a number");
  }
  const std::string c = input("c.jsonl", R"({"prompt": "a"})");
  EXPECT_THROW(
      {
        try {
          prepare_shards(*tok_, options("completion", {c}));
        } catch (const RecordError& e) {
          EXPECT_EQ(std::string(e.what()), c + ":1: completion: missing");
          throw;
        }
      },
      RecordError);
  // A syntax error in an array is the file's: FileError naming the file and the line.
  const std::string broken = input("broken.json", "[\n{\"text\": \"a\"},\n{\"text\": }\n]");
  EXPECT_THROW(prepare_shards(*tok_, options("text", {broken})), FileError);
}

TEST_F(PrepareExamples, SkipBadCountsAndKeepsTheRest) {
  const std::string file = input(
      "mix.jsonl", std::string(kGood) + "\n{oops\n" + kGood + "\n{\"messages\": []}\n" + kGood);
  PrepareOptions o = options("chat", {file});
  o.skip_bad = true;
  const PrepareResult r = prepare_shards(*tok_, o);
  EXPECT_EQ(r.examples, 3u);
  EXPECT_EQ(r.skipped, 2u);
  ASSERT_EQ(r.skip_reasons.size(), 2u);
  EXPECT_NE(r.skip_reasons[0].find(file + ":2: not valid JSON"), std::string::npos);
  EXPECT_NE(r.skip_reasons[1].find(file + ":4: messages: expected at least one"),
            std::string::npos);
  EXPECT_EQ(read_examples(r.train_files).size(), 3u);
}

TEST_F(PrepareExamples, TemplateThatRewritesEarlierTurnsIsRefused) {
  // The last message is rendered in capitals, so an earlier render is not a prefix of the whole.
  write_file(folder_ + "/tok/chat_template.jinja",
             "{% for m in messages %}{% if loop.last %}{{ m.content | upper }}{% else %}"
             "{{ m.content }}{% endif %}|{% endfor %}");
  const std::string file = input("a.jsonl", R"({"messages": [{"role": "user", "content": "hi"}, )"
                                            R"({"role": "assistant", "content": "yes"}, )"
                                            R"({"role": "user", "content": "ok"}]})");
  try {
    prepare_shards(*tok_, options("chat", {file}));
    ADD_FAILURE() << "no error";
  } catch (const RecordError& e) {
    EXPECT_EQ(e.field(), "messages[1]") << e.what();
    EXPECT_NE(std::string(e.what()).find("differently"), std::string::npos) << e.what();
  }
}

TEST_F(PrepareExamples, ShardsHoldWholeExamplesAndThreadsGiveTheSameBytes) {
  const std::string file = input("many.jsonl", many_records(120));
  PrepareOptions o = options("chat", {file});
  o.shard_tokens = 600;
  o.val_tokens = 500;
  o.threads = 1;
  o.out_dir = folder_ + "/one";
  const PrepareResult one = prepare_shards(*tok_, o);
  o.threads = 3;
  o.out_dir = folder_ + "/three";
  const PrepareResult three = prepare_shards(*tok_, o);
  ASSERT_GT(one.train_files.size(), 10u);
  ASSERT_EQ(one.train_files.size(), three.train_files.size());
  for (size_t i = 0; i < one.train_files.size(); ++i) {
    EXPECT_EQ(read_bytes(one.train_files[i]), read_bytes(three.train_files[i])) << i;
    EXPECT_EQ(read_bytes(spans_path(one.train_files[i])),
              read_bytes(spans_path(three.train_files[i])))
        << i;
  }
  // Val: the first whole examples up to 500 tokens, and no room for the next one.
  o.threads = 0;
  o.out_dir = folder_ + "/whole";
  o.shard_tokens = 1 << 20;
  o.val_tokens = 0;
  const PrepareResult whole = prepare_shards(*tok_, o);
  const std::vector<ShardExample> all = read_examples(whole.train_files);
  ASSERT_EQ(all.size(), 120u);
  const std::vector<ShardExample> val = read_examples(one.val_files);
  size_t val_tokens = 0;
  for (size_t i = 0; i < val.size(); ++i) {
    EXPECT_EQ(val[i], all[i]);
    val_tokens += val[i].ids.size();
  }
  EXPECT_LE(val_tokens, 500u);
  EXPECT_GT(val_tokens + all[val.size()].ids.size(), 500u);
  // Train: the rest in order, each shard whole examples of at most 600 tokens but the last
  // (which takes a tail shorter than half a shard).
  std::vector<ShardExample> train = read_examples(one.train_files);
  train.insert(train.begin(), val.begin(), val.end());
  EXPECT_EQ(train, all);
  for (size_t i = 0; i + 1 < one.train_files.size(); ++i) {
    EXPECT_LE(TokenShard(one.train_files[i]).size(), 600u) << i;
  }
}

TEST_F(PrepareExamples, AnExampleLongerThanAShardIsAShardOfItsOwn) {
  // Examples of 5, 12, 3, 3 and 3 tokens into shards of 4 with 2 val tokens: val takes the first
  // example whole (at least one), the 12-token example makes a shard of its own, and each 3 fits.
  ShardWriter w(folder_, "w", 4, 2, 2);
  std::vector<std::vector<int>> examples;
  for (int n : {5, 12, 3, 3, 3}) {
    examples.emplace_back();
    for (int i = 0; i < n; ++i) examples.back().push_back(int(examples.size()) * 10 + i);
    w.add_example(examples.back().data(), examples.back().size(), {{1, size_t(n)}});
  }
  w.finish();
  ASSERT_EQ(w.val_files().size(), 1u);
  const std::vector<ShardExample> val = read_examples(w.val_files());
  ASSERT_EQ(val.size(), 1u);
  EXPECT_EQ(val[0].ids, examples[0]);
  std::vector<size_t> sizes;
  for (const std::string& f : w.train_files()) sizes.push_back(TokenShard(f).size());
  EXPECT_EQ(sizes, (std::vector<size_t>{12, 3, 3, 3}));
  const std::vector<ShardExample> train = read_examples(w.train_files());
  ASSERT_EQ(train.size(), 4u);
  for (size_t i = 0; i < train.size(); ++i) {
    EXPECT_EQ(train[i].ids, examples[i + 1]);
    EXPECT_EQ(train[i].spans,
              (std::vector<std::pair<uint64_t, uint64_t>>{{1, examples[i + 1].size()}}));
  }
  std::vector<int> more = {1, 2};
  EXPECT_THROW(w.add(more.data(), more.size()), UsageError);  // a stream after examples
}

TEST_F(PrepareExamples, StaleSidecarsAreRemovedOrReported) {
  const std::string file = input("many.jsonl", many_records(30));
  PrepareOptions o = options("chat", {file});
  o.shard_tokens = 600;
  const PrepareResult chat = prepare_shards(*tok_, o);
  ASSERT_GT(chat.train_files.size(), 2u);
  // Plain text into the same shards' names: each shard it writes loses the old sidecar; the
  // shards it does not write are reported with theirs.
  PrepareOptions t;
  t.inputs = {input("doc.txt", "a few words of text")};
  t.out_dir = o.out_dir;
  t.val_tokens = 0;
  const PrepareResult text = prepare_shards(*tok_, t);
  ASSERT_EQ(text.train_files.size(), 1u);
  EXPECT_FALSE(fs::exists(spans_path(text.train_files[0])));
  EXPECT_NE(
      std::find(text.stale_files.begin(), text.stale_files.end(), spans_path(chat.train_files[1])),
      text.stale_files.end());
}

TEST_F(PrepareExamples, CommandLine) {
  const std::string file = input("c.jsonl", std::string(kGood) + "\n{\"messages\": 1}\n" + kGood);
  const std::string base = shell_quote(LLMCPU_BINARY) + " prepare --input " + shell_quote(file) +
                           " --out-dir " + shell_quote(folder_ + "/out") + " --tokenizer " +
                           shell_quote(folder_ + "/tok") + " --val-tokens 0 --format chat";
  Outcome r = run_shell(base + " 2>&1");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find(file + ":2: messages: expected a list of messages, not a number"),
            std::string::npos)
      << r.output;
  r = run_shell(base + " --skip-bad --threads 2 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("prepare: 2 examples"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("skipped 1 malformed records"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(file + ":2: messages"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(folder_ + "/out/data_train_000000.spans"));
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {" --format bogus", "--format 'bogus': expected chat, instruction, completion or text"},
           {" --train-on bogus", "--train-on 'bogus'"},
           {" --train-on completion", "--train-on completion does not apply to --format chat"},
           {" --threads 0", "--threads"},
           {" --split-on lines", "--split-on lines cuts plain text files"}}) {
    r = run_shell(base + args + " 2>&1");
    EXPECT_EQ(r.status, 2) << args << ": " << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << ": " << r.output;
  }
}

}  // namespace
}  // namespace llmcpu
