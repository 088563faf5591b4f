#include "core/io/hf_llama.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include "core/io/hf_llama_config.h"
#include "core/io/json_file.h"
#include "core/model/parameters.h"
#include "core/util/file.h"
#include "simd/error.h"

namespace llmcpu {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kIndexName = "model.safetensors.index.json";

using Piece = HfPiece;


size_t flat_offset(const ParameterLayout& layout, const Piece& p) {
  return layout.offset(p.role) + size_t(std::max(p.layer, 0)) * layout.layer_size(p.role) +
         p.offset;
}

std::string shape_string(const std::vector<size_t>& shape) {
  SafeTensor t;
  t.shape = shape;
  return t.shape_string();
}

// "model.layers.N.self_attn.rotary_emb.inv_freq": a buffer older checkpoints saved.
bool is_rotary_buffer(const std::string& name) {
  const std::string tail = ".self_attn.rotary_emb.inv_freq";
  return name.rfind("model.layers.", 0) == 0 && name.size() > tail.size() &&
         name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
}

// The shard files an index names (each once, in order), with the tensors it maps to each.
std::vector<std::string> index_shards(const std::string& index_path,
                                      std::map<std::string, std::string>& weight_map) {
  const json index = read_json_file(index_path);
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    throw FileError(index_path, "has no \"weight_map\" object (a safetensors index's)");
  }
  std::vector<std::string> shards;
  const fs::path dir = fs::path(index_path).parent_path();
  for (const auto& [name, file] : index["weight_map"].items()) {
    if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos) {
      throw FileError(index_path, "weight_map[\"" + name + "\"] is " + file.dump() +
                                      ", expected a file name in the same folder");
    }
    const std::string path = (dir / file.get<std::string>()).string();
    weight_map[name] = path;
    if (std::find(shards.begin(), shards.end(), path) == shards.end()) shards.push_back(path);
  }
  return shards;
}

}  // namespace

std::vector<HfPiece> hf_llama_pieces(const ModelConfig& c) {
  const size_t C = c.channels, V = c.vocab_size, H = c.hidden, D = c.head_dim;
  const size_t Q = c.num_heads * D, KV = c.num_kv_heads * D;
  const bool fused = c.family().fused_projections;
  std::vector<HfPiece> out;
  out.push_back({"model.embed_tokens.weight", kWte, -1, 0, {V, C}});
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const auto add = [&](const std::string& name, int role, size_t offset,
                         std::vector<size_t> shape) {
      out.push_back({p + name, role, l, offset, std::move(shape)});
    };
    if (fused) {  // Phi-3: the rows of q|k|v and of gate|up as llmcpu keeps them (no biases)
      add("self_attn.qkv_proj.weight", kQkvw, 0, {Q + 2 * KV, C});
    } else {
      const char* qkv[] = {"q", "k", "v"};
      const size_t rows[] = {Q, KV, KV}, starts[] = {0, Q, Q + KV};
      for (int i = 0; i < 3; ++i) {
        add(std::string("self_attn.") + qkv[i] + "_proj.weight", kQkvw, starts[i] * C,
            {rows[i], C});
        if (c.qkv_bias) {
          add(std::string("self_attn.") + qkv[i] + "_proj.bias", kQkvb, starts[i], {rows[i]});
        }
      }
    }
    if (c.family().qk_norm) {
      add("self_attn.q_norm.weight", kQNorm, 0, {D});
      add("self_attn.k_norm.weight", kKNorm, 0, {D});
    }
    add("self_attn.o_proj.weight", kAttprojw, 0, {C, Q});
    if (c.attn_proj_bias) add("self_attn.o_proj.bias", kAttprojb, 0, {C});
    if (fused) {
      add("mlp.gate_up_proj.weight", kFcw, 0, {2 * H, C});
    } else {
      add("mlp.gate_proj.weight", kFcw, 0, {H, C});
      if (c.mlp_bias) add("mlp.gate_proj.bias", kFcb, 0, {H});
      add("mlp.up_proj.weight", kFcw, H * C, {H, C});
      if (c.mlp_bias) add("mlp.up_proj.bias", kFcb, H, {H});
    }
    add("mlp.down_proj.weight", kFcprojw, 0, {C, H});
    if (c.mlp_bias) add("mlp.down_proj.bias", kFcprojb, 0, {C});
    add("input_layernorm.weight", kLn1w, 0, {C});
    if (c.family().post_norms) {  // Gemma 2, 3: post_attention_layernorm is the attention's output's
      add("post_attention_layernorm.weight", kAttnPostNorm, 0, {C});
      add("pre_feedforward_layernorm.weight", kLn2w, 0, {C});
      add("post_feedforward_layernorm.weight", kMlpPostNorm, 0, {C});
    } else {
      add("post_attention_layernorm.weight", kLn2w, 0, {C});
    }
  }
  out.push_back({"model.norm.weight", kLnfw, -1, 0, {C}});
  if (!c.tied_head) out.push_back({"lm_head.weight", kLmHead, -1, 0, {V, C}});
  return out;
}

