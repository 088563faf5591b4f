// A conversation with a model through its own chat template (`llmcpu chat`): the messages so far,
// rendered whole with add_generation_prompt at each turn, tokenized (special tokens written by the
// template are recognised) and continued by the model token by token. The KV cache is kept across
// turns: only the tokens past the part of the rendered conversation already in the cache are run,
// compared by id; where the template renders the history otherwise than it was generated (a
// reply tokenized differently, a template that rewrites earlier turns), the cache goes back to
// the common prefix. A reply ends at an end token (chat_end_tokens), at the reply limit, or when
// the cache is full.
// Not here: reading the user's lines or writing replies (tools/llmcpu/cmd_chat.cpp), templates
// themselves (core/chat), the model's math (core/model/generate.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/chat/chat_template.h"
#include "core/model/generate.h"
#include "core/model/model.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/rng.h"

namespace llmcpu {

// The tokens that end a reply: generation_config.json's eos_token_id (a number or a list) in
// `model_dir` where the file is there, the tokenizer's end-of-text (its config's eos_token), and
// the special token the template writes right after an assistant message's content (its end of
// turn: <|im_end|>, <|eot_id|>, <end_of_turn>, ...). Without repeats, in that order. Throws
// FileError naming generation_config.json when its eos_token_id is not of that form.
std::vector<int> chat_end_tokens(const Tokenizer& tok, const ChatTemplate& t,
                                 const std::string& model_dir);

enum class ChatStop {
  kEos,      // the model wrote an end token (not part of the reply)
  kLength,   // the reply reached max_tokens
  kContext,  // the cache is full (or the conversation alone does not fit in it)
};
const char* chat_stop_name(ChatStop stop);  // "eos", "length", "context"

struct ChatOptions {
  float temperature = 1.0f;  // 0: greedy
  int top_k = 0;             // 0: all tokens
  uint64_t seed = 1337;
  int max_tokens = 512;  // of one reply
  int context = 0;       // the cache's length in tokens, <= the model's maxT
};

struct ChatReply {
  std::string text;  // as shown while it was generated, without the end token
  int tokens = 0;    // the reply's tokens (without the end token)
  ChatStop stop = ChatStop::kEos;
  std::string prompt;     // the rendered conversation the reply continues
  int prompt_tokens = 0;  // its tokens
  int reused_tokens = 0;  // of them, those already in the cache
};

class ChatSession {
 public:
  // `system`: the system message that starts every conversation ("" for none). The model and the
  // tokenizer must outlive the session.
  ChatSession(const Model& model, const Tokenizer& tok, const ChatTemplate& t,
              std::vector<int> end_tokens, const ChatOptions& options, const std::string& system);

  // Adds a message to the conversation (a user's turn, or history: "system", "assistant").
  void add(const std::string& role, const std::string& content);
  // Forgets the conversation but the system message.
  void reset();
  // The model's reply to the conversation so far, each piece of its text passed to `show` as it
  // is generated; the reply is added as the assistant's message. When the rendered conversation
  // alone does not fit in the cache, nothing is generated (stop kContext, 0 tokens) and the last
  // message is taken back.
  ChatReply reply(const std::function<void(std::string_view)>& show);

  const std::vector<int>& end_tokens() const { return end_tokens_; }
  int context() const { return gen_.capacity(); }

 private:
  bool is_end(int id) const;
  // Runs `ids` past what the cache holds in common with them; returns the tokens reused.
  int prefill(const std::vector<int>& ids);

  const Tokenizer& tok_;
  ChatTemplate template_;
  JinjaTemplate jinja_;
  std::vector<int> end_tokens_;
  ChatOptions options_;
  std::string system_;
  nlohmann::ordered_json messages_ = nlohmann::ordered_json::array();
  Generator gen_;
  std::vector<int> cached_;  // the ids whose keys and values the cache holds, in order
  Rng rng_;
};

}  // namespace llmcpu
