// Fuzz target: Hugging Face tokenizer.json files (core/tokenizer/hf_tokenizer.h and the
// normalizers, pre-tokenizers, BPE model, decoders and post-processors behind it). The input is a
// tokenizer.json, optionally followed by a NUL byte and a tokenizer_config.json (JSON text holds
// no raw NUL); both are written into a folder, which is loaded as Tokenizer::load loads a model's
// folder. Loading may refuse with an llmcpu::Error. A tokenizer that loads must name end-of-text
// and document tokens inside its vocabulary (or none), refuse to decode the ids -1 and
// vocab_size() with a ShapeError, and encode a few fixed texts (English, spaces at both ends,
// accents and combining marks, CJK and emoji, invalid UTF-8, the usual added tokens' texts)
// passing the checks of hf_checks.h. Encoding and decoding may still throw an llmcpu::Error (a
// pattern the engine gives up on), never anything else.
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/hf_checks.h"

namespace {

constexpr const char* kTarget = "tokenizer_json";

const char* const kTexts[] = {
    "The quick brown fox's friend didn't jump; it'll be fine. 12345 + 67 = 12412\n\n",
    "   leading spaces, a tab\tand trailing  ",
    "na\xc3\xafve e\xcc\x81 \xe4\xb8\xad \xf0\x9f\x98\x80 \xe2\x96\x81x \xef\xbc\xa1 \xe2\x84\xaa",
    "bad \xff\xfe utf-8 \xc3 \xed\xa0\x80 end",
    "<|endoftext|>a<s>b</s><unk> [SEP] x <mask> Hello<0x41>\xef\xbb\xbfz<|im_start|>",
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::filesystem::create_directory(llmcpu::fuzz::scratch_dir() + "/tok");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llmcpu;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  fuzz::write_file("tok/tokenizer.json", input.substr(0, nul));
  const std::string config = fuzz::scratch_dir() + "/tok/tokenizer_config.json";
  if (nul == std::string_view::npos) {
    std::filesystem::remove(config);
  } else {
    fuzz::write_file("tok/tokenizer_config.json", input.substr(nul + 1));
  }
  std::unique_ptr<Tokenizer> tok;
  if (!fuzz::accepts([&] {
        tok = std::make_unique<Tokenizer>(Tokenizer::load(fuzz::scratch_dir() + "/tok"));
      })) {
    return 0;
  }
  const int V = tok->vocab_size();
  LLMCPU_FUZZ_CHECK(kTarget, V >= 0, "a negative vocabulary size");
  for (const int id : {tok->eot_token(), tok->document_token()}) {
    LLMCPU_FUZZ_CHECK(kTarget, id >= -1 && id < V,
                      "the end-of-text or document token " + std::to_string(id) +
                          " is outside the vocabulary of " + std::to_string(V));
  }
  for (const int id : {-1, V}) {
    bool refused = false;
    try {
      tok->decode_token(id);
    } catch (const ShapeError&) {
      refused = true;
    }
    LLMCPU_FUZZ_CHECK(
        kTarget, refused,
        "decode took the id " + std::to_string(id) + " outside 0.." + std::to_string(V - 1));
  }
  std::vector<int> specials;
  if (!fuzz::accepts([&] { specials = tok->encode("", true); })) return 0;
  for (const int id : specials) {
    LLMCPU_FUZZ_CHECK(kTarget, id >= 0 && id < V,
                      "a special token's id " + std::to_string(id) + " is outside the vocabulary");
  }
  for (const char* text : kTexts) {
    fuzz::accepts([&] { fuzz::check_hf_encode(kTarget, *tok, text, specials, nullptr); });
  }
  // Every id of a small vocabulary through the decoder at once (holes in the ids may be refused).
  if (V <= 4096) {
    std::vector<int> all(static_cast<size_t>(V));
    for (int i = 0; i < V; ++i) all[static_cast<size_t>(i)] = i;
    fuzz::accepts([&] { tok->decode(all.data(), all.size()); });
  }
  return 0;
}