std::vector<std::string> llama_tensor_names(const ModelConfig& c) {
  std::vector<std::string> names;
  for (const Piece& p : hf_llama_pieces(c)) names.push_back(p.name);
  return names;
}

HfLlamaFile::~HfLlamaFile() = default;

HfLlamaFile::HfLlamaFile(const HfModelPaths& paths) {
  if (paths.config.empty()) {
    throw FileError(paths.weights, "has no config.json beside it (a Llama-family model's shape "
                                   "is only in its config.json; name it with --config)");
  }
  config_ = read_llama_config(read_json_file(paths.config), paths.config);
  open(paths.weights, paths.config);
}

HfLlamaFile::HfLlamaFile(const std::string& weights, const ModelConfig& config,
                         const std::string& config_source)
    : config_(config) {
  open(weights, config_source);
}

void HfLlamaFile::open(const std::string& weights, const std::string& config_source) {
  std::map<std::string, std::string> weight_map;
  const bool sharded = fs::path(weights).filename() == kIndexName;
  const std::vector<std::string> shards =
      sharded ? index_shards(weights, weight_map) : std::vector<std::string>{weights};
  for (const std::string& shard : shards) {
    files_.push_back(std::make_unique<SafetensorsFile>(shard));
    for (const SafeTensor& t : files_.back()->tensors()) {
      if (sharded && weight_map[t.name] != shard) {
        throw FileError(shard,
                        "holds tensor '" + t.name + "', which " + weights + " places elsewhere");
      }
      if (!tensors_.emplace(t.name, &t).second) {
        throw FileError(shard, "tensor '" + t.name + "' is stored in two shards");
      }
    }
  }
  std::set<std::string> known;
  const std::string source = "the model " + describe(config_) + " of " + config_source;
  for (const Piece& p : hf_llama_pieces(config_)) {
    auto it = tensors_.find(p.name);
    if (it == tensors_.end()) {
      throw FileError(weights, "missing tensor '" + p.name + "' (" + source + ")");
    }
    if (it->second->dtype == TensorDtype::kI32) {
      throw FileError(weights, "tensor '" + p.name + "' is I32, expected F32, F16 or BF16");
    }
    if (it->second->shape != p.shape) {
      throw FileError(weights, "tensor '" + p.name + "' has shape " + it->second->shape_string() +
                                   ", but " + source + " implies " + shape_string(p.shape));
    }
    known.insert(p.name);
  }
  for (const auto& [name, t] : tensors_) {
    if (known.count(name) || is_rotary_buffer(name)) continue;
    if (name == "lm_head.weight" && config_.tied_head &&
        t->shape == tensors_["model.embed_tokens.weight"]->shape) {
      continue;  // checked equal to the embedding by load()
    }
    throw FileError(weights, "unknown tensor '" + name + "': not a parameter of " + source);
  }
  description_ =
      std::string("safetensors ") + dtype_name(tensors_["model.embed_tokens.weight"]->dtype) +
      ", " + architecture_name(config_.architecture) +
      (sharded ? ", " + std::to_string(shards.size()) + " shards" : "") + ", " + config_source;
}

namespace {

// Row r of a (rows, C) tensor as a tensor of its own.
SafeTensor row_of(const SafeTensor& t, size_t r, size_t C) {
  SafeTensor row = t;
  row.shape = {C};
  row.count = C;
  row.data = t.data + r * C * dtype_bytes(t.dtype);
  return row;
}

}  // namespace

void HfLlamaFile::load(float* params,
                       const std::function<void(size_t offset, size_t count)>& written) const {
  const ParameterLayout layout(config_);
  const size_t C = config_.channels, V = config_.vocab_size;
  // A tied model computes its logits with the embedding: a different stored head is another model.
  // Checked row by row from the files, before anything is read.
  auto head = tensors_.find("lm_head.weight");
  if (config_.tied_head && head != tensors_.end()) {
    const SafeTensor& wte = *tensors_.at("model.embed_tokens.weight");
    std::vector<float> a(C), b(C);
    for (size_t r = 0; r < V; ++r) {
      tensor_to_f32(row_of(*head->second, r, C), a.data());
      tensor_to_f32(row_of(wte, r, C), b.data());
      if (std::memcmp(a.data(), b.data(), C * sizeof(float)) != 0) {
        throw FileError(files_.front()->path(),
                        "tensor 'lm_head.weight' differs from model.embed_tokens.weight (first in "
                        "row " + std::to_string(r) + ") although tie_word_embeddings is true");
      }
    }
    for (const auto& f : files_) f->let_go(*head->second);
  }
  // The padding rows of wte and lm_head stay zero; every other element is a piece's.
  for (const int role : {int(kWte), int(kLmHead)}) {
    if (layout.size(role) == 0) continue;
    float* t = params + layout.offset(role);
    std::fill(t + V * C, t + layout.size(role), 0.0f);
  }
  for (const Piece& p : hf_llama_pieces(config_)) {
    const SafeTensor& t = *tensors_.at(p.name);
    const size_t offset = flat_offset(layout, p);
    tensor_to_f32(t, params + offset);
    for (const auto& f : files_) f->let_go(t);
    if (written) written(offset, t.count);
  }
}

