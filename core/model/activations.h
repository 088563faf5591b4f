// Activation and activation-gradient arenas for one (B, T), each one allocation carved into views.
// The forward arena keeps what the backward pass reads, for every layer; the backward arena holds
// one layer's worth of gradients, reused from the last layer down to the first. Sized once at
// set-up: a training step allocates nothing. In bf16 the GEMM inputs (ln1, atty, ln2, fch_gelu,
// lnf) live in a bf16 arena instead: their fp32 views are null, except atty, which shrinks to one
// layer of fp32 scratch (the attention kernel's output before rounding). The fp32 arena of an fp32
// model is exactly what it was without bf16.
#pragma once

#include <cstddef>

#include "core/model/config.h"
#include "core/model/precision.h"
#include "core/util/aligned_buffer.h"
#include "simd/bf16.h"

namespace llmcpu {

struct ActivationViews {
  float* encoded;    // (B, T, C)
  float* ln1;        // (L, B, T, C)
  float* ln1_mean;   // (L, B, T)
  float* ln1_rstd;   // (L, B, T)
  float* qkv;        // (L, B, T, 3*C)
  float* atty;       // (L, B, T, C); bf16: (B, T, C) scratch of the current layer
  float* att;        // (L, B, NH, T, T)
  float* residual2;  // (L, B, T, C)
  float* ln2;        // (L, B, T, C)
  float* ln2_mean;   // (L, B, T)
  float* ln2_rstd;   // (L, B, T)
  float* fch;        // (L, B, T, 4*C)
  float* fch_gelu;   // (L, B, T, 4*C)
  float* residual3;  // (L, B, T, C)
  float* lnf;        // (B, T, C)
  float* lnf_mean;   // (B, T)
  float* lnf_rstd;   // (B, T)
  float* logits;     // (B, T, Vp); holds dlogits after the backward pass
  float* lse;        // (B, T) log-sum-exp of each row's first V logits
  float* losses;     // (B, T)
};

// The bf16 copies that feed the GEMMs (bf16 precision only; all null in fp32).
struct Bf16ActivationViews {
  bf16* ln1;       // (L, B, T, C)
  bf16* atty;      // (L, B, T, C)
  bf16* ln2;       // (L, B, T, C)
  bf16* fch_gelu;  // (L, B, T, 4*C)
  bf16* lnf;       // (B, T, C)
};

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

  ActivationViews acts;
  Bf16ActivationViews acts_bf16{};
  ActivationGradViews grads;

 private:
  int B_ = 0, T_ = 0;
  AlignedBuffer<float> forward_;
  AlignedBuffer<float> backward_;
  AlignedBuffer<bf16> forward_bf16_;
};

}  // namespace llmcpu
