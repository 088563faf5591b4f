// Fuzz target: llm.c's gpt2_tokenizer.bin (core/tokenizer/tokenizer.h, decode only). The input is
// the file. A tokenizer that loads must have as many tokens as its header says, decode every id to
// the bytes the file holds for it, refuse ids outside its vocabulary, and refuse to encode.
#include <cstring>
#include <memory>

#include "core/tokenizer/tokenizer.h"
#include "core/util/file.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/tokenizer_checks.h"

namespace {
constexpr const char* kTarget = "llmc_tokenizer";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llmcpu;
  const std::string path = fuzz::write_file("gpt2_tokenizer.bin", data, size);
  std::unique_ptr<Tokenizer> tok;
  if (!fuzz::accepts([&] { tok = std::make_unique<Tokenizer>(Tokenizer::load(path)); })) return 0;
  int32_t V;
  std::memcpy(&V, data + 8, 4);
  LLMCPU_FUZZ_CHECK(kTarget, tok->vocab_size() == V, "the vocabulary size is not the header's");
  LLMCPU_FUZZ_CHECK(kTarget, !tok->can_encode(), "a .bin tokenizer claims it can encode");
  LLMCPU_FUZZ_CHECK(kTarget, !fuzz::accepts([&] { tok->encode("x"); }),
                    "a .bin tokenizer encoded");
  fuzz::check_decode_bounds(kTarget, *tok);
  size_t pos = kLlmcHeaderBytes;
  for (int id = 0; id < V; ++id) {
    const size_t len = data[pos];
    const std::string expected(reinterpret_cast<const char*>(data) + pos + 1, len);
    LLMCPU_FUZZ_CHECK(kTarget, tok->decode_token(id) == expected,
                      "token " + std::to_string(id) + " does not decode to its bytes in the file");
    pos += 1 + len;
  }
  LLMCPU_FUZZ_CHECK(kTarget, pos == size, "the tokens do not fill the file");
  return 0;
}
