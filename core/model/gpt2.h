// GPT-2: parameters, gradients and activations of one model, with the forward and backward passes.
// The math of each layer lives in simd/ behind the KernelTable; this file only wires the layers.
// Deliberately not here: the optimizer (core/optim), files (core/io), data and the training loop.
#pragma once

#include <cstddef>

#include "core/model/activations.h"
#include "core/model/config.h"
#include "core/model/parameters.h"
#include "core/util/aligned_buffer.h"
#include "simd/kernels.h"

namespace llmcpu {

class Gpt2 {
 public:
  // Parameters start zeroed; load a checkpoint into params_flat() or call init_gpt2().
  explicit Gpt2(const ModelConfig& config, const KernelTable& kernels = active_kernels());

  const ModelConfig& config() const { return config_; }
  const ParameterLayout& layout() const { return layout_; }
  size_t num_parameters() const { return layout_.total(); }
  const KernelTable& kernels() const { return kernels_; }

  float* params_flat() { return params_.data(); }
  const float* params_flat() const { return params_.data(); }
  float* grads_flat() { return grads_.data(); }
  const float* grads_flat() const { return grads_.data(); }
  const ParameterViews<float>& params() const { return p_; }
  const ParameterViews<float>& grads() const { return g_; }

  // Sizes the activation arena for batches of B x T tokens (a no-op when already that size).
  void plan_batch(int B, int T);
  int batch() const { return arena_.batch(); }
  int seq_len() const { return arena_.seq_len(); }

  // Forward pass over inputs (B,T). With targets it also computes the per-token losses and returns
  // their mean; without, it returns NaN. Throws ShapeError if T > maxT or B, T do not match the plan.
  float forward(const int* inputs, const int* targets, int B, int T);
  // Logits of the last forward pass: (B, T, Vp); only the first V of each row are meaningful.
  const float* logits() const { return arena_.acts.logits; }

  void zero_grad();
  // Adds d(loss_scale * mean loss)/d(params) into the gradients. Needs a forward pass with targets
  // just before; it overwrites the logits with their gradient.
  void backward(float loss_scale = 1.0f);

 private:
  ModelConfig config_;
  ParameterLayout layout_;
  const KernelTable& kernels_;
  AlignedBuffer<float> params_;  // flat, ParameterLayout order
  AlignedBuffer<float> grads_;   // flat, same layout
  ParameterViews<float> p_{};
  ParameterViews<float> g_{};
  ActivationArena arena_;
  AlignedBuffer<int> inputs_;   // (B, T) of the last forward pass, kept for the backward pass
  AlignedBuffer<int> targets_;  // (B, T)
  bool have_targets_ = false;
};

// GPT-2 initialisation: weights N(0, 0.02), the residual projections (attprojw, fcprojw) N(0,
// 0.02/sqrt(2L)), biases 0, layernorm weights 1, padded wte rows 0. Same seed, same weights.
void init_gpt2(Gpt2& model, unsigned long long seed);

}  // namespace llmcpu
