#include "core/data/record_prepare.h"

#include <omp.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>

#include "core/chat/chat_template.h"
#include "core/data/chat_records.h"
#include "core/data/chat_render.h"
#include "core/data/example_tokens.h"
#include "core/data/records.h"

namespace llmcpu {

namespace {

constexpr size_t kBatchRecords = 4096;  // records encoded together, then added in order
constexpr size_t kReasonsKept = 5;      // --skip-bad: the first reasons, for the report

struct Setup {
  DataFormat format = DataFormat::kText;
  TrainOn train_on = TrainOn::kAll;
  std::optional<ChatTemplate> chat;
  std::unique_ptr<ChatRenderer> renderer;
};

// What one record became: an example, or the reason it is bad, or an error that stops the run.
struct Outcome {
  TokenizedExample example;
  bool rendered = false;  // through the chat template
  std::optional<RecordError> bad;
  std::exception_ptr fatal;
};

TrainOn checked_train_on(DataFormat f, const std::string& value) {
  const TrainOn t = value.empty() ? default_train_on(f) : parse_train_on(value);
  const bool ok =
      t == TrainOn::kAll ||
      (t == TrainOn::kAssistant && (f == DataFormat::kChat || f == DataFormat::kInstruction)) ||
      (t == TrainOn::kCompletion && f == DataFormat::kCompletion);
  if (!ok) {
    throw UsageError(std::string("--train-on ") + value + " does not apply to --format " +
                     data_format_name(f) +
                     ": chat and instruction take assistant or all, completion takes completion "
                     "or all, text takes all");
  }
  return t;
}

Setup make_setup(const PrepareOptions& o) {
  Setup s;
  s.format = parse_data_format(o.format);
  s.train_on = checked_train_on(s.format, o.train_on);
  if (s.format == DataFormat::kText) return s;
  s.chat = o.chat_template.empty() ? read_chat_template(o.tokenizer_dir)
                                   : read_chat_template_file(o.chat_template, o.tokenizer_dir);
  s.renderer = std::make_unique<ChatRenderer>(*s.chat);
  return s;
}

std::string default_template_note(const PrepareOptions& o) {
  return "prepare: " + o.tokenizer_dir +
         " has no chat template (tokenizer_config.json's chat_template, chat_template.jinja or "
         "chat_template.json): conversations are rendered with the built-in ChatML template; "
         "give --chat-template FILE for another";
}

Outcome encode_record(const Setup& s, const Tokenizer& tok, const RecordFile& f, size_t i) {
  Outcome o;
  try {
    const std::string where = f.where(i);
    const RecordContent c = read_record(f.parse(i), s.format, where);
    const bool all = s.train_on == TrainOn::kAll;
    if (!c.messages.is_null()) {
      const RenderedText r =
          c.prompt_messages > 0 && !all
              ? s.renderer->prompt_completion(c.messages, c.prompt_messages, where)
              : s.renderer->conversation(c.messages, !all, where);
      o.example = tokenize_rendered(tok, r);
      if (all) o.example.spans = all_but_first(o.example.ids.size());
      o.rendered = true;
    } else if (s.format == DataFormat::kCompletion) {
      o.example = tokenize_prompt_completion(tok, c.prompt, c.completion, all);
    } else {
      o.example = tokenize_document(tok, c.text);
    }
    if (o.example.ids.empty()) throw RecordError(where, "", "renders to no tokens");
  } catch (const RecordError& e) {
    o.bad = e;
  } catch (...) {
    o.fatal = std::current_exception();
  }
  return o;
}

// Adds one outcome, in input order.
void add_outcome(RecordRun& run, Outcome& o, bool& rendered) {
  if (o.fatal) std::rethrow_exception(o.fatal);
  PrepareResult& r = run.result;
  if (o.bad) {
    if (!run.options.skip_bad) throw *o.bad;
    ++r.skipped;
    if (r.skip_reasons.size() < kReasonsKept) r.skip_reasons.push_back(o.bad->what());
    return;
  }
  const TokenizedExample& e = o.example;
  run.writer.add_example(e.ids.data(), e.ids.size(), e.spans);
  ++r.examples;
  r.approximate += !e.exact;
  rendered |= o.rendered;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

bool is_json_input(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  return ext == ".jsonl" || ext == ".json";
}

void prepare_records(RecordRun& run) {
  const PrepareOptions& o = run.options;
  const Setup s = make_setup(o);
  const int threads = o.threads > 0 ? o.threads : omp_get_max_threads();
  const bool chat_format = s.format == DataFormat::kChat || s.format == DataFormat::kInstruction;
  if (s.chat && s.chat->is_default && chat_format)
    run.result.notes.push_back(default_template_note(o));
  bool rendered = false;
  uint64_t bytes_before = 0;
  PrepareProgress& p = run.progress;
  for (const std::string& in : o.inputs) {
    const RecordFile f(in);
    std::vector<Outcome> out;
    for (size_t first = 0; first < f.size(); first += kBatchRecords) {
      const size_t n = std::min(kBatchRecords, f.size() - first);
      out.assign(n, Outcome{});
#pragma omp parallel for num_threads(threads) schedule(dynamic, 8)
      for (size_t k = 0; k < n; ++k) out[k] = encode_record(s, run.tokenizer, f, first + k);
      for (Outcome& one : out) add_outcome(run, one, rendered);
      p.bytes_done = bytes_before + f.bytes_through(first + n - 1);
      p.tokens = run.writer.total_tokens();
      p.seconds = seconds_since(run.start);
      if (first + n == f.size()) ++p.files_done;
      if (run.report) run.report(p);
    }
    bytes_before += std::filesystem::file_size(in);
  }
  if (s.chat && s.chat->is_default && !chat_format && rendered) {
    run.result.notes.push_back(default_template_note(o));
  }
}

}  // namespace llmcpu
