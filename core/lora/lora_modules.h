// The linear maps of a model that LoRA adapters attach to, named as PEFT names them (the module
// paths of the Hugging Face model; PEFT 0.17's semantics, tests/fixtures/lora_reference.py):
//   Llama family  model.layers.N.self_attn.{q,k,v,o}_proj, model.layers.N.mlp.{gate,up,down}_proj
//   Phi-3         model.layers.N.self_attn.{qkv,o}_proj, model.layers.N.mlp.{gate_up,down}_proj
//   GPT-2         transformer.h.N.attn.c_attn, .attn.c_proj, .mlp.c_fc, .mlp.c_proj
// Each is a block of rows of one of llmcpu's matmul weights (q, k and v are row blocks of qkvw,
// gate and up of fcw): an adapter on it adds scaling B (A x) to those rows of the output, with A
// (r, in) and B (rows, r). The lm_head and the embedding are never targets here.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/model/config.h"

namespace llmcpu {

struct LoraModule {
  std::string name;  // "model.layers.3.self_attn.q_proj", "transformer.h.0.attn.c_attn"
  int layer;
  int role;          // the TensorRole of the weight: kQkvw, kAttprojw, kFcw or kFcprojw
  size_t row0, rows;  // the rows of that weight the module's output is (PEFT's out_features)
  size_t in;          // PEFT's in_features
};

// Every module an adapter may target, layer by layer in the model's order.
std::vector<LoraModule> lora_modules(const ModelConfig& c);

// PEFT's target_modules: "all-linear" (every module above), or names each of which selects the
// modules whose name equals it or ends in "." + it ("q_proj", "mlp.c_proj",
// "model.layers.0.self_attn.v_proj"). Throws UsageError naming a target that selects nothing and
// listing the module names this model has.
std::vector<LoraModule> select_lora_modules(const ModelConfig& c,
                                            const std::vector<std::string>& targets);

// The name PEFT gives an adapter tensor in adapter_model.safetensors: which is 'A' or 'B'
// ("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight").
std::string peft_tensor_name(const LoraModule& m, char which);

}  // namespace llmcpu
