// The Llama family's architecture description: config.json as transformers' LlamaConfig,
// Qwen2Config and MistralConfig write it (core/model/llama_config.h), with their defaults and the
// settings llmcpu refuses by name; the presets of conf/models against the parameter counts their
// model cards publish; and the parameter slots (core/model/parameters.h) a Llama model fills.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/model/block_device.h"
#include "core/model/llama_config.h"
#include "core/model/parameters.h"
#include "core/model/preset.h"
#include "simd/error.h"

namespace llmcpu {
namespace {

using nlohmann::json;

// SmolLM2-135M's config.json, the keys that matter.
json smollm2() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
    "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
    "num_attention_heads": 9, "num_key_value_heads": 3, "max_position_embeddings": 8192,
    "vocab_size": 49152, "rms_norm_eps": 1e-05, "rope_theta": 100000, "rope_scaling": null,
    "tie_word_embeddings": true, "attention_bias": false, "mlp_bias": false,
    "bos_token_id": 0, "eos_token_id": 0, "torch_dtype": "bfloat16"})");
}

// The message of the FileError reading `cfg` throws ("" if none).
std::string refusal(const json& cfg) {
  try {
    read_llama_config(cfg, "config.json");
  } catch (const FileError& e) {
    return e.what();
  }
  return "";
}

TEST(LlamaConfig, ReadsSmolLM2) {
  const ModelConfig c = read_llama_config(smollm2(), "config.json");
  EXPECT_EQ(c.architecture, Architecture::kLlama);
  EXPECT_EQ(c.channels, 576);
  EXPECT_EQ(c.hidden, 1536);
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.num_heads, 9);
  EXPECT_EQ(c.num_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_EQ(c.padded_vocab_size, 49152);
  EXPECT_EQ(c.max_seq_len, 8192);
  EXPECT_EQ(c.norm_eps, 1e-5);
  EXPECT_EQ(c.rope.theta, 100000);
  EXPECT_EQ(c.rope.type, RopeType::kDefault);
  EXPECT_EQ(c.rope.head_dim, 64);
  EXPECT_TRUE(c.tied_head);
  EXPECT_FALSE(c.qkv_bias || c.attn_proj_bias || c.mlp_bias);
  EXPECT_EQ(c.qkv_width(), (9 + 2 * 3) * 64);
  EXPECT_EQ(c.attn_width(), 576);
  EXPECT_EQ(c.fc_width(), 2 * 1536);
}

TEST(LlamaConfig, TransformersDefaults) {
  // LlamaConfig: num_key_value_heads = num_attention_heads, rms_norm_eps 1e-6, rope_theta 10000,
  // tie_word_embeddings false, no biases; V padded to a multiple of 128.
  json cfg = json::parse(R"({"model_type": "llama", "hidden_size": 48, "intermediate_size": 80,
    "num_hidden_layers": 2, "num_attention_heads": 6, "max_position_embeddings": 64,
    "vocab_size": 333})");
  const ModelConfig c = read_llama_config(cfg, "config.json");
  EXPECT_EQ(c.num_kv_heads, 6);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.norm_eps, 1e-6);
  EXPECT_EQ(c.rope.theta, 10000);
  EXPECT_FALSE(c.tied_head);
  EXPECT_EQ(c.padded_vocab_size, 384);
  EXPECT_FALSE(c.qkv_bias || c.attn_proj_bias || c.mlp_bias);
}

TEST(LlamaConfig, FamilyBiasesAndHeadDim) {
  json cfg = smollm2();
  cfg["attention_bias"] = true;
  cfg["mlp_bias"] = true;
  cfg["head_dim"] = 24;
  ModelConfig c = read_llama_config(cfg, "config.json");
  EXPECT_TRUE(c.qkv_bias && c.attn_proj_bias && c.mlp_bias);
  EXPECT_EQ(c.head_dim, 24);
  EXPECT_EQ(c.attn_width(), 9 * 24);
  // Qwen2: biases on q, k and v only, whatever attention_bias says.
  cfg["model_type"] = "qwen2";
  c = read_llama_config(cfg, "config.json");
  EXPECT_EQ(c.architecture, Architecture::kQwen2);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.attn_proj_bias || c.mlp_bias);
  // Mistral: no biases; a sliding window on every layer, the context as it was.
  cfg["model_type"] = "mistral";
  cfg["sliding_window"] = 4096;
  c = read_llama_config(cfg, "config.json");
  EXPECT_FALSE(c.qkv_bias || c.attn_proj_bias || c.mlp_bias);
  EXPECT_EQ(c.max_seq_len, 8192);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.sliding_layers, std::vector<bool>(size_t(c.num_layers), true));
  EXPECT_EQ(c.attention(c.num_layers - 1).window, 4096);
  cfg["sliding_window"] = nullptr;
  c = read_llama_config(cfg, "config.json");
  EXPECT_EQ(c.max_seq_len, 8192);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.attention(0).window, 0);
  // Phi-3: no biases, a window, and a partial rotation refused by name.
  cfg["model_type"] = "phi3";
  cfg["sliding_window"] = 2047;
  c = read_llama_config(cfg, "config.json");
  EXPECT_EQ(c.architecture, Architecture::kPhi3);
  EXPECT_FALSE(c.qkv_bias || c.attn_proj_bias || c.mlp_bias);
  EXPECT_EQ(c.sliding_window, 2047);
  cfg["partial_rotary_factor"] = 0.5;
  EXPECT_NE(refusal(cfg).find("partial_rotary_factor is 0.5"), std::string::npos);
  cfg.erase("partial_rotary_factor");
  cfg["rope_scaling"] = {{"type", "longrope"}, {"short_factor", {1.0}}, {"long_factor", {2.0}}};
  EXPECT_NE(refusal(cfg).find("\"longrope\" is not supported"), std::string::npos);
}

