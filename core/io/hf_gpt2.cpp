#include "core/io/hf_gpt2.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/io/checkpoint.h"
#include "core/io/json_file.h"
#include "core/model/parameters.h"
#include "simd/bf16.h"
#include "simd/error.h"

namespace llmcpu {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kPrefix = "transformer.";  // GPT2LMHeadModel's names of GPT2Model's tensors
constexpr const char* kLmHeadName = "lm_head.weight";
constexpr int kGpt2HeadSize = 64;  // every published GPT-2 (124M ... 1558M)

// The name transformers gives llm.c's tensor i (of layer l, for the per-layer ones), unprefixed.
std::string hf_name(int i, int l) {
  static constexpr const char* kLayerNames[] = {
      "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
      "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
      "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
  switch (i) {
    case 0:
      return "wte.weight";
    case 1:
      return "wpe.weight";
    case 14:
      return "ln_f.weight";
    case 15:
      return "ln_f.bias";
    default:
      return "h." + std::to_string(l) + "." + kLayerNames[i - 2];
  }
}

// The shape transformers stores llm.c's tensor `slot` in (one layer's slice): wte with V rows,
// Conv1D weights as (in, out).
std::vector<size_t> hf_shape(const ParameterLayout& layout, int slot, const ModelConfig& c) {
  const int role = kLlmcTensors[slot];
  std::vector<size_t> d = layout.dims(role);
  if (ParameterLayout::per_layer(role)) d.erase(d.begin());
  if (role == kWte) d[0] = size_t(c.vocab_size);
  if (ParameterLayout::matmul_weight(role)) std::swap(d[0], d[1]);
  return d;
}

std::string shape_string(const std::vector<size_t>& shape) {
  SafeTensor t;
  t.shape = shape;
  return t.shape_string();
}

// The causal-mask buffers older transformers versions saved: h.N.attn.bias, h.N.attn.masked_bias.
bool is_mask_buffer(const std::string& name) {
  if (name.rfind("h.", 0) != 0) return false;
  const size_t dot = name.find('.', 2);
  if (dot == std::string::npos || dot == 2) return false;
  if (!std::all_of(name.begin() + 2, name.begin() + long(dot), ::isdigit)) return false;
  const std::string rest = name.substr(dot + 1);
  return rest == "attn.bias" || rest == "attn.masked_bias";
}

// The layer number of a name "h.N.<...>", or -1.
int layer_of(const std::string& name) {
  if (name.rfind("h.", 0) != 0) return -1;
  const size_t dot = name.find('.', 2);
  if (dot == std::string::npos || dot == 2 || dot > 8) return -1;
  if (!std::all_of(name.begin() + 2, name.begin() + long(dot), ::isdigit)) return -1;
  return std::stoi(name.substr(2, dot - 2));
}

// config.json's value of `key` (the first of `keys` present), a positive integer; 0 when absent.
int config_int(const json& cfg, const std::string& path, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    if (!cfg.contains(key) || cfg[key].is_null()) continue;
    const json& v = cfg[key];
    if (!v.is_number_integer() || v.get<long long>() <= 0 || v.get<long long>() > (1 << 30)) {
      throw FileError(path, std::string(key) + " is " + v.dump() + ", expected a positive integer");
    }
    return v.get<int>();
  }
  return 0;
}

// (in, out) -> (out, in), in 32 x 32 tiles: dst[o][i] = load(i * out + o).
template <class Load>
void transpose(Load load, float* dst, size_t in, size_t out) {
  constexpr size_t kTile = 32;
#pragma omp parallel for schedule(static)
  for (size_t o0 = 0; o0 < out; o0 += kTile) {
    for (size_t i0 = 0; i0 < in; i0 += kTile) {
      const size_t o1 = std::min(out, o0 + kTile), i1 = std::min(in, i0 + kTile);
      for (size_t o = o0; o < o1; ++o) {
        for (size_t i = i0; i < i1; ++i) dst[o * in + i] = load(i * out + o);
      }
    }
  }
}

// A stored Conv1D weight (in, out), widened to fp32 and transposed into dst (out, in), straight
// from the mapped file.
void transpose_tensor(const SafeTensor& t, float* dst) {
  const uint8_t* p = t.data;
  auto half = [p](size_t k) {
    uint16_t h;
    std::memcpy(&h, p + 2 * k, 2);
    return h;
  };
  switch (t.dtype) {
    case TensorDtype::kF32:
      transpose(
          [p](size_t k) {
            float f;
            std::memcpy(&f, p + 4 * k, 4);
            return f;
          },
          dst, t.shape[0], t.shape[1]);
      break;
    case TensorDtype::kBf16:
      transpose([&](size_t k) { return bf16_to_float(half(k)); }, dst, t.shape[0], t.shape[1]);
      break;
    case TensorDtype::kF16:
      transpose([&](size_t k) { return f16_to_float(half(k)); }, dst, t.shape[0], t.shape[1]);
      break;
    case TensorDtype::kI32:
    case TensorDtype::kF64:  // read through a copy: no model is stored in F64
      std::vector<float> wide(t.count);
      tensor_to_f32(t, wide.data());  // refuses I32
      transpose([&wide](size_t k) { return wide[k]; }, dst, t.shape[0], t.shape[1]);
      break;
  }
}

// The config.json transformers writes for a GPT-2 (the 124M one's keys), of this shape.
json gpt2_config_json(const ModelConfig& c, TensorDtype dtype) {
  json j = {{"activation_function", "gelu_new"},
            {"architectures", {"GPT2LMHeadModel"}},
            {"attn_pdrop", 0.1},
            {"embd_pdrop", 0.1},
            {"initializer_range", 0.02},
            {"layer_norm_epsilon", 1e-05},
            {"model_type", "gpt2"},
            {"n_ctx", c.max_seq_len},
            {"n_embd", c.channels},
            {"n_head", c.num_heads},
            {"n_inner", nullptr},
            {"n_layer", c.num_layers},
            {"n_positions", c.max_seq_len},
            {"resid_pdrop", 0.1},
            {"scale_attn_weights", true},
            {"summary_activation", nullptr},
            {"summary_first_dropout", 0.1},
            {"summary_proj_to_labels", true},
            {"summary_type", "cls_index"},
            {"summary_use_proj", true},
            {"tie_word_embeddings", true},
            {"torch_dtype", torch_dtype_name(dtype)},
            {"vocab_size", c.vocab_size}};
  // GPT-2's <|endoftext|>, where the vocabulary has it.
  constexpr int kEndOfText = 50256;
  if (c.vocab_size > kEndOfText) j["bos_token_id"] = j["eos_token_id"] = kEndOfText;
  return j;
}

}  // namespace

