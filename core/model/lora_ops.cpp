#include "core/model/lora_ops.h"

#include <algorithm>

#include "core/model/lora_views.h"

namespace llmcpu {

void transpose_into(float* bt, const float* b, size_t rows, size_t r) {
  for (size_t c = 0; c < rows; ++c) {
    for (size_t k = 0; k < r; ++k) bt[k * rows + c] = b[c * r + k];
  }
}

LoraViews lora_views_of(const std::vector<LoraModuleView>& modules, int num_layers, int r,
                        float scale) {
  LoraViews v;
  v.r = r, v.scale = scale;
  v.sites.assign(size_t(num_layers), {});
  for (const LoraModuleView& m : modules) {
    auto& range = v.sites[size_t(m.p.layer)][size_t(lora_site_of(m.p.role))];
    if (range[0] == range[1]) range = {v.modules.size(), v.modules.size()};
    ++range[1];
    v.modules.push_back(m);
  }
  return v;
}

LoraSizes lora_sizes(int r, std::span<const LoraModuleShape> modules, size_t BT, bool dropout) {
  LoraSizes s;
  size_t in = 0;
  for (const LoraModuleShape& m : modules) {
    s.u += BT * size_t(r);
    in = std::max(in, m.in);
    if (!dropout) s.As += size_t(r) * m.in;
  }
  const size_t stack = dropout ? 1 : size_t(kLoraMaxStack);
  s.gB = BT * size_t(r) * stack;
  if (dropout) s.dx = s.xd = BT * in;
  else s.dAs = stack * size_t(r) * in;
  return s;
}

namespace {

// SplitMix64's finaliser: a well-mixed 64-bit value of (seed, i).
uint64_t mix(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

bool dropout_keeps(uint64_t seed, size_t i, float p) {
  // A uniform in [0, 1) from the top 24 bits, exact in fp32; kept with probability 1 - p.
  return float(mix(seed, i) >> 40) * 0x1.0p-24f >= p;
}

void dropout_apply(float* out, const float* in, size_t N, float p, uint64_t seed) {
  const float scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < N; ++i) out[i] = dropout_keeps(seed, i, p) ? in[i] * scale : 0.0f;
}

void dropout_apply(bf16* out, const bf16* in, size_t N, float p, uint64_t seed) {
  const float scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < N; ++i) {
    out[i] = float_to_bf16(dropout_keeps(seed, i, p) ? bf16_to_float(in[i]) * scale : 0.0f);
  }
}

void dropout_backward(float* d, size_t N, float p, uint64_t seed) {
  const float scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < N; ++i) d[i] = dropout_keeps(seed, i, p) ? d[i] * scale : 0.0f;
}

void add_into(float* dst, const float* src, size_t N) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < N; ++i) dst[i] += src[i];
}

}  // namespace llmcpu
