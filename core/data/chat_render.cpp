#include "core/data/chat_render.h"

#include <string_view>

namespace llmcpu {

namespace {

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

ChatRenderer::ChatRenderer(const ChatTemplate& t) : template_(t), jinja_(t.source, t.origin) {}

std::string ChatRenderer::render(const Json& messages, size_t n, bool generation_prompt,
                                 const std::string& where) const {
  ChatRequest request;
  request.add_generation_prompt = generation_prompt;
  // The messages go in after chat_context has made the context (in their place, first), so that
  // they are copied once, not twice.
  Json context = chat_context(template_, request);
  context["messages"] = Json(messages.begin(), messages.begin() + static_cast<ptrdiff_t>(n));
  try {
    return jinja_.render(context);
  } catch (const TemplateError& e) {
    throw RecordError(where, "messages",
                      "the chat template failed on the first " + std::to_string(n) + " messages" +
                          (generation_prompt ? " with a generation prompt" : "") + ": " + e.what());
  }
}

RenderedText ChatRenderer::conversation(const Json& messages, bool assistant_spans,
                                        const std::string& where) const {
  RenderedText r;
  r.text = render(messages, messages.size(), false, where);
  if (!assistant_spans) return r;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].value("role", "") != "assistant") continue;
    const std::string a = render(messages, i, true, where);
    const std::string b = i + 1 == messages.size() ? r.text : render(messages, i + 1, false, where);
    const std::string turn = "messages[" + std::to_string(i) + "]";
    if (!starts_with(r.text, b) || !starts_with(b, a)) {
      throw RecordError(
          where, turn,
          !starts_with(r.text, b)
              ? "the chat template renders the conversation up to this assistant turn differently "
                "when later turns follow, so the turn's tokens cannot be found in the whole"
              : "the chat template's generation prompt before this assistant turn is not how the "
                "turn itself starts, so the turn's tokens cannot be found");
    }
    if (b.size() > a.size()) r.spans.push_back({a.size(), b.size()});
  }
  return r;
}

RenderedText ChatRenderer::prompt_completion(const Json& messages, size_t prompt_messages,
                                             const std::string& where) const {
  RenderedText r;
  r.text = render(messages, messages.size(), false, where);
  const std::string a = render(messages, prompt_messages, true, where);
  if (!starts_with(r.text, a)) {
    throw RecordError(where, "completion",
                      "the chat template renders the prompt with a generation prompt differently "
                      "from the start of prompt + completion, so the completion's tokens cannot "
                      "be found");
  }
  if (r.text.size() > a.size()) r.spans.push_back({a.size(), r.text.size()});
  return r;
}

}  // namespace llmcpu
