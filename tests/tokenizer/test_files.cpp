// Loading tokenizers: a tiny hand-made encoder.json + vocab.bpe whose encodings are worked out by
// hand, the strict JSON reader, llm.c's gpt2_tokenizer.bin, and the errors for broken files (each
// must name the file and what is wrong). Needs no fetched data.
#include <gtest/gtest.h>

#include "core/tokenizer/json_vocab.h"
#include "simd/error.h"
#include "tests/tokenizer/test_util.h"

namespace llmcpu {
namespace {

using namespace llmcpu::testing;
using Tiny = TinyTokenizer;

// The FileError message of loading `path`, or "" when it loads.
std::string load_error(const std::string& path) {
  try {
    Tokenizer::load(path);
  } catch (const FileError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not a FileError: ") + e.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A fresh folder per test (TempDirTest's), removed afterwards.
class TokenizerFiles : public TempDirTest {};

TEST_F(TokenizerFiles, TinyTokenizerEncodesAsWorkedOutByHand) {
  const Tokenizer t = Tokenizer::load(Tiny::write(dir_.string()));
  ASSERT_TRUE(t.can_encode());
  EXPECT_EQ(t.vocab_size(), 261);
  EXPECT_EQ(t.eot_token(), Tiny::kEot);
  // "the the": pieces "the" and " the"; t+h -> th, th+e -> the; Ġ+the -> " the".
  EXPECT_EQ(t.encode("the the"), (std::vector<int>{Tiny::kThe, Tiny::kSpaceThe}));
  // "then": th, the, and n (byte 110) stays.
  EXPECT_EQ(t.encode("then"), (std::vector<int>{Tiny::kThe, 'n'}));
  // "   x": the whitespace run leaves its last space to the word: pieces "  " and " x".
  EXPECT_EQ(t.encode("   x"), (std::vector<int>{Tiny::kTwoSpaces, ' ', 'x'}));
  // "a  \n": a whitespace run before the end stays whole: "a", "  \n" -> Ġ Ġ merge, then \n.
  EXPECT_EQ(t.encode("a  \n"), (std::vector<int>{'a', Tiny::kTwoSpaces, '\n'}));
  // Contractions are their own pieces, lower case only: "'s" then " the"; "'S" is punctuation + S.
  EXPECT_EQ(t.encode("'s the"), (std::vector<int>{'\'', 's', Tiny::kSpaceThe}));
  EXPECT_EQ(t.encode("it's"), (std::vector<int>{'i', 't', '\'', 's'}));
  EXPECT_TRUE(t.encode("").empty());
  // Every byte decodes to itself.
  std::vector<int> all(256);
  std::string bytes;
  for (int b = 0; b < 256; ++b) {
    all[b] = b;
    bytes += static_cast<char>(b);
  }
  EXPECT_EQ(t.decode(all.data(), all.size()), bytes);
  EXPECT_EQ(t.decode_token(Tiny::kSpaceThe), " the");
  EXPECT_EQ(t.decode_token(Tiny::kEot), "<|endoftext|>");
}

TEST_F(TokenizerFiles, DecodeRejectsIdsOutsideTheVocabulary) {
  const Tokenizer t = Tokenizer::load(Tiny::write(dir_.string()));
  const int ids[] = {1, 261};
  try {
    t.decode(ids, 2);
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(has(e.what(), "token id 261")) << e.what();
  }
  EXPECT_THROW(t.decode_token(-1), ShapeError);
}

TEST_F(TokenizerFiles, JsonEscapesAndSurrogatePairs) {
  const auto v = parse_json_vocab(
      R"( { "\ud83d\ude00" : 0 , "a\"b\\c\/d\n\t\r\b\f" : 1, "\u00e9\u0120x" : 2, "é": 3, "" : 4 } )",
      "test.json");
  ASSERT_EQ(v.size(), 5u);
  EXPECT_EQ(v[0].first, "\xF0\x9F\x98\x80");
  EXPECT_EQ(v[0].second, 0);
  EXPECT_EQ(v[1].first, "a\"b\\c/d\n\t\r\b\f");
  EXPECT_EQ(v[2].first, "\xC3\xA9\xC4\xA0x");
  EXPECT_EQ(v[3].first, "\xC3\xA9");
  EXPECT_EQ(v[4].first, "");
  EXPECT_EQ(v[4].second, 4);
}

TEST_F(TokenizerFiles, JsonErrorsNameFileAndOffset) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"a": 1,})", "byte offset 8"},        // trailing comma
      {R"({"a": 1 "b": 2})", "byte offset 8"},  // missing comma
      {R"({"a": 1, "a": 2})", "duplicate key"},
      {R"({"a": -1})", "negative"},
      {R"({"a": 1.5})", "not an integer"},
      {R"({"a": 01})", "leading zero"},
      {R"({"a": "x"})", "expected a token id"},
      {R"({"\ud800": 1})", "high surrogate"},
      {R"({"\udc00": 1})", "lone low surrogate"},
      {R"({"\ud800\u0041": 1})", "non-low surrogate"},
      {R"({"\q": 1})", "unknown escape"},
      {R"({"\u12G4": 1})", "bad hex digit"},
      {R"({"abc)", "unterminated string"},
      {R"({"a": 1} x)", "after the closing"},
      {"{\"a\xff\": 1}", "UTF-8"},
      {"{\"a\nb\": 1}", "control character"},
      {R"([1, 2])", "expected '{'"},
      {"", "end of file"},
  };
  for (const auto& [json, expect] : cases) {
    SCOPED_TRACE(json);
    try {
      parse_json_vocab(json, "dir/encoder.json");
      ADD_FAILURE() << "no error";
    } catch (const FileError& e) {
      EXPECT_TRUE(has(e.what(), "dir/encoder.json")) << e.what();
      EXPECT_TRUE(has(e.what(), "byte offset")) << e.what();
      EXPECT_TRUE(has(e.what(), expect)) << e.what();
    }
  }
}

