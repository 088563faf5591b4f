// `prepare --format chat|instruction|completion|text` on JSON records with the tiny tokenizer
// (test_util.h), whose ids are the bytes of texts without "th" or double spaces: the expected ids
// and trained spans are then character positions in a rendering worked out here by hand from the
// template's definition, not by the code under test. Every format and column layout (Hugging Face
// messages, ShareGPT, Alpaca, prompt/completion as strings and as messages, text), JSON Lines and
// JSON arrays, --train-on, the default ChatML template, and a span boundary inside a token.
#include <gtest/gtest.h>

#include "core/data/prepare.h"
#include "simd/error.h"
#include "tests/tokenizer/test_examples_util.h"

namespace llmcpu {
namespace {

using namespace llmcpu::testing;
using Json = nlohmann::ordered_json;

struct Turn {
  std::string role, content;
};

// The example kBracketTemplate makes of `turns`: the bytes as ids, each assistant turn's content
// and '|' trained.
ShardExample by_hand(const std::vector<Turn>& turns) {
  ShardExample e;
  std::string text;
  for (const Turn& t : turns) {
    text += "[" + t.role + "]";
    const size_t begin = text.size();
    text += t.content + "|";
    if (t.role == "assistant") e.spans.push_back({begin, text.size()});
  }
  for (unsigned char c : text) e.ids.push_back(c);
  return e;
}

Json messages_of(const std::vector<Turn>& turns) {
  Json m = Json::array();
  for (const Turn& t : turns) m.push_back({{"role", t.role}, {"content", t.content}});
  return m;
}

const std::vector<Turn> kFirst = {{"system", "Be brief."},
                                  {"user", "Hi"},
                                  {"assistant", "Hello!"},
                                  {"user", "Bye"},
                                  {"assistant", "Ok, bye."}};
const std::vector<Turn> kSecond = {{"user", "2+2?"}, {"assistant", "4"}};

class PrepareRecords : public RecordPrepareTest {
 protected:
  std::vector<ShardExample> run(const PrepareOptions& o) {
    last_ = prepare_shards(*tok_, o);
    std::vector<std::string> files = last_.val_files;
    files.insert(files.end(), last_.train_files.begin(), last_.train_files.end());
    return read_examples(files);
  }
  PrepareResult last_;
};

TEST_F(PrepareRecords, ChatMessagesShareGptAndJsonArrayGiveTheHandMadeExamples) {
  const std::vector<ShardExample> want = {by_hand(kFirst), by_hand(kSecond)};
  const Json hf = {{"messages", messages_of(kFirst)}}, hf2 = {{"messages", messages_of(kSecond)}};
  // Blank lines are skipped; the last line needs no newline.
  EXPECT_EQ(run(options("chat", {input("a.jsonl", hf.dump() + "\n\n  \n" + hf2.dump())})), want);
  EXPECT_EQ(last_.examples, 2u);
  EXPECT_TRUE(last_.notes.empty());
  Json share = Json::array();
  for (const Turn& t : kFirst) {
    share.push_back({{"from", t.role == "user"        ? "human"
                              : t.role == "assistant" ? "gpt"
                                                      : t.role},
                     {"value", t.content}});
  }
  const Json second = Json::parse(R"({"conversations": [{"from": "user", "value": "2+2?"},
                                                        {"from": "model", "value": "4"}]})");
  EXPECT_EQ(run(options("chat", {input("s.jsonl", jsonl({{{"conversations", share}}, second}))})),
            want);
  EXPECT_EQ(run(options("chat", {input("a.json", "  \n" + Json::array({hf, hf2}).dump(2))})), want);
}

TEST_F(PrepareRecords, InstructionIsSystemUserAndAssistant) {
  const Json records = Json::array(
      {{{"instruction", "Add."}, {"input", "2 and 2"}, {"output", "4"}, {"system", "Be exact."}},
       {{"instruction", "Say hi."}, {"input", ""}, {"output", "Hi"}},
       {{"instruction", "Say no."}, {"output", "No"}}});
  EXPECT_EQ(run(options("instruction", {input("i.json", records.dump())})),
            (std::vector<ShardExample>{
                by_hand({{"system", "Be exact."}, {"user", "Add.\n\n2 and 2"}, {"assistant", "4"}}),
                by_hand({{"user", "Say hi."}, {"assistant", "Hi"}}),
                by_hand({{"user", "Say no."}, {"assistant", "No"}})}));
}

