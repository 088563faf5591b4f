// bf16 GEMMs through oneDNN's matmul primitive (Debian libdnnl-dev): the path for CPUs with AMX,
// where oneDNN runs its AMX tile kernels (and asks the kernel for the AMX tile-data permission,
// arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA), in the threads that use tiles); elsewhere it runs its
// AVX512-BF16 or AVX2 kernels. Built when oneDNN is found; the table is offered as "onednn".
// Not here: the choice between this and the own AVX512-BF16 GEMM (simd/bf16_dispatch.cpp).
#pragma once

#include <cstddef>

#include "simd/bf16.h"

namespace llmcpu::onednn {

// Whether this oneDNN makes the three bf16 matmuls on this CPU: asked once, by making a small
// primitive of each kind. oneDNN 2.x has bf16 matmuls only on AVX-512 (native AVX512-BF16 or AMX,
// or emulated on AVX512-BW); on an AVX2-only CPU it cannot make them, and the "onednn" table is
// then not offered. Never throws.
bool bf16_available();

// Bf16Kernels::matmul_forward and matmul_backward (simd/bf16.h), same contracts. Primitives are
// created once per shape and kept.
void bf16_matmul_forward(float* out, const bf16* inp, const bf16* weight, const float* bias,
                         size_t N, int C, int OC);
void bf16_matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const bf16* inp, const bf16* weight, size_t N, int C, int OC);
// Their sizing entries (Bf16Kernels::matmul_*_scratch): dout rounded to bf16 in the calling
// thread's scratch, and oneDNN's own scratchpad for the primitive of that shape (made here if it
// is not made yet, as the first call would).
ScratchUse bf16_matmul_forward_scratch(size_t N, int C, int OC, bool bias, int threads);
ScratchUse bf16_matmul_backward_scratch(size_t N, int C, int OC, bool dinp, bool dbias,
                                        int threads);

}  // namespace llmcpu::onednn
