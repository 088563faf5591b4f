// The elementwise parts of the LoRA passes (core/model/lora_views.h), on N rows of a matmul's
// output of row length ld, whose columns [col0, col0 + cols) a module adapts.
#pragma once

#include <cstddef>
#include <cstdint>

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

// LoRA's dropout on an adapter's input (nn.Dropout in training): out[i] = in[i] m_i / (1 - p), with
// m_i = 0 with probability p, else 1, drawn from `seed` and i alone (a counter-based generator:
// the same mask again for the backward pass, on any thread count). A bf16 out is rounded.
bool dropout_keeps(uint64_t seed, size_t i, float p);
void dropout_apply(float* out, const float* in, size_t N, float p, uint64_t seed);
void dropout_apply(bf16* out, const bf16* in, size_t N, float p, uint64_t seed);
// Its backward in place: d[i] *= m_i / (1 - p), the same mask.
void dropout_backward(float* d, size_t N, float p, uint64_t seed);

}  // namespace llmcpu
