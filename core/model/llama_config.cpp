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
  if (!v->is_boolean()) throw FileError(path, std::string(key) + " is " + v->dump() + ", expected true or false");
  return v->get<bool>();
}

// rope_scaling: null, or {"rope_type" (or the older "type"): "default" | "linear" | "llama3", ...}.
void read_rope_scaling(const json& cfg, const std::string& path, RopeConfig& rope) {
  const json* s = find(cfg, "rope_scaling");
  if (!s) return;
  if (!s->is_object()) throw FileError(path, "rope_scaling is " + s->dump() + ", expected an object or null");
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

// What a model type adds: biases, the sliding window.
void read_family(const json& cfg, const std::string& path, ModelConfig& c) {
  if (c.architecture == Architecture::kQwen2) {
    c.qkv_bias = true, c.attn_proj_bias = false, c.mlp_bias = false;  // Qwen2Attention's
    if (get_bool(cfg, path, "use_sliding_window", false)) {
      throw FileError(path, "use_sliding_window is true: sliding-window attention is not supported");
    }
    return;
  }
  const bool attention_bias = c.architecture == Architecture::kLlama &&
                              get_bool(cfg, path, "attention_bias", false);
  c.qkv_bias = c.attn_proj_bias = attention_bias;
  c.mlp_bias = c.architecture == Architecture::kLlama && get_bool(cfg, path, "mlp_bias", false);
  if (c.architecture == Architecture::kMistral && find(cfg, "sliding_window")) {
    // Attention over a window at least as long as the sequence is plain causal attention.
    const int window = get_int(cfg, path, "sliding_window", 0, 1 << 30);
    if (window < c.max_seq_len) c.max_seq_len = window;
  }
}

}  // namespace

std::string config_model_type(const json& cfg) {
  const json* v = cfg.is_object() ? find(cfg, "model_type") : nullptr;
  return v && v->is_string() ? v->get<std::string>() : "";
}

bool is_llama_model_type(const std::string& t) {
  return t == "llama" || t == "qwen2" || t == "mistral";
}

ModelConfig read_llama_config(const json& cfg, const std::string& path) {
  if (!cfg.is_object()) throw FileError(path, "is not a JSON object");
  const std::string type = config_model_type(cfg);
  ModelConfig c;
  if (type == "llama") {
    c.architecture = Architecture::kLlama;
  } else if (type == "qwen2") {
    c.architecture = Architecture::kQwen2;
  } else if (type == "mistral") {
    c.architecture = Architecture::kMistral;
  } else {
    throw FileError(path, "model_type is \"" + type +
                              "\", expected \"llama\", \"qwen2\" or \"mistral\" (or \"gpt2\")");
  }
  if (const json* act = find(cfg, "hidden_act"); act && *act != "silu") {
    throw FileError(path, "hidden_act is " + act->dump() + ", expected \"silu\" (SwiGLU)");
  }
  c.channels = get_int(cfg, path, "hidden_size", 0, 65536);
  c.hidden = get_int(cfg, path, "intermediate_size", 0, 1 << 20);
  c.num_layers = get_int(cfg, path, "num_hidden_layers", 0, 4096);
  c.num_heads = get_int(cfg, path, "num_attention_heads", 0, 4096);
  c.num_kv_heads = get_int(cfg, path, "num_key_value_heads", c.num_heads, 4096);
  if (c.channels % c.num_heads != 0 && !find(cfg, "head_dim")) {
    throw FileError(path, "hidden_size is not a multiple of num_attention_heads and there is no head_dim");
  }
  c.head_dim = get_int(cfg, path, "head_dim", c.channels / c.num_heads, 4096);
  c.vocab_size = get_int(cfg, path, "vocab_size", 0, kMaxVocabSize);
  c.padded_vocab_size = padded_vocab(c.vocab_size);
  c.max_seq_len = get_int(cfg, path, "max_position_embeddings", 0, kMaxSeqLen);
  c.norm_eps = get_number(cfg, path, "rms_norm_eps", 1e-6);
  c.tied_head = get_bool(cfg, path, "tie_word_embeddings", false);
  c.rope.head_dim = c.head_dim;
  c.rope.theta = get_number(cfg, path, "rope_theta", 10000);
  read_rope_scaling(cfg, path, c.rope);
  read_family(cfg, path, c);
  try {
    validate(c, path);
  } catch (const ShapeError& e) {
    throw FileError(path, e.what());
  }
  return c;
}

}  // namespace llmcpu
