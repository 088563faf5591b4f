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

  // Another model's tokenizer (the gpt2 layout: <|endoftext|> is 50256) is refused by name.
  make_hf_layouts(ref, path("other"), {"gpt2"});
  const Outcome refused = run_llmcpu("sample --model " + shell_quote(path("m.bin")) +
                                     " --tokens 4 --tokenizer " + shell_quote(path("other/gpt2")));
  EXPECT_EQ(refused.status, 2) << refused.output;
  EXPECT_NE(refused.output.find("the document token 50256 (<|endoftext|>) of --tokenizer " +
                                path("other/gpt2")),
            std::string::npos)
      << refused.output;
  EXPECT_NE(refused.output.find("is past the V=" + std::to_string(expected.vocab_size) +
                                " of --model " + path("m.bin") +
                                ": the tokenizer is not the model's"),
            std::string::npos)
      << refused.output;
}

// Every family with its own tokenizer: the published files of Gemma 1/2 (gemma, gemma2), Gemma 3
// (gemma3_text) and Qwen3, and the llama2 layout for Phi-3 (whose tokenizer is Llama 2's). The
// text is prepared with it, a small model of the family with the tokenizer's vocabulary (the
// published models' V: Gemma 3's tokenizer has one token, its image token, past it) trains a step
// with a decoded sample, is saved, and `sample` continues a prompt from the document token
// tokenizers.js names (<bos> for Gemma, the EOS for Qwen3, whose tokenizer adds no BOS) and the
// prompt's ids as tokenizers.js gives them.
struct FamilyCase {
  const char* model_type;
  const char* tokenizer;  // a published_tokenizers() model, or "llama2" (the layout)
  int vocab_size;         // 0: the tokenizer's
  const char* keys;       // more preset keys
};

void PrintTo(const FamilyCase& f, std::ostream* os) { *os << f.model_type << " with " << f.tokenizer; }

class HfFamilySample : public TempDirTest, public ::testing::WithParamInterface<FamilyCase> {};

TEST_P(HfFamilySample, PreparesTrainsAndSamplesWithItsTokenizer) {
  const FamilyCase& f = GetParam();
  const HfReference ref = find_hf_reference();
  ASSERT_TRUE(ref.missing.empty()) << ref.missing;
  std::string tok;
  if (std::string(f.tokenizer) == "llama2") {
    make_hf_layouts(ref, dir_.string(), {"llama2"});
    tok = path("llama2");
  } else {
    const PublishedTokenizer published = find_published_tokenizer(f.tokenizer);
    ASSERT_TRUE(published.missing.empty()) << published.missing;
    tok = published.dir;
  }
  const std::string prompt = "The jury said the election was conducted";
  const HfReferenceRun expected = run_hf_reference(ref, tok, {prompt}, path("p.json"));
  ASSERT_TRUE(expected.error.empty()) << expected.error;
  ASSERT_TRUE(expected.document_token_id.has_value());
  const std::vector<int>& with_specials = expected.texts[0].ids_special;
  const bool adds_bos = !with_specials.empty() && with_specials.front() == *expected.document_token_id;
  if (std::string(f.model_type).rfind("gemma", 0) == 0) {
    EXPECT_TRUE(adds_bos) << "Gemma's tokenizer starts a text with <bos>";
    EXPECT_EQ(*expected.document_token_id, 2);
  }

  write_file(path("doc.txt"), read_file(LLMCPU_TOKENIZER_TEST_DIR "/texts/hf/prose.txt"));
  const Outcome prepared = run_llmcpu("prepare --tokenizer " + shell_quote(tok) + " --input " +
                                      shell_quote(path("doc.txt")) + " --out-dir " +
                                      shell_quote(path("out")) + " --val-tokens 64");
  ASSERT_EQ(prepared.status, 0) << prepared.output;
  const int vocab = f.vocab_size ? f.vocab_size : expected.vocab_size;
  write_file(path("model.toml"), std::string("model_type = \"") + f.model_type +
                                     "\"\nhidden_size = 32\nintermediate_size = 64\n"
                                     "num_hidden_layers = 2\nnum_attention_heads = 2\n"
                                     "max_position_embeddings = 64\nvocab_size = " +
                                     std::to_string(vocab) + "\n" + f.keys);
  const Outcome trained = run_llmcpu(
      "train --model " + shell_quote(path("model.toml")) + " --train-data " +
      shell_quote(path("out/data_train_*.bin")) + " -b 1 -t 32 --steps 1 --sample-every 1 " +
      "--sample-tokens 4 --tokenizer " + shell_quote(tok) + " --save " + shell_quote(path("m")));
  ASSERT_EQ(trained.status, 0) << trained.output;
  EXPECT_NE(trained.output.find("train: " + std::string(f.model_type) + " L=2"),
            std::string::npos)
      << trained.output;
  EXPECT_NE(trained.output.find("sample at step"), std::string::npos) << trained.output;
  EXPECT_EQ(trained.output.find("samples are shown as token ids"), std::string::npos)
      << trained.output;

  const Outcome sampled =
      run_llmcpu("sample --model " + shell_quote(path("m")) + " --tokenizer " + shell_quote(tok) +
                 " --prompt " + shell_quote(prompt) + " --tokens 5 --temperature 0");
  ASSERT_EQ(sampled.status, 0) << sampled.output;
  EXPECT_NE(sampled.output.find("\n" + prompt), std::string::npos) << sampled.output;
  // The document token, then the prompt's ids (with a BOS-adding tokenizer: its ids with the
  // special tokens, of which the BOS is the first).
  const size_t context = adds_bos ? with_specials.size() : 1 + expected.texts[0].ids.size();
  EXPECT_NE(sampled.output.find("after a " + std::to_string(context) + "-token context"),
            std::string::npos)
      << sampled.output;
}

INSTANTIATE_TEST_SUITE_P(
    Families, HfFamilySample,
    ::testing::Values(
        FamilyCase{"gemma", "gemma", 256000, "num_key_value_heads = 1\nhead_dim = 16\n"},
        FamilyCase{"gemma2", "gemma", 256000,
                   "num_key_value_heads = 1\nhead_dim = 16\nsliding_window = 8\n"
                   "attn_logit_softcapping = 50.0\nfinal_logit_softcapping = 30.0\n"},
        FamilyCase{"gemma3_text", "gemma3", 262144,
                   "num_key_value_heads = 1\nhead_dim = 16\nsliding_window = 8\n"
                   "sliding_window_pattern = 2\n"},
        FamilyCase{"qwen3", "qwen3", 151936, "num_key_value_heads = 1\nhead_dim = 24\n"},
        FamilyCase{"phi3", "llama2", 0, "tie_word_embeddings = false\n"}),
    [](const ::testing::TestParamInfo<FamilyCase>& info) {
      std::string name = info.param.model_type;
      for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

}  // namespace
}  // namespace llmcpu
