// The conversations every published chat template is rendered with, by us and by the reference:
// with and without a system prompt, one user turn up to three rounds, ending with the user or the
// assistant, with and without the generation prompt, contents with newlines, quotes, backslashes,
// tag-like text, surrounding white space and non-ASCII text; then shapes that templates refuse
// (roles that do not alternate, a system prompt where none is allowed), tool calls and
// structured contents. Made by rule, not copied from any renderer's output.
#pragma once

#include <string>
#include <vector>

#include "core/chat/chat_template.h"

namespace llmcpu::testing {

struct Conversation {
  std::string name;
  ChatRequest request;
};

inline nlohmann::ordered_json message(const std::string& role, const std::string& content) {
  return {{"role", role}, {"content", content}};
}

inline const std::vector<std::string>& sample_texts() {
  static const std::vector<std::string> kTexts = {
      "Hello!",
      "What is the capital of France?",
      "Paris is the capital of France.",
      "Write two lines:\nfirst line\nsecond line\n",
      "She said \"hi\" and he said 'bye'.",
      "  padded with spaces and a tab\t ",
      "Unicode: caf\u00e9, \u65e5\u672c\u8a9e, \u0645\u0631\u062d\u0628\u0627, emoji "
      "\U0001F44B\U0001F3FD.",
      "Braces {{ not a tag }} and {% not a block %} and {# not a comment #}",
      "A backslash \\ and a path C:\\temp\\new",
      "Code:\n```python\nprint('x')\n```",
      "\n\nleading newlines and trailing ones\n\n",
      "<|im_start|>looks like a special token</s>",
  };
  return kTexts;
}

inline std::vector<Conversation> conversations() {
  const std::vector<std::string>& texts = sample_texts();
  const std::vector<std::string> systems = {
      "", "You are a helpful assistant.",
      "You answer briefly.\nRules:\n- be \"kind\"\n- no \u00e9moji"};
  // Turn shapes: u = user, a = assistant.
  const std::vector<std::string> shapes = {"u", "ua", "uau", "uaua", "uauau"};
  std::vector<Conversation> out;
  size_t next_text = 0;
  for (int pass = 0; pass < 3; ++pass) {
    for (size_t s = 0; s < systems.size(); ++s) {
      for (size_t k = 0; k < shapes.size(); ++k) {
        Conversation c;
        c.name = "system" + std::to_string(s) + "_" + shapes[k] + "_pass" + std::to_string(pass);
        if (!systems[s].empty()) c.request.messages.push_back(message("system", systems[s]));
        for (char role : shapes[k]) {
          c.request.messages.push_back(
              message(role == 'u' ? "user" : "assistant", texts[next_text++ % texts.size()]));
        }
        c.request.add_generation_prompt = (s + k + pass) % 2 == 0;
        c.name += c.request.add_generation_prompt ? "_prompt" : "";
        out.push_back(std::move(c));
      }
    }
  }
  const auto add = [&](const std::string& name, std::vector<nlohmann::ordered_json> messages,
                       bool prompt) {
    Conversation c;
    c.name = name;
    for (auto& m : messages) c.request.messages.push_back(std::move(m));
    c.request.add_generation_prompt = prompt;
    out.push_back(std::move(c));
  };
  add("empty_content", {message("user", ""), message("assistant", "")}, true);
  add("user_user", {message("user", "one"), message("user", "two")}, true);
  add("assistant_first", {message("assistant", "I start."), message("user", "ok")}, false);
  add("system_only", {message("system", "Only a system prompt.")}, true);
  add("system_late",
      {message("user", "hi"), message("system", "late system"), message("user", "x")}, true);
  add("long_rounds",
      {message("user", "1"), message("assistant", "2"), message("user", "3"),
       message("assistant", "4"), message("user", "5"), message("assistant", "6"),
       message("user", "7")},
      true);
  add("no_messages", {}, true);
  add("numbers_as_content", {{{"role", "user"}, {"content", 42}}}, false);
  nlohmann::ordered_json parts = nlohmann::ordered_json::array();
  parts.push_back({{"type", "text"}, {"text", "Describe this."}});
  add("content_parts", {{{"role", "user"}, {"content", parts}}}, true);
  return out;
}

// Conversations with tools: a tool list, an assistant's tool call and the tool's answer.
inline std::vector<Conversation> tool_conversations() {
  nlohmann::ordered_json tool = nlohmann::ordered_json::parse(R"({
    "type": "function",
    "function": {
      "name": "get_weather",
      "description": "Get the weather in a city, in \"degrees\".",
      "parameters": {"type": "object",
                     "properties": {"city": {"type": "string", "description": "The city"},
                                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                     "required": ["city"]}}})");
  nlohmann::ordered_json call = nlohmann::ordered_json::parse(R"({
    "id": "call12345", "type": "function",
    "function": {"name": "get_weather", "arguments": {"city": "Z\u00fcrich", "unit": "celsius"}}})");
  std::vector<Conversation> out;
  for (int k = 0; k < 4; ++k) {
    Conversation c;
    c.name = "tools_" + std::to_string(k);
    c.request.tools = nlohmann::ordered_json::array({tool});
    if (k % 2 == 1) c.request.messages.push_back(message("system", "Use tools when useful."));
    c.request.messages.push_back(message("user", "Weather in Z\u00fcrich?"));
    if (k >= 2) {
      nlohmann::ordered_json a = {{"role", "assistant"}, {"content", ""}};
      a["tool_calls"] = nlohmann::ordered_json::array({call});
      c.request.messages.push_back(a);
      nlohmann::ordered_json t = {{"role", "tool"},
                                  {"name", "get_weather"},
                                  {"tool_call_id", "call12345"},
                                  {"content", "{\"temperature\": 21.5}"}};
      c.request.messages.push_back(t);
    }
    c.request.add_generation_prompt = true;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace llmcpu::testing
