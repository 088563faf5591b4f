// PEFT adapter folders (core/lora/peft_files.h) against PEFT's published format, PEFT 0.17.1 as
// tests/fixtures/lora_reference.py writes it down: adapter_config.json holds every LoraConfig key
// (adapter_config()), and a reader refuses, naming the file and the key, what llmcpu's LoRA does
// not compute (DoRA, per-module ranks and alphas, some layers only, biases,
// a regex target_modules); adapter_model.safetensors holds base_model.model.M.lora_A.weight
// (r, in) and .lora_B.weight (out, r) for exactly the modules target_modules selects;
// target_modules is saved condensed to the shortest suffixes when 20 or more modules are targeted
// (PEFT's _find_minimal_target_modules, worked through by hand below).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/io/safetensors.h"
#include "core/lora/peft_files.h"
#include "core/model/llama_config.h"
#include "core/util/file.h"
#include "simd/bf16.h"
#include "simd/error.h"
#include "tests/common/temp_files.h"
#include "tests/unit/lora_configs.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// adapter_config.json as PEFT 0.17.1's save_pretrained writes it (lora_reference.adapter_config).
json peft_config(const json& target_modules) {
  return {{"alpha_pattern", json::object()},
          {"auto_mapping", nullptr},
          {"base_model_name_or_path", "base"},
          {"bias", "none"},
          {"corda_config", nullptr},
          {"eva_config", nullptr},
          {"exclude_modules", nullptr},
          {"fan_in_fan_out", false},
          {"inference_mode", true},
          {"init_lora_weights", false},
          {"layer_replication", nullptr},
          {"layers_pattern", nullptr},
          {"layers_to_transform", nullptr},
          {"loftq_config", json::object()},
          {"lora_alpha", 8},
          {"lora_bias", false},
          {"lora_dropout", 0.0},
          {"megatron_config", nullptr},
          {"megatron_core", "megatron.core"},
          {"modules_to_save", nullptr},
          {"peft_type", "LORA"},
          {"qalora_group_size", 16},
          {"r", 4},
          {"rank_pattern", json::object()},
          {"revision", nullptr},
          {"target_modules", target_modules},
          {"target_parameters", nullptr},
          {"task_type", "CAUSAL_LM"},
          {"trainable_token_indices", nullptr},
          {"use_dora", false},
          {"use_qalora", false},
          {"use_rslora", false}};
}

std::vector<std::string> names(const std::vector<LoraModule>& modules) {
  std::vector<std::string> out;
  for (const LoraModule& m : modules) out.push_back(m.name);
  return out;
}

class PeftFiles : public testing::TempDirTest {
 protected:
  std::string config_path() const { return path("adapter_config.json"); }
  void write_config(const json& j) { std::ofstream(config_path(), std::ios::trunc) << j.dump(2); }
  std::string weights_path() const { return path("adapter_model.safetensors"); }
  // adapter_model.safetensors with these tensors, as PEFT writes it (F32, format pt).
  void write_weights(const std::vector<TensorToWrite>& tensors) {
    AtomicFileWriter out(weights_path());
    write_safetensors(out, tensors, TensorDtype::kF32, {{"format", "pt"}});
    out.commit();
  }
  // A valid folder: an adapter of r 4 on q_proj and v_proj of a 2-layer Llama (A and B drawn).
  LoraAdapter write_valid_folder(const ModelConfig& c) {
    LoraAdapter adapter(c, LoraOptions{.r = 4, .alpha = 8, .targets = {"q_proj", "v_proj"}}, 5);
    for (size_t i = 0; i < adapter.size(); ++i) adapter.params()[i] = float(i % 7) - 3.25f;
    write_peft_adapter(dir_.string(), c, adapter, {});
    return adapter;
  }
  // The folder's tensors with `drop` left out and `extra` added.
  std::vector<TensorToWrite> tensors_of(const LoraAdapter& a, const std::string& drop) const {
    std::vector<TensorToWrite> out;
    const size_t r = size_t(a.options().r);
    for (size_t i = 0; i < a.modules().size(); ++i) {
      const LoraModule& m = a.modules()[i];
      out.push_back({peft_tensor_name(m, 'A'), {r, m.in}, a.params() + a.a_offset(i)});
      out.push_back({peft_tensor_name(m, 'B'), {m.rows, r}, a.params() + a.b_offset(i)});
    }
    std::erase_if(out, [&](const TensorToWrite& t) { return t.name == drop; });
    return out;
  }
};