TEST_F(TokenizerFiles, CorruptEncoderJson) {
  const std::string dir = Tiny::write(dir_.string());
  const std::string enc = dir + "/encoder.json";
  const std::string good = Tiny::encoder_json();

  write_file(enc, good.substr(0, good.size() / 2));  // cut in the middle
  std::string e = load_error(dir);
  EXPECT_TRUE(has(e, enc) && has(e, "invalid JSON at byte offset")) << e;

  std::string no_eot = good;
  no_eot.replace(no_eot.find("\"<|endoftext|>\""), 15, "\"<|something|>\"");
  write_file(enc, no_eot);
  e = load_error(dir);
  EXPECT_TRUE(has(e, enc) && has(e, "<|endoftext|>")) << e;

  std::string gap = good;
  gap.replace(gap.find(": 260}"), 6, ": 9999}");
  write_file(enc, gap);
  e = load_error(dir);
  EXPECT_TRUE(has(e, enc) && has(e, "9999") && has(e, "0..260")) << e;

  std::string twice = good;
  twice.replace(twice.find(": 260}"), 6, ": 259}");
  write_file(enc, twice);
  e = load_error(dir);
  EXPECT_TRUE(has(e, enc) && has(e, "id 259 is given to both")) << e;

  std::string outside = good;  // a token whose characters are not GPT-2's byte alphabet
  outside.replace(outside.find("\"th\": 256"), 9, "\"t h\": 256");
  write_file(enc, outside);
  e = load_error(dir);
  EXPECT_TRUE(has(e, enc) && has(e, "byte alphabet")) << e;
}