HfModelPaths hf_model_paths(const std::string& in, const std::string& config_override) {
  HfModelPaths out;
  std::error_code ec;
  if (fs::is_directory(in, ec)) {
    out.weights = (fs::path(in) / "model.safetensors").string();
    const std::string index = (fs::path(in) / "model.safetensors.index.json").string();
    if (!fs::is_regular_file(out.weights, ec) && fs::is_regular_file(index, ec)) {
      out.weights = index;
    } else if (!fs::is_regular_file(out.weights, ec)) {
      throw FileError(in,
                      "is a folder without model.safetensors or model.safetensors.index.json (a "
                      "Hugging Face model folder holds them and config.json)");
    }
  } else {
    out.weights = in;
  }
  if (!config_override.empty()) {
    if (!fs::is_regular_file(config_override, ec)) {
      throw FileError(config_override, "no such file (--config: a Hugging Face config.json)");
    }
    out.config = config_override;
  } else {
    const std::string beside = (fs::path(out.weights).parent_path() / "config.json").string();
    if (fs::is_regular_file(beside, ec)) out.config = beside;
  }
  return out;
}

bool is_hf_model(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    return fs::is_regular_file(fs::path(path) / "model.safetensors", ec) ||
           fs::is_regular_file(fs::path(path) / "model.safetensors.index.json", ec);
  }
  if (fs::path(path).extension() == ".safetensors") return true;
  if (fs::path(path).filename() == "model.safetensors.index.json") return true;
  std::ifstream in(path, std::ios::binary);
  char head[9] = {};
  if (!in.read(head, sizeof head)) return false;
  int32_t magic;
  std::memcpy(&magic, head, 4);
  return magic != kCheckpointMagic && head[8] == '{';
}

