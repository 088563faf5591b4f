// Flash attention of the bf16 path on AVX512-BF16 dot products (VDPBF16PS): Bf16Kernels'
// flash_attention_forward and _backward (simd/bf16.h), the same contracts, with every block product
// on bf16 operands and fp32 accumulation. The operands that are not bf16 already are rounded to
// bf16 where they enter a product: P (forward and backward), dS and dO (backward); the softmax, the
// row log-sum-exp, D_t = dO_t . O_t and every accumulator stay fp32. x86 builds only; the entries
// are installed when the CPU reports AVX512-BF16 (simd/bf16_dispatch.cpp).
// Not here: the widening path that the portable tables keep (simd/hwy/flash_attention.cc).
#pragma once

#include <cstddef>

#include "simd/bf16.h"

namespace llmcpu::x86 {

void bf16_flash_attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH,
                                  int NKV, int D, const AttentionOptions& opt);
void bf16_flash_attention_backward(float* dqkv, const float* dout, const bf16* out, const bf16* qkv,
                                   const float* lse, int B, int T, int NH, int NKV, int D,
                                   const AttentionOptions& opt);
// Their sizing entries: every thread of the team asks ScratchSlot::kAttention once per call.
ScratchUse bf16_flash_attention_forward_scratch(int B, int T, int NH, int NKV, int D, int threads);
ScratchUse bf16_flash_attention_backward_scratch(int B, int T, int NH, int NKV, int D, int threads);

// The exp the kernels use (n values; x <= 88) and their tanh (the soft-cap), so that a test can
// hold them to an ulp bound.
void bf16_attention_exp(float* out, const float* in, size_t n);
void bf16_attention_tanh(float* out, const float* in, size_t n);

}  // namespace llmcpu::x86
