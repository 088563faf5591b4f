#include "core/io/hf_llama_config.h"

namespace llmcpu {

using nlohmann::json;

json llama_config_json(const ModelConfig& c, TensorDtype dtype, const json& base) {
  json j = base.is_object() ? base : json::object();
  const std::string type = architecture_name(c.architecture);
  const char* arch = c.architecture == Architecture::kQwen2     ? "Qwen2ForCausalLM"
                     : c.architecture == Architecture::kMistral ? "MistralForCausalLM"
                                                                : "LlamaForCausalLM";
  j["architectures"] = {arch};
  j["model_type"] = type;
  j["hidden_act"] = "silu";
  j["hidden_size"] = c.channels;
  j["intermediate_size"] = c.hidden;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  // The keys a model type may leave out: written where they say something, or where `base` had
  // them already.
  const auto optional = [&](const char* key, bool needed, const json& value) {
    if (needed || j.contains(key)) j[key] = value;
  };
  optional("head_dim", c.head_dim * c.num_heads != c.channels, c.head_dim);
  j["vocab_size"] = c.vocab_size;
  if (!j.contains("max_position_embeddings") || c.architecture != Architecture::kMistral) {
    j["max_position_embeddings"] = c.max_seq_len;
  }
  j["rms_norm_eps"] = c.norm_eps;
  j["rope_theta"] = c.rope.theta;
  json scaling = nullptr;
  if (c.rope.type == RopeType::kLinear) {
    // The key the base used for the type ("type" in older files).
    const bool old = j.contains("rope_scaling") && j["rope_scaling"].is_object() &&
                     j["rope_scaling"].contains("type");
    scaling = {{old ? "type" : "rope_type", "linear"}, {"factor", c.rope.factor}};
  } else if (c.rope.type == RopeType::kLlama3) {
    scaling = {{"rope_type", "llama3"},
               {"factor", c.rope.factor},
               {"low_freq_factor", c.rope.low_freq_factor},
               {"high_freq_factor", c.rope.high_freq_factor},
               {"original_max_position_embeddings", c.rope.original_max_position_embeddings}};
  }
  optional("rope_scaling", c.rope.type != RopeType::kDefault, scaling);
  j["tie_word_embeddings"] = c.tied_head;
  if (c.architecture == Architecture::kLlama) {
    optional("attention_bias", c.qkv_bias, c.qkv_bias);
    optional("mlp_bias", c.mlp_bias, c.mlp_bias);
  }
  j["torch_dtype"] = torch_dtype_name(dtype);
  return j;
}

}  // namespace llmcpu