TEST(LlamaConfig, RopeScaling) {
  json cfg = smollm2();
  cfg["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", 32.0},
                         {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0},
                         {"original_max_position_embeddings", 8192}};
  ModelConfig c = read_llama_config(cfg, "config.json");
  EXPECT_EQ(c.rope.type, RopeType::kLlama3);
  EXPECT_EQ(c.rope.factor, 32);
  EXPECT_EQ(c.rope.high_freq_factor, 4);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 8192);
  cfg["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};  // the older key
  c = read_llama_config(cfg, "config.json");
  EXPECT_EQ(c.rope.type, RopeType::kLinear);
  EXPECT_EQ(c.rope.factor, 2);
}

TEST(LlamaConfig, RefusesWhatItDoesNotRunByName) {
  const auto with = [](const char* key, json value) {
    json cfg = smollm2();
    cfg[key] = std::move(value);
    return refusal(cfg);
  };
  EXPECT_NE(with("rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}).find("\"yarn\""),
            std::string::npos);
  EXPECT_NE(with("rope_scaling", {{"rope_type", "dynamic"}, {"factor", 4.0}}).find("dynamic"),
            std::string::npos);
  EXPECT_NE(
      with("rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}}).find("low_freq_factor"),
      std::string::npos);
  EXPECT_NE(with("hidden_act", "gelu").find("hidden_act"), std::string::npos);
  EXPECT_NE(with("num_key_value_heads", 2).find("num_key_value_heads must divide"),
            std::string::npos);
  EXPECT_NE(with("head_dim", 7).find("head_dim"), std::string::npos);
  EXPECT_NE(with("hidden_size", -4).find("hidden_size"), std::string::npos);
  EXPECT_NE(with("vocab_size", "many").find("vocab_size"), std::string::npos);
  EXPECT_NE(with("tie_word_embeddings", 1).find("tie_word_embeddings"), std::string::npos);
  EXPECT_NE(with("model_type", "falcon").find("\"falcon\""), std::string::npos);
  // GPT-2's shape is not a config.json of these keys: the message lists the families that are.
  const std::string gpt2 = with("model_type", "gpt2");
  EXPECT_NE(gpt2.find("\"gemma3_text\""), std::string::npos) << gpt2;
  EXPECT_EQ(gpt2.find("expected \"gpt2\""), std::string::npos) << gpt2;
  json cfg = smollm2();
  cfg.erase("intermediate_size");
  EXPECT_NE(refusal(cfg).find("intermediate_size"), std::string::npos);
  cfg = smollm2();
  cfg["model_type"] = "qwen2";
  cfg["use_sliding_window"] = true;
  EXPECT_NE(refusal(cfg).find("use_sliding_window"), std::string::npos);
  for (const std::string& message : {with("hidden_act", "gelu"), refusal(cfg)}) {
    EXPECT_EQ(message.rfind("config.json: ", 0), 0u) << message;
  }
}

// The parameter counts the models' cards publish (transformers' num_parameters()), from the
// presets' shapes: Vp equals V for all of them, so the flat layout holds exactly the model.
TEST(LlamaConfig, PresetsHaveThePublishedParameterCounts) {
  const struct {
    const char* name;
    size_t parameters;
  } models[] = {
      {"smollm2-135m", 134515008},  {"smollm2-360m", 361821120},    {"qwen2.5-0.5b", 494032768},
      {"llama-3.2-1b", 1235814400}, {"tinyllama-1.1b", 1100048384}, {"gemma-3-270m", 268098176},
      {"gemma-3-1b", 999885952},    {"gemma-2-2b", 2614341888},     {"gemma-2b", 2506172416},
      {"qwen3-0.6b", 596049920},    {"qwen3-1.7b", 1720574976},     {"phi-3-mini-4k", 3821079552},
      {"llama-3.1-8b", 8030261248}};
  for (const auto& m : models) {
    const std::string path = find_conf_file("models", m.name);
    ASSERT_FALSE(path.empty()) << m.name;
    const ModelConfig c = load_model_preset(path);
    EXPECT_NE(c.architecture, Architecture::kGpt2) << m.name;
    // Phi-3's 32064 tokens are padded to 32128 rows, in the embedding and the untied head.
    const size_t padding =
        size_t(c.padded_vocab_size - c.vocab_size) * c.channels * (c.tied_head ? 1 : 2);
    EXPECT_EQ(ParameterLayout(c).total(), m.parameters + padding) << m.name;
  }
  const ModelConfig llama32 = load_model_preset(find_conf_file("models", "llama-3.2-1b"));
  EXPECT_EQ(llama32.rope.type, RopeType::kLlama3);
  EXPECT_EQ(load_model_preset(find_conf_file("models", "qwen2.5-0.5b")).architecture,
            Architecture::kQwen2);
  EXPECT_FALSE(load_model_preset(find_conf_file("models", "tinyllama-1.1b")).tied_head);
}

// The slots a Llama model fills and the ones it leaves empty; an untied head in wpe's slot.
TEST(LlamaConfig, ParameterSlots) {
  json cfg = smollm2();
  cfg["tie_word_embeddings"] = false;
  cfg["model_type"] = "qwen2";
  const ModelConfig c = read_llama_config(cfg, "config.json");
  const ParameterLayout layout(c);
  EXPECT_STREQ(layout.name(kLmHead), "lm_head");
  EXPECT_TRUE(layout.untied_head());
  EXPECT_EQ(layout.size(kLmHead), size_t(49152) * 576);
  for (int empty : {kWpe, kLn1b, kAttprojb, kLn2b, kFcb, kFcprojb, kLnfb}) {
    EXPECT_EQ(layout.size(empty), 0u) << layout.name(empty);
  }
  EXPECT_EQ(layout.layer_size(kQkvw), size_t(15 * 64) * 576);
  EXPECT_EQ(layout.layer_size(kQkvb), size_t(15 * 64));  // Qwen2's q, k, v biases
  EXPECT_EQ(layout.layer_size(kFcw), size_t(2 * 1536) * 576);
  EXPECT_EQ(layout.layer_size(kFcprojw), size_t(576) * 1536);
  size_t spanned = 0;
  for (const ParameterSpan& s : layout.spans()) {
    EXPECT_GT(s.count, 0u);
    EXPECT_EQ(s.offset, spanned);
    spanned += s.count;
  }
  EXPECT_EQ(spanned, layout.total());
  std::vector<float> flat(layout.total());
  const ParameterViews<float> v = ParameterViews<float>::carve(flat.data(), layout);
  EXPECT_EQ(v.head(), v.lm_head);
  EXPECT_EQ(v.head(), flat.data() + layout.size(kWte));  // right after the embedding
  EXPECT_EQ(v.wpe, nullptr);
  EXPECT_EQ(v.ln1b, nullptr);
  EXPECT_EQ(v.layer(3).attprojb, nullptr);
  EXPECT_EQ(v.layer(3).qkvb, flat.data() + layout.offset(kQkvb) + 3 * layout.layer_size(kQkvb));
}

// A plugin runs GPT-2's block only (the ABI describes no other): every other family is refused by
// its model_type and the ops of its blocks, before any device is opened.
TEST(LlamaConfig, PluginRefusesEveryOtherFamilyByName) {
  const struct {
    const char* type;
    const char* blocks;
  } families[] = {{"llama", "RMSNorm, rotary positions, SwiGLU"},
                  {"qwen2", "RMSNorm, rotary positions, SwiGLU"},
                  {"mistral", "RMSNorm, rotary positions, SwiGLU"},
                  {"phi3", "RMSNorm, rotary positions, SwiGLU"},
                  {"qwen3", "RMSNorm, rotary positions, SwiGLU"},
                  {"gemma", "RMSNorm, rotary positions, GeGLU"},
                  {"gemma2", "RMSNorm, rotary positions, GeGLU"},
                  {"gemma3_text", "RMSNorm, rotary positions, GeGLU"}};
  for (const auto& f : families) {
    json cfg = smollm2();
    cfg["model_type"] = f.type;
    cfg["head_dim"] = 64;
    cfg["hidden_act"] = std::string(f.type).rfind("gemma", 0) == 0 ? "gelu_pytorch_tanh" : "silu";
    const ModelConfig c = read_llama_config(cfg, "config.json");
    try {
      check_offloadable(c);
      ADD_FAILURE() << f.type << " was not refused";
    } catch (const DeviceError& e) {
      const std::string want = std::string("this ") + f.type + " model's blocks (" + f.blocks + ")";
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
  ModelConfig gpt2;
  gpt2.max_seq_len = 16, gpt2.vocab_size = 50, gpt2.padded_vocab_size = 128;
  gpt2.num_layers = 1, gpt2.num_heads = 2, gpt2.channels = 8;
  EXPECT_NO_THROW(check_offloadable(gpt2));
}

}  // namespace
}  // namespace llmcpu
