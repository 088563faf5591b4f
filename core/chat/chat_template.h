// Chat templates: a model's Jinja chat_template rendered over a conversation exactly as
// @huggingface/jinja (the renderer of transformers.js) renders it, byte for byte, and the files
// it comes from. What it reads: a tokenizer folder's tokenizer_config.json (its chat_template, a
// string or a list of {name, template} of which "default" is used; chat_template.jinja or
// chat_template.json beside it where the config has none) and its special tokens (a string or an
// AddedToken object's "content"); or a template file given by the user. A folder without any
// template gets kDefaultChatTemplate (ChatML, docs/formats.md), and says so (is_default).
// What it does not do: tokenize (the tokenizer does), or run a construct the interpreter lacks:
// such a template is refused with TemplateUnsupported naming the construct and its line:column.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/chat/jinja_error.h"

namespace llmcpu {

// A parsed template, rendered any number of times. Throws TemplateSyntaxError or
// TemplateUnsupported from the constructor; render() throws TemplateRaised (raise_exception),
// TemplateRuntimeError or TemplateUnsupported. `origin` names the template in messages.
class JinjaTemplate {
 public:
  JinjaTemplate(const std::string& source, const std::string& origin);
  ~JinjaTemplate();
  JinjaTemplate(JinjaTemplate&&) noexcept;
  JinjaTemplate& operator=(JinjaTemplate&&) noexcept;
  // `context`: a JSON object whose keys are the template's variables.
  std::string render(const nlohmann::ordered_json& context) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ChatML, as transformers' former class default: each message as
// <|im_start|>ROLE\nCONTENT<|im_end|>\n, then <|im_start|>assistant\n for a generation prompt.
inline constexpr const char* kDefaultChatTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' "
    "}}{% endif %}";

struct ChatTemplate {
  std::string source;       // the Jinja text
  std::string origin;       // where it came from: a file's path, or "the built-in ChatML template"
  bool is_default = false;  // the folder had no template: kDefaultChatTemplate is used
  // bos_token, eos_token, unk_token, sep_token, pad_token, cls_token, mask_token: those the
  // tokenizer_config.json names, as strings (the variables transformers.js passes).
  nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object();
};

// The chat template and special tokens of a tokenizer folder. Throws FileError for a config
// that cannot be read or whose chat_template or tokens are not of the expected form.
ChatTemplate read_chat_template(const std::string& tokenizer_dir);
// The template in `path` (`--chat-template FILE`), with the special tokens of `tokenizer_dir`
// ("" for none).
ChatTemplate read_chat_template_file(const std::string& path, const std::string& tokenizer_dir);

struct ChatRequest {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // [{role, content, ...}]
  bool add_generation_prompt = false;
  nlohmann::ordered_json tools = nullptr;      // a list of tool definitions, or null
  nlohmann::ordered_json documents = nullptr;  // a list of documents, or null
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // more variables; win ties
};

// The variables a template is rendered with, as transformers.js's apply_chat_template passes them:
// messages, add_generation_prompt, tools, documents, the special tokens, then `extra`.
nlohmann::ordered_json chat_context(const ChatTemplate& t, const ChatRequest& request);
std::string render_chat(const ChatTemplate& t, const ChatRequest& request);

}  // namespace llmcpu
