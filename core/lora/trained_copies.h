// The base tensors a LoRA run trains in full beside its adapters (--lora-train; PEFT's
// modules_to_save, 0.17's semantics, tests/fixtures/lora_reference.py): PEFT wraps every module
// whose full name ends with an entry (a plain suffix: "norm" is model.norm and every layer's
// input_layernorm and post_attention_layernorm) and trains a copy of it, the original frozen.
// llmcpu trains copies of these modules:
//   Llama family  model.embed_tokens, lm_head, model.norm, model.layers.N.input_layernorm,
//                 .post_attention_layernorm (Gemma 2, 3: also .pre_feedforward_layernorm,
//                 .post_feedforward_layernorm), .self_attn.q_norm, .self_attn.k_norm (Qwen3)
//   GPT-2         transformer.wte, transformer.wpe, transformer.h.N.ln_1, .ln_2, transformer.ln_f
//                 (weight and bias), lm_head
// A tied head stays tied to nothing: the embedding's copy feeds the input alone and the head
// keeps the base's tensor; lm_head's copy is the head's alone (core/model/lora_views.h).
// Each llmcpu tensor is trained in every layer or in none: an entry that selects a norm in some
// layers only is refused, as is one that selects a linear layer (--lora-targets adapts those) or
// a module holding others.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/model/config.h"

namespace llmcpu {

// One tensor of a trained module, as PEFT saves it.
struct TrainedPiece {
  std::string name;           // "model.layers.3.input_layernorm.weight" (the module's, ".weight")
  int role;                   // the llmcpu tensor it is a part of (kLmHead: a tied head's copy too)
  size_t offset;              // elements into that tensor (a layer's slice: layer x its size)
  std::vector<size_t> shape;  // in the file: (V, C) for an embedding or the head, (C) for a norm
  size_t count() const;
};

// The pieces of the modules `entries` select on this model, in the model's order. UsageError
// (for the caller to prefix with its flag or file) naming the entry for one that selects nothing
// llmcpu trains, a linear layer or a container, or a tensor in some layers only, listing the
// modules that may be named.
std::vector<TrainedPiece> select_trained_pieces(const ModelConfig& config,
                                                const std::vector<std::string>& entries);

// The llmcpu tensors the pieces are parts of, sorted (kWte before kLmHead), each once.
std::vector<int> trained_roles(const std::vector<TrainedPiece>& pieces);

// The elements of the copy of role `role` (a tied head's copy: wte's).
size_t trained_copy_size(const ModelConfig& config, int role);

// --lora-train's comma list as entries (empty items dropped).
std::vector<std::string> parse_trained_modules(const std::string& list);

}  // namespace llmcpu
