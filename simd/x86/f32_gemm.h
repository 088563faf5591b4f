// fp32 GEMMs on AVX-512 FMA for the dinp and dweight products of a linear layer: the register tile
// and cache blocking of the bf16 GEMMs (bf16_gemm.h) with one fp32 FMA per step where those take a
// bf16 pair. x86 builds only; the AVX-512 libxsmm table (simd/hwy/matmul.cc) runs its backward
// pass on them (its forward stays on libxsmm's blocks, which measured as fast).
// Not here: the portable GEMMs (simd/hwy/gemm-inl.h), libxsmm's blocks (simd/gemm/xsmm.h).
#pragma once

#include <cstddef>

#include "simd/scratch.h"

namespace llmcpu::x86 {

// dinp (N x C) = dout (N x OC) W (OC x C), as in KernelTable::matmul_backward (simd/kernels.h).
// AVX-512F CPUs only.
void f32_matmul_backward_input(float* dinp, const float* dout, const float* weight, size_t N, int C,
                               int OC);
// dweight (OC x C) += dout^T inp. AVX-512F CPUs only.
void f32_matmul_backward_weight(float* dweight, const float* dout, const float* inp, size_t N,
                                int C, int OC);
// Their sizing entries (simd/scratch.h): dinp packs each thread's channel panels of a K slice of
// the weight in that thread's scratch; dweight packs inp's channel panels in the calling thread's
// scratch and each thread a slice of one block of dout's columns in its own.
ScratchUse f32_matmul_backward_input_scratch(size_t N, int C, int OC, int threads);
ScratchUse f32_matmul_backward_weight_scratch(size_t N, int C, int OC);

}  // namespace llmcpu::x86
