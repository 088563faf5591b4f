// Tokenizer speed: encode MB/s (bytes of text per second) on realistic English, the Brown corpus as
// tools/fetch-data.sh leaves it in the cache (all 500 texts, about 6 MB), or, without it, a
// generated English-like text of the same size. Tokenizers, all with GPT-2's vocabulary and merges
// from the cache folder (default_tokenizer_dir()):
//   gpt2_files    GPT-2's encoder.json + vocab.bpe (one merge cache, shared by all threads);
//   gpt2_json     the same as a tokenizer.json: ByteLevel with GPT-2's pattern;
//   llama3_json   Llama 3's layout: Split by Llama 3's pattern, ByteLevel without its own,
//                 ignore_merges;
//   qwen2_json    Qwen2's layout: the NFC normalizer, Split by Qwen2's pattern (one digit per
//                 piece), ByteLevel without its own;
//   sp_json       Llama 2's SentencePiece layout: normalizer Prepend("▁") + Replace(" " -> "▁"), no
//                 pre-tokenizer (the whole text is one piece for BPE), byte_fallback. Its
//                 vocabulary is GPT-2's read as SentencePiece pieces: every token whose bytes are
//                 valid UTF-8, spaces as "▁", and the merges between such tokens, in GPT-2's order,
//                 plus <unk>, <s>, </s> and the 256 byte tokens <0x00>..<0xFF>.
// The tokenizer.json files are written into a scratch folder at start-up. Rows per tokenizer:
//   Encode/T/first_pass   a fresh tokenizer each iteration (every distinct piece goes through
//                         BPE once, as `llmcpu prepare` on new text), one thread;
//   Encode/T/warm         one tokenizer again and again: most pieces come from the cache;
//   Encode/T/all_threads_first_pass, Encode/T/all_threads_warm: the text cut (at line ends) into
//                         one slice per hardware thread, each thread encoding its slice with the
//                         same tokenizer; the threads live across iterations, so a tokenizer.json's
//                         per-thread caches stay warm;
//   Encode/T/per_document one tokenizer, each of the 500 texts encoded on its own in turn (as
//                         `llmcpu prepare` encodes a tokenizer.json's documents whole), warm;
//   Encode/T/repeated_char_1MB, Encode/T/random_word_1MB: one piece of 10^6 bytes ("aaa...", or
//                         random letters a-z), BPE's worst case: must take seconds, not minutes;
//   Decode/T              the ids of the text back to text.
// The MB counter is 10^6 bytes of text per second of wall-clock time (Google Benchmark's
// bytes_per_second is in MiB/s).
//   ./build/bench_tokenizer --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/unicode_text.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;

// English-like filler: common words, capitals, punctuation, numbers and line breaks.
std::string generated_text(size_t bytes) {
  const char* words[] = {
      "the",   "of",      "and",     "to",     "in",      "that",  "was",      "he",      "for",
      "it",    "with",    "as",      "his",    "on",      "be",    "at",       "by",      "had",
      "not",   "are",     "but",     "from",   "or",      "have",  "an",       "they",    "which",
      "one",   "you",     "were",    "her",    "all",     "she",   "there",    "would",   "their",
      "we",    "him",     "been",    "has",    "when",    "who",   "will",     "more",    "no",
      "if",    "out",     "so",      "said",   "what",    "up",    "its",      "about",   "into",
      "than",  "them",    "can",     "only",   "other",   "new",   "some",     "could",   "time",
      "these", "two",     "may",     "then",   "do",      "first", "any",      "my",      "now",
      "such",  "like",    "our",     "over",   "man",     "me",    "even",     "most",    "made",
      "after", "also",    "did",     "many",   "before",  "must",  "through",  "back",    "years",
      "where", "much",    "your",    "way",    "well",    "down",  "should",   "because", "each",
      "just",  "those",   "people",  "Mr.",    "how",     "too",   "little",   "state",   "good",
      "very",  "make",    "world",   "still",  "own",     "see",   "men",      "work",    "long",
      "get",   "here",    "between", "both",   "life",    "being", "under",    "never",   "day",
      "same",  "another", "know",    "while",  "last",    "might", "us",       "great",   "old",
      "year",  "off",     "come",    "since",  "against", "go",    "came",     "right",   "used",
      "take",  "three",   "Fulton",  "County", "Atlanta", "jury",  "election", "Georgia"};
  const size_t nwords = sizeof(words) / sizeof(words[0]);
  uint64_t s = 42;
  auto next = [&s] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(s >> 33);
  };
  std::string text;
  bool sentence_start = true;
  while (text.size() < bytes) {
    std::string w = words[next() % nwords];
    if (sentence_start) w[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(w[0])));
    if (next() % 40 == 0) w = std::to_string(next() % 2000);
    text += w;
    sentence_start = false;
    const uint32_t r = next() % 100;
    if (r < 6) text += ",";
    if (r >= 94) {
      text += r == 99 ? "?" : ".";
      sentence_start = true;
      if (next() % 6 == 0) text += "\n\n";
    }
    if (text.back() != '\n') text += ' ';
  }
  return text;
}

