// The architecture of a model: GPT-2's (as an llm.c checkpoint header states its shape) or the
// Llama family's (as a Hugging Face config.json states it: LlamaForCausalLM, Qwen2ForCausalLM,
// MistralForCausalLM). One description drives the one transformer (core/model/transformer.h):
//   GPT-2   LayerNorm with bias, learned positions (wpe), multi-head attention, GELU MLP of 4C,
//           biases everywhere, lm_head tied to wte.
//   Llama   RMSNorm without bias, rotary positions (rope), grouped-query attention (kv_heads()
//           key/value heads shared by groups of query heads, head_size() not necessarily C/NH),
//           SwiGLU MLP of width hidden_size(), biases only where the flags say (Qwen2: q, k, v),
//           lm_head tied or not.
#pragma once

#include <cstddef>
#include <string>

#include "core/model/rope.h"

namespace llmcpu {

// Which family's ops the block runs. Llama, Qwen2 and Mistral run the same ops; the name is kept
// so that a model is written back as the model_type it was read as.
enum class Architecture { kGpt2, kLlama, kQwen2, kMistral };

struct ModelConfig {
  int max_seq_len = 0;        // maxT: positions in wpe (Llama: the longest sequence the model takes)
  int vocab_size = 0;         // V: real tokens
  int padded_vocab_size = 0;  // Vp: rows of wte, V rounded up (llm.c: to a multiple of 128)
  int num_layers = 0;         // L
  int num_heads = 0;          // NH: query heads
  int channels = 0;           // C: the residual stream's width (hidden_size)

  // The rest describes the Llama family; GPT-2 keeps the defaults.
  Architecture architecture = Architecture::kGpt2;
  int num_kv_heads = 0;  // NKV, dividing NH (0: NH)
  int head_dim = 0;      // D (0: C / NH)
  int hidden = 0;        // the MLP's width H (0: 4C)
  double norm_eps = 1e-5;  // rms_norm_eps (kernels add it in fp32, as PyTorch does; GPT-2: unused)
  bool qkv_bias = true;        // q, k, v projections have biases
  bool attn_proj_bias = true;  // the attention's output projection has a bias
  bool mlp_bias = true;        // the MLP's projections have biases
  bool tied_head = true;       // lm_head is wte
  RopeConfig rope = {};        // Llama's rotary positions (rope.head_dim == head_size())

  bool llama() const { return architecture != Architecture::kGpt2; }
  int kv_heads() const { return num_kv_heads > 0 ? num_kv_heads : num_heads; }
  int head_size() const { return head_dim > 0 ? head_dim : channels / num_heads; }
  int hidden_size() const { return hidden > 0 ? hidden : 4 * channels; }
  // Widths of a row of the fused q|k|v projection, of the attention's output, and of the MLP's
  // first projection (GPT-2's fc; Llama's gate|up).
  int qkv_width() const { return (num_heads + 2 * kv_heads()) * head_size(); }
  int attn_width() const { return num_heads * head_size(); }
  int fc_width() const { return llama() ? 2 * hidden_size() : hidden_size(); }
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
// (every dimension positive, C % NH == 0 for GPT-2, NKV dividing NH, Vp >= V, rope valid for Llama,
// parameter count within 2^40).
void validate(const ModelConfig& config, const std::string& source);

// "L=2 NH=3 C=48 V=311 Vp=384 maxT=32"; Llama: "llama L=2 NH=6 NKV=2 D=24 C=48 H=80 V=311 Vp=384
// maxT=64".
std::string describe(const ModelConfig& config);

// "gpt2", "llama", "qwen2", "mistral": config.json's model_type.
const char* architecture_name(Architecture architecture);

}  // namespace llmcpu
