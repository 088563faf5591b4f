// What one JSON record of `llmcpu prepare --format` holds (docs/formats.md), in the columns people
// use:
//   chat         `messages` [{role, content, ...}] (Hugging Face; other keys such as tool_calls go
//                to the template as they are), or ShareGPT's `conversations` [{from, value}] with
//                from human/user -> user, gpt/assistant/model -> assistant, system, tool;
//   instruction  Alpaca's `instruction`, `input` (optional), `output`, `system` (optional): the
//                messages [system?] user = instruction (+ "\n\n" + input when input is not empty),
//                assistant = output;
//   completion   `prompt`, `completion`: two strings, or two lists of messages (trl's
//                conversational prompt-completion);
//   text         `text`: a document.
// Every malformed record is a RecordError naming the record and the field. Not here: rendering
// (chat_render.h) and tokenizing.
#pragma once

#include <string>

#include "core/data/records.h"

namespace llmcpu {

enum class DataFormat { kText, kChat, kInstruction, kCompletion };
// Which tokens of an example are trained targets (--train-on).
enum class TrainOn { kAssistant, kCompletion, kAll };

// --format and --train-on values; UsageError naming the flag and what is accepted.
DataFormat parse_data_format(const std::string& value);
TrainOn parse_train_on(const std::string& value);
const char* data_format_name(DataFormat f);
// --train-on's default for a format: assistant (chat, instruction), completion, all (text).
TrainOn default_train_on(DataFormat f);

// One record's content. Chat and instruction records, and completion records whose prompt and
// completion are message lists, have `messages` (of which the first `prompt_messages` are the
// prompt, for completion); the others have the strings.
struct RecordContent {
  Json messages;  // a list of {role, content, ...}, or null
  size_t prompt_messages = 0;
  std::string prompt, completion, text;
};

RecordContent read_record(const Json& record, DataFormat format, const std::string& where);

}  // namespace llmcpu
