// The linear maps LoRA adapters attach to (core/lora/lora_modules.h), against PEFT's module names
// and shapes (PEFT 0.17.1's LoraLayer: in_features and out_features of each nn.Linear, and of
// GPT-2's Conv1D read from its (in, out) weight; tests/fixtures/lora_reference.py holds the same
// rules) and its target matching (check_target_module_exists: a name equal to the module's or a
// suffix after a dot), with the rows of llmcpu's fused weights each module is.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/lora/lora_modules.h"
#include "core/model/llama_config.h"
#include "core/model/parameters.h"
#include "simd/error.h"

namespace llmcpu {
namespace {

using nlohmann::json;

ModelConfig family_config(const char* model_type, json extra = json::object()) {
  json cfg = {{"model_type", model_type},     {"hidden_size", 32},
              {"intermediate_size", 48},      {"num_hidden_layers", 2},
              {"num_attention_heads", 4},     {"num_key_value_heads", 2},
              {"head_dim", 8},                {"max_position_embeddings", 16},
              {"vocab_size", 40},             {"rms_norm_eps", 1e-6}};
  cfg.update(extra);
  return read_llama_config(cfg, "config.json");
}

std::vector<std::string> names(const std::vector<LoraModule>& modules) {
  std::vector<std::string> out;
  for (const LoraModule& m : modules) out.push_back(m.name);
  return out;
}

TEST(LoraModules, LlamaFamilyModulesAreRowBlocksOfTheFusedWeights) {
  const ModelConfig c = family_config("llama");
  const std::vector<LoraModule> m = lora_modules(c);
  ASSERT_EQ(m.size(), 14u);
  const std::vector<std::string> layer0 = {
      "model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj",
      "model.layers.0.self_attn.v_proj", "model.layers.0.self_attn.o_proj",
      "model.layers.0.mlp.gate_proj",    "model.layers.0.mlp.up_proj",
      "model.layers.0.mlp.down_proj"};
  const std::vector<std::string> all = names(m);
  EXPECT_EQ(std::vector<std::string>(all.begin(), all.begin() + 7), layer0);
  // q: 4 heads of 8 rows 0..31 of qkvw; k and v: 2 heads of 8 each, after it. gate and up: the two
  // halves of fcw. (out, in) as nn.Linear's.
  const struct {
    int role;
    size_t row0, rows, in;
  } want[] = {{kQkvw, 0, 32, 32},      {kQkvw, 32, 16, 32}, {kQkvw, 48, 16, 32},
              {kAttprojw, 0, 32, 32},  {kFcw, 0, 48, 32},   {kFcw, 48, 48, 32},
              {kFcprojw, 0, 32, 48}};
  for (int i = 0; i < 7; ++i) {
    SCOPED_TRACE(m[i].name);
    EXPECT_EQ(m[i].layer, 0);
    EXPECT_EQ(m[i].role, want[i].role);
    EXPECT_EQ(m[i].row0, want[i].row0);
    EXPECT_EQ(m[i].rows, want[i].rows);
    EXPECT_EQ(m[i].in, want[i].in);
  }
  EXPECT_EQ(m[7].name, "model.layers.1.self_attn.q_proj");
  EXPECT_EQ(m[7].layer, 1);
  EXPECT_EQ(peft_tensor_name(m[0], 'A'),
            "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ(peft_tensor_name(m[6], 'B'),
            "base_model.model.model.layers.0.mlp.down_proj.lora_B.weight");
}

TEST(LoraModules, Phi3HasItsFusedProjections) {
  const ModelConfig c = family_config("phi3", {{"head_dim", nullptr}, {"num_attention_heads", 4}});
  const std::vector<LoraModule> m = lora_modules(c);
  ASSERT_EQ(m.size(), 8u);
  EXPECT_EQ(m[0].name, "model.layers.0.self_attn.qkv_proj");
  EXPECT_EQ(m[0].rows, size_t(c.qkv_width()));
  EXPECT_EQ(m[2].name, "model.layers.0.mlp.gate_up_proj");
  EXPECT_EQ(m[2].rows, 96u);
  EXPECT_EQ(m[2].in, 32u);
  EXPECT_EQ(m[3].name, "model.layers.0.mlp.down_proj");
}

TEST(LoraModules, Gpt2HasItsConv1dModules) {
  const ModelConfig c = {.max_seq_len = 64,
                         .vocab_size = 300,
                         .padded_vocab_size = 384,
                         .num_layers = 2,
                         .num_heads = 2,
                         .channels = 64};
  const std::vector<LoraModule> m = lora_modules(c);
  ASSERT_EQ(m.size(), 8u);
  const size_t C = c.channels;
  EXPECT_EQ(m[0].name, "transformer.h.0.attn.c_attn");
  EXPECT_EQ(m[0].rows, 3 * C);
  EXPECT_EQ(m[0].in, C);
  EXPECT_EQ(m[1].name, "transformer.h.0.attn.c_proj");
  EXPECT_EQ(m[2].name, "transformer.h.0.mlp.c_fc");
  EXPECT_EQ(m[2].rows, 4 * C);
  EXPECT_EQ(m[3].name, "transformer.h.0.mlp.c_proj");
  EXPECT_EQ(m[3].in, 4 * C);
  EXPECT_EQ(peft_tensor_name(m[0], 'A'),
            "base_model.model.transformer.h.0.attn.c_attn.lora_A.weight");
  // "c_proj" is a suffix of both c_proj modules, as PEFT matches it.
  EXPECT_EQ(names(select_lora_modules(c, {"c_proj"})),
            (std::vector<std::string>{"transformer.h.0.attn.c_proj", "transformer.h.0.mlp.c_proj",
                                      "transformer.h.1.attn.c_proj",
                                      "transformer.h.1.mlp.c_proj"}));
  EXPECT_EQ(select_lora_modules(c, {"mlp.c_proj"}).size(), 2u);
}

TEST(LoraModules, TargetsSelectAsPeftMatchesThem) {
  const ModelConfig c = family_config("qwen3");
  EXPECT_EQ(select_lora_modules(c, {"all-linear"}).size(), 14u);
  EXPECT_EQ(names(select_lora_modules(c, {"v_proj", "q_proj"})),
            (std::vector<std::string>{
                "model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.v_proj",
                "model.layers.1.self_attn.q_proj", "model.layers.1.self_attn.v_proj"}));
  EXPECT_EQ(names(select_lora_modules(c, {"model.layers.1.mlp.up_proj"})),
            (std::vector<std::string>{"model.layers.1.mlp.up_proj"}));
  // A name must match a whole dotted part: "proj" is no module's last name.
  try {
    select_lora_modules(c, {"q_proj", "proj"});
    FAIL() << "an unknown target was accepted";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("LoRA target 'proj' names no linear map of this Qwen3 model"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("all-linear or q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, "
                        "down_proj"),
              std::string::npos)
        << what;
  }
  // The q and k norms and the head are no targets.
  EXPECT_THROW(select_lora_modules(c, {"q_norm"}), UsageError);
  EXPECT_THROW(select_lora_modules(c, {"lm_head"}), UsageError);
}

}  // namespace
}  // namespace llmcpu
