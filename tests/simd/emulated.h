// Whether this run of the SIMD tests is under a CPU emulator: tools/test-neon.sh sets
// LLMCPU_TEST_EMULATED=1 for its qemu-aarch64 runs. There the slowest tests leave out their largest
// shapes or take smaller ones that cross the same block boundaries: flash attention's sequences
// over 70 tokens and the attention options' over 150 (T = 130 for 300 where one case is taken),
// 1100 tokens in the fp32 GEMMs (600: still two dW slices) and fewer channels in their thread-count
// test, the bf16 GEMMs' largest shapes, LoRA's 300 rows (37), the scratch tests' largest GEMM and
// the quantized GEMMs' two largest. Emulation is there to run each Arm target's instructions, which
// the smaller shapes do across every block boundary of the drivers (the same C++ the native runs
// check at their largest shapes); those shapes took most of its minutes.
//
// Not here: what the tests check (the suites themselves).
#pragma once

#include <cstdlib>

namespace llmcpu::testing {

inline bool emulated_run() {
  const char* v = std::getenv("LLMCPU_TEST_EMULATED");
  return v && *v && *v != '0';
}

}  // namespace llmcpu::testing
