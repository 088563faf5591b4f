// The width of the ids `llmcpu prepare` writes: uint16 shards for a vocabulary of up to 65536
// tokens, llm.c's uint32 shards (magic 20240801, version 7) past that, and --token-bytes 2|4 to
// choose; the ids are the same in either width. The large vocabulary is made up here (every token a
// merge of letters, <|endoftext|> last, past 65535), so only the GPT-2 test needs fetched data.
#include <gtest/gtest.h>

#include "core/data/prepare.h"
#include "core/io/token_shard.h"
#include "simd/error.h"
#include "tests/tokenizer/test_util.h"

namespace llmcpu {
namespace {

using namespace llmcpu::testing;

// Every id of a shard, and its width.
struct ShardIds {
  int token_bytes;
  std::vector<uint32_t> ids;
};

ShardIds read_ids(const std::string& path) {
  const TokenShard s(path);
  ShardIds r{s.token_bytes(), std::vector<uint32_t>(s.size())};
  for (size_t i = 0; i < s.size(); ++i) r.ids[i] = s.at(i);
  return r;
}

// The ids of every shard a run wrote, val first, each shard checked to have `token_bytes`.
std::vector<uint32_t> read_run(const PrepareResult& r, int token_bytes) {
  std::vector<uint32_t> all;
  for (const auto* files : {&r.val_files, &r.train_files}) {
    for (const std::string& f : *files) {
      const ShardIds s = read_ids(f);
      EXPECT_EQ(s.token_bytes, token_bytes) << f;
      all.insert(all.end(), s.ids.begin(), s.ids.end());
    }
  }
  return all;
}

// A GPT-2-style tokenizer of kLargeVocab tokens in `dir`: the 256 bytes, then merged tokens of two,
// three and four lowercase letters (each a merge of the one before and a letter), then
// <|endoftext|> as the last id, kLargeVocab - 1.
constexpr int kLargeVocab = 65600;

std::string write_large_tokenizer(const std::string& dir) {
  fs::create_directories(dir);
  std::string json = "{", bpe = "#version: 0.2\n";
  int id = 0;
  auto add = [&](const std::string& token) {  // appended piece by piece: g++ 12 warns falsely on
    json += '"';                              // "literal" + std::string temporaries
    json += TinyTokenizer::json_key(token);
    json += "\": ";
    json += std::to_string(id++);
    json += ", ";
  };
  for (int b = 0; b < 256; ++b) add(alphabet_char(b));
  std::vector<std::string> level = {""};  // the tokens of n letters, in order
  while (id < kLargeVocab - 1) {
    std::vector<std::string> next;
    for (const std::string& left : level) {
      for (char c = 'a'; c <= 'z' && id < kLargeVocab - 1; ++c) {
        const std::string token = left + c;
        next.push_back(token);
        if (left.empty()) continue;  // a single letter is a byte token already
        add(token);
        bpe += left + " " + std::string(1, c) + "\n";
      }
    }
    level = std::move(next);
  }
  json += "\"<|endoftext|>\": " + std::to_string(id) + "}";
  write_file(dir + "/encoder.json", json);
  write_file(dir + "/vocab.bpe", bpe);
  return dir;
}

class PrepareWidth : public TinyPrepareTest {
 protected:
  PrepareOptions options(const std::string& out) {
    PrepareOptions o;
    o.inputs = {input("a.txt", "the then the\n   x the"), input("b.txt", "the the the then x")};
    o.out_dir = folder_ + "/" + out;
    o.val_tokens = 3;
    o.shard_tokens = 5;
    return o;
  }
};

// The tiny tokenizer (261 tokens) writes uint16 shards; token_bytes = 4 writes the same ids as
// uint32, split into the same shards.
TEST_F(PrepareWidth, Uint32OnRequestHoldsTheSameIds) {
  const PrepareResult narrow = prepare_shards(*tok_, options("out2"));
  PrepareOptions o = options("out4");
  o.token_bytes = 4;
  const PrepareResult wide = prepare_shards(*tok_, o);
  ASSERT_EQ(wide.train_files.size(), narrow.train_files.size());
  EXPECT_EQ(wide.val_tokens, narrow.val_tokens);
  EXPECT_EQ(wide.train_tokens, narrow.train_tokens);
  const std::vector<uint32_t> ids = read_run(narrow, 2);
  EXPECT_EQ(read_run(wide, 4), ids);
  const std::vector<uint16_t> want = expected({"the then the\n   x the", "the the the then x"});
  EXPECT_EQ(ids, std::vector<uint32_t>(want.begin(), want.end()));
  for (const int bad : {1, 3, 8, -2}) {
    o.token_bytes = bad;
    EXPECT_THROW(prepare_shards(*tok_, o), UsageError) << bad;
  }
}

// A vocabulary past 65536 tokens writes uint32 shards by itself, with its ids past 65535 intact,
// and refuses uint16 ones, naming the flag and the vocabulary's size.
TEST_F(PrepareWidth, LargeVocabularyWritesUint32AndRefusesUint16) {
  const Tokenizer large = Tokenizer::load(write_large_tokenizer(folder_ + "/large"));
  ASSERT_EQ(large.vocab_size(), kLargeVocab);
  ASSERT_EQ(large.eot_token(), kLargeVocab - 1);
  PrepareOptions o = options("auto");
  const PrepareResult r = prepare_shards(large, o);
  std::vector<uint32_t> want;
  for (const char* doc : {"the then the\n   x the", "the the the then x"}) {
    want.push_back(kLargeVocab - 1);
    for (int id : large.encode(doc)) want.push_back(static_cast<uint32_t>(id));
  }
  EXPECT_EQ(read_run(r, 4), want);
  o.token_bytes = 4;
  o.out_dir = folder_ + "/four";
  EXPECT_EQ(read_run(prepare_shards(large, o), 4), want);

  o.token_bytes = 2;
  o.out_dir = folder_ + "/two";
  try {
    prepare_shards(large, o);
    ADD_FAILURE() << "uint16 shards written for a vocabulary of " << kLargeVocab << " tokens";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--token-bytes 2"), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(kLargeVocab)), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(folder_ + "/two"));  // refused before anything was written

  // The same through the program.
  const std::string bin = shell_quote(LLMCPU_BINARY), in = shell_quote(o.inputs[0]);
  const std::string tok = shell_quote(folder_ + "/large");
  Outcome cli = run_shell(bin + " prepare -i " + in + " -o " + shell_quote(folder_ + "/cli2") +
                          " --token-bytes 2 --tokenizer " + tok + " 2>&1");
  EXPECT_EQ(cli.status, 2) << cli.output;
  EXPECT_NE(cli.output.find("--token-bytes 2"), std::string::npos) << cli.output;
  EXPECT_NE(cli.output.find(std::to_string(kLargeVocab)), std::string::npos) << cli.output;
  for (const std::string bad : {"3", "0", "8"}) {
    cli = run_shell(bin + " prepare -i " + in + " -o " + shell_quote(folder_ + "/cli3") +
                    " --token-bytes " + bad + " --tokenizer " + tok + " 2>&1");
    EXPECT_EQ(cli.status, 2) << cli.output;
    EXPECT_NE(cli.output.find("--token-bytes " + bad), std::string::npos) << cli.output;
  }
}

// `llmcpu prepare --token-bytes 4` with GPT-2's tokenizer: llm.c's uint32 layout, holding exactly
// the ids of the default (uint16) run, shard for shard.
TEST_F(PrepareWidth, Gpt2TokenBytes4MatchesTheUint16Run) {
  const std::string gpt2 = default_tokenizer_dir();
  ASSERT_TRUE(fs::exists(gpt2 + "/encoder.json") && fs::exists(gpt2 + "/vocab.bpe"))
      << gpt2 << " lacks GPT-2's encoder.json or vocab.bpe; " << kSetupHint;
  std::string text;
  for (int i = 0; i < 40; ++i) {
    text += "Paragraph " + std::to_string(i) + ": the quick brown fox jumps over the lazy dog.\n\n";
  }
  const std::string in = shell_quote(input("text.txt", text)), bin = shell_quote(LLMCPU_BINARY);
  const std::string common =
      " prepare --split-on blank-lines --val-tokens 100 --shard-tokens 200 --name t -i " + in;
  Outcome r = run_shell(bin + common + " -o " + shell_quote(folder_ + "/u16") + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_shell(bin + common + " -o " + shell_quote(folder_ + "/u32") + " --token-bytes 4 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(folder_ + "/u16")) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".bin") continue;
    SCOPED_TRACE(name);
    const ShardIds narrow = read_ids(entry.path().string());
    const ShardIds wide = read_ids(folder_ + "/u32/" + name);
    EXPECT_EQ(narrow.token_bytes, 2);
    EXPECT_EQ(wide.token_bytes, 4);
    EXPECT_EQ(wide.ids, narrow.ids);
    EXPECT_EQ(fs::file_size(folder_ + "/u32/" + name), kLlmcHeaderBytes + 4 * wide.ids.size());
    ++files;
  }
  EXPECT_GE(files, 3u);  // a val shard and train shards
}

}  // namespace
}  // namespace llmcpu
