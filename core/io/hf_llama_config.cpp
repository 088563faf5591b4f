#include "core/io/hf_llama_config.h"

#include <cmath>

namespace llmcpu {

using nlohmann::json;

namespace {

// An integral value as a JSON integer (as config.json files hold query_pre_attn_scalar: 256), any
// other as a double.
json number(double v) {
  return v == std::floor(v) && std::fabs(v) < 1e15 ? json(static_cast<int64_t>(v)) : json(v);
}

}  // namespace

json llama_config_json(const ModelConfig& c, TensorDtype dtype, const json& base) {
  json j = base.is_object() ? base : json::object();
  const Family& f = c.family();
  j["architectures"] = {f.hf_class};
  j["model_type"] = f.model_type;
  // The activation under the family's key (or keys), and under any key the base had.
  const char* act = f.mlp == MlpKind::kGeGlu ? "gelu_pytorch_tanh" : "silu";
  if (f.activation_keys != ActivationKeys::kHiddenActivation || j.contains("hidden_act"))
    j["hidden_act"] = act;
  if (f.activation_keys != ActivationKeys::kHiddenAct || j.contains("hidden_activation"))
    j["hidden_activation"] = act;
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
  optional("head_dim", f.default_head_dim > 0 || c.head_dim * c.num_heads != c.channels,
           c.head_dim);
  j["vocab_size"] = c.vocab_size;
  j["max_position_embeddings"] = c.max_seq_len;
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
  // save_pretrained leaves out a value equal both to PretrainedConfig's default (true) and to the
  // config class's (the family's default_tied).
  optional("tie_word_embeddings", !(c.tied_head && f.default_tied), c.tied_head);
  optional("pad_token_id", c.pad_token_id != f.default_pad_token_id,
           c.pad_token_id >= 0 ? json(c.pad_token_id) : json(nullptr));
  if (f.biases == Biases::kConfigKeys) {
    optional("attention_bias", c.qkv_bias, c.qkv_bias);
    optional("mlp_bias", c.mlp_bias, c.mlp_bias);
  }
  if (f.default_sliding_pattern > 0) {  // Gemma 2 and 3
    json types = json::array();
    for (bool s : c.sliding_layers) types.push_back(s ? "sliding_attention" : "full_attention");
    j["layer_types"] = types;
    j["sliding_window"] = c.sliding_window;
    j["query_pre_attn_scalar"] = number(c.query_pre_attn_scalar);
    const auto cap = [](double v) { return v > 0 ? json(v) : json(nullptr); };
    j["final_logit_softcapping"] = cap(c.final_softcap);
    if (f.attn_softcap) j["attn_logit_softcapping"] = cap(c.attn_softcap);
    if (f.local_rope) j["rope_local_base_freq"] = c.rope_local.theta;
  }
  if (f.window_every_layer) {
    optional("sliding_window", c.sliding_window > 0,
             c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr));
  }
  j["torch_dtype"] = torch_dtype_name(dtype);
  return j;
}

}  // namespace llmcpu
