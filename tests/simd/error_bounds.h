// Shared pieces of the SIMD kernel tests: the targets to test, random inputs, and error bounds
// derived from fp32 rounding instead of picked by hand.
//
// Model: every fp32 operation (+, -, *, /, sqrt, and the fused multiply-add) is correctly rounded,
// fl(x op y) = (x op y)(1 + d) with |d| <= u = 2^-24. A sum or dot product of n terms evaluated in
// any order and grouping (lanes, blocks, threads), with or without FMA, then satisfies
//   |fl(sum) - sum| <= gamma(n) * sum |terms|,   gamma(n) = n u / (1 - n u)
// (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., Lemma 3.1 and eq. 3.5). The
// references are the scalar kernels of simd/scalar/ instantiated in double, so their own error
// (2^-53 relative) is negligible and a bound only has to cover the fp32 kernel under test.
// Highway's contrib/math functions are tested by Highway to <= 1 ulp (Exp, Log) and <= 4 ulp
// (Tanh); one ulp of y is at most 2u|y|.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "simd/kernels.h"

namespace llmcpu::simd_test {

inline constexpr double kU = 0x1p-24;  // fp32 unit roundoff
inline double gamma(double n) { return n * kU / (1.0 - n * kU); }
inline constexpr double kExpUlps = 1, kLogUlps = 1;
inline constexpr double kUlp = 2 * kU;  // one ulp of y, relative to |y|

// Every vectorized table this CPU runs (all names but "scalar"), e.g. avx512, avx512+xsmm, avx2.
inline std::vector<std::string> vectorized_targets() {
  std::vector<std::string> r;
  for (std::string_view name : available_targets()) {
    if (name != "scalar") r.emplace_back(name);
  }
  return r;
}

// gtest parameter names may hold only letters, digits and '_'.
inline std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s) {
    if (c == '+') c = '_';
  }
  return s;
}

class Random {
 public:
  explicit Random(unsigned seed) : rng_(seed) {}
  std::vector<float> normal(size_t n, double mean = 0.0, double sd = 1.0) {
    std::normal_distribution<double> dist(mean, sd);
    std::vector<float> v(n);
    for (float& x : v) x = float(dist(rng_));
    return v;
  }
  std::vector<float> uniform(size_t n, double lo, double hi) {
    std::uniform_real_distribution<double> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = float(dist(rng_));
    return v;
  }
  std::vector<int> tokens(size_t n, int below) {
    std::uniform_int_distribution<int> dist(0, below - 1);
    std::vector<int> v(n);
    for (int& x : v) x = dist(rng_);
    return v;
  }

 private:
  std::mt19937_64 rng_;
};

inline std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Expects |got[i] - ref[i]| <= bound[i] everywhere; on failure names the worst element.
inline void expect_within(const std::string& what, const std::vector<float>& got,
                          const std::vector<double>& ref, const std::vector<double>& bound) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  ASSERT_EQ(got.size(), bound.size()) << what;
  size_t worst = 0, failures = 0;
  double worst_ratio = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - ref[i]);
    const double ratio = err / bound[i];
    if (!(err <= bound[i])) ++failures;  // also catches NaN
    if (!(ratio <= worst_ratio)) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  EXPECT_EQ(failures, 0u) << what << ": worst element " << worst << " got " << got[worst]
                          << ", reference " << ref[worst] << ", |error| "
                          << std::fabs(double(got[worst]) - ref[worst]) << " > bound "
                          << bound[worst];
}

// Bit-for-bit equality, for kernels that perform exactly the reference's operations in its order.
inline void expect_identical(const std::string& what, const std::vector<float>& got,
                             const std::vector<float>& ref) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(got[i] == ref[i] || (std::isnan(got[i]) && std::isnan(ref[i])))) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", reference " << ref[i];
      return;
    }
  }
}

}  // namespace llmcpu::simd_test
