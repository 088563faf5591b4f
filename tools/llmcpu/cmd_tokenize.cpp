// `llmcpu tokenize`: the token ids of a file (one line, separated by spaces), without special
// tokens unless --add-special-tokens; or with --decode the text that ids read from standard input
// (or a file) stand for, as the tokenizer decodes them (GPT-2's files: the exact bytes).
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/tokenizer/tokenizer.h"
#include "simd/error.h"
#include "tools/llmcpu/args.h"
#include "tools/llmcpu/commands.h"
#include "tools/llmcpu/tokenizer_notes.h"

namespace llmcpu {

namespace {

// All of a file's bytes ("-": standard input).
std::string read_all(const std::string& path) {
  FILE* f = path == "-" ? stdin : std::fopen(path.c_str(), "rb");
  if (!f) throw FileError(path, std::string("cannot open for reading: ") + std::strerror(errno));
  std::string out;
  char buf[1 << 16];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  const bool failed = std::ferror(f);
  if (f != stdin) std::fclose(f);
  if (failed) throw FileError(path == "-" ? "standard input" : path, "read failed");
  return out;
}

void write_all(const std::string& bytes) {
  if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size() ||
      std::fflush(stdout) != 0) {
    throw FileError("standard output", "write failed");
  }
}

// Ids separated by spaces, tabs or newlines.
std::vector<int> parse_ids(const std::string& text, const std::string& where) {
  std::vector<int> ids;
  size_t word = 0;
  for (size_t i = 0; i < text.size();) {
    if (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r') {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && text[end] != ' ' && text[end] != '\t' && text[end] != '\n' &&
           text[end] != '\r') {
      ++end;
    }
    ++word;
    int v = 0;
    const auto [ptr, ec] = std::from_chars(text.data() + i, text.data() + end, v);
    if (ec != std::errc() || ptr != text.data() + end) {
      throw UsageError("tokenize --decode: " + where + ": word " + std::to_string(word) + " '" +
                       text.substr(i, std::min<size_t>(end - i, 40)) + "' is not a token id");
    }
    ids.push_back(v);
    i = end;
  }
  return ids;
}

class TokenizeCommand : public Command {
 public:
  void add_flags(ArgParser& p) override {
    p.option("tokenizer", 0, &tokenizer_path_, "PATH",
             "tokenizer.json (or its folder), folder with encoder.json and vocab.bpe, or an llm.c\n"
             "                              gpt2_tokenizer.bin (decode only); default: the cache "
             "folder's tokenizer/\n"
             "                              (tools/fetch-data.sh)");
    p.flag("decode", 'd', &decode_, "ids to text");
    p.flag("add-special-tokens", 0, &add_special_,
           "add the special tokens the tokenizer puts around a text (BOS)");
    p.positionals(&files_);
  }
  void check(const ArgParser&) override {
    if (files_.size() > 1) {
      throw UsageError("tokenize: expected one FILE, got " + std::to_string(files_.size()) +
                       " (see llmcpu tokenize --help)");
    }
    if (!decode_ && files_.empty()) {
      throw UsageError(
          "tokenize: FILE is required ('-' reads standard input; see llmcpu tokenize --help)");
    }
  }
  int run(const ArgParser& p) override;

 private:
  std::string tokenizer_path_;
  bool decode_ = false, add_special_ = false;
  std::vector<std::string> files_;
};

int TokenizeCommand::run(const ArgParser&) {
  std::string tokenizer_path = tokenizer_path_;
  const bool decode = decode_;
  if (tokenizer_path.empty()) tokenizer_path = default_tokenizer_dir();
  const Tokenizer tok = Tokenizer::load(tokenizer_path);
  print_tokenizer_notes(tok, "tokenize");

  if (decode) {
    const std::string src = files_.empty() ? "-" : files_[0];
    const std::vector<int> ids = parse_ids(read_all(src), src == "-" ? "standard input" : src);
    write_all(tok.decode(ids.data(), ids.size()));
    return 0;
  }
  if (!tok.can_encode()) {
    throw UsageError(
        "tokenize: " + tokenizer_path +
        " can only decode (an llm.c gpt2_tokenizer.bin); encoding needs a tokenizer.json "
        "or a folder with encoder.json and vocab.bpe");
  }
  const std::vector<int> ids = tok.encode(read_all(files_[0]), add_special_);
  std::string out;
  out.reserve(ids.size() * 6 + 1);
  char num[16];
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ' ';
    const auto [end, ec] = std::to_chars(num, num + sizeof num, ids[i]);
    out.append(num, end);
  }
  out += '\n';
  write_all(out);
  return 0;
}

}  // namespace

std::unique_ptr<Command> make_tokenize_command() { return std::make_unique<TokenizeCommand>(); }

}  // namespace llmcpu
