// The instruction sets llmcpu's kernels may use: all that this CPU has, or fewer where the
// environment variable LLMCPU_MAX_ISA caps them (x86-64):
//   avx2        no AVX-512: the Highway targets, libxsmm's and oneDNN's code, the roofs and the
//               bf16 tables of an AVX2-only CPU (most laptops and desktops)
//   avx512      AVX-512, without AVX512-BF16 dot products and AMX (Skylake-SP to Ice Lake)
//   avx512bf16  everything but AMX
// An AVX-512 machine then offers, runs and tests exactly what the capped CPU would, at native
// speed (emulation, `qemu-x86_64 -cpu Haswell-v4`, checks the instructions themselves, slowly). A
// cap only takes away: above what this CPU has, or on a CPU that is not x86-64, it changes
// nothing. Read once, at the first kernel choice; a bad value is refused with the valid ones.
// Not here: the choice of tables (dispatch.cpp, bf16_dispatch.cpp), which consults this.
#pragma once

namespace llmcpu {

enum class IsaCap { kAvx2, kAvx512, kAvx512Bf16, kNone };

// The cap LLMCPU_MAX_ISA sets (kNone without it). On first use it also keeps Highway's dispatch to
// targets within the cap. Throws UsageError for a value it does not know.
IsaCap isa_cap();

// Whether the cap lets kernels use `level` (kNone: AMX, which only an uncapped run uses).
inline bool isa_allows(IsaCap level) { return isa_cap() >= level; }

// "" without a cap, else "LLMCPU_MAX_ISA=avx2" and so on, for messages and `llmcpu version`.
const char* isa_cap_setting();

}  // namespace llmcpu
