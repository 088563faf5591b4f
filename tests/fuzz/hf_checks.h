// Checks shared by the tokenizer.json fuzz targets, on a tokenizer that loaded: what encode gives
// must be ids of the vocabulary that decode takes back without a ShapeError, the same ids again on
// a second call (through each thread's cache) and after other ids (encode_append), and, with
// special tokens, the same ids between the special tokens the post-processor puts around every
// text (those of the empty text).
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "core/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

namespace llmcpu::fuzz {

// Whether `with` is specials[0, k) + plain + specials[k, end) for some k.
inline bool framed_by(const std::vector<int>& with, const std::vector<int>& plain,
                      const std::vector<int>& specials) {
  if (with.size() != plain.size() + specials.size()) return false;
  for (size_t k = 0; k <= specials.size(); ++k) {
    if (!std::equal(specials.begin(), specials.begin() + long(k), with.begin())) return false;
    if (std::equal(plain.begin(), plain.end(), with.begin() + long(k)) &&
        std::equal(specials.begin() + long(k), specials.end(),
                   with.begin() + long(k + plain.size()))) {
      return true;
    }
  }
  return false;
}

inline std::string describe(std::string_view text) {
  std::string s = std::to_string(text.size()) + " bytes \"";
  for (const char c : text.substr(0, 40)) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7F && b != '\\') {
      s += c;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", b);
      s += hex;
    }
  }
  return s + (text.size() > 40 ? "...\"" : "\"");
}

// The ids of `text` (without special tokens) after the checks above; `specials` is
// tok.encode("", true). Throws what encode or decode throw, except ShapeError from decode, which
// is a finding.
inline std::vector<int> check_hf_encode(const char* target, const Tokenizer& tok,
                                        std::string_view text, const std::vector<int>& specials,
                                        std::string* decoded) {
  const std::vector<int> ids = tok.encode(text);
  for (const int id : ids) {
    LLMCPU_FUZZ_CHECK(target, id >= 0 && id < tok.vocab_size(),
                      "encode gave the id " + std::to_string(id) + " outside 0.." +
                          std::to_string(tok.vocab_size() - 1) + " for " + describe(text));
  }
  LLMCPU_FUZZ_CHECK(target, tok.encode(text) == ids,
                    "a second encode (from the cache) differs for " + describe(text));
  std::vector<int> appended = specials;
  appended.push_back(0);
  const size_t before = appended.size();
  tok.encode_append(text, appended);
  LLMCPU_FUZZ_CHECK(
      target, std::equal(ids.begin(), ids.end(), appended.begin() + long(before), appended.end()),
      "encode_append differs from encode for " + describe(text));
  LLMCPU_FUZZ_CHECK(target, framed_by(tok.encode(text, true), ids, specials),
                    "encode with special tokens is not the special tokens of the empty text "
                    "around encode without them for " +
                        describe(text));
  try {
    std::string d = tok.decode(ids.data(), ids.size());
    if (decoded) *decoded = std::move(d);
  } catch (const ShapeError& e) {
    invariant_failed(target,
                     "decode refused the ids encode gave for " + describe(text) + ": " + e.what());
  }
  return ids;
}

}  // namespace llmcpu::fuzz
