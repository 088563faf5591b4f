// Fuzz target: encoding and decoding with tokenizer.json files (core/tokenizer/hf_*.h) on
// arbitrary bytes. The tokenizers are fixed: the small layouts of hf_layouts.h (GPT-2, Llama 3,
// Qwen2, SentencePiece with byte fallback, Metaspace, Digits, added tokens), written to a folder
// each with its tokenizer_config.json at start-up. The input is the text. For every layout
// (hf_checks.h): the ids lie in the vocabulary and decode without a ShapeError, a second encode
// and encode_append after other ids give the same ids, and encode with special tokens gives them
// between the layout's special tokens; TokenStream, fed the ids one by one, shows the decoded text
// without clean_up_tokenization_spaces (decode_unclean) in pieces that add up to it. (With the
// clean-up, one rule's result can make another match and take back a space already shown: "x  ' s"
// decodes to "x's", " ' " -> "'" then " 's" -> "'s"; so the stream shows the text before it.)
// And what decode must give back,
// where it is determined:
//   - GPT-2 and Llama 3 (byte-level, no normalizer, added tokens neither stripping nor
//     normalized): exactly the input with invalid UTF-8 replaced (utf8_replace.h), since every
//     byte has a token and the added tokens decode to their text;
//   - Qwen2 (NFC): the input itself when it is ASCII (NFC changes no ASCII); and for any input,
//     encoding the decoded text again gives the same ids: the decoded text is the NFC form of each
//     part between added tokens, NFC is idempotent, and no NFC form makes an added token (they
//     hold only '<', '|', '>', '_' and lower-case ASCII letters; the only ASCII results of NFC from
//     other characters are 'K', ';' and '`');
//   - SentencePiece: for a non-empty input y (invalid UTF-8 replaced), y with every "▁" read as a
//     space. The normalizer makes "▁" + y with spaces as "▁"; every character is a token or falls
//     back to byte tokens; the decoder turns each "▁" into a space, joins the bytes, fuses, and
//     strips the one leading space the normalizer added (spaces at the start of y stay). Not
//     asserted when y holds an added token's text (each part between added tokens gets its own
//     "▁", which decodes as a space) or U+FEFF (a byte order mark that falls back to byte tokens
//     at the start of a run of them is dropped by ByteFallback, which decodes with TextDecoder's
//     default BOM handling, as tokenizers.js does).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/hf_checks.h"
#include "tests/fuzz/hf_layouts.h"
#include "tests/fuzz/utf8_replace.h"

namespace {

constexpr const char* kTarget = "hf_encode";
// TokenStream decodes all ids so far at every push (quadratic): only texts of up to this many ids.
constexpr size_t kMaxStreamed = 64;

struct Loaded {
  std::string name;
  std::unique_ptr<llmcpu::Tokenizer> tok;
  std::vector<int> specials;  // encode("", true): the post-processor's special tokens
  bool clean_up;
};
std::vector<Loaded>* layouts = nullptr;

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = text.find(from, pos)) != std::string_view::npos;
       pos = hit + from.size()) {
    out.append(text.substr(pos, hit - pos));
    out.append(to);
  }
  out.append(text.substr(pos));
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace llmcpu;
  namespace fs = std::filesystem;
  layouts = new std::vector<Loaded>();
  for (const fuzz::HfLayout& l : fuzz::hf_layouts()) {
    fs::create_directory(fuzz::scratch_dir() + "/" + l.name);
    fuzz::write_file(l.name + "/tokenizer.json", l.json);
    if (!l.config.empty()) fuzz::write_file(l.name + "/tokenizer_config.json", l.config);
    Loaded loaded{l.name, nullptr, {}, l.clean_up};
    try {
      loaded.tok = std::make_unique<Tokenizer>(Tokenizer::load(fuzz::scratch_dir() + "/" + l.name));
      loaded.specials = loaded.tok->encode("", true);
    } catch (const Error& e) {
      std::fprintf(stderr, "fuzz_hf_encode: the %s layout does not load: %s\n", l.name.c_str(),
                   e.what());
      std::exit(2);
    }
    layouts->push_back(std::move(loaded));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llmcpu;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string valid = fuzz::replace_invalid_utf8(text);
  const bool ascii = std::all_of(text.begin(), text.end(), [](char c) { return (c & 0x80) == 0; });
  for (const Loaded& l : *layouts) {
    std::string decoded;
    const std::vector<int> ids = fuzz::check_hf_encode(kTarget, *l.tok, text, l.specials, &decoded);
    const std::string got = "; decoded " + fuzz::describe(decoded);
    if (ids.size() <= kMaxStreamed) {
      TokenStream stream(*l.tok);
      std::string shown;
      for (const int id : ids) shown += stream.push(id);
      shown += stream.finish();
      const std::string unclean = l.tok->decode_unclean(ids.data(), ids.size());
      LLMCPU_FUZZ_CHECK(kTarget, shown == unclean,
                        l.name + ": TokenStream's pieces make " + fuzz::describe(shown) +
                            "; decode_unclean gives " + fuzz::describe(unclean));
      LLMCPU_FUZZ_CHECK(kTarget, l.clean_up || unclean == decoded,
                        l.name + ": without clean-up, decode_unclean differs from decode" + got);
    }
    if (l.name == "gpt2" || l.name == "llama3") {
      LLMCPU_FUZZ_CHECK(kTarget, decoded == valid,
                        l.name + ": decode(encode(x)) is not x with invalid UTF-8 replaced for " +
                            fuzz::describe(text) + got);
    } else if (l.name == "qwen2") {
      LLMCPU_FUZZ_CHECK(
          kTarget, !ascii || decoded == text,
          "qwen2: decode(encode(x)) is not x for the ASCII " + fuzz::describe(text) + got);
      LLMCPU_FUZZ_CHECK(kTarget, l.tok->encode(decoded) == ids,
                        "qwen2: encoding decode(encode(x)) again gives other ids for " +
                            fuzz::describe(text) + got);
    } else if (l.name == "sentencepiece" && !text.empty() && !contains(valid, "\xEF\xBB\xBF") &&
               !contains(valid, "<unk>") && !contains(valid, "<s>") && !contains(valid, "</s>")) {
      LLMCPU_FUZZ_CHECK(kTarget, decoded == replace_all(valid, "\xE2\x96\x81", " "),
                        "sentencepiece: decode(encode(x)) is not x with U+2581 read as a space "
                        "for " +
                            fuzz::describe(text) + got);
    }
  }
  return 0;
}
