// A Llama 3-sized vocabulary from end to end: `llmcpu prepare --tokenizer tokenizer.json` writes
// llm.c's uint32 shards (header magic 20240801, version 7) holding, for every document, a separator
// then the document's ids exactly as tokenizers.js gives them (ids above 65535 included), and
// `llmcpu train` trains a tiny model with V = 128256 on them. The tokenizer is
// hf_make_tokenizers.mjs's llama3 layout (GPT-2's tokens, fillers, added tokens at 127996..127999,
// specials at 128000..128255); the reference is hf_reference.mjs.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "tests/tokenizer/test_hf_util.h"

namespace llmcpu {
namespace {

using namespace llmcpu::testing;

constexpr int kVocab = 128256;
constexpr int kBeginOfText = 128000;

uint32_t le32(const Bytes& b, size_t at) {
  return uint32_t(b[at]) | uint32_t(b[at + 1]) << 8 | uint32_t(b[at + 2]) << 16 |
         uint32_t(b[at + 3]) << 24;
}

class HfPrepare : public TempDirTest {};

TEST_F(HfPrepare, Llama3VocabularyShardsAreUint32AndTrain) {
  const HfReference ref = find_hf_reference();
  ASSERT_TRUE(ref.missing.empty()) << ref.missing;
  make_hf_layouts(ref, dir_.string(), {"llama3"});
  // The separator before each document is the BOS where the tokenizer puts one in front of a text,
  // else the EOS: here the post-processor's <|begin_of_text|> (Llama 3's tokenizer_config.json has
  // no add_bos_token).
  const std::string prose = read_file(LLMCPU_TOKENIZER_TEST_DIR "/texts/hf/prose.txt");
  const std::vector<std::string> docs = {
      "llmcpu trains on CPUs. <tool_call>{\"f\": 1}</tool_call> then <|fim_middle|>  done.\n" +
          prose.substr(0, 900),
      "Second document: llmcpu's tokenizer, <|eot_id|> inside, \xe4\xb8\xad\xe6\x96\x87 and "
      "12345.\n" +
          prose.substr(900, 700),
      "llmcpu"};
  const HfReferenceRun expected = run_hf_reference(ref, path("llama3"), docs, path("docs.json"));
  ASSERT_TRUE(expected.error.empty()) << expected.error;
  ASSERT_EQ(expected.vocab_size, kVocab);
  ASSERT_EQ(expected.document_token_id, kBeginOfText);
  std::vector<uint32_t> stream;
  for (const HfExpected& e : expected.texts) {
    ASSERT_EQ(e.ids_special.front(), kBeginOfText) << "the layout adds <|begin_of_text|>";
    stream.push_back(kBeginOfText);
    stream.insert(stream.end(), e.ids_document.begin(), e.ids_document.end());
  }
  // The documents hold non-special added tokens (127996..127999), which stay tokens; the text of
  // the special <|eot_id|> (128009) is encoded as text, as llm.c's scripts encode with
  // split_special_tokens, so no document holds a control token of its own.
  EXPECT_NE(std::find(stream.begin(), stream.end(), 127998u), stream.end());
  EXPECT_NE(std::find(stream.begin(), stream.end(), 127996u), stream.end());
  EXPECT_EQ(std::find(stream.begin(), stream.end(), 128009u), stream.end());
  EXPECT_NE(std::find(expected.texts[1].ids.begin(), expected.texts[1].ids.end(), 128009),
            expected.texts[1].ids.end())
      << "tokenizers.js's encode matches <|eot_id|> as its special token";

  std::string inputs;
  for (size_t i = 0; i < docs.size(); ++i) {
    const std::string f = path("doc" + std::to_string(i) + ".txt");
    write_file(f, docs[i]);
    inputs += " " + shell_quote(f);
  }
  const Outcome prepared =
      run_llmcpu("prepare --tokenizer " + shell_quote(path("llama3/tokenizer.json")) + " --input" +
                 inputs + " --out-dir " + shell_quote(path("out")) + " --name hf --val-tokens 32");
  ASSERT_EQ(prepared.status, 0) << prepared.output;

  // The shards it names, val then train, read back as llm.c reads them.
  std::vector<std::string> shards;
  for (const char* kind : {"val   ", "train "}) {
    std::istringstream lines(prepared.output);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(kind, 0) == 0) shards.push_back(line.substr(6));
    }
  }
  ASSERT_GE(shards.size(), 2u) << prepared.output;
  std::vector<uint32_t> back;
  for (const std::string& s : shards) {
    SCOPED_TRACE(s);
    const Bytes b = read_bytes(s);
    ASSERT_GE(b.size(), 1024u);
    EXPECT_EQ(le32(b, 0), 20240801u) << "llm.c's magic for uint32 tokens";
    EXPECT_EQ(le32(b, 4), 7u) << "llm.c's version for uint32 tokens";
    const uint32_t n = le32(b, 8);
    ASSERT_EQ(b.size(), 1024u + 4u * n) << "a header of 256 int32 then n uint32 tokens";
    for (uint32_t i = 0; i < n; ++i) back.push_back(le32(b, 1024 + 4 * i));
  }
  EXPECT_EQ(le32(read_bytes(shards[0]), 8), 32u) << "--val-tokens 32";
  EXPECT_TRUE(back == stream) << id_difference(std::vector<int>(back.begin(), back.end()),
                                               std::vector<int>(stream.begin(), stream.end()));