// (a) What read_adapter_config refuses: each key set as PEFT would write it for a feature llmcpu
// does not compute; the FileError names adapter_config.json and the key.
TEST_F(PeftFiles, ConfigRefusesWhatLlmcpuDoesNotComputeNamingTheKey) {
  const json base = peft_config({"q_proj", "v_proj"});
  const struct {
    const char* key;
    json value;
    const char* words;
  } cases[] = {
      {"peft_type", "PREFIX_TUNING", "peft_type is \"PREFIX_TUNING\""},
      {"peft_type", "LOHA", "peft_type is \"LOHA\""},
      {"use_dora", true, "use_dora is true"},
      {"rank_pattern", {{"q_proj", 8}}, "rank_pattern is {\"q_proj\":8}"},
      {"alpha_pattern", {{"v_proj", 16}}, "alpha_pattern is {\"v_proj\":16}"},
      {"layers_to_transform", {0}, "layers_to_transform is [0]"},
      {"layers_to_transform", 1, "layers_to_transform is 1"},
      {"modules_to_save", "lm_head", "modules_to_save is \"lm_head\""},
      {"modules_to_save", {1}, "modules_to_save holds 1"},
      {"lora_bias", true, "lora_bias is true"},
      {"bias", "all", "bias is \"all\""},
      {"bias", "lora_only", "bias is \"lora_only\""},
      {"target_modules", ".*\\.(q_proj|v_proj)$", "target_modules is the string"},
      {"target_modules", json::array(), "target_modules is []"},
      {"r", 0, "r is 0"},
      {"r", -4, "r is -4"},
      {"r", 4.5, "r is 4.5"},
      {"lora_alpha", 0, "lora_alpha is 0"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.key) + " = " + c.value.dump());
    json j = base;
    j[c.key] = c.value;
    write_config(j);
    testing::expect_file_error([&] { read_adapter_config(dir_.string()); }, config_path(),
                               {c.key, c.words});
  }
  for (const char* key : {"r", "lora_alpha", "peft_type", "target_modules"}) {
    SCOPED_TRACE(std::string("no ") + key);
    json j = base;
    j.erase(key);
    write_config(j);
    testing::expect_file_error([&] { read_adapter_config(dir_.string()); }, config_path(),
                               {std::string(key) + " is missing"});
  }
  // No file at all: the folder is not an adapter's.
  fs::remove(config_path());
  testing::expect_file_error([&] { read_adapter_config(dir_.string()); }, config_path(),
                             {"no adapter_config.json"});
}

TEST_F(PeftFiles, ConfigAcceptsPeftsFileAndAMinimalOne) {
  // PEFT's own file, with a key a later PEFT adds (0.18's peft_version): ignored.
  json full = peft_config({"v_proj", "q_proj"});
  full["peft_version"] = "0.18.0";
  full["use_rslora"] = true;
  full["lora_alpha"] = 6.5;
  full["lora_dropout"] = 0.05;
  write_config(full);
  const PeftAdapterConfig a = read_adapter_config(dir_.string());
  EXPECT_EQ(a.options.r, 4);
  EXPECT_EQ(a.options.alpha, 6.5);
  EXPECT_TRUE(a.options.rslora);
  EXPECT_EQ(a.options.dropout, 0.05);
  EXPECT_EQ(a.options.targets, (std::vector<std::string>{"v_proj", "q_proj"}));
  EXPECT_EQ(a.base_model_name_or_path, "base");
  EXPECT_FALSE(a.init_lora_weights);
  EXPECT_FLOAT_EQ(a.options.scale(), float(6.5 / 2.0));  // alpha / sqrt(r)

  // Only what has no default: the type, r, lora_alpha and the targets ("all-linear" as a string).
  write_config(
      {{"peft_type", "LORA"}, {"r", 8}, {"lora_alpha", 16}, {"target_modules", "all-linear"}});
  const PeftAdapterConfig m = read_adapter_config(dir_.string());
  EXPECT_EQ(m.options.r, 8);
  EXPECT_EQ(m.options.lora_alpha(), 16.0);
  EXPECT_EQ(m.options.targets, (std::vector<std::string>{"all-linear"}));
  EXPECT_FALSE(m.options.rslora);
  EXPECT_EQ(m.options.dropout, 0.0);
  EXPECT_FLOAT_EQ(m.options.scale(), 2.0f);
  EXPECT_EQ(m.dtype, TensorDtype::kF32);
}

