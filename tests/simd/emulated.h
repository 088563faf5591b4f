// Whether this run of the SIMD tests is under a CPU emulator: tools/test-neon.sh sets
// LLMCPU_TEST_EMULATED=1 for its qemu-aarch64 runs. There the ragged-shape tests leave out their
// largest shapes (a sequence of 513 or 1024 tokens, over 130 in flash attention's, a GEMM of 1100 x
// 1030 x 70, the quantized GEMMs' two largest): emulation is there
// to run each Arm target's instructions, which the smaller shapes already do across every block
// boundary of the drivers (the same C++ the native runs check at their largest shapes), and those
// shapes took most of its minutes.
// Not here: what the tests check (the suites themselves).
#pragma once

#include <cstdlib>

namespace llmcpu::testing {

inline bool emulated_run() {
  const char* v = std::getenv("LLMCPU_TEST_EMULATED");
  return v && *v && *v != '0';
}

}  // namespace llmcpu::testing
