#include "core/model/rope.h"

#include <cmath>
#include <numbers>

#include "simd/error.h"

namespace llmcpu {

void validate(const RopeConfig& c, const std::string& source) {
  const auto fail = [&](const std::string& what) {
    throw ShapeError(source + ": rotary embedding: " + what);
  };
  if (c.head_dim <= 0 || c.head_dim % 2 != 0) {
    fail("head_dim " + std::to_string(c.head_dim) + " must be positive and even");
  }
  if (!(c.theta > 0) || !std::isfinite(c.theta)) fail("rope_theta must be a positive number");
  if (c.type == RopeType::kDefault) return;
  if (!(c.factor >= 1) || !std::isfinite(c.factor)) {
    fail("rope_scaling.factor must be a number >= 1");
  }
  if (c.type != RopeType::kLlama3) return;
  if (!(c.low_freq_factor > 0) || !(c.high_freq_factor > c.low_freq_factor) ||
      !std::isfinite(c.high_freq_factor)) {
    fail("rope_scaling needs 0 < low_freq_factor < high_freq_factor");
  }
  if (c.original_max_position_embeddings <= 0) {
    fail("rope_scaling.original_max_position_embeddings must be positive");
  }
}

std::vector<double> rope_inverse_frequencies(const RopeConfig& c) {
  validate(c, "rope");
  const int half = c.head_dim / 2;
  std::vector<double> f(static_cast<size_t>(half));
  for (int j = 0; j < half; ++j) f[j] = 1.0 / std::pow(c.theta, 2.0 * j / c.head_dim);
  if (c.type == RopeType::kLinear) {
    for (double& x : f) x /= c.factor;
  } else if (c.type == RopeType::kLlama3) {
    const double context = c.original_max_position_embeddings;
    const double low_wavelength = context / c.low_freq_factor;
    const double high_wavelength = context / c.high_freq_factor;
    for (double& x : f) {
      const double wavelength = 2 * std::numbers::pi / x;
      if (wavelength < high_wavelength) continue;  // high frequencies: as they are
      if (wavelength > low_wavelength) {           // low frequencies: divided by factor
        x /= c.factor;
        continue;
      }
      const double smooth =
          (context / wavelength - c.low_freq_factor) / (c.high_freq_factor - c.low_freq_factor);
      x = (1 - smooth) * x / c.factor + smooth * x;
    }
  }
  return f;
}

void rope_tables(const RopeConfig& c, int positions, std::vector<float>& cos,
                 std::vector<float>& sin) {
  const std::vector<double> f = rope_inverse_frequencies(c);
  const size_t half = f.size();
  cos.resize(static_cast<size_t>(positions) * half);
  sin.resize(cos.size());
  for (int p = 0; p < positions; ++p) {
    for (size_t j = 0; j < half; ++j) {
      const double angle = p * f[j];
      cos[p * half + j] = static_cast<float>(std::cos(angle));
      sin[p * half + j] = static_cast<float>(std::sin(angle));
    }
  }
}

}  // namespace llmcpu
