#include "core/lora/merge.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "simd/error.h"

namespace llmcpu {

namespace {

// PEFT's scaling in double: lora_alpha / r, or lora_alpha / sqrt(r) (LoraOptions::scale() is the
// same rounded to float, which the passes use).
double merge_scaling(const LoraOptions& o) {
  const double a = o.lora_alpha();
  return o.rslora ? a / std::sqrt(double(o.r)) : a / double(o.r);
}

// Module m's rows of its weight in the flat arena: W (rows, in), row-major.
float* module_rows(float* params, const ParameterLayout& layout, const ModelConfig& config,
                   const LoraModule& m) {
  const size_t slice = layout.layer_size(m.role);  // one layer's (out, in) weight
  if (m.layer < 0 || m.layer >= config.num_layers || m.in == 0 || slice % m.in != 0 ||
      (m.row0 + m.rows) * m.in > slice) {
    throw ShapeError("LoRA module " + m.name + " (rows " + std::to_string(m.row0) + ".." +
                     std::to_string(m.row0 + m.rows) + " of " + ParameterLayout::name(m.role) +
                     ", in " + std::to_string(m.in) + ", layer " + std::to_string(m.layer) +
                     ") does not fit the model's " + layout.shape(m.role));
  }
  return params + layout.offset(m.role) + size_t(m.layer) * slice + m.row0 * m.in;
}

// W (rows, in) += scaling * B A, B (rows, r), A (r, in): each row's sums over k in double (k in
// order), added to W in double and rounded to fp32 once.
void merge_module(float* W, const float* A, const float* B, size_t rows, size_t in, size_t r,
                  double scaling) {
#pragma omp parallel
  {
    std::vector<double> acc(in);
#pragma omp for schedule(static)
    for (size_t i = 0; i < rows; ++i) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (size_t k = 0; k < r; ++k) {
        const double b = B[i * r + k];
        const float* a = A + k * in;
        for (size_t j = 0; j < in; ++j) acc[j] += b * double(a[j]);
      }
      float* w = W + i * in;
      for (size_t j = 0; j < in; ++j) w[j] = float(double(w[j]) + acc[j] * scaling);
    }
  }
}

}  // namespace

void check_mergeable(const ModelConfig& config, const std::vector<TrainedPiece>& pieces) {
  if (ParameterLayout(config).untied_head()) return;
  for (const TrainedPiece& p : pieces) {
    if (p.role != kWte && p.role != kLmHead) continue;
    throw UsageError("the adapter trains " + p.name.substr(0, p.name.rfind('.')) +
                     " apart from the head tied to the embedding (PEFT's modules_to_save), so "
                     "the merged model would need an untied head, which this model's config "
                     "does not have; keep the adapter folder instead of merging it");
  }
}

void merge_adapter(float* params, const ParameterLayout& layout, const ModelConfig& config,
                   const LoraAdapter& adapter) {
  check_mergeable(config, adapter.pieces());
  for (const LoraAdapter::Copy& c : adapter.copies()) {
    std::copy_n(adapter.params() + c.offset, c.count, params + layout.offset(c.role));
  }
  const double scaling = merge_scaling(adapter.options());
  const size_t r = size_t(adapter.options().r);
  for (size_t i = 0; i < adapter.modules().size(); ++i) {
    const LoraModule& m = adapter.modules()[i];
    float* W = module_rows(params, layout, config, m);
    merge_module(W, adapter.params() + adapter.a_offset(i), adapter.params() + adapter.b_offset(i),
                 m.rows, m.in, r, scaling);
  }
}

}  // namespace llmcpu