DebugState load_llama_reference(const std::string& path, const ModelConfig& c) {
  const SafetensorsFile file(path);
  const auto get = [&](const std::string& name, TensorDtype dtype,
                       const std::vector<size_t>& shape) -> const SafeTensor& {
    const SafeTensor* t = file.find(name);
    if (!t) throw FileError(path, "missing tensor '" + name + "' (a verify reference's)");
    if (t->dtype != dtype || t->shape != shape) {
      throw FileError(path, "tensor '" + name + "' is " + dtype_name(t->dtype) + " " +
                                t->shape_string() + ", expected " + dtype_name(dtype) + " " +
                                shape_string(shape));
    }
    return *t;
  };
  const SafeTensor* inputs = file.find("inputs");
  if (!inputs || inputs->shape.size() != 2) {
    throw FileError(path, "needs an I32 tensor 'inputs' of shape (B, T)");
  }
  DebugState s;
  s.B = int(inputs->shape[0]), s.T = int(inputs->shape[1]);
  if (s.B <= 0 || s.T <= 0 || s.T > c.max_seq_len) {
    throw FileError(path, "inputs " + inputs->shape_string() + ": B and T must be positive and T "
                          "at most the model's " + std::to_string(c.max_seq_len));
  }
  const size_t B = s.B, T = s.T, V = c.vocab_size;
  s.inputs.resize(B * T), s.targets.resize(B * T), s.logits.resize(B * T * V);
  tensor_to_i32(get("inputs", TensorDtype::kI32, {B, T}), s.inputs.data());
  tensor_to_i32(get("targets", TensorDtype::kI32, {B, T}), s.targets.data());
  for (const std::vector<int>* ids : {&s.inputs, &s.targets}) {
    for (int id : *ids) {
      if (id < 0 || id >= c.vocab_size) {
        throw FileError(path, "token " + std::to_string(id) + " is outside the vocabulary 0.." +
                                  std::to_string(c.vocab_size - 1));
      }
    }
  }
  if (file.find("starts")) {  // packed rows (checked by the model)
    s.starts.resize(B * T);
    tensor_to_i32(get("starts", TensorDtype::kI32, {B, T}), s.starts.data());
  }
  tensor_to_f32(get("logits", TensorDtype::kF32, {B, T, V}), s.logits.data());
  tensor_to_f32(get("loss", TensorDtype::kF32, {}), &s.loss);
  const ParameterLayout layout(c);
  s.grads.assign(layout.total(), 0.0f);
  for (const Piece& p : hf_llama_pieces(c)) {
    tensor_to_f32(get("grad." + p.name, TensorDtype::kF32, p.shape),
                  s.grads.data() + flat_offset(layout, p));
  }
  return s;
}

void write_llama_safetensors(AtomicFileWriter& out, const ModelConfig& c, const float* params,
                             const uint16_t* rounded, TensorDtype dtype) {
  const ParameterLayout layout(c);
  std::vector<TensorToWrite> tensors;
  for (const Piece& p : hf_llama_pieces(c)) {
    const size_t at = flat_offset(layout, p);
    tensors.push_back({p.name, p.shape, params + at, rounded ? rounded + at : nullptr});
  }
  write_safetensors(out, tensors, dtype, {{"format", "pt"}});
}

void save_hf_llama(const std::string& folder, const ModelConfig& c, const float* params,
                   TensorDtype dtype, const json& base_config) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw FileError(folder, "cannot create the folder: " + ec.message());
  AtomicFileWriter weights((fs::path(folder) / "model.safetensors").string());
  write_llama_safetensors(weights, c, params, nullptr, dtype);
  AtomicFileWriter config((fs::path(folder) / "config.json").string());
  const std::string text = llama_config_json(c, dtype, base_config).dump(2) + "\n";
  config.write(text.data(), text.size());
  weights.finish();
  config.finish();
  weights.publish();
  config.publish();
}

}  // namespace llmcpu
