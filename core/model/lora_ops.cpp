#include "core/model/lora_ops.h"

#include <algorithm>

#include "core/model/lora_views.h"

namespace llmcpu {

void add_scaled_columns(float* out, size_t ld, size_t col0, const float* t, size_t cols, size_t N,
                        float scale) {
#pragma omp parallel for schedule(static)
  for (size_t n = 0; n < N; ++n) {
    float* o = out + n * ld + col0;
    const float* s = t + n * cols;
    for (size_t j = 0; j < cols; ++j) o[j] += scale * s[j];
  }
}

void add_scaled_columns(bf16* out, size_t ld, size_t col0, const float* t, size_t cols, size_t N,
                        float scale) {
#pragma omp parallel for schedule(static)
  for (size_t n = 0; n < N; ++n) {
    bf16* o = out + n * ld + col0;
    const float* s = t + n * cols;
    for (size_t j = 0; j < cols; ++j) o[j] = float_to_bf16(bf16_to_float(o[j]) + scale * s[j]);
  }
}

void gather_scaled_columns(float* g, const float* dout, size_t ld, size_t col0, size_t cols,
                           size_t N, float scale) {
#pragma omp parallel for schedule(static)
  for (size_t n = 0; n < N; ++n) {
    const float* d = dout + n * ld + col0;
    float* o = g + n * cols;
    for (size_t j = 0; j < cols; ++j) o[j] = scale * d[j];
  }
}

size_t lora_activation_floats(int r, std::span<const LoraModuleShape> modules, size_t BT) {
  size_t rows = 0, in = 0;
  for (const LoraModuleShape& m : modules) rows = std::max(rows, m.rows), in = std::max(in, m.in);
  // u per module; t and g share; gB; dx.
  return BT * (size_t(r) * modules.size() + rows + size_t(r) + in);
}

void add_into(float* dst, const float* src, size_t N) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < N; ++i) dst[i] += src[i];
}

}  // namespace llmcpu
