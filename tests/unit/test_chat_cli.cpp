// `llmcpu chat` through the program, on a Llama-family folder made here (random weights, a
// character-level tokenizer.json of printable ASCII and newline with <s>, </s>, <|im_start|> and
// <|im_end|> as special tokens): the prompt it renders against ChatML written out by hand, the
// reply against `llmcpu sample --temperature 0` of that prompt, a second turn with the cache kept
// against a fresh process given the whole history, /reset, exit and end of input, --system, the
// end tokens (generation_config.json's, the template's end of turn), a full context, malformed
// input lines and missing files; and once under tmux as a person types. The PyTorch reference of
// the replies is tests/cli/check_chat_reference.py.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/io/hf_llama.h"
#include "tests/common/process.h"
#include "tests/common/temp_files.h"
#include "tests/unit/llama_files.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using testing::run_shell;
using testing::shell_quote;

// The tokenizer's text tokens: newline, then the printable ASCII characters; then the specials.
std::vector<unsigned char> text_bytes() {
  std::vector<unsigned char> bytes = {'\n'};
  for (int b = 32; b < 127; ++b) bytes.push_back(static_cast<unsigned char>(b));
  return bytes;
}
const std::vector<std::string> kSpecials = {"<s>", "</s>", "<|im_start|>", "<|im_end|>"};
constexpr int kBos = 96, kEos = 97, kImEnd = 99, kV = 100;

// The id of a text character.
int id_of(char c) { return c == '\n' ? 0 : 1 + (static_cast<unsigned char>(c) - 32); }

// ChatML, as transformers' default template writes a conversation (role, content) with the
// generation prompt.
std::string chatml(const std::vector<std::pair<std::string, std::string>>& messages) {
  std::string s;
  for (const auto& [role, content] : messages)
    s += "<|im_start|>" + role + "\n" + content + "<|im_end|>\n";
  return s + "<|im_start|>assistant\n";
}

// Tokens of a text of this tokenizer: one per character, one per special token.
int count_tokens(const std::string& text) {
  int n = 0;
  for (size_t i = 0; i < text.size(); ++n) {
    size_t step = 1;
    for (const std::string& s : kSpecials)
      if (text.compare(i, s.size(), s) == 0) step = s.size();
    i += step;
  }
  return n;
}

struct ChatRun {
  int status = -1;
  std::vector<Json> replies;  // the output lines
  std::string out, err;
};

class ChatCli : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    model_ = path("hf");
    const ModelConfig c = testing::write_llama_preset(path("chat.toml"), kV, 2, 256);
    const std::vector<float> w = testing::random_llama_weights(c, 11);
    save_hf_llama(model_, c, w.data(), TensorDtype::kF32,
                  {{"bos_token_id", kBos}, {"eos_token_id", kEos}});
    testing::write_byte_level_tokenizer(model_, text_bytes(), kSpecials);
  }

  // `llmcpu chat --model hf FLAGS` (greedy, one thread) with `lines` as standard input.
 public:
  ChatRun chat(const std::string& flags, const std::vector<std::string>& lines) const {
    std::ofstream in(path("in.jsonl"), std::ios::trunc);
    for (const std::string& l : lines) in << l << "\n";
    in.close();
    const testing::Outcome o =
        run_shell("timeout 120 " + std::string(LLMCPU_BINARY) + " chat --model " +
                  shell_quote(model_) + " --temperature 0 --threads 1 " + flags + " < " +
                  shell_quote(path("in.jsonl")) + " 2> " + shell_quote(path("err.txt")));
    ChatRun r{o.status, {}, o.output, read(path("err.txt"))};
    std::istringstream out(o.output);
    for (std::string line; std::getline(out, line);) {
      Json j = Json::parse(line, nullptr, false);
      EXPECT_FALSE(j.is_discarded()) << "not JSON: " << line;
      r.replies.push_back(j);
    }
    return r;
  }
  using TempDirTest::path;
  static std::string read(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }
  static std::string user(const std::string& text) {
    return Json{{"role", "user"}, {"content", text}}.dump();
  }

 protected:
  std::string model_;
};

