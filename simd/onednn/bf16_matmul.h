// bf16 GEMMs through oneDNN's matmul primitive (Debian libdnnl-dev): the path for CPUs with AMX,
// where oneDNN runs its AMX tile kernels (and asks the kernel for the AMX tile-data permission,
// arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA), in the threads that use tiles); elsewhere it runs its
// AVX512-BF16 or AVX2 kernels. Built when oneDNN is found; the table is offered as "onednn".
// Not here: the choice between this and the own AVX512-BF16 GEMM (simd/bf16_dispatch.cpp).
#pragma once

#include <cstddef>

#include "simd/bf16.h"

namespace llmcpu::onednn {

// Whether the CPU has AMX tiles with bf16 (CPUID leaf 7: AMX-TILE and AMX-BF16).
bool cpu_has_amx_bf16();

// Asks Linux for the AMX tile-data state (arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA)), without which
// the first tile instruction faults. Linux grants it to the whole process, so the threads oneDNN
// runs its tile kernels on have it too (oneDNN also asks before it uses tiles). Returns whether it
// is granted; false on other systems and on CPUs without AMX.
bool request_amx_permission();

// Bf16Kernels::matmul_forward and matmul_backward (simd/bf16.h), same contracts. Primitives are
// created once per shape and kept.
void bf16_matmul_forward(float* out, const bf16* inp, const bf16* weight, const float* bias,
                         size_t N, int C, int OC);
void bf16_matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const bf16* inp, const bf16* weight, size_t N, int C, int OC);

}  // namespace llmcpu::onednn