  // A tiny model over the whole vocabulary trains on the train shards; from GPT-2's
  // initialisation (logits near 0) the first loss is near ln V.
  write_file(path("tiny.toml"),
             "layers = 1\nheads = 2\nchannels = 16\nmax_seq_len = 16\nvocab_size = " +
                 std::to_string(kVocab) + "\n");
  const Outcome trained = run_llmcpu("train --model " + shell_quote(path("tiny.toml")) +
                                     " --train-data " + shell_quote(path("out/hf_train_*.bin")) +
                                     " -b 2 -t 16 --steps 2 --log " + shell_quote(path("log.txt")));
  ASSERT_EQ(trained.status, 0) << trained.output;
  std::ifstream log(path("log.txt"));
  std::vector<double> losses;
  for (std::string line; std::getline(log, line);) {
    const size_t at = line.find("trl:");
    if (at != std::string::npos) losses.push_back(std::stod(line.substr(at + 4)));
  }
  ASSERT_EQ(losses.size(), 2u) << trained.output;
  EXPECT_NEAR(losses[0], std::log(double(kVocab)), 0.5);
}

}  // namespace
}  // namespace llmcpu

namespace llmcpu {
namespace {

// The other places a tokenizer is taken: `train --sample-every` and `sample`, with the llama2
// layout (a SentencePiece-style vocabulary of 1622 ids whose tokenizer adds <s>): samples start
// from <s>, the prompt is encoded as tokenizers.js encodes it, and the text is the decoder's.
TEST_F(HfPrepare, TrainSamplesAndSampleUseTheTokenizerJson) {
  const HfReference ref = find_hf_reference();
  ASSERT_TRUE(ref.missing.empty()) << ref.missing;
  make_hf_layouts(ref, dir_.string(), {"llama2"});
  const std::string prompt = "Once upon a time";
  const HfReferenceRun expected = run_hf_reference(ref, path("llama2"), {prompt}, path("p.json"));
  ASSERT_TRUE(expected.error.empty()) << expected.error;
  ASSERT_EQ(expected.document_token_id, 1) << "<s> starts every document";

  write_file(path("doc.txt"), read_file(LLMCPU_TOKENIZER_TEST_DIR "/texts/hf/prose.txt"));
  const Outcome prepared = run_llmcpu("prepare --tokenizer " + shell_quote(path("llama2")) +
                                      " --input " + shell_quote(path("doc.txt")) + " --out-dir " +
                                      shell_quote(path("out")) + " --val-tokens 64");
  ASSERT_EQ(prepared.status, 0) << prepared.output;
  write_file(path("tiny.toml"),
             "layers = 1\nheads = 2\nchannels = 16\nmax_seq_len = 32\n"
             "vocab_size = " +
                 std::to_string(expected.vocab_size) + "\n");
  const Outcome trained =
      run_llmcpu("train --model " + shell_quote(path("tiny.toml")) + " --train-data " +
                 shell_quote(path("out/data_train_*.bin")) +
                 " -b 1 -t 32 --steps 2 --sample-every 2 " + "--sample-tokens 8 --tokenizer " +
                 shell_quote(path("llama2")) + " --save " + shell_quote(path("m.bin")));
  ASSERT_EQ(trained.status, 0) << trained.output;
  EXPECT_NE(trained.output.find("sample at step"), std::string::npos) << trained.output;
  EXPECT_EQ(trained.output.find("samples are shown as token ids"), std::string::npos)
      << trained.output;

  const Outcome sampled = run_llmcpu("sample --model " + shell_quote(path("m.bin")) +
                                     " --tokenizer " + shell_quote(path("llama2")) + " --prompt " +
                                     shell_quote(prompt) + " --tokens 6 --seed 3");
  ASSERT_EQ(sampled.status, 0) << sampled.output;
  EXPECT_NE(sampled.output.find(prompt), std::string::npos) << sampled.output;
  // The context is <s> and the prompt's ids.
  const std::string context =
      "after a " + std::to_string(1 + expected.texts[0].ids.size()) + "-token context";
  EXPECT_NE(sampled.output.find(context), std::string::npos) << sampled.output;

  // A tokenizer with more tokens than the model has rows (the gpt2 layout) is refused by name.
  make_hf_layouts(ref, path("other"), {"gpt2"});
  const Outcome refused = run_llmcpu("sample --model " + shell_quote(path("m.bin")) +
                                     " --tokens 4 --tokenizer " + shell_quote(path("other/gpt2")));
  EXPECT_EQ(refused.status, 2) << refused.output;
  EXPECT_NE(refused.output.find("tokens, more than the 1664 rows of --model"), std::string::npos)
      << refused.output;
}

}  // namespace
}  // namespace llmcpu
