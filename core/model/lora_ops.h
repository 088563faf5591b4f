// The elementwise parts of the LoRA passes (core/model/lora_views.h), on N rows of a matmul's
// output of row length ld, whose columns [col0, col0 + cols) a module adapts.
#pragma once

#include <cstddef>

#include "simd/bf16.h"

namespace llmcpu {

// out[n, col0 + j] += scale * t[n, j] (t is (N, cols)); a bf16 out is widened, added to and
// rounded to nearest even.
void add_scaled_columns(float* out, size_t ld, size_t col0, const float* t, size_t cols, size_t N,
                        float scale);
void add_scaled_columns(bf16* out, size_t ld, size_t col0, const float* t, size_t cols, size_t N,
                        float scale);
// g[n, j] = scale * dout[n, col0 + j] (g is (N, cols)).
void gather_scaled_columns(float* g, const float* dout, size_t ld, size_t col0, size_t cols,
                           size_t N, float scale);
// dst[i] += src[i] over N values.
void add_into(float* dst, const float* src, size_t N);

}  // namespace llmcpu
