// Llama-family models for the tests of train's files, sample and convert, made here without
// PyTorch: a preset (grouped-query attention 6:2, an untied head, llama3 rope scaling), a Hugging
// Face folder of it (random weights, a config.json with keys llmcpu knows nothing of) and a small
// byte-level BPE tokenizer.json (256 byte tokens and <s>, </s>) with tokenizer_config.json and
// special_tokens_map.json beside, and token shards of random ids below V.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/io/hf_llama.h"
#include "core/io/json_file.h"
#include "core/io/model_file.h"
#include "core/io/token_shard.h"
#include "core/model/model.h"
#include "core/model/preset.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/rng.h"

namespace llmcpu::testing {

// The preset's text: L=2 C=48 NH=6 NKV=2 (D=8) H=80, V tokens, maxT=64 (or max_len), untied,
// llama3 scaling of an original context of 16.
inline std::string llama_preset_text(int V, int kv_heads = 2, int max_len = 64) {
  return "model_type = \"llama\"\nhidden_size = 48\nintermediate_size = 80\n"
         "num_hidden_layers = 2\nnum_attention_heads = 6\nnum_key_value_heads = " +
         std::to_string(kv_heads) +
         "\nmax_position_embeddings = " + std::to_string(max_len) +
         "\nvocab_size = " + std::to_string(V) +
         "\nrope_theta = 10000.0\nrms_norm_eps = 1e-5\ntie_word_embeddings = false\n"
         "[rope_scaling]\nrope_type = \"llama3\"\nfactor = 4.0\nlow_freq_factor = 1.0\n"
         "high_freq_factor = 4.0\noriginal_max_position_embeddings = 16\n";
}

// Writes the preset to `path` and returns its architecture.
inline ModelConfig write_llama_preset(const std::string& path, int V, int kv_heads = 2,
                                      int max_len = 64) {
  std::ofstream(path) << llama_preset_text(V, kv_heads, max_len);
  return load_model_preset(path);
}

// A flat array of weights that make every op matter: matrices N(0, 0.2), norms 1 + N(0, 0.1), the
// padding rows of the embedding and the head zero.
inline std::vector<float> random_llama_weights(const ModelConfig& c, uint64_t seed) {
  const ParameterLayout layout(c);
  std::vector<float> w(layout.total(), 0.0f);
  Rng rng(seed);
  for (int i = 0; i < kNumTensorRoles; ++i) {
    const bool norm = i == kLn1w || i == kLn2w || i == kLnfw;
    for (size_t j = 0; j < layout.size(i); ++j) {
      w[layout.offset(i) + j] = float(norm ? 1 + 0.1 * rng.normal() : 0.2 * rng.normal());
    }
  }
  for (int i : {kWte, kLmHead}) {
    if (layout.size(i) == 0) continue;
    std::fill(w.begin() + long(layout.offset(i) + size_t(c.vocab_size) * c.channels),
              w.begin() + long(layout.offset(i) + layout.size(i)), 0.0f);
  }
  return w;
}

inline std::string utf8(int cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

// A byte-level BPE tokenizer.json without merges: ids 0..n-1 are `bytes` in that order, then the
// special added tokens `specials`, of which the first is BOS (added before every text) and the
// second EOS; tokenizer_config.json and special_tokens_map.json name them. Into `dir`.
inline void write_byte_level_tokenizer(const std::string& dir,
                                       const std::vector<unsigned char>& bytes,
                                       const std::vector<std::string>& specials) {
  using nlohmann::json;
  json vocab = json::object();
  for (size_t i = 0; i < bytes.size(); ++i) vocab[utf8(byte_to_unicode(bytes[i]))] = int(i);
  const auto added = [](size_t id, const std::string& content) {
    return json{{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
                {"rstrip", false}, {"normalized", false}, {"special", true}};
  };
  json added_tokens = json::array();
  for (size_t i = 0; i < specials.size(); ++i)
    added_tokens.push_back(added(bytes.size() + i, specials[i]));
  const std::string& bos = specials.at(0);
  const size_t bos_id = bytes.size();
  const json byte_level = {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", true},
                           {"use_regex", true}};
  const json tok = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added_tokens},
      {"normalizer", nullptr},
      {"pre_tokenizer", byte_level},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair",
         {{{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
        {"special_tokens", {{bos, {{"id", bos}, {"ids", {bos_id}}, {"tokens", {bos}}}}}}}},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", json::array()}}}};
  std::ofstream(dir + "/tokenizer.json") << tok.dump(1);
  std::ofstream(dir + "/tokenizer_config.json") << json{
      {"bos_token", bos},
      {"eos_token", specials.at(1)},
      {"add_bos_token", true},
      {"tokenizer_class", "PreTrainedTokenizerFast"}}.dump(2);
  std::ofstream(dir + "/special_tokens_map.json")
      << json{{"bos_token", bos}, {"eos_token", specials.at(1)}}.dump(2);
}

// The byte-level tokenizer of every byte: ids 0..255 are the bytes, 256 is <s> (BOS, added before
// every text), 257 is </s> (EOS).
inline void write_byte_tokenizer(const std::string& dir) {
  std::vector<unsigned char> bytes(256);
  for (int b = 0; b < 256; ++b) bytes[b] = static_cast<unsigned char>(b);
  write_byte_level_tokenizer(dir, bytes, {"<s>", "</s>"});
}

// A Hugging Face folder of the preset's model (random weights, F32) whose config.json also holds
// bos/eos ids and a key of its own, with the byte tokenizer beside it. Returns the architecture.
inline ModelConfig write_llama_folder(const std::string& dir, const std::string& preset, int V,
                                      uint64_t seed = 7) {
  const ModelConfig c = write_llama_preset(preset, V);
  const std::vector<float> w = random_llama_weights(c, seed);
  const nlohmann::json base = {
      {"bos_token_id", 256}, {"eos_token_id", 257}, {"a_key_of_its_own", "kept"}};
  save_hf_llama(dir, c, w.data(), TensorDtype::kF32, base);
  write_byte_tokenizer(dir);
  return c;
}

// A token shard of `n` random ids below V.
inline void write_random_shard(const std::string& path, int n, int V, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint16_t> tokens(n);
  for (auto& t : tokens) t = static_cast<uint16_t>(rng.below(V));
  write_token_shard(path, tokens);
}

// The weights of a Llama-family model file (a folder or a .safetensors with config.json beside).
inline std::vector<float> load_llama_weights(const std::string& path) {
  const ModelSource source = open_model_file(path);
  std::vector<float> w(ParameterLayout(source.config).total());
  load_model_parameters(source, w.data());
  return w;
}

}  // namespace llmcpu::testing
