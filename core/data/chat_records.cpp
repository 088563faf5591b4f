#include "core/data/chat_records.h"

#include <map>

namespace llmcpu {

namespace {

// Hugging Face messages: a non-empty list of objects, each with a string role and a content that
// is a string or a list (multimodal parts, which the template reads) or null beside tool_calls.
Json hf_messages(const Json& list, const std::string& field, const std::string& where) {
  if (!list.is_array()) {
    throw RecordError(where, field, "expected a list of messages, not " + json_kind(list));
  }
  if (list.empty())
    throw RecordError(where, field, "expected at least one message, the list is empty");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string name = field + "[" + std::to_string(i) + "]";
    const Json& m = list[i];
    if (!m.is_object()) throw RecordError(where, name, "expected an object, not " + json_kind(m));
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      throw RecordError(where, name + ".role",
                        role == m.end() ? "missing" : "expected a string, not " + json_kind(*role));
    }
    const auto content = m.find("content");
    const bool has_calls = m.contains("tool_calls");
    if (content == m.end()
            ? !has_calls
            : !(content->is_string() || content->is_array() || (content->is_null() && has_calls))) {
      throw RecordError(where, name + ".content",
                        content == m.end()
                            ? "missing"
                            : "expected a string or a list of parts, not " + json_kind(*content));
    }
  }
  return list;
}

// ShareGPT's conversations [{from, value}] as Hugging Face messages.
Json sharegpt_messages(const Json& list, const std::string& where) {
  static const std::map<std::string, std::string> kRoles = {
      {"human", "user"},      {"user", "user"},
      {"gpt", "assistant"},   {"assistant", "assistant"},
      {"model", "assistant"}, {"system", "system"},
      {"tool", "tool"}};
  if (!list.is_array()) {
    throw RecordError(where, "conversations", "expected a list of turns, not " + json_kind(list));
  }
  if (list.empty()) {
    throw RecordError(where, "conversations", "expected at least one turn, the list is empty");
  }
  Json messages = Json::array();
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string name = "conversations[" + std::to_string(i) + "]";
    if (!list[i].is_object()) {
      throw RecordError(where, name, "expected an object, not " + json_kind(list[i]));
    }
    const std::string& from = string_field(list[i], "from", where + ": " + name);
    const auto role = kRoles.find(from);
    if (role == kRoles.end()) {
      throw RecordError(where, name + ".from",
                        "unknown role '" + from +
                            "', expected human, user, gpt, assistant, model, system or tool");
    }
    const std::string& value = string_field(list[i], "value", where + ": " + name);
    messages.push_back({{"role", role->second}, {"content", value}});
  }
  return messages;
}

// Alpaca: [system?] user = instruction (+ "\n\n" + input), assistant = output.
Json alpaca_messages(const Json& record, const std::string& where) {
  const std::string& instruction = string_field(record, "instruction", where);
  const std::string input = optional_string(record, "input", where);
  const std::string& output = string_field(record, "output", where);
  const std::string system = optional_string(record, "system", where);
  Json messages = Json::array();
  if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
  messages.push_back(
      {{"role", "user"}, {"content", input.empty() ? instruction : instruction + "\n\n" + input}});
  messages.push_back({{"role", "assistant"}, {"content", output}});
  return messages;
}

RecordContent completion_record(const Json& record, const std::string& where) {
  RecordContent c;
  const Json& prompt = required_field(record, "prompt", where);
  const Json& completion = required_field(record, "completion", where);
  if (prompt.is_array() || completion.is_array()) {
    const Json p = hf_messages(prompt, "prompt", where);
    const Json q = hf_messages(completion, "completion", where);
    c.messages = p;
    c.messages.insert(c.messages.end(), q.begin(), q.end());
    c.prompt_messages = p.size();
    return c;
  }
  c.prompt = string_field(record, "prompt", where);
  c.completion = string_field(record, "completion", where);
  return c;
}

}  // namespace

DataFormat parse_data_format(const std::string& v) {
  if (v == "text") return DataFormat::kText;
  if (v == "chat") return DataFormat::kChat;
  if (v == "instruction") return DataFormat::kInstruction;
  if (v == "completion") return DataFormat::kCompletion;
  throw UsageError("--format '" + v + "': expected chat, instruction, completion or text");
}

TrainOn parse_train_on(const std::string& v) {
  if (v == "assistant") return TrainOn::kAssistant;
  if (v == "completion") return TrainOn::kCompletion;
  if (v == "all") return TrainOn::kAll;
  throw UsageError("--train-on '" + v + "': expected assistant, completion or all");
}

const char* data_format_name(DataFormat f) {
  switch (f) {
    case DataFormat::kChat:
      return "chat";
    case DataFormat::kInstruction:
      return "instruction";
    case DataFormat::kCompletion:
      return "completion";
    default:
      return "text";
  }
}

TrainOn default_train_on(DataFormat f) {
  switch (f) {
    case DataFormat::kChat:
    case DataFormat::kInstruction:
      return TrainOn::kAssistant;
    case DataFormat::kCompletion:
      return TrainOn::kCompletion;
    default:
      return TrainOn::kAll;
  }
}

RecordContent read_record(const Json& record, DataFormat format, const std::string& where) {
  RecordContent c;
  switch (format) {
    case DataFormat::kChat:
      if (record.contains("messages")) {
        c.messages = hf_messages(record["messages"], "messages", where);
      } else if (record.contains("conversations")) {
        c.messages = sharegpt_messages(record["conversations"], where);
      } else {
        throw RecordError(where, "messages",
                          "missing (a chat record has messages [{role, content}] or ShareGPT's "
                          "conversations [{from, value}])");
      }
      return c;
    case DataFormat::kInstruction:
      c.messages = alpaca_messages(record, where);
      return c;
    case DataFormat::kCompletion:
      return completion_record(record, where);
    default:
      c.text = string_field(record, "text", where);
      return c;
  }
}

}  // namespace llmcpu
