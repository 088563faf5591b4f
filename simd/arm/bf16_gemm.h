// The bf16 GEMMs on Arm's BF16 matrix instructions (FEAT_BF16: BFMMLA, a 2x4 by 4x2 bf16 matrix
// product added to four fp32 sums, eight multiply-adds per lane pair). aarch64 builds only; the
// entries are used when the CPU reports BF16 (getauxval's HWCAP2_BF16: Graviton 3/4, Neoverse
// V1/V2/N2, Apple M2 and later), chosen in simd/bf16_dispatch.cpp.
// Not here: flash attention on BFDOT (the "neon_bf16" table keeps the portable widening one), SVE's
// BFMMLA (the same instruction on wider vectors: no SVE machine with BF16 was at hand to measure),
// the portable bf16 GEMM (simd/hwy/bf16.cc).
#pragma once

#include <cstddef>

#include "simd/bf16.h"

namespace llmcpu::arm {

// Whether this CPU runs the BF16 instructions (BFDOT, BFMMLA).
bool has_bf16();

// Bf16Kernels::matmul_forward, matmul_forward_bf16 and matmul_backward (simd/bf16.h), same
// contracts: fp32 sums of exact bf16 products, dout rounded to bf16 (nearest, ties to even) where
// it enters a product, dbias summed from the fp32 dout.
void bf16_matmul_forward(float* out, const bf16* inp, const bf16* weight, const float* bias,
                         size_t N, int C, int OC);
void bf16_matmul_forward_bf16(bf16* out, const bf16* inp, const bf16* weight, const float* bias,
                              size_t N, int C, int OC);
void bf16_matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const bf16* inp, const bf16* weight, size_t N, int C, int OC);
// Their sizing entries (Bf16Kernels::matmul_*_scratch): both operands of each product are packed
// per call into the calling thread's scratch, the whole weight among them (C x OC bf16 values).
ScratchUse bf16_matmul_forward_scratch(size_t N, int C, int OC, bool bias, int threads);
ScratchUse bf16_matmul_backward_scratch(size_t N, int C, int OC, bool dinp, bool dbias,
                                        int threads);

}  // namespace llmcpu::arm
