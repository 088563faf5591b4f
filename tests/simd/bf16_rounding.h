// What the tests of the bf16 storage kernels of the Qwen3 / Gemma ops (per-head RMSNorm, GeGLU)
// share: the bf16 tables to run, the fp32 table each one's element-wise entries come from, the
// bound of one rounding to bf16, and bit-for-bit checks. As test_bf16_llama.cpp derives them:
// with y the fp32 result and b its bound, |y - ref| <= b, the stored bf16(y) errs by at most
// u_b |y| (u_b = 2^-8) where y is normal in bf16, and by at most half the spacing of bf16's
// subnormals (2^-134) below; so |bf16(y) - ref| <= u_b (|ref| + b) + b + 2^-134.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "simd/bf16.h"
#include "tests/simd/bf16_tables.h"
#include "tests/simd/error_bounds.h"

namespace llmcpu::simd_test {

inline constexpr double kBf16U = 0x1p-8;       // bf16's unit roundoff
inline constexpr double kBf16Tiny = 0x1p-134;  // half the spacing of bf16's subnormals

inline std::vector<std::string> all_bf16_tables() {
  std::vector<std::string> r;
  for (std::string_view name : available_bf16_targets()) r.emplace_back(name);
  return r;
}

// The fp32 table whose element-wise kernels a bf16 table shares: the GEMM tables ("avx512bf16",
// "onednn", "neon_bf16") are the best vectorized target's table with other GEMMs.
inline const KernelTable& fp32_table_of(const std::string& bf16_table) {
  return kernels_for_target(has_own_gemm(bf16_table) ? vectorized_targets().front() : bf16_table);
}

inline std::vector<float> widen_bf16(const std::vector<bf16>& v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = bf16_to_float(v[i]);
  return r;
}

inline std::vector<bf16> round_bf16(const std::vector<float>& v) {
  return to_bf16_vector(v.data(), v.size());
}

// The bound of one rounding to bf16 on top of an fp32 bound b (see the top of the file).
inline std::vector<double> plus_bf16_rounding(const std::vector<double>& ref,
                                              const std::vector<double>& b) {
  std::vector<double> r(ref.size());
  for (size_t i = 0; i < r.size(); ++i) {
    r[i] = kBf16U * (std::fabs(ref[i]) + b[i]) + b[i] + kBf16Tiny;
  }
  return r;
}

inline void expect_same_bf16(const std::string& what, const std::vector<bf16>& got,
                             const std::vector<bf16>& ref) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], ref[i]) << what << ": element " << i << " is " << bf16_to_float(got[i])
                              << ", expected " << bf16_to_float(ref[i]);
  }
}

}  // namespace llmcpu::simd_test
