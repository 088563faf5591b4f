// Every field of llm.c's gpt2_tokenizer.bin header at its edges (tests/common/header_edges.h says
// how): int32[256] {20240328, version 1 | 2, vocab_size, eot_token (version 2)}, then per token a
// uint8 length and its bytes. Version 2 on the tiny tokenizer's 261 tokens (<|endoftext|> = 260);
// version 1, whose end-of-text token is GPT-2's 50256, on 50257 one-byte tokens.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/tokenizer/tokenizer.h"
#include "tests/common/header_edges.h"
#include "tests/tokenizer/test_util.h"

namespace llmcpu {
namespace {

using namespace llmcpu::testing;

Bytes make_tokenizer(const std::string& dir, const std::vector<std::string>& tokens, int version,
                     int eot) {
  const std::string path = dir + "/gpt2_tokenizer.bin";
  write_llmc_tokenizer(path, tokens, version, eot);
  return read_bytes(path);
}

std::vector<std::string> gpt2_sized_tokens() {
  std::vector<std::string> tokens(50257);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = std::string(1, char('a' + i % 26));
  return tokens;
}

// The fields both versions share; `V` is the file's vocabulary size.
std::vector<HeaderField> shared_fields(int V) {
  HeaderField vocab{"vocab_size", 8, FieldType::kI32,
                    refused({"vocabulary size {}", "expected a positive number of tokens"})};
  // More tokens than the file holds.
  vocab.except[kInt32Max] = vocab.except[kPastTheFile] =
      refused({"truncated", "the header says {} tokens, the file ends after " + std::to_string(V)});
  vocab.past = [](const Bytes& f) { return int64_t(read_field<int32_t>(f, 8)) + 1; };
  return {
      {"magic", 0, FieldType::kI32, refused({"bad magic {}", "expected 20240328"})},
      {"version", 4, FieldType::kI32,
       refused({"unsupported tokenizer version {}", "expected 1 or 2"})},
      vocab,
  };
}

HeaderField unused_int(int index, const char* why) {
  return {"header[" + std::to_string(index) + "] (unused)", 4 * index, FieldType::kI32,
          legitimate(why)};
}

std::vector<HeaderField> version2_fields() {
  std::vector<HeaderField> fields = shared_fields(261);
  HeaderField eot{"eot_token", 12, FieldType::kI32,
                  refused({"end-of-text id {}", "is outside the vocabulary 0..260"})};
  eot.except[kZero] =
      legitimate("any id of the vocabulary may be its end-of-text token (why the field exists)");
  eot.past = [](const Bytes& f) { return int64_t(read_field<int32_t>(f, 8)); };  // = V
  fields.push_back(eot);
  fields.push_back(unused_int(4, "not a field: llm.c's writer leaves the rest of the header zero"));
  return fields;
}

std::vector<HeaderField> version1_fields() {
  std::vector<HeaderField> fields = shared_fields(50257);
  fields.push_back(unused_int(
      3, "version 1 has no end-of-text field (GPT-2's 50256 is implied): llm.c leaves it zero"));
  return fields;
}

const std::vector<Format>& formats() {
  static const std::vector<Format> all = {
      {"TokenizerV2",
       [](const std::string& dir) {
         return make_tokenizer(dir, TinyTokenizer::token_bytes(), 2, TinyTokenizer::kEot);
       },
       [](const std::string& path) { Tokenizer::load(path); },
       {},
       version2_fields()},
      {"TokenizerV1",
       [](const std::string& dir) { return make_tokenizer(dir, gpt2_sized_tokens(), 1, 0); },
       [](const std::string& path) { Tokenizer::load(path); },
       {},
       version1_fields()},
  };
  return all;
}

class TokenizerHeaderEdges : public EdgeTest {};

TEST_P(TokenizerHeaderEdges, EveryEdgeRefusedNamingTheFieldOrLegitimate) { run_case(); }

INSTANTIATE_TEST_SUITE_P(LlmcTokenizer, TokenizerHeaderEdges,
                         ::testing::ValuesIn(field_cases(formats())), field_case_name);

}  // namespace
}  // namespace llmcpu
