// The config.json of a Hugging Face model of a family other than GPT-2 (model_type "llama",
// "qwen2", "mistral" or "phi3", as transformers' LlamaConfig, Qwen2Config, MistralConfig and
// Phi3Config write it) read into the architecture description (core/model/config.h), with
// transformers' defaults for the keys a file leaves out. What llmcpu does not run is refused by
// name: another hidden_act, a rope_scaling type other than "linear" and "llama3" (Phi-3's
// "longrope" too), Qwen2's use_sliding_window, a partial_rotary_factor below 1. Presets
// (conf/models/*.toml with a model_type) use the same keys. Writing config.json is core/io's.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/model/config.h"

namespace llmcpu {

// The model_type config.json names ("" when it names none).
std::string config_model_type(const nlohmann::json& cfg);

// The architecture of a Llama-family config.json; FileError naming `path` and the key otherwise.
ModelConfig read_llama_config(const nlohmann::json& cfg, const std::string& path);

}  // namespace llmcpu
