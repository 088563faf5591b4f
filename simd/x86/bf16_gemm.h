// The bf16 GEMMs on AVX512-BF16 dot products (VDPBF16PS: two bf16 products summed into each fp32
// lane per instruction, twice the work of an fp32 FMA). x86 builds only; the entries are used when
// the CPU reports AVX512-BF16 (simd/bf16_dispatch.cpp).
// Not here: AMX tiles (not written: no CPU with AMX was at hand to test them), the portable bf16
// GEMM (simd/hwy/bf16.cc).
#pragma once

#include <cstddef>

#include "simd/bf16.h"

namespace llmcpu::x86 {

// Whether this CPU runs AVX512F/BW/VL with AVX512-BF16.
bool has_avx512_bf16();

// Bf16Kernels::matmul_forward and matmul_backward (simd/bf16.h), same contracts.
void bf16_matmul_forward(float* out, const bf16* inp, const bf16* weight, const float* bias,
                         size_t N, int C, int OC);
// Bf16Kernels::matmul_forward_bf16: the forward's fp32 sums rounded once in the tile's epilogue.
void bf16_matmul_forward_bf16(bf16* out, const bf16* inp, const bf16* weight, const float* bias,
                              size_t N, int C, int OC);
void bf16_matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const bf16* inp, const bf16* weight, size_t N, int C, int OC);
// Their sizing entries (Bf16Kernels::matmul_*_scratch): the operands are packed per call into the
// calling thread's scratch, the lm_head's whole weight among them (C x Vp bf16 for dinp).
ScratchUse bf16_matmul_forward_scratch(size_t N, int C, int OC, bool bias, int threads);
ScratchUse bf16_matmul_backward_scratch(size_t N, int C, int OC, bool dinp, bool dbias,
                                        int threads);

}  // namespace llmcpu::x86
