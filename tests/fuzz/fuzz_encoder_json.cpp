// Fuzz target: GPT-2's encoder.json (core/tokenizer/json_vocab.h, and the tokenizer loader that
// checks its ids and byte alphabet). The input is the file. It is parsed in memory, then loaded as
// a tokenizer folder beside the tiny tokenizer's vocab.bpe (tiny_tokenizer/); a tokenizer that
// loads must round-trip a fixed text and the input itself (tokenizer_checks.h).
#include <filesystem>
#include <string_view>

#include "core/tokenizer/json_vocab.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/tokenizer_checks.h"

namespace {
constexpr const char* kTarget = "encoder_json";
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace llmcpu;
  std::filesystem::create_directory(fuzz::scratch_dir() + "/tok");
  fuzz::write_file("tok/vocab.bpe", fuzz::read_file(fuzz::source_dir() + "/tiny_tokenizer/vocab.bpe"));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llmcpu;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  size_t entries = 0;
  if (!fuzz::accepts([&] { entries = parse_json_vocab(text, "encoder.json").size(); })) return 0;
  fuzz::write_file("tok/encoder.json", text);
  const std::string dir = fuzz::scratch_dir() + "/tok";
  std::unique_ptr<Tokenizer> tok;
  if (!fuzz::accepts([&] { tok = std::make_unique<Tokenizer>(Tokenizer::load(dir)); })) return 0;
  LLMCPU_FUZZ_CHECK(kTarget, size_t(tok->vocab_size()) == entries,
                    "the vocabulary size is not the number of keys");
  fuzz::check_decode_bounds(kTarget, *tok);
  fuzz::check_round_trip(kTarget, *tok, "the then  there, they'll say \xc3\xa9 \xff!");
  fuzz::check_round_trip(kTarget, *tok, text);
  return 0;
}
