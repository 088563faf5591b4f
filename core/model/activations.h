// Activation and activation-gradient arenas for one (B, T), each one allocation carved into views.
// The forward arena keeps what the backward pass reads, for every layer; the backward arena holds
// one layer's worth of gradients, reused from the last layer down to the first. Sized once by
// Model::plan_batch: a training step allocates nothing. Nothing grows with T^2: attention keeps its
// rows' log-sum-exp (B, NH, T), not the (B, NH, T, T) probabilities, and the head's (B, T, Vp)
// logits exist one chunk of rows at a time unless a caller asks to keep them.
//
// G is the type of the activations that only a GEMM reads or that are recomputed: float, or bf16
// in mixed precision (ln1, qkv, atty, ln2, fch, fch_gelu, lnf). The residual stream, layernorm
// statistics, log-sum-exps, logits and losses stay fp32; a bf16 arena keeps the G tensors in a
// bf16 allocation of their own.
#pragma once

#include <cstddef>
#include <string_view>

#include "core/model/config.h"
#include "core/model/precision.h"
#include "core/util/aligned_buffer.h"
#include "simd/bf16.h"

namespace llmcpu {

// What the backward pass recomputes instead of storing (llm.c's -r): nothing, the GELU output, or
// also the layernorm outputs ln1 and ln2 (from the saved input and statistics); or (kLayers,
// activation checkpointing) every block's activations: only each block's output is kept, and the
// backward pass runs the block's forward again just before its backward. Recomputation gives the
// same bits as the forward pass, so a run's numbers do not depend on it; it trades one pass over
// the activation (kLayers: one more forward pass of the blocks) for the memory of all layers'
// copies (one layer's buffer is shared).
enum class Recompute { kNone, kGelu, kAllPointwise, kLayers };
// "none", "gelu", "all-pointwise" or "layers" (or llm.c's "0", "1", "2"); anything else is a
// UsageError naming `flag` and the choices.
Recompute parse_recompute(std::string_view word, std::string_view flag = "--recompute");
const char* recompute_name(Recompute recompute);

// How a batch's activations are laid out (Model::plan_batch).
struct ActivationOptions {
  Precision precision = Precision::kFp32;
  Recompute recompute = Recompute::kNone;
  // Keep the logits of every row, (B, T, Vp), for a caller that reads them (verify, tests,
  // generation); otherwise the head runs over chunks of rows and keeps one chunk's.
  bool keep_logits = false;
};

// Rows of one chunk of the head over BT rows: its logits take at most 192 MiB, the BT rows cut in
// as few chunks as that allows, of equal rows but the last (all BT rows when keep_logits, or
// when they fit).
size_t head_chunk_rows(const ModelConfig& c, size_t BT, bool keep_logits = false);

// One layer's activations, llm.c's l_* pointers. Rows are the B*T tokens. G-typed tensors are read
// only by a GEMM or recomputed; in bf16 they are stored in bf16.
template <typename G>
struct LayerActivations {
  const float* residual;  // (B, T, C) the layer's input: encoded, or the previous layer's residual3
  G* ln1;                 // (B, T, C) shared by all layers when recomputed
  float* ln1_mean;        // (B, T) (LayerNorm only)
  float* ln1_rstd;        // (B, T)
  G* qkv;                 // (B, T, QKV) q|k|v (3C; Llama (NH + 2 NKV) D, q and k rotated)
  G* atty;                // (B, T, A) attention's output (C; Llama NH D)
  float* lse;             // (B, NH, T) attention's row log-sum-exp
  float* qk_saved;        // (B, T, NH + NKV, D) q and k before their per-head norm (or null)
  float* qk_rstd;         // (B, T, NH + NKV) that norm's 1/rms
  float* attn_out;        // (B, T, C) the attention's projection before its post-norm (or null)
  float* attn_post_rstd;  // (B, T) that norm's 1/rms
  float* residual2;       // (B, T, C)
  G* ln2;                 // (B, T, C) shared by all layers when recomputed
  float* ln2_mean;        // (B, T)
  float* ln2_rstd;        // (B, T)
  G* fch;                 // (B, T, F) the MLP's first GEMM (4C; Llama gate|up, 2H)
  G* fch_gelu;            // (B, T, H) its activation (GELU; Llama SwiGLU), shared when recomputed
  float* mlp_out;         // (B, T, C) the MLP's output before its post-norm (or null)
  float* mlp_post_rstd;   // (B, T)
  float* residual3;       // (B, T, C) the layer's output
  const float* rope_cos;  // Llama: (T, D/2) the rotary tables of positions 0..T-1 (else null)
  const float* rope_sin;
  const float* rope_cos_local;  // Gemma 3's sliding layers' tables (else null)
  const float* rope_sin_local;
  bool recompute_gelu;       // backward recomputes fch_gelu (GELU or SwiGLU) from fch first
  bool recompute_layernorm;  // backward recomputes ln2 and ln1 from their inputs and statistics
  bool recompute_layer;      // backward runs the block's forward again first (all but residual3
                             // are one buffer shared by the layers)
  // Packed rows (core/model/packing.h): (B, T) where each token's example begins, its attention's
  // starts; null: one sequence per row. The rope tables are then (B*T, D/2), one row per token.
  const int* starts;
};

template <typename G>
struct ActivationViews {
  float* encoded;    // (B, T, C)
  G* ln1;            // (L, B, T, C), or (B, T, C) when recomputed
  float* ln1_mean;   // (L, B, T)
  float* ln1_rstd;   // (L, B, T)
  G* qkv;            // (L, B, T, QKV)
  G* atty;           // (L, B, T, A)
  float* lse;        // (L, B, NH, T)
  float* qk_saved;   // (L, B, T, NH + NKV, D): a family with per-head q/k norms (else null)
  float* qk_rstd;    // (L, B, T, NH + NKV)
  float* attn_out;   // (L, B, T, C): a family with post-norms (else null)
  float* attn_post_rstd;  // (L, B, T)
  float* residual2;  // (L, B, T, C)
  G* ln2;            // (L, B, T, C), or (B, T, C) when recomputed
  float* ln2_mean;   // (L, B, T)
  float* ln2_rstd;   // (L, B, T)
  G* fch;            // (L, B, T, F)
  G* fch_gelu;       // (L, B, T, H), or (B, T, H) when recomputed
  float* mlp_out;    // (L, B, T, C): a family with post-norms (else null)
  float* mlp_post_rstd;  // (L, B, T)
  float* residual3;  // (L, B, T, C)
  G* lnf;            // (B, T, C)
  float* lnf_mean;   // (B, T)
  float* lnf_rstd;   // (B, T)
  // The head's logits: (B, T, Vp) when kept, else one chunk of head_rows rows (head_rows, Vp).
  float* logits;
  // (head_rows, Vp): the chunk's logits turned into their gradient; the same memory as logits
  // when those are not kept.
  float* dlogits;
  float* lse_head;  // (B, T) log-sum-exp of each row's first V logits
  float* losses;    // (B, T)
  // Llama: the rotary tables, (T, D/2) each (core/model/rope.h), filled when the arena is made. A
  // decoding step points them at its own tables (positions up to its length).
  float* rope_cos;
  float* rope_sin;
  float* rope_cos_local;  // Gemma 3: the sliding layers' (else null)
  float* rope_sin_local;
  int L;
  size_t BT, C, NH;
  size_t QKV, A, F, H;  // row widths of qkv, atty, fch, fch_gelu (ModelConfig's *_width())
  size_t QK, QK_heads;  // row widths of qk_saved ((NH + NKV) D) and qk_rstd (NH + NKV); 0: none
  size_t head_rows;     // rows of one chunk of the head (all BT when the logits are kept)
  bool keep_logits;
  Recompute recompute;
  // A batch of packed rows (core/model/packing.h; Model points these at its batch, null
  // otherwise): (B, T) each token's example start and its position in the example; the rope
  // tables above are then the tokens' own, (B*T, D/2).
  const int* starts;
  const int* positions;