namespace {

// The file's tensors by their names without GPT2LMHeadModel's prefix.
struct NamedTensors {
  std::map<std::string, const SafeTensor*> by_name;
  bool prefixed = false;  // whether the names had the prefix

  const SafeTensor* find(const std::string& name) const {
    auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : it->second;
  }
};

// Names without GPT2LMHeadModel's prefix; refuse a name given twice (with and without it).
NamedTensors name_tensors(const SafetensorsFile& file) {
  NamedTensors named;
  for (const SafeTensor& t : file.tensors()) {
    std::string name = t.name;
    if (name.rfind(kPrefix, 0) == 0) {
      name = name.substr(std::strlen(kPrefix));
      named.prefixed = true;
    }
    if (!named.by_name.emplace(name, &t).second) {
      throw FileError(file.path(), "tensor '" + name + "' is stored twice (with and without the '" +
                                       kPrefix + "' prefix)");
    }
  }
  return named;
}

// wte.weight or wpe.weight, which must be there with two dimensions.
const SafeTensor& embedding(const NamedTensors& named, const char* name, const std::string& path) {
  const SafeTensor* t = named.find(name);
  if (!t) throw FileError(path, "missing tensor '" + std::string(name) + "' (a GPT-2's)");
  if (t->shape.size() != 2) {
    throw FileError(path, "tensor '" + t->name + "' has shape " + t->shape_string() +
                              ", expected two dimensions");
  }
  return *t;
}

// The shape config.json gives (0 for what it does not say).
ModelConfig read_config_json(const std::string& config_path) {
  const json cfg = read_json_file(config_path);
  if (!cfg.is_object()) throw FileError(config_path, "is not a JSON object");
  if (cfg.contains("model_type") && cfg["model_type"] != "gpt2") {
    throw FileError(config_path,
                    "model_type is " + cfg["model_type"].dump() + ", expected \"gpt2\"");
  }
  ModelConfig c;
  c.num_layers = config_int(cfg, config_path, {"n_layer"});
  c.num_heads = config_int(cfg, config_path, {"n_head"});
  c.channels = config_int(cfg, config_path, {"n_embd"});
  c.max_seq_len = config_int(cfg, config_path, {"n_positions", "n_ctx"});
  c.vocab_size = config_int(cfg, config_path, {"vocab_size"});
  return c;
}

// The shape: config.json's where it says, else what the tensors imply; `source` names where it came
// from, for messages.
ModelConfig gpt2_config(const std::string& path, const std::string& config_path,
                        const NamedTensors& named, const SafeTensor& wte, const SafeTensor& wpe,
                        std::string& source) {
  ModelConfig c;
  source = "the tensors";
  if (!config_path.empty()) {
    c = read_config_json(config_path);
    source = config_path;
  }
  if (c.vocab_size == 0) c.vocab_size = int(wte.shape[0]);
  if (c.channels == 0) c.channels = int(wte.shape[1]);
  if (c.max_seq_len == 0) c.max_seq_len = int(wpe.shape[0]);
  if (c.num_layers == 0) {
    for (const auto& [name, t] : named.by_name) {
      c.num_layers = std::max(c.num_layers, layer_of(name) + 1);
    }
  }
  if (c.num_heads == 0) {
    // Not in the tensors: the head size of every published GPT-2.
    if (c.channels % kGpt2HeadSize != 0) {
      throw FileError(path,
                      "the number of heads is not in the tensors and there is no n_head "
                      "(config.json beside the file, or --config): C=" +
                          std::to_string(c.channels) +
                          " is no multiple of GPT-2's head "
                          "size 64 to infer it from");
    }
    c.num_heads = c.channels / kGpt2HeadSize;
  }
  c.padded_vocab_size = padded_vocab(c.vocab_size);
  try {
    validate(c, source);
  } catch (const ShapeError& e) {
    throw FileError(path, e.what());
  }
  return c;
}

using ParameterTensors = std::array<std::vector<const SafeTensor*>, kLlmcTensors.size()>;

// Every parameter tensor there once, of the shape the config implies: llm.c's tensor i, one per
// layer for the per-layer ones. Their names go into `found`.
ParameterTensors find_parameters(const NamedTensors& named, const ModelConfig& c,
                                 const std::string& path, const std::string& source,
                                 std::set<std::string>& found) {
  const ParameterLayout layout(c);
  ParameterTensors tensors;
  for (int i = 0; i < int(kLlmcTensors.size()); ++i) {
    const int layers = ParameterLayout::per_layer(kLlmcTensors[i]) ? c.num_layers : 1;
    for (int l = 0; l < layers; ++l) {
      const std::string name = hf_name(i, l);
      const SafeTensor* t = named.find(name);
      const std::vector<size_t> shape = hf_shape(layout, i, c);
      if (!t) {
        throw FileError(path, "missing tensor '" + name + "' (looked for with and without the '" +
                                  kPrefix + "' prefix; the model has " + describe(c) + " from " +
                                  source + ")");
      }
      if (t->dtype == TensorDtype::kI32) {
        throw FileError(path, "tensor '" + t->name + "' is I32, expected F32, F16 or BF16");
      }
      if (t->shape != shape) {
        throw FileError(path, "tensor '" + t->name + "' has shape " + t->shape_string() + ", but " +
                                  describe(c) + " (from " + source + ") implies " +
                                  shape_string(shape));
      }
      found.insert(name);
      tensors[i].push_back(t);
    }
  }
  return tensors;
}

// Past the parameters, only the attention masks and a stored lm_head (of wte's shape, returned;
// null if none) may be there: nothing unknown.
const SafeTensor* check_other_tensors(const NamedTensors& named,
                                      const std::set<std::string>& parameters, const ModelConfig& c,
                                      const std::string& path, const std::string& source) {
  const SafeTensor* lm_head = nullptr;
  for (const auto& [name, t] : named.by_name) {
    if (parameters.count(name) || is_mask_buffer(name)) continue;
    if (name == kLmHeadName) {
      const std::vector<size_t> shape = {size_t(c.vocab_size), size_t(c.channels)};
      if (t->shape != shape) {
        throw FileError(path, "tensor '" + t->name + "' has shape " + t->shape_string() +
                                  ", expected " + shape_string(shape) + " (that of wte.weight)");
      }
      lm_head = t;
      continue;
    }
    throw FileError(path, "unknown tensor '" + t->name + "': not a parameter of a GPT-2 of " +
                              describe(c) + " (from " + source +
                              ") in transformers' GPT2Model or GPT2LMHeadModel naming");
  }
  return lm_head;
}

}  // namespace

