// What the bf16 tests know of the bf16 tables (simd/bf16.h) beyond their names: which have a GEMM
// of their own, and what one rounding of its sums may cost. Included by the bf16 test files only.
#pragma once

#include <string_view>

namespace llmcpu::simd_test {

// The bf16 tables with a GEMM of their own (AVX512-BF16 dot products, and the attention on them;
// Arm BF16 matrix products, with the portable attention); their other kernels are the best
// vectorized target's. The other tables widen bf16 to their fp32 table's GEMM.
inline bool has_own_gemm(std::string_view table) {
  return table == "avx512bf16" || table == "onednn" || table == "neon_bf16";
}

// The unit roundoffs (u = 2^-24) one rounding of a table's GEMM sums may cost: Arm's BF16
// instructions (BFMMLA, BFDOT; without FEAT_EBF16) round each of their additions to odd, an error
// below one ulp (2u), where round-to-nearest errs by half of one (u). In any order, each of the n
// terms of a sum passes through at most n - 1 additions (adding padding's zeros is exact), so
// gamma(units * n) bounds the sum's error. (The subnormals they flush to zero, each below 2^-126,
// stay under the tests' absolute 1e-30.)
inline double gemm_rounding_units(std::string_view table) {
  return table == "neon_bf16" ? 2.0 : 1.0;
}

}  // namespace llmcpu::simd_test
