// AdamW on the flat parameter arena (torch.optim.AdamW semantics), with optional global-norm clipping.
// Owns the first and second moments, one flat buffer each in ParameterLayout order. Moments and the
// updated (master) weights are fp32 in both precisions; in bf16 the same pass also writes the bf16
// working copy of the weights (Bf16Kernels::adamw_update).
#pragma once

#include <cstddef>

#include "core/util/aligned_buffer.h"
#include "simd/bf16.h"
#include "simd/kernels.h"

namespace llmcpu {

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

class AdamW {
 public:
  // `bf16_kernels` (may be null) is needed only for steps that write a bf16 copy.
  AdamW(size_t num_parameters, const AdamWConfig& config,
        const KernelTable& kernels = active_kernels(), const Bf16Kernels* bf16_kernels = nullptr);

  // One update with learning rate lr; advances the step count first (so the first update is t = 1).
  // With params_bf16 (same layout as params) it also sets params_bf16[i] = bf16(params[i]).
  void step(float* params, const float* grads, double lr, bf16* params_bf16 = nullptr);

  long long steps_taken() const { return t_; }
  void set_steps_taken(long long t) { t_ = t; }  // when resuming
  float* m() { return m_.data(); }
  float* v() { return v_.data(); }
  size_t size() const { return m_.size(); }
  const AdamWConfig& config() const { return config_; }

 private:
  AdamWConfig config_;
  const KernelTable& kernels_;
  const Bf16Kernels* bf16_kernels_;
  AlignedBuffer<float> m_;
  AlignedBuffer<float> v_;
  long long t_ = 0;
};

// sqrt(sum of squares) over a flat gradient buffer, the same for any thread count.
double global_norm(const float* grads, size_t n, const KernelTable& kernels = active_kernels());

// If max_norm > 0 and norm > max_norm, scales the gradients by max_norm / norm (as
// torch.nn.utils.clip_grad_norm_, whose factor is max_norm / (norm + 1e-6)). Returns the factor used.
float clip_to_norm(float* grads, size_t n, double norm, double max_norm,
                   const KernelTable& kernels = active_kernels());

}  // namespace llmcpu