TEST_F(PrepareRecords, CompletionTrainsOnTheCompletion) {
  const Json plain = {{"prompt", "Q: 2+2?\nA:"}, {"completion", " 4"}};
  const Json chat = {{"prompt", messages_of({{"user", "2+2?"}})},
                     {"completion", messages_of({{"assistant", "4"}})}};
  const std::vector<ShardExample> got =
      run(options("completion", {input("c.jsonl", jsonl({plain, chat}))}));
  ASSERT_EQ(got.size(), 2u);
  // [<|endoftext|>] + prompt + completion, the completion's 2 tokens trained.
  ShardExample want{{TinyTokenizer::kEot}, {}};
  for (unsigned char c : std::string("Q: 2+2?\nA: 4")) want.ids.push_back(c);
  want.spans = {{want.ids.size() - 2, want.ids.size()}};
  EXPECT_EQ(got[0], want);
  // Messages: everything after the prompt's rendering with its generation prompt.
  EXPECT_EQ(got[1], by_hand({{"user", "2+2?"}, {"assistant", "4"}}));
}

TEST_F(PrepareRecords, TextRecordsAreTheDocumentsOfTextFiles) {
  const std::vector<std::string> docs = {"the the then\n", "   x\n\nthe end", "the"};
  std::vector<Json> records;
  for (const std::string& d : docs) records.push_back({{"text", d}});
  const std::vector<ShardExample> got = run(options("text", {input("t.jsonl", jsonl(records))}));
  std::vector<uint16_t> stream;
  for (const ShardExample& e : got) {
    ASSERT_EQ(e.spans, (std::vector<std::pair<uint64_t, uint64_t>>{{1, e.ids.size()}}));
    stream.insert(stream.end(), e.ids.begin(), e.ids.end());
  }
  EXPECT_EQ(stream, expected(docs));  // [eot, doc 1, eot, doc 2, ...] as text files give
  PrepareOptions mixed = options("text", {path("t.jsonl"), input("d.txt", "x")});
  EXPECT_THROW(prepare_shards(*tok_, mixed), UsageError);
}

TEST_F(PrepareRecords, TrainOnAllAndWrongCombinations) {
  PrepareOptions o =
      options("chat", {input("a.jsonl", jsonl({{{"messages", messages_of(kSecond)}}}))});
  o.train_on = "all";
  std::vector<ShardExample> got = run(o);
  ShardExample want = by_hand(kSecond);
  want.spans = {{1, want.ids.size()}};
  EXPECT_EQ(got, std::vector<ShardExample>{want});
  for (const auto& [format, train_on] :
       std::vector<std::pair<std::string, std::string>>{{"chat", "completion"},
                                                        {"completion", "assistant"},
                                                        {"text", "assistant"},
                                                        {"instruction", "bogus"}}) {
    o.format = format;
    o.train_on = train_on;
    EXPECT_THROW(prepare_shards(*tok_, o), UsageError) << format << " " << train_on;
  }
}

TEST_F(PrepareRecords, FolderWithoutTemplateUsesChatMlAndSaysSo) {
  fs::remove(folder_ + "/tok/chat_template.jinja");
  const std::vector<ShardExample> got =
      run(options("chat", {input("a.jsonl", jsonl({{{"messages", messages_of(kSecond)}}}))}));
  ASSERT_EQ(last_.notes.size(), 1u);
  EXPECT_NE(last_.notes[0].find("built-in ChatML template"), std::string::npos) << last_.notes[0];
  const std::string text = "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n";
  ShardExample want;
  for (unsigned char c : text) want.ids.push_back(c);  // GPT-2's files: special tokens as text
  const size_t begin = text.rfind("4<|im_end|>");
  want.spans = {{begin, text.size()}};
  EXPECT_EQ(got, std::vector<ShardExample>{want});
}

TEST_F(PrepareRecords, SpanStartInsideATokenTrainsThatToken) {
  // The generation prompt ends in 't' and the answer starts "he": the whole text holds the token
  // "the" (257) across the boundary, so encoding the pieces apart differs from the whole.
  write_file(folder_ + "/tok/chat_template.jinja",
             "{% for m in messages %}{% if m.role == 'assistant' %}{{ m.content }}|{% else %}"
             "{{ m.content }}:t{% endif %}{% endfor %}{% if add_generation_prompt %}{% endif %}");
  const std::vector<ShardExample> got = run(options(
      "chat", {input("a.jsonl",
                     jsonl({{{"messages", messages_of({{"user", "x"}, {"assistant", "he"}})}}}))}));
  ASSERT_EQ(got.size(), 1u);
  const std::vector<int> ids = {'x', ':', TinyTokenizer::kThe, '|'};
  EXPECT_EQ(got[0].ids, ids);
  // By the rule (example_tokens.h): the straddling "the" goes with the span.
  EXPECT_EQ(got[0].spans, (std::vector<std::pair<uint64_t, uint64_t>>{{2, 4}}));
  EXPECT_EQ(last_.approximate, 1u);
}

}  // namespace
}  // namespace llmcpu
