// The base modules a LoRA run trains in full (--lora-train; PEFT's modules_to_save, as PEFT 0.17.1
// matches them: a module is wrapped when its full name ends with an entry, a plain suffix) and
// their copies (core/lora/trained_copies.h, core/model/lora_views.h):
// - which modules an entry selects, worked out by hand from the module names transformers gives
//   the models, and what is refused (a linear layer, a container, some layers only, nothing);
// - the adapter folder holds each selected module's tensors under PEFT's name, and reads back;
// - a model with a tied head that trains a copy of its embedding computes as the untied model
//   whose embedding is the copy and whose head is the base's tensor (PEFT's copy feeds the input
//   alone), and the copy's gradient is that model's embedding gradient; a copy of the head alone
//   is that model with the roles swapped; the norms' copies get the full model's norm gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/io/json_file.h"
#include "core/io/safetensors.h"
#include "core/lora/merge.h"
#include "core/lora/peft_files.h"
#include "core/model/llama_config.h"
#include "core/model/model.h"
#include "simd/error.h"
#include "tests/common/temp_files.h"
#include "tests/unit/lora_configs.h"

namespace llmcpu {
namespace {

ModelConfig llama(bool tied, const char* type = "llama") {
  nlohmann::json cfg = {{"model_type", type},
                        {"hidden_size", 32},
                        {"intermediate_size", 48},
                        {"num_hidden_layers", 2},
                        {"num_attention_heads", 4},
                        {"num_key_value_heads", 2},
                        {"head_dim", 8},
                        {"max_position_embeddings", 16},
                        {"vocab_size", 40},
                        {"rms_norm_eps", 1e-6},
                        {"tie_word_embeddings", tied}};
  return read_llama_config(cfg, "config.json");
}

std::vector<std::string> names(const std::vector<TrainedPiece>& pieces) {
  std::vector<std::string> out;
  for (const TrainedPiece& p : pieces) out.push_back(p.name);
  return out;
}

using Names = std::vector<std::string>;

TEST(TrainedCopies, EntriesSelectTheModulesWhoseNamesEndWithThem) {
  const ModelConfig c = llama(false);
  // "norm" ends model.norm and every input_layernorm and post_attention_layernorm.
  EXPECT_EQ(names(select_trained_pieces(c, {"norm"})),
            (Names{"model.layers.0.input_layernorm.weight",
                   "model.layers.0.post_attention_layernorm.weight",
                   "model.layers.1.input_layernorm.weight",
                   "model.layers.1.post_attention_layernorm.weight", "model.norm.weight"}));
  EXPECT_EQ(names(select_trained_pieces(c, {"layernorm"})),
            (Names{"model.layers.0.input_layernorm.weight",
                   "model.layers.0.post_attention_layernorm.weight",
                   "model.layers.1.input_layernorm.weight",
                   "model.layers.1.post_attention_layernorm.weight"}));
  EXPECT_EQ(names(select_trained_pieces(c, {"model.norm"})), (Names{"model.norm.weight"}));
  const std::vector<TrainedPiece> ends = select_trained_pieces(c, {"lm_head", "embed_tokens"});
  EXPECT_EQ(names(ends), (Names{"model.embed_tokens.weight", "lm_head.weight"}));
  for (const TrainedPiece& p : ends) EXPECT_EQ(p.shape, (std::vector<size_t>{40, 32}));  // V rows
  EXPECT_EQ(trained_roles(ends), (std::vector<int>{kWte, kLmHead}));
  // A tied head is a module too (lm_head's copy of the tied tensor).
  EXPECT_EQ(names(select_trained_pieces(llama(true), {"lm_head"})), (Names{"lm_head.weight"}));
  // Qwen3's q_norm and k_norm end with "norm" as well.
  const Names qwen3 = names(select_trained_pieces(llama(false, "qwen3"), {"norm"}));
  EXPECT_EQ(qwen3.size(), 9u);
  EXPECT_EQ(qwen3[0], "model.layers.0.self_attn.q_norm.weight");
  EXPECT_EQ(qwen3[1], "model.layers.0.self_attn.k_norm.weight");
}

TEST(TrainedCopies, Gpt2ModulesTakeTheirWeightsAndBiases) {
  const ModelConfig c = testing::lora_gpt2_config(2);
  EXPECT_EQ(names(select_trained_pieces(c, {"ln_1", "wte"})),
            (Names{"transformer.wte.weight", "transformer.h.0.ln_1.weight",
                   "transformer.h.0.ln_1.bias", "transformer.h.1.ln_1.weight",
                   "transformer.h.1.ln_1.bias"}));
  const std::vector<TrainedPiece> wpe = select_trained_pieces(c, {"wpe", "ln_f"});
  EXPECT_EQ(names(wpe), (Names{"transformer.wpe.weight", "transformer.ln_f.weight",
                               "transformer.ln_f.bias"}));
  EXPECT_EQ(wpe[0].shape, (std::vector<size_t>{16, 16}));
}

TEST(TrainedCopies, RefusesLinearLayersContainersSomeLayersAndNothing) {
  const ModelConfig c = llama(false);
  const struct {
    const char* entry;
    const char* words;
  } cases[] = {
      {"q_proj", "model.layers.0.self_attn.q_proj"},  // --lora-targets adapts it
      {"mlp", "model.layers.0.mlp"},                  // holds the MLP's layers
      {"layers", "model.layers"},
      {"layers.1.input_layernorm", "every layer"},    // one layer's norm only
      {"norms", "selects no module"},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.entry);
    try {
      select_trained_pieces(c, {k.entry});
      ADD_FAILURE() << "not refused";
    } catch (const UsageError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(k.entry), std::string::npos) << what;
      EXPECT_NE(what.find(k.words), std::string::npos) << what;
      EXPECT_NE(what.find("embed_tokens, input_layernorm, post_attention_layernorm, norm, lm_head"),
                std::string::npos)
          << what;  // what may be named
    }
  }
  // Merging a tied model's embedding or head copy would need an untied head.
  EXPECT_THROW(check_mergeable(llama(true), select_trained_pieces(llama(true), {"embed_tokens"})),
               UsageError);
  EXPECT_NO_THROW(check_mergeable(llama(false), select_trained_pieces(llama(false), {"lm_head"})));
}

