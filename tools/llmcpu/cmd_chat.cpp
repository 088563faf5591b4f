// `llmcpu chat`: a conversation with a model through its chat template (tools/llmcpu/
// chat_session.h), the KV cache kept across turns. On a terminal: a prompt, the user's lines, the
// replies streamed as they are generated, /reset and /exit. Otherwise (or with --jsonl): one JSON
// object a line in, one a line out per user message, for programs and tests.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/chat/chat_template.h"
#include "core/model/config.h"
#include "simd/error.h"
#include "tools/llmcpu/args.h"
#include "tools/llmcpu/chat_session.h"
#include "tools/llmcpu/commands.h"
#include "tools/llmcpu/generation_model.h"
#include "tools/llmcpu/placement_flags.h"

namespace llmcpu {

namespace {

// The cache's length when --context is not given: the model's context up to this many tokens
// (a model of 128k positions would otherwise take gigabytes of cache before the first word).
constexpr int kDefaultContextCap = 8192;

// One line of JSONL input.
struct ChatInput {
  enum Kind { kMessages, kReset, kExit } kind = kMessages;
  bool whole = false;  // {"messages": [...]}: they replace the conversation (but --system's)
  std::vector<std::pair<std::string, std::string>> messages;  // (role, content)
};

using Fail = std::function<void(const std::string&)>;

// {"role": "user"|"system"|"assistant", "content": TEXT}, or {"content": TEXT} (a user's).
std::pair<std::string, std::string> message_of(const nlohmann::json& j, const Fail& fail) {
  if (!j.is_object()) fail("a message is a JSON " + std::string(j.type_name()) + ", not an object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() != "role" && it.key() != "content") fail("unknown key \"" + it.key() + "\"");
  }
  if (!j.contains("content") || !j["content"].is_string()) fail("no \"content\" string");
  std::string role = "user";
  if (j.contains("role")) {
    const nlohmann::json& r = j["role"];
    if (r != "user" && r != "system" && r != "assistant") fail("\"role\" is " + r.dump());
    role = r.get<std::string>();
  }
  return {role, j["content"].get<std::string>()};
}

// A message, {"messages": [message, ...]} or {"command": "reset"|"exit"}. UsageError naming the
// line and what was expected.
ChatInput parse_input_line(const std::string& line, long number) {
  const Fail fail = [&](const std::string& problem) {
    throw UsageError("standard input line " + std::to_string(number) + ": " + problem +
                     "; expected a JSON object {\"role\": \"user\", \"content\": TEXT} (or role "
                     "\"system\" or \"assistant\", for history), {\"content\": TEXT}, "
                     "{\"messages\": [such objects]} or {\"command\": \"reset\" or \"exit\"}");
  };
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded()) fail("not valid JSON");
  if (!j.is_object()) fail("a JSON " + std::string(j.type_name()) + ", not an object");
  ChatInput in;
  for (const char* alone : {"command", "messages"}) {
    if (j.contains(alone) && j.size() != 1)
      fail(std::string(1, '"').append(alone).append("\" comes alone"));
  }
  if (j.contains("command")) {
    const nlohmann::json& c = j["command"];
    if (c != "reset" && c != "exit") fail("\"command\" is " + c.dump());
    in.kind = c == "reset" ? ChatInput::kReset : ChatInput::kExit;
  } else if (j.contains("messages")) {
    const nlohmann::json& m = j["messages"];
    if (!m.is_array() || m.empty()) fail("\"messages\" is not a list of messages");
    in.whole = true;
    for (const nlohmann::json& message : m) in.messages.push_back(message_of(message, fail));
  } else {
    in.messages.push_back(message_of(j, fail));
  }
  return in;
}