HfGpt2File::HfGpt2File(const HfModelPaths& paths) : file_(paths.weights) {
  const std::string& path = file_.path();
  const NamedTensors named = name_tensors(file_);
  const SafeTensor& wte = embedding(named, "wte.weight", path);
  const SafeTensor& wpe = embedding(named, "wpe.weight", path);
  std::string source;
  config_ = gpt2_config(path, paths.config, named, wte, wpe, source);
  std::set<std::string> parameters;
  tensors_ = find_parameters(named, config_, path, source, parameters);
  lm_head_ = check_other_tensors(named, parameters, config_, path, source);
  description_ = std::string("safetensors ") + dtype_name(wte.dtype) + ", " +
                 (named.prefixed ? "GPT2LMHeadModel" : "GPT2Model") + " names" +
                 (lm_head_ ? ", lm_head stored" : "") +
                 (paths.config.empty() ? ", no config.json" : ", " + paths.config);
}

void HfGpt2File::load(float* params) const {
  const ParameterLayout layout(config_);
  const ModelConfig& c = config_;
  for (int i = 0; i < int(kLlmcTensors.size()); ++i) {
    const int role = kLlmcTensors[i];
    const size_t slice = layout.size(role) / tensors_[i].size();
    for (size_t l = 0; l < tensors_[i].size(); ++l) {
      const SafeTensor& t = *tensors_[i][l];
      float* dst = params + layout.offset(role) + l * slice;
      if (ParameterLayout::matmul_weight(role)) {
        transpose_tensor(t, dst);
      } else {
        tensor_to_f32(t, dst);
      }
    }
  }
  // llm.c's padding rows of wte: never looked up, no logits of theirs in the loss.
  const size_t C = size_t(c.channels);
  float* wte = params + layout.offset(kWte);
  std::fill(wte + size_t(c.vocab_size) * C, wte + size_t(c.padded_vocab_size) * C, 0.0f);
  if (lm_head_) {
    // llm.c computes the logits with wte itself: an untied head would be a different model.
    std::vector<float> head(lm_head_->count);
    tensor_to_f32(*lm_head_, head.data());
    for (size_t r = 0; r < size_t(c.vocab_size); ++r) {
      if (std::memcmp(head.data() + r * C, wte + r * C, C * sizeof(float)) != 0) {
        throw FileError(file_.path(), "tensor '" + lm_head_->name + "' differs from wte.weight " +
                                          "(first in row " + std::to_string(r) + "): llm.c's " +
                                          "GPT-2 ties the output head to the token embedding, so "
                                          "an untied head cannot be converted");
      }
    }
  }
}