class TrainedCopiesFolder : public testing::TempDirTest {};

TEST_F(TrainedCopiesFolder, AdapterFolderHoldsEachModuleUnderPeftsName) {
  const ModelConfig c = llama(true);
  LoraOptions o{.r = 2, .alpha = 4, .targets = {"v_proj"}};
  o.train = {"embed_tokens", "input_layernorm"};
  LoraAdapter a(c, o, 3);
  ASSERT_EQ(a.copies().size(), 2u);
  for (size_t i = 0; i < a.size(); ++i) a.params()[i] = float(i % 11) * 0.125f - 0.5f;
  const size_t pad = a.copy_offset(kWte) + size_t(c.vocab_size) * c.channels;  // padding rows
  for (size_t i = pad; i < a.copy_offset(kWte) + a.copies()[0].count; ++i) a.params()[i] = 0;
  write_peft_adapter(dir_.string(), c, a, {});
  const SafetensorsFile f(path("adapter_model.safetensors"));
  const SafeTensor* e = f.find("base_model.model.model.embed_tokens.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->shape, (std::vector<size_t>{40, 32}));
  ASSERT_NE(f.find("base_model.model.model.layers.1.input_layernorm.weight"), nullptr);
  EXPECT_EQ(f.tensors().size(), 2u * 2 + 1 + 2);  // lora_A and lora_B of 2 modules, 3 copies
  const nlohmann::json j = read_json_file(path("adapter_config.json"));
  EXPECT_EQ(j["modules_to_save"], nlohmann::json({"embed_tokens", "input_layernorm"}));
  const LoraAdapter back = read_peft_adapter(dir_.string(), c);
  ASSERT_EQ(back.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(back.params()[i], a.params()[i]) << i;
  EXPECT_EQ(a.name_of(a.copy_offset(kLn1w) + 40), "model.layers.1.input_layernorm");
}

// Logits and the gradients of the copies: a frozen tied model with copies of its embedding (or
// head) and norms, against the untied model that has them as its own tensors.
struct PassResult {
  std::vector<float> logits, grads;
};
constexpr int kB = 2, kT = 6;

TEST(TrainedCopies, ATiedModelsEmbeddingCopyIsAnUntiedModelsEmbedding) {
  for (const int copied : {int(kWte), int(kLmHead)}) {
    SCOPED_TRACE(copied == kWte ? "embed_tokens" : "lm_head");
    const ModelConfig tied = llama(true), untied = llama(false);
    Model base(tied, active_kernels(), Precision::kFp32, nullptr, /*base_gradients=*/false);
    init_model(base, 9);
    base.freeze_base(QuantFormat::kNone);
    LoraOptions o{.r = 2, .alpha = 2, .targets = {"q_proj"}};
    o.train = {copied == kWte ? "embed_tokens" : "lm_head", "norm"};
    LoraAdapter a(tied, o, 4);  // B = 0: the adapters add nothing
    a.copy_base(std::as_const(base).params_flat(), tied);
    float* copy = a.params() + a.copy_offset(copied);
    for (size_t i = 0; i < size_t(tied.vocab_size) * tied.channels; ++i)
      copy[i] += 0.01f * float(int(i % 13) - 6);  // the copy moved away from the base
    base.attach_lora(a.params_for_model(true));

    // The untied model: the copy as the copied role, the base's tied tensor as the other.
    Model full(untied, active_kernels(), Precision::kFp32);
    const ParameterLayout& L = full.layout();
    float* w = full.params_flat();
    for (int role = 0; role < kNumTensorRoles; ++role) {
      if (role == kLmHead || L.size(role) == 0) continue;
      std::copy_n(std::as_const(base).params_flat() + base.layout().offset(role), L.size(role),
                  w + L.offset(role));
    }
    std::copy_n(w + L.offset(kWte), L.size(kWte), w + L.offset(kLmHead));
    std::copy_n(copy, L.size(kWte), w + L.offset(copied));
    for (int role : {kLn1w, kLn2w, kLnfw})
      std::copy_n(a.params() + a.copy_offset(role), L.size(role), w + L.offset(role));

    std::vector<int> x(kB * kT), y(kB * kT);
    for (int i = 0; i < kB * kT; ++i) x[i] = (i * 7 + 3) % 40, y[i] = (i * 5 + 1) % 40;
    for (Model* m : {&base, &full}) m->plan_batch(kB, kT, {.keep_logits = true});
    base.zero_grad();
    full.zero_grad();
    const float lb = base.forward_backward(x.data(), y.data(), kB, kT);
    const float lf = full.forward_backward(x.data(), y.data(), kB, kT);
    EXPECT_NEAR(lb, lf, 1e-5 * std::fabs(lf));
    const size_t Vp = size_t(tied.padded_vocab_size);
    for (size_t i = 0; i < kB * kT * Vp; ++i)
      ASSERT_NEAR(base.logits()[i], full.logits()[i], 1e-5) << i;
    // The copies' gradients are the untied model's for those tensors.
    const auto expect_grads = [&](int role, const float* g) {
      const float* ref = full.grads_flat() + L.offset(role);
      double err = 0, norm = 0;
      for (size_t i = 0; i < L.size(role); ++i) {
        err = std::max(err, double(std::fabs(g[i] - ref[i])));
        norm = std::max(norm, double(std::fabs(ref[i])));
      }
      EXPECT_GT(norm, 0) << ParameterLayout::name(role);
      EXPECT_LE(err, 1e-5 * norm) << ParameterLayout::name(role);
    };
    expect_grads(copied, a.grads() + a.copy_offset(copied));
    for (int role : {kLn1w, kLn2w, kLnfw}) expect_grads(role, a.grads() + a.copy_offset(role));
  }
}

}  // namespace
}  // namespace llmcpu