struct Corpus {
  std::string text, what;
  std::vector<size_t> ends;  // where each text (document) ends in `text`
  std::vector<std::string_view> documents() const {
    std::vector<std::string_view> out;
    size_t begin = 0;
    for (const size_t end : ends) {
      out.push_back(std::string_view(text).substr(begin, end - begin));
      begin = end;
    }
    return out;
  }
};

const Corpus& corpus() {
  static const Corpus c = [] {
    Corpus c;
    std::string dir;
    try {
      dir = cache_dir() + "/brown/text";
    } catch (const std::exception&) {
    }
    std::vector<fs::path> files;
    if (!dir.empty() && fs::is_directory(dir)) {
      for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      std::ifstream in(f, std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      c.text += ss.str();
      c.ends.push_back(c.text.size());
    }
    if (c.text.empty()) {
      c.text = generated_text(6'000'000);
      for (size_t end = 12'000; end < c.text.size(); end += 12'000) c.ends.push_back(end);
      c.ends.push_back(c.text.size());
      c.what = "generated English-like text (run tools/fetch-data.sh for the Brown corpus)";
    } else {
      c.what = "Brown corpus, " + std::to_string(files.size()) + " texts";
    }
    std::printf("text: %s, %zu bytes\n", c.what.c_str(), c.text.size());
    return c;
  }();
  return c;
}

// The Brown text cut into `n` slices of about equal size, each ending at a line end.
std::vector<std::string_view> slices(std::string_view text, int n) {
  std::vector<std::string_view> out;
  size_t begin = 0;
  for (int i = 1; i <= n; ++i) {
    size_t end = text.size() * static_cast<size_t>(i) / static_cast<size_t>(n);
    if (i < n) {
      const size_t nl = text.find('\n', end);
      end = nl == std::string_view::npos ? text.size() : nl + 1;
    }
    end = std::max(end, begin);
    out.push_back(text.substr(begin, end - begin));
    begin = end;
  }
  return out;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ---- tokenizer.json files made from GPT-2's encoder.json and vocab.bpe --------------------------

using Json = nlohmann::json;

const char* const kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kMeta = "\xE2\x96\x81";  // U+2581, SentencePiece's space

Json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", true},
          {"use_regex", use_regex}};
}

Json split(const char* pattern) {
  return {{"type", "Split"},
          {"pattern", {{"Regex", pattern}}},
          {"behavior", "Isolated"},
          {"invert", false}};
}

Json added_token(int id, const std::string& content) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

Json bpe(Json vocab, Json merges, bool ignore_merges, bool byte_fallback, const Json& unk) {
  return {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", unk},
          {"continuing_subword_prefix", nullptr},
          {"end_of_word_suffix", nullptr},
          {"fuse_unk", !unk.is_null()},
          {"byte_fallback", byte_fallback},
          {"ignore_merges", ignore_merges},
          {"vocab", std::move(vocab)},
          {"merges", std::move(merges)}};
}

Json document(Json added, Json normalizer, Json pre, Json decoder, Json model) {
  return {{"version", "1.0"},          {"truncation", nullptr},
          {"padding", nullptr},        {"added_tokens", std::move(added)},
          {"normalizer", normalizer},  {"pre_tokenizer", std::move(pre)},
          {"post_processor", nullptr}, {"decoder", std::move(decoder)},
          {"model", std::move(model)}};
}