// (b) What read_peft_adapter refuses in adapter_model.safetensors, naming the file and the tensor.
TEST_F(PeftFiles, AdapterRefusesAMissingTensor) {
  const ModelConfig c = testing::lora_llama_config(2);
  const LoraAdapter a = write_valid_folder(c);
  const std::string gone = "base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight";
  write_weights(tensors_of(a, gone));
  testing::expect_file_error([&] { read_peft_adapter(dir_.string(), c); }, weights_path(),
                             {"no tensor " + gone, "model.layers.1.self_attn.v_proj"});
}

TEST_F(PeftFiles, AdapterRefusesAnUnexpectedTensor) {
  const ModelConfig c = testing::lora_llama_config(2);
  const LoraAdapter a = write_valid_folder(c);
  std::vector<TensorToWrite> t = tensors_of(a, "");
  // k_proj is a module of the model, but target_modules does not select it.
  const std::string extra = "base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight";
  t.push_back({extra, {4, 32}, a.params()});
  write_weights(t);
  testing::expect_file_error([&] { read_peft_adapter(dir_.string(), c); }, weights_path(),
                             {"unexpected tensor " + extra});
}

TEST_F(PeftFiles, AdapterRefusesAWronglyShapedA) {
  const ModelConfig c = testing::lora_llama_config(2);
  const LoraAdapter a = write_valid_folder(c);
  // q_proj's A (r, in) = (4, 32) stored transposed, as (in, r).
  const std::string name = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight";
  std::vector<TensorToWrite> t = tensors_of(a, name);
  t.push_back({name, {32, 4}, a.params() + a.a_offset(0)});
  write_weights(t);
  testing::expect_file_error([&] { read_peft_adapter(dir_.string(), c); }, weights_path(),
                             {name + " is (32, 4)", "expected (4, 32)"});
}

TEST_F(PeftFiles, AdapterRefusesAPickleWithoutSafetensors) {
  const ModelConfig c = testing::lora_llama_config(2);
  write_valid_folder(c);
  fs::remove(weights_path());
  testing::write_bytes(path("adapter_model.bin"), {0x80, 0x02, 0x7d, 0x71, 0x00, 0x2e});
  testing::expect_file_error([&] { read_peft_adapter(dir_.string(), c); }, weights_path(),
                             {"adapter_model.bin", "safe_serialization=True"});
}

// (c) target_modules as PEFT saves them: sorted, condensed from 20 modules on.
TEST(PeftTargetModules, TwentyOrMoreAreCondensedToTheShortestSuffixes) {
  // Llama, 3 layers, all-linear: 21 modules; each last name is unique to its kind.
  EXPECT_EQ(saved_target_modules(testing::lora_llama_config(3), {"all-linear"}),
            (std::vector<std::string>{"down_proj", "gate_proj", "k_proj", "o_proj", "q_proj",
                                      "up_proj", "v_proj"}));
  // GPT-2, 24 layers, attn.c_proj named in each: "c_proj" would select mlp.c_proj too.
  const ModelConfig g = testing::lora_gpt2_config(24);
  std::vector<std::string> full;
  for (int l = 0; l < 24; ++l)
    full.push_back("transformer.h." + std::to_string(l) + ".attn.c_proj");
  EXPECT_EQ(saved_target_modules(g, full), (std::vector<std::string>{"attn.c_proj"}));
  // 20 of Llama's 21, without layer 2's down_proj: down_proj of layers 0 and 1 need their layer
  // number ("down_proj" and "mlp.down_proj" also end layer 2's name), the rest their last names
  // (by hand from PEFT's algorithm: items in the order of their suffix lists, shortest suffix that
  // no untargeted module has, unless one taken already covers the item).
  const ModelConfig c = testing::lora_llama_config(3);
  std::vector<std::string> twenty = names(lora_modules(c));
  std::erase(twenty, "model.layers.2.mlp.down_proj");
  ASSERT_EQ(twenty.size(), 20u);
  const std::vector<std::string> saved = saved_target_modules(c, twenty);
  EXPECT_EQ(saved, (std::vector<std::string>{"0.mlp.down_proj", "1.mlp.down_proj", "gate_proj",
                                             "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"}));
  EXPECT_EQ(names(select_lora_modules(c, saved)), names(select_lora_modules(c, twenty)));
}

