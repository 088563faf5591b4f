#include "core/optim/adamw.h"

#include <algorithm>
#include <cmath>

#include "core/runtime/numa_memory.h"
#include "simd/error.h"

namespace llmcpu {

AdamW::AdamW(size_t n, const AdamWConfig& config, const KernelTable& kernels,
             const Bf16Kernels* bf16_kernels)
    : config_(config), kernels_(kernels), bf16_kernels_(bf16_kernels), m_(n), v_(n) {
  first_touch_zero(m_.data(), n);  // AdamW kernel's partition: pages land on its threads' nodes
  first_touch_zero(v_.data(), n);
}

void AdamW::step(float* params, const float* grads, double lr, bf16* params_bf16) {
  if (params_bf16 && !bf16_kernels_) {
    throw Error("AdamW::step: a bf16 weight copy needs an optimizer built with bf16 kernels");
  }
  ++t_;
  const AdamWStep s{lr, config_.beta1, config_.beta2, config_.eps, config_.weight_decay, t_};
  if (params_bf16) {
    bf16_kernels_->adamw_update(params, params_bf16, m_.data(), v_.data(), grads, m_.size(), s);
  } else {
    kernels_.adamw_update(params, m_.data(), v_.data(), grads, m_.size(), s);
  }
}

double global_norm(const float* grads, size_t n, const KernelTable& kernels) {
  return std::sqrt(kernels.sum_squares(grads, n));
}

float clip_to_norm(float* grads, size_t n, double norm, double max_norm, const KernelTable& kernels) {
  if (max_norm <= 0) return 1.0f;
  const double factor = max_norm / (norm + 1e-6);
  if (factor >= 1.0) return 1.0f;
  kernels.scale(grads, static_cast<float>(factor), n);
  return static_cast<float>(factor);
}

}  // namespace llmcpu