// A GPT-2 token (in GPT-2's byte alphabet) as the bytes it stands for; nullopt for a character
// outside the alphabet.
std::optional<std::string> token_bytes(const std::string& token, const std::vector<int>& byte_of) {
  std::string bytes;
  for (size_t pos = 0; pos < token.size();) {
    const unicode::CodePoint c = unicode::decode_at(token, pos);
    if (c.cp >= byte_of.size() || byte_of[c.cp] < 0) return std::nullopt;
    bytes += static_cast<char>(byte_of[c.cp]);
    pos += static_cast<size_t>(c.bytes);
  }
  return bytes;
}

// GPT-2's vocabulary and merges as SentencePiece pieces (see the top of the file).
void sentencepiece_data(const Json& encoder, const std::vector<std::string>& merges, Json& vocab,
                        Json& sp_merges) {
  std::vector<int> byte_of(512, -1);
  for (int b = 0; b < 256; ++b) {
    byte_of[static_cast<size_t>(byte_to_unicode(static_cast<unsigned char>(b)))] = b;
  }
  // A GPT-2 token as a piece: its bytes, when valid UTF-8, with spaces as "▁".
  const auto piece = [&](const std::string& token) -> std::optional<std::string> {
    const std::optional<std::string> bytes = token_bytes(token, byte_of);
    std::string fixed;
    if (!bytes || bytes->empty() || !unicode::to_valid_utf8(*bytes, fixed)) return std::nullopt;
    std::string p;
    for (const char c : *bytes) p += c == ' ' ? std::string(kMeta) : std::string(1, c);
    return p;
  };
  vocab = Json::object();
  int next = 0;
  for (const char* t : {"<unk>", "<s>", "</s>"}) vocab[t] = next++;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = next++;
  }
  std::vector<std::pair<int, std::string>> by_id;
  for (const auto& [token, id] : encoder.items()) by_id.emplace_back(id.get<int>(), token);
  std::sort(by_id.begin(), by_id.end());
  for (const auto& [id, token] : by_id) {
    if (token == "<|endoftext|>") continue;
    if (const auto p = piece(token); p && !vocab.contains(*p)) vocab[*p] = next++;
  }
  sp_merges = Json::array();
  for (const std::string& m : merges) {
    const size_t sp = m.find(' ');
    const auto a = piece(m.substr(0, sp)), b = piece(m.substr(sp + 1));
    if (a && b && vocab.contains(*a + *b)) sp_merges.push_back(*a + " " + *b);
  }
}

// The tokenizers of the benchmark: GPT-2's folder, and a scratch folder holding the tokenizer.json
// files made from it (removed at exit).
struct Setup {
  std::string error;  // why there are none
  std::string gpt2_files;
  std::vector<std::pair<std::string, std::string>> json;  // name, path
  std::string scratch;
};

