// What the bf16 tests know of the bf16 tables (simd/bf16.h) beyond their names: which have a GEMM
// of their own. Included by the bf16 test files only.
#pragma once

#include <string_view>

namespace llmcpu::simd_test {

// The bf16 tables with a GEMM of their own (AVX512-BF16 dot products, and the attention on them);
// their other kernels are the best vectorized target's. The other tables widen bf16 to their fp32
// table's GEMM.
inline bool has_own_gemm(std::string_view table) {
  return table == "avx512bf16" || table == "onednn";
}

}  // namespace llmcpu::simd_test