// chat's reply (with `flags`) to a question, against `llmcpu sample --temperature 0 FLAGS` of the
// prompt it rendered; returns the reply.
Json expect_as_sample(const ChatCli& t, const std::string& flags) {
  // The template of the folder's tokens: BOS, then ChatML.
  std::ofstream(t.path("bos_chatml.jinja"))
      << "{{ bos_token }}{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' "
         "+ message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt "
         "%}{{ '<|im_start|>assistant\\n' }}{% endif %}";
  const ChatRun r = t.chat("--chat-template " + shell_quote(t.path("bos_chatml.jinja")) +
                               " --system 'Be brief.' --max-tokens 12 --show-prompt " + flags,
                           {t.user("Hello there, who are you?")});
  EXPECT_EQ(r.status, 0) << r.err;
  if (r.replies.size() != 1) {
    ADD_FAILURE() << r.out << r.err;
    return {};
  }
  const Json& reply = r.replies[0];
  const std::string text = chatml({{"system", "Be brief."}, {"user", "Hello there, who are you?"}});
  EXPECT_EQ(reply["prompt"], "<s>" + text);
  EXPECT_EQ(reply["role"], "assistant");
  EXPECT_NE(r.err.find("chat: replies end at </s> (97), <|im_end|> (99)"), std::string::npos)
      << r.err;
  // sample's context is BOS (the tokenizer adds it) and the prompt: the same ids.
  const testing::Outcome s =
      run_shell("timeout 120 " + std::string(LLMCPU_BINARY) + " sample --model " +
                shell_quote(t.path("hf")) + " --temperature 0 --tokens 12 --threads 1 --prompt " +
                shell_quote(text) + " " + flags + " 2>/dev/null");
  EXPECT_EQ(s.status, 0) << s.output;
  EXPECT_EQ(s.output.compare(0, text.size(), text), 0) << s.output;
  const std::string sampled = s.output.substr(std::min(text.size(), s.output.size()));
  const std::string content = reply["content"];
  // sample stops at </s> only and writes <|im_end|> as its text; chat stops at both.
  EXPECT_EQ(sampled.compare(0, content.size(), content), 0) << sampled << "\n" << content;
  if (reply["stop"] == "length") {
    EXPECT_EQ(reply["tokens"], 12);
    EXPECT_EQ(sampled, content);
  } else {
    EXPECT_EQ(reply["stop"], "eos");
    EXPECT_EQ(reply["tokens"], count_tokens(content));
    const std::string rest = sampled.substr(std::min(content.size(), sampled.size()));
    EXPECT_TRUE(rest.empty() || rest.rfind("<|im_end|>", 0) == 0) << rest;
  }
  return reply;
}

TEST_F(ChatCli, RendersChatMlAndRepliesAsSampleDoesOnTheSamePrompt) {
  const Json base = expect_as_sample(*this, "");
  // With a LoRA adapter trained at a high rate (so that it changes what the model says).
  testing::write_random_shard(path("train.bin"), 3000, kV, 9);
  const testing::Outcome trained = testing::run_llmcpu(
      "train --model " + shell_quote(model_) + " --lora 4 --lora-alpha 8 --train-data " +
      shell_quote(path("train.bin")) + " -b 2 -t 13 --lr 1e-2 --threads 1 --steps 20 --save " +
      shell_quote(path("adapter")));
  ASSERT_EQ(trained.status, 0) << trained.output;
  const Json adapted = expect_as_sample(*this, "--adapter " + shell_quote(path("adapter")));
  EXPECT_NE(adapted["content"], base["content"]);
}