TEST_F(TokenizerFiles, TruncatedOrBrokenVocabBpe) {
  const std::string dir = Tiny::write(dir_.string());
  const std::string bpe = dir + "/vocab.bpe";
  const std::string good = Tiny::vocab_bpe();

  write_file(bpe, good.substr(0, good.size() - 3));  // cut inside the last line
  std::string e = load_error(dir);
  EXPECT_TRUE(has(e, bpe) && has(e, "truncated")) << e;

  write_file(bpe, good.substr(0, good.rfind('\n', good.size() - 2) + 1));  // the last merge lost
  e = load_error(dir);
  EXPECT_TRUE(has(e, bpe) && has(e, "truncated") && has(e, "3 merges")) << e;

  write_file(bpe, "#version: 0.2\nt h\nth\n");
  e = load_error(dir);
  EXPECT_TRUE(has(e, bpe) && has(e, "line 3") && has(e, "two symbols")) << e;

  write_file(bpe, "#version: 0.2\nt h\nq z\n");
  e = load_error(dir);
  EXPECT_TRUE(has(e, bpe) && has(e, "line 3") && has(e, "\"qz\" is not in encoder.json")) << e;

  write_file(bpe, "t h\n");
  e = load_error(dir);
  EXPECT_TRUE(has(e, bpe) && has(e, "#version")) << e;

  write_file(bpe, "");
  e = load_error(dir);
  EXPECT_TRUE(has(e, bpe)) << e;
}

TEST_F(TokenizerFiles, MissingFiles) {
  const std::string dir = dir_.string();
  std::string e = load_error(dir + "/nowhere");
  EXPECT_TRUE(has(e, dir + "/nowhere") && has(e, "does not exist")) << e;
  e = load_error(dir);  // an empty folder
  EXPECT_TRUE(has(e, dir + "/encoder.json") && has(e, "not found") && has(e, "fetch-data.sh")) << e;
  write_file(dir + "/encoder.json", Tiny::encoder_json());
  e = load_error(dir);
  EXPECT_TRUE(has(e, dir + "/vocab.bpe") && has(e, "not found")) << e;
}

TEST_F(TokenizerFiles, LlmcTokenizerBin) {
  const std::string dir = dir_.string();
  const Tokenizer json = Tokenizer::load(Tiny::write(dir));
  const std::string bin = dir + "/tiny_tokenizer.bin";
  write_llmc_tokenizer(bin, Tiny::token_bytes(), 2, Tiny::kEot);
  const Tokenizer t = Tokenizer::load(bin);
  EXPECT_FALSE(t.can_encode());
  EXPECT_THROW(t.encode("the"), Error);
  EXPECT_EQ(t.vocab_size(), 261);
  EXPECT_EQ(t.eot_token(), Tiny::kEot);
  std::vector<int> all(261);
  for (int i = 0; i < 261; ++i) all[i] = i;
  EXPECT_EQ(t.decode(all.data(), all.size()), json.decode(all.data(), all.size()));
  const std::vector<int> ids = json.encode("the then   x\n");
  EXPECT_EQ(t.decode(ids.data(), ids.size()), "the then   x\n");
}

TEST_F(TokenizerFiles, BrokenLlmcTokenizerBin) {
  const std::string dir = dir_.string();
  const std::string bin = dir + "/gpt2_tokenizer.bin";
  const auto tokens = Tiny::token_bytes();

  write_llmc_tokenizer(bin, tokens, 2, Tiny::kEot);
  std::string bytes = read_file(bin);
  bytes[0] = 0x11;  // magic
  write_file(bin, bytes);
  std::string e = load_error(bin);
  EXPECT_TRUE(has(e, bin) && has(e, "bad magic") && has(e, "20240328")) << e;

  write_llmc_tokenizer(bin, tokens, 3, Tiny::kEot);
  e = load_error(bin);
  EXPECT_TRUE(has(e, bin) && has(e, "version 3")) << e;

  write_llmc_tokenizer(bin, tokens, 2, Tiny::kEot);
  bytes = read_file(bin);
  write_file(bin, bytes.substr(0, bytes.size() - 5));
  e = load_error(bin);
  EXPECT_TRUE(has(e, bin) && has(e, "truncated")) << e;

  write_file(bin, bytes + "xx");
  e = load_error(bin);
  EXPECT_TRUE(has(e, bin) && has(e, "2 bytes after the last")) << e;

  write_file(bin, bytes.substr(0, 100));
  e = load_error(bin);
  EXPECT_TRUE(has(e, bin) && has(e, "too short")) << e;

  write_llmc_tokenizer(bin, tokens, 2, 5000);
  e = load_error(bin);
  EXPECT_TRUE(has(e, bin) && has(e, "end-of-text id 5000")) << e;
}

}  // namespace
}  // namespace llmcpu