TEST(PeftTargetModules, FewerAreKeptAsGivenSorted) {
  const ModelConfig c = testing::lora_llama_config(2);
  EXPECT_EQ(saved_target_modules(c, {"v_proj", "q_proj"}),
            (std::vector<std::string>{"q_proj", "v_proj"}));
  // all-linear on 2 layers: 14 modules, their full names.
  const std::vector<std::string> all = saved_target_modules(c, {"all-linear"});
  ASSERT_EQ(all.size(), 14u);
  EXPECT_TRUE(std::is_sorted(all.begin(), all.end()));
  EXPECT_EQ(all.front(), "model.layers.0.mlp.down_proj");
  EXPECT_EQ(all.back(), "model.layers.1.self_attn.v_proj");
  // One suffix on 24 GPT-2 layers is one entry: nothing to condense.
  EXPECT_EQ(saved_target_modules(testing::lora_gpt2_config(24), {"attn.c_proj"}),
            (std::vector<std::string>{"attn.c_proj"}));
}

// (d) write_peft_adapter then read_peft_adapter: the same tensors, bit for bit, and options.
TEST_F(PeftFiles, WriteThenReadRoundTripsTheTensorsExactly) {
  for (const bool gpt2 : {false, true}) {
    SCOPED_TRACE(gpt2 ? "gpt2" : "llama");
    const ModelConfig c = gpt2 ? testing::lora_gpt2_config(2) : testing::lora_llama_config(2);
    const LoraOptions o{.r = 3,
                        .alpha = 6.5,
                        .targets = gpt2 ? std::vector<std::string>{"c_attn", "mlp.c_proj"}
                                        : std::vector<std::string>{"all-linear"},
                        .rslora = true};
    LoraAdapter a(c, o, 7);
    // Every bit pattern kind: a drawn A, B with values of every exponent, -0, subnormals.
    for (size_t i = 0; i < a.modules().size(); ++i) {
      float* B = a.params() + a.b_offset(i);
      for (size_t e = 0; e < a.b_size(i); ++e)
        B[e] = std::ldexp(float(e % 5) - 2.1f, int(e % 60) - 30);
      B[0] = -0.0f;
      B[1] = std::numeric_limits<float>::denorm_min();
    }
    const std::string folder = path(gpt2 ? "gpt2" : "llama");
    PeftAdapterConfig saved;
    saved.base_model_name_or_path = "b";
    saved.init_lora_weights = false;
    write_peft_adapter(folder, c, a, saved);
    PeftAdapterConfig read;
    const LoraAdapter back = read_peft_adapter(folder, c, &read);
    ASSERT_EQ(back.size(), a.size());
    EXPECT_EQ(std::memcmp(back.params(), a.params(), a.size() * sizeof(float)), 0);
    EXPECT_EQ(names(back.modules()), names(a.modules()));
    EXPECT_EQ(read.options.r, 3);
    EXPECT_EQ(read.options.alpha, 6.5);
    EXPECT_TRUE(read.options.rslora);
    EXPECT_EQ(read.base_model_name_or_path, "b");
    EXPECT_FALSE(read.init_lora_weights);
    EXPECT_EQ(read.dtype, TensorDtype::kF32);
    // Written again, the same bytes.
    write_peft_adapter(folder + "_again", c, back, read);
    for (const char* f : {"adapter_config.json", "adapter_model.safetensors"}) {
      EXPECT_EQ(testing::read_bytes(folder + "/" + f), testing::read_bytes(folder + "_again/" + f))
          << f;
    }
  }
}

// A bf16 adapter file: read to fp32 exactly, written back in bf16 to the same bytes.
TEST_F(PeftFiles, Bf16AdapterRoundTripsThroughFp32) {
  const ModelConfig c = testing::lora_llama_config(2);
  LoraAdapter a(c, LoraOptions{.r = 2, .alpha = 4, .targets = {"o_proj"}}, 3);
  for (size_t i = 0; i < a.size(); ++i) a.params()[i] = bf16_to_float(float_to_bf16(a.params()[i]));
  PeftAdapterConfig saved;
  saved.dtype = TensorDtype::kBf16;
  write_peft_adapter(path("a"), c, a, saved);
  PeftAdapterConfig read;
  const LoraAdapter back = read_peft_adapter(path("a"), c, &read);
  EXPECT_EQ(read.dtype, TensorDtype::kBf16);
  EXPECT_EQ(std::memcmp(back.params(), a.params(), a.size() * sizeof(float)), 0);
  write_peft_adapter(path("b"), c, back, read);
  EXPECT_EQ(testing::read_bytes(path("a/adapter_model.safetensors")),
            testing::read_bytes(path("b/adapter_model.safetensors")));
}

}  // namespace
}  // namespace llmcpu