// The second turn of a conversation against the same turn of a process given the whole history
// at once; `flags` pick the template.
void expect_second_turn_as_fresh(const ChatCli& t, const std::string& flags,
                                 const std::function<std::string(const std::string&)>& render) {
  const std::string u1 = "Tell me a story.", u2 = "And another one, please";
  const ChatRun kept = t.chat("--max-tokens 10 " + flags, {t.user(u1), t.user(u2)});
  ASSERT_EQ(kept.status, 0) << kept.err;
  ASSERT_EQ(kept.replies.size(), 2u) << kept.out;
  const std::string a1 = kept.replies[0]["content"];
  // The whole conversation at once, to a process whose cache holds nothing of it.
  const Json history = {{"messages",
                         {{{"role", "user"}, {"content", u1}},
                          {{"role", "assistant"}, {"content", a1}},
                          {{"role", "user"}, {"content", u2}}}}};
  const ChatRun fresh = t.chat("--max-tokens 10 --show-prompt " + flags, {history.dump()});
  ASSERT_EQ(fresh.status, 0) << fresh.err;
  ASSERT_EQ(fresh.replies.size(), 1u) << fresh.out;
  Json second = fresh.replies[0];
  EXPECT_EQ(second["prompt"], render(a1));
  second.erase("prompt");
  EXPECT_EQ(second, kept.replies[1]);
}

TEST_F(ChatCli, SecondTurnWithTheCacheKeptEqualsAFreshProcessGivenTheHistory) {
  // ChatML: the second prompt extends the first one and its reply as they were run.
  expect_second_turn_as_fresh(*this, "", [](const std::string& a1) {
    return chatml(
        {{"user", "Tell me a story."}, {"assistant", a1}, {"user", "And another one, please"}});
  });
  // A template that writes a past reply otherwise than it was generated (in brackets): the cache
  // goes back to the common prefix.
  std::ofstream(path("brackets.jinja"))
      << "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' }}{% if m['role'] == "
         "'assistant' %}{{ '[' + m['content'] + ']' }}{% else %}{{ m['content'] }}{% endif %}{{ "
         "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ "
         "'<|im_start|>assistant\\n' }}{% endif %}";
  expect_second_turn_as_fresh(*this, "--chat-template " + shell_quote(path("brackets.jinja")),
                              [](const std::string& a1) {
                                return chatml({{"user", "Tell me a story."},
                                               {"assistant", "[" + a1 + "]"},
                                               {"user", "And another one, please"}});
                              });
}

TEST_F(ChatCli, ResetKeepsTheSystemMessageAndExitOrEndOfInputQuit) {
  const std::string sys = Json{{"role", "system"}, {"content", "You are terse."}}.dump();
  const ChatRun alone = chat("--max-tokens 8 --system 'You are terse.'", {user("Second")});
  ASSERT_EQ(alone.replies.size(), 1u) << alone.err;
  // --system, a turn, /reset, the same question: as a conversation of that question alone.
  const ChatRun reset = chat("--max-tokens 8 --system 'You are terse.' --show-prompt",
                             {user("First"), R"({"command": "reset"})", user("Second"),
                              R"({"command": "exit"})", user("never answered")});
  ASSERT_EQ(reset.status, 0) << reset.err;
  ASSERT_EQ(reset.replies.size(), 2u) << reset.out;
  EXPECT_EQ(reset.replies[1]["prompt"], chatml({{"system", "You are terse."}, {"user", "Second"}}));
  EXPECT_EQ(reset.replies[1]["content"], alone.replies[0]["content"]);
  // A system message given as history is the same as --system; end of input ends the program.
  const ChatRun history = chat("--max-tokens 8", {sys, user("Second")});
  ASSERT_EQ(history.status, 0) << history.err;
  ASSERT_EQ(history.replies.size(), 1u);
  EXPECT_EQ(history.replies[0], alone.replies[0]);
  const ChatRun empty = chat("", {});
  EXPECT_EQ(empty.status, 0) << empty.err;
  EXPECT_TRUE(empty.out.empty()) << empty.out;
}

TEST_F(ChatCli, AFolderWithoutTemplateGetsChatMlAndSaysSoOnce) {
  const ChatRun r = chat("--max-tokens 4 --show-prompt", {user("Hi"), user("Again")});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(r.replies.size(), 2u) << r.out;
  EXPECT_EQ(r.replies[0]["prompt"], chatml({{"user", "Hi"}}));
  const std::string note = "has no chat template";
  const size_t at = r.err.find(note);
  EXPECT_NE(at, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(note, at + 1), std::string::npos) << r.err;
  // The ChatML end of turn is <|im_end|>, a special token of this tokenizer.
  EXPECT_NE(r.err.find("replies end at </s> (97), <|im_end|> (99)"), std::string::npos) << r.err;
}

