// Reading chat templates: tokenizer_config.json's chat_template as a string or a list of
// {name, template} ("default" is used), special tokens as strings or AddedToken objects,
// chat_template.jinja beside the config, the ChatML default (flagged) for a folder without a
// template, a template file with another folder's tokens, and errors that name the file and field.
#include <gtest/gtest.h>

#include "core/chat/chat_template.h"
#include "tests/chat/chat_test_util.h"

namespace llmcpu {
namespace {

using namespace llmcpu::testing;

std::string folder_with(const std::string& name, const std::string& config) {
  const std::string dir = scratch_dir("files") + "/" + name;
  fs::create_directories(dir);
  if (!config.empty()) write_file(dir + "/tokenizer_config.json", config);
  return dir;
}

ChatRequest hello() {
  ChatRequest r;
  r.messages = Json::array({{{"role", "user"}, {"content", "Hi"}}});
  r.add_generation_prompt = true;
  return r;
}

TEST(ChatFiles, StringTemplateAndTokens) {
  const std::string dir = folder_with(
      "string",
      R"({"chat_template": "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}{{ eos_token }}",
                   "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": false},
                   "eos_token": "</s>", "pad_token": null, "unk_token": ""})");
  const ChatTemplate t = read_chat_template(dir);
  EXPECT_FALSE(t.is_default);
  EXPECT_EQ(t.origin, dir + "/tokenizer_config.json");
  EXPECT_EQ(t.special_tokens, Json({{"bos_token", "<s>"}, {"eos_token", "</s>"}}));
  EXPECT_EQ(render_chat(t, hello()), "<s>Hi</s>");
}

TEST(ChatFiles, ListOfNamedTemplatesUsesDefault) {
  const std::string dir =
      folder_with("list", R"({"chat_template": [{"name": "tool_use", "template": "tools"},
                                    {"name": "default", "template": "plain {{ messages|length }}"}]})");
  EXPECT_EQ(render_chat(read_chat_template(dir), hello()), "plain 1");
  const std::string none =
      folder_with("list_no_default", R"({"chat_template": [{"name": "rag", "template": "x"}]})");
  try {
    read_chat_template(none);
    FAIL() << "a list without a default was accepted";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer_config.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rag"), std::string::npos) << e.what();
  }
}

TEST(ChatFiles, NoTemplateGivesFlaggedChatML) {
  const std::string dir = folder_with("none", R"({"eos_token": "<|endoftext|>"})");
  const ChatTemplate t = read_chat_template(dir);
  EXPECT_TRUE(t.is_default);
  EXPECT_EQ(t.source, kDefaultChatTemplate);
  ChatRequest r = hello();
  r.messages.insert(r.messages.begin(), Json{{"role", "system"}, {"content", "Be brief."}});
  // ChatML: <|im_start|>ROLE\nCONTENT<|im_end|>\n per message, then the assistant's header.
  EXPECT_EQ(render_chat(t, r),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_TRUE(read_chat_template(folder_with("empty", "")).is_default);
}

TEST(ChatFiles, JinjaFileBesideTheConfig) {
  const std::string dir = folder_with("jinja", R"({"bos_token": "<bos>"})");
  write_file(dir + "/chat_template.jinja", "{{ bos_token }}{{ messages[0].content }}\n");
  const ChatTemplate t = read_chat_template(dir);
  EXPECT_FALSE(t.is_default);
  EXPECT_EQ(render_chat(t, hello()), "<bos>Hi");  // one trailing newline is dropped, as in Jinja
}

TEST(ChatFiles, TemplateFileWithAFoldersTokens) {
  const std::string dir =
      folder_with("tokens", R"({"chat_template": "ignored", "eos_token": "<eot>"})");
  const std::string file = scratch_dir("files") + "/override.jinja";
  write_file(file,
             "{% for m in messages %}[{{ m.role }}] {{ m.content }}{{ eos_token }}{% endfor %}");
  const ChatTemplate t = read_chat_template_file(file, dir);
  EXPECT_EQ(t.origin, file);
  EXPECT_EQ(render_chat(t, hello()), "[user] Hi<eot>");
  EXPECT_THROW(read_chat_template_file(file + ".missing", ""), FileError);
}

TEST(ChatFiles, BadConfigsNameTheFileAndField) {
  const std::string bad_json = folder_with("bad_json", "{not json");
  EXPECT_THROW(read_chat_template(bad_json), FileError);
  const std::string bad_token = folder_with("bad_token", R"({"eos_token": 7})");
  try {
    read_chat_template(bad_token);
    FAIL();
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("eos_token"), std::string::npos) << e.what();
  }
  const std::string bad_template = folder_with("bad_template", R"({"chat_template": 3})");
  EXPECT_THROW(read_chat_template(bad_template), FileError);
}

TEST(ChatFiles, ContextHasTheVariablesTransformersPasses) {
  ChatTemplate t;
  t.special_tokens = {{"bos_token", "<s>"}};
  ChatRequest r = hello();
  r.extra = {{"date_string", "26 Jul 2024"}, {"bos_token", "<override>"}};
  const Json c = chat_context(t, r);
  EXPECT_EQ(c["messages"], r.messages);
  EXPECT_EQ(c["add_generation_prompt"], true);
  EXPECT_TRUE(c["tools"].is_null());
  EXPECT_TRUE(c["documents"].is_null());
  EXPECT_EQ(c["bos_token"], "<override>");
  EXPECT_EQ(c["date_string"], "26 Jul 2024");
}

}  // namespace
}  // namespace llmcpu
