#include "core/lora/adapter.h"

#include <algorithm>
#include <cmath>

#include "core/util/rng.h"
#include "simd/error.h"

namespace llmcpu {

float LoraOptions::scale() const {
  const double a = lora_alpha();
  return float(rslora ? a / std::sqrt(double(r)) : a / double(r));
}

std::vector<std::string> parse_lora_targets(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    if (comma > start) out.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

LoraFootprint lora_footprint(const ModelConfig& config, const LoraOptions& options, int B, int T) {
  LoraFootprint f;
  std::vector<LoraModuleShape> shapes;
  for (const LoraModule& m : select_lora_modules(config, options.targets)) {
    f.parameters += size_t(options.r) * (m.in + m.rows);
    shapes.push_back({m.rows, m.in});
  }
  f.activation_floats =
      lora_activation_floats(options.r, shapes, size_t(B) * T, options.dropout > 0);
  return f;
}

LoraAdapter::LoraAdapter(const ModelConfig& config, const LoraOptions& options)
    : options_(options) {
  lay_out(config);
}

LoraAdapter::LoraAdapter(const ModelConfig& config, const LoraOptions& options, uint64_t seed)
    : LoraAdapter(config, options) {
  Rng rng(seed);
  for (size_t i = 0; i < modules_.size(); ++i) {
    const double bound = 1.0 / std::sqrt(double(modules_[i].in));
    float* a = params_.data() + a_offset(i);
    for (size_t j = 0; j < a_size(i); ++j) a[j] = float(bound * (2.0 * rng.uniform() - 1.0));
  }
}

void LoraAdapter::lay_out(const ModelConfig& config) {
  if (options_.r <= 0) throw UsageError("--lora: the rank must be positive");
  modules_ = select_lora_modules(config, options_.targets);
  size_t n = 0;
  for (const LoraModule& m : modules_) {
    offsets_.push_back(n);
    n += size_t(options_.r) * (m.in + m.rows);
  }
  params_ = AlignedBuffer<float>(n);
  grads_ = AlignedBuffer<float>(n);
  std::fill_n(params_.data(), n, 0.0f);
  std::fill_n(grads_.data(), n, 0.0f);
}

size_t LoraAdapter::module_of(size_t e) const {
  const auto it = std::upper_bound(offsets_.begin(), offsets_.end(), e);
  return size_t(it - offsets_.begin()) - 1;
}

std::vector<ParameterSpan> LoraAdapter::spans() const {
  std::vector<ParameterSpan> out;
  for (size_t i = 0; i < modules_.size(); ++i) {
    out.push_back({offsets_[i], a_size(i) + b_size(i), -1, modules_[i].layer});
  }
  return out;
}

LoraParams LoraAdapter::params_for_model(bool gradients) {
  LoraParams p;
  p.r = options_.r;
  p.scale = options_.scale();
  p.dropout = float(options_.dropout);
  for (size_t i = 0; i < modules_.size(); ++i) {
    const LoraModule& m = modules_[i];
    p.modules.push_back({m.layer, m.role, m.row0, m.rows, m.in, params_.data() + a_offset(i),
                         params_.data() + b_offset(i),
                         gradients ? grads_.data() + a_offset(i) : nullptr,
                         gradients ? grads_.data() + b_offset(i) : nullptr});
  }
  return p;
}

}  // namespace llmcpu
