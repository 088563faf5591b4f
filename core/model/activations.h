// Activation and activation-gradient arenas for one (B, T), each one allocation carved into views.
// The forward arena keeps what the backward pass reads, for every layer; the backward arena holds
// one layer's worth of gradients, reused from the last layer down to the first. Sized once by
// Gpt2::plan_batch: a training step allocates nothing.
//
// G is the type the GEMMs read their inputs in: float, or bf16 in mixed precision. The GEMM inputs
// (ln1, atty, ln2, fch_gelu, lnf) are stored in G, everything else in fp32; a bf16 arena keeps them
// in a bf16 allocation of their own, and an fp32 arena is exactly what it was without bf16.
#pragma once

#include <cstddef>

#include "core/model/config.h"
#include "core/model/precision.h"
#include "core/util/aligned_buffer.h"
#include "simd/bf16.h"

namespace llmcpu {

// One layer's activations, llm.c's l_* pointers. Rows are the B*T tokens.
template <typename G>
struct LayerActivations {
  const float* residual;  // (B, T, C) the layer's input: encoded, or the previous layer's residual3
  G* ln1;                 // (B, T, C)
  float* ln1_mean;        // (B, T)
  float* ln1_rstd;        // (B, T)
  float* qkv;             // (B, T, 3*C)
  G* atty;                // (B, T, C)
  float* att;             // (B, NH, T, T)
  float* residual2;       // (B, T, C)
  G* ln2;                 // (B, T, C)
  float* ln2_mean;        // (B, T)
  float* ln2_rstd;        // (B, T)
  float* fch;             // (B, T, 4*C)
  G* fch_gelu;            // (B, T, 4*C)
  float* residual3;       // (B, T, C) the layer's output
};

template <typename G>
struct ActivationViews {
  float* encoded;    // (B, T, C)
  G* ln1;            // (L, B, T, C)
  float* ln1_mean;   // (L, B, T)
  float* ln1_rstd;   // (L, B, T)
  float* qkv;        // (L, B, T, 3*C)
  G* atty;           // (L, B, T, C)
  float* att;        // (L, B, NH, T, T)
  float* residual2;  // (L, B, T, C)
  G* ln2;            // (L, B, T, C)
  float* ln2_mean;   // (L, B, T)
  float* ln2_rstd;   // (L, B, T)
  float* fch;        // (L, B, T, 4*C)
  G* fch_gelu;       // (L, B, T, 4*C)
  float* residual3;  // (L, B, T, C)
  G* lnf;            // (B, T, C)
  float* lnf_mean;   // (B, T)
  float* lnf_rstd;   // (B, T)
  float* logits;     // (B, T, Vp); holds dlogits after the backward pass
  float* lse;        // (B, T) log-sum-exp of each row's first V logits
  float* losses;     // (B, T)
  int L;
  size_t BT, C, att_size;  // rows, channels, B*NH*T*T: the strides of the per-layer views

  // The views of layer l (0 <= l < L). This is the one place the per-layer offsets are written.
  LayerActivations<G> layer(int l) const {
    const size_t i = l;
    const size_t row = i * BT * C;
    return {.residual = l == 0 ? encoded : residual3 + row - BT * C,
            .ln1 = ln1 + row,
            .ln1_mean = ln1_mean + i * BT,
            .ln1_rstd = ln1_rstd + i * BT,
            .qkv = qkv + 3 * row,
            .atty = atty + row,
            .att = att + i * att_size,
            .residual2 = residual2 + row,
            .ln2 = ln2 + row,
            .ln2_mean = ln2_mean + i * BT,
            .ln2_rstd = ln2_rstd + i * BT,
            .fch = fch + 4 * row,
            .fch_gelu = fch_gelu + 4 * row,
            .residual3 = residual3 + row};
  }
  // The last layer's output, the head's input: (B, T, C).
  const float* output() const { return residual3 + size_t(L - 1) * BT * C; }
};

// One layer of gradients, reused from the last layer down to the first.
struct ActivationGradViews {
  float* dresidual;  // (B, T, C) gradient of the residual stream, accumulated layer by layer
  float* dln;        // (B, T, C) gradient of a layernorm's output (lnf, ln2, ln1 in turn)
  float* datty;      // (B, T, C)
  float* dqkv;       // (B, T, 3*C)
  float* dfch;       // (B, T, 4*C)
  float* dscores;    // (B, NH, T) one row of attention-score gradients per (batch, head)
};

class ActivationArena {
 public:
  ActivationArena() = default;
  ActivationArena(const ModelConfig& config, int B, int T, Precision precision = Precision::kFp32);

  int batch() const { return B_; }
  int seq_len() const { return T_; }
  size_t forward_floats() const { return forward_.size(); }
  size_t backward_floats() const { return backward_.size(); }
  size_t forward_bf16_elements() const { return forward_bf16_.size(); }

  // The logits of whichever set of views the arena's precision carved.
  const float* logits() const { return acts.logits ? acts.logits : acts_bf16.logits; }

  // The views of the arena's precision; the other set is all null.
  ActivationViews<float> acts{};      // fp32 models
  ActivationViews<bf16> acts_bf16{};  // bf16 models
  ActivationGradViews grads{};

 private:
  int B_ = 0, T_ = 0;
  AlignedBuffer<float> forward_;
  AlignedBuffer<float> backward_;
  AlignedBuffer<bf16> forward_bf16_;  // bf16: the GEMM inputs
};

}  // namespace llmcpu