  // The views of layer l (0 <= l < L). This is the one place the per-layer offsets are written.
  LayerActivations<G> layer(int l) const {
    const bool block = recompute == Recompute::kLayers;
    const size_t i = block ? 0 : size_t(l);  // layers recomputed: one shared buffer
    const size_t row = i * BT * C, out = size_t(l) * BT * C;
    const bool gelu = recompute == Recompute::kGelu || recompute == Recompute::kAllPointwise;
    const bool ln = recompute == Recompute::kAllPointwise;
    return {.residual = l == 0 ? encoded : residual3 + out - BT * C,
            .ln1 = ln ? ln1 : ln1 + row,
            .ln1_mean = ln1_mean + i * BT,
            .ln1_rstd = ln1_rstd + i * BT,
            .qkv = qkv + i * BT * QKV,
            .atty = atty + i * BT * A,
            .lse = lse + i * BT * NH,
            .qk_saved = qk_saved ? qk_saved + i * BT * QK : nullptr,
            .qk_rstd = qk_rstd ? qk_rstd + i * BT * QK_heads : nullptr,
            .attn_out = attn_out ? attn_out + row : nullptr,
            .attn_post_rstd = attn_post_rstd ? attn_post_rstd + i * BT : nullptr,
            .residual2 = residual2 + row,
            .ln2 = ln ? ln2 : ln2 + row,
            .ln2_mean = ln2_mean + i * BT,
            .ln2_rstd = ln2_rstd + i * BT,
            .fch = fch + i * BT * F,
            .fch_gelu = gelu ? fch_gelu : fch_gelu + i * BT * H,
            .mlp_out = mlp_out ? mlp_out + row : nullptr,
            .mlp_post_rstd = mlp_post_rstd ? mlp_post_rstd + i * BT : nullptr,
            .residual3 = residual3 + out,
            .rope_cos = rope_cos,
            .rope_sin = rope_sin,
            .rope_cos_local = rope_cos_local,
            .rope_sin_local = rope_sin_local,
            .recompute_gelu = gelu,
            .recompute_layernorm = ln,
            .recompute_layer = block,
            .starts = starts};
  }
  // The last layer's output, the head's input: (B, T, C).
  const float* output() const { return residual3 + size_t(L - 1) * BT * C; }
};

// One layer of gradients, reused from the last layer down to the first. During the forward pass
// it is free: the bf16 executor rounds its GEMM outputs (qkv, fch) from dfch, which is as wide as
// either.
struct ActivationGradViews {
  float* dresidual;  // (B, T, C) gradient of the residual stream, accumulated layer by layer
  float* dln;        // (B, T, C) gradient of a layernorm's output (lnf, ln2, ln1 in turn)
  float* datty;      // (B, T, A)
  float* dqkv;       // (B, T, QKV)
  float* dfch;       // (B, T, max(F, QKV)): d(fch)
  // (B, T, H): d(fch_gelu). GPT-2's GELU works in place, so this is dfch there; a gated unit's
  // output is half as wide as its input and has a buffer of its own.
  float* dact;
  // (C): the embedding's pad row kept across the lookup's backward (ModelConfig::pad_token_id;
  // null without one).
  float* pad_row;
};

// The bytes of an arena, by what they hold (the memory plan's figures).
struct ActivationBytes {
  size_t forward = 0;   // what the backward pass reads: all layers' activations
  size_t head = 0;      // the head's logits (a chunk, or all rows when kept) and their gradient
  size_t backward = 0;  // one layer of activation gradients
  size_t total() const { return forward + head + backward; }
};

class ActivationArena {
 public:
  ActivationArena() = default;
  ActivationArena(const ModelConfig& config, int B, int T, const ActivationOptions& options = {});
  // What the arena of that shape would hold, without allocating it.
  static ActivationBytes bytes(const ModelConfig& config, int B, int T,
                               const ActivationOptions& options);

  int batch() const { return B_; }
  int seq_len() const { return T_; }
  const ActivationOptions& options() const { return options_; }
  size_t forward_floats() const { return forward_.size(); }
  size_t backward_floats() const { return backward_.size(); }
  size_t forward_bf16_elements() const { return forward_bf16_.size(); }

  // The logits of whichever set of views the arena's precision carved: all rows when kept, else
  // the last chunk of the head.
  const float* logits() const { return acts.logits ? acts.logits : acts_bf16.logits; }

  // The views of the arena's precision; the other set is all null.
  ActivationViews<float> acts{};      // fp32 models
  ActivationViews<bf16> acts_bf16{};  // bf16 models
  ActivationGradViews grads{};

 private:
  int B_ = 0, T_ = 0;
  ActivationOptions options_;
  AlignedBuffer<float> forward_;
  AlignedBuffer<float> head_;  // the logits (a chunk, or all rows) and their gradient
  AlignedBuffer<float> backward_;
  AlignedBuffer<bf16> forward_bf16_;  // bf16: the G tensors
};

}  // namespace llmcpu
