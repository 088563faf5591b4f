// AMX on this CPU: whether it has bf16 tiles, and the Linux permission without which the first tile
// instruction faults. Used by the oneDNN table's choice (bf16_dispatch.cpp) and the roofs
// (roofs.cpp). False on other architectures and systems.
#pragma once

namespace llmcpu {

// CPUID leaf 7: AMX-TILE (EDX bit 24) and AMX-BF16 (EDX bit 22). Read from CPUID directly: clang
// 14's __builtin_cpu_supports knows no AMX names.
bool cpu_has_amx_bf16();

// Asks Linux for the AMX tile-data state (arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA)). Linux grants
// it to the whole process, so every thread that runs tile kernels has it. Returns whether it is
// granted; false on CPUs without AMX.
bool request_amx_permission();

}  // namespace llmcpu