TEST_F(ChatCli, GenerationConfigEosTokensEndTheReply) {
  const ChatRun first = chat("--max-tokens 12", {user("Count to ten")});
  ASSERT_EQ(first.replies.size(), 1u) << first.err;
  const std::string content = first.replies[0]["content"];
  // The first character that does not appear before it, past the first: made an end token.
  size_t k = 1;
  while (k < content.size() && content.find(content[k]) < k) ++k;
  ASSERT_LT(k, content.size()) << "the reply repeats one character: " << content;
  std::ofstream(path("hf/generation_config.json"))
      << Json{{"bos_token_id", kBos}, {"eos_token_id", {kEos, id_of(content[k])}}}.dump();
  const ChatRun cut = chat("--max-tokens 12", {user("Count to ten")});
  ASSERT_EQ(cut.status, 0) << cut.err;
  ASSERT_EQ(cut.replies.size(), 1u);
  EXPECT_EQ(cut.replies[0]["content"], content.substr(0, k));
  EXPECT_EQ(cut.replies[0]["tokens"], int(k));
  EXPECT_EQ(cut.replies[0]["stop"], "eos");
  // A single number is read too; anything else is refused naming the file.
  std::ofstream(path("hf/generation_config.json")) << Json{{"eos_token_id", "</s>"}}.dump();
  const ChatRun bad = chat("", {user("Hi")});
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find(path("hf/generation_config.json") + ": eos_token_id holds \"</s>\""),
            std::string::npos)
      << bad.err;
}

TEST_F(ChatCli, AFullContextEndsTheReplyAndALongerConversationIsNotRun) {
  const std::string prompt = chatml({{"user", "Hi"}});
  const int P = count_tokens(prompt);  // 21
  const int context = P + 4;
  const ChatRun r = chat("--max-tokens 100 --context " + std::to_string(context),
                         {user("Hi"), user("This question alone is longer than the context")});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(r.replies.size(), 2u) << r.out;
  // Positions P .. context-1 hold the first reply's tokens but the last, which is never run.
  ASSERT_EQ(r.replies[0]["stop"], "context") << r.out;
  EXPECT_EQ(r.replies[0]["tokens"], context - P + 1);
  EXPECT_EQ(r.replies[1],
            (Json{{"role", "assistant"}, {"content", ""}, {"tokens", 0}, {"stop", "context"}}));
  const ChatRun over = chat("--context 65536", {user("Hi")});
  EXPECT_EQ(over.status, 2);
  EXPECT_NE(over.err.find("--context 65536 is past the model's context of 256"), std::string::npos)
      << over.err;
}

TEST_F(ChatCli, MalformedLinesStopWithTheLineNumberAndWhatWasExpected) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "not valid JSON"},
      {"[1, 2]", "a JSON array, not an object"},
      {R"({"role": "robot", "content": "x"})", "\"role\" is \"robot\""},
      {R"({"content": 5})", "no \"content\" string"},
      {R"({"contnet": "x"})", "unknown key \"contnet\""},
      {R"({"command": "quit"})", "\"command\" is \"quit\""},
      {R"({"command": "reset", "content": "x"})", "\"command\" comes alone"},
      {R"({"messages": []})", "\"messages\" is not a list of messages"},
      {R"({"messages": [{"role": "user"}]})", "no \"content\" string"},
  };
  for (const auto& [line, problem] : cases) {
    const ChatRun r = chat("--max-tokens 2", {user("Hi"), "", line, user("never")});
    EXPECT_EQ(r.status, 2) << line;
    EXPECT_EQ(r.replies.size(), 1u) << line << "\n" << r.out;  // the lines before were answered
    EXPECT_NE(r.err.find("standard input line 3: " + problem + "; expected a JSON object"),
              std::string::npos)
        << line << "\n"
        << r.err;
  }
}

