#include "core/train/non_finite.h"

#include <cmath>

namespace llmcpu {

std::string number_text(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return std::to_string(x);
}

std::string non_finite_message(const float* flat, const ParameterLayout& layout, const char* what) {
  const NonFinite bad = find_non_finite(flat, layout);
  if (!bad) return "";
  return std::string("the ") + what + " hold a non-finite value (" + bad.describe() + ", element " +
         std::to_string(bad.index) + " = " + number_text(bad.value) + ")";
}

std::string non_finite_packed(const float* p, size_t n, const char* what, int rank) {
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(p[i])) {
      return std::string("the ") + what + " of rank " + std::to_string(rank) +
             " hold a non-finite value (element " + std::to_string(i) +
             " of its part = " + number_text(p[i]) + ")";
    }
  }
  return "";
}

}  // namespace llmcpu
