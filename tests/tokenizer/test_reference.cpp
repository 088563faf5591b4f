// The tokenizer against the npm package gpt-3-encoder, run by node at test time
// (tests/tokenizer/encode_reference.js): the committed texts, a generated text of a few hundred KB
// (tests/tokenizer/make_large_text.js) and the 500 texts of the Brown corpus must give exactly its
// ids, and decoding must give back exactly the bytes. Without node or the fetched data these tests
// fail and say how to get them.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "simd/error.h"
#include "tests/tokenizer/test_util.h"

namespace llmcpu {
namespace {

using namespace llmcpu::testing;

const Tokenizer& gpt2() {
  static const Tokenizer t = Tokenizer::load(default_tokenizer_dir());
  return t;
}

// One JSON array of integers per line, as encode_reference.js prints; null (which gpt-3-encoder
// would print for an unknown token) becomes -1.
std::vector<std::vector<int>> parse_reference(const std::string& out) {
  std::vector<std::vector<int>> all;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::vector<int> ids;
    for (size_t i = 0; i < line.size();) {
      if (line[i] >= '0' && line[i] <= '9') {
        size_t end = i;
        int v = 0;
        while (end < line.size() && line[end] >= '0' && line[end] <= '9')
          v = v * 10 + (line[end++] - '0');
        ids.push_back(v);
        i = end;
      } else if (line.compare(i, 4, "null") == 0) {
        ids.push_back(-1);
        i += 4;
      } else {
        ++i;
      }
    }
    all.push_back(std::move(ids));
  }
  return all;
}

std::vector<std::vector<int>> reference_ids(const Reference& ref,
                                            const std::vector<std::string>& files) {
  std::string cmd = shell_quote(ref.node) + " " +
                    shell_quote(LLMCPU_TOKENIZER_TEST_DIR "/encode_reference.js") + " " +
                    shell_quote(ref.module_dir);
  for (const std::string& f : files) {
    cmd += ' ';
    cmd += shell_quote(f);
  }
  const Outcome r = run_shell(cmd);
  EXPECT_EQ(r.status, 0) << "the reference encoder failed: " << cmd;
  return parse_reference(r.output);
}

// Where two id sequences first differ, with the text around it, for a readable failure.
std::string first_difference(const std::vector<int>& ours, const std::vector<int>& ref) {
  size_t i = 0;
  while (i < ours.size() && i < ref.size() && ours[i] == ref[i]) ++i;
  const size_t lo = i >= 5 ? i - 5 : 0;
  std::ostringstream os;
  os << "first difference at id " << i << " (ours " << ours.size() << " ids, reference "
     << ref.size() << ")\n ours:";
  for (size_t k = lo; k < std::min(ours.size(), i + 5); ++k) os << " " << ours[k];
  os << "\n  ref:";
  for (size_t k = lo; k < std::min(ref.size(), i + 5); ++k) os << " " << ref[k];
  const size_t end = std::min(ours.size(), i + 5);
  if (lo < end) os << "\n text: [" << gpt2().decode(ours.data() + lo, end - lo) << "]";
  return os.str();
}

// Compares every file with the reference; returns how many matched.
size_t compare_with_reference(const Reference& ref, const std::vector<std::string>& files) {
  const auto expected = reference_ids(ref, files);
  EXPECT_EQ(expected.size(), files.size());
  size_t matched = 0;
  for (size_t f = 0; f < files.size() && f < expected.size(); ++f) {
    SCOPED_TRACE(files[f]);
    const std::string text = read_file(files[f]);
    const std::vector<int> ours = gpt2().encode(text);
    EXPECT_TRUE(ours == expected[f]) << first_difference(ours, expected[f]);
    EXPECT_TRUE(gpt2().decode(ours.data(), ours.size()) == text)
        << "decode does not give the bytes back";
    matched += ours == expected[f];
  }
  return matched;
}

std::vector<std::string> txt_files(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".txt") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// A fresh folder per test (TempDirTest's), removed afterwards.
class TokenizerReference : public TempDirTest {};

TEST_F(TokenizerReference, CommittedTexts) {
  const Reference ref = find_reference();
  ASSERT_TRUE(ref.missing.empty()) << ref.missing;
  const auto files = txt_files(LLMCPU_TOKENIZER_TEST_DIR "/texts");
  ASSERT_GE(files.size(), 10u);
  EXPECT_EQ(compare_with_reference(ref, files), files.size());
}

TEST_F(TokenizerReference, LargeGeneratedText) {
  const Reference ref = find_reference();
  ASSERT_TRUE(ref.missing.empty()) << ref.missing;
  const std::string dir = dir_.string();
  const std::string large = dir + "/large.txt";
  const Outcome made =
      run_shell(shell_quote(ref.node) + " " + shell_quote(LLMCPU_TOKENIZER_TEST_DIR "/make_large_text.js") +
                " " + shell_quote(LLMCPU_TOKENIZER_TEST_DIR "/texts") + " " + shell_quote(large) + " 262144");
  ASSERT_EQ(made.status, 0) << made.output;
  ASSERT_GE(fs::file_size(large), 262144u);
  EXPECT_EQ(compare_with_reference(ref, {large}), 1u);
}

TEST_F(TokenizerReference, BrownCorpus) {
  const Reference ref = find_reference();
  ASSERT_TRUE(ref.missing.empty()) << ref.missing;
  ASSERT_TRUE(fs::is_directory(ref.brown_dir)) << ref.brown_dir << " is missing; " << kSetupHint;
  const auto files = txt_files(ref.brown_dir);
  ASSERT_EQ(files.size(), 500u) << ref.brown_dir << "; " << kSetupHint;
  EXPECT_EQ(compare_with_reference(ref, files), files.size());
}

TEST_F(TokenizerReference, Gpt2Vocabulary) {
  const Reference ref = find_reference();
  ASSERT_TRUE(ref.missing.empty()) << ref.missing;
  EXPECT_TRUE(gpt2().can_encode());
  EXPECT_EQ(gpt2().vocab_size(), 50257);
  EXPECT_EQ(gpt2().eot_token(), 50256);
  EXPECT_EQ(gpt2().decode_token(50256), "<|endoftext|>");
  // gpt-3-encoder treats <|endoftext|> in the text as plain text, and so do we.
  EXPECT_EQ(gpt2().encode("<|endoftext|>"), (std::vector<int>{27, 91, 437, 1659, 5239, 91, 29}));
}

// Bytes that are not UTF-8 cannot be compared with gpt-3-encoder (JavaScript strings are Unicode),
// but they must survive the round trip, each run as a piece of its own between the valid pieces.
TEST_F(TokenizerReference, InvalidUtf8RoundTrips) {
  const Reference ref = find_reference();
  ASSERT_TRUE(ref.missing.empty()) << ref.missing;
  const std::string bad = "abc\xff def \xc3(\xe2\x82 end\x80\x80";
  const std::vector<int> ids = gpt2().encode(bad);
  EXPECT_EQ(gpt2().decode(ids.data(), ids.size()), bad);
  int byte_ff = -1;  // the token of the single byte 0xff
  for (int id = 0; id < gpt2().vocab_size() && byte_ff < 0; ++id) {
    if (gpt2().decode_token(id) == "\xff") byte_ff = id;
  }
  ASSERT_GE(byte_ff, 0);
  std::vector<int> expect = gpt2().encode("abc");
  expect.push_back(byte_ff);
  const std::vector<int> def = gpt2().encode(" def");
  expect.insert(expect.end(), def.begin(), def.end());
  ASSERT_LE(expect.size(), ids.size());
  EXPECT_TRUE(std::equal(expect.begin(), expect.end(), ids.begin()));
}

// llm.c's gpt2_tokenizer.bin, written here from encoder.json's tokens, decodes exactly as
// encoder.json.
TEST_F(TokenizerReference, LlmcTokenizerBinDecodesLikeEncoderJson) {
  const Reference ref = find_reference();
  ASSERT_TRUE(ref.missing.empty()) << ref.missing;
  const std::string dir = dir_.string();
  std::vector<std::string> tokens;
  for (int id = 0; id < gpt2().vocab_size(); ++id) tokens.push_back(gpt2().decode_token(id));
  for (int version : {1, 2}) {
    SCOPED_TRACE(version);
    const std::string bin = dir + "/gpt2_tokenizer_v" + std::to_string(version) + ".bin";
    write_llmc_tokenizer(bin, tokens, version, 50256);
    const Tokenizer t = Tokenizer::load(bin);
    EXPECT_FALSE(t.can_encode());
    EXPECT_THROW(t.encode("hello"), Error);
    EXPECT_EQ(t.vocab_size(), 50257);
    EXPECT_EQ(t.eot_token(), 50256);
    std::vector<int> all(50257);
    for (int i = 0; i < 50257; ++i) all[i] = i;
    EXPECT_TRUE(t.decode(all.data(), all.size()) == gpt2().decode(all.data(), all.size()));
    const std::string text = read_file(LLMCPU_TOKENIZER_TEST_DIR "/texts/scripts.txt");
    const std::vector<int> ids = gpt2().encode(text);
    EXPECT_EQ(t.decode(ids.data(), ids.size()), text);
  }
}

}  // namespace
}  // namespace llmcpu
