// Hugging Face weights of the families other than GPT-2 (LlamaForCausalLM, Qwen2ForCausalLM,
// MistralForCausalLM, Phi3ForCausalLM, Qwen3ForCausalLM, GemmaForCausalLM as save_pretrained writes
// them: model.safetensors, or model-0000k-of-0000N.safetensors listed by
// model.safetensors.index.json; config.json beside) to and from the flat parameter array, in the
// roles of core/model/parameters.h:
//   model.embed_tokens.weight (V, C)                  -> wte (Vp, C), the padding rows zero
//   model.layers.N.input_layernorm.weight (C)         -> ln1w
//   model.layers.N.self_attn.{q,k,v}_proj.weight      -> qkvw's rows, q then k then v (biases:
//   qkvb)
//     (Phi-3: self_attn.qkv_proj.weight, those rows in one tensor)
//   model.layers.N.self_attn.{q,k}_norm.weight (D)    -> q_norm, k_norm (Qwen3)
//   model.layers.N.self_attn.o_proj.weight (C, NH D)  -> attprojw (bias: attprojb)
//   model.layers.N.post_attention_layernorm.weight    -> ln2w (Gemma 2, 3: attn_post_norm, and
//     pre_feedforward_layernorm -> ln2w, post_feedforward_layernorm -> mlp_post_norm)
//   model.layers.N.mlp.{gate,up}_proj.weight (H, C)   -> fcw's rows, gate then up (biases: fcb)
//     (Phi-3: mlp.gate_up_proj.weight, those rows in one tensor)
//   model.layers.N.mlp.down_proj.weight (C, H)        -> fcprojw (bias: fcprojb)
//   model.norm.weight (C)                             -> lnfw
//   lm_head.weight (V, C)                             -> lm_head (Vp, C) when untied
// nn.Linear stores (out, in), as llmcpu does: nothing is transposed. A tied model's stored
// lm_head.weight must equal the embedding; rotary_emb.inv_freq buffers are skipped; any other
// tensor, a missing one or a wrong shape is refused naming the file and the tensor.
// Deliberately not here: config.json (core/io/hf_llama_config.h), the container
// (core/io/safetensors.h), GPT-2's files (core/io/hf_gpt2.h).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/io/debug_state.h"
#include "core/io/hf_gpt2.h"
#include "core/io/safetensors.h"
#include "core/model/config.h"

namespace llmcpu {

class HfLlamaFile {
 public:
  // paths.weights: model.safetensors or model.safetensors.index.json; paths.config is required.
  explicit HfLlamaFile(const HfModelPaths& paths);
  // A safetensors file (or a shards' index) of a model whose architecture is known already (read
  // from its config.json, or a checkpoint's from its training state), checked against it as above;
  // `config_source` says where the architecture came from, for messages.
  HfLlamaFile(const std::string& weights, const ModelConfig& config,
              const std::string& config_source = "its training state");
  ~HfLlamaFile();

  const ModelConfig& config() const { return config_; }
  // "safetensors BF16, llama, 2 shards, config.json" (what was read, for messages).
  const std::string& description() const { return description_; }
  // Fills a flat fp32 array laid out by ParameterLayout(config()) (F16 and BF16 widened exactly),
  // a tensor at a time: `written` (may be empty) hears each one's (offset, count) once it is in
  // place, and the file's pages of it are then let go, so that neither the whole fp32 model nor the
  // whole mapped file need stay resident while a model that freezes as it is written loads.
  void load(float* params,
            const std::function<void(size_t offset, size_t count)>& written = {}) const;

 private:
  // Opens the weights (a file, or the shards an index names) and checks them against config_;
  // `source` says where the architecture came from, for messages.
  void open(const std::string& weights, const std::string& source);

  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafeTensor*> tensors_;  // every tensor of every shard, by name
  ModelConfig config_;
  std::string description_;
};

// The flat parameters of `config` as a safetensors file of `dtype` (F32, F16, BF16) into an open
// writer, which the caller finishes and publishes, laid out as save_pretrained writes it. `rounded`
// (may be null): the same parameters rounded to bf16 already (a bf16 model's working copy), which
// a BF16 file takes as they are.
void write_llama_safetensors(AtomicFileWriter& out, const ModelConfig& config, const float* params,
                             const uint16_t* rounded, TensorDtype dtype);

// Writes the flat parameters of `config` as `folder`/model.safetensors in `dtype` and
// `folder`/config.json (llama_config_json over `base_config`), which transformers'
// AutoModelForCausalLM loads. Both through temporary files, renamed into place only once both are
// written; the folder is made when missing.
void save_hf_llama(const std::string& folder, const ModelConfig& config, const float* params,
                   TensorDtype dtype, const nlohmann::json& base_config);

// A PyTorch reference for `llmcpu verify` of a Llama-family model (tests/fixtures/
// make_llama_fixture.py writes them): a safetensors file of `inputs` and `targets` (I32 (B, T)),
// `logits` (F32 (B, T, V)), `loss` (F32, shape ()) and `grad.NAME` (F32) for every parameter
// tensor NAME of the model under its Hugging Face name (a tied model has no lm_head: the
// embedding's gradient holds the head's part), and optionally `starts` (I32 (B, T)) for rows packed
// with several examples (core/model/packing.h). Read into the form of an llm.c debug state (the
// gradients in the flat layout, wte's padding rows zero). FileError naming the file and the tensor
// when one is missing or of another dtype or shape, or a token is outside the vocabulary.
DebugState load_llama_reference(const std::string& path, const ModelConfig& config);

// One Hugging Face tensor of a family's weights: where its rows go in the flat array.
struct HfPiece {
  std::string name;           // "model.layers.0.self_attn.q_proj.weight"
  int role;                   // its TensorRole
  int layer;                  // -1 outside the layers
  size_t offset;              // elements into the layer's slice (the tensor's, outside layers)
  std::vector<size_t> shape;  // as stored
};
// Every tensor of `config` (not GPT-2), in save_pretrained's order.
std::vector<HfPiece> hf_llama_pieces(const ModelConfig& config);

// The names of a Llama-family model's tensors, in save_pretrained's order (for writers and tests).
std::vector<std::string> llama_tensor_names(const ModelConfig& config);

}  // namespace llmcpu
