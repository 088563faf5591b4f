#pragma once

#include <cstddef>
#include <cstdint>

#include "simd/bf16.h"

namespace llmcpu {

// The elementwise parts of the LoRA passes (core/model/lora_views.h); the products are the kernel
// tables' (simd/kernels.h's lora_* entries and GEMMs).
// B^T (r, rows) of B (rows, r): what the forward's rank update reads.
void transpose_into(float* bt, const float* b, size_t rows, size_t r);
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