std::string json_line(const nlohmann::ordered_json& j) {
  // A reply may hold bytes that are no UTF-8 (a model's half character): written as U+FFFD.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

class ChatCommand : public GenerationCommand {
 public:
  void add_flags(ArgParser& p) override {
    add_model_flags(p, &flags_);
    p.option("system", 0, &system_, "TEXT",
             "the system message every conversation starts with, kept by /reset (default: none)");
    p.option("chat-template", 0, &template_path_, "FILE",
             "a Jinja chat template to use instead of the tokenizer folder's (default: its "
             "tokenizer_config.json's, chat_template.jinja, else ChatML)");
    p.option("max-tokens", 0, &options_.max_tokens, "N", "the longest reply (default 512)",
             {1, kMaxSeqLen});
    p.option("context", 0, &options_.context, "N",
             "the conversation's room in tokens, the KV cache's length (default: the model's "
             "context, at most 8192)",
             {1, kMaxSeqLen});
    add_sampling_flags(p, &flags_);
    add_tokenizer_flag(p, &flags_);
    p.flag("jsonl", 0, &jsonl_,
           "read JSON lines and answer each user message with one (the default when standard "
           "input is not a terminal)");
    p.flag("show-prompt", 0, &show_prompt_,
           "show the rendered conversation of each turn (--jsonl: its \"prompt\" key; on a "
           "terminal: on standard error)");
    add_placement_flags(p, &placement_);
  }
  int run(const ArgParser& p) override;

 private:
  ChatSession open_session(const GenerationModel& loaded, const ArgParser& p);
  void run_jsonl(ChatSession& session);
  void run_terminal(ChatSession& session);

  ChatOptions options_;
  std::string system_, template_path_;
  bool jsonl_ = false, show_prompt_ = false;
};

ChatSession ChatCommand::open_session(const GenerationModel& loaded, const ArgParser& p) {
  const Tokenizer& tok = loaded.tokenizer();
  const ChatTemplate t = template_path_.empty()
                             ? read_chat_template(loaded.tokenizer_dir())
                             : read_chat_template_file(template_path_, loaded.tokenizer_dir());
  if (t.is_default) {
    std::fprintf(stderr,
                 "chat: note: %s has no chat template (tokenizer_config.json's chat_template, "
                 "chat_template.jinja or chat_template.json): using ChatML "
                 "(<|im_start|>ROLE\\nTEXT<|im_end|>)\n",
                 loaded.tokenizer_dir().c_str());
  }
  const ModelSource& source = loaded.source();
  const std::string model_dir = std::filesystem::is_directory(source.path)
                                    ? source.path
                                    : std::filesystem::path(source.path).parent_path().string();
  std::vector<int> ends = chat_end_tokens(tok, t, model_dir);
  std::string names;
  for (int id : ends)
    names += (names.empty() ? "" : ", ") + tok.decode_token(id) + " (" + std::to_string(id) + ")";
  std::fprintf(stderr, "chat: replies end at %s\n",
               names.empty() ? "--max-tokens only: no end token is known" : names.c_str());
  const int maxT = loaded.model().config().max_seq_len;
  if (!p.given("context")) options_.context = std::min(maxT, kDefaultContextCap);
  if (options_.context > maxT) {
    throw UsageError("--context " + std::to_string(options_.context) +
                     " is past the model's context of " + std::to_string(maxT) + " tokens");
  }
  options_.temperature = static_cast<float>(flags_.temperature);
  options_.top_k = flags_.top_k;
  options_.seed = flags_.seed;
  return ChatSession(loaded.model(), tok, t, std::move(ends), options_, system_);
}

int ChatCommand::run(const ArgParser& p) {
  const Placement placed = apply_placement_flags(placement_);
  const GenerationModel loaded(flags_, "chat");
  ChatSession session = open_session(loaded, p);
  std::fprintf(stderr, "%s\n", placed.summary.c_str());
  if (jsonl_ || !isatty(STDIN_FILENO)) {
    run_jsonl(session);
  } else {
    run_terminal(session);
  }
  return 0;
}

void ChatCommand::run_jsonl(ChatSession& session) {
  std::string line;
  for (long number = 1; std::getline(std::cin, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // a blank line
    const ChatInput in = parse_input_line(line, number);
    if (in.kind == ChatInput::kExit) return;
    if (in.kind == ChatInput::kReset) {
      session.reset();
      continue;
    }
    if (in.whole) session.reset();
    for (const auto& [role, content] : in.messages) session.add(role, content);
    if (in.messages.back().first != "user") continue;  // history
    const ChatReply r = session.reply([](std::string_view) {});
    nlohmann::ordered_json out = {{"role", "assistant"},
                                  {"content", r.text},
                                  {"tokens", r.tokens},
                                  {"stop", chat_stop_name(r.stop)}};
    if (show_prompt_) out["prompt"] = r.prompt;
    const std::string text = json_line(out);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  }
}

void ChatCommand::run_terminal(ChatSession& session) {
  std::fprintf(stderr,
               "chat: %s, %d tokens of context. /reset forgets the conversation, /exit (or "
               "Ctrl-D) quits.\n",
               flags_.model.c_str(), session.context());
  std::string line;
  for (;;) {
    std::fputs("> ", stdout);
    std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == "/exit") break;
    if (line == "/reset") {
      session.reset();
      std::fputs("(the conversation is forgotten)\n", stdout);
      continue;
    }
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    session.add("user", line);
    const ChatReply r = session.reply([](std::string_view piece) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    });
    std::fputs("\n", stdout);
    if (show_prompt_) std::fprintf(stderr, "chat: the prompt was:\n%s\n", r.prompt.c_str());
    if (r.stop == ChatStop::kContext) {
      std::fprintf(stdout,
                   "(the conversation fills the context of %d tokens: /reset starts again)\n",
                   session.context());
    }
  }
  std::fputs("\n", stdout);
}

}  // namespace

std::unique_ptr<Command> make_chat_command() { return std::make_unique<ChatCommand>(); }

}  // namespace llmcpu
