#include "core/model/llama_config.h"

#include <cmath>

#include "simd/error.h"

namespace llmcpu {

using nlohmann::json;

namespace {

// A present, non-null key of `cfg`.
const json* find(const json& cfg, const char* key) {
  auto it = cfg.find(key);
  return it == cfg.end() || it->is_null() ? nullptr : &*it;
}

int get_int(const json& cfg, const std::string& path, const char* key, int fallback, int max) {
  const json* v = find(cfg, key);
  if (!v) {
    if (fallback > 0) return fallback;
    throw FileError(path, std::string("has no ") + key + " (a Llama-family config.json's)");
  }
  if (!v->is_number_integer() || v->get<long long>() <= 0 || v->get<long long>() > max) {
    throw FileError(path, std::string(key) + " is " + v->dump() + ", expected an integer in 1.." +
                              std::to_string(max));
  }
  return v->get<int>();
}

// `name` is the key as messages show it (default: `key`).
double get_number(const json& cfg, const std::string& path, const std::string& name,
                  double fallback, const char* key = nullptr) {
  const json* v = find(cfg, key ? key : name.c_str());
  if (!v) return fallback;
  if (!v->is_number() || !std::isfinite(v->get<double>())) {
    throw FileError(path, name + " is " + v->dump() + ", expected a number");
  }
  return v->get<double>();
}

bool get_bool(const json& cfg, const std::string& path, const char* key, bool fallback) {
  const json* v = find(cfg, key);
  if (!v) return fallback;
  if (!v->is_boolean())
    throw FileError(path, std::string(key) + " is " + v->dump() + ", expected true or false");
  return v->get<bool>();
}

// rope_scaling: null, or {"rope_type" (or the older "type"): "default" | "linear" | "llama3", ...}.
void read_rope_scaling(const json& cfg, const std::string& path, RopeConfig& rope) {
  const json* s = find(cfg, "rope_scaling");
  if (!s) return;
  if (!s->is_object())
    throw FileError(path, "rope_scaling is " + s->dump() + ", expected an object or null");
  const json* type = find(*s, "rope_type");
  if (!type) type = find(*s, "type");
  if (!type || !type->is_string()) {
    throw FileError(path, "rope_scaling has no rope_type (expected \"linear\" or \"llama3\")");
  }
  const std::string name = type->get<std::string>();
  if (name == "default") return;
  if (name != "linear" && name != "llama3") {
    throw FileError(path, "rope_scaling.rope_type \"" + name +
                              "\" is not supported (llmcpu runs \"default\", \"linear\" and "
                              "\"llama3\")");
  }
  rope.type = name == "linear" ? RopeType::kLinear : RopeType::kLlama3;
  const auto number = [&](const char* key) {
    if (!find(*s, key)) throw FileError(path, "rope_scaling (" + name + ") has no " + key);
    return get_number(*s, path, std::string("rope_scaling.") + key, 0, key);
  };
  rope.factor = number("factor");
  if (rope.type != RopeType::kLlama3) return;
  rope.low_freq_factor = number("low_freq_factor");
  rope.high_freq_factor = number("high_freq_factor");
  rope.original_max_position_embeddings =
      get_int(*s, path, "original_max_position_embeddings", 0, 1 << 30);
}

// What the family's description says config.json adds: biases, the sliding window; and the keys
// of what llmcpu does not run, refused by name.
void read_family(const json& cfg, const std::string& path, ModelConfig& c) {
  const Family& f = c.family();
  const bool keys = f.biases == Biases::kConfigKeys;
  const bool attention_bias = keys && get_bool(cfg, path, "attention_bias", false);
  c.qkv_bias = f.biases == Biases::kQkv || attention_bias;
  c.attn_proj_bias = attention_bias;
  c.mlp_bias = keys && get_bool(cfg, path, "mlp_bias", false);
  if (f.window_every_layer && find(cfg, "sliding_window")) {
    c.sliding_window = get_int(cfg, path, "sliding_window", 0, kMaxSeqLen);
    c.sliding_layers.assign(size_t(c.num_layers), true);
  }
  if (find(cfg, "use_sliding_window") && get_bool(cfg, path, "use_sliding_window", false)) {
    throw FileError(path,
                    "use_sliding_window is true: Qwen2's windows on the layers past "
                    "max_window_layers are not supported");
  }
  if (const double partial = get_number(cfg, path, "partial_rotary_factor", 1); partial != 1) {
    throw FileError(path, "partial_rotary_factor is " + json(partial).dump() +
                              ": only a rotation of every dimension (1.0) is supported");
  }
}

// A soft-cap key: absent, the class default; null, none (0).
double get_softcap(const json& cfg, const std::string& path, const char* key, double fallback) {
  if (!cfg.contains(key)) return fallback;
  return get_number(cfg, path, key, 0);
}

// Gemma 2 and 3: which layers slide (layer_types, or the family's rule), the window, the scale of
// the scores, the soft-caps, the sliding layers' rotation.
void read_gemma_attention(const json& cfg, const std::string& path, ModelConfig& c) {
  const Family& f = c.family();
  c.sliding_window = get_int(cfg, path, "sliding_window", 4096, kMaxSeqLen);
  c.sliding_layers.assign(size_t(c.num_layers), false);
  if (const json* types = find(cfg, "layer_types")) {
    if (!types->is_array() || types->size() != size_t(c.num_layers)) {
      throw FileError(path, "layer_types is " + types->dump() + ", expected one entry per layer (" +
                                std::to_string(c.num_layers) + ")");
    }
    for (size_t l = 0; l < types->size(); ++l) {
      const json& t = (*types)[l];
      if (t != "sliding_attention" && t != "full_attention") {
        throw FileError(path, "layer_types[" + std::to_string(l) + "] is " + t.dump() +
                                  ", expected \"sliding_attention\" or \"full_attention\"");
      }
      c.sliding_layers[l] = t == "sliding_attention";
    }
  } else {
    const char* key =
        find(cfg, "sliding_window_pattern") ? "sliding_window_pattern" : "_sliding_window_pattern";
    const int pattern = get_int(cfg, path, key, f.default_sliding_pattern, 1 << 20);
    for (int l = 0; l < c.num_layers; ++l) c.sliding_layers[size_t(l)] = (l + 1) % pattern != 0;
  }
  c.query_pre_attn_scalar = get_number(cfg, path, "query_pre_attn_scalar", 256);
  if (c.query_pre_attn_scalar <= 0) throw FileError(path, "query_pre_attn_scalar must be positive");
  // The class defaults: Gemma 2 caps (50 and 30), Gemma 3 does not (and ignores the attention's).
  c.final_softcap = get_softcap(cfg, path, "final_logit_softcapping", f.attn_softcap ? 30 : 0);
  if (f.attn_softcap) c.attn_softcap = get_softcap(cfg, path, "attn_logit_softcapping", 50);
  if (c.attn_softcap < 0 || c.final_softcap < 0) {
    throw FileError(path, "the soft-caps must be positive or null");
  }
  if (f.local_rope) {
    c.rope_local.head_dim = c.head_dim;
    c.rope_local.theta = get_number(cfg, path, "rope_local_base_freq", 10000);
  }
  if (get_bool(cfg, path, "use_bidirectional_attention", false)) {
    throw FileError(path,
                    "use_bidirectional_attention is true: only causal attention is supported");
  }
}

}  // namespace

std::string config_model_type(const json& cfg) {
  const json* v = cfg.is_object() ? find(cfg, "model_type") : nullptr;
  return v && v->is_string() ? v->get<std::string>() : "";
}

ModelConfig read_llama_config(const json& cfg, const std::string& path) {
  if (!cfg.is_object()) throw FileError(path, "is not a JSON object");
  const std::string type = config_model_type(cfg);
  ModelConfig c;
  const Family* family = find_family(type.c_str());
  if (!family || family->llmc_files) {
    throw FileError(path, "model_type is \"" + type + "\", expected " + known_model_types(false));
  }
  c.architecture = family->architecture;
  // The MLP's activation: newer Gemma files name it hidden_activation, the others hidden_act.
  const char* act_key = find(cfg, "hidden_activation") ? "hidden_activation" : "hidden_act";
  const bool geglu = family->mlp == MlpKind::kGeGlu;
  const char* act_name = geglu ? "gelu_pytorch_tanh" : "silu";
  if (const json* act = find(cfg, act_key); act && *act != act_name) {
    throw FileError(path, std::string(act_key) + " is " + act->dump() + ", expected \"" + act_name +
                              "\" (" + (geglu ? "GeGLU" : "SwiGLU") + ")");
  }
  c.channels = get_int(cfg, path, "hidden_size", 0, 65536);
  c.hidden = get_int(cfg, path, "intermediate_size", 0, 1 << 20);
  c.num_layers = get_int(cfg, path, "num_hidden_layers", 0, 4096);
  c.num_heads = get_int(cfg, path, "num_attention_heads", 0, 4096);
  c.num_kv_heads = get_int(cfg, path, "num_key_value_heads", c.num_heads, 4096);
  const int default_head_dim =
      family->default_head_dim > 0 ? family->default_head_dim : c.channels / c.num_heads;
  if (default_head_dim == 0 ||
      (family->default_head_dim == 0 && c.channels % c.num_heads != 0 && !find(cfg, "head_dim"))) {
    throw FileError(
        path, "hidden_size is not a multiple of num_attention_heads and there is no head_dim");
  }
  c.head_dim = get_int(cfg, path, "head_dim", default_head_dim, 4096);
  c.vocab_size = get_int(cfg, path, "vocab_size", 0, kMaxVocabSize);
  c.padded_vocab_size = padded_vocab(c.vocab_size);
  c.max_seq_len = get_int(cfg, path, "max_position_embeddings", 0, kMaxSeqLen);
  c.norm_eps = get_number(cfg, path, "rms_norm_eps", 1e-6);
  c.tied_head = get_bool(cfg, path, "tie_word_embeddings", family->default_tied);
  if (const json* pad = find(cfg, "pad_token_id")) {
    if (!pad->is_number_integer() || pad->get<long long>() < 0 ||
        pad->get<long long>() >= c.vocab_size) {
      throw FileError(path, "pad_token_id is " + pad->dump() + ", expected a token in 0.." +
                                std::to_string(c.vocab_size - 1) + " or null");
    }
    c.pad_token_id = pad->get<int>();
  } else if (!cfg.contains("pad_token_id")) {
    c.pad_token_id = family->default_pad_token_id;
  }
  c.rope.head_dim = c.head_dim;
  c.rope.theta = get_number(cfg, path, "rope_theta", 10000);
  read_rope_scaling(cfg, path, c.rope);
  read_family(cfg, path, c);
  if (family->default_sliding_pattern > 0) read_gemma_attention(cfg, path, c);
  try {
    validate(c, path);
  } catch (const ShapeError& e) {
    throw FileError(path, e.what());
  }
  return c;
}

}  // namespace llmcpu
