#include "tools/llmcpu/chat_session.h"

#include <algorithm>
#include <filesystem>

#include "core/io/json_file.h"
#include "simd/error.h"

namespace llmcpu {

namespace {

// An assistant message's content, to find what the template writes after it.
constexpr const char* kProbe = "llmcpu-end-of-turn-probe";

void add_unique(std::vector<int>& ids, int id) {
  if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
}

// generation_config.json's eos_token_id: a number or a list of numbers.
void add_generation_config_eos(std::vector<int>& ids, const std::string& model_dir) {
  const std::string path = (std::filesystem::path(model_dir) / "generation_config.json").string();
  if (model_dir.empty() || !std::filesystem::exists(path)) return;
  const nlohmann::json config = read_json_file(path);
  if (!config.is_object() || !config.contains("eos_token_id")) return;
  const nlohmann::json& eos = config["eos_token_id"];
  const auto take = [&](const nlohmann::json& v) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= kMaxVocabSize) {
      throw FileError(path, "eos_token_id holds " + v.dump() +
                                ": expected a token id (a non-negative integer) or a list of them");
    }
    add_unique(ids, v.get<int>());
  };
  if (eos.is_null()) return;
  if (!eos.is_array()) return take(eos);
  for (const nlohmann::json& v : eos) take(v);
}

// The special token the template writes right after an assistant message's content (whitespace
// tokens before it skipped), or -1.
int end_of_turn_token(const Tokenizer& tok, const ChatTemplate& t) {
  ChatRequest probe;
  probe.messages = nlohmann::ordered_json::array(
      {{{"role", "user"}, {"content", "Hello"}}, {{"role", "assistant"}, {"content", kProbe}}});
  const std::string text = render_chat(t, probe);
  const size_t at = text.rfind(kProbe);
  if (at == std::string::npos || !tok.can_encode()) return -1;
  for (int id : tok.encode(std::string_view(text).substr(at + std::string(kProbe).size()))) {
    if (tok.is_special_token(id)) return id;
    const std::string piece = tok.decode_token(id);
    if (piece.find_first_not_of(" \t\r\n") != std::string::npos) return -1;
  }
  return -1;
}

}  // namespace

std::vector<int> chat_end_tokens(const Tokenizer& tok, const ChatTemplate& t,
                                 const std::string& model_dir) {
  std::vector<int> ids;
  add_generation_config_eos(ids, model_dir);
  add_unique(ids, tok.eot_token());
  add_unique(ids, end_of_turn_token(tok, t));
  return ids;
}

const char* chat_stop_name(ChatStop stop) {
  switch (stop) {
    case ChatStop::kEos:
      return "eos";
    case ChatStop::kLength:
      return "length";
    case ChatStop::kContext:
      return "context";
  }
  return "?";
}

ChatSession::ChatSession(const Model& model, const Tokenizer& tok, const ChatTemplate& t,
                         std::vector<int> end_tokens, const ChatOptions& options,
                         const std::string& system)
    : tok_(tok),
      template_(t),
      jinja_(t.source, t.origin),
      end_tokens_(std::move(end_tokens)),
      options_(options),
      system_(system),
      gen_(model, options.context),
      rng_(options.seed) {
  if (!tok.can_encode()) {
    throw UsageError(
        "chat needs a tokenizer that can encode (a tokenizer.json, or a folder with "
        "encoder.json and vocab.bpe), not " +
        tok.source());
  }
  reset();
}

void ChatSession::add(const std::string& role, const std::string& content) {
  messages_.push_back({{"role", role}, {"content", content}});
}

void ChatSession::reset() {
  messages_ = nlohmann::ordered_json::array();
  if (!system_.empty()) add("system", system_);
}

bool ChatSession::is_end(int id) const {
  return std::find(end_tokens_.begin(), end_tokens_.end(), id) != end_tokens_.end();
}

int ChatSession::prefill(const std::vector<int>& ids) {
  // The shared prefix stays; at least the last id runs again, for the logits the reply starts from.
  size_t keep = 0;
  while (keep < cached_.size() && keep < ids.size() && cached_[keep] == ids[keep]) ++keep;
  keep = std::min(keep, ids.size() - 1);
  gen_.rewind(static_cast<int>(keep));
  cached_.resize(keep);
  for (size_t i = keep; i < ids.size(); ++i) {
    gen_.step(ids[i]);
    cached_.push_back(ids[i]);
  }
  return static_cast<int>(keep);
}

ChatReply ChatSession::reply(const std::function<void(std::string_view)>& show) {
  ChatRequest request;
  request.messages = messages_;
  request.add_generation_prompt = true;
  ChatReply r;
  r.prompt = jinja_.render(chat_context(template_, request));
  const std::vector<int> ids = tok_.encode(r.prompt);
  if (ids.empty()) throw UsageError(template_.origin + " rendered the conversation as no text");
  r.prompt_tokens = static_cast<int>(ids.size());
  if (r.prompt_tokens > gen_.capacity()) {
    r.stop = ChatStop::kContext;
    messages_.erase(messages_.size() - 1);
    return r;
  }
  r.reused_tokens = prefill(ids);
  TokenStream stream(tok_);
  const auto emit = [&](const std::string& piece) {
    r.text += piece;
    if (!piece.empty()) show(piece);
  };
  for (;;) {
    // Only ids the tokenizer can decode (a model may have more rows than the tokenizer has tokens).
    const int next = gen_.sample(options_.temperature, options_.top_k, rng_, tok_.vocab_size());
    if (is_end(next)) {
      r.stop = ChatStop::kEos;
      break;
    }
    ++r.tokens;
    emit(stream.push(next));
    if (r.tokens >= options_.max_tokens) {
      r.stop = ChatStop::kLength;
      break;
    }
    if (gen_.position() >= gen_.capacity()) {
      r.stop = ChatStop::kContext;
      break;
    }
    gen_.step(next);
    cached_.push_back(next);
  }
  emit(stream.finish());
  add("assistant", r.text);
  return r;
}

}  // namespace llmcpu
