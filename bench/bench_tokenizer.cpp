// GPT-2 tokenizer speed on one core: encode and decode MB/s (bytes of text per second) on realistic
// English, the Brown corpus as tools/fetch-data.sh leaves it in the cache (all 500 texts, about 6
// MB), or, without it, a generated English-like text of the same size.
//   ./build/bench_tokenizer
// Encode/first_pass starts each iteration from a fresh tokenizer (empty merge cache, as `llmcpu
// prepare` on new text); Encode/warm reuses one, so most pieces are cache hits.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/tokenizer/tokenizer.h"

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
    }
    if (c.text.empty()) {
      c.text = generated_text(6'000'000);
      c.what = "generated English-like text (run tools/fetch-data.sh for the Brown corpus)";
    } else {
      c.what = "Brown corpus, " + std::to_string(files.size()) + " texts";
    }
    std::printf("text: %s, %zu bytes\n", c.what.c_str(), c.text.size());
    return c;
  }();
  return c;
}

// The cache's GPT-2 tokenizer, or nothing (and the benchmark marked skipped) when it is missing.
std::optional<Tokenizer> load(benchmark::State& state) {
  try {
    return Tokenizer::load(default_tokenizer_dir());
  } catch (const std::exception& e) {
    state.SkipWithError((std::string(e.what()) + " (run tools/fetch-data.sh)").c_str());
    return std::nullopt;
  }
}

void report(benchmark::State& state, size_t bytes, size_t tokens) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["bytes/token"] = static_cast<double>(bytes) / static_cast<double>(tokens);
}

// A fresh tokenizer each iteration: every distinct piece goes through BPE once.
void BM_EncodeFirstPass(benchmark::State& state) {
  const std::string& text = corpus().text;
  size_t tokens = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::optional<Tokenizer> tok = load(state);
    if (!tok) break;
    state.ResumeTiming();
    tokens = tok->encode(text).size();
  }
  if (tokens) report(state, text.size(), tokens);
}

// One tokenizer, its merge cache warm after the first iteration.
void BM_EncodeWarm(benchmark::State& state) {
  const std::string& text = corpus().text;
  std::optional<Tokenizer> tok = load(state);
  if (!tok) return;
  size_t tokens = tok->encode(text).size();
  for (auto _ : state) {
    std::vector<int> ids = tok->encode(text);
    benchmark::DoNotOptimize(ids.data());
    tokens = ids.size();
  }
  report(state, text.size(), tokens);
}

// Bytes of text produced per second.
void BM_Decode(benchmark::State& state) {
  const std::string& text = corpus().text;
  std::optional<Tokenizer> tok = load(state);
  if (!tok) return;
  const std::vector<int> ids = tok->encode(text);
  for (auto _ : state) {
    std::string out = tok->decode(ids.data(), ids.size());
    benchmark::DoNotOptimize(out.data());
  }
  report(state, text.size(), ids.size());
}

BENCHMARK(BM_EncodeFirstPass)
    ->Name("Encode/first_pass")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_EncodeWarm)->Name("Encode/warm")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Decode)->Name("Decode")->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace llmcpu

BENCHMARK_MAIN();
