#include "core/optim/adamw.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/runtime/numa_memory.h"
#include "simd/error.h"

namespace llmcpu {

AdamW::AdamW(size_t n, const AdamWConfig& config, const KernelTable& kernels,
             const Bf16Kernels* bf16_kernels)
    : AdamW(std::vector<ParameterSpan>{{0, n, -1, -1}}, config, kernels, bf16_kernels) {}

AdamW::AdamW(std::vector<ParameterSpan> parts, const AdamWConfig& config,
             const KernelTable& kernels, const Bf16Kernels* bf16_kernels)
    : config_(config),
      kernels_(kernels),
      bf16_kernels_(bf16_kernels),
      parts_(std::move(parts)),
      m_(packed_size(parts_)),
      v_(m_.size()) {
  first_touch_zero(m_.data(), m_.size());  // AdamW kernel's partition: pages on its threads' nodes
  first_touch_zero(v_.data(), v_.size());
}

void AdamW::step(float* params, float* grads, double lr, bf16* params_bf16,
                 const std::function<void(size_t part)>& after_part, GradientUse use) {
  if (params_bf16 && !bf16_kernels_) {
    throw Error("AdamW::step: a bf16 weight copy needs an optimizer built with bf16 kernels");
  }
  ++t_;
  const AdamWStep s{lr, config_.beta1, config_.beta2, config_.eps, config_.weight_decay, t_,
                    use.scale, use.clear};
  // Elements [begin, end) of the arena, whose moments start at `at` in the packed arrays.
  auto update = [&](size_t begin, size_t end, size_t at) {
    if (end <= begin) return;
    const size_t n = end - begin;
    if (params_bf16) {
      bf16_kernels_->adamw_update(params + begin, params_bf16 + begin, m_.data() + at,
                                  v_.data() + at, grads + begin, n, s);
    } else {
      kernels_.adamw_update(params + begin, m_.data() + at, v_.data() + at, grads + begin, n, s);
    }
  };
  size_t at = 0;  // the part's place in the packed moments
  for (size_t i = 0; i < parts_.size(); ++i) {
    const size_t offset = parts_[i].offset, end = offset + parts_[i].count;
    size_t from = offset;  // the part minus the skipped runs, in order
    for (const ParameterSpan& r : skipped_) {
      const size_t r_end = r.offset + r.count;
      if (r_end <= from || r.offset >= end) continue;
      update(from, std::max(from, r.offset), at + (from - offset));
      from = std::min(end, r_end);
    }
    update(from, end, at + (from - offset));
    at += parts_[i].count;
    if (after_part) after_part(i);
  }
}

double global_norm(const float* grads, size_t n, const KernelTable& kernels) {
  return std::sqrt(kernels.sum_squares(grads, n));
}

float clip_factor(double norm, double max_norm) {
  if (max_norm <= 0) return 1.0f;
  const double factor = max_norm / (norm + 1e-6);
  return factor >= 1.0 ? 1.0f : static_cast<float>(factor);
}

}  // namespace llmcpu
