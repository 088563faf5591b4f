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
  for (int role : trained_roles(select_trained_pieces(config, options.train))) {
    f.parameters += trained_copy_size(config, role);
  }
  f.activation_floats =
      lora_sizes(options.r, shapes, size_t(B) * T, options.dropout > 0).total();
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
  modules_size_ = n;
  pieces_ = select_trained_pieces(config, options_.train);
  for (int role : trained_roles(pieces_)) {
    copies_.push_back({role, n, trained_copy_size(config, role)});
    n += copies_.back().count;
  }
  params_ = AlignedBuffer<float>(n);
  grads_ = AlignedBuffer<float>(n);
  std::fill_n(params_.data(), n, 0.0f);
  std::fill_n(grads_.data(), n, 0.0f);
}

size_t LoraAdapter::module_of(size_t e) const {
  if (e >= modules_size_) return modules_.size();
  const auto it = std::upper_bound(offsets_.begin(), offsets_.end(), e);
  return size_t(it - offsets_.begin()) - 1;
}

size_t LoraAdapter::copy_offset(int role) const {
  for (const Copy& c : copies_) {
    if (c.role == role) return c.offset;
  }
  throw Error("LoraAdapter: no trained copy of " + std::string(ParameterLayout::name(role)));
}

void LoraAdapter::copy_base(const float* master, const ModelConfig& config) {
  const ParameterLayout layout(config);
  for (const Copy& c : copies_) {
    const int from = c.role == kLmHead && !layout.untied_head() ? kWte : c.role;
    std::copy_n(master + layout.offset(from), c.count, params_.data() + c.offset);
  }
}

std::string LoraAdapter::name_of(size_t e) const {
  const size_t i = module_of(e);
  if (i < modules_.size()) return modules_[i].name;
  for (const TrainedPiece& p : pieces_) {
    const size_t at = copy_offset(p.role) + p.offset;
    if (e >= at && e < at + p.count()) return p.name.substr(0, p.name.rfind('.'));
  }
  for (const Copy& c : copies_) {  // the padding rows of an embedding's copy
    if (e >= c.offset && e < c.offset + c.count) return ParameterLayout::name(c.role);
  }
  return "?";
}

std::vector<ParameterSpan> LoraAdapter::spans() const {
  std::vector<ParameterSpan> out;
  for (size_t i = 0; i < modules_.size(); ++i) {
    out.push_back({offsets_[i], a_size(i) + b_size(i), -1, modules_[i].layer});
  }
  for (const Copy& c : copies_) out.push_back({c.offset, c.count, -1, -1});
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
  for (const Copy& c : copies_) {
    p.tensors.push_back({c.role, params_.data() + c.offset,
                         gradients ? grads_.data() + c.offset : nullptr});
  }
  return p;
}

}  // namespace llmcpu
