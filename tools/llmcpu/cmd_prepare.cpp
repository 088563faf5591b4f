// `llmcpu prepare`: text files -> llm.c token shards (NAME_val_000000.bin, NAME_train_000000.bin,
// ...) of uint16 or uint32 ids, with a progress bar on standard error when it is a terminal; JSON
// records (chat, instruction, completion, text) -> shards of whole examples, each with its spans
// sidecar of trained tokens (NAME_train_000000.spans).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/data/chat_records.h"
#include "core/data/document_split.h"
#include "core/data/prepare.h"
#include "core/tokenizer/tokenizer.h"
#include "simd/error.h"
#include "tools/llmcpu/args.h"
#include "tools/llmcpu/commands.h"
#include "tools/llmcpu/tokenizer_notes.h"

namespace llmcpu {

namespace {

std::string human_count(double v) {
  char buf[32];
  if (v >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2fG", v / 1e9);
  else if (v >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
  else if (v >= 1e3)
    std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

// One line, redrawn in place: [#####.....]  45.2%  12.3/27.1 MB  8.4 MB/s  3.21M tokens  file 3/500
void draw_bar(const PrepareProgress& p) {
  constexpr int kWidth = 30;
  const double frac = p.bytes_total ? static_cast<double>(p.bytes_done) / p.bytes_total : 1.0;
  char bar[kWidth + 1];
  const int fill = static_cast<int>(frac * kWidth);
  for (int i = 0; i < kWidth; ++i) bar[i] = i < fill ? '#' : '.';
  bar[kWidth] = 0;
  const double mbps = p.seconds > 0 ? p.bytes_done / p.seconds / 1e6 : 0;
  std::fprintf(stderr, "\rprepare: [%s] %5.1f%%  %.1f/%.1f MB  %.1f MB/s  %s tokens  file %zu/%zu ",
               bar, 100 * frac, p.bytes_done / 1e6, p.bytes_total / 1e6, mbps,
               human_count(static_cast<double>(p.tokens)).c_str(), p.files_done, p.files_total);
  std::fflush(stderr);
}

// JSON records: examples, sidecars, skipped records and their first reasons.
void print_examples(const PrepareResult& r) {
  std::printf("prepare: %llu examples, each shard with its .spans sidecar of trained tokens\n",
              static_cast<unsigned long long>(r.examples));
  if (r.approximate > 0) {
    std::fprintf(stderr,
                 "prepare: note: %llu examples had a span boundary inside a token; it went with "
                 "the text after the boundary (docs/formats.md)\n",
                 static_cast<unsigned long long>(r.approximate));
  }
  if (r.skipped == 0) return;
  std::fprintf(stderr, "prepare: skipped %llu malformed records (--skip-bad); the first:\n",
               static_cast<unsigned long long>(r.skipped));
  for (const std::string& why : r.skip_reasons) std::fprintf(stderr, "  %s\n", why.c_str());
}

class PrepareCommand : public Command {
 public:
  void add_flags(ArgParser& p) override {
    p.list_option("input", 'i', &o_.inputs, "FILE...",
                  "text files, one document each, or JSON records (.jsonl, .json), in this order");
    p.option("format", 0, &o_.format, "FORMAT",
             "text (default: text files, or JSON records with a `text` field), chat (messages or "
             "ShareGPT conversations), instruction (Alpaca) or completion (prompt, completion)");
    p.option("train-on", 0, &o_.train_on, "WHAT",
             "the trained tokens: assistant (default for chat, instruction: the assistant turns), "
             "completion (default for completion) or all");
    p.option("chat-template", 0, &o_.chat_template, "FILE",
             "a Jinja chat template (default: the tokenizer folder's; ChatML where it has none)");
    p.flag("skip-bad", 0, &o_.skip_bad,
           "leave malformed records out and count them (default: stop at the first)");
    p.option("threads", 0, &o_.threads, "N",
             "threads that encode JSON records (default: every core)", {1, 1024});
    p.option("out-dir", 'o', &o_.out_dir, "DIR", "where the shards go (created if missing)");
    p.option("name", 0, &o_.name, "NAME", "shard name prefix (default: data)");
    p.option("val-tokens", 0, &o_.val_tokens, "N",
             "tokens for validation (default: 10% of all tokens, at most one shard)",
             {0, INT64_MAX});
    p.option("shard-tokens", 0, &o_.shard_tokens, "N",
             "tokens per shard (default 100000000, as llm.c; llm.c's header counts them in an "
             "int32)",
             {1, INT32_MAX});
    p.option("split-on", 0, &o_.split_on, "HOW",
             "documents in each file: file (default), blank-lines (as llm.c's tinyshakespeare), "
             "lines, or regex:PATTERN; a document ends after its separator");
    p.option("token-bytes", 0, &token_bytes_, "N",
             "bytes per token id: 2 (uint16) or 4 (uint32, llm.c's shards for vocabularies past "
             "65536) (default: 4 for a vocabulary of more than 65536 tokens, else 2)");
    p.option("tokenizer", 0, &tokenizer_path_, "PATH",
             "tokenizer.json (or its folder), or a folder with encoder.json and vocab.bpe\n"
             "                              (default: the cache folder's tokenizer/)");
  }
  void check(const ArgParser&) override {
    if (o_.inputs.empty()) throw UsageError("prepare: --input FILE... is required");
    if (o_.out_dir.empty()) throw UsageError("prepare: --out-dir DIR is required");
    DocumentSplit{o_.split_on};  // the rule's words and pattern
    parse_data_format(o_.format);
    if (!o_.train_on.empty()) parse_train_on(o_.train_on);
    if (!token_bytes_.empty()) {
      if (token_bytes_ != "2" && token_bytes_ != "4") {
        throw UsageError("prepare: --token-bytes " + token_bytes_ + " must be 2 or 4");
      }
      o_.token_bytes = token_bytes_[0] - '0';
    }
  }
  int run(const ArgParser& p) override;

 private:
  PrepareOptions o_;
  std::string tokenizer_path_;
  std::string token_bytes_;  // --token-bytes as given: "2", "4" or empty (by the vocabulary)
};

int PrepareCommand::run(const ArgParser&) {
  const std::string tokenizer_path =
      tokenizer_path_.empty() ? default_tokenizer_dir() : tokenizer_path_;
  const Tokenizer tok = Tokenizer::load(tokenizer_path);
  print_tokenizer_notes(tok, "prepare");
  o_.tokenizer_dir = std::filesystem::is_directory(tokenizer_path)
                         ? tokenizer_path
                         : std::filesystem::path(tokenizer_path).parent_path().string();

  const bool tty = ::isatty(STDERR_FILENO);
  double last_draw = -1;
  const PrepareResult r = prepare_shards(tok, o_, [&](const PrepareProgress& pr) {
    if (!tty) return;
    if (pr.seconds - last_draw >= 0.1 || pr.bytes_done == pr.bytes_total) {
      draw_bar(pr);
      last_draw = pr.seconds;
    }
  });
  if (tty) std::fputc('\n', stderr);
  for (const std::string& note : r.notes) std::fprintf(stderr, "%s\n", note.c_str());

  std::fprintf(stderr, "prepare: %zu files, %.1f MB in %.2f s (%.1f MB/s), %s tokens\n",
               o_.inputs.size(), r.bytes / 1e6, r.seconds,
               r.seconds > 0 ? r.bytes / r.seconds / 1e6 : 0.0,
               human_count(static_cast<double>(r.val_tokens + r.train_tokens)).c_str());
  for (const std::string& f : r.val_files) std::printf("val   %s\n", f.c_str());
  for (const std::string& f : r.train_files) std::printf("train %s\n", f.c_str());
  std::printf("prepare: %llu val tokens, %llu train tokens\n",
              static_cast<unsigned long long>(r.val_tokens),
              static_cast<unsigned long long>(r.train_tokens));
  if (r.examples_mode) print_examples(r);
  for (const std::string& f : r.stale_files) {
    std::fprintf(stderr,
                 "prepare: warning: %s is left over from an earlier run (not written now)\n",
                 f.c_str());
  }
  return 0;
}

}  // namespace

std::unique_ptr<Command> make_prepare_command() { return std::make_unique<PrepareCommand>(); }

}  // namespace llmcpu
