// What a model family's blocks are made of: one description per family, which the one transformer
// (core/model/transformer.h), the parameter layout (core/model/parameters.h), the initialisation,
// the files (core/io) and the plugin check read instead of asking which family a model is. A new
// family is a new entry in family.cpp's table, plus the kernels of any op it adds
// (docs/architecture.md says how). The sizes and per-model options (head_dim, biases, a tied
// head, rope) are the model's ModelConfig (core/model/config.h).
#pragma once

#include <string>

namespace llmcpu {

// The families llmcpu reads. The name is kept so that a model is written back as the model_type
// it was read as (Llama, Qwen2 and Mistral run the same ops).
enum class Architecture { kGpt2, kLlama, kQwen2, kMistral, kPhi3, kQwen3, kGemma, kGemma2, kGemma3 };

// LayerNorm (mean and variance, a weight and a bias: GPT-2) or RMSNorm (no mean, no bias).
enum class NormKind { kLayerNorm, kRmsNorm };
// The MLP's activation: GELU of fc (GPT-2), or a gated unit of fc = [gate | up]: silu(gate) * up
// (SwiGLU), or gelu_tanh(gate) * up (GeGLU, Gemma).
enum class MlpKind { kGelu, kSwiGlu, kGeGlu };
// Positions: a learned table added to the embedding (GPT-2's wpe), or q and k rotated (rope).
enum class PositionKind { kLearned, kRope };
// Which projections have biases: all (GPT-2), as config.json's attention_bias and mlp_bias say
// (Llama), q, k and v only (Qwen2), or none.
enum class Biases { kAll, kConfigKeys, kQkv, kNone };

enum class ActivationKeys { kHiddenAct, kHiddenActivation, kBoth };

struct Family {
  Architecture architecture;
  const char* name;        // for people: "GPT-2", "Llama", "Qwen2", "Mistral"
  const char* model_type;  // config.json's: "gpt2", "llama", "qwen2", "mistral"
  const char* hf_class;    // the class save_pretrained names in "architectures"
  NormKind norm;
  // The norms scale by (w + norm_offset): 0, or 1 for Gemma's (1 + w) (its weights stored around 0).
  float norm_offset;
  MlpKind mlp;
  PositionKind positions;
  Biases biases;
  // config.json's sliding_window (null: none) is a window on every layer (Mistral, Phi-3).
  bool window_every_layer;
  // Hugging Face stores q|k|v as one qkv_proj and gate|up as one gate_up_proj (Phi-3), not as
  // q_proj, k_proj, v_proj, gate_proj and up_proj.
  bool fused_projections;
  // q and k normalised per head (RMSNorm over each head's D values, weights q_norm and k_norm)
  // before the rotation (Qwen3, Gemma 3).
  bool qk_norm;
  // The embedding is scaled by sqrt(C) (Gemma).
  bool embed_scale;
  // Norms also on the attention's and the MLP's outputs, before the residual adds (Gemma 2, 3:
  // post_attention_layernorm and post_feedforward_layernorm; the MLP's input norm is then
  // pre_feedforward_layernorm).
  bool post_norms;
  // Gemma 2 and 3's config keys: layer_types (or the rule of default_sliding_pattern: layer i
  // slides unless (i + 1) is a multiple of it), sliding_window, query_pre_attn_scalar and
  // final_logit_softcapping.
  int default_sliding_pattern;  // 0: not these keys
  // attn_logit_softcapping caps the attention's scores (Gemma 2; Gemma 3 has the key but does not
  // apply it).
  bool attn_softcap;
  // The sliding layers rotate with rope_local_base_freq and no scaling (Gemma 3).
  bool local_rope;
  // config.json's defaults where it leaves a key out: head_dim (0: C / NH), tie_word_embeddings,
  // pad_token_id (-1: none).
  int default_head_dim;
  bool default_tied;
  int default_pad_token_id;
  // The initialisation's scale of the residual projections (attprojw, fcprojw): GPT-2's
  // 0.02 / sqrt(2L), or 0.02 like every other matrix (transformers' _init_weights).
  bool scaled_residual_init;
  // The family's checkpoints are llm.c's files (GPT-2): the header states the shape, and what it
  // cannot state is fixed (D = C / NH, an MLP of 4C, biases everywhere, a tied head). The others'
  // are Hugging Face folders (safetensors and config.json).
  bool llmc_files;
  // The block a plugin runs (core/plugin_abi.h describes GPT-2's): false where offloading is
  // refused by name.
  bool plugin_block;
  // config.json's key naming the MLP's activation as save_pretrained writes it: "hidden_act", or
  // "hidden_activation" (Gemma 2, 3), or both (Gemma 1).
  ActivationKeys activation_keys = ActivationKeys::kHiddenAct;

  bool gated_mlp() const { return mlp != MlpKind::kGelu; }
};

// "LayerNorm, learned positions, GELU", "RMSNorm, rotary positions, SwiGLU": the ops of the
// family's block, for messages.
std::string describe_blocks(const Family& family);

// The description of an architecture; every Architecture has one.
const Family& family_of(Architecture architecture);
// The family whose config.json model_type is `model_type`; null when llmcpu reads none.
const Family* find_family(const char* model_type);
// "\"gpt2\", \"llama\", \"qwen2\" or \"mistral\"": the model_types llmcpu reads, for messages;
// without GPT-2's (`llmc_too` false): those whose config.json states the whole architecture.
std::string known_model_types(bool llmc_too = true);

}  // namespace llmcpu