HfSaveReport save_hf_gpt2(const std::string& weights_path, const std::string& config_path,
                          const ModelConfig& c, const float* params, TensorDtype dtype) {
  const ParameterLayout layout(c);
  const size_t C = size_t(c.channels);
  HfSaveReport report;
  // The padding rows are dropped. llm.c and this program keep them zero (they get no gradient and
  // no weight decay moves a zero), but an llm.c model initialised at random in all Vp rows has
  // others. They never matter: no token id looks them up and the loss and sampling take only the
  // first V logits, so dropping them leaves the model's outputs as they were; the caller warns.
  const float* wte = params + layout.offset(kWte);
  for (size_t r = size_t(c.vocab_size); r < size_t(c.padded_vocab_size); ++r) {
    if (std::any_of(wte + r * C, wte + (r + 1) * C, [](float v) { return v != 0.0f; })) {
      ++report.nonzero_padding_rows;
    }
  }
  size_t transposed_size = 0;
  for (int role = 0; role < kNumTensorRoles; ++role) {
    if (ParameterLayout::matmul_weight(role)) transposed_size += layout.size(role);
  }
  std::vector<float> transposed(transposed_size);
  float* next = transposed.data();
  std::vector<TensorToWrite> tensors;
  auto add = [&](int i, int l) {  // llm.c's tensor i
    const int role = kLlmcTensors[i];
    const std::vector<size_t> shape = hf_shape(layout, i, c);
    const size_t slice = ParameterLayout::per_layer(role) ? layout.size(role) / c.num_layers : 0;
    const float* src = params + layout.offset(role) + size_t(l < 0 ? 0 : l) * slice;
    if (ParameterLayout::matmul_weight(role)) {
      transpose([src](size_t k) { return src[k]; }, next, shape[1], shape[0]);  // to (in, out)
      src = next;
      next += slice;
    }
    tensors.push_back({hf_name(i, l), shape, src});
  };
  add(0, -1);
  add(1, -1);
  for (int l = 0; l < c.num_layers; ++l) {
    for (int i = 2; i <= 13; ++i) add(i, l);
  }
  add(14, -1);
  add(15, -1);

  AtomicFileWriter weights(weights_path);
  write_safetensors(weights, tensors, dtype, {{"format", "pt"}});
  AtomicFileWriter config(config_path);
  const std::string text = gpt2_config_json(c, dtype).dump(2) + "\n";
  config.write(text.data(), text.size());
  weights.finish();
  config.finish();
  weights.publish();
  config.publish();
  return report;
}

}  // namespace llmcpu