TEST_F(ChatCli, MissingFilesAreNamed) {
  const std::string none = path("nowhere");
  const testing::Outcome m =
      testing::run_llmcpu("chat --model " + shell_quote(none) + " < /dev/null");
  EXPECT_EQ(m.status, 2);
  EXPECT_NE(m.output.find(none), std::string::npos) << m.output;
  const ChatRun t = chat("--chat-template " + shell_quote(none + ".jinja"), {});
  EXPECT_EQ(t.status, 2);
  EXPECT_NE(t.err.find(none + ".jinja: cannot be opened"), std::string::npos) << t.err;
  const ChatRun k = chat("--tokenizer " + shell_quote(none), {});
  EXPECT_EQ(k.status, 2);
  EXPECT_NE(k.err.find(none + ": does not exist"), std::string::npos) << k.err;
}

// tmux, with a server of this test's own.
class Tmux {
 public:
  explicit Tmux(std::string socket) : socket_(std::move(socket)) {}
  ~Tmux() { run("kill-server"); }
  testing::Outcome run(const std::string& args) const {
    return run_shell("timeout 10 tmux -L " + socket_ + " " + args + " 2>&1");
  }
  // The pane's text, wrapped lines joined.
  std::string pane() const { return run("capture-pane -p -J -t chat").output; }

 private:
  std::string socket_;
};

// The lines of `text`, trailing spaces dropped (the pane keeps none where nothing was written).
std::vector<std::string> trimmed_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    line.erase(line.find_last_not_of(' ') + 1);
    lines.push_back(line);
  }
  return lines;
}

// The last line of the pane that holds anything.
std::string last_line(const std::string& pane) {
  const std::vector<std::string> lines = trimmed_lines(pane);
  for (auto it = lines.rbegin(); it != lines.rend(); ++it)
    if (!it->empty()) return *it;
  return "";
}

// Polls `ready` every 50 ms until it holds or 60 s pass.
bool poll(const std::function<bool()>& ready) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < end) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return ready();
}

TEST_F(ChatCli, UnderTmuxAsAPersonTypes) {
  if (run_shell("command -v tmux").status != 0)
    GTEST_SKIP() << "tmux is not installed (tools/install-deps.sh installs it with the tests' "
                    "dependencies)";
  const std::string question = "What is the capital of France?";
  const ChatRun jsonl = chat("--max-tokens 16", {user(question)});
  ASSERT_EQ(jsonl.replies.size(), 1u) << jsonl.err;
  // The reply, then a newline before the next prompt.
  const std::vector<std::string> want =
      trimmed_lines(jsonl.replies[0]["content"].get<std::string>() + "\n");
  const Tmux tmux("llmcpu_chat_" + std::to_string(getpid()));
  const std::string command = std::string(LLMCPU_BINARY) + " chat --model " + shell_quote(model_) +
                              " --temperature 0 --threads 1 --max-tokens 16 2>" +
                              shell_quote(path("tmux_err.txt"));
  ASSERT_EQ(tmux.run("new-session -d -s chat -x 200 -y 50 " + shell_quote(command)).status, 0);
  // The reply is over when a prompt line follows the question's.
  const auto reply_lines = [&]() -> std::optional<std::vector<std::string>> {
    const std::vector<std::string> lines = trimmed_lines(tmux.pane());
    for (size_t i = 0; i < lines.size(); ++i) {
      if (lines[i] != "> " + question) continue;
      for (size_t j = i + 1; j < lines.size(); ++j)
        if (lines[j] == ">")
          return std::vector<std::string>(lines.begin() + i + 1, lines.begin() + j);
    }
    return std::nullopt;
  };
  ASSERT_TRUE(poll([&] { return last_line(tmux.pane()) == ">"; }))
      << tmux.pane() << read(path("tmux_err.txt"));
  ASSERT_EQ(tmux.run("send-keys -t chat " + shell_quote(question) + " Enter").status, 0);
  ASSERT_TRUE(poll([&] { return reply_lines().has_value(); }))
      << tmux.pane() << read(path("tmux_err.txt"));
  EXPECT_EQ(*reply_lines(), want) << tmux.pane();
  ASSERT_EQ(tmux.run("send-keys -t chat /exit Enter").status, 0);
  EXPECT_TRUE(poll([&] { return tmux.run("has-session -t chat").status != 0; })) << tmux.pane();
}

}  // namespace
}  // namespace llmcpu