const Setup& setup() {
  static const Setup s = [] {
    Setup s;
    try {
      s.gpt2_files = default_tokenizer_dir();
    } catch (const std::exception& e) {
      s.error = e.what();
      return s;
    }
    const fs::path dir = s.gpt2_files;
    if (!fs::is_regular_file(dir / "encoder.json") || !fs::is_regular_file(dir / "vocab.bpe")) {
      s.error = "no encoder.json and vocab.bpe in " + s.gpt2_files + " (run tools/fetch-data.sh)";
      return s;
    }
    const Json encoder = Json::parse(read_file(dir / "encoder.json"));
    std::vector<std::string> merges;
    {
      std::istringstream in(read_file(dir / "vocab.bpe"));
      std::string line;
      while (std::getline(in, line)) {
        if (!line.empty() && line[0] != '#') merges.push_back(line);
      }
    }
    const Json added =
        Json::array({added_token(encoder.at("<|endoftext|>").get<int>(), "<|endoftext|>")});
    const Json gpt2_merges = merges;
    Json sp_vocab, sp_merges;
    sentencepiece_data(encoder, merges, sp_vocab, sp_merges);
    const Json sp_normalizer = {
        {"type", "Sequence"},
        {"normalizers",
         Json::array(
             {Json{{"type", "Prepend"}, {"prepend", kMeta}},
              Json{{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMeta}}})}};
    const Json sp_decoder = {
        {"type", "Sequence"},
        {"decoders",
         Json::array({Json{{"type", "Replace"}, {"pattern", {{"String", kMeta}}}, {"content", " "}},
                      Json{{"type", "ByteFallback"}}, Json{{"type", "Fuse"}},
                      Json{{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
    const auto split_then_byte_level = [](const char* pattern) {
      return Json{{"type", "Sequence"},
                  {"pretokenizers", Json::array({split(pattern), byte_level(false)})}};
    };
    const std::pair<const char*, Json> docs[] = {
        {"gpt2_json", document(added, nullptr, byte_level(true), byte_level(true),
                               bpe(encoder, gpt2_merges, false, false, nullptr))},
        {"llama3_json",
         document(added, nullptr, split_then_byte_level(kLlama3Pattern), byte_level(true),
                  bpe(encoder, gpt2_merges, true, false, nullptr))},
        {"qwen2_json",
         document(added, Json{{"type", "NFC"}}, split_then_byte_level(kQwen2Pattern),
                  byte_level(true), bpe(encoder, gpt2_merges, false, false, nullptr))},
        {"sp_json",
         document(
             Json::array({added_token(0, "<unk>"), added_token(1, "<s>"), added_token(2, "</s>")}),
             sp_normalizer, nullptr, sp_decoder, bpe(sp_vocab, sp_merges, false, true, "<unk>"))},
    };
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/llmcpu-bench-XXXXXX";
    if (!::mkdtemp(pattern.data())) {
      s.error = "cannot make a scratch folder " + pattern;
      return s;
    }
    s.scratch = pattern;
    // (A copy that outlives `s`: the handler runs after the static holding `s` is destroyed.)
    static const std::string* const scratch = new std::string(pattern);
    std::atexit([] {
      std::error_code ignored;
      fs::remove_all(*scratch, ignored);
    });
    for (const auto& [name, doc] : docs) {
      const fs::path path = fs::path(s.scratch) / (std::string(name) + ".json");
      std::ofstream(path, std::ios::binary) << doc.dump();
      s.json.emplace_back(name, path.string());
    }
    std::printf("tokenizer.json files in %s; sp_json: %zu pieces, %zu merges (GPT-2: %zu, %zu)\n",
                s.scratch.c_str(), sp_vocab.size(), sp_merges.size(), encoder.size(),
                merges.size());
    return s;
  }();
  return s;
}

// The tokenizer at `path`, or nothing (and the benchmark marked skipped).
std::optional<Tokenizer> load(benchmark::State& state, const std::string& path) {
  if (!setup().error.empty()) {
    state.SkipWithError(setup().error.c_str());
    return std::nullopt;
  }
  try {
    return Tokenizer::load(path);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return std::nullopt;
  }
}

void report(benchmark::State& state, size_t bytes, size_t tokens) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.counters["MB"] = benchmark::Counter(static_cast<double>(bytes) / 1e6,
                                            benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["bytes/token"] = static_cast<double>(bytes) / static_cast<double>(tokens);
}

// Threads that live as long as the pool: run(f) calls f(i) on thread i, for every i at once, and
// returns when all are done. A thread keeps its thread_local state (a tokenizer.json's cache)
// from one run to the next.
class ThreadPool {
 public:
  explicit ThreadPool(int n) : start_(n + 1), done_(n + 1) {
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this, i] {
        for (;;) {
          start_.arrive_and_wait();
          if (stop_) return;
          (*work_)(i);
          done_.arrive_and_wait();
        }
      });
    }
  }
  ~ThreadPool() {
    stop_ = true;
    start_.arrive_and_wait();
    for (std::thread& t : threads_) t.join();
  }
  int size() const { return static_cast<int>(threads_.size()); }
  void run(const std::function<void(int)>& work) {
    work_ = &work;
    start_.arrive_and_wait();
    done_.arrive_and_wait();
  }

 private:
  std::barrier<> start_, done_;
  std::vector<std::thread> threads_;
  const std::function<void(int)>* work_ = nullptr;
  std::atomic<bool> stop_{false};
};

ThreadPool& pool() {
  static ThreadPool p(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  return p;
}

// Encodes `text` with a fresh tokenizer each iteration (first_pass) or one tokenizer (warm), on
// this thread or on all of the pool's threads (one slice each).
void encode_rows(benchmark::State& state, const std::string& path, bool first_pass, bool threads) {
  const std::string& text = corpus().text;
  const std::vector<std::string_view> parts =
      threads ? slices(text, pool().size()) : std::vector<std::string_view>{text};
  std::vector<size_t> counts(parts.size());
  std::optional<Tokenizer> tok = load(state, path);
  if (!tok) return;
  const std::function<void(int)> work = [&](int i) {
    counts[static_cast<size_t>(i)] = tok->encode(parts[static_cast<size_t>(i)]).size();
  };
  const auto encode_all = [&] {
    if (threads) {
      pool().run(work);
    } else {
      work(0);
    }
  };
  if (!first_pass) encode_all();  // warm the cache(s)
  for (auto _ : state) {
    if (first_pass) {
      state.PauseTiming();
      tok = load(state, path);
      state.ResumeTiming();
    }
    encode_all();
  }
  size_t tokens = 0;
  for (const size_t c : counts) tokens += c;
  report(state, text.size(), tokens);
  state.counters["threads"] = static_cast<double>(parts.size());
}

// Each text of the corpus on its own, in turn (as `llmcpu prepare` encodes documents), with one
// tokenizer (warm after the first iteration).
void per_document_row(benchmark::State& state, const std::string& path) {
  const std::vector<std::string_view> docs = corpus().documents();
  std::optional<Tokenizer> tok = load(state, path);
  if (!tok) return;
  std::vector<int> ids;
  const auto encode_all = [&] {
    ids.clear();
    for (const std::string_view d : docs) tok->encode_append(d, ids);
  };
  encode_all();
  for (auto _ : state) encode_all();
  report(state, corpus().text.size(), ids.size());
  state.counters["documents"] = static_cast<double>(docs.size());
}

// One piece of 10^6 bytes: `c` repeated, or (c == 0) random letters a-z.
void long_word_row(benchmark::State& state, const std::string& path, char c) {
  std::string text(1'000'000, c);
  if (c == 0) {
    uint64_t s = 7;
    for (char& ch : text) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      ch = static_cast<char>('a' + (s >> 33) % 26);
    }
  }
  std::optional<Tokenizer> tok = load(state, path);
  if (!tok) return;
  size_t tokens = 0;
  for (auto _ : state) tokens = tok->encode(text).size();
  report(state, text.size(), tokens);
}

void decode_row(benchmark::State& state, const std::string& path) {
  const std::string& text = corpus().text;
  std::optional<Tokenizer> tok = load(state, path);
  if (!tok) return;
  const std::vector<int> ids = tok->encode(text);
  for (auto _ : state) {
    std::string out = tok->decode(ids.data(), ids.size());
    benchmark::DoNotOptimize(out.data());
  }
  report(state, text.size(), ids.size());
}

void register_rows() {
  std::vector<std::pair<std::string, std::string>> tokenizers = {
      {"gpt2_files", setup().gpt2_files}};
  for (const auto& t : setup().json) tokenizers.push_back(t);
  if (!setup().error.empty()) tokenizers = {{"gpt2_files", ""}};
  for (const auto& [name, path] : tokenizers) {
    const auto add = [&](const std::string& row, auto fn) {
      benchmark::RegisterBenchmark(("Encode/" + name + "/" + row).c_str(), fn)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    };
    const std::string p = path;
    add("first_pass", [p](benchmark::State& s) { encode_rows(s, p, true, false); });
    add("warm", [p](benchmark::State& s) { encode_rows(s, p, false, false); });
    add("all_threads_first_pass", [p](benchmark::State& s) { encode_rows(s, p, true, true); });
    add("all_threads_warm", [p](benchmark::State& s) { encode_rows(s, p, false, true); });
    add("per_document", [p](benchmark::State& s) { per_document_row(s, p); });
    add("repeated_char_1MB", [p](benchmark::State& s) { long_word_row(s, p, 'a'); });
    add("random_word_1MB", [p](benchmark::State& s) { long_word_row(s, p, 0); });
    benchmark::RegisterBenchmark(("Decode/" + name).c_str(),
                                 [p](benchmark::State& s) { decode_row(s, p); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
}

}  // namespace
}  // namespace llmcpu

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  llmcpu::register_rows();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
