// AdamW on the flat parameter arena (torch.optim.AdamW semantics), with optional global-norm
// clipping. Owns the first and second moments: of the whole arena, or under ZeRO-1
// (core/comm/zero_shards.h) of this rank's parts of it only, packed in flat order. Moments and the
// updated (master) weights are fp32 in both precisions; in bf16 the same pass also writes the bf16
// working copy of the weights (Bf16Kernels::adamw_update). Each element's update is the same
// whichever rank makes it.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "core/model/parameters.h"
#include "core/util/aligned_buffer.h"
#include "simd/bf16.h"
#include "simd/kernels.h"
#include "simd/scalar/adamw.h"

namespace llmcpu {

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

// The update's constants at step t (from 1) with learning rate lr: what a device's AdamW takes
// (core/model/block_device.h) to make the CPU's update of its part.
inline scalar::AdamWStep adamw_step_of(const AdamWConfig& c, double lr, long long t) {
  return {lr, c.beta1, c.beta2, c.eps, c.weight_decay, t};
}

// What AdamW::step does with the gradients besides reading them: multiplies each by `scale` first
// (the clipping factor; the same products the table's scale entry would store), and sets each to
// zero once read when `clear` (the next step's zeroing, done while the gradient is in cache).
struct GradientUse {
  float scale = 1.0f;
  bool clear = false;
};

class AdamW {
 public:
  // `bf16_kernels` (may be null) is needed only for steps that write a bf16 copy.
  AdamW(size_t num_parameters, const AdamWConfig& config,
        const KernelTable& kernels = active_kernels(), const Bf16Kernels* bf16_kernels = nullptr);
  // ZeRO-1: moments for `parts` of the arena only (runs in flat order; empty ones allowed).
  AdamW(std::vector<ParameterSpan> parts, const AdamWConfig& config,
        const KernelTable& kernels = active_kernels(), const Bf16Kernels* bf16_kernels = nullptr);

  // One update of the parts with learning rate lr; advances the step count first (so the first
  // update is t = 1). params, grads and params_bf16 are whole arenas. With params_bf16 it also
  // sets params_bf16[i] = bf16(params[i]) for the elements it updates. after_part(i), if given,
  // runs once parts()[i] is updated (a caller can send it to the other ranks meanwhile). `use`
  // applies to the elements it updates only (not the skipped runs, not other ranks' parts).
  void step(float* params, float* grads, double lr, bf16* params_bf16 = nullptr,
            const std::function<void(size_t part)>& after_part = {}, GradientUse use = {});

  const std::vector<ParameterSpan>& parts() const { return parts_; }
  // Runs of the arena (disjoint, in flat order) that step() leaves alone: another optimizer (a
  // device's AdamW) updates them, and their moments here are a copy for checkpoints only.
  void skip(std::vector<ParameterSpan> runs) { skipped_ = std::move(runs); }

  long long steps_taken() const { return t_; }
  void set_steps_taken(long long t) { t_ = t; }  // when resuming
  // Packed: parts()[0]'s moments, then parts()[1]'s, ...
  float* m() { return m_.data(); }
  float* v() { return v_.data(); }
  const float* m() const { return m_.data(); }
  const float* v() const { return v_.data(); }
  size_t size() const { return m_.size(); }  // elements in the parts
  size_t bytes() const { return 2 * m_.size() * sizeof(float); }
  const AdamWConfig& config() const { return config_; }

 private:
  AdamWConfig config_;
  const KernelTable& kernels_;
  const Bf16Kernels* bf16_kernels_;
  std::vector<ParameterSpan> parts_;
  std::vector<ParameterSpan> skipped_;
  AlignedBuffer<float> m_;
  AlignedBuffer<float> v_;
  long long t_ = 0;
};

// sqrt(sum of squares) over a flat gradient buffer, the same for any thread count.
double global_norm(const float* grads, size_t n, const KernelTable& kernels = active_kernels());

// The factor that clips gradients of global norm `norm` to `max_norm`, as
// torch.nn.utils.clip_grad_norm_'s: max_norm / (norm + 1e-6) when max_norm > 0 and that is below 1,
// else 1. AdamW::step applies it (GradientUse::scale).
float clip_factor(double norm, double max_norm);

}  // namespace llmcpu
