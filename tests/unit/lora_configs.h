// Small models for the LoRA unit tests (tests/unit/test_peft_files.cpp, test_lora_merge.cpp):
// a Llama of C 32 (4 query heads over 2 key/value heads of 8, an MLP of 48) and a GPT-2 of C 16,
// with `layers` layers each.
#pragma once

#include <nlohmann/json.hpp>

#include "core/model/config.h"
#include "core/model/llama_config.h"

namespace llmcpu::testing {

inline ModelConfig lora_llama_config(int layers) {
  const nlohmann::json cfg = {{"model_type", "llama"},
                              {"hidden_size", 32},
                              {"intermediate_size", 48},
                              {"num_hidden_layers", layers},
                              {"num_attention_heads", 4},
                              {"num_key_value_heads", 2},
                              {"head_dim", 8},
                              {"max_position_embeddings", 16},
                              {"vocab_size", 40},
                              {"rms_norm_eps", 1e-6}};
  return read_llama_config(cfg, "config.json");
}

inline ModelConfig lora_gpt2_config(int layers) {
  return {.max_seq_len = 16,
          .vocab_size = 40,
          .padded_vocab_size = 64,
          .num_layers = layers,
          .num_heads = 2,
          .channels = 16};
}

}  // namespace llmcpu::testing
