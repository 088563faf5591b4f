// The architecture of a model: its family (core/model/family.h: what its blocks are made of) and
// its sizes and options, as an llm.c checkpoint header states GPT-2's shape or a Hugging Face
// config.json states the others' (LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM):
//   GPT-2   biases everywhere, lm_head tied to wte, an MLP of 4C, D = C / NH.
//   Llama   grouped-query attention (kv_heads() key/value heads shared by groups of query heads,
//           head_size() not necessarily C/NH), an MLP of width hidden_size(), biases only where
//           the flags say (Qwen2: q, k, v), lm_head tied or not, rope's settings.
#pragma once

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "core/model/family.h"
#include "core/model/rope.h"
#include "simd/attention_options.h"

namespace llmcpu {

struct ModelConfig {
  int max_seq_len = 0;        // maxT: positions in wpe (Llama: the longest sequence the model takes)
  int vocab_size = 0;         // V: real tokens
  int padded_vocab_size = 0;  // Vp: rows of wte, V rounded up (llm.c: to a multiple of 128)
  int num_layers = 0;         // L
  int num_heads = 0;          // NH: query heads
  int channels = 0;           // C: the residual stream's width (hidden_size)

  // The rest describes the families other than GPT-2; GPT-2 keeps the defaults.
  Architecture architecture = Architecture::kGpt2;
  int num_kv_heads = 0;  // NKV, dividing NH (0: NH)
  int head_dim = 0;      // D (0: C / NH)
  int hidden = 0;        // the MLP's width H (0: 4C)
  double norm_eps = 1e-5;  // rms_norm_eps (kernels add it in fp32, as PyTorch does; GPT-2: unused)
  bool qkv_bias = true;        // q, k, v projections have biases
  bool attn_proj_bias = true;  // the attention's output projection has a bias
  bool mlp_bias = true;        // the MLP's projections have biases
  bool tied_head = true;       // lm_head is wte
  RopeConfig rope = {};        // rotary positions (rope.head_dim == head_size())
  // Sliding-window attention (Mistral, Phi-3): on a sliding layer the query at position t sees the
  // keys t - W < u <= t, W = sliding_window (0: no layer slides). sliding_layers says which layers
  // slide (L of them when sliding_window > 0).
  int sliding_window = 0;
  std::vector<bool> sliding_layers = {};
  // Hugging Face's nn.Embedding(padding_idx=pad_token_id): that row of the embedding takes no
  // gradient from the lookup (a tied head's still reaches it). -1: none.
  int pad_token_id = -1;
  // Gemma 2 and 3: the attention's scores scaled by query_pre_attn_scalar^-0.5 (0: 1/sqrt(D)), the
  // attention's and the head's logits soft-capped, c tanh(x / c) (0: not), and the sliding
  // layers' own rotation (Gemma 3; rope_local.head_dim 0: none).
  double query_pre_attn_scalar = 0;
  double attn_softcap = 0;
  double final_softcap = 0;
  RopeConfig rope_local = {.head_dim = 0};

  const Family& family() const { return family_of(architecture); }
  int kv_heads() const { return num_kv_heads > 0 ? num_kv_heads : num_heads; }
  int head_size() const { return head_dim > 0 ? head_dim : channels / num_heads; }
  int hidden_size() const { return hidden > 0 ? hidden : 4 * channels; }
  // Widths of a row of the fused q|k|v projection, of the attention's output, and of the MLP's
  // first projection (GPT-2's fc; a gated MLP's gate|up).
  int qkv_width() const { return (num_heads + 2 * kv_heads()) * head_size(); }
  int attn_width() const { return num_heads * head_size(); }
  int fc_width() const { return family().gated_mlp() ? 2 * hidden_size() : hidden_size(); }
  // Layer l's attention options (simd/attention_options.h): its window where it slides.
  bool slides(int layer) const { return sliding_window > 0 && sliding_layers[size_t(layer)]; }
  AttentionOptions attention(int layer) const {
    AttentionOptions o;
    if (slides(layer)) o.window = sliding_window;
    if (query_pre_attn_scalar > 0) o.scale = float(1 / std::sqrt(query_pre_attn_scalar));
    o.softcap = float(attn_softcap);
    return o;
  }
  // Whether layer l rotates q and k with rope_local (else with rope).
  bool local_rope(int layer) const { return rope_local.head_dim > 0 && slides(layer); }
  bool operator==(const ModelConfig&) const = default;
};

inline constexpr int kVocabPadding = 128;
// The largest maxT and V (and Vp) a model may have (validate()); the flags that count positions or
// tokens are bounded by them before any model is read.
inline constexpr int kMaxSeqLen = 1 << 24;
inline constexpr int kMaxVocabSize = 1 << 24;
// The most sequences in a micro-batch (--batch); a memory plan refuses what does not fit long
// before, but B*T*C and the like stay far inside 64 bits.
inline constexpr int kMaxBatch = 1 << 20;

// V rounded up to a multiple of kVocabPadding.
inline int padded_vocab(int V) { return (V + kVocabPadding - 1) / kVocabPadding * kVocabPadding; }

// Throws ShapeError naming `source` and the field when the shape is impossible or too large to index
// (every dimension positive, C % NH == 0 for GPT-2, NKV dividing NH, Vp >= V, rope valid where the
// family rotates, parameter count within 2^40).
void validate(const ModelConfig& config, const std::string& source);

// "L=2 NH=3 C=48 V=311 Vp=384 maxT=32" (GPT-2); the others name their family: "llama L=2 NH=6
// NKV=2 D=24 C=48 H=80 V=311 Vp=384 maxT=64".
std::string describe(const ModelConfig& config);

// "gpt2", "llama", "qwen2", "mistral": config.json's model_type.
inline const char* architecture_name(Architecture architecture) {
  return family_of(architecture).model_type;
}

}  // namespace llmcpu
