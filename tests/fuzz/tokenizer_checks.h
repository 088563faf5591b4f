// Checks shared by the tokenizer fuzz targets: a tokenizer that loaded must encode any bytes into
// ids of its vocabulary and decode them back to exactly those bytes, refuse ids outside it, and
// give the end-of-text token's bytes.
#pragma once

#include <string_view>
#include <vector>

#include "core/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

namespace llmcpu::fuzz {

inline void check_round_trip(const char* target, const Tokenizer& tok, std::string_view text) {
  const std::vector<int> ids = tok.encode(text);
  for (int id : ids) {
    LLMCPU_FUZZ_CHECK(target, id >= 0 && id < tok.vocab_size(), "encode gave an id outside V");
  }
  LLMCPU_FUZZ_CHECK(target, tok.decode(ids.data(), ids.size()) == text,
                    "decode(encode(x)) != x for x of " + std::to_string(text.size()) + " bytes");
}

inline void check_decode_bounds(const char* target, const Tokenizer& tok) {
  const int V = tok.vocab_size();
  LLMCPU_FUZZ_CHECK(target, V > 0 && tok.eot_token() >= 0 && tok.eot_token() < V,
                    "the end-of-text id is outside the vocabulary");
  tok.decode_token(tok.eot_token());
  for (int id : {-1, V}) {
    LLMCPU_FUZZ_CHECK(target, !accepts([&] { tok.decode_token(id); }),
                      "decode accepted the id " + std::to_string(id) + " outside the vocabulary");
  }
}

}  // namespace llmcpu::fuzz
