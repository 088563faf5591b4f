// Fuzz target: GPT-2's vocab.bpe (the merges, core/tokenizer/tokenizer.cpp's loader and
// core/tokenizer/bpe.h). The input is the file, loaded as a tokenizer folder beside the tiny
// tokenizer's encoder.json (tiny_tokenizer/); a tokenizer that loads must round-trip a fixed text
// and the input itself (tokenizer_checks.h).
#include <filesystem>
#include <memory>

#include "core/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/tokenizer_checks.h"

namespace {
constexpr const char* kTarget = "vocab_bpe";
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace llmcpu;
  std::filesystem::create_directory(fuzz::scratch_dir() + "/tok");
  fuzz::write_file("tok/encoder.json",
                   fuzz::read_file(fuzz::source_dir() + "/tiny_tokenizer/encoder.json"));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llmcpu;
  fuzz::write_file("tok/vocab.bpe", data, size);
  std::unique_ptr<Tokenizer> tok;
  const std::string dir = fuzz::scratch_dir() + "/tok";
  if (!fuzz::accepts([&] { tok = std::make_unique<Tokenizer>(Tokenizer::load(dir)); })) return 0;
  fuzz::check_decode_bounds(kTarget, *tok);
  fuzz::check_round_trip(kTarget, *tok, "the then  there, they'll say \xc3\xa9 \xff!");
  fuzz::check_round_trip(kTarget, *tok,
                         std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
