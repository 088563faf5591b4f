// The config.json of a Hugging Face model of a family other than GPT-2 written from the
// architecture description (core/model/config.h), as transformers' LlamaConfig, Qwen2Config,
// MistralConfig and Phi3Config write it.
// Reading it is core/model/llama_config.h's.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/io/safetensors.h"
#include "core/model/config.h"
#include "core/model/llama_config.h"

namespace llmcpu {

// The config.json of `c` with weights stored as `dtype`: `base` (the config the model was read
// from, so that token ids and other keys carry over; an empty object for a new model) with every
// key of the architecture set from `c`, and what llmcpu knows nothing of left as it was.
nlohmann::json llama_config_json(const ModelConfig& c, TensorDtype dtype,
                                 const nlohmann::json& base);

}  // namespace llmcpu
