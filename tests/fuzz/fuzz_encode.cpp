// Fuzz target: the GPT-2 tokenizer's encoder on arbitrary bytes (core/tokenizer/tokenizer.h:
// pre-tokenisation with PCRE2, the byte alphabet, the merges), with GPT-2's real vocabulary from
// the cache folder that tools/fetch-data.sh fills (default_tokenizer_dir(): $LLMCPU_CACHE/tokenizer,
// else $XDG_CACHE_HOME/llmcpu/tokenizer, else ~/.cache/llmcpu/tokenizer). The input is the text;
// its ids must lie in the vocabulary, decode back to exactly the input, and be the same when the
// text is encoded a second time (through the merge cache) and when appended after other ids.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "core/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/tokenizer_checks.h"

namespace {

constexpr const char* kTarget = "encode";
const llmcpu::Tokenizer* gpt2 = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace llmcpu;
  try {
    gpt2 = new Tokenizer(Tokenizer::load(default_tokenizer_dir()));
  } catch (const Error& e) {
    std::fprintf(stderr,
                 "fuzz_encode: needs GPT-2's encoder.json and vocab.bpe: %s\n"
                 "fuzz_encode: fetch them with tools/fetch-data.sh (or set LLMCPU_CACHE to the "
                 "cache folder that holds tokenizer/)\n",
                 e.what());
    std::exit(2);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llmcpu;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  fuzz::check_round_trip(kTarget, *gpt2, text);
  const std::vector<int> first = gpt2->encode(text);
  LLMCPU_FUZZ_CHECK(kTarget, gpt2->encode(text) == first, "a second encode differs");
  std::vector<int> appended = {gpt2->eot_token()};
  gpt2->encode_append(text, appended);
  LLMCPU_FUZZ_CHECK(kTarget, std::vector<int>(appended.begin() + 1, appended.end()) == first,
                    "encode_append differs from encode");
  return 0;
}
