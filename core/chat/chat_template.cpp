// Reading chat templates from tokenizer folders and files, and rendering them over conversations
// (see chat_template.h).
#include "core/chat/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/chat/jinja_parser.h"
#include "core/chat/jinja_runtime.h"

namespace llmcpu {

struct JinjaTemplate::Impl {
  jinja::Source source;
  jinja::Program program;
  Impl(const std::string& text, const std::string& origin) : source(origin, text) {
    program = jinja::parse(source, jinja::tokenize(source));
  }
};

JinjaTemplate::JinjaTemplate(const std::string& source, const std::string& origin)
    : impl_(std::make_unique<Impl>(source, origin)) {}
JinjaTemplate::~JinjaTemplate() = default;
JinjaTemplate::JinjaTemplate(JinjaTemplate&&) noexcept = default;
JinjaTemplate& JinjaTemplate::operator=(JinjaTemplate&&) noexcept = default;

std::string JinjaTemplate::render(const nlohmann::ordered_json& context) const {
  const std::string& origin = impl_->source.origin();
  if (!context.is_object())
    throw TemplateRuntimeError(origin, {0, 0},
                               "the variables to render with must be a JSON object");
  jinja::Env globals;
  jinja::add_globals(globals);
  for (auto it = context.begin(); it != context.end(); ++it) {
    if (globals.has_own(it.key()))
      throw TemplateRuntimeError(origin, {0, 0}, "Variable already declared: " + it.key());
    globals.set(it.key(), jinja::from_json(it.value()));
  }
  jinja::Evaluator ev(impl_->source);
  return ev.render(impl_->program, globals);
}

namespace {

namespace fs = std::filesystem;

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw FileError(path, "cannot be opened for reading");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

nlohmann::ordered_json read_json(const std::string& path) {
  try {
    return nlohmann::ordered_json::parse(read_text(path));
  } catch (const nlohmann::json::exception& e) {
    throw FileError(path, std::string("is not valid JSON: ") + e.what());
  }
}

// chat_template: a string, or [{"name": ..., "template": ...}] of which "default" is used.
std::string template_of(const nlohmann::ordered_json& value, const std::string& path) {
  if (value.is_string()) return value.get<std::string>();
  if (!value.is_array())
    throw FileError(path, "chat_template: expected a string or a list of {name, template}");
  std::string names;
  for (const auto& e : value) {
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string() ||
        !e.contains("template") || !e["template"].is_string())
      throw FileError(path,
                      "chat_template: every entry of the list must be {name, template} strings");
    if (e["name"] == "default") return e["template"].get<std::string>();
    names += (names.empty() ? "" : ", ") + e["name"].get<std::string>();
  }
  throw FileError(
      path, "chat_template: the list has no template named \"default\" (it has: " + names + ")");
}

nlohmann::ordered_json special_tokens_of(const nlohmann::ordered_json& config,
                                         const std::string& path) {
  nlohmann::ordered_json tokens = nlohmann::ordered_json::object();
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                          "cls_token", "mask_token"}) {
    if (!config.contains(key) || config[key].is_null()) continue;
    const auto& v = config[key];
    if (v.is_string()) {
      if (!v.get<std::string>().empty()) tokens[key] = v;
    } else if (v.is_object() && v.contains("content") && v["content"].is_string()) {
      tokens[key] = v["content"];
    } else {
      throw FileError(path, std::string(key) +
                                ": expected a string or an AddedToken object with "
                                "a \"content\" string");
    }
  }
  return tokens;
}

}  // namespace

ChatTemplate read_chat_template(const std::string& tokenizer_dir) {
  const std::string config_path = (fs::path(tokenizer_dir) / "tokenizer_config.json").string();
  ChatTemplate t;
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  if (fs::exists(config_path)) {
    config = read_json(config_path);
    if (!config.is_object()) throw FileError(config_path, "expected a JSON object");
    t.special_tokens = special_tokens_of(config, config_path);
  }
  const std::string jinja_path = (fs::path(tokenizer_dir) / "chat_template.jinja").string();
  const std::string json_path = (fs::path(tokenizer_dir) / "chat_template.json").string();
  if (config.contains("chat_template") && !config["chat_template"].is_null()) {
    t.source = template_of(config["chat_template"], config_path);
    t.origin = config_path;
  } else if (fs::exists(jinja_path)) {
    t.source = read_text(jinja_path);
    t.origin = jinja_path;
  } else if (fs::exists(json_path)) {
    const nlohmann::ordered_json j = read_json(json_path);
    if (!j.is_object() || !j.contains("chat_template"))
      throw FileError(json_path, "expected an object with a \"chat_template\"");
    t.source = template_of(j["chat_template"], json_path);
    t.origin = json_path;
  } else {
    t.source = kDefaultChatTemplate;
    t.origin = "the built-in ChatML template";
    t.is_default = true;
  }
  return t;
}

ChatTemplate read_chat_template_file(const std::string& path, const std::string& tokenizer_dir) {
  ChatTemplate t;
  if (!tokenizer_dir.empty()) t.special_tokens = read_chat_template(tokenizer_dir).special_tokens;
  t.source = read_text(path);
  t.origin = path;
  return t;
}

nlohmann::ordered_json chat_context(const ChatTemplate& t, const ChatRequest& request) {
  nlohmann::ordered_json c = nlohmann::ordered_json::object();
  c["messages"] = request.messages;
  c["add_generation_prompt"] = request.add_generation_prompt;
  c["tools"] = request.tools;
  c["documents"] = request.documents;
  for (auto it = t.special_tokens.begin(); it != t.special_tokens.end(); ++it)
    c[it.key()] = it.value();
  for (auto it = request.extra.begin(); it != request.extra.end(); ++it) c[it.key()] = it.value();
  return c;
}

std::string render_chat(const ChatTemplate& t, const ChatRequest& request) {
  return JinjaTemplate(t.source, t.origin).render(chat_context(t, request));
}

}  // namespace llmcpu
